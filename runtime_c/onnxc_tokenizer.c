/* onnxc_tokenizer.c: the implementation of onnxc_tokenizer.h (compiled once into the runtime library). */
#include "onnxc_tokenizer.h"

#include <limits.h>

/* The byte length of the UTF-8 character at p (1 for an invalid byte), not beyond e. */
static inline size_t onnxc_tok_char(const char *p, const char *e) {
    int l;
    onnxc_utf8_next((const unsigned char *)p, &l);
    return (size_t)l <= (size_t)(e - p) ? (size_t)l : (size_t)(e - p);
}

/* Whether [a, b) holds at least minc UTF-8 characters. */
static inline int onnxc_tok_long(const char *a, const char *b, int64_t minc) {
    int64_t c = 0;
    for (; a < b && c < minc; c++) a += onnxc_tok_char(a, b);
    return c >= minc;
}

static int onnxc_tok_emit(onnxc_tok *t, const char *a, const char *b) {
    if (!onnxc_tok_long(a, b, t->minc)) return 0;
    if (t->out) {
        if (t->n >= t->cap)
            return onnxc_fail(t->rt, ONNXC_ERR_RUNTIME, "%s: more tokens than the output holds", t->who);
        const onnxc_str s = *b == 0 ? a : onnxc_str_make(t->rt, a, (size_t)(b - a)); /* a suffix is shared */
        if (!s) return onnxc_str_oom(t->rt, t->who);
        t->out[t->n] = s;
    }
    t->n++;
    return 0;
}

/* The leftmost-longest match [*ms, *me) of re at or after q in the text [p, e) (^ matches at p, $ at e);
 * *ms = NULL when there is none. Returns an onnxc status. */
static int onnxc_tok_find(onnxc_tok *t, const regex_t *re, const char *p, const char *q, const char *e,
                          const char **ms, const char **me) {
    regmatch_t m[1];
    const int flags = q > p ? REG_NOTBOL : 0;
    char *copy = NULL;
    *ms = *me = NULL;
#ifdef REG_STARTEND
    const char *origin = p; /* the match offsets count from here */
    m[0].rm_so = (regoff_t)(q - p);
    m[0].rm_eo = (regoff_t)(e - p);
    const int r = regexec(re, p, 1, m, flags | REG_STARTEND);
#else
    const char *origin = q;
    if (*e != 0) { /* a piece inside the string: a NUL-terminated copy */
        copy = (char *)malloc((size_t)(e - q) + 1);
        if (!copy) return onnxc_str_oom(t->rt, t->who);
        memcpy(copy, q, (size_t)(e - q));
        copy[e - q] = 0;
    }
    const int r = regexec(re, copy ? copy : q, 1, m, flags);
#endif
    if (r == 0 && m[0].rm_so >= 0 && m[0].rm_so <= m[0].rm_eo) {
        *ms = origin + m[0].rm_so;
        *me = origin + m[0].rm_eo;
        if (*ms < q || *me > e) *ms = *me = NULL;
    }
    free(copy);
    if (r != 0 && r != REG_NOMATCH)
        return onnxc_fail(t->rt, ONNXC_ERR_RUNTIME, "%s: the regular expression search failed (%d)", t->who, r);
    return 0;
}

/* Split the piece [p, e) at the matches of separator k, then pass each part on to separator k + 1;
 * after the last separator, a part is a token. */
static int onnxc_tok_split(onnxc_tok *t, int k, const char *p, const char *e) {
    if (!onnxc_tok_long(p, e, t->minc)) return 0; /* parts only get shorter */
    if (k == t->nre) return onnxc_tok_emit(t, p, e);
    const char *q = p, *ms, *me;
    int st;
    for (;;) {
        if ((st = onnxc_tok_find(t, &t->re[k], p, q, e, &ms, &me))) return st;
        if (!ms) return onnxc_tok_split(t, k + 1, q, e);
        if ((st = onnxc_tok_split(t, k + 1, q, ms))) return st;
        if (me > ms) q = me;
        else if (ms < e) q = ms + onnxc_tok_char(ms, e); /* an empty match drops the next character */
        else return 0;
    }
}

/* The successive leftmost-longest matches of the token expression in [p, e). */
static int onnxc_tok_match(onnxc_tok *t, const char *p, const char *e) {
    const char *q = p, *ms, *me;
    int st;
    for (;;) {
        if ((st = onnxc_tok_find(t, &t->re[0], p, q, e, &ms, &me))) return st;
        if (!ms) return 0;
        if (me > ms) {
            if ((st = onnxc_tok_emit(t, ms, me))) return st;
            q = me;
        } else if (ms < e) {
            q = ms + onnxc_tok_char(ms, e);
        } else {
            return 0;
        }
    }
}

/* Tokenize s: t->n counts its tokens, written from t->out when set. Returns an onnxc status. */
int onnxc_tok_string(onnxc_tok *t, const char *s) {
    const size_t len = strlen(s);
    t->n = 0;
    if (len > (size_t)INT_MAX)
        return onnxc_fail(t->rt, ONNXC_ERR_RUNTIME, "%s: a %zu-byte string is too long to tokenize", t->who, len);
    const char *e = s + len;
    if (t->nre == 0) {
        int st;
        for (const char *q = s; q < e; q += onnxc_tok_char(q, e))
            if ((st = onnxc_tok_emit(t, q, q + onnxc_tok_char(q, e)))) return st;
        return 0;
    }
    return t->tokexp ? onnxc_tok_match(t, s, e) : onnxc_tok_split(t, 0, s, e);
}

/* Free the n compiled patterns and restore the thread's locale. */
void onnxc_tok_done(regex_t *re, int n, locale_t loc, locale_t old) {
    for (int k = 0; k < n; k++) regfree(&re[k]);
    if (loc) { uselocale(old); freelocale(loc); }
}

/* Compile the n patterns (REG_EXTENDED plus flags[k]) into re under a C.UTF-8 locale, which *loc and
 * *old (to restore with onnxc_tok_done) receive. Returns an onnxc status; on failure nothing is left. */
int onnxc_tok_compile(onnxc_rt *rt, const char *who, regex_t *re, const char *const *pats,
                      const int *flags, int n, locale_t *loc, locale_t *old) {
    *loc = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
    *old = *loc ? uselocale(*loc) : (locale_t)0;
    for (int k = 0; k < n; k++) {
        const int e = regcomp(&re[k], pats[k], REG_EXTENDED | flags[k]);
        if (e) {
            char m[256];
            regerror(e, &re[k], m, sizeof m);
            onnxc_tok_done(re, k, *loc, *old);
            return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: cannot compile pattern %d: %s", who, k, m);
        }
    }
    return 0;
}
