"""Weight-only dequantization of narrow integer initializers: gather first, or fold once.

Exporters store weights as int8/uint8/int4/uint4 (also int2/uint2, int16/uint16) initializers and widen
them with standard ops. Such a chain, starting at a constant initializer ``q``, is either

- ``DequantizeLinear(q, scale, zero_point?)`` with constant parameters (per-tensor, per-axis or
  blocked), or
- ``Cast(q, to=float|float16|bfloat16|double) [-> Sub(., zp)] [-> Mul(., scale) | Mul(scale, .)]``
  with constant zp / scale that broadcast without growing the tensor.

fold_constants leaves a chain whose float result is above its size cap to run time, where every call
converts the whole tensor. This pass rewrites the chain by what reads its result:

0. MatMuls reading a 4-bit ``DequantizeLinear`` of a [K, N] uint4 / int4 weight as their B, float32
   out, blocked along K (axis 0, a block size that is a multiple of 8; also one scale per column or
   per tensor: a single block): each becomes onnxc::MatMulNBits(A, Q, S, Z) (passes/shapes/contrib.py),
   whose kernel keeps the weights 4-bit instead of 8 times larger as float32 (int4 values and zero
   points move by 8 into uint4; uint4 without zero points gets explicit zeros). Other readers of the
   chain are then handled as below.

1. Only Gathers on the data input (embedding tables): each ``Gather(chain(q), ids, axis=a)`` becomes
   ``chain'(Gather(q, ids, axis=a))``: the narrow rows are gathered, then only they are dequantized.
   Parameters are taken along: one that does not vary along axis ``a`` is used as it is (reshaped
   for the gathered rank when needed); one that varies along ``a`` (per-row scales, the row dimension
   of a blocked scale) is gathered with the same ids. A per-axis DequantizeLinear along ``a`` becomes
   ``Cast -> [Sub(zp)] -> Mul(scale)`` with gathered parameters, which gives the same numbers bit for
   bit for 8-, 4- and 2-bit inputs when the scale has the output type (float or float16). What cannot
   commute exactly (blocked along ``a``; other per-axis types) falls back to case 2.
2. Anything else (MatMul, Gemm, Conv, several readers, a graph output, a subgraph): the chain is
   folded once at compile time whatever its size, with fold_constants' numpy twins. Its float result is
   needed whole on every call anyway; the narrow initializer dies when nothing else reads it. Readers
   that became constant and fold within fold_constants' cap (a Transpose of the weight) fold too.

Left alone:
- a chain feeding a node that also reads the output of a DequantizeLinear of a non-constant
  (a QDQ group such as ``MatMul(DQ(x), DQ(w))``, looked through Transpose / Reshape / Squeeze /
  Unsqueeze / Flatten / Identity): a QDQ-to-integer rewrite needs those dequantizations intact;
- a chain feeding a QuantizeLinear (a requantization belongs to the QDQ rewrite as well);
- chains whose intermediate values have other readers end where they do (their readers get case 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxc.ir import Attr, DType, Graph, Model, Node, TensorType, Value

from .base import PassResult, in_subgraphs
from .fold_constants import try_fold
from .shapes.contrib import NBITS_DOMAIN
from .shapes.quant_layout import QLayout, dequantize_output_type, quant_layout
from .shapes.registry import rule_for

NARROW_INTS = frozenset({DType.INT8, DType.UINT8, DType.INT4, DType.UINT4, DType.INT2, DType.UINT2})
WEIGHT_INTS = NARROW_INTS | {DType.INT16, DType.UINT16}
DQ_INPUTS = WEIGHT_INTS | {DType.INT32}  # int32: DequantizeLinear of biases
FLOAT_OUTS = frozenset({DType.FLOAT, DType.FLOAT16, DType.BFLOAT16, DType.DOUBLE})
LAYOUT_OPS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})


@dataclass
class Chain:
    """A dequantization chain: ``nodes`` from the one reading the narrow initializer ``table`` on."""

    table: Value
    nodes: list[Node]

    @property
    def end(self) -> Value:
        return self.nodes[-1].outputs[0]


@dataclass
class Param:
    """An input of a rewritten node: ``value``, or a new constant ``array`` of type ``dtype`` named after
    ``value``; used as it is, or ``gathered`` with the ids along the Gather's axis."""

    value: Value
    array: np.ndarray | None = None
    dtype: DType | None = None
    gathered: bool = False

    def materialize(self, g: Graph) -> Value:
        if self.array is None:
            return self.value
        name = g.fresh_name(f"{self.value.name}_rows")
        return g.add_initializer(Value(name, TensorType(self.dtype, self.array.shape), const=self.array))


@dataclass
class Step:
    """One node of the chain after the Gather: ``op`` on the gathered data at input ``data_pos``."""

    op: str
    version: int
    attrs: dict
    data_pos: int
    params: list[tuple[int, Param]]


