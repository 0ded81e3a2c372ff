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

The C structure is in templates/strings_*.c.j2; this module computes the values it is rendered with.
"""

from __future__ import annotations

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.strings import normalizer_args, split_args

from ..cexpr import c_literal
from ..templating import c_string, render
from . import dynshape as ds
from . import elementwise  # noqa: F401  (registers the numeric Equal that the string variant wraps)
from .base import KERNELS, KernelCtx, kernel
from .ctables import table
from .re2_posix import translate
from .typesets import STRING


def include(ctx: KernelCtx) -> None:
    ctx.include("onnxc_strings.h")


def who(ctx: KernelCtx) -> str:
    return ctx.who


def _is_string(node: Node, i: int) -> bool:
    v = node.input(i)
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DType.STRING


def broadcast_elements(ctx: KernelCtx, body: str) -> str:
    """C running ``body`` for each output element ``i`` in order, with ``o<k>`` the element offset of
    input ``k`` under numpy broadcasting (run-time checked where dims are symbolic)."""
    y, ins, r = ctx.outs[0], ctx.ins, ctx.outs[0].rank
    flat = []  # without broadcasting: each input is read at i (same shape) or at 0 (one element)
    for x in ins:
        if tuple(x.shape) == tuple(y.shape):
            flat.append("i")
        elif all(d == 1 for d in x.shape):
            flat.append("0")
    if r == 0 or len(flat) == len(ins):
        offs = ", ".join(f"o{k} = {o}" for k, o in enumerate(flat)) if flat else "o0 = 0"
        return render("strings_broadcast.c.j2", flat=offs, total=y.numel(), body=body)
    checks, strides = [], []
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
                checks.append(f"if (({x.dims[j]}) != 1 && ({x.dims[j]}) != ({y.dims[a]})) return onnxc_fail(rt, "
                              f"ONNXC_ERR_RUNTIME, \"%s: input {k} axis {j} has %lld elements, cannot broadcast to "
                              f"%lld\", {who(ctx)}, (long long)({x.dims[j]}), (long long)({y.dims[a]}));")
        strides.append(", ".join(s))
    return render("strings_broadcast.c.j2", flat="", r=r, dims=", ".join(y.dims), checks=checks, strides=strides,
                  offs=", ".join(f"o{k} = 0" for k in range(len(ins))), total=y.numel(), body=body)


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
    ctx.include("<regex.h>")
    include(ctx)
    flags = "REG_EXTENDED | REG_NOSUB" + (" | REG_ICASE" if tr.icase else "")
    return render("strings_regex.c.j2", gnu=tr.gnu, who=who(ctx), pattern=c_string(tr.pattern), flags=flags,
                  n=ctx.ins[0].numel())


# -- StringSplit ----------------------------------------------------------------------------------

def _split(ctx: KernelCtx, shape: bool) -> str:
    """StringSplit, or its shape function."""
    include(ctx)  # onnxc_split_next
    delim, maxsplit = split_args(ctx.node)
    y = ctx.outs[0]
    return render("strings_split.c.j2", shape=shape, delim=c_literal(delim or "", DType.STRING), n=ctx.ins[0].numel(),
                  maxsplit=maxsplit, bind=ds.bind(ctx, 0, [*y.dims[:-1], "m_"]) if shape else "", m=y.dims[-1],
                  who=who(ctx))


def _split_shape(ctx: KernelCtx) -> str:
    return _split(ctx, True)


@kernel("StringSplit", shape_fn=_split_shape, types=STRING)
def string_split(ctx: KernelCtx) -> str:
    return _split(ctx, False)


# -- StringNormalizer -----------------------------------------------------------------------------

def _stopword_test(ctx: KernelCtx) -> str | None:
    """The name of the C function testing for a stopword (registered as a helper), or None."""
    _, sensitive, stops, _ = normalizer_args(ctx.node)
    if not stops:
        return None
    keys = sorted(set(stops), key=lambda s: s.encode("utf-8", "surrogateescape"))
    tab = table(ctx, "onnxc_str", [c_literal(s, DType.STRING) for s in keys])
    fn = f"{tab}_{'stop' if sensitive else 'stopi'}"
    ctx.helper(fn, render("strings_stopwords.c.j2", fn=fn, sensitive=sensitive, n=len(keys), tab=tab))
    return fn


def _normalizer(ctx: KernelCtx, shape: bool) -> str:
    """StringNormalizer, or its shape function."""
    include(ctx)
    action, sensitive, stops, loc = normalizer_args(ctx.node)
    x, y = ctx.ins[0], ctx.outs[0]
    need_locale = action != "NONE" or (stops and not sensitive)
    locale = f"onnxc_locale({c_literal(loc or '', DType.STRING)})" if need_locale else "(locale_t)0"
    make = "in0[i]" if action == "NONE" else f"onnxc_str_case(rt, in0[i], {int(action == 'UPPER')}, loc_)"
    return render("strings_normalizer.c.j2", shape=shape, rows_check=x.rank == 2 and x.shape[0] != 1,
                  rows=x.dims[0] if x.rank else "", who=who(ctx), locale=locale, stop=_stopword_test(ctx), C=x.dims[-1], K=y.dims[-1],
                  make=make, bind=ds.bind(ctx, 0, [*y.dims[:-1], "k_ ? k_ : 1"]) if shape else "")


def _normalizer_shape(ctx: KernelCtx) -> str:
    return _normalizer(ctx, True)


@kernel("StringNormalizer", shape_fn=_normalizer_shape, types=STRING)
def string_normalizer(ctx: KernelCtx) -> str:
    return _normalizer(ctx, False)
