"""ai.onnx.ml LinearRegressor and LinearClassifier (opset 1) as MatMul + Add + post transform.

X (float, double, int64 or int32; ``[N, C]``, or ``[C]`` read as one row) is cast to float, as
onnxruntime does, and multiplied by the coefficients read as ``[targets, C]`` rows. The semantics
follow onnxruntime 1.32, which users compare against; where the ONNX reference evaluator differs:

- Post transforms run per row over the targets/classes: LOGISTIC (Sigmoid), SOFTMAX, SOFTMAX_ZERO
  (scores within 1e-7 of zero stay zero and take no part in the sum; an all-zero row is 0/0 = NaN,
  the reference gives 0.5) and PROBIT with onnxruntime's approximation of erfinv (a = 0.147, good
  to about 1e-3), computed in double: near p = 0.5 it cancels, and onnxruntime's float result is
  up to ~2e-5 away from the formula's value. With one target (LinearRegressor ``targets=1``, or
  LinearClassifier with one coefficient row and no labels) onnxruntime applies only PROBIT and
  leaves the other transforms out; onnxc does the same (the reference applies them, or refuses).
- LinearClassifier labels come from the raw scores: the first highest score (ArgMax), or with one
  coefficient row ``score > 0`` picks the second of two labels (0/1 when no labels are given).
  With one row and two labels, Z has two columns ``[1 - s, s]``: ``s`` is the raw score for NONE,
  SOFTMAX and SOFTMAX_ZERO and the sigmoid of it for LOGISTIC (the reference gives ``[-s, s]``
  then the transform). PROBIT in that case is refused: onnxruntime writes only half of Z there.
- LinearClassifier's class count K is the number of intercepts, as in onnxruntime; K > 1 needs at
  least K labels (extra labels are never chosen), K = 1 with labels needs exactly 2. Its coefficients
  are read as K rows of C (X's features) from the first K x C values: onnxruntime accepts any multiple
  of K from there on and ignores the rest (its sample ``logreg_iris.onnx`` has 12 coefficients for 3
  classes over 2 features), where the reference reshapes all of them into rows of C (6 classes there).
  Omitted intercepts (onnxruntime refuses them) are zeros, K then coming from the labels: L labels
  are L classes, except 2 labels over exactly C coefficients (one score); without labels, C
  coefficients are one score.
- ``multi_class`` is ignored, as by onnxruntime and the reference.
- LinearRegressor reads the first ``targets`` x C coefficients (onnxruntime ignores extra ones, the
  reference reshapes them all) and, like onnxruntime, ignores intercepts unless there is exactly one
  per target (the reference broadcasts them). It accepts non-float inputs (onnxruntime has a float
  kernel only).
- Malformed attributes (too few coefficients, labels that do not fit the class count, unknown
  post_transform) are compile-time errors naming the node and attribute.
"""

from __future__ import annotations

import math

import numpy as np

from onnxc.ir import DType, Value
from onnxc.passes.shapes.ml import ML

from .builder import Builder
from .registry import expansion

NUMERIC_IN = (DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32)
POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")


def text(v) -> str:
    """A STRING attribute value (stored as bytes or str) as str."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def post_transform(b: Builder) -> str:
    """The node's ``post_transform`` attribute, checked."""
    pt = text(b.attr("post_transform", "NONE"))
    if pt not in POST_TRANSFORMS:
        raise b.fail(f"attribute post_transform: unknown value {pt!r} (expected one of {', '.join(POST_TRANSFORMS)})")
    return pt


def float_rows(b: Builder) -> tuple[Value, int]:
    """Input 0 as a float ``[N, C]`` matrix (a 1-D input is one row) and its static feature count C."""
    b.require_types([0], NUMERIC_IN)
    shape = b.shape(0)
    if len(shape) not in (1, 2):
        raise b.fail(f"X must have shape [N, C] or [C], got rank {len(shape)}")
    c = shape[-1]
    if not isinstance(c, int):
        raise b.unsupported(f"the feature count of X (its last dimension, {c}) must be static")
    x = b.input(0)
    if b.dtype(0) != DType.FLOAT:
        x = b.cast(x, DType.FLOAT)
    if len(shape) == 1:
        x = b.reshape(x, [1, c])
    return x, c


def floats_attr(b: Builder, name: str) -> list[float]:
    return [float(v) for v in (b.attr(name) or [])]