def _std(n: Node, *ops: str) -> bool:
    return n.domain in ("", "ai.onnx") and n.op_type in ops


def _const(v: Value | None) -> bool:
    return v is not None and v.producer is None and isinstance(v.const, np.ndarray)


def _sole_reader(v: Value) -> Node | None:
    us = v.uses()
    if len(us) != 1 or (v.graph is not None and v in v.graph.outputs):
        return None
    return us[0][0]


def find_chain(head: Node) -> Chain | None:
    """The chain starting at ``head`` (a Cast or DequantizeLinear of a narrow initializer), else None."""
    q = head.input(0)
    if not _const(q) or not isinstance(q.type, TensorType) or len(head.outputs) != 1:
        return None
    if _std(head, "DequantizeLinear"):
        ok = q.dtype in DQ_INPUTS and all(_const(head.input(i)) for i in (1, 2) if head.input(i) is not None)
        return Chain(q, [head]) if ok else None
    if not _std(head, "Cast") or q.dtype not in WEIGHT_INTS or head.outputs[0].dtype not in FLOAT_OUTS:
        return None
    chain = Chain(q, [head])
    for op in ("Sub", "Mul"):  # each optional, in this order
        n = _sole_reader(chain.end)
        if n is None or not _std(n, op) or n.outputs[0].shape != q.shape:
            continue
        if n.attrs:  # opset < 7 broadcast/axis attributes: another broadcasting rule
            break
        k = n.inputs.index(chain.end)
        if (op == "Sub" and k != 0) or not _const(n.input(1 - k)):
            break
        chain.nodes.append(n)
    return chain


def _readers_through_layout(v: Value) -> list[tuple[Node, int]]:
    out = []
    for n, i in v.uses():
        if _std(n, *LAYOUT_OPS) and i == 0 and n.outputs:
            out += _readers_through_layout(n.outputs[0])
        else:
            out.append((n, i))
    return out


def _activation_dq(v: Value | None) -> bool:
    p = None if v is None else v.producer
    return p is not None and _std(p, "DequantizeLinear") and not _const(p.input(0))


def in_qdq_group(chain: Chain) -> bool:
    """True when the chain feeds a QuantizeLinear, or a node that also reads a dequantized activation."""
    for n, i in _readers_through_layout(chain.end):
        if _std(n, "QuantizeLinear"):
            return True
        if any(_activation_dq(v) for j, v in enumerate(n.inputs) if j != i):
            return True
    return False


def _gathers(chain: Chain) -> list[Node] | None:
    """The Gathers reading the chain as their data, when they are its only readers (in its graph)."""
    end, g = chain.end, chain.nodes[-1].graph
    us = end.uses()
    if not us or end in g.outputs:
        return None
    if all(_std(n, "Gather") and i == 0 and n.graph is g and n.input(1) is not end for n, i in us):
        return [n for n, _ in us]
    return None


# -- case 1: gather the narrow rows --------------------------------------------------------------------

def _new_axis(k: int, a: int, nidx: int) -> int:
    """Axis ``k`` of the table as an axis of ``Gather(table, ids of rank nidx, axis=a)`` (k != a)."""
    return k if k < a else k + nidx - 1


def _broadcast_param(v: Value, r: int, a: int, nidx: int) -> Param:
    """An elementwise constant broadcasting against the table (rank ``r``), made to broadcast against
    the gathered rows: as it is when it does not reach axis ``a``, reshaped when it is 1 there, else
    gathered (aligned to rank ``r``)."""
    c = v.const
    if c.ndim <= r - a - 1:
        return Param(v)
    full = (1,) * (r - c.ndim) + c.shape
    if full[a] != 1:
        return Param(v, None if full == c.shape else c.reshape(full), v.dtype, gathered=True)
    shape = full[:a] + (1,) * nidx + full[a + 1:]
    return Param(v) if shape == c.shape else Param(v, c.reshape(shape), v.dtype)


def _cast_steps(chain: Chain, r: int, a: int, nidx: int) -> list[Step]:
    head = chain.nodes[0]
    steps = [Step("Cast", head.version, dict(head.attrs), 0, [])]
    for prev, n in zip(chain.nodes, chain.nodes[1:]):
        k = n.inputs.index(prev.outputs[0])
        steps.append(Step(n.op_type, n.version, dict(n.attrs), k,
                          [(1 - k, _broadcast_param(n.inputs[1 - k], r, a, nidx))]))
    return steps


