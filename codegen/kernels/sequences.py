"""Sequence and optional ops over ``onnxc_value`` trees (runtime_c/onnxc_value.h).

Sequence values are immutable once built: ops that "modify" a sequence (SequenceInsert/Erase)
return a new value holding copies, so a sequence read by several nodes stays intact. Tensors
taken out of a value (SequenceAt, ConcatFromSequence, OptionalGetElement) are fresh allocations
handed to the run function (``allocates=True``), which reads their run-time dims. The loops of
SplitToSequence and ConcatFromSequence are in templates/sequences_*.c.j2.
"""

from __future__ import annotations

from ..templating import render
from .base import KernelCtx, Operand, kernel
from .control_flow import describe
from .typesets import STORABLE, STRING

# element types of the tensors in sequences/optionals: copied as bytes (strings as their pointers)
ITEM_TYPES = STORABLE | STRING
OOM = 'return onnxc_fail(rt, ONNXC_ERR_MEMORY, "%s: out of memory", NODE_);'


def _prelude(ctx: KernelCtx) -> list[str]:
    ctx.include("onnxc_value.h")

    return [f"const char *const NODE_ = {ctx.who};"]


def _position(op: Operand | None, n: str, default: str, upper: str, var: str = "pos_") -> list[str]:
    """Read a position input into ``var`` (0-based), accepting -n..upper-1; fail outside."""
    if op is None:
        return [f"int64_t {var} = {default};"]
    return [f"int64_t {var} = (int64_t){op.ptr}[0];",
            f"if ({var} < -({n}) || {var} >= {upper}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
            f"\"%s: position %lld is out of range for a sequence of length %lld\", NODE_, (long long){var}, "
            f"(long long)({n}));",
            f"if ({var} < 0) {var} += {n};"]


def _item_from(op: Operand, var: str) -> list[str]:
    """``onnxc_value *var``: a tensor value copying operand ``op``."""
    return ["{ onnxc_tensor d_; memset(&d_, 0, sizeof d_);", *("  " + x for x in describe(op, "d_")),
            f"  {var} = onnxc_value_from_tensor(&d_); }}"]


