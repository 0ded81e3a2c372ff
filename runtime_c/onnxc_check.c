/* onnxc_check.c: the implementation of onnxc_check.h (compiled once into the runtime library). */
#include "onnxc_check.h"
#include "onnxc_value.h"

static const char *const dtype_names_[] = {
    "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16",
    "double", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz",
    "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2"};

const char *onnxc_dtype_name(int32_t dtype) {
    return dtype >= 0 && dtype < (int32_t)(sizeof dtype_names_ / sizeof dtype_names_[0]) ? dtype_names_[dtype]
                                                                                          : "unknown";
}

#define MAX_DEPTH_ 16
#define KEYS_ (-1)   /* item[] entries naming a map's keys and values */
#define VALUES_ (-2)

/* What a message is about: "input 'x'", "input 's' item 1 item 0", "input 'm' keys". */
typedef struct where_ {
    const char *kind, *name;
    int depth;
    int64_t item[MAX_DEPTH_];
} where_;

static const char *where_text(char *buf, size_t n, const where_ *w) {
    int k = snprintf(buf, n, "%s '%s'", w->kind, w->name);
    for (int i = 0; i < w->depth && k > 0 && (size_t)k < n; i++) {
        int64_t it = w->item[i];
        k += it == KEYS_ ? snprintf(buf + k, n - k, " keys") : it == VALUES_ ? snprintf(buf + k, n - k, " values")
                                                             : snprintf(buf + k, n - k, " item %lld", (long long)it);
    }
    return buf;
}

/* Dims, element count, byte size and data of t (its rank already checked against [0, ONNXC_MAX_RANK]). */
static int tensor_body(onnxc_rt *rt, const where_ *w, const onnxc_tensor *t, int32_t dtype, size_t itemsize) {
    char at[256], b[256];
    int zero = 0;
    for (int k = 0; k < t->rank; k++) {
        int64_t d = t->dims[k];
        if (d < 0 || d > ONNXC_MAX_DIM)
            return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s axis %d: dimension %lld %s", where_text(at, sizeof at, w), k,
                              (long long)d, d < 0 ? "is negative" : "exceeds the limit of 2^48");
        zero |= d == 0;
    }
    if (zero) return 0; /* no elements: data may be NULL */
    int wrapped = 0;
    int64_t n = 1;
    for (int k = 0; k < t->rank && !wrapped; k++) n = onnxc_ck_mul(&wrapped, n, t->dims[k]);
    if (wrapped)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: shape %s has more elements than int64 can count",
                          where_text(at, sizeof at, w), onnxc_fmt_dims(b, sizeof b, t->rank, t->dims));
    if ((uint64_t)n > ONNXC_MAX_BYTES / (itemsize ? itemsize : 1))
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: shape %s of %s needs more than %zu bytes (the limit)",
                          where_text(at, sizeof at, w), onnxc_fmt_dims(b, sizeof b, t->rank, t->dims),
                          onnxc_dtype_name(dtype), ONNXC_MAX_BYTES);
    if (!t->data)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: data is NULL but the shape %s has %lld elements",
                          where_text(at, sizeof at, w), onnxc_fmt_dims(b, sizeof b, t->rank, t->dims), (long long)n);
    if (dtype == 8) { /* strings: the pointers are read as C strings */
        const onnxc_str *s = (const onnxc_str *)t->data;
        for (int64_t i = 0; i < n; i++)
            if (!s[i])
                return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: string element %lld is NULL", where_text(at, sizeof at, w),
                                  (long long)i);
    }
    return 0;
}

static int dtype_fail(onnxc_rt *rt, const where_ *w, int32_t want, int32_t got) {
    char at[256];
    return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected element type %d (%s), got %d (%s)",
                      where_text(at, sizeof at, w), (int)want, onnxc_dtype_name(want), (int)got, onnxc_dtype_name(got));
}

