"""onnxruntime's quantized contrib ops (domain ``com.microsoft``, opset 1), as standard ONNX ops.

QOperator ops (what onnxruntime's quantizer writes in its QOperator format) dequantize their inputs with
DequantizeLinear, run the float op and quantize the result with QuantizeLinear; scales are float32,
scales and zero points per tensor (a scalar or one element), zero points default to 0, and the
quantized tensors are uint8 or int8 of one type per node:

- QLinearAdd, QLinearMul (A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?): numpy broadcasting.
- QLinearSigmoid, QLinearLeakyRelu (alpha, default 0.01) (X, X_scale, X_zp?, Y_scale, Y_zp?).
- QLinearSoftmax (opset required, axis default -1 whatever the opset, as onnxruntime reads it): the
  Softmax of that opset: from 13 on over ``axis``; before, over the axes from ``axis`` on, flattened.
- QLinearGlobalAveragePool (channels_last), QLinearAveragePool (AveragePool's attributes without
  dilations, and channels_last: X and Y are [N, D1.., C]).
- QLinearConcat (Y_scale, Y_zp, then a (tensor, scale, zero point) triple per input; axis).
- QLinearWhere (condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp).
- QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?; alpha, transA, transB):
  ``alpha * (DQ(A) @ DQ(B) + C * a_scale * b_scale)`` (C int32, added to the integer accumulator as
  onnxruntime does, so alpha scales it too), quantized with y_scale / y_zp when given, else float32.
  B's scale and zero point are per tensor or per column (N values).

Where onnxruntime computes with integers, results may differ from DQ -> float -> Q by one quantization
step: QLinearAdd / QLinearMul / QLinearGlobalAveragePool (MLAS fixed-point requantization), and
QLinearSoftmax, which reads exp from a 256-entry integer table and scales by floor(1 / y_scale) instead
of 1 / y_scale; QLinearAveragePool dequantizes and pools in float32 as here, but sums in another
order, so a value on a rounding tie may land one step away. One difference is larger: onnxruntime's
int8 QLinearSoftmax does not saturate at 127 (a probability that rounds above 127 wraps to negative
values); here it saturates. The sigmoid and leaky-relu tables, Concat, Where and QGemm are
DQ -> float -> Q exactly (QGemm up to the float rounding of its sums).

com.microsoft QuantizeLinear / DequantizeLinear (what the quantizer writes with UseQDQContribOps, and
for 16-bit and 4-bit types in older opsets) are the standard ops: per tensor or per ``axis`` (default 1).

Dynamic quantization:

- MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zp?, b_zp?, bias?): ``(A - a_zp) @ (B - b_zp) *
  a_scale * b_scale + bias`` as MatMulInteger -> Cast -> Mul (-> Add): the integer product is exact,
  like onnxruntime's. A per tensor; B per tensor or per column. float16 scales: computed in float32,
  rounded to float16 once at the end.
- DynamicQuantizeMatMul (A, B, b_scale, b_zp?, bias?): A float32, quantized to uint8 by
  DynamicQuantizeLinear (onnxruntime's rule: the range of A extended to 0), then as above.
- DynamicQuantizeLSTM: the LSTM with W [D, I, 4H] and R [D, H, 4H] (transposed against ONNX's) in
  uint8/int8, per direction (scales [D]) or per column (scales [D, 4H]): DequantizeLinear of W and R,
  transposed to ONNX's layout, then the standard LSTM (a kernel of onnxc's). onnxruntime also quantizes
  X and H to uint8 at every step and multiplies in integers; this multiplies in float32, so the outputs
  differ from onnxruntime's by about that quantization error (1e-2 on unit-scale data).
- QAttention (input uint8, weight, bias, input_scale, weight_scale, mask_index?, input_zp?,
  weight_zp?, past?): the com.microsoft Attention (ms_attention.py) of the dequantized input and
  weight (per tensor or per column).

Forms emitted, for the passes that lower Q/DQ pairs to integer kernels: DQ -> Add / Mul / Sigmoid /
LeakyRelu / Softmax / GlobalAveragePool / ReduceMean / AveragePool / Concat / Where -> Q (per-tensor
parameters); DQ(A), DQ(B per tensor or axis) -> Gemm (C: Mul(Cast(C), a_scale * b_scale)) -> Q or float;
[DynamicQuantizeLinear ->] MatMulInteger -> Cast -> Mul (-> Add); DQ(W) -> Transpose -> LSTM;
DQ(input), DQ(weight) -> com.microsoft Attention. Block-quantized weights: ms_nbits.py.
"""

