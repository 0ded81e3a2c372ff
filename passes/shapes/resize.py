"""Shape rules of the image resampling ops: Resize (10, 11, 13, 18, 19), Upsample (7, 9, 10), GridSample
(16, 20, 22) and RoiAlign (10, 16, 22).

``resize_spec`` reads every Resize/Upsample variant into one :class:`ResizeSpec` (which input holds
the scales or sizes, the axes they refer to, the interpolation options), so the shape rule, the
kernel and its shape function agree by construction.

Output size of a resized axis (as in onnx.reference and onnxruntime; the roi does not change it):
``floor(dim * scale)`` with scales, ``sizes[i]`` with sizes (``round(scale * dim)`` with the common
scale of ``keep_aspect_ratio_policy`` not_larger/not_smaller). A float32 scale is an exact dyadic
rational m / 2^e, so for a symbolic dim ``floor(dim * scale) == (dim * m) // 2^e`` exactly; that stays
a Dim expression when 2^e is small (0.5, 1.5, 0.25...), otherwise the dim becomes a run-time
dimension computed by the kernel's shape function, as it is when scales/sizes are run-time data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType, UnsupportedOpError
from onnxc.ir.dims import floordiv

from .common import fail, norm_axis, require_equal, runtime_dim, shape_of, sym_ints, tensor_type
from .registry import shape_rule

MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")
# coordinate_transformation_mode -> opsets that define it
CTMS = {"half_pixel": (11, 10**9), "pytorch_half_pixel": (11, 10**9), "align_corners": (11, 10**9),
        "asymmetric": (11, 10**9), "tf_crop_and_resize": (11, 10**9), "tf_half_pixel_for_nn": (11, 12),
        "half_pixel_symmetric": (19, 10**9)}
MAX_DYADIC_DENOMINATOR = 256  # floor(dim * m / 2^e) stays symbolic up to this 2^e


@dataclass(frozen=True)
class ResizeSpec:
    """Everything a Resize/Upsample node says about its output, read once from the node."""

    rank: int
    axes: tuple[int, ...]          # the axes scales/sizes/roi entries refer to (normalized)
    mode: str                      # nearest | linear | cubic
    legacy: bool                   # Upsample and Resize-10: asymmetric coordinates, floor/ceil nearest
    ctm: str                       # coordinate_transformation_mode
    nearest_mode: str
    cubic_a: float
    exclude_outside: bool
    extrapolation: float
    antialias: bool
    policy: str                    # keep_aspect_ratio_policy
    scales: int | None             # input index of a non-empty scales tensor
    sizes: int | None              # input index of a non-empty sizes tensor
    roi: int | None                # input index of the roi (used by tf_crop_and_resize only)
    attr_scales: tuple[float, ...] | None = None  # Upsample-7's scales attribute

    @property
    def crop(self) -> bool:
        return self.ctm == "tf_crop_and_resize"


def _length(node: Node, i: int) -> int | None:
    """Static element count of 1-D input ``i``, None when absent."""
    v = node.input(i)
    if v is None:
        return None
    shape = shape_of(node, i)
    if len(shape) != 1:
        raise fail(node, f"input {i} ({v.name!r}) must be 1-D, got shape {list(shape)}")
    if not isinstance(shape[0], int):
        raise UnsupportedOpError(f"{node.describe()}: input {i} ({v.name!r}) has a symbolic length; its length "
                                 "must be known to tell scales from sizes",
                                 [(node.domain or "ai.onnx", node.op_type, node.version)])
    return shape[0]


def _choice(node: Node, name: str, default: str, allowed) -> str:
    value = node.attr(name, default)
    if value not in allowed:
        raise fail(node, f"{name} {value!r} is not valid (expected one of {', '.join(allowed)})")
    return value


def resize_spec(node: Node) -> ResizeSpec:
    """Read and validate a Resize or Upsample node."""
    rank = len(shape_of(node, 0))
    v = node.version
    mode = node.attr("mode", "nearest")
    if mode == "bilinear" and (node.op_type == "Upsample" or v < 11):
        mode = "linear"  # the older name
    if mode not in (MODES if node.op_type == "Resize" and v >= 11 else MODES[:2]):
        raise fail(node, f"mode {mode!r} is not valid for opset {v}")
    legacy = node.op_type == "Upsample" or v < 11
    common = dict(rank=rank, mode=mode, legacy=legacy, cubic_a=float(node.attr("cubic_coeff_a", -0.75)),
                  exclude_outside=bool(node.attr("exclude_outside", 0)),
                  extrapolation=float(node.attr("extrapolation_value", 0.0)))
    if legacy:
        attr_scales = None
        if node.op_type == "Upsample" and v < 9:
            attr_scales = tuple(float(np.float32(s)) for s in node.attr("scales", ()))
            if len(attr_scales) != rank:
                raise fail(node, f"attribute scales needs {rank} entries (the input rank), got {len(attr_scales)}")
        elif _length(node, 1) != rank:
            raise fail(node, f"scales needs {rank} entries (the input rank), got {_length(node, 1)}")
        return ResizeSpec(axes=tuple(range(rank)), ctm="asymmetric", nearest_mode="legacy", antialias=False,
                          policy="stretch", scales=None if attr_scales else 1, sizes=None, roi=None,
                          attr_scales=attr_scales, **common)
    axes = node.attr("axes") if v >= 18 else None
    if axes is None:
        axes = tuple(range(rank))
    else:
        axes = tuple(norm_axis(node, int(a), rank, "axes entry") for a in axes)
        if len(set(axes)) != len(axes):
            raise fail(node, f"axes {list(node.attr('axes'))} has repeated entries")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel")
    lo, hi = CTMS.get(ctm, (0, -1))
    if not lo <= v <= hi:
        raise fail(node, f"coordinate_transformation_mode {ctm!r} is not valid for opset {v}")
    n_scales, n_sizes = _length(node, 2) or 0, _length(node, 3) or 0
    if n_scales and n_sizes:
        raise fail(node, "only one of scales and sizes may be given (the other must be absent or empty)")
    if not n_scales and not n_sizes:
        raise fail(node, "one of scales and sizes must be given (non-empty)")
    n = n_scales or n_sizes
    if n != len(axes):
        raise fail(node, f"{'scales' if n_scales else 'sizes'} has {n} entries, expected {len(axes)} "
                         f"({'len(axes)' if v >= 18 and node.attr('axes') is not None else 'the input rank'})")
    roi = None
    if ctm == "tf_crop_and_resize":
        n_roi = _length(node, 1) or 0
        if n_roi != 2 * len(axes):
            raise fail(node, f"tf_crop_and_resize needs a roi of {2 * len(axes)} entries, got {n_roi}")
        roi = 1
    return ResizeSpec(axes=axes, ctm=ctm,
                      nearest_mode=_choice(node, "nearest_mode", "round_prefer_floor", NEAREST_MODES),
                      antialias=bool(node.attr("antialias", 0)) if v >= 18 else False,
                      policy=_choice(node, "keep_aspect_ratio_policy", "stretch", POLICIES) if v >= 18 else "stretch",
                      scales=2 if n_scales else None, sizes=3 if n_sizes else None, roi=roi, **common)


def const_scales(node: Node, spec: ResizeSpec) -> list[float] | None:
    """The scales (one per entry of ``spec.axes``, as exact floats of float32) when known at compile time."""
    if spec.attr_scales is not None:
        vals = list(spec.attr_scales)
    elif spec.scales is not None and node.inputs[spec.scales].const is not None:
        vals = [float(np.float32(s)) for s in np.asarray(node.inputs[spec.scales].const).reshape(-1)]
    else:
        return None
    for s in vals:
        if not (s > 0 and math.isfinite(s)):
            raise fail(node, f"scales must be positive numbers, got {vals}")
        if node.op_type == "Upsample" and s < 1:
            raise fail(node, f"Upsample scales must be >= 1, got {vals}")
    return vals


def _scaled(node: Node, axis: int, dim: Dim, s: float) -> Dim:
    """``floor(dim * s)``: exact for int dims (as computed in C), a Dim expression or a run-time dim."""
    if isinstance(dim, int):
        return math.floor(float(dim) * s)
    f = Fraction(s)
    if f.denominator == 1:
        return dim * f.numerator
    if f.denominator <= MAX_DYADIC_DENOMINATOR:
        return floordiv(dim * f.numerator, f.denominator)
    return runtime_dim(node, 0, axis)


def resize_output_dims(node: Node, spec: ResizeSpec, shape: tuple) -> tuple:
    out = list(shape)
    scales = const_scales(node, spec)
    if scales is not None:
        for a, s in zip(spec.axes, scales):
            out[a] = shape[a] if s == 1.0 else _scaled(node, a, shape[a], s)
        return tuple(out)
    sizes = sym_ints(node.inputs[spec.sizes]) if spec.sizes is not None else None
    if sizes is not None and any(isinstance(s, int) and s < 0 for s in sizes):
        raise fail(node, f"sizes must not be negative, got {sizes}")
    if sizes is not None and spec.policy == "stretch":
        for a, s in zip(spec.axes, sizes):
            out[a] = s
        return tuple(out)
    if sizes is not None and all(isinstance(x, int) for x in [*sizes, *(shape[a] for a in spec.axes)]):
        if any(shape[a] == 0 for a in spec.axes):
            raise fail(node, f"keep_aspect_ratio_policy {spec.policy!r} cannot scale an empty axis")
        ratios = [s / shape[a] for a, s in zip(spec.axes, sizes)]
        scale = min(ratios) if spec.policy == "not_larger" else max(ratios)
        for a in spec.axes:
            out[a] = int(scale * shape[a] + 0.5)
        return tuple(out)
    for a in spec.axes:
        out[a] = runtime_dim(node, 0, a)
    return tuple(out)


@shape_rule("Resize", versions=(10, 10**9))
@shape_rule("Upsample", versions=(7, 10))
def _resize(node: Node) -> list:
    t = tensor_type(node, 0)
    spec = resize_spec(node)
    return [TensorType(t.dtype, resize_output_dims(node, spec, shape_of(node, 0)))]


# -- GridSample, RoiAlign -----------------------------------------------------------------------------

GRID_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic",
              "cubic": "cubic"}
GRID_PADDINGS = ("zeros", "border", "reflection")


def grid_mode(node: Node) -> str:
    """GridSample's interpolation (linear | nearest | cubic; opset 16 names bilinear/bicubic accepted)."""
    mode = node.attr("mode", "bilinear" if node.version < 20 else "linear")
    if mode not in GRID_MODES:
        raise fail(node, f"mode {mode!r} is not valid (expected linear, nearest or cubic)")
    return GRID_MODES[mode]


