"""Shape rules of onnxruntime's contrib ops (domain ``com.microsoft``) that onnxc implements with
kernels of their own: Tokenizer, which scikit-learn text pipelines exported by skl2onnx use, and
Inverse.

Tokenizer (opset 1) splits each string of X ([C] or [N, C]) into tokens, Y is [C, D] / [N, C, D]:
D, the most tokens of any string (+2 with ``mark``, for the start and end marks 0x02 and 0x03), is
known only from the data, so it is a run-time dim its kernel's shape function computes. As in
onnxruntime, D is 0 when no string has a token (even with ``mark``), and an empty input keeps its
rank: [0] -> [0], [N, 0] or [0, C] -> [N, 0] (decided here when the zero is static; a symbolic dim
that is 0 at run time gives the rank-plus-one shape with D = 0, the same zero elements).

Inverse (opset 1): X [..., n, n] (float32, float64 or float16, as onnxruntime's CPU kernel) gives Y of
X's type and shape, the inverse of each matrix. The last two dims must be equal: a static mismatch
is an error here, symbolic ones are checked by the run function.

onnxc::MatMulNBits (internal, domain ``onnxc``): the 4-bit weight product that com.microsoft
MatMulNBits (passes/expansions/ms_nbits.py) and DequantizeLinear(uint4 / int4 blocked along K) ->
MatMul (passes/fold_weight_dequant.py) become when the weights are constants; its kernel keeps them
4-bit (codegen/kernels/matmul_nbits.py, runtime_c/onnxc_nbits.h). Inputs: A (float32 [..., K]), Q
(uint4 [K, N]), S (float32 [ceil(K / block_size), N]), optional Z (uint4 or float32, S's shape; default
8) and bias (float32 [N]); attribute block_size (a positive multiple of 8). Y (float32 [..., N]) =
A @ W + bias with ``W[k, n] = (Q[k, n] - Z[k // block_size, n]) * S[k // block_size, n]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import DType, Node, TensorType

from .common import fail, require_equal, runtime_dim, shape_of, tensor_type
from .registry import shape_rule
from .shape_ops import SYM_DOMAIN

MS = "com.microsoft"
START, END = "\x02", "\x03"  # the marks around each string's tokens
INVERSE_TYPES = (DType.FLOAT, DType.DOUBLE, DType.FLOAT16)


@dataclass(frozen=True)
class TokenizerArgs:
    """A Tokenizer node's attributes, validated as onnxruntime does when it builds the kernel."""

    mark: bool
    mincharnum: int
    pad_value: str
    separators: tuple[str, ...] | None  # None: ``tokenexp``; ("",): one token per UTF-8 character
    tokenexp: str | None

    @property
    def chars(self) -> bool:
        return self.separators == ("",)


def _as_str(node: Node, name: str, s) -> str:
    s = s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)
    if "\0" in s:
        raise fail(node, f"attribute {name!r} must not contain NUL characters")
    return s


def tokenizer_args(node: Node) -> TokenizerArgs:
    """The attributes of Tokenizer ``node``; ShapeError naming the node and attribute when invalid."""
    for name in ("mark", "mincharnum", "pad_value"):
        if node.attr(name) is None:
            raise fail(node, f"attribute {name!r} is required")
    seps, exp = node.attr("separators"), node.attr("tokenexp")
    if not seps and exp is None:
        raise fail(node, "one of the attributes 'separators' and 'tokenexp' is required")
    if seps and exp is not None:
        raise fail(node, "only one of the attributes 'separators' and 'tokenexp' may be set")
    mincharnum = int(node.attr("mincharnum"))
    if mincharnum < 1:
        raise fail(node, f"attribute 'mincharnum' must be positive, got {mincharnum}")
    if exp is not None:
        exp = _as_str(node, "tokenexp", exp)
        if not exp:
            raise fail(node, "attribute 'tokenexp' must not be empty")
        seps = None
    else:
        seps = tuple(_as_str(node, "separators", s) for s in seps)
        if seps == ("",) and mincharnum > 1:
            raise fail(node, f"attribute 'mincharnum' is {mincharnum}: one token per character needs 1")
    return TokenizerArgs(bool(int(node.attr("mark"))), mincharnum, _as_str(node, "pad_value", node.attr("pad_value")),
                         seps, exp)


