/* String tensors: arrays of onnxc_str, each pointing at NUL-terminated UTF-8 (never NULL).
 *
 * A string tensor never owns its characters. Elements point into the caller's input strings, into
 * static literals (constants and attribute values compiled into the model), or into the per-call
 * pool rt->pool, where kernels put the strings they make; the run function frees the pool when it
 * returns. Model outputs are therefore packed first (onnxc_str_pack): one block holding the pointer
 * array followed by the characters, which the caller frees with one call.
 *
 * UTF-8 helpers: decoding that tolerates invalid bytes (they pass through unchanged), Unicode case
 * mapping through a thread-safe locale object (newlocale + towupper_l; no global setlocale), and
 * Python's notion of whitespace for StringSplit.
 */
#ifndef ONNXC_STRINGS_H
#define ONNXC_STRINGS_H

#include <locale.h>
#include <wctype.h>

#define ONNXC_POOL_CHUNK ((size_t)1 << 16)

/* n bytes from the per-call pool (characters only: no alignment); NULL when out of memory. */
static inline char *onnxc_pool_alloc(onnxc_rt *rt, size_t n) {
    onnxc_pool *p = rt->pool;
    if (!p || p->cap - p->used < n) {
        size_t cap = n > ONNXC_POOL_CHUNK ? n : ONNXC_POOL_CHUNK;
        if (cap > SIZE_MAX - sizeof(onnxc_pool)) return NULL;
        onnxc_pool *c = (onnxc_pool *)malloc(sizeof(onnxc_pool) + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        if (p && n > ONNXC_POOL_CHUNK / 4) { /* a big string: keep filling the current chunk afterwards */
            c->next = p->next;
            p->next = c;
        } else {
            c->next = p;
            rt->pool = c;
        }
        p = c;
    }
    char *r = (char *)(p + 1) + p->used;
    p->used += n;
    return r;
}

/* A pool copy of the n bytes at s, NUL-terminated; NULL when out of memory. */
static inline onnxc_str onnxc_str_make(onnxc_rt *rt, const char *s, size_t n) {
    char *d = onnxc_pool_alloc(rt, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static inline int onnxc_str_oom(onnxc_rt *rt, const char *who) {
    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory for strings", who);
}

/* Fill descriptor out with a self-contained copy of the string tensor src of shape dims: one
 * onnxc_alloc block with the pointer array first and the characters after it. */
static int onnxc_str_pack(onnxc_rt *rt, const onnxc_str *src, int rank, const int64_t *dims,
                          onnxc_tensor *out) {
    size_t n = 1;
    for (int k = 0; k < rank; k++) n *= (size_t)dims[k];
    size_t bytes = n * sizeof(onnxc_str);
    for (size_t i = 0; i < n; i++) bytes += strlen(src[i] ? src[i] : "") + 1;
    char **block = (char **)onnxc_alloc(bytes);
    if (!block) return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory packing a %zu-byte string output", bytes);
    char *c = (char *)(block + n);
    for (size_t i = 0; i < n; i++) {
        const char *s = src[i] ? src[i] : "";
        const size_t l = strlen(s) + 1;
        memcpy(c, s, l);
        block[i] = c;
        c += l;
    }
    out->data = block;
    out->rank = rank;
    out->dtype = 8; /* TensorProto.STRING */
    for (int k = 0; k < rank; k++) out->dims[k] = dims[k];
    return 0;
}

/* ------------------------------------------------------------------------------------------- UTF-8 */

#define ONNXC_UTF8_RAW 0xFFFFFFFFu /* an invalid byte: kept as is */

/* The code point at s (not at its NUL) and its byte length in *len; ONNXC_UTF8_RAW for an invalid byte. */
static inline uint32_t onnxc_utf8_next(const unsigned char *s, int *len) {
    const uint32_t c = s[0];
    if (c < 0x80) { *len = 1; return c; }
    int n = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? (c < 0xF0 ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    uint32_t cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) { n = 0; break; }
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (n == 0 || (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        *len = 1;
        return ONNXC_UTF8_RAW;
    }
    *len = n;
    return cp;
}

/* Write code point cp as UTF-8 to d (when not NULL); returns its byte length. */
static inline int onnxc_utf8_put(uint32_t cp, char *d) {
    unsigned char b[4];
    int n;
    if (cp < 0x80) { b[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (unsigned char)(0xC0 | (cp >> 6)); b[1] = (unsigned char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12)); b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18)); b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (unsigned char)(0x80 | (cp & 0x3F)); n = 4;
    }
    if (d) memcpy(d, b, (size_t)n);
    return n;
}

/* Byte length of the whitespace code point at s (Python's str.isspace), or 0. */
static inline int onnxc_utf8_space(const unsigned char *s) {
    const unsigned c = s[0];
    if ((c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20)) return 1;
    if (c == 0xC2) return (s[1] == 0x85 || s[1] == 0xA0) ? 2 : 0;
    if (c == 0xE1) return (s[1] == 0x9A && s[2] == 0x80) ? 3 : 0;
    if (c == 0xE2 && s[1] == 0x80) return (s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF ? 3 : 0;
    if (c == 0xE2) return (s[1] == 0x81 && s[2] == 0x9F) ? 3 : 0;
    if (c == 0xE3) return (s[1] == 0x80 && s[2] == 0x80) ? 3 : 0;
    return 0;
}

/* ------------------------------------------------------------------------------------ case mapping */

/* A locale object for case mapping: name (or name.UTF-8), else C.UTF-8; (locale_t)0 when none exists,
 * in which case only ASCII letters change case. Free with onnxc_locale_free. */
static locale_t onnxc_locale(const char *name) {
    locale_t l = (locale_t)0;
    if (name && *name) {
        char buf[160];
        if (!strchr(name, '.') && strlen(name) < sizeof buf - 8) {
            snprintf(buf, sizeof buf, "%s.UTF-8", name);
            l = newlocale(LC_CTYPE_MASK, buf, (locale_t)0);
        }
        if (!l) l = newlocale(LC_CTYPE_MASK, name, (locale_t)0);
    }
    if (!l) l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    return l;
}

static inline void onnxc_locale_free(locale_t l) {
    if (l) freelocale(l);
}

static inline uint32_t onnxc_case_cp(uint32_t cp, int upper, locale_t loc) {
    if (cp < 0x80 || !loc) {
        if (upper) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    }
    const wint_t r = upper ? towupper_l((wint_t)cp, loc) : towlower_l((wint_t)cp, loc);
    return r > 0x10FFFF || (r >= 0xD800 && r < 0xE000) ? cp : (uint32_t)r;
}

/* Upper- (upper != 0) or lower-case UTF-8 s into d (NULL: only measure); returns the output length. */
static size_t onnxc_utf8_case(const char *s, int upper, locale_t loc, char *d) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        int len;
        const uint32_t cp = onnxc_utf8_next(p, &len);
        if (cp == ONNXC_UTF8_RAW) {
            if (d) d[n] = (char)*p;
            n += 1;
        } else {
            n += (size_t)onnxc_utf8_put(onnxc_case_cp(cp, upper, loc), d ? d + n : NULL);
        }
        p += len;
    }
    return n;
}

/* A pool copy of s upper- or lower-cased; NULL when out of memory. */
static onnxc_str onnxc_str_case(onnxc_rt *rt, const char *s, int upper, locale_t loc) {
    const size_t n = onnxc_utf8_case(s, upper, loc, NULL);
    char *d = onnxc_pool_alloc(rt, n + 1);
    if (!d) return NULL;
    onnxc_utf8_case(s, upper, loc, d);
    d[n] = 0;
    return d;
}

/* Whether a and b are equal once both are lower-cased code point by code point. */
static int onnxc_utf8_caseeq(const char *a, const char *b, locale_t loc) {
    const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
    while (*p && *q) {
        int lp, lq;
        uint32_t x = onnxc_utf8_next(p, &lp), y = onnxc_utf8_next(q, &lq);
        if (x == ONNXC_UTF8_RAW || y == ONNXC_UTF8_RAW) {
            if (x != y || *p != *q) return 0;
        } else if (onnxc_case_cp(x, 0, loc) != onnxc_case_cp(y, 0, loc)) {
            return 0;
        }
        p += lp;
        q += lq;
    }
    return *p == *q;
}

#endif /* ONNXC_STRINGS_H */
