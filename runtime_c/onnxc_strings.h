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
 *
 * The per-string functions (pool copies, case mapping, splitting, packing) are in onnxc_strings.c,
 * compiled once into the runtime library; the per-character UTF-8 helpers stay inline here.
 */
#ifndef ONNXC_STRINGS_H
#define ONNXC_STRINGS_H

#include "onnxc.h"
#include <locale.h>

/* n bytes from the per-call pool (characters only: no alignment); NULL when out of memory. */
ONNXC_RT_API char *onnxc_pool_alloc(onnxc_rt *rt, size_t n);

/* A pool copy of the n bytes at s, NUL-terminated; NULL when out of memory. */
ONNXC_RT_API onnxc_str onnxc_str_make(onnxc_rt *rt, const char *s, size_t n);

/* The out-of-memory error of a string kernel (who: the node); returns ONNXC_ERR_MEMORY. */
ONNXC_RT_API int onnxc_str_oom(onnxc_rt *rt, const char *who);

/* Fill descriptor out with a self-contained copy of the string tensor src of shape dims: one
 * onnxc_alloc block with the pointer array first and the characters after it. */
ONNXC_RT_API int onnxc_str_pack(onnxc_rt *rt, const onnxc_str *src, int rank, const int64_t *dims,
                                onnxc_tensor *out);

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

/* ---------------------------------------------------------------------------------------- StringSplit */

/* The next piece of a StringSplit element (Python's str.split): *p is the cursor (NULL when done),
 * *left the splits still allowed (< 0: no limit); no delimiter (dlen 0) splits at whitespace runs.
 * Returns 1 with the piece in [*start, *start + *len), or 0 when there is none. */
ONNXC_RT_API int onnxc_split_next(const char **p, const char *delim, size_t dlen, int64_t *left,
                                  const char **start, size_t *len);

/* ------------------------------------------------------------------------------------ case mapping */

/* A locale object for case mapping: name (or name.UTF-8), else C.UTF-8; (locale_t)0 when none exists,
 * in which case only ASCII letters change case. Free with onnxc_locale_free. */
ONNXC_RT_API locale_t onnxc_locale(const char *name);

/* Free a locale from onnxc_locale ((locale_t)0 is allowed). */
ONNXC_RT_API void onnxc_locale_free(locale_t l);

/* A pool copy of s upper- or lower-cased; NULL when out of memory. */
ONNXC_RT_API onnxc_str onnxc_str_case(onnxc_rt *rt, const char *s, int upper, locale_t loc);

/* Whether a and b are equal once both are lower-cased code point by code point. */
ONNXC_RT_API int onnxc_utf8_caseeq(const char *a, const char *b, locale_t loc);

#endif /* ONNXC_STRINGS_H */