from __future__ import annotations

from onnxc.ir import DType, Value

from .builder import Builder
from .registry import expansion

MS = "com.microsoft"
QDQ_OPSET = 21  # the Q/DQ forms emitted: blocked scales and 4-bit types are valid from opset 21 on
BYTES = (DType.UINT8, DType.INT8)
F32 = (DType.FLOAT,)
LSTM_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
              "input_forget")
ATTENTION_ATTRS = ("num_heads", "unidirectional", "scale", "mask_filter_value", "do_rotary",
                   "past_present_share_buffer")
POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


# -- helpers -------------------------------------------------------------------------------------
def quantized_type(b: Builder, *inputs: int) -> DType:
    """The element type of quantized input ``inputs[0]`` (uint8 or int8), which the other present
    ``inputs`` (its zero points, the other operands) must share."""
    dt = b.dtype(inputs[0])
    if dt not in BYTES:
        raise b.unsupported(f"input {inputs[0]}: {dt.short} tensors are not supported (supported: uint8, int8)")
    for i in inputs[1:]:
        if b.input(i) is not None and b.dtype(i) != dt:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, but input {inputs[0]} has {dt.short}")
    return dt


def per_tensor(b: Builder, *inputs: int) -> None:
    """Present ``inputs`` (scales, zero points) must hold one value: a scalar or a one-element tensor."""
    for i in inputs:
        v = b.input(i)
        if v is not None and not all(d == 1 for d in b.shape(i)):
            raise b.fail(f"input {i} ({v.name!r}) must be a scalar or a 1-element tensor (per-tensor "
                         f"quantization), got shape {list(b.shape(i))}")


def dequantize(b: Builder, x: Value, scale: Value, zp: Value | None, axis: int | None = None,
               block: int | None = None) -> Value:
    return b.op("DequantizeLinear", x, scale, zp, axis=axis, block_size=block, version=QDQ_OPSET)


def quantize(b: Builder, y: Value, scale: Value, zp: Value | None, dt: DType, out: Value | None = None) -> Value:
    """QuantizeLinear of ``y`` to ``dt`` (the zero point 0 of that type when ``zp`` is absent)."""
    zp = zp if zp is not None else b.scalar(0, dt)
    return b.op("QuantizeLinear", y, scale, zp, version=QDQ_OPSET, out=out)


def _dq_input(b: Builder, x: int, scale: int, zp: int) -> Value:
    """Node input ``x`` dequantized with its per-tensor ``scale`` and zero point ``zp`` (input indices)."""
    per_tensor(b, scale, zp)
    return dequantize(b, b.input(x), b.input(scale), b.input(zp))


def _requantize(b: Builder, y: Value, scale: int, zp: int, dt: DType, out: Value | None) -> Value:
    """``y`` quantized into ``out`` (None: a fresh value) with the per-tensor output parameters at node
    inputs ``scale`` and ``zp``."""
    per_tensor(b, scale, zp)
    return quantize(b, y, b.input(scale), b.input(zp), dt, out=out)


