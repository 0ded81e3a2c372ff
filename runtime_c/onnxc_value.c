/* onnxc_value.c: the implementation of onnxc_value.h (compiled once into the runtime library). */
#include "onnxc_value.h"

/* A new empty value of the given kind (calloc'd: no items); NULL when out of memory. */
onnxc_value *onnxc_value_new(int32_t kind, int32_t elem_dtype) {
    onnxc_value *v = (onnxc_value *)calloc(1, sizeof(onnxc_value));
    if (v) { v->kind = kind; v->elem_dtype = elem_dtype; }
    return v;
}

/* Free v and everything it owns (NULL is allowed). */
void onnxc_value_free(onnxc_value *v) {
    if (!v) return;
    if (v->cap == ONNXC_VALUE_BLOCK) { free(v); return; } /* onnxc_map_block: one allocation */
    if (v->kind == ONNXC_TENSOR) free(v->t.data);
    for (int64_t i = 0; i < v->n; i++) onnxc_value_free(v->items[i]);
    free(v->items);
    free(v);
}

/* A tensor value holding a copy of t (its data is copied). NULL when out of memory. */
onnxc_value *onnxc_value_from_tensor(const onnxc_tensor *t) {
    onnxc_value *v = onnxc_value_new(ONNXC_TENSOR, t->dtype);
    if (!v) return NULL;
    v->t = *t;
    size_t nb = onnxc_tensor_nbytes(t);
    v->t.data = onnxc_alloc(nb);
    if (!v->t.data) { free(v); return NULL; }
    if (nb) memcpy(v->t.data, t->data, nb);
    return v;
}

#define ONNXC_ALIGN64(n) (((n) + 63) & ~(size_t)63)

onnxc_value *onnxc_map_block(const onnxc_tensor *keys, const onnxc_tensor *values) {
    const size_t kb = onnxc_tensor_nbytes(keys), vb = onnxc_tensor_nbytes(values);
    const size_t head = ONNXC_ALIGN64(3 * sizeof(onnxc_value) + 2 * sizeof(onnxc_value *));
    const size_t ko = head, vo = head + ONNXC_ALIGN64(kb);
    char *b = (char *)onnxc_alloc(vo + vb);
    if (!b) return NULL;
    memset(b, 0, head);
    onnxc_value *m = (onnxc_value *)b, *k = m + 1, *v = m + 2;
    onnxc_value **items = (onnxc_value **)(void *)(v + 1);
    m->kind = ONNXC_MAP;
    m->elem_dtype = values->dtype;
    m->n = 2;
    m->cap = ONNXC_VALUE_BLOCK;
    m->items = items;
    items[0] = k;
    items[1] = v;
    k->kind = v->kind = ONNXC_TENSOR;
    k->elem_dtype = keys->dtype;
    v->elem_dtype = values->dtype;
    k->t = *keys;
    v->t = *values;
    k->t.data = b + ko;
    v->t.data = b + vo;
    if (kb) memcpy(k->t.data, keys->data, kb);
    if (vb) memcpy(v->t.data, values->data, vb);
    return m;
}

/* A tensor value taking ownership of t->data (allocated with onnxc_alloc). */
onnxc_value *onnxc_value_adopt(onnxc_tensor *t) {
    onnxc_value *v = onnxc_value_new(ONNXC_TENSOR, t->dtype);
    if (!v) return NULL;
    v->t = *t;
    t->data = NULL;
    return v;
}

int onnxc_seq_maps_dense(const onnxc_value *seq, void *out, int64_t *c, int32_t *dtype) {
    if (!seq || seq->kind != ONNXC_SEQUENCE || seq->n < 1) return 0;
    const onnxc_value *m0 = seq->items[0];
    if (!m0 || m0->kind != ONNXC_MAP || m0->n != 2) return 0;
    const onnxc_tensor *k0 = &m0->items[0]->t, *v0 = &m0->items[1]->t;
    if (k0->rank != 1 || v0->rank != 1 || v0->dims[0] != k0->dims[0] || v0->dtype == 8 || v0->dtype == 0) return 0;
    const size_t kb = onnxc_tensor_nbytes(k0), vb = onnxc_tensor_nbytes(v0);
    for (int64_t i = 0; i < seq->n; i++) {
        const onnxc_value *m = seq->items[i];
        if (!m || m->kind != ONNXC_MAP || m->n != 2 || m->items[0]->kind != ONNXC_TENSOR ||
            m->items[1]->kind != ONNXC_TENSOR) return 0;
        const onnxc_tensor *k = &m->items[0]->t, *v = &m->items[1]->t;
        if (k->rank != 1 || v->rank != 1 || k->dtype != k0->dtype || v->dtype != v0->dtype ||
            k->dims[0] != k0->dims[0] || v->dims[0] != v0->dims[0]) return 0;
        if (kb && k->data != k0->data && memcmp(k->data, k0->data, kb) != 0) return 0;
        if (out && vb) memcpy((char *)out + (size_t)i * vb, v->data, vb);
    }
    if (c) *c = v0->dims[0];
    if (dtype) *dtype = v0->dtype;
    return 1;
}

int onnxc_seq_maps_keyed(const onnxc_value *seq, const void *keys, int64_t c, int32_t kdtype, int32_t vdtype,
                         void *out) {
    if (!seq || seq->kind != ONNXC_SEQUENCE || c < 0 || kdtype == 0 || vdtype == 0 || vdtype == 8) return 0;
    for (int64_t i = 0; i < seq->n; i++) {
        const onnxc_value *m = seq->items[i];
        if (!m || m->kind != ONNXC_MAP || m->n != 2 || m->items[0]->kind != ONNXC_TENSOR ||
            m->items[1]->kind != ONNXC_TENSOR) return 0;
        const onnxc_tensor *k = &m->items[0]->t, *v = &m->items[1]->t;
        if (k->rank != 1 || v->rank != 1 || k->dtype != kdtype || v->dtype != vdtype || k->dims[0] != c ||
            v->dims[0] != c) return 0;
        if (kdtype == 8) {
            const char *const *ks = (const char *const *)k->data, *const *want = (const char *const *)keys;
            for (int64_t j = 0; j < c; j++)
                if (ks[j] != want[j] && (!ks[j] || !want[j] || strcmp(ks[j], want[j]) != 0)) return 0;
        } else if (c && memcmp(k->data, keys, onnxc_tensor_nbytes(k)) != 0) {
            return 0;
        }
        const size_t vb = onnxc_tensor_nbytes(v);
        if (vb) memcpy((char *)out + (size_t)i * vb, v->data, vb);
    }
    return 1;
}

/* A deep copy of v (NULL for NULL); NULL when out of memory. */
onnxc_value *onnxc_value_clone(const onnxc_value *v) {
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
int onnxc_seq_insert(onnxc_value *s, int64_t pos, onnxc_value *item) {
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

/* Release what a descriptor owns (tensor data or a value tree) and clear it. */
void onnxc_desc_release(onnxc_tensor *t) {
    if (t->dtype == ONNXC_VALUE_DTYPE) onnxc_value_free((onnxc_value *)t->data);
    else free(t->data);
    t->data = NULL;
}

/* dst becomes an owning deep copy of src; 0, or -1 when out of memory. */
int onnxc_desc_copy(const onnxc_tensor *src, onnxc_tensor *dst) {
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
