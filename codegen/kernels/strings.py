"""Kernels of the string ops: Equal on strings, StringConcat, RegexFullMatch, StringSplit and
StringNormalizer (string tensors: runtime_c/onnxc_strings.h).

Strings a kernel makes go to the per-call pool; strings it passes through (StringNormalizer without
a case change, the trailing piece of a StringSplit element) are pointer copies. Kernels run on one
thread: the pool is not shared between threads.

- Equal/StringConcat broadcast with an odometer over the output (string work dwarfs index math).
- RegexFullMatch compiles the RE2 pattern translated to POSIX ERE (re2_posix.py) once per call with
  <regex.h> under a thread-local C.UTF-8 locale (``uselocale``), so characters are UTF-8 code points.
- StringSplit follows Python's ``str.split``: a delimiter splits at each occurrence, no delimiter
  splits at runs of Unicode whitespace; ``maxsplit`` bounds the splits. The shape function counts the
  pieces of every element to size the last axis.
- StringNormalizer drops whole elements equal to a stopword (case-insensitively: compared lower-cased
  code point by code point) as the spec says, then upper- or lower-cases with the node's locale
  (else C.UTF-8). All elements dropped gives one empty string. Unlike onnx.reference it neither
  splits elements into words nor strips accents, which the spec does not ask for.
"""

from __future__ import annotations

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.strings import normalizer_args, split_args

from ..templating import c_string
from . import dynshape as ds
from . import elementwise  # noqa: F401  (registers the numeric Equal that the string variant wraps)
from .base import KERNELS, KernelCtx, kernel
from .ctables import str_lit, table
from .re2_posix import translate
from .typesets import STRING


def include(ctx: KernelCtx) -> None:
    ctx.helper("onnxc_strings", '#include "onnxc_strings.h"')


def who(ctx: KernelCtx) -> str:
    return ctx.who


def _is_string(node: Node, i: int) -> bool:
    v = node.input(i)
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DType.STRING


def broadcast_elements(ctx: KernelCtx, body: str) -> str:
    """C running ``body`` for each output element ``i`` in order, with ``o<k>`` the element offset of
    input ``k`` under numpy broadcasting (run-time checked where dims are symbolic)."""
    y, ins, r = ctx.outs[0], ctx.ins, ctx.outs[0].rank
    offs = ", ".join(f"o{k} = 0" for k in range(len(ins)))
    flat = []  # without broadcasting: each input is read at i (same shape) or at 0 (one element)
    for x in ins:
        if tuple(x.shape) == tuple(y.shape):
            flat.append("i")
        elif all(d == 1 for d in x.shape):
            flat.append("0")
    if r == 0 or len(flat) == len(ins):
        offs = ", ".join(f"o{k} = {o}" for k, o in enumerate(flat)) if flat else "o0 = 0"
        return "\n".join([f"for (int64_t i = 0; i < {y.numel()}; i++) {{", f"const int64_t {offs};",
                          body, "}", "return 0;"])
    lines = [f"const int64_t n_[{r}] = {{{', '.join(y.dims)}}};"]
    for k, x in enumerate(ins):
        st, s = x.strides(), []
        for a in range(r):
            j = a - (r - x.rank)
            d = x.shape[j] if j >= 0 else 1
            if j >= 0 and d == y.shape[a]:
                s.append(st[j])
            elif d == 1:
                s.append("0")
            else:
                s.append(f"(({x.dims[j]}) == 1 ? 0 : {st[j]})")
                lines.append(f"if (({x.dims[j]}) != 1 && ({x.dims[j]}) != ({y.dims[a]})) return onnxc_fail(rt, "
                             f"ONNXC_ERR_RUNTIME, \"%s: input {k} axis {j} has %lld elements, cannot broadcast to "
                             f"%lld\", {who(ctx)}, (long long)({x.dims[j]}), (long long)({y.dims[a]}));")
        lines.append(f"const int64_t s{k}_[{r}] = {{{', '.join(s)}}};")
    step = " ".join(f"o{k} += s{k}_[a];" for k in range(len(ins)))
    back = " ".join(f"o{k} -= s{k}_[a] * (n_[a] - 1);" for k in range(len(ins)))
    lines += [f"int64_t c_[{r}] = {{0}}, {offs};", f"const int64_t total_ = {y.numel()};",
              "for (int64_t i = 0; i < total_; i++) {", body,
              f"for (int a = {r - 1}; a >= 0; a--) {{",
              f"if (++c_[a] < n_[a]) {{ {step} break; }}", f"{back} c_[a] = 0;", "}", "}", "return 0;"]
    return "\n".join(lines)


# -- Equal on strings -----------------------------------------------------------------------------

_NUMERIC_EQUAL = KERNELS[("", "Equal")]


