"""Kernels of ai.onnx.ml LabelEncoder, ArrayFeatureExtractor and Binarizer.

LabelEncoder looks keys up by binary search in a table sorted at compile time (strcmp order for
strings; a NaN key is tested separately), with the values in a parallel table; keys and numeric values
are data in the weights blob (codegen/kernels/strpool.py for strings), string values pointers to static
literals, so no string is made at run time. Opset 1's int64 -> string form
indexes ``classes_strings``. ArrayFeatureExtractor gathers along the last axis after checking every
index (like onnxruntime, negative indices are errors); it moves strings as pointers. Binarizer
writes ``x > threshold`` as 1 or 0 in the input's type; a NaN input is a run-time error, as in
onnxruntime (the reference writes 0).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node
from onnxc.passes.shapes.ml import ML, label_map

from ..cexpr import c_literal, c_product
from .base import KernelCtx, kernel
from .ctables import typed_table
from .strpool import string_pool

_LABEL_TYPES = frozenset({DType.STRING, DType.INT64, DType.INT32, DType.INT16, DType.FLOAT, DType.DOUBLE})


def _label_accepts(node: Node) -> str | None:
    """The value type (the output's) is one of the key types too (``types=`` declares the keys')."""
    t = getattr(node.outputs[0], "type", None)
    if t is not None and getattr(t, "dtype", None) is not None and t.dtype not in _LABEL_TYPES:
        return f"{t.dtype.short} values are not supported"
    return None


@kernel("LabelEncoder", domain=ML, types=_LABEL_TYPES, accepts=_label_accepts)
def label_encoder(ctx: KernelCtx) -> str:
    m = label_map(ctx.node)
    x = ctx.ins[0]
    if m.value_type == DType.STRING:  # the output points at the strings: static literals
        vals = typed_table(ctx, m.value_type, m.values)
    else:
        vals = ctx.blob_table("values", np.asarray(m.values, dtype=m.value_type.np))
    dflt = c_literal(m.default, m.value_type)
    lines = [f"const int64_t n_ = {x.numel()};", "for (int64_t i = 0; i < n_; i++) {"]
    if m.index:
        lines += ["const int64_t v = (int64_t)in0[i];",
                  f"out0[i] = v >= 0 && v < {len(m.values)} ? {vals}[v] : {dflt};", "}", "return 0;"]
        return "\n".join(lines)
    if m.key_type == DType.STRING:
        key = string_pool(ctx, "keys", m.keys)
        lines += ["const char *v = in0[i];", "int64_t lo = 0, hi = " + str(len(m.keys)) + ";", "int hit = 0;",
                  "while (lo < hi) {", "const int64_t mid = (lo + hi) / 2;", f"const int c = strcmp({key('mid')}, v);",
                  "if (c == 0) { lo = mid; hit = 1; break; }", "if (c < 0) lo = mid + 1; else hi = mid;", "}"]
    else:
        floats = m.key_type in (DType.FLOAT, DType.DOUBLE)
        kt = "double" if floats else "int64_t"
        keys = ctx.blob_table("keys", np.asarray(m.keys, dtype=np.float64 if floats else np.int64))
        lines.append(f"const {kt} v = ({kt})in0[i];")
        if floats:
            nan = dflt if m.nan_value is None else c_literal(m.nan_value, m.value_type)
            lines.append(f"if (v != v) {{ out0[i] = {nan}; continue; }}")
        lines += [f"int64_t lo = 0, hi = {len(m.keys)};", "while (lo < hi) {", "const int64_t mid = (lo + hi) / 2;",
                  f"if ({keys}[mid] < v) lo = mid + 1; else hi = mid;", "}",
                  f"const int hit = lo < {len(m.keys)} && {keys}[lo] == v;"]
    lines += [f"out0[i] = hit ? {vals}[lo] : {dflt};", "}", "return 0;"]
    return "\n".join(lines)


_AFE_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32, DType.STRING})  # the spec's
_BINARIZER_TYPES = frozenset({DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32})


@kernel("ArrayFeatureExtractor", domain=ML, types=_AFE_TYPES)
def array_feature_extractor(ctx: KernelCtx) -> str:
    x, ind = ctx.ins[0], ctx.ins[1]
    who = ctx.who
    return "\n".join([
        f"const int64_t c_ = {x.dims[-1]}, rows_ = {c_product(x.dims[:-1]) if x.rank > 1 else '1'}, k_ = {ind.numel()};",
        "for (int64_t k = 0; k < k_; k++)",
        f"if (in1[k] < 0 || in1[k] >= c_) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: index %lld is out of range "
        f"for the last axis of size %lld\", {who}, (long long)in1[k], (long long)c_);",
        "for (int64_t r = 0; r < rows_; r++)",
        "for (int64_t k = 0; k < k_; k++) out0[r * k_ + k] = in0[r * c_ + in1[k]];",
        "return 0;"])


@kernel("Binarizer", domain=ML, types=_BINARIZER_TYPES)
def binarizer(ctx: KernelCtx) -> str:
    x = ctx.ins[0]
    thr = c_literal(float(ctx.attr("threshold", 0.0)), DType.DOUBLE)
    lines = [f"const int64_t n_ = {x.numel()};"]
    if ctx.node.inputs[0].type.dtype in (DType.FLOAT, DType.DOUBLE):  # onnxruntime refuses NaN inputs
        lines += ["for (int64_t i = 0; i < n_; i++)",
                  f"if (in0[i] != in0[i]) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: input element %lld is NaN "
                  f"(Binarizer has no value for NaN)\", {ctx.who}, (long long)i);"]
    lines += [f"for (int64_t i = 0; i < n_; i++) out0[i] = ({x.ctype})((double)in0[i] > {thr});", "return 0;"]
    return "\n".join(lines)