def per_column(b: Builder, scale: int, zp: int, n) -> tuple[Value, Value | None, bool]:
    """Node inputs ``scale`` and ``zp`` of an operand quantized per tensor or per column (1-D, ``n``
    values): (scale, zero point, per column?). When only one of them is per column, the other is
    expanded to its shape (DequantizeLinear wants both of one shape)."""
    kinds = []
    for i in (scale, zp):
        v = b.input(i)
        if v is None:
            kinds.append(None)
            continue
        s = b.shape(i)
        if all(d == 1 for d in s):
            kinds.append("tensor")
        elif len(s) == 1 and (s[0] == n or not isinstance(s[0], int) or not isinstance(n, int)):
            kinds.append("column")
        else:
            raise b.fail(f"input {i} ({v.name!r}) must be a scalar or 1-D with one value per column ({n}), "
                         f"got shape {list(s)}")
    s, z = b.input(scale), b.input(zp)
    if "column" not in kinds:
        return s, z, False
    if kinds[0] == "tensor":
        s = b.op("Expand", b.reshape(s, [1]), b.op("Shape", z))
    elif kinds[1] == "tensor":
        z = b.op("Expand", b.reshape(z, [1]), b.op("Shape", s))
    return s, z, True


# -- QOperator ops ---------------------------------------------------------------------------------
@expansion("QLinearAdd", "QLinearMul", domain=MS)
def qlinear_binary(b: Builder) -> None:
    dt = quantized_type(b, 0, 2, 3, 5, 7)
    b.require_types([1, 4, 6], F32)
    y = b.op(b.node.op_type[len("QLinear"):], _dq_input(b, 0, 1, 2), _dq_input(b, 3, 4, 5))
    _requantize(b, y, 6, 7, dt, b.output(0))


UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu"}


@expansion(*UNARY, domain=MS)
def qlinear_unary(b: Builder) -> None:
    dt = quantized_type(b, 0, 2, 4)
    b.require_types([1, 3], F32)
    attrs = {"alpha": float(b.attr("alpha", 0.01))} if b.node.op_type == "QLinearLeakyRelu" else {}
    _requantize(b, b.op(UNARY[b.node.op_type], _dq_input(b, 0, 1, 2), **attrs), 3, 4, dt, b.output(0))


@expansion("QLinearSoftmax", domain=MS)
def qlinear_softmax(b: Builder) -> None:
    """Softmax of the opset in attribute ``opset``: before 13 the axes from ``axis`` on are one axis."""
    dt = quantized_type(b, 0, 2, 4)
    b.require_types([1, 3], F32)
    opset = b.attr("opset")
    if opset is None:
        raise b.fail("attribute 'opset' is required")
    r = b.rank(0)
    axis = int(b.attr("axis", -1))  # the schema's default for every opset (onnxruntime reads it so)
    if r == 0 or not -r <= axis < r:
        raise b.fail(f"axis {axis} is out of range for an input of rank {r}")
    axis %= r
    x = _dq_input(b, 0, 1, 2)
    if opset >= 13 or axis == r - 1:
        y = b.op("Softmax", x, axis=axis)
    else:
        y = b.reshape(b.op("Softmax", b.op("Flatten", x, axis=axis), axis=1), b.op("Shape", x))
    _requantize(b, y, 3, 4, dt, b.output(0))


def _image_rank(b: Builder) -> int:
    r = b.rank(0)
    if r < 3:
        raise b.fail(f"X must have rank >= 3 ([N, C, D1..] or channels last), got shape {list(b.shape(0))}")
    return r


@expansion("QLinearGlobalAveragePool", domain=MS)
def qlinear_global_average_pool(b: Builder) -> None:
    """The mean over the spatial axes: [N, C, D1..] -> [N, C, 1..]; channels_last [N, D1.., C] -> [N, 1.., C]."""
    dt = quantized_type(b, 0, 2, 4)
    b.require_types([1, 3], F32)
    r = _image_rank(b)
    x = _dq_input(b, 0, 1, 2)
    if b.attr("channels_last", 0):
        y = b.reduce("ReduceMean", x, list(range(1, r - 1)), keepdims=1)
    else:
        y = b.op("GlobalAveragePool", x)
    _requantize(b, y, 3, 4, dt, b.output(0))