def _equal_accepts(node: Node) -> str | None:
    if _is_string(node, 0) or _is_string(node, 1):
        return None if _is_string(node, 0) and _is_string(node, 1) else "Equal of a string and a non-string"
    return _NUMERIC_EQUAL.accepts(node) if _NUMERIC_EQUAL.accepts else None


# Equal keeps one registration: this kernel, declaring the numeric kernel's types plus string
@kernel("Equal", types=_NUMERIC_EQUAL.types | STRING, typed=_NUMERIC_EQUAL.typed, accepts=_equal_accepts)
def equal(ctx: KernelCtx) -> str:
    if ctx.ins[0].dtype != DType.STRING:
        return _NUMERIC_EQUAL.fn(ctx)
    return broadcast_elements(ctx, "out0[i] = strcmp(in0[o0], in1[o1]) == 0;")


# -- StringConcat ---------------------------------------------------------------------------------

@kernel("StringConcat", types=STRING)
def string_concat(ctx: KernelCtx) -> str:
    include(ctx)
    body = ("{ const char *a_ = in0[o0], *b_ = in1[o1];\n"
            "const size_t la_ = strlen(a_), lb_ = strlen(b_);\n"
            "char *d_ = onnxc_pool_alloc(rt, la_ + lb_ + 1);\n"
            f"if (!d_) return onnxc_str_oom(rt, {who(ctx)});\n"
            "memcpy(d_, a_, la_); memcpy(d_ + la_, b_, lb_ + 1);\n"
            "out0[i] = d_; }")
    return broadcast_elements(ctx, body)


# -- RegexFullMatch -------------------------------------------------------------------------------

def _regex_accepts(node: Node) -> str | None:
    pat = node.attr("pattern")
    if not isinstance(pat, str):
        return "the pattern is not valid UTF-8" if isinstance(pat, bytes) else None
    try:
        translate(pat)
    except ValueError as e:
        return f"RE2 pattern not supported by the POSIX regex translation: {e}"
    return None


@kernel("RegexFullMatch", types=STRING, accepts=_regex_accepts)
def regex_full_match(ctx: KernelCtx) -> str:
    tr = translate(ctx.attr("pattern"))
    ctx.helper("regex_h", "#include <regex.h>")
    include(ctx)
    flags = "REG_EXTENDED | REG_NOSUB" + (" | REG_ICASE" if tr.icase else "")
    restore = "if (loc_) { uselocale(old_); freelocale(loc_); }"
    lines = []
    if tr.gnu:
        lines += ["#ifndef __GLIBC__",
                  f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: word boundaries (\\\\b) need glibc's regex\", "
                  f"{who(ctx)});", "#endif"]
    lines += ["const locale_t loc_ = newlocale(LC_ALL_MASK, \"C.UTF-8\", (locale_t)0);",
              "const locale_t old_ = loc_ ? uselocale(loc_) : (locale_t)0;",
              "regex_t re_;",
              f"const int e_ = regcomp(&re_, {c_string(tr.pattern)}, {flags});",
              "if (e_) {", "char m_[256];", "regerror(e_, &re_, m_, sizeof m_);", restore,
              f"return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: cannot compile the pattern: %s\", {who(ctx)}, m_);",
              "}",
              f"for (int64_t i = 0; i < {ctx.ins[0].numel()}; i++) out0[i] = regexec(&re_, in0[i], 0, NULL, 0) == 0;",
              "regfree(&re_);", restore, "return 0;"]
    return "\n".join(lines)


# -- StringSplit ----------------------------------------------------------------------------------

def _split_setup(ctx: KernelCtx) -> list[str]:
    include(ctx)  # onnxc_split_next
    delim, maxsplit = split_args(ctx.node)
    d = str_lit(delim or "")
    return [f"static const char delim_[] = {d};", "const size_t dlen_ = sizeof delim_ - 1;",
            f"const int64_t n_ = {ctx.ins[0].numel()};", "const char *st_; size_t ln_;", f"const int64_t ms_ = {maxsplit};"]


def _split_shape(ctx: KernelCtx) -> str:
    return "\n".join([*_split_setup(ctx), "int64_t m_ = 0;", "for (int64_t i = 0; i < n_; i++) {",
                      "const char *p_ = in0[i]; int64_t left_ = ms_, c_ = 0;",
                      "while (onnxc_split_next(&p_, delim_, dlen_, &left_, &st_, &ln_)) c_++;",
                      "if (c_ > m_) m_ = c_;", "}", ds.bind(ctx, 0, [*ctx.outs[0].dims[:-1], "m_"]), "return 0;"])