def _dq_steps(dq: Node, r: int, a: int, nidx: int) -> list[Step] | None:
    lay: QLayout = quant_layout(dq)
    attrs = dict(dq.attrs)
    params = [(i, dq.input(i)) for i in (1, 2) if dq.input(i) is not None]
    if lay.kind == "tensor":
        attrs.pop("axis", None)  # meaningless per tensor, and maybe out of the gathered rank
        return [Step("DequantizeLinear", dq.version, attrs, 0, [(i, Param(v)) for i, v in params])]
    if lay.axis != a:
        attrs["axis"] = Attr("axis", "INT", _new_axis(lay.axis, a, nidx))
        block = lay.kind == "block"  # a blocked scale has the table's rank: it varies along axis a
        return [Step("DequantizeLinear", dq.version, attrs, 0,
                     [(i, Param(v, gathered=block)) for i, v in params])]
    return _dq_as_cast_steps(dq, lay, r, a)


def _dq_as_cast_steps(dq: Node, lay: QLayout, r: int, a: int) -> list[Step] | None:
    """A per-axis DequantizeLinear along the gathered axis as Cast -> [Sub] -> Mul (exact cases only)."""
    out, s, zp = dequantize_output_type(dq), dq.input(1), dq.input(2)
    if lay.kind != "axis" or dq.input(0).dtype not in NARROW_INTS or out not in (DType.FLOAT, DType.FLOAT16) \
            or s.dtype != out:
        return None
    shape = (1,) * a + (-1,) + (1,) * (r - a - 1)
    steps = [Step("Cast", dq.version, {"to": Attr("to", "INT", int(out))}, 0, [])]
    if zp is not None:
        z = zp.const.astype(out.np).reshape(shape)
        steps.append(Step("Sub", dq.version, {}, 0, [(1, Param(zp, z, out, gathered=True))]))
    steps.append(Step("Mul", dq.version, {}, 0, [(1, Param(s, s.const.reshape(shape), out, gathered=True))]))
    return steps


def _axis(chain: Chain, gather: Node) -> int:
    r = len(chain.table.shape)
    a = int(gather.attr("axis", 0))
    return a + r if a < 0 else a


def _plan(chain: Chain, gather: Node) -> list[Step] | None:
    """The nodes that follow ``Gather(table, ids)`` in place of ``gather``; None when they cannot."""
    r, a, ids = len(chain.table.shape), _axis(chain, gather), gather.input(1)
    if not 0 <= a < r or not isinstance(ids.type, TensorType) or ids.shape is None:
        return None
    nidx = len(ids.shape)
    if _std(chain.nodes[0], "DequantizeLinear"):
        return _dq_steps(chain.nodes[0], r, a, nidx)
    return _cast_steps(chain, r, a, nidx)


def _emit(g: Graph, gather: Node, op: str, ins: list, attrs: dict, version: int, out: Value | None = None) -> Node:
    """A new node before ``gather`` (its output ``out``, else a fresh value), typed by its shape rule."""
    if out is None:
        out = Value(g.fresh_name(f"{gather.outputs[0].name}_{op.lower()}"))
    n = g.insert_before(gather, Node(op, ins, [out], attrs, version=version))
    out.type = rule_for(n).infer(n)[0]
    return n


def _rewrite_gather(chain: Chain, gather: Node, steps: list[Step]) -> None:
    """Replace ``gather`` by ``Gather(table, ids)`` and ``steps``, the last one writing its output value."""
    g, ids, final = gather.graph, gather.input(1), gather.outputs[0]
    axis = {"axis": Attr("axis", "INT", _axis(chain, gather))}
    new = [_emit(g, gather, "Gather", [chain.table, ids], axis, gather.version)]
    y = new[0].outputs[0]
    for k, st in enumerate(steps):
        ins: list = [None] * (1 + max([st.data_pos] + [i for i, _ in st.params]))
        ins[st.data_pos] = y
        for i, p in st.params:
            v = p.materialize(g)
            if p.gathered:
                new.append(_emit(g, gather, "Gather", [v, ids], axis, gather.version))
                v = new[-1].outputs[0]
            ins[i] = v
        last = k == len(steps) - 1
        if last:
            gather.outputs = []  # ``final`` moves to the last new node
        new.append(_emit(g, gather, st.op, ins, st.attrs, st.version, final if last else None))
        y = new[-1].outputs[0]
    new[-1].name = gather.name
    g.remove(gather)
    if _const(ids):
        for n in new:
            try_fold(n)  # constant ids: the few rows fold like fold_constants would fold them


# -- case 0: 4-bit weights of MatMuls -----------------------------------------------------------------

