/* Non-tensor values: sequences, maps and optionals, and tensors owned by them.
 *
 * A value crosses the model ABI as an onnxc_tensor descriptor whose dtype is ONNXC_VALUE_DTYPE and
 * whose data points at an onnxc_value. A value owns everything it points to (item values, tensor
 * data), so onnxc_value_free releases the whole tree. Values the caller passes in are only read.
 */
#ifndef ONNXC_VALUE_H
#define ONNXC_VALUE_H

#include "onnxc.h"

#define ONNXC_VALUE_DTYPE 1000

enum onnxc_value_kind { ONNXC_NONE = 0, ONNXC_TENSOR = 1, ONNXC_SEQUENCE = 2, ONNXC_MAP = 3 };

typedef struct onnxc_value {
    int32_t kind;
    int32_t elem_dtype;            /* element type of the tensor, or of the sequence's tensors */
    onnxc_tensor t;                /* ONNXC_TENSOR: owns t.data */
    int64_t n, cap;                /* ONNXC_SEQUENCE: items[0..n); ONNXC_MAP: n = 2 (keys, values) */
    struct onnxc_value **items;
} onnxc_value;

/* Bytes per element of an ONNX element type (sub-byte types are stored one per byte). */
static inline size_t onnxc_dtype_size(int32_t dtype) {
    switch (dtype) {
    case 1: case 6: case 12: return 4;
    case 7: case 11: case 13: case 14: return 8;
    case 15: return 16;
    case 4: case 5: case 10: case 16: return 2;
    case 8: return sizeof(char *);
    default: return 1;
    }
}

static inline int64_t onnxc_tensor_numel(const onnxc_tensor *t) {
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++) n *= t->dims[k];
    return n;
}

static inline size_t onnxc_tensor_nbytes(const onnxc_tensor *t) {
    return (size_t)onnxc_tensor_numel(t) * onnxc_dtype_size(t->dtype);
}

static inline onnxc_value *onnxc_value_new(int32_t kind, int32_t elem_dtype) {
    onnxc_value *v = (onnxc_value *)calloc(1, sizeof(onnxc_value));
    if (v) { v->kind = kind; v->elem_dtype = elem_dtype; }
    return v;
}

static inline void onnxc_value_free(onnxc_value *v) {
    if (!v) return;
    if (v->kind == ONNXC_TENSOR) free(v->t.data);
    for (int64_t i = 0; i < v->n; i++) onnxc_value_free(v->items[i]);
    free(v->items);
    free(v);
}

/* A tensor value holding a copy of t (its data is copied). NULL when out of memory. */
static inline onnxc_value *onnxc_value_from_tensor(const onnxc_tensor *t) {
    onnxc_value *v = onnxc_value_new(ONNXC_TENSOR, t->dtype);
    if (!v) return NULL;
    v->t = *t;
    size_t nb = onnxc_tensor_nbytes(t);
    v->t.data = onnxc_alloc(nb);
    if (!v->t.data) { free(v); return NULL; }
    if (nb) memcpy(v->t.data, t->data, nb);
    return v;
}

/* A tensor value taking ownership of t->data (allocated with onnxc_alloc). */
static inline onnxc_value *onnxc_value_adopt(onnxc_tensor *t) {
    onnxc_value *v = onnxc_value_new(ONNXC_TENSOR, t->dtype);
    if (!v) return NULL;
    v->t = *t;
    t->data = NULL;
    return v;
}

static inline onnxc_value *onnxc_value_clone(const onnxc_value *v) {
    if (!v) return NULL;
    if (v->kind == ONNXC_TENSOR) return onnxc_value_from_tensor(&v->t);
    onnxc_value *c = onnxc_value_new(v->kind, v->elem_dtype);
    if (!c || v->kind == ONNXC_NONE || v->n == 0) return c;
    c->items = (onnxc_value **)calloc((size_t)v->n, sizeof(onnxc_value *));
    if (!c->items) { free(c); return NULL; }
    c->cap = v->n;
    for (int64_t i = 0; i < v->n; i++) {
        c->items[i] = onnxc_value_clone(v->items[i]);
        c->n = i + 1;
        if (!c->items[i]) { onnxc_value_free(c); return NULL; }
    }
    return c;
}

/* Insert item (ownership passes) at position pos (0..n) of sequence s; 0 or -1 when out of memory. */
static inline int onnxc_seq_insert(onnxc_value *s, int64_t pos, onnxc_value *item) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 4;
        onnxc_value **p = (onnxc_value **)realloc(s->items, (size_t)cap * sizeof(onnxc_value *));
        if (!p) return -1;
        s->items = p;
        s->cap = cap;
    }
    memmove(s->items + pos + 1, s->items + pos, (size_t)(s->n - pos) * sizeof(onnxc_value *));
    s->items[pos] = item;
    s->n++;
    return 0;
}

/* Descriptor of a value for the ABI (data points at v; the descriptor owns nothing by itself). */
static inline onnxc_tensor onnxc_value_desc(const onnxc_value *v) {
    onnxc_tensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)v;
    t.dtype = ONNXC_VALUE_DTYPE;
    return t;
}

/* Release what a descriptor owns (tensor data or a value tree) and clear it. */
static inline void onnxc_desc_release(onnxc_tensor *t) {
    if (t->dtype == ONNXC_VALUE_DTYPE) onnxc_value_free((onnxc_value *)t->data);
    else free(t->data);
    t->data = NULL;
}

/* dst becomes an owning deep copy of src; 0, or -1 when out of memory. */
static inline int onnxc_desc_copy(const onnxc_tensor *src, onnxc_tensor *dst) {
    *dst = *src;
    if (src->dtype == ONNXC_VALUE_DTYPE) {
        dst->data = onnxc_value_clone((const onnxc_value *)src->data);
        return dst->data ? 0 : -1;
    }
    size_t nb = onnxc_tensor_nbytes(src);
    dst->data = onnxc_alloc(nb);
    if (!dst->data) return -1;
    if (nb) memcpy(dst->data, src->data, nb);
    return 0;
}

/* Whether two tensor descriptors have the same rank and dims. */
static inline int onnxc_same_shape(const onnxc_tensor *a, const onnxc_tensor *b) {
    if (a->rank != b->rank) return 0;
    for (int k = 0; k < a->rank; k++) if (a->dims[k] != b->dims[k]) return 0;
    return 1;
}

#endif /* ONNXC_VALUE_H */