def affine(b: Builder, x: Value, c: int, coefficients: list[float], intercepts: list[float], rows: int) -> Value:
    """``x @ W.T + intercepts``, W the first ``rows`` x ``c`` coefficients: ``[N, rows]`` float scores."""
    w = np.asarray(coefficients[:rows * c], dtype=np.float32).reshape(rows, c).T
    y = b.op("MatMul", x, b.const(np.ascontiguousarray(w), tag="coefficients"))
    if intercepts and any(v != 0.0 for v in intercepts):
        y = b.op("Add", y, b.const(np.asarray(intercepts, dtype=np.float32), tag="intercepts"))
    return y


def probit(b: Builder, p: Value, out: Value | None = None) -> Value:
    """onnxruntime's ``sqrt(2) * ErfInv(2p - 1)`` with its approximation of erfinv (a = 0.147).

    Computed in double: near p = 0.5 the formula cancels, and float rounding alone moves the result
    by ~1e-5 (onnxruntime's float result is that far from the formula's value)."""
    f = DType.DOUBLE
    p = b.cast(p, f)
    x = b.op("Sub", b.op("Mul", p, b.scalar(2.0, f)), b.scalar(1.0, f))
    sign = b.op("Where", b.op("Less", x, b.scalar(0.0, f)), b.scalar(-1.0, f), b.scalar(1.0, f))
    log = b.op("Log", b.op("Mul", b.op("Sub", b.scalar(1.0, f), x), b.op("Add", b.scalar(1.0, f), x)))
    v = b.op("Add", b.scalar(2.0 / (math.pi * 0.147), f), b.op("Mul", b.scalar(0.5, f), log))
    v2 = b.op("Mul", b.scalar(1.0 / 0.147, f), log)
    v3 = b.op("Sub", b.op("Sqrt", b.op("Sub", b.op("Mul", v, v), v2)), v)
    return b.cast(b.op("Mul", b.op("Mul", sign, b.op("Sqrt", v3)), b.scalar(math.sqrt(2.0), f)), DType.FLOAT, out=out)


def softmax_zero(b: Builder, s: Value, out: Value | None = None) -> Value:
    """Softmax over the last axis that leaves scores within 1e-7 of zero at (about) zero and out of the sum."""
    f = DType.FLOAT
    m = b.reduce("ReduceMax", s, [-1], keepdims=1)
    nonzero = b.op("Greater", b.op("Abs", s), b.scalar(1e-7, f))
    e = b.op("Exp", b.op("Sub", s, m))
    total = b.reduce("ReduceSum", b.op("Where", nonzero, e, b.scalar(0.0, f)), [-1], keepdims=1)
    num = b.op("Where", nonzero, e, b.op("Mul", s, b.op("Exp", b.op("Neg", m))))
    return b.op("Div", num, total, out=out)


def apply_post_transform(b: Builder, s: Value, pt: str, out: Value | None = None) -> Value:
    """``pt`` applied to float scores ``[N, K]`` per row (K >= 2), written to ``out`` when given."""
    if pt == "LOGISTIC":
        return b.op("Sigmoid", s, out=out)
    if pt == "SOFTMAX":
        return b.op("Softmax", s, axis=-1, out=out)
    if pt == "SOFTMAX_ZERO":
        return softmax_zero(b, s, out)
    if pt == "PROBIT":
        return probit(b, s, out)
    return s if out is None else b.identity(s, out)


@expansion("LinearRegressor", domain=ML)
def linear_regressor(b: Builder) -> None:
    pt = post_transform(b)
    x, c = float_rows(b)
    targets = b.attr("targets", 1)
    if targets < 1:
        raise b.fail(f"attribute targets must be >= 1, got {targets}")
    coefficients, intercepts = floats_attr(b, "coefficients"), floats_attr(b, "intercepts")
    if len(coefficients) < targets * c:
        raise b.fail(f"attribute coefficients has {len(coefficients)} values, expected at least {targets} targets "
                     f"x {c} features of X = {targets * c}")
    if len(intercepts) != targets:  # onnxruntime uses intercepts only when there is one per target
        intercepts = []
    y = affine(b, x, c, coefficients, intercepts, targets)
    if targets == 1:  # onnxruntime's one-score case: only PROBIT applies
        pt = "PROBIT" if pt == "PROBIT" else "NONE"
    apply_post_transform(b, y, pt, out=b.output(0))