@kernel("StringSplit", shape_fn=_split_shape, types=STRING)
def string_split(ctx: KernelCtx) -> str:
    m = ctx.outs[0].dims[-1]
    return "\n".join([
        *_split_setup(ctx), f"const int64_t m_ = {m};", "for (int64_t i = 0; i < n_; i++) {",
        "const char *p_ = in0[i]; int64_t left_ = ms_, c_ = 0;",
        "while (onnxc_split_next(&p_, delim_, dlen_, &left_, &st_, &ln_)) {",
        f"if (c_ >= m_) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: more pieces than the output holds\", {who(ctx)});",
        "onnxc_str s_ = st_[ln_] == 0 ? st_ : onnxc_str_make(rt, st_, ln_);  /* a suffix is shared */",
        f"if (!s_) return onnxc_str_oom(rt, {who(ctx)});",
        "out0[i * m_ + c_++] = s_;", "}",
        "out1[i] = c_;", "for (; c_ < m_; c_++) out0[i * m_ + c_] = \"\";", "}", "return 0;"])


# -- StringNormalizer -----------------------------------------------------------------------------

def _normalizer_setup(ctx: KernelCtx) -> tuple[list[str], str | None]:
    """C declaring ``loc_`` (the case-mapping locale, or 0) and the name of the stopword test."""
    include(ctx)
    action, sensitive, stops, loc = normalizer_args(ctx.node)
    x = ctx.ins[0]
    lines = []
    if x.rank == 2 and x.shape[0] != 1:
        lines.append(f"if (({x.dims[0]}) != 1) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the input must have "
                     f"shape [C] or [1, C], got %lld rows\", {who(ctx)}, (long long)({x.dims[0]}));")
    need_locale = action != "NONE" or (stops and not sensitive)
    lines.append(f"const locale_t loc_ = {'onnxc_locale(' + str_lit(loc or '') + ')' if need_locale else '(locale_t)0'};")
    if not stops:
        return lines, None
    keys = sorted(set(stops), key=lambda s: s.encode("utf-8", "surrogateescape"))
    tab = table(ctx, "onnxc_str", [str_lit(s) for s in keys])
    fn = f"{tab}_{'stop' if sensitive else 'stopi'}"
    if sensitive:
        code = (f"static int {fn}(const char *s, locale_t loc) {{\n    (void)loc;\n    int64_t lo = 0, hi = {len(keys)};\n"
                f"    while (lo < hi) {{\n        const int64_t mid = (lo + hi) / 2;\n        const int c = strcmp({tab}[mid], s);\n"
                "        if (c == 0) return 1;\n        if (c < 0) lo = mid + 1; else hi = mid;\n    }\n    return 0;\n}")
    else:
        code = (f"static int {fn}(const char *s, locale_t loc) {{\n    for (int64_t k = 0; k < {len(keys)}; k++)\n"
                f"        if (onnxc_utf8_caseeq(s, {tab}[k], loc)) return 1;\n    return 0;\n}}")
    ctx.helper(fn, code)
    return lines, fn


def _normalizer_shape(ctx: KernelCtx) -> str:
    lines, stop = _normalizer_setup(ctx)
    c = ctx.ins[0].dims[-1]
    return "\n".join([*lines, "int64_t k_ = 0;", f"for (int64_t i = 0; i < {c}; i++) k_ += !{stop}(in0[i], loc_);",
                      "onnxc_locale_free(loc_);", ds.bind(ctx, 0, [*ctx.outs[0].dims[:-1], "k_ ? k_ : 1"]),
                      "return 0;"])


@kernel("StringNormalizer", shape_fn=_normalizer_shape, types=STRING)
def string_normalizer(ctx: KernelCtx) -> str:
    lines, stop = _normalizer_setup(ctx)
    action = normalizer_args(ctx.node)[0]
    x, y = ctx.ins[0], ctx.outs[0]
    fail_oom = f"{{ onnxc_locale_free(loc_); return onnxc_str_oom(rt, {who(ctx)}); }}"
    make = "in0[i]" if action == "NONE" else f"onnxc_str_case(rt, in0[i], {int(action == 'UPPER')}, loc_)"
    lines += ["int64_t k_ = 0;", f"for (int64_t i = 0; i < {x.dims[-1]}; i++) {{"]
    if stop:
        lines.append(f"if ({stop}(in0[i], loc_)) continue;")
        lines.append(f"if (k_ >= {y.dims[-1]}) {{ onnxc_locale_free(loc_); return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
                     f"\"%s: more elements kept than the output holds\", {who(ctx)}); }}")
    lines += [f"onnxc_str s_ = {make};", f"if (!s_) {fail_oom}", "out0[k_++] = s_;", "}"]
    if stop:
        lines.append("if (k_ == 0) out0[0] = \"\";")
    lines += ["(void)k_;", "onnxc_locale_free(loc_);", "return 0;"]
    return "\n".join(lines)
