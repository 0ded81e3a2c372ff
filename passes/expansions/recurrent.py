"""RNN, GRU and LSTM (all versions) become the internal ops onnxc::RNN, onnxc::GRU and onnxc::LSTM,
which take the weights W and R packed for the kernel's matrix products; every other input,
attribute and output is the standard op's.

Packed layout (inputs 1 and 2, ``WP`` [num_directions, panels, input_size, PANEL] and ``RP``
[num_directions, panels, hidden_size, PANEL]): the rows of a weight used by one product — all of
W's; all of R's, or for a GRU without linear_before_reset first R's z and r gates and then its h
gate — are zero-padded to a multiple of PANEL (128 bytes of the compute type: 16 doubles, else 32),
cut into panels of PANEL rows and each panel transposed, so that
``RP[d, p, k, j] = R[d, p * PANEL + j, k]``. runtime_c/onnxc_recurrent.h explains why.

The packing is ordinary Slice/Pad/Reshape/Transpose/Concat nodes: with R a constant — the usual case
— constant folding lays the weights out once, at compile time, instead of at every call. A run-time
R is packed by those kernels before the recurrent one.
"""

from __future__ import annotations

from onnxc.ir import Node, Value
from onnxc.passes.shapes.recurrent import INTERNAL_DOMAIN, panel_width, product_rows, recurrent_spec

from .builder import Builder
from .registry import expansion


def _pack(b: Builder, w: Value, lo: int, hi: int, rows: int, cols: int, pw: int) -> Value:
    """Rows [lo, hi) of ``w`` ([dirs, rows, cols]) packed in panels of ``pw``."""
    part = w if (lo, hi) == (0, rows) else b.slice(w, [lo], [hi], [1])
    panels = -(-(hi - lo) // pw)
    if panels * pw > hi - lo:
        part = b.op("Pad", part, b.ints([0, 0, 0, 0, panels * pw - (hi - lo), 0]))
    return b.transpose(b.reshape(part, [-1, panels, pw, cols]), [0, 1, 3, 2])


@expansion("RNN", "GRU", "LSTM")
def recurrent(b: Builder) -> None:
    node = b.node
    spec = recurrent_spec(node)  # invalid attributes are reported against the original node
    if b.input(1) is None or b.input(2) is None:
        raise b.fail("inputs 1 (W) and 2 (R) are required")
    w, r = b.shape(1), b.shape(2)
    hidden = node.attr("hidden_size", None)
    hidden = int(hidden) if hidden is not None else r[-1] if r else None
    for name, s in (("W", w), ("R", r)):
        if len(s) != 3 or not all(isinstance(d, int) for d in s):
            raise b.unsupported(f"{name} must have a static shape of rank 3, got {list(s)}")
    want = [spec.num_directions, spec.gates * hidden, hidden]
    if list(r) != want or hidden < 1:
        raise b.fail(f"R (input 2) must have shape {want} (hidden_size {hidden}), got {list(r)}")
    if list(w[:2]) != want[:2]:
        raise b.fail(f"W (input 1) must have shape {want[:2] + ['input_size']}, got {list(w)}")
    pw = panel_width(b.dtype(2))
    parts = [_pack(b, b.input(2), lo, hi, r[1], hidden, pw)
             for lo, hi in product_rows(spec.op, hidden, spec.linear_before_reset)]
    inputs = list(node.inputs)
    inputs[1] = _pack(b, b.input(1), 0, w[1], w[1], w[2], pw)
    inputs[2] = parts[0] if len(parts) == 1 else b.op("Concat", *parts, axis=1)
    internal = Node(node.op_type, inputs, list(node.outputs), dict(node.attrs), domain=INTERNAL_DOMAIN,
                    name=node.name or f"{b.base}/{node.op_type}", version=node.version)
    b.graph.insert_before(node, internal)
    b.nodes.append(internal)