@expansion("QLinearAveragePool", domain=MS)
def qlinear_average_pool(b: Builder) -> None:
    """AveragePool of the dequantized X; channels_last transposes the uint8/int8 tensors around it."""
    dt = quantized_type(b, 0, 2, 4)
    b.require_types([1, 3], F32)
    r = _image_rank(b)
    last = bool(b.attr("channels_last", 0))
    x = b.transpose(b.input(0), [0, r - 1, *range(1, r - 1)]) if last else b.input(0)
    per_tensor(b, 1, 2)
    y = b.op("AveragePool", dequantize(b, x, b.input(1), b.input(2)), **{k: b.attr(k) for k in POOL_ATTRS})
    q = _requantize(b, y, 3, 4, dt, out=None if last else b.output(0))
    if last:
        b.transpose(q, [0, *range(2, r), 1], out=b.output(0))


@expansion("QLinearConcat", domain=MS)
def qlinear_concat(b: Builder) -> None:
    n = len(b.node.inputs) - 2
    if n < 3 or n % 3:
        raise b.fail(f"needs Y_scale, Y_zero_point and a (tensor, scale, zero point) triple per input, got "
                     f"{len(b.node.inputs)} inputs")
    triples = range(2, n + 2, 3)
    dt = quantized_type(b, 1, *triples, *(i + 2 for i in triples))
    b.require_types([0, *(i + 1 for i in triples)], F32)
    if b.attr("axis") is None:
        raise b.fail("attribute 'axis' is required")
    parts = [_dq_input(b, i, i + 1, i + 2) for i in triples]
    _requantize(b, b.op("Concat", *parts, axis=int(b.attr("axis"))), 0, 1, dt, b.output(0))


@expansion("QLinearWhere", domain=MS)
def qlinear_where(b: Builder) -> None:
    dt = quantized_type(b, 1, 3, 4, 6, 8)
    b.require_types([2, 5, 7], F32)
    if b.dtype(0) != DType.BOOL:
        raise b.fail(f"condition must be a bool tensor, got {b.dtype(0).short}")
    y = b.op("Where", b.input(0), _dq_input(b, 1, 2, 3), _dq_input(b, 4, 5, 6))
    _requantize(b, y, 7, 8, dt, b.output(0))


@expansion("QGemm", domain=MS)
def qgemm(b: Builder) -> None:
    """``alpha * (DQ(A) @ DQ(B) + C * a_scale * b_scale)`` as one Gemm (beta = alpha), then Q or float."""
    at, bt = quantized_type(b, 0, 2), quantized_type(b, 3, 5)
    if at == DType.INT8 and bt == DType.UINT8:
        raise b.unsupported("int8 A with uint8 B is not supported (onnxruntime has no such kernel)")
    b.require_types([1, 4, 7], F32)
    if b.rank(0) != 2 or b.rank(3) != 2:
        raise b.fail(f"A and B must be 2-D, got shapes {list(b.shape(0))} and {list(b.shape(3))}")
    if b.input(2) is None or b.input(5) is None:
        raise b.fail("a_zero_point (input 2) and b_zero_point (input 5) are required")
    ta, tb = int(b.attr("transA", 0)), int(b.attr("transB", 0))
    per_tensor(b, 1, 2)
    a = dequantize(b, b.input(0), b.input(1), b.input(2))
    s, z, col = per_column(b, 4, 5, b.shape(3)[0 if tb else 1])
    w = dequantize(b, b.input(3), s, z, axis=(0 if tb else 1) if col else None)
    c = b.input(6)
    if c is not None:
        if b.dtype(6) != DType.INT32:
            raise b.fail(f"C must be int32, got {b.dtype(6).short}")
        c = b.op("Mul", b.cast(c, DType.FLOAT), b.op("Mul", b.input(1), b.input(4)))
    y_scale, y_zp = b.input(7), b.input(8)
    if y_zp is not None and y_scale is None:
        raise b.fail("y_zero_point is given without y_scale")
    if y_scale is not None and y_zp is None:
        raise b.unsupported("y_scale without y_zero_point is not supported (give both for a quantized "
                            "output, neither for float32)")
    alpha = float(b.attr("alpha", 1.0))
    if ta == 0:
        y = _qgemm_integer(b, s, z, tb, alpha, None if y_scale is not None else b.output(0))
    else:
        y = b.op("Gemm", a, w, c, alpha=alpha, beta=alpha, transA=ta, transB=tb,
                 out=None if y_scale is not None else b.output(0))
    if y_scale is not None:
        _requantize(b, y, 7, 8, quantized_type(b, 8), b.output(0))


