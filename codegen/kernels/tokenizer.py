"""Kernel of onnxruntime's contrib op com.microsoft Tokenizer (shape rule: passes/shapes/contrib.py).

Semantics, as onnxruntime computes them (checked against it in tests/ops/test_tokenizer.py):

- ``tokenexp``: the tokens are the successive leftmost-longest matches of the expression, each
  searched after the previous one; an empty match skips one UTF-8 character.
- ``separators``: each separator in turn splits every piece the previous ones left, at its
  leftmost-longest matches, searched within the piece (``^``/``$`` match at the piece's ends); the
  text between matches is a piece. An empty match ends the piece before it and also drops the one
  UTF-8 character after it. A single empty separator instead makes each UTF-8 character a token.
- Tokens (and pieces) of fewer than ``mincharnum`` UTF-8 characters are dropped; ``mark`` puts 0x02
  before and 0x03 after each string's tokens (even when it has none, as long as D > 0); the rest of
  a row is ``pad_value``.

The RE2 patterns are translated to POSIX EREs (re2_posix.py) and compiled with <regex.h> under a
thread-local C.UTF-8 locale, as RegexFullMatch does: POSIX's leftmost-longest rule is the
``longest_match`` option onnxruntime gives RE2. Word boundaries (``\\b``, ``\\B``) are refused: glibc's
count letters such as "é" as word characters, RE2's only ASCII ones, so tokens would differ. A search inside a string uses ``REG_STARTEND`` where
<regex.h> has it (glibc, the BSDs), so the text before the search start is context, as in RE2.

The shape function tokenizes every string to count its tokens and size D; the kernel tokenizes again
to write them (the patterns are compiled in each). Tokens are pool strings, or a pointer into the
input when they end the string. Invalid UTF-8 never fails: a stray byte counts as one character.
"""

from __future__ import annotations

from onnxc.ir import Node
from onnxc.passes.shapes.contrib import END, MS, START, tokenizer_args

from ..templating import c_string
from . import dynshape as ds
from .base import KernelCtx, kernel
from .ctables import str_lit
from .re2_posix import Translation, translate
from .typesets import STRING

_HELPERS = r"""
#include <limits.h>
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
static int onnxc_tok_string(onnxc_tok *t, const char *s) {
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
static void onnxc_tok_done(regex_t *re, int n, locale_t loc, locale_t old) {
    for (int k = 0; k < n; k++) regfree(&re[k]);
    if (loc) { uselocale(old); freelocale(loc); }
}

/* Compile the n patterns (REG_EXTENDED plus flags[k]) into re under a C.UTF-8 locale, which *loc and
 * *old (to restore with onnxc_tok_done) receive. Returns an onnxc status; on failure nothing is left. */
static int onnxc_tok_compile(onnxc_rt *rt, const char *who, regex_t *re, const char *const *pats, const int *flags,
                             int n, locale_t *loc, locale_t *old) {
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

"""


def _translations(node: Node) -> list[Translation]:
    """The POSIX search patterns of the separators or the token expression (none in character mode)."""
    a = tokenizer_args(node)
    if a.chars:
        return []
    trs = [translate(p, anchored=False) for p in (a.separators if a.separators is not None else (a.tokenexp,))]
    if any(tr.gnu for tr in trs):
        raise ValueError("word boundaries \\b and \\B: glibc's regex counts non-ASCII letters as word characters, "
                         "RE2 (onnxruntime) only ASCII ones")
    return trs


def _accepts(node: Node) -> str | None:
    try:
        _translations(node)
    except ValueError as e:
        return f"RE2 pattern not supported by the POSIX regex translation: {e}"
    return None


def _setup(ctx: KernelCtx) -> list[str]:
    """C compiling the patterns and declaring ``t_`` (an onnxc_tok), ``re_``/``nre_``, ``loc_``/``old_``."""
    ctx.helper("onnxc_strings", '#include "onnxc_strings.h"')
    ctx.helper("onnxc_tok", _HELPERS)
    a, trs, who = tokenizer_args(ctx.node), _translations(ctx.node), ctx.who
    n = len(trs)
    pats = ", ".join(c_string(tr.pattern) for tr in trs) or "NULL"
    flags = ", ".join("REG_ICASE" if tr.icase else "0" for tr in trs) or "0"
    lines = [f"static const char *const pats_[] = {{{pats}}};", f"static const int flags_[] = {{{flags}}};",
              f"regex_t re_[{max(n, 1)}]; const int nre_ = {n};", "locale_t loc_ = (locale_t)0, old_ = (locale_t)0;",
              "int st_ = nre_ ? onnxc_tok_compile(rt, " + who + ", re_, pats_, flags_, nre_, &loc_, &old_) : 0;",
              "(void)pats_; (void)flags_;",
              "if (st_) return st_;",
              f"onnxc_tok t_ = {{re_, nre_, {int(a.tokenexp is not None)}, {a.mincharnum}, rt, {who}, NULL, 0, 0}};",
              f"const int64_t n_ = {ctx.ins[0].numel()};"]
    return lines


def _shape(ctx: KernelCtx) -> str:
    mark = 2 * tokenizer_args(ctx.node).mark
    return "\n".join([*_setup(ctx), "int64_t m_ = 0;",
                      "for (int64_t i = 0; i < n_ && !st_; i++) {",
                      "if (!(st_ = onnxc_tok_string(&t_, in0[i])) && t_.n > m_) m_ = t_.n;", "}",
                      "onnxc_tok_done(re_, nre_, loc_, old_);", "if (st_) return st_;",
                      ds.bind(ctx, 0, [*ctx.outs[0].dims[:-1], f"m_ ? m_ + {mark} : 0"]), "return 0;"])


@kernel("Tokenizer", domain=MS, shape_fn=_shape, types=STRING, accepts=_accepts)
def tokenizer(ctx: KernelCtx) -> str:
    a = tokenizer_args(ctx.node)
    if ctx.outs[0].rank == ctx.ins[0].rank:  # a static empty input: an empty output
        return "return 0;"
    d, mark = ctx.outs[0].dims[-1], int(a.mark)
    return "\n".join([
        *_setup(ctx), f"const int64_t d_ = {d};",
        "for (int64_t i = 0; i < n_ && d_ > 0; i++) {",
        "onnxc_str *row_ = out0 + i * d_;",
        f"t_.out = row_ + {mark}; t_.cap = d_ - {2 * mark};",
        "if ((st_ = onnxc_tok_string(&t_, in0[i]))) break;",
        *([f"row_[0] = {str_lit(START)}; row_[t_.n + 1] = {str_lit(END)};"] if mark else []),
        f"for (int64_t k = t_.n + {2 * mark}; k < d_; k++) row_[k] = {str_lit(a.pad_value)};", "}",
        "onnxc_tok_done(re_, nre_, loc_, old_);", "return st_;"])
