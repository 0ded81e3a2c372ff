"""Resize (10, 11, 13, 18, 19) and Upsample (7, 9, 10) kernels.

Both kernels and the shape function start from the same C plan (runtime_c/onnxc_resize.h,
templates/resize_plan.c.j2): the
scale and output size of every axis from the scales or sizes (constant or run-time data, with axes
and keep_aspect_ratio_policy). The kernel then builds one sampling table per axis (per output
coordinate: source indices and weights, see the header) and

- nearest: gathers every output element directly through the tables (any element type, bit copies;
  trailing axes that are never resized move as contiguous blocks);
- linear / cubic (antialias included): runs one separable pass per axis that changes, shrinking axes
  first so later passes touch fewer elements. Passes compute in float (float, float16, bfloat16) or
  double (double, integers: rounded half to even and saturated at the end, as onnx.reference).

The C is in templates/resize*.c.j2 (resize_pass.c.j2: the passes, a helper per compute type).

Semantics follow onnx.reference (which the conformance data comes from); it differs from onnxruntime
in align_corners / tf_crop_and_resize / pytorch_half_pixel when ``dim * scale`` is not an integer:
the real-valued output length is used there. Resize-10 and Upsample use onnxruntime's rule
(asymmetric coordinates; nearest floors when upscaling, ceils when downscaling).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType, Node, TensorType
from onnxc.passes.shapes.resize import ResizeSpec, resize_spec

from ..cexpr import c_literal, c_product
from ..templating import render
from . import dynshape as ds
from . import half
from .base import KernelCtx, kernel
from .parcall import par_call
from .parfor import PAR_GRAIN
from .typesets import ARITH, MOVABLE

_MODES = {"nearest": "ONNXC_RZ_NEAREST", "linear": "ONNXC_RZ_LINEAR", "cubic": "ONNXC_RZ_CUBIC"}
_CTMS = {"half_pixel": "ONNXC_RZ_HALF_PIXEL", "half_pixel_symmetric": "ONNXC_RZ_HALF_PIXEL_SYMMETRIC",
         "pytorch_half_pixel": "ONNXC_RZ_PYTORCH_HALF_PIXEL", "align_corners": "ONNXC_RZ_ALIGN_CORNERS",
         "asymmetric": "ONNXC_RZ_ASYMMETRIC", "tf_half_pixel_for_nn": "ONNXC_RZ_TF_HALF_PIXEL_FOR_NN",
         "tf_crop_and_resize": "ONNXC_RZ_TF_CROP_AND_RESIZE"}
_NEAREST = {"round_prefer_floor": "ONNXC_RZ_ROUND_PREFER_FLOOR", "round_prefer_ceil": "ONNXC_RZ_ROUND_PREFER_CEIL",
            "floor": "ONNXC_RZ_FLOOR", "ceil": "ONNXC_RZ_CEIL", "legacy": "ONNXC_RZ_LEGACY"}
_POLICY = {"stretch": 0, "not_larger": 1, "not_smaller": 2}
_INT_RANGE = {DType.INT8: ("INT8_MIN", "INT8_MAX"), DType.UINT8: ("0", "UINT8_MAX"),
              DType.INT16: ("INT16_MIN", "INT16_MAX"), DType.UINT16: ("0", "UINT16_MAX"),
              DType.INT32: ("INT32_MIN", "INT32_MAX"), DType.UINT32: ("0", "UINT32_MAX"),
              DType.INT64: ("INT64_MIN", "INT64_MAX"), DType.UINT64: ("0", "UINT64_MAX")}

def _accepts(node: Node) -> str | None:
    """Nearest moves any element type (``types=``); interpolation needs arithmetic; scales are float."""
    x = node.input(0)
    t = x.type if x is not None else None
    mode = node.attr("mode", "nearest")
    if isinstance(t, TensorType) and mode != "nearest" and t.dtype not in ARITH:
        return f"element type {t.dtype.short} is not supported for mode {mode!r}"
    if isinstance(t, TensorType) and t.shape is not None and len(t.shape) > 16:
        return "rank above 16 is not supported"
    scales = node.input(1 if node.op_type == "Upsample" or node.version < 11 else 2)
    if scales is not None and isinstance(scales.type, TensorType) and scales.type.dtype not in (DType.FLOAT,
                                                                                              DType.DOUBLE):
        return f"scales of type {scales.type.dtype.short} are not supported (float expected)"
    return None


def _plan(ctx: KernelCtx, spec: ResizeSpec) -> str:
    """C declaring ``din``/``dout`` (input and output dims) and ``sc`` (per-axis scale), checked."""
    ctx.include("onnxc_resize.h")
    r, n = spec.rank, len(spec.axes)
    scale_vals = scales_in = sizes = None
    if spec.attr_scales is not None:
        scale_vals = ", ".join(c_literal(s, DType.FLOAT) for s in spec.attr_scales) or "0"
    elif spec.scales is not None:
        scales_in = spec.scales
    else:
        sizes = ds.read_ints(ctx, spec.sizes, n, "szs")
    arg = "scl" if sizes is None else "NULL"
    check = ds.check(f"onnxc_resize_plan(rt, {ds.who(ctx)}, {r}, din, {n}, axs, {arg}, {'szs' if sizes else 'NULL'}, "
                     f"{_POLICY[spec.policy]}, sc, dout)")
    return render("resize_plan.c.j2", din=ds.in_dims(ctx, 0, "din"), R=max(r, 1), NA=max(n, 1), n=n,
                  axes=", ".join(map(str, spec.axes)) or "0", scale_vals=scale_vals, scales_in=scales_in,
                  sizes=sizes, check=check)


def resize_shape(ctx: KernelCtx) -> str:
    """Output dims computed from run-time scales or sizes."""
    spec = resize_spec(ctx.node)
    return "\n".join([_plan(ctx, spec).rstrip("\n"), "(void)sc;", ds.bind_array(ctx, 0, "dout"), "return 0;"])


def _opts(ctx: KernelCtx, spec: ResizeSpec) -> str:
    """The initializer of the kernel's ``onnxc_resize_opts``."""
    roi = ctx.ins[spec.roi] if spec.roi is not None else None
    f32 = int(roi is not None and roi.dtype != DType.DOUBLE)
    return (f"{_MODES[spec.mode]}, {_CTMS[spec.ctm]}, {_NEAREST[spec.nearest_mode]}, "
            f"{int(spec.antialias)}, {int(spec.exclude_outside)}, {spec.cubic_a!r}, {f32}")