@shape_rule("Tokenizer", domain=MS)
def _tokenizer(node: Node) -> list:
    if tensor_type(node, 0).dtype != DType.STRING:
        raise fail(node, f"input 0 must be a string tensor, got {tensor_type(node, 0).dtype.short}")
    shape = shape_of(node, 0)
    if len(shape) not in (1, 2):
        raise fail(node, f"the input must have shape [C] or [N, C], got {list(shape)}")
    tokenizer_args(node)
    if 0 in shape:  # static zeros: onnxruntime's empty output
        return [TensorType(DType.STRING, (0,) if len(shape) == 1 else (shape[0], 0))]
    return [TensorType(DType.STRING, (*shape, runtime_dim(node, 0, len(shape))))]


@shape_rule("Inverse", domain=MS)
def _inverse(node: Node) -> list:
    t = tensor_type(node, 0)
    if t.dtype not in INVERSE_TYPES:
        raise fail(node, f"X must be a float32, float64 or float16 tensor, got {t.dtype.short}")
    shape = shape_of(node, 0)
    if len(shape) < 2:
        raise fail(node, f"X must have shape [..., n, n] (rank >= 2), got {list(shape)}")
    require_equal(node, [(shape[-2], f"axis {len(shape) - 2}"), (shape[-1], f"axis {len(shape) - 1}")],
                  rule="square matrices")
    return [TensorType(t.dtype, shape)]


# -- onnxc::MatMulNBits ---------------------------------------------------------------------------------
NBITS_DOMAIN = SYM_DOMAIN  # onnxc's internal ops


@dataclass(frozen=True)
class NBitsSpec:
    """An onnxc::MatMulNBits node's sizes: K, N, the block size, Z's element type (None: absent)."""

    k: int
    n: int
    block: int
    zp: DType | None


def _nbits_expect(node: Node, i: int, what: str, types: tuple[DType, ...], shape: tuple) -> DType:
    t = tensor_type(node, i)
    if t.dtype not in types or tuple(t.shape or ()) != shape:
        want = " or ".join(d.short for d in types)
        raise fail(node, f"{what} (input {i}) must be {want} {list(shape)}, got {t.dtype.short} "
                         f"{list(t.shape) if t.shape is not None else 'of unknown rank'}")
    return t.dtype


def nbits_spec(node: Node) -> NBitsSpec:
    """The sizes of onnxc::MatMulNBits ``node``, its inputs checked; ShapeError naming the node otherwise."""
    bs = int(node.attr("block_size", 0))
    if bs <= 0 or bs % 8:
        raise fail(node, f"block_size must be a positive multiple of 8, got {bs}")
    q = tensor_type(node, 1)
    if q.dtype != DType.UINT4 or q.shape is None or len(q.shape) != 2 or not q.is_static:
        raise fail(node, f"Q (input 1) must be uint4 of a static shape [K, N], got {q}")
    k, n = q.shape
    nb = -(-k // bs)
    _nbits_expect(node, 2, "S", (DType.FLOAT,), (nb, n))
    zp = None if node.input(3) is None else _nbits_expect(node, 3, "Z", (DType.UINT4, DType.FLOAT), (nb, n))
    if node.input(4) is not None:
        _nbits_expect(node, 4, "bias", (DType.FLOAT,), (n,))
    return NBitsSpec(k, n, bs, zp)


@shape_rule("MatMulNBits", domain=NBITS_DOMAIN)
def _matmul_nbits(node: Node) -> list:
    spec = nbits_spec(node)
    a = tensor_type(node, 0)
    if a.dtype != DType.FLOAT:
        raise fail(node, f"A (input 0) must be float, got {a.dtype.short}")
    shape = shape_of(node, 0)
    if not shape:
        raise fail(node, "A (input 0) must have rank >= 1, got a scalar")
    require_equal(node, [(shape[-1], f"A axis {len(shape) - 1}"), (spec.k, "K of Q")], rule="A [..., K] @ Q [K, N]")
    return [TensorType(DType.FLOAT, (*shape[:-1], spec.n))]