@shape_rule("GridSample", versions=(16, 10**9))
def _grid_sample(node: Node) -> list:
    t = tensor_type(node, 0)
    x, g = shape_of(node, 0), shape_of(node, 1)
    grid_mode(node)
    _choice(node, "padding_mode", "zeros", GRID_PADDINGS)
    if len(x) < 3 or (node.version < 20 and len(x) != 4):
        raise fail(node, f"X must be (N, C, H, W){' or (N, C, D1, ..., Dr)' if node.version >= 20 else ''}, "
                         f"got shape {list(x)}")
    r = len(x) - 2
    if len(g) != r + 2 or g[-1] != r:
        raise fail(node, f"grid must have shape (N, out_1, ..., out_{r}, {r}) for X of shape {list(x)}, "
                         f"got {list(g)}")
    n = require_equal(node, [(x[0], "input 0 axis 0 (X's batch)"), (g[0], "input 1 axis 0 (the grid's batch)")],
                      "one grid per image")
    return [TensorType(t.dtype, (n, x[1], *g[1:-1]))]


@shape_rule("RoiAlign", versions=(10, 10**9))
def _roi_align(node: Node) -> list:
    t = tensor_type(node, 0)
    x, rois, idx = shape_of(node, 0), shape_of(node, 1), shape_of(node, 2)
    if len(x) != 4:
        raise fail(node, f"X must be (N, C, H, W), got shape {list(x)}")
    if len(rois) != 2 or (isinstance(rois[1], int) and rois[1] != 4):
        raise fail(node, f"rois must have shape (num_rois, 4), got {list(rois)}")
    if len(idx) != 1:
        raise fail(node, f"batch_indices must be 1-D, got shape {list(idx)}")
    if tensor_type(node, 2).dtype != DType.INT64:
        raise fail(node, "batch_indices must be int64")
    require_equal(node, [(rois[0], "input 1 axis 0 (rois)"), (idx[0], "input 2 axis 0 (batch_indices)")],
                  "one batch index per roi")
    oh, ow = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    if oh < 1 or ow < 1:
        raise fail(node, f"output_height and output_width must be >= 1, got {oh} and {ow}")
    if node.attr("mode", "avg") not in ("avg", "max"):
        raise fail(node, f"mode {node.attr('mode')!r} is not valid (expected avg or max)")
    if node.version >= 16:
        _choice(node, "coordinate_transformation_mode", "half_pixel", ("half_pixel", "output_half_pixel"))
    num = rois[0] if isinstance(rois[0], int) or not isinstance(idx[0], int) else idx[0]
    return [TensorType(t.dtype, (num, x[1], oh, ow))]