def _roi(ctx: KernelCtx, spec: ResizeSpec) -> list[tuple[int, str, str]]:
    """(axis, lo, hi) C expressions of the roi of every resized axis, when the node has a roi input."""
    if spec.roi is None:
        return []
    roi = ctx.ins[spec.roi]
    if roi.dtype in half.HALF:
        half.use(ctx)
    n = len(spec.axes)
    return [(a, half.load(roi.dtype, f"in{spec.roi}[{i}]"), half.load(roi.dtype, f"in{spec.roi}[{n + i}]"))
            for i, a in enumerate(spec.axes)]


def _ev_stored(spec: ResizeSpec, dt: DType) -> str:
    """The extrapolation value as a stored element of ``dt``."""
    v = spec.extrapolation
    if dt == DType.BOOL:
        return c_literal(v != 0, dt)
    if dt.is_float or dt in half.HALF:
        return c_literal(v, dt)
    info = np.iinfo(dt.np)
    return c_literal(int(min(max(np.round(v), info.min), info.max)) if np.isfinite(v) else 0, dt)


def _nearest(ctx: KernelCtx, spec: ResizeSpec) -> dict:
    """Template values of the nearest gather (templates/resize_nearest.c.j2): ``last`` is the last
    resized axis; the axes after it move as blocks of ``blk`` elements; planes are all axes before the
    row axis ``last - 1``."""
    x = ctx.ins[0]
    k = spec.rank
    while k > 0 and (k - 1) not in spec.axes:
        k -= 1
    if k == 0:
        return {"copy": True, "ct": x.ctype}
    xs = x.strides()
    blk = c_product(x.dims[k:]) if k < spec.rank else "1"
    row_axis = k - 2  # -1: a single row
    caps = [("const onnxc_resize_axis *", "ax"), ("const int64_t *", "dout")]
    if any("din[" in e for e in [blk, *xs]):
        caps.append(("const int64_t *", "din"))
    esize = x.dtype.itemsize if x.dtype.itemsize in (1, 2, 4, 8) else 0  # onnxc_resize_repeat_<esize>
    return {"copy": False, "ct": x.ctype, "ev": _ev_stored(spec, x.dtype), "blk": blk, "last": k - 1, "esize": esize,
            "rows": f"dout[{row_axis}]" if row_axis >= 0 else "1",
            "planes": " * ".join(f"dout[{a}]" for a in range(max(row_axis, 0))) or "1",
            "outer": [(a, xs[a]) for a in range(row_axis - 1, -1, -1)],
            "row_index": f"ax[{row_axis}].idx[i]" if row_axis >= 0 else "0",
            "row_stride": xs[row_axis] if row_axis >= 0 else "0", "caps": caps, "par": par_call(ctx)}