int onnxc_input_error(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                      size_t itemsize) {
    where_ w = {"input", name, 0, {0}};
    if (t->dtype != dtype) return dtype_fail(rt, &w, dtype, t->dtype);
    if (t->rank != rank)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "input '%s': expected rank %d, got %d", name, rank, (int)t->rank);
    return tensor_body(rt, &w, t, dtype, itemsize);
}

int onnxc_into_error(onnxc_rt *rt, const char *name, const onnxc_tensor *t, int32_t dtype, int rank,
                     const int64_t *dims) {
    where_ w = {"output", name, 0, {0}};
    if (!t->data) return onnxc_fail(rt, ONNXC_ERR_INPUT, "output '%s': data is NULL (run_into writes the caller's "
                                    "buffer)", name);
    if (t->dtype != dtype) return dtype_fail(rt, &w, dtype, t->dtype);
    if (t->rank != rank)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "output '%s': expected rank %d, got %d", name, rank, (int)t->rank);
    for (int k = 0; k < rank; k++)
        if (t->dims[k] != dims[k])
            return onnxc_fail(rt, ONNXC_ERR_INPUT, "output '%s' axis %d: expected %lld, got %lld", name, k,
                              (long long)dims[k], (long long)t->dims[k]);
    return 0;
}

int onnxc_size_error(onnxc_rt *rt, const char *what, int ovf, size_t itemsize, int rank, const int64_t *d,
                     size_t *bytes) {
    char b[256];
    *bytes = 0;
    if (ovf)
        return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: a dimension overflows int64 (shape %s, 0 where it overflowed): "
                          "more than %zu bytes", what, onnxc_fmt_dims(b, sizeof b, rank, d), ONNXC_MAX_BYTES);
    int zero = 0;
    for (int k = 0; k < rank; k++) {
        if (d[k] < 0)
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: shape %s has a negative dimension", what,
                              onnxc_fmt_dims(b, sizeof b, rank, d));
        zero |= d[k] == 0;
    }
    if (zero) return 0;
    int64_t n = 1;
    for (int k = 0; k < rank && !ovf; k++) n = onnxc_ck_mul(&ovf, n, d[k]);
    if (ovf || (uint64_t)n > ONNXC_MAX_BYTES / (itemsize ? itemsize : 1))
        return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: shape %s of %zu-byte elements needs more than %zu bytes "
                          "(the limit of one buffer)", what, onnxc_fmt_dims(b, sizeof b, rank, d), itemsize,
                          ONNXC_MAX_BYTES);
    *bytes = (size_t)n * itemsize;
    return 0;
}

static const char *kind_name_(int32_t kind) {
    switch (kind) {
    case ONNXC_NONE: return "an empty optional";
    case ONNXC_TENSOR: return "a tensor";
    case ONNXC_SEQUENCE: return "a sequence";
    case ONNXC_MAP: return "a map";
    default: return "a value of another kind";
    }
}

/* A tensor held by a value: any rank up to ONNXC_MAX_RANK and the element type ``dtype``; ``length`` -1:
 * any shape, -2: 1-D (a map's keys), >= 0: 1-D of that length (a map's values). */
static int value_tensor(onnxc_rt *rt, const where_ *w, const onnxc_tensor *t, int32_t dtype, int64_t length) {
    char at[256];
    if (t->rank < 0 || t->rank > ONNXC_MAX_RANK)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: rank %d is out of range [0, %d]", where_text(at, sizeof at, w),
                          (int)t->rank, ONNXC_MAX_RANK);
    if (t->dtype != dtype) return dtype_fail(rt, w, dtype, t->dtype);
    if (length != -1 && t->rank != 1)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected a 1-D tensor, got rank %d", where_text(at, sizeof at, w),
                          (int)t->rank);
    if (length >= 0 && t->dims[0] != length)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected %lld elements (one per key), got %lld",
                          where_text(at, sizeof at, w), (long long)length, (long long)t->dims[0]);
    return tensor_body(rt, w, t, dtype, onnxc_dtype_size(dtype));
}

