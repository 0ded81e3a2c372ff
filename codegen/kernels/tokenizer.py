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
The tokenizing C (onnxc_tok_*) is runtime_c/onnxc_tokenizer.c, compiled once into the runtime library;
the kernel generates only the calls.
"""

from __future__ import annotations

from onnxc.ir import DType, Node
from onnxc.passes.shapes.contrib import END, MS, START, tokenizer_args

from ..cexpr import c_literal
from ..templating import c_string
from . import dynshape as ds
from .base import KernelCtx, kernel
from .re2_posix import Translation, translate
from .typesets import STRING


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
    ctx.include("onnxc_tokenizer.h")
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
        *([f"row_[0] = {c_literal(START, DType.STRING)}; row_[t_.n + 1] = {c_literal(END, DType.STRING)};"] if mark else []),
        f"for (int64_t k = t_.n + {2 * mark}; k < d_; k++) row_[k] = {c_literal(a.pad_value, DType.STRING)};", "}",
        "onnxc_tok_done(re_, nre_, loc_, old_);", "return st_;"])