def _qgemm_integer(b: Builder, s: Value, z: Value | None, tb: int, alpha: float, out: Value | None) -> Value:
    """QGemm with A as it is: ``float(MatMulInteger(A, B) + C) * (a_scale * b_scale * alpha)``, the
    integer product exact (onnxruntime's QGemm adds C to the int32 accumulator too)."""
    w = b.op("Transpose", b.input(3), perm=[1, 0]) if tb else b.input(3)
    acc = b.op("MatMulInteger", b.input(0), w, b.input(2), z)
    if b.input(6) is not None:
        acc = b.op("Add", acc, b.input(6))
    scale = b.op("Mul", b.input(1), s)
    if alpha != 1.0:
        scale = b.op("Mul", scale, b.scalar(alpha, DType.FLOAT))
    return b.op("Mul", b.cast(acc, DType.FLOAT), scale, out=out)


# -- dynamic quantization ----------------------------------------------------------------------------
def _integer_matmul(b: Builder, a: Value, a_zp: Value | None, a_scale: Value, s: int, z: int,
                    bias: int, out_type: DType) -> None:
    """``(a - a_zp) @ (B - zp) * a_scale * scale + bias`` into output 0, with B node input 1 and its
    scale / zero point inputs ``s`` / ``z`` (per tensor or per column), computed in float32; the
    scales and the bias are of ``out_type``."""
    quantized_type(b, 1, z)
    if b.rank(1) < 2:
        raise b.unsupported(f"B must have rank >= 2, got shape {list(b.shape(1))}")
    per_column(b, s, z, b.shape(1)[-1])  # checks the shapes; MatMulInteger takes per-column zero points
    acc = b.op("MatMulInteger", a, b.input(1), a_zp, b.input(z))
    f32 = (lambda v: v) if out_type == DType.FLOAT else (lambda v: b.cast(v, DType.FLOAT))  # scales, bias
    scale = b.op("Mul", f32(a_scale), f32(b.input(s)))
    last = b.input(bias) is None and out_type == DType.FLOAT
    y = b.op("Mul", b.cast(acc, DType.FLOAT), scale, out=b.output(0) if last else None)
    if b.input(bias) is not None:
        n, bs = b.shape(1)[-1], b.shape(bias)
        if len(bs) != 1 or (isinstance(bs[0], int) and isinstance(n, int) and bs[0] != n):
            raise b.fail(f"bias must be 1-D of B's last dim ({n}), got shape {list(bs)}")
        y = b.op("Add", y, f32(b.input(bias)), out=b.output(0) if out_type == DType.FLOAT else None)
    if out_type != DType.FLOAT:
        b.cast(y, out_type, out=b.output(0))


@expansion("MatMulIntegerToFloat", domain=MS)
def matmul_integer_to_float(b: Builder) -> None:
    quantized_type(b, 0, 4)
    b.require_types([2, 3, 6], (DType.FLOAT, DType.FLOAT16))
    out_type = b.dtype(2)
    for i in (3, 6):
        if b.input(i) is not None and b.dtype(i) != out_type:
            raise b.fail(f"input {i} has element type {b.dtype(i).short}, but a_scale has {out_type.short}")
    per_tensor(b, 2, 4)
    _integer_matmul(b, b.input(0), b.input(4), b.input(2), 3, 5, 6, out_type)


@expansion("DynamicQuantizeMatMul", domain=MS)
def dynamic_quantize_matmul(b: Builder) -> None:
    """A quantized to uint8 over its whole range (DynamicQuantizeLinear), then MatMulIntegerToFloat."""
    b.require_types([0, 2, 4], F32)
    q, scale, zp = b.op("DynamicQuantizeLinear", b.input(0), n_out=3)
    _integer_matmul(b, q, zp, scale, 2, 3, 4, DType.FLOAT)