def class_labels(b: Builder) -> tuple[np.ndarray | None, str | None]:
    """The labels (int64 or object array) and the attribute name they came from; (None, None) if unset."""
    ints, strs = b.attr("classlabels_ints"), b.attr("classlabels_strings")
    if ints and strs:
        raise b.fail("only one of the attributes classlabels_ints and classlabels_strings may be set")
    if strs:
        return np.array([text(s) for s in strs], dtype=object), "classlabels_strings"
    if ints:
        return np.asarray(list(ints), dtype=np.int64), "classlabels_ints"
    return None, None


def class_count(b: Builder, c: int, n_coef: int, n_icp: int, labels: np.ndarray | None, attr: str | None) -> int:
    """LinearClassifier's class count K (rows of coefficients used), checked as onnxruntime checks it.

    K is the number of intercepts (onnxruntime's rule); without intercepts (which onnxruntime refuses)
    it comes from the labels: L labels are L classes, except two labels over exactly C coefficients,
    the binary one-row case; with neither, C coefficients are one class. K > 1 needs at least K labels
    (extra ones are never chosen), K = 1 with labels needs exactly 2."""
    n_labels = 0 if labels is None else len(labels)
    if n_icp:
        k = n_icp
    elif n_labels:
        k = 1 if n_labels == 2 and n_coef == c else n_labels
    else:
        k = n_coef // c if n_coef % c == 0 else 0
        if k == 0:
            raise b.fail(f"attribute coefficients has {n_coef} values, not a multiple of the {c} features of X")
    if k == 1 and n_labels not in (0, 2):
        raise b.fail(f"attribute {attr} has {n_labels} labels; one class score (binary) needs 2")
    if k > 1 and labels is None:
        raise b.fail(f"one of the attributes classlabels_ints or classlabels_strings is required ({k} classes)")
    if k > 1 and n_labels < k:
        raise b.fail(f"attribute {attr} has {n_labels} labels but {'intercepts define' if n_icp else 'there are'} "
                     f"{k} classes")
    if n_coef < k * c or n_coef % k:
        raise b.fail(f"attribute coefficients has {n_coef} values, expected {k} classes x {c} features of X = "
                     f"{k * c}" + (f" or a larger multiple of {k} (the first {k * c} are used)" if n_coef > k * c else ""))
    return k


@expansion("LinearClassifier", domain=ML)
def linear_classifier(b: Builder) -> None:
    pt = post_transform(b)
    x, c = float_rows(b)
    coefficients = floats_attr(b, "coefficients")
    if not coefficients:
        raise b.fail("attribute coefficients is required")
    intercepts = floats_attr(b, "intercepts")
    labels, attr = class_labels(b)
    rows = class_count(b, c, len(coefficients), len(intercepts), labels, attr)
    # onnxruntime reads the first rows x C coefficients (a model trained on more features than X
    # declares, like its sample logreg_iris.onnx, keeps working); the reference reshapes all of them
    scores = affine(b, x, c, coefficients, intercepts, rows)
    y_out, z_out = b.output(0), b.output(1)
    if rows == 1:
        if b.used(0):
            positive = b.op("Greater", b.reshape(scores, [-1]), b.scalar(0.0, DType.FLOAT))
            table = b.const(labels if labels is not None else np.array([0, 1], np.int64), tag="labels")
            b.op("Gather", table, b.cast(positive, DType.INT64), axis=0, out=y_out)
        if not b.used(1):
            return
        if labels is None:  # onnxruntime's one-score case: only PROBIT applies
            apply_post_transform(b, scores, "PROBIT" if pt == "PROBIT" else "NONE", out=z_out)
            return
        if pt == "PROBIT":
            raise b.unsupported("post_transform PROBIT with one class score and two class labels is not "
                                "supported (onnxruntime leaves half of the scores unwritten there)")
        p = b.op("Sigmoid", scores) if pt == "LOGISTIC" else scores
        b.op("Concat", b.op("Sub", b.scalar(1.0, DType.FLOAT), p), p, axis=1, out=z_out)
        return
    if b.used(0):
        best = b.op("ArgMax", scores, axis=1, keepdims=0)
        b.op("Gather", b.const(labels, tag="labels"), best, axis=0, out=y_out)
    if b.used(1):
        apply_post_transform(b, scores, pt, out=z_out)
