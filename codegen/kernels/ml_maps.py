"""Kernels of the ai.onnx.ml map ops: ZipMap (tensor -> sequence of maps), CastMap and DictVectorizer
(map -> tensor). Maps are ``onnxc_value`` pairs of 1-D tensors (keys, values), see
runtime_c/onnxc_value.h.

ZipMap builds one map per row, each in one allocation (onnxc_map_block); every map owns a copy of the class labels, in ascending order as
onnxruntime's maps are (string labels point at literals of the library, as LabelEncoder's values
do), and of its row's scores in that order. CastMap orders the entries by
key (a map read from Python keeps insertion order) and, as onnxruntime does, writes floats as
strings with ``%f`` and fills the SPARSE form's missing string entries with ``"0.f"``; a SPARSE key
outside [0, max_map) is an error. DictVectorizer looks every key up in the vocabulary (binary search
over a table sorted at compile time); keys missing from the vocabulary are skipped, as in
onnxruntime, and absent entries are 0 (an empty string for string values).
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.shapes.ml import ML
from onnxc.passes.shapes.ml_maps import cast_map_form, class_labels, vocabulary

from ..cexpr import c_literal
from .base import KernelCtx, kernel
from .ctables import table, typed_table


def _prelude(ctx: KernelCtx) -> list[str]:
    ctx.include("onnxc_value.h")
    return [f"const char *const NODE_ = {ctx.who};"]


_OOM = 'return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory", NODE_);'


@kernel("ZipMap", domain=ML, allocates=True, types={DType.FLOAT})
def zip_map(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    key, labels = class_labels(ctx.node)
    c = len(labels)
    order = sorted(range(c), key=lambda i: _sort_key(labels[i], key))  # keys ascending, as onnxruntime
    keys = typed_table(ctx, key, [labels[i] for i in order])
    perm = None if order == list(range(c)) else table(ctx, "int64_t", [str(i) for i in order])
    rows = x.dims[0] if x.rank == 2 else "1"
    L = _prelude(ctx)
    L += [f"const int64_t n_ = {rows}, c_ = {x.dims[-1]};",
          f"if (c_ != {c}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the input has %lld columns for {c} class "
          "labels\", NODE_, (long long)c_);",
          "onnxc_value *s = onnxc_value_new(ONNXC_SEQUENCE, 1);",
          f"if (!s || (n_ && !(s->items = (onnxc_value **)calloc((size_t)n_, sizeof(onnxc_value *))))) "
          f"{{ onnxc_value_free(s); {_OOM} }}",
          "s->cap = n_;",
          "int ok_ = 1;",
          "onnxc_tensor k_, v_;",
          "memset(&k_, 0, sizeof k_); memset(&v_, 0, sizeof v_);",
          f"k_.rank = v_.rank = 1; k_.dims[0] = v_.dims[0] = {c}; k_.dtype = {int(key)}; v_.dtype = 1;",
          f"k_.data = (void *){keys};",
          "for (int64_t r = 0; r < n_ && ok_; r++) {",
          f"    v_.data = (void *)(in0 + r * {c});",
          "    onnxc_value *m = s->items[r] = onnxc_map_block(&k_, &v_);  /* one allocation per row */",
          "    s->n = r + 1;",
          "    ok_ = m != NULL;",
          *([] if perm is None else [
              "    if (m) { float *w_ = (float *)m->items[1]->t.data;",
              f"        for (int64_t j = 0; j < {c}; j++) w_[j] = in0[r * {c} + {perm}[j]]; }}"]),
          "}",
          f"if (!ok_) {{ onnxc_value_free(s); {_OOM} }}",
          "*out0 = onnxc_value_desc(s);",
          "return 0;"]
    return "\n".join(L)


def _sort_key(v, key: DType):
    """Keys in the order of the C comparisons (strcmp: UTF-8 bytes)."""
    return v.encode("utf-8", "surrogateescape") if key == DType.STRING else v


def _map_checks(x_key: DType, x_val: DType) -> list[str]:
    """Check that in0 is a map with keys/values of the declared types; sets ``n_`` (its size)."""
    return ["if (in0->kind != ONNXC_MAP || in0->n != 2 || in0->items[0]->kind != ONNXC_TENSOR || "
            f"in0->items[0]->t.dtype != {int(x_key)} || in0->items[1]->t.dtype != {int(x_val)} || "
            "in0->items[0]->t.rank != 1 || in0->items[1]->t.rank != 1 || "
            "in0->items[0]->t.dims[0] != in0->items[1]->t.dims[0])",
            "    return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the input is not a map of the declared type\", NODE_);",
            "const int64_t n_ = in0->items[0]->t.dims[0];"]


def _cast_map_shape(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    t = ctx.node.inputs[0].type
    L = [f"const char *const NODE_ = {ctx.who};", *_map_checks(t.key, t.value.dtype)]
    L += [f"{lv} = n_;" for lv in ctx.defines.values()]  # the dense form's column count
    L.append("return 0;")
    return "\n".join(L)


@kernel("CastMap", domain=ML, types={DType.FLOAT, DType.STRING}, shape_fn=_cast_map_shape)
def cast_map(ctx: KernelCtx) -> str:
    t = ctx.node.inputs[0].type
    src = t.value.dtype
    to, sparse, max_map = cast_map_form(ctx.node)
    L = _prelude(ctx)
    L += _map_checks(t.key, src)
    L += ["const int64_t *k_ = (const int64_t *)in0->items[0]->t.data;",
          f"const {src.c} *v_ = (const {src.c} *)in0->items[1]->t.data;"]
    if to == DType.STRING or src == DType.STRING:
        ctx.include("onnxc_strings.h")
    if src == DType.STRING and to != DType.STRING:
        conv = "strtof(v_[i], NULL)" if to == DType.FLOAT else "(int64_t)strtoll(v_[i], NULL, 10)"
    elif src == DType.STRING or to != DType.STRING:
        conv = "v_[i]" if src == DType.STRING else f"({to.c})v_[i]"
    else:
        conv = None  # float -> string: formatted below
    if sparse:
        zero = '"0.f"' if to == DType.STRING else "0"
        L += [f"for (int64_t j = 0; j < {max_map}; j++) out0[j] = {zero};",
              "for (int64_t i = 0; i < n_; i++) {",
              f"    if (k_[i] < 0 || k_[i] >= {max_map}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: key %lld "
              f"is outside [0, max_map = {max_map})\", NODE_, (long long)k_[i]);",
              "    const int64_t j = k_[i];"]
    else:  # dense: rank of each key among the keys (they are distinct)
        L += ["for (int64_t i = 0; i < n_; i++) {", "    int64_t j = 0;",
              "    for (int64_t q = 0; q < n_; q++) j += k_[q] < k_[i];"]
    if conv is None:
        L += ["    char b_[64]; const int len_ = snprintf(b_, sizeof b_, \"%f\", (double)v_[i]);",
              "    out0[j] = onnxc_str_make(rt, b_, len_ > 0 ? (size_t)len_ : 0);",
              "    if (!out0[j]) return onnxc_str_oom(rt, NODE_);"]
    else:
        L.append(f"    out0[j] = {conv};")
    L += ["}", "return 0;"]
    return "\n".join(L)


@kernel("DictVectorizer", domain=ML, types={DType.INT64, DType.FLOAT, DType.DOUBLE, DType.STRING}, typed="out0")
def dict_vectorizer(ctx: KernelCtx) -> str:
    t = ctx.node.inputs[0].type
    key, vocab = vocabulary(ctx.node)
    val = t.value.dtype
    order = sorted(range(len(vocab)), key=lambda i: _sort_key(vocab[i], key))
    keys = typed_table(ctx, key, [vocab[i] for i in order])
    pos = table(ctx, "int64_t", [str(i) for i in order])
    L = _prelude(ctx)
    L += _map_checks(key, val)
    zero = c_literal("", DType.STRING) if val == DType.STRING else "0"
    L += [f"const {key.c} *k_ = (const {key.c} *)in0->items[0]->t.data;",
          f"const {val.c} *v_ = (const {val.c} *)in0->items[1]->t.data;",
          f"for (int64_t j = 0; j < {len(vocab)}; j++) out0[j] = {zero};",
          "for (int64_t i = 0; i < n_; i++) {",
          f"    int64_t lo = 0, hi = {len(vocab)};",
          "    while (lo < hi) {", "        const int64_t mid = (lo + hi) / 2;",
          f"        if ({'strcmp(' + keys + '[mid], k_[i]) < 0' if key == DType.STRING else keys + '[mid] < k_[i]'}) "
          "lo = mid + 1; else hi = mid;", "    }",
          f"    if (lo < {len(vocab)} && {'!strcmp(' + keys + '[lo], k_[i])' if key == DType.STRING else keys + '[lo] == k_[i]'}) "
          f"out0[{pos}[lo]] = v_[i];",
          "}", "return 0;"]
    return "\n".join(L)