@kernel("SequenceEmpty", allocates=True, types=ITEM_TYPES, typed="out0")
def sequence_empty(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    dt = int(ctx.node.attr("dtype", 1))
    L += [f"onnxc_value *s = onnxc_value_new(ONNXC_SEQUENCE, {dt});", f"if (!s) {OOM}",
          "*out0 = onnxc_value_desc(s);", "return 0;"]
    return "\n".join(L)


@kernel("SequenceConstruct", allocates=True, types=ITEM_TYPES)
def sequence_construct(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    L += [f"onnxc_value *s = onnxc_value_new(ONNXC_SEQUENCE, {int(ctx.ins[0].dtype)}), *it = NULL;",
          f"if (!s) {OOM}"]
    for op in ctx.ins:
        L += _item_from(op, "it")
        L += ["if (!it || onnxc_seq_insert(s, s->n, it)) { onnxc_value_free(it); onnxc_value_free(s); "
              + OOM + " }"]
    L += ["*out0 = onnxc_value_desc(s);", "return 0;"]
    return "\n".join(L)


@kernel("SequenceInsert", allocates=True, types=ITEM_TYPES, typed="in1")
def sequence_insert(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    pos = ctx.ins[2] if len(ctx.ins) > 2 else None
    L += _position(pos, "in0->n", "in0->n", "in0->n + 1")
    L += [f"if (in0->n && in0->elem_dtype != {int(ctx.ins[1].dtype)}) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "
          "\"%s: inserting a tensor of another element type\", NODE_);",
          "onnxc_value *s = onnxc_value_clone(in0), *it = NULL;", f"if (!s) {OOM}",
          f"s->elem_dtype = {int(ctx.ins[1].dtype)};"]
    L += _item_from(ctx.ins[1], "it")
    L += ["if (!it || onnxc_seq_insert(s, pos_, it)) { onnxc_value_free(it); onnxc_value_free(s); " + OOM + " }",
          "*out0 = onnxc_value_desc(s);", "return 0;"]
    return "\n".join(L)


@kernel("SequenceErase", allocates=True, types=ITEM_TYPES)
def sequence_erase(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    pos = ctx.ins[1] if len(ctx.ins) > 1 else None
    L += ["if (in0->n == 0) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: erasing from an empty sequence\", "
          "NODE_);"]
    L += _position(pos, "in0->n", "in0->n - 1", "in0->n")
    L += ["onnxc_value *s = onnxc_value_clone(in0);", f"if (!s) {OOM}",
          "onnxc_value_free(s->items[pos_]);",
          "memmove(s->items + pos_, s->items + pos_ + 1, (size_t)(s->n - pos_ - 1) * sizeof(onnxc_value *));",
          "s->n--;", "*out0 = onnxc_value_desc(s);", "return 0;"]
    return "\n".join(L)


def _copy_out(var: str, expect_dtype: int, rank: int) -> list[str]:
    """Copy tensor value ``var`` into descriptor out0, checking element type and rank."""
    return [f"if ({var}->kind != ONNXC_TENSOR || {var}->t.dtype != {expect_dtype} || {var}->t.rank != {rank}) "
            "return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the element is not a rank-"
            f"{rank} tensor of type {expect_dtype}\", NODE_);",
            f"if (onnxc_desc_copy(&{var}->t, out0)) {OOM}"]


@kernel("SequenceAt", allocates=True, types=ITEM_TYPES)
def sequence_at(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    L += _position(ctx.ins[1], "in0->n", "0", "in0->n")
    L += _copy_out("in0->items[pos_]", int(ctx.outs[0].dtype), ctx.outs[0].rank)
    L.append("return 0;")
    return "\n".join(L)


@kernel("SequenceLength", types=ITEM_TYPES)
def sequence_length(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    return "out0[0] = in0->n;\nreturn 0;"


@kernel("SplitToSequence", allocates=True, types=ITEM_TYPES)
def split_to_sequence(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    x = ctx.ins[0]
    split = ctx.ins[1] if len(ctx.ins) > 1 else None
    axis = ctx.attr("axis", 0) % x.rank
    keep = bool(ctx.attr("keepdims", 1)) or split is not None
    part_dims = [("n_" if a == axis else d) for a, d in enumerate(x.dims) if a != axis or keep]
    size = f"{split.ptr}[p]" if split is not None and split.rank == 1 else "(chunk_ < len_ - start_ ? chunk_ : len_ - start_)"
    return render("sequences_split.c.j2", who=ctx.who, oom=OOM, len=x.dims[axis], ct=x.ctype, dtype=int(x.dtype),
                  outer=" * ".join(["(int64_t)1"] + [f"({d})" for d in x.dims[:axis]]),
                  inner=" * ".join(["(int64_t)1"] + [f"({d})" for d in x.dims[axis + 1:]]),
                  split=split.ptr if split is not None else None, split_scalar=split is not None and split.rank == 0,
                  nparts=split.dims[0] if split is not None and split.rank == 1 else "", size=size,
                  part_dims=part_dims, x=x.ptr)


@kernel("ConcatFromSequence", allocates=True, types=ITEM_TYPES)
def concat_from_sequence(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    y = ctx.outs[0]
    r = y.rank
    new_axis = bool(ctx.attr("new_axis", 0))
    axis = ctx.attr("axis") % r
    return render("sequences_concat.c.j2", who=ctx.who, oom=OOM, ct=y.ctype, dtype=int(y.dtype), r=r, axis=axis,
                  er=r - 1 if new_axis else r, new_axis=new_axis, free_axis=axis if not new_axis else -1,
                  count="1" if new_axis else f"t->dims[{axis}]", inner_from=axis if new_axis else f"{axis} + 1")


@kernel("Optional", allocates=True, types=ITEM_TYPES, typed="out0")
def optional(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    x = ctx.ins[0] if ctx.ins else None
    if x is None:
        L += ["onnxc_value *v = onnxc_value_new(ONNXC_NONE, 0);"]
    elif x.dtype is None:
        L += [f"onnxc_value *v = onnxc_value_clone({x.ptr});"]
    else:
        L += ["onnxc_value *v = NULL;"] + _item_from(x, "v")
    L += [f"if (!v) {OOM}", "*out0 = onnxc_value_desc(v);", "return 0;"]
    return "\n".join(L)


@kernel("OptionalHasElement", types=ITEM_TYPES)
def optional_has_element(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    x = ctx.ins[0] if ctx.ins else None
    if x is None:
        return "out0[0] = 0;\nreturn 0;"
    if x.dtype is not None:
        return f"(void){x.ptr};\nout0[0] = 1;\nreturn 0;"
    return f"out0[0] = {x.ptr}->kind != ONNXC_NONE;\nreturn 0;"


@kernel("OptionalGetElement", allocates=True, types=ITEM_TYPES)
def optional_get_element(ctx: KernelCtx) -> str:
    L = _prelude(ctx)
    x, y = ctx.ins[0], ctx.outs[0]
    if x.dtype is not None:  # a plain tensor (opset 18): a copy of it
        L += ["onnxc_tensor d_; memset(&d_, 0, sizeof d_);", *describe(x, "d_"), f"if (onnxc_desc_copy(&d_, out0)) {OOM}"]
    else:
        L += [f"if ({x.ptr}->kind == ONNXC_NONE) return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: the optional is "
              "empty\", NODE_);"]
        if y.dtype is None:
            L += [f"onnxc_value *v = onnxc_value_clone({x.ptr});", f"if (!v) {OOM}", "*out0 = onnxc_value_desc(v);"]
        else:
            L += _copy_out(x.ptr, int(y.dtype), y.rank)
    L.append("return 0;")
    return "\n".join(L)
