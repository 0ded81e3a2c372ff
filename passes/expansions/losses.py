"""Loss functions: NegativeLogLikelihoodLoss (12, 13, 22) and SoftmaxCrossEntropyLoss (12, 13).

NLL picks ``-input[n, target[n, d...], d...]`` with GatherElements on the class axis (any rank), weights
it by ``weight[target]`` and zeroes ``ignore_index`` targets. Ignored targets are replaced by class 0
before gathering, so an ignore_index outside [0, C) never reads out of range. Reductions follow the
spec: ``sum``; ``mean`` divides by the sum of the applied weights (1 per non-ignored element when there
are no weights).
SoftmaxCrossEntropyLoss is LogSoftmax over the class axis followed by NLL (the op's function body).
"""

from __future__ import annotations

from onnxc.ir import DType, Value

from .builder import Builder
from .registry import expansion

REDUCTIONS = ("none", "sum", "mean")
INDEX_TYPES = (DType.INT32, DType.INT64)


def _check(b: Builder) -> tuple[str, int | None]:
    b.require_types([0, 2])
    b.require_types([1], INDEX_TYPES)
    reduction = b.attr("reduction", "mean")
    if reduction not in REDUCTIONS:
        raise b.fail(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    r, rt = b.rank(0), b.rank(1)
    if r < 2:
        raise b.fail(f"input must have shape (N, C, d1, ...), got rank {r}")
    if rt != r - 1:
        raise b.fail(f"target must have rank {r - 1} (input rank minus 1), got {rt}")
    if b.input(2) is not None and b.rank(2) != 1:
        raise b.fail(f"weight must be 1-D of shape (C), got rank {b.rank(2)}")
    return reduction, b.attr("ignore_index")


def nll(b: Builder, x: Value, target: Value, weight: Value | None, reduction: str, ignore_index: int | None,
        out: Value) -> None:
    """Emit NegativeLogLikelihoodLoss(x, target, weight) into ``out`` (x has the type of the node's input 0)."""
    dt, tdt = b.dtype(0), b.dtype(1)
    ignored = None
    if ignore_index is not None:
        ignored = b.op("Equal", target, b.scalar(ignore_index, tdt), tag="ignored")
        target = b.op("Where", ignored, b.scalar(0, tdt), target, tag="target")
    picked = b.op("GatherElements", x, b.unsqueeze(target, [1]), axis=1)
    loss = b.op("Neg", b.squeeze(picked, [1]))
    zero = b.scalar(0, dt)
    if ignored is not None:
        loss = b.op("Where", ignored, zero, loss)
    w = None
    if weight is not None:
        w = b.op("Gather", weight, target, axis=0, tag="w")
        if ignored is not None:
            w = b.op("Where", ignored, zero, w, tag="w")
        loss = b.op("Mul", loss, w)
    elif ignored is not None and reduction == "mean":
        w = b.op("Where", ignored, zero, b.scalar(1, dt), tag="w")
    if reduction == "none":
        b.identity(loss, out)
    elif reduction == "sum":
        b.reduce("ReduceSum", loss, None, keepdims=0, out=out)
    elif w is None:
        b.reduce("ReduceMean", loss, None, keepdims=0, out=out)
    else:
        total = b.reduce("ReduceSum", loss, None, keepdims=0)
        wsum = b.reduce("ReduceSum", w, None, keepdims=0)
        b.op("Div", total, wsum, out=out)


@expansion("NegativeLogLikelihoodLoss", versions=(12, 10**9))
def negative_log_likelihood_loss(b: Builder) -> None:
    reduction, ignore_index = _check(b)
    nll(b, b.input(0), b.input(1), b.input(2), reduction, ignore_index, b.output(0))


@expansion("SoftmaxCrossEntropyLoss", versions=(12, 10**9))
def softmax_cross_entropy_loss(b: Builder) -> None:
    reduction, ignore_index = _check(b)
    log_prob = b.op("LogSoftmax", b.input(0), axis=1, out=b.output(1))
    nll(b, log_prob, b.input(1), b.input(2), reduction, ignore_index, b.output(0))