static int value_ok(onnxc_rt *rt, where_ *w, const onnxc_value *v, const int32_t *type);

/* Item ``i`` (or KEYS_/VALUES_) of a value, checked against ``type`` one level down. */
static int item_ok(onnxc_rt *rt, where_ *w, int64_t i, const onnxc_value *v, const int32_t *type) {
    char at[256];
    if (w->depth >= MAX_DEPTH_)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: nested too deeply", where_text(at, sizeof at, w));
    w->item[w->depth++] = i;
    int st = v ? value_ok(rt, w, v, type) : onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: NULL", where_text(at, sizeof at, w));
    w->depth--;
    return st;
}

static int value_ok(onnxc_rt *rt, where_ *w, const onnxc_value *v, const int32_t *type) {
    char at[256];
    if (type[0] == ONNXC_VT_OPTIONAL) {
        if (v->kind == ONNXC_NONE) return 0;
        type++;
    }
    int32_t want = type[0] == ONNXC_VT_TENSOR ? ONNXC_TENSOR : type[0] == ONNXC_VT_SEQUENCE ? ONNXC_SEQUENCE : ONNXC_MAP;
    if (v->kind != want) {
        if (v->kind < ONNXC_NONE || v->kind > ONNXC_MAP)
            return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected %s, got a value of kind %d",
                              where_text(at, sizeof at, w), kind_name_(want), (int)v->kind);
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected %s, got %s", where_text(at, sizeof at, w),
                          kind_name_(want), kind_name_(v->kind));
    }
    if (want == ONNXC_TENSOR) return value_tensor(rt, w, &v->t, type[1], -1);
    if (want == ONNXC_MAP) {
        if (v->n != 2 || !v->items)
            return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: a map must have n = 2 items (its keys and values)",
                              where_text(at, sizeof at, w));
        if (v->elem_dtype != type[2]) return dtype_fail(rt, w, type[2], v->elem_dtype);
        if (w->depth >= MAX_DEPTH_)
            return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: nested too deeply", where_text(at, sizeof at, w));
        int st = 0;
        for (int j = 0; j < 2 && !st; j++) {
            const onnxc_value *it = v->items[j];
            w->item[w->depth++] = j ? VALUES_ : KEYS_;
            if (!it || it->kind != ONNXC_TENSOR)
                st = onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: expected a tensor, got %s", where_text(at, sizeof at, w),
                                it ? kind_name_(it->kind) : "NULL");
            else  /* the values: as many as the keys */
                st = value_tensor(rt, w, &it->t, type[1 + j], j ? v->items[0]->t.dims[0] : -2);
            w->depth--;
        }
        return st;
    }
    if (v->n < 0 || v->n > ONNXC_MAX_DIM)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: a sequence of %lld items", where_text(at, sizeof at, w),
                          (long long)v->n);
    if (v->n && !v->items)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "%s: the items of a sequence of %lld items are NULL",
                          where_text(at, sizeof at, w), (long long)v->n);
    if (type[1] == ONNXC_VT_TENSOR && v->elem_dtype != type[2]) return dtype_fail(rt, w, type[2], v->elem_dtype);
    for (int64_t i = 0; i < v->n; i++) {
        int st = item_ok(rt, w, i, v->items[i], type + 1);
        if (st) return st;
    }
    return 0;
}

int onnxc_check_value(onnxc_rt *rt, const char *name, const onnxc_tensor *t, const int32_t *type) {
    where_ w = {"input", name, 0, {0}};
    if (t->dtype != ONNXC_VALUE_DTYPE)
        return onnxc_fail(rt, ONNXC_ERR_INPUT, "input '%s': expected a sequence, map or optional value (dtype %d), got "
                          "dtype %d", name, ONNXC_VALUE_DTYPE, (int)t->dtype);
    if (!t->data) return onnxc_fail(rt, ONNXC_ERR_INPUT, "input '%s': data is NULL", name);
    return value_ok(rt, &w, (const onnxc_value *)t->data, type);
}
