/* onnxc_strings.c: the implementation of onnxc_strings.h (compiled once into the runtime library). */
#include "onnxc_strings.h"

#include <wctype.h>

#define ONNXC_POOL_CHUNK ((size_t)1 << 16)

/* n bytes from the per-call pool (characters only: no alignment); NULL when out of memory. */
char *onnxc_pool_alloc(onnxc_rt *rt, size_t n) {
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
onnxc_str onnxc_str_make(onnxc_rt *rt, const char *s, size_t n) {
    char *d = onnxc_pool_alloc(rt, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* The out-of-memory error of a string kernel (who: the node); returns ONNXC_ERR_MEMORY. */
int onnxc_str_oom(onnxc_rt *rt, const char *who) {
    return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory for strings", who);
}

/* Fill descriptor out with a self-contained copy of the string tensor src of shape dims: one
 * onnxc_alloc block with the pointer array first and the characters after it. */
int onnxc_str_pack(onnxc_rt *rt, const onnxc_str *src, int rank, const int64_t *dims,
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

/* The next piece of a StringSplit element (Python's str.split): *p is the cursor (NULL when done),
 * *left the splits still allowed (< 0: no limit); no delimiter (dlen 0) splits at whitespace runs.
 * Returns 1 with the piece in [*start, *start + *len), or 0 when there is none. */
int onnxc_split_next(const char **p, const char *delim, size_t dlen, int64_t *left,
                     const char **start, size_t *len) {
    const char *s = *p;
    if (!s) return 0;
    if (dlen) {
        const char *q = *left != 0 ? strstr(s, delim) : NULL;
        *start = s;
        if (q) { *len = (size_t)(q - s); *p = q + dlen; if (*left > 0) (*left)--; }
        else { *len = strlen(s); *p = NULL; }
        return 1;
    }
    int w;
    while ((w = onnxc_utf8_space((const unsigned char *)s))) s += w;
    if (!*s) { *p = NULL; return 0; }
    *start = s;
    if (*left == 0) { *len = strlen(s); *p = NULL; return 1; }
    const char *q = s;
    while (*q && !onnxc_utf8_space((const unsigned char *)q)) q++;
    *len = (size_t)(q - s);
    *p = q;
    if (*left > 0) (*left)--;
    return 1;
}

/* A locale object for case mapping: name (or name.UTF-8), else C.UTF-8; (locale_t)0 when none exists,
 * in which case only ASCII letters change case. Free with onnxc_locale_free. */
locale_t onnxc_locale(const char *name) {
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

/* Free a locale from onnxc_locale ((locale_t)0 is allowed). */
void onnxc_locale_free(locale_t l) {
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
onnxc_str onnxc_str_case(onnxc_rt *rt, const char *s, int upper, locale_t loc) {
    const size_t n = onnxc_utf8_case(s, upper, loc, NULL);
    char *d = onnxc_pool_alloc(rt, n + 1);
    if (!d) return NULL;
    onnxc_utf8_case(s, upper, loc, d);
    d[n] = 0;
    return d;
}

/* Whether a and b are equal once both are lower-cased code point by code point. */
int onnxc_utf8_caseeq(const char *a, const char *b, locale_t loc) {
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