def _lstm_weight(b: Builder, w: int, s: int, z: int, name: str) -> Value:
    """W [D, I, 4H] (or R [D, H, 4H]) dequantized per direction (scale [D]) or per column ([D, 4H]),
    transposed to ONNX's [D, 4H, I]."""
    quantized_type(b, w, z)
    shape = b.shape(w)
    if len(shape) != 3:
        raise b.fail(f"{name} must be 3-D [num_directions, rows, 4 * hidden_size], got shape {list(shape)}")
    ranks = {len(b.shape(s)), len(b.shape(z))}
    if not ranks <= {1, 2}:
        raise b.fail(f"{name}'s scale and zero point must be [num_directions] or [num_directions, "
                     f"4 * hidden_size], got {list(b.shape(s))} and {list(b.shape(z))}")
    scale, zp = b.input(s), b.input(z)
    if ranks == {1}:
        x = dequantize(b, b.input(w), scale, zp, axis=0)
    else:
        rows = shape[1]
        if not isinstance(rows, int):
            raise b.unsupported(f"per-column {name} needs a static shape, got {list(shape)}")
        scale, zp = (b.unsqueeze(v, [1]) if len(v.type.shape) == 2 else b.unsqueeze(v, [1, 2])
                     for v in (scale, zp))
        if len(b.shape(s)) != len(b.shape(z)):  # one per direction, the other per column
            full = b.op("Shape", scale if len(b.shape(s)) == 2 else zp)
            scale, zp = b.op("Expand", scale, full), b.op("Expand", zp, full)
        x = dequantize(b, b.input(w), scale, zp, axis=1, block=rows)
    return b.transpose(x, [0, 2, 1])


@expansion("DynamicQuantizeLSTM", domain=MS)
def dynamic_quantize_lstm(b: Builder) -> None:
    b.require_types([0, 3, 5, 6, 7, 8, 10], F32)
    w = _lstm_weight(b, 1, 8, 9, "W")
    r = _lstm_weight(b, 2, 10, 11, "R")
    b.op("LSTM", b.input(0), w, r, *(b.input(i) for i in range(3, 8)), out=list(b.node.outputs))
    lstm = b.nodes[-1]
    lstm.attrs.update({k: a for k, a in b.node.attrs.items() if k in LSTM_ATTRS})  # strings kept as they are


@expansion("QAttention", domain=MS)
def qattention(b: Builder) -> None:
    """com.microsoft Attention of DQ(input) (uint8, per tensor) and DQ(weight) (per tensor or column)."""
    if quantized_type(b, 0, 6) != DType.UINT8:
        raise b.unsupported("int8 input is not supported (onnxruntime's CPU kernel takes uint8)")
    quantized_type(b, 1, 7)
    b.require_types([2, 3, 4], F32)
    if b.rank(1) != 2:
        raise b.fail(f"weight must be 2-D, got shape {list(b.shape(1))}")
    per_tensor(b, 3, 6)
    x = dequantize(b, b.input(0), b.input(3), b.input(6))
    s, z, col = per_column(b, 4, 7, b.shape(1)[1])
    w = dequantize(b, b.input(1), s, z, axis=1 if col else None)
    attrs = {k: b.attr(k) for k in ATTENTION_ATTRS}
    b.op("Attention", x, w, b.input(2), b.input(5), b.input(8), out=list(b.node.outputs), domain=MS, version=1,
         **attrs)


@expansion("QuantizeLinear", "DequantizeLinear", domain=MS)
def ms_quantize_linear(b: Builder) -> None:
    """The standard op of the same name, per tensor or per ``axis``."""
    b.op(b.node.op_type, b.input(0), b.input(1), b.input(2), axis=int(b.attr("axis", 1)), version=QDQ_OPSET,
         out=b.output(0))
