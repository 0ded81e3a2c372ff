"""Shape rules of the recurrent ops, and their parsed attributes.

The standard RNN, GRU and LSTM (all versions) are rewritten by passes/expansions/recurrent.py into
onnxc::RNN, onnxc::GRU and onnxc::LSTM, which differ only in taking W and R packed in panels
(inputs 1 and 2, ``WP`` and ``RP``, layout described there); the shape rules here are those of the
internal ops. ``recurrent_spec`` reads a node's attributes
into a :class:`RecurrentSpec` that the expansion, the shape rule and the kernel
(codegen/kernels/recurrent.py) all use, so validation lives in one place.

Shapes (layout 0 / layout 1, from opset 14):
X [seq, batch, input] / [batch, seq, input]; W [dirs, gates*hidden, input] (WP [dirs, panels, input,
panel width]); R [dirs, gates*hidden, hidden] (RP [dirs, panels, hidden, panel width]); B [dirs, 2*gates*hidden]; sequence_lens [batch]; initial_h, initial_c and the outputs Y_h,
Y_c [dirs, batch, hidden] / [batch, dirs, hidden]; P [dirs, 3*hidden]; Y [seq, dirs, batch, hidden] /
[batch, seq, dirs, hidden]. Opset 1's ``output_sequence`` only says whether Y is wanted; Y is
computed whenever the node has that output.

Activations follow onnxruntime's reading of the spec: names are case-insensitive, a list of one
direction's functions is reused for both directions of a bidirectional node, and the
``activation_alpha``/``activation_beta`` values are consumed in order by the functions that take
them (the others take none); a function left without a value gets its ONNX default.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType, Node, TensorType
from onnxc.ir.dims import is_static

from .common import fail, require_equal, shape_of, tensor_type
from .registry import shape_rule
from .shape_ops import SYM_DOMAIN

INTERNAL_DOMAIN = SYM_DOMAIN  # the domain of onnxc's internal ops
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
FLOAT_TYPES = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.BFLOAT16)

# lower-case name -> (takes alpha, takes beta, default alpha, default beta)
ACTIVATION_ARGS = {
    "relu": (False, False, 0.0, 0.0),
    "tanh": (False, False, 0.0, 0.0),
    "sigmoid": (False, False, 0.0, 0.0),
    "affine": (True, True, 1.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 1.0, 0.0),
    "scaledtanh": (True, True, 1.0, 1.0),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0),
}


@dataclass(frozen=True)
class Activation:
    name: str      # lower case, a key of ACTIVATION_ARGS
    alpha: float
    beta: float


@dataclass(frozen=True)
class RecurrentSpec:
    op: str                                    # RNN | GRU | LSTM
    gates: int
    num_directions: int
    direction: str                             # forward | reverse | bidirectional
    layout: int
    clip: float | None
    input_forget: bool                         # LSTM: forget gate = 1 - input gate
    linear_before_reset: bool                  # GRU
    activations: tuple[tuple[Activation, ...], ...]  # per direction: (f,), (f, g) or (f, g, h)


def recurrent_spec(node: Node) -> RecurrentSpec:
    """The node's attributes, validated; ShapeError naming the node when one is invalid."""
    op = node.op_type
    direction = node.attr("direction", "forward")
    if isinstance(direction, bytes):
        direction = direction.decode()
    if direction not in ("forward", "reverse", "bidirectional"):
        raise fail(node, f"direction must be forward, reverse or bidirectional, got {direction!r}")
    nd = 2 if direction == "bidirectional" else 1
    layout = int(node.attr("layout", 0))
    if layout not in (0, 1):
        raise fail(node, f"layout must be 0 or 1, got {layout}")
    clip = node.attr("clip", None)
    if clip is not None:
        clip = float(clip)
        if not clip >= 0:
            raise fail(node, f"clip must be >= 0, got {clip}")
    per_dir = len(DEFAULT_ACTIVATIONS[op])
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in (node.attr("activations", None) or ())]
    if not names:
        names = list(DEFAULT_ACTIVATIONS[op]) * nd
    elif len(names) == per_dir and nd == 2:
        names = names * 2
    elif len(names) != per_dir * nd:
        raise fail(node, f"activations must list {per_dir * nd} functions ({per_dir} per direction), got "
                         f"{len(names)}: {names}")
    alphas = [float(a) for a in (node.attr("activation_alpha", None) or ())]
    betas = [float(b) for b in (node.attr("activation_beta", None) or ())]
    acts = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATION_ARGS:
            raise fail(node, f"unknown activation function {name!r} (supported: "
                             f"{', '.join(sorted(ACTIVATION_ARGS))})")
        takes_a, takes_b, alpha, beta = ACTIVATION_ARGS[key]
        if takes_a and alphas:
            alpha = alphas.pop(0)
        if takes_b and betas:
            beta = betas.pop(0)
        acts.append(Activation(key, alpha, beta))
    return RecurrentSpec(
        op=op, gates=GATES[op], num_directions=nd, direction=direction, layout=layout, clip=clip,
        input_forget=bool(node.attr("input_forget", 0)) if op == "LSTM" else False,
        linear_before_reset=bool(node.attr("linear_before_reset", 0)) if op == "GRU" else False,
        activations=tuple(tuple(acts[d * per_dir:(d + 1) * per_dir]) for d in range(nd)))


