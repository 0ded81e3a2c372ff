/* Non-tensor values: sequences, maps and optionals, and tensors owned by them.
 *
 * A value crosses the model ABI as an onnxc_tensor descriptor whose dtype is ONNXC_VALUE_DTYPE and
 * whose data points at an onnxc_value. A value owns everything it points to (item values, tensor
 * data), so onnxc_value_free releases the whole tree. Values the caller passes in are only read.
 *
 * The functions that allocate, copy or free values are in onnxc_value.c (compiled once into the
 * runtime library); the small size and descriptor helpers stay inline here.
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

/* Elements and bytes of a tensor descriptor. */
static inline int64_t onnxc_tensor_numel(const onnxc_tensor *t) {
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++) n *= t->dims[k];
    return n;
}

static inline size_t onnxc_tensor_nbytes(const onnxc_tensor *t) {
    return (size_t)onnxc_tensor_numel(t) * onnxc_dtype_size(t->dtype);
}

/* A new empty value of the given kind (calloc'd: no items); NULL when out of memory. */
ONNXC_RT_API onnxc_value *onnxc_value_new(int32_t kind, int32_t elem_dtype);

/* Free v and everything it owns (NULL is allowed). */
ONNXC_RT_API void onnxc_value_free(onnxc_value *v);

/* A tensor value holding a copy of t (its data is copied). NULL when out of memory. */
ONNXC_RT_API onnxc_value *onnxc_value_from_tensor(const onnxc_tensor *t);

/* A map of the 1-D tensors keys and values (both copied) in ONE allocation: the map, its items and both
 * tensors with their data (64-byte aligned). Its cap is ONNXC_VALUE_BLOCK: onnxc_value_free releases the
 * block at once, and its items must not be freed, moved or replaced on their own (maps are read-only
 * after they are built). A ZipMap row costs one malloc instead of six. NULL when out of memory. */
#define ONNXC_VALUE_BLOCK (-1)
ONNXC_RT_API onnxc_value *onnxc_map_block(const onnxc_tensor *keys, const onnxc_tensor *values);

/* A tensor value taking ownership of t->data (allocated with onnxc_alloc). */
ONNXC_RT_API onnxc_value *onnxc_value_adopt(onnxc_tensor *t);

/* Whether seq is a sequence of n >= 1 maps sharing one key table (1-D keys with the same bytes; string
 * keys: the same pointers, as ZipMap's literals) whose values are 1-D numeric tensors of one type and the
 * keys' length: then *c and *dtype are set (when not NULL), the values are written row by row to out (n * c elements)
 * unless out is NULL, and 1 is returned; else 0. Lets a reader build n dicts from one array. */
ONNXC_RT_API int onnxc_seq_maps_dense(const onnxc_value *seq, void *out, int64_t *c, int32_t *dtype);

/* Whether seq is a sequence of maps (any number) whose keys are the c keys at ``keys`` (dtype kdtype: their bytes,
 * or for strings (kdtype 8) char pointers whose strings must match) and whose values are 1-D tensors of dtype
 * vdtype and c elements: then the values are written row by row to out (n * c elements) and 1 is returned; else
 * 0. Lets a reader that remembers a map output's keys from an earlier call build the dicts of this one from
 * one array, with the keys checked here. */
ONNXC_RT_API int onnxc_seq_maps_keyed(const onnxc_value *seq, const void *keys, int64_t c, int32_t kdtype,
                                      int32_t vdtype, void *out);

/* A deep copy of v (NULL for NULL); NULL when out of memory. */
ONNXC_RT_API onnxc_value *onnxc_value_clone(const onnxc_value *v);

/* Insert item (ownership passes) at position pos (0..n) of sequence s; 0 or -1 when out of memory. */
ONNXC_RT_API int onnxc_seq_insert(onnxc_value *s, int64_t pos, onnxc_value *item);

/* Descriptor of a value for the ABI (data points at v; the descriptor owns nothing by itself). */
static inline onnxc_tensor onnxc_value_desc(const onnxc_value *v) {
    onnxc_tensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)v;
    t.dtype = ONNXC_VALUE_DTYPE;
    return t;
}

/* Release what a descriptor owns (tensor data or a value tree) and clear it. */
ONNXC_RT_API void onnxc_desc_release(onnxc_tensor *t);

/* dst becomes an owning deep copy of src; 0, or -1 when out of memory. */
ONNXC_RT_API int onnxc_desc_copy(const onnxc_tensor *src, onnxc_tensor *dst);

/* Whether two tensor descriptors have the same rank and dims. */
static inline int onnxc_same_shape(const onnxc_tensor *a, const onnxc_tensor *b) {
    if (a->rank != b->rank) return 0;
    for (int k = 0; k < a->rank; k++) if (a->dims[k] != b->dims[k]) return 0;
    return 1;
}

#endif /* ONNXC_VALUE_H */
