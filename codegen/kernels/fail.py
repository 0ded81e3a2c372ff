"""onnxc::Fail: the body of an If branch that cannot run for its shapes (passes/sink_into_if.py). Its shape
function returns the error the compiler met, so the model fails when, and only when, that branch is taken,
as the ONNX graph would."""

from __future__ import annotations

from onnxc.passes.shapes.control_flow import FAIL_DOMAIN, FAIL_OP

from .base import KernelCtx, kernel
from .copyutil import MOVABLE


def _fail(ctx: KernelCtx) -> str:
    msg = ctx.attr("message").replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("\n", " ")
    return f'return onnxc_fail(rt, ONNXC_ERR_RUNTIME, "%s: {msg}", {ctx.who});'


def _fail_shape(ctx: KernelCtx) -> str:
    return "".join(f"{lv} = 0; " for lv in ctx.defines.values()) + _fail(ctx)  # the dims are never read


@kernel(FAIL_OP, domain=FAIL_DOMAIN, types=MOVABLE, typed="out0", shape_fn=_fail_shape)
def fail(ctx: KernelCtx) -> str:
    return _fail(ctx)