def panel_width(dt: DType) -> int:
    """Columns per panel of the packed recurrence weights for element type ``dt``."""
    return 16 if dt == DType.DOUBLE else 32


def product_rows(op: str, hidden: int, linear_before_reset: bool) -> list[tuple[int, int]]:
    """Row ranges of R (per direction) multiplied by one step product each, in order."""
    if op == "GRU" and not linear_before_reset:
        return [(0, 2 * hidden), (2 * hidden, 3 * hidden)]
    return [(0, GATES[op] * hidden)]


def _expect(node: Node, i: int, what: str, want: tuple) -> None:
    """Input ``i`` (if present) must have shape ``want`` wherever both dims are static."""
    if node.input(i) is None:
        return
    got = shape_of(node, i)
    if len(got) != len(want) or any(is_static(g) and is_static(w) and g != w for g, w in zip(got, want)):
        raise fail(node, f"{what} (input {i}) must have shape {list(want)}, got {list(got)}")
    for a, (g, w) in enumerate(zip(got, want)):
        require_equal(node, [(g, f"input {i} axis {a}"), (w, "the size the other inputs give it")], what)


@shape_rule("RNN", "GRU", "LSTM", domain=INTERNAL_DOMAIN)
def _recurrent(node: Node) -> list:
    spec = recurrent_spec(node)
    t = tensor_type(node, 0)
    if t.dtype not in FLOAT_TYPES:
        raise fail(node, f"X must be a float tensor, got {t.dtype.short}")
    for i in (1, 2, 3, 5, 6, 7):
        if node.input(i) is not None and tensor_type(node, i).dtype != t.dtype:
            raise fail(node, f"input {i} has element type {tensor_type(node, i).dtype.short}, X has "
                             f"{t.dtype.short}")
    x, r = shape_of(node, 0), shape_of(node, 2)
    if len(x) != 3:
        raise fail(node, f"X must have rank 3, got shape {list(x)}")
    seq, batch = (x[1], x[0]) if spec.layout else (x[0], x[1])
    nd, g = spec.num_directions, spec.gates
    if len(r) != 4 or not is_static(r[2]):
        raise fail(node, f"the packed R (input 2) must have a static rank-4 shape, got {list(r)}")
    hidden = int(node.attr("hidden_size", r[2]))
    if hidden < 1:
        raise fail(node, f"hidden_size must be >= 1, got {hidden}")
    pw = panel_width(t.dtype)
    _expect(node, 1, "the packed W", (nd, -(-g * hidden // pw), x[2], pw))
    panels = sum(-(-(hi - lo) // pw) for lo, hi in product_rows(spec.op, hidden, spec.linear_before_reset))
    _expect(node, 2, "the packed R", (nd, panels, hidden, pw))
    _expect(node, 3, "B", (nd, 2 * g * hidden))
    _expect(node, 4, "sequence_lens", (batch,))
    if node.input(4) is not None and tensor_type(node, 4).dtype not in (DType.INT32, DType.INT64):
        raise fail(node, f"sequence_lens must be int32, got {tensor_type(node, 4).dtype.short}")
    state = (batch, nd, hidden) if spec.layout else (nd, batch, hidden)
    _expect(node, 5, "initial_h", state)
    if spec.op == "LSTM":
        _expect(node, 6, "initial_c", state)
        _expect(node, 7, "P", (nd, 3 * hidden))
    y = (batch, seq, nd, hidden) if spec.layout else (seq, nd, batch, hidden)
    n_out = len(node.outputs)
    if n_out > (3 if spec.op == "LSTM" else 2):
        raise fail(node, f"has {n_out} outputs; {spec.op} has at most {3 if spec.op == 'LSTM' else 2}")
    return [TensorType(t.dtype, y)] + [TensorType(t.dtype, state)] * (n_out - 1)
