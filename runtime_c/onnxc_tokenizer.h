/* The com.microsoft Tokenizer at run time (codegen/kernels/tokenizer.py generates the calls and holds
 * the semantics): tokenizing one string with compiled POSIX regular expressions (<regex.h>, the
 * patterns translated from RE2 by codegen/kernels/re2_posix.py) under a thread-local C.UTF-8 locale.
 *
 * A kernel compiles its patterns once per call (onnxc_tok_compile), tokenizes each string
 * (onnxc_tok_string: counts the tokens, and writes them as pool strings or pointers into the input
 * when t->out is set) and then frees them (onnxc_tok_done). The implementation is in
 * onnxc_tokenizer.c, compiled once into the runtime library.
 */
#ifndef ONNXC_TOKENIZER_H
#define ONNXC_TOKENIZER_H

#include "onnxc.h"
#include "onnxc_strings.h"
#include <locale.h>
#include <regex.h>

/* One Tokenizer node at work on a string: the compiled patterns and where the tokens go. */
typedef struct {
    const regex_t *re;  /* the separators (nre of them) or the token expression */
    int nre;            /* 0: one token per UTF-8 character */
    int tokexp;         /* re[0] is the token expression */
    int64_t minc;       /* mincharnum */
    onnxc_rt *rt;
    const char *who;
    onnxc_str *out;     /* where the tokens go, NULL: only count them */
    int64_t cap, n;     /* room at out, tokens so far */
} onnxc_tok;

/* Compile the n patterns (REG_EXTENDED plus flags[k]) into re under a C.UTF-8 locale, which *loc and
 * *old (to restore with onnxc_tok_done) receive. Returns an onnxc status; on failure nothing is left. */
ONNXC_RT_API int onnxc_tok_compile(onnxc_rt *rt, const char *who, regex_t *re, const char *const *pats,
                                   const int *flags, int n, locale_t *loc, locale_t *old);

/* Tokenize s: t->n counts its tokens, written from t->out when set. Returns an onnxc status. */
ONNXC_RT_API int onnxc_tok_string(onnxc_tok *t, const char *s);

/* Free the n compiled patterns and restore the thread's locale. */
ONNXC_RT_API void onnxc_tok_done(regex_t *re, int n, locale_t loc, locale_t old);

#endif /* ONNXC_TOKENIZER_H */