def _store_int(ctx: KernelCtx, dt: DType) -> str:
    """Helper rounding a double half to even and saturating it into integer type ``dt``."""
    lo, hi = _INT_RANGE[dt]
    name = f"onnxc_resize_sat_{dt.short}"
    ctx.helper(name, f"static inline {dt.c} {name}(double v) {{\n"
                     f"    if (v != v) return 0;\n    v = nearbyint(v);\n"
                     f"    if (v <= (double){lo}) return {lo};\n    if (v >= (double){hi}) return {hi};\n"
                     f"    return ({dt.c})v;\n}}")
    return name


def _separable(ctx: KernelCtx, spec: ResizeSpec) -> dict:
    """Template values of linear / cubic: passes in the compute type ``T``; converted copies for half
    and integer types."""
    dt = ctx.ins[0].dtype
    ct = DType.DOUBLE if dt == DType.DOUBLE or dt in _INT_RANGE else DType.FLOAT
    T = ct.c
    ctx.helper(f"onnxc_resize_pass_{T}", render("resize_pass.c.j2", T=T, grain=PAR_GRAIN))
    values = {"T": T, "ev": c_literal(spec.extrapolation, ct), "convert": dt != ct, "load": "", "store": ""}
    if dt in half.HALF:
        half.use(ctx)
        values.update(store=half.store(dt, "yc[i]"), load=half.load(dt, "in0[i]"))
    elif dt != ct:
        values.update(store=f"{_store_int(ctx, dt)}(yc[i])", load=f"({T})in0[i]")
    return values


@kernel("Resize", "Upsample", types=MOVABLE, accepts=_accepts, shape_fn=resize_shape)
def resize(ctx: KernelCtx) -> str:
    spec = resize_spec(ctx.node)
    x, y = ctx.ins[0], ctx.outs[0]
    r = spec.rank
    if r == 0:
        return "out0[0] = in0[0];\nreturn 0;"
    plan = _plan(ctx, spec).rstrip("\n")
    mode = _nearest(ctx, spec) if spec.mode == "nearest" else _separable(ctx, spec)
    return render("resize.c.j2", plan=plan, out_dims=list(enumerate(y.dims)), who=ds.who(ctx), nx=x.numel(),
                  ny=y.numel(), opts=_opts(ctx, spec), roi=_roi(ctx, spec), r=r, nearest=spec.mode == "nearest",
                  **mode)