def nbits_block(chain: Chain) -> int | None:
    """The block size along K when the chain is a 4-bit DequantizeLinear onnxc::MatMulNBits can take
    (module doc, case 0), else None."""
    dq, q = chain.nodes[0], chain.table
    if len(chain.nodes) != 1 or not _std(dq, "DequantizeLinear") or q.dtype not in (DType.UINT4, DType.INT4) \
            or len(q.shape) != 2 or dequantize_output_type(dq) != DType.FLOAT or dq.input(1).dtype != DType.FLOAT:
        return None
    lay = quant_layout(dq)
    if lay.kind == "block":
        return lay.block if lay.axis == 0 and lay.block % 8 == 0 else None
    return -(-q.shape[0] // 8) * 8 if lay.kind == "tensor" or lay.axis == 1 else None  # one block: all of K


def _nbits_matmuls(chain: Chain) -> list[Node]:
    g = chain.nodes[0].graph
    return [n for n, i in chain.end.uses() if _std(n, "MatMul") and i == 1 and n.graph is g
            and n.input(0) is not chain.end and isinstance(n.input(0).type, TensorType)
            and n.input(0).dtype == DType.FLOAT and n.input(0).shape]


def _nbits_tables(chain: Chain, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(Q uint4 [K, N], S float32 [blocks, N], Z uint4 [blocks, N] or None for 8) of the chain."""
    dq, (k, n) = chain.nodes[0], chain.table.shape
    shift = 8 if chain.table.dtype == DType.INT4 else 0  # int4 -> uint4

    def per_block(v: Value, dt) -> np.ndarray:  # [blocks, N] from a blocked, per-column or per-tensor constant
        a = np.asarray(v.const).astype(dt)
        return np.ascontiguousarray(np.broadcast_to(a.reshape(-1, n if a.size > 1 else 1), (-(-k // block), n)))

    zp = dq.input(2)
    if zp is not None:
        z = per_block(zp, np.int16) + shift
    else:  # int4's default 0 is the kernel's 8; uint4's is not
        z = None if shift else np.zeros((-(-k // block), n), np.int16)
    return ((np.asarray(chain.table.const).astype(np.int16) + shift).astype(np.uint8), per_block(dq.input(1), np.float32),
            None if z is None else z.astype(np.uint8))


def _keep_nbits(chain: Chain) -> bool:
    """Case 0: the MatMuls reading the chain as B become onnxc::MatMulNBits."""
    block = nbits_block(chain)
    matmuls = _nbits_matmuls(chain) if block is not None else []
    if not matmuls:
        return False
    g, name = chain.nodes[0].graph, chain.table.name
    consts = [None if a is None else g.add_initializer(Value(g.fresh_name(f"{name}_{tag}"), TensorType(dt, a.shape),
                                                             const=a))
              for a, tag, dt in zip(_nbits_tables(chain, block), ("q", "s", "zp"),
                                    (DType.UINT4, DType.FLOAT, DType.UINT4))]
    while consts[-1] is None:
        consts.pop()
    for mm in matmuls:
        node = Node("MatMulNBits", [mm.input(0), *consts], list(mm.outputs),
                    {"block_size": Attr("block_size", "INT", block)}, domain=NBITS_DOMAIN, name=mm.name, version=1)
        g.insert_before(mm, node)
        mm.outputs = []
        g.remove(mm)
    return True


# -- case 2: fold once -------------------------------------------------------------------------------

def fold_chain(chain: Chain) -> bool:
    """Fold the chain whatever its size, then the readers that became constant (within the cap)."""
    changed = False
    for n in chain.nodes:
        if not try_fold(n, capped=False):
            return changed
        changed = True
    work, seen = [u for u, _ in chain.end.uses()], set()
    while work:
        n = work.pop(0)
        if n.id in seen or not n.inputs:  # not n.inputs: folded (detached) already
            continue
        seen.add(n.id)
        outs = list(n.outputs)
        if try_fold(n):
            work += [u for o in outs for u, _ in o.uses()]
    return changed


# -- driver ------------------------------------------------------------------------------------------

def _rewrite(chain: Chain) -> bool:
    if in_qdq_group(chain):
        return False
    kept = _keep_nbits(chain)
    end, g = chain.end, chain.nodes[0].graph
    if kept and not end.uses() and end not in g.outputs:
        g.remove(chain.nodes[0])
        return True
    gathers = _gathers(chain)
    plans = [_plan(chain, n) for n in gathers] if gathers else None
    if not plans or any(p is None for p in plans):
        return fold_chain(chain) or kept
    for gather, steps in zip(gathers, plans):
        _rewrite_gather(chain, gather, steps)
    g = chain.nodes[0].graph
    for n in reversed(chain.nodes):
        if not any(o.uses() for o in n.outputs):
            g.remove(n)
    return True


def fold_weight_dequant_graph(g: Graph) -> bool:
    changed = in_subgraphs(g, fold_weight_dequant_graph)
    for n in list(g.nodes):
        if n.inputs and _std(n, "Cast", "DequantizeLinear"):  # no inputs: removed by an earlier rewrite
            chain = find_chain(n)
            if chain is not None:
                changed |= _rewrite(chain)
    return changed


def fold_weight_dequant(model: Model) -> PassResult:
    return PassResult(model, fold_weight_dequant_graph(model.graph))
