"""Shape rules of the random generators: RandomUniform, RandomNormal (shape from an attribute),
RandomUniformLike, RandomNormalLike (shape of the input), Bernoulli and Multinomial.

None of them has a fold rule: their outputs differ from call to call unless seeded, and folding a
seeded node would only freeze what the kernel computes anyway. The ``seed`` attribute is read here
for the kernels (codegen/kernels/random.py), which reproduce numpy's ``RandomState(seed)``.
"""

from __future__ import annotations

import math

from onnxc.ir import DType, Node, TensorType

from .common import fail, shape_of, tensor_type
from .registry import shape_rule

HALF_FLOATS = frozenset({DType.FLOAT16, DType.BFLOAT16})
REAL_FLOATS = frozenset({DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16})
BERNOULLI_OUT = REAL_FLOATS | frozenset({DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64,
                                         DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})


def seed_of(node: Node) -> int | None:
    """The node's seed as numpy's ``RandomState(int(seed))`` takes it, or None when the node has no seed
    (a fresh one is drawn on every call). numpy accepts 0 <= seed < 2**32; other seeds, valid in ONNX,
    wrap modulo 2**32."""
    s = node.attr("seed")
    if s is None:
        return None
    s = float(s)
    if not math.isfinite(s):
        raise fail(node, f"seed must be a finite number, got {s}")
    return int(s) % 2**32  # int(): truncation toward zero, like the reference's int(seed)


def out_dtype(node: Node, default: DType | None, allowed: frozenset) -> DType:
    """The ``dtype`` attribute (or ``default``), checked against ``allowed``."""
    dt = node.attr("dtype")
    if dt is None or int(dt) == 0:
        if default is None:
            raise fail(node, "attribute dtype is required here (the input type is not a valid output type)")
        dt = default
    try:
        dt = DType(int(dt))
    except ValueError:
        raise fail(node, f"dtype {dt} is not an ONNX element type") from None
    if dt not in allowed:
        raise fail(node, f"dtype {dt.short} is not a valid output type (allowed: "
                         f"{', '.join(sorted(d.short for d in allowed))})")
    return dt


@shape_rule("RandomUniform", "RandomNormal")
def _random(node: Node) -> list:
    shape = node.attr("shape")
    if shape is None:
        raise fail(node, "attribute shape is required")
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise fail(node, f"shape {list(shape)} has a negative dimension")
    seed_of(node)
    return [TensorType(out_dtype(node, DType.FLOAT, REAL_FLOATS), shape)]


@shape_rule("RandomUniformLike", "RandomNormalLike")
def _random_like(node: Node) -> list:
    t = tensor_type(node, 0)
    seed_of(node)
    default = t.dtype if t.dtype in REAL_FLOATS else None
    return [TensorType(out_dtype(node, default, REAL_FLOATS), t.shape)]


@shape_rule("Bernoulli")
def _bernoulli(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in REAL_FLOATS:
        raise fail(node, f"input must hold probabilities (a float type), got {t.dtype.short}")
    seed_of(node)
    return [TensorType(out_dtype(node, t.dtype, BERNOULLI_OUT), t.shape)]


@shape_rule("Multinomial")
def _multinomial(node: Node) -> list:
    t = tensor_type(node, 0)
    x = shape_of(node, 0)
    if t.dtype not in REAL_FLOATS:
        raise fail(node, f"input must hold log-probabilities (a float type), got {t.dtype.short}")
    if len(x) != 2:
        raise fail(node, f"input must be [batch_size, class_size], got shape {list(x)}")
    n = int(node.attr("sample_size", 1))
    if n < 1:
        raise fail(node, f"sample_size must be positive, got {n}")
    seed_of(node)
    dt = out_dtype(node, DType.INT32, frozenset({DType.INT32, DType.INT64}))
    return [TensorType(dt, (x[0], n))]
