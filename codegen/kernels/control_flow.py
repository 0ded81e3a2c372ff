"""If, Loop, Scan and SequenceMap: call the bodies' compiled run functions and assemble the results.

Every body is compiled into the same translation unit as a static run function with the model ABI
(``ctx.subprogram``), taking ``onnxc_tensor`` descriptors: the ONNX formals first, then the node's
captured values (passes/lift_captures.py). These kernels allocate their outputs: the body's
outputs become the node's (ownership passes through), Loop/Scan stack per-iteration outputs into
buffers they grow or size on the first iteration, and every shape the spec requires to agree across
iterations is checked. On any failure everything the kernel owns is released. The C of Loop, Scan and
SequenceMap is in templates/control_flow_*.c.j2; the element type codes it writes come from ``DType``.
"""

from __future__ import annotations

from onnxc.ir import DType
from onnxc.passes.lift_captures import captures, onnx_inputs
from onnxc.passes.shapes.control_flow import scan_layout

from ..cexpr import c_product
from ..templating import render
from .base import KernelCtx, Operand, kernel
from .typesets import STORABLE

# what body outputs may hold (the outputs' element types): values copied as bytes; strings do not
# leave bodies yet (lower.py)
BODY_TYPES = STORABLE


def describe(op: Operand, var: str) -> list[str]:
    """C statements making descriptor ``var`` point at operand ``op`` (borrowed, not owned)."""
    if op.dtype is None:
        return [f"{var} = onnxc_value_desc({op.ptr});"]
    lines = [f"{var}.data = (void *){op.ptr};", f"{var}.rank = {op.rank};", f"{var}.dtype = {int(op.dtype)};"]
    lines += [f"{var}.dims[{k}] = {d};" for k, d in enumerate(op.dims)]
    return lines


def capture_lines(ctx: KernelCtx, var: str, first: int) -> list[str]:
    """Fill ``var[first...]`` with the node's captured values."""
    n = len(onnx_inputs(ctx.node))
    lines = []
    for j, _ in enumerate(captures(ctx.node)):
        lines += describe(ctx.ins[n + j], f"{var}[{first + j}]")
    return lines


def call(fn: str, off: int, ins: str, outs: str) -> str:
    """A call of a body's run function: it shares the run's threads and cancel counter."""
    return f"{fn}(rt->W + {off}, {ins}, {outs}, rt->err, rt->errlen, rt->threads, rt->cancel, rt->cancel0)"


def cancelled(ctx: KernelCtx, it: str) -> str:
    """C recording a cancelled run (runtime_c/onnxc_process.h) at iteration ``it`` into ``st_``: each
    iteration of Loop, Scan and SequenceMap, whose bodies may be empty, polls once, and a cancelled body
    (it polls between its steps) says which node and iteration of the enclosing kernel it was in."""
    return (f"st_ = onnxc_fail(rt, ONNXC_ERR_CANCELLED, \"run cancelled in %s at iteration %lld\", {ctx.who}, "
            f"(long long)({it}));")


def empty_dims(ctx: KernelCtx, k: int) -> list[str]:
    """Dims of output ``k`` when no iteration produced it: its inferred dims, 0 where only a run
    would have told."""
    out = ctx.outs[k]
    return ["0" if ctx.lvalue(d) is not None else ctx.dim(d) for d in out.shape]


@kernel("If", allocates=True, types=BODY_TYPES, typed="out0")
def if_kernel(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    node = ctx.node
    then_fn, then_off = ctx.subprogram(node.attr("then_branch"))
    else_fn, else_off = ctx.subprogram(node.attr("else_branch"))
    nc, no = len(captures(node)), len(node.outputs)
    lines = [f"onnxc_tensor sin_[{max(1, nc)}], so_[{no}];", "memset(sin_, 0, sizeof sin_);",
             "memset(so_, 0, sizeof so_);"]
    lines += capture_lines(ctx, "sin_", 0)
    lines.append(f"int st_ = in0[0] ? {call(then_fn, then_off, 'sin_', 'so_')} : "
                 f"{call(else_fn, else_off, 'sin_', 'so_')};")
    lines.append("if (st_) return st_;")
    lines += [f"*out{k} = so_[{k}];" for k in range(no)]
    lines.append("return 0;")
    return "\n".join(lines)


@kernel("Loop", allocates=True, types=BODY_TYPES, typed="out0")
def loop_kernel(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    ins = onnx_inputs(node)
    nv, nc = len(ins) - 2, len(captures(node))
    nk = len(node.outputs) - nv
    init = [ln for j in range(nv) for ln in describe(ctx.ins[2 + j], f"cur_[{j}]")] + capture_lines(ctx, "sin_", 2 + nv)
    scan_outs = [(k, {"rank": ctx.outs[nv + k].rank, "dtype": int(ctx.outs[nv + k].dtype),
                      "dims": list(enumerate(empty_dims(ctx, nv + k)))}) for k in range(nk)]
    return render("control_flow_loop.c.j2", trip="in0[0]" if ins[0] is not None else "INT64_MAX",
                  cond="in1[0]" if len(ins) > 1 and ins[1] is not None else "1", nv=nv, nk=nk,
                  NV=max(1, nv), NK=max(1, nk), nin=2 + nv + nc, nout=1 + nv + nk, init=init,
                  cancelled=cancelled(ctx, "it_"), body=call(body_fn, off, "sin_", "so_"),
                  iter_dtype=int(DType.INT64), cond_dtype=int(DType.BOOL), scan_outs=scan_outs)


def _scan_inputs(ctx: KernelCtx, first: int, ns: int, in_axes: list[int], in_dirs: list[int], batched: bool) -> list[dict]:
    """Per scan input: its length T along the scan axis, the outer x inner blocks of a slice, the slice's
    dims and the step's slice index ``t`` (reversed for reverse directions)."""
    out = []
    for j, d in enumerate(in_dirs):
        x = ctx.ins[first + ns + j]
        ax = in_axes[j] % x.rank if not batched else 1
        out.append({"T": x.dims[ax], "outer": c_product(x.dims[1 if batched else 0:ax]), "inner": c_product(x.dims[ax + 1:]),
                    "es": f"sizeof({x.ctype})", "dtype": int(x.dtype), "arg": first + ns + j,
                    "sdims": [dd for a, dd in enumerate(x.dims) if a != ax][1 if batched else 0:],
                    "t": "(T_ - 1 - t_)" if d else "t_"})
    return out


def _scan_states(ctx: KernelCtx, first: int, ns: int, batched: bool) -> list[dict]:
    """Per state: a borrowed view of the input (of batch entry ``b_`` when batched)."""
    out = []
    for j in range(ns):
        s = ctx.ins[first + j]
        sd = (s.dims[1:] if batched else s.dims) if s.dtype is not None else []
        out.append({"j": j, "arg": first + j, "value": s.dtype is None, "per": c_product(sd), "dims": sd,
                    "dtype": int(s.dtype) if s.dtype is not None else 0})
    return out


def _scan_outputs(ctx: KernelCtx, ns: int, out_axes: list[int], out_dirs: list[int], batched: bool) -> list[dict]:
    """Per scan output: its rank, the rank ``erank`` of a step's slice, the scan axis in the slice, the dims
    of the stacked buffer (from the first step's slice) and of an output no step produced."""
    out = []
    for k, d in enumerate(out_dirs):
        y = ctx.outs[ns + k]
        r = y.rank - (1 if batched else 0)
        oax = out_axes[k] % r if not batched else 0
        e = f"so_[{ns + k}]"
        full = (["B_"] if batched else []) + [f"{e}.dims[{a}]" for a in range(oax)] + ["T_"] + \
            [f"{e}.dims[{a}]" for a in range(oax, r - 1)]
        out.append({"rank": y.rank, "erank": r - 1, "dtype": int(y.dtype), "axis": oax, "lead": int(batched),
                    "t": "(T_ - 1 - t_)" if d else "t_", "full": full, "empty": empty_dims(ctx, ns + k)})
    return out


@kernel("Scan", allocates=True, types=BODY_TYPES, typed="out0")
def scan_kernel(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    first, ns, nx, in_axes, out_axes = scan_layout(node)
    batched = node.version < 9
    nc = len(captures(node))
    ny = len(node.outputs) - ns
    in_dirs = list(node.attr("directions" if batched else "scan_input_directions", [0] * nx))
    out_dirs = [0] * ny if batched else list(node.attr("scan_output_directions", [0] * ny))
    return render("control_flow_scan.c.j2", B=ctx.ins[first + ns].dims[0] if batched else "1", ns=ns, nx=nx, ny=ny,
                  NS=max(1, ns), NX=max(1, nx), NY=max(1, ny), nsin=ns + nx + nc, batched=batched,
                  xs=_scan_inputs(ctx, first, ns, in_axes, in_dirs, batched),
                  states=_scan_states(ctx, first, ns, batched), ys=_scan_outputs(ctx, ns, out_axes, out_dirs, batched),
                  capture_lines=capture_lines(ctx, "sin_", ns + nx), state_dtypes=[int(o.dtype) for o in ctx.outs[:ns]],
                  cancelled=cancelled(ctx, "b_ * T_ + t_"), body=call(body_fn, off, "sin_", "so_"))


@kernel("SequenceMap", allocates=True, types=BODY_TYPES, typed="out0")
def sequence_map_kernel(ctx: KernelCtx) -> str:
    ctx.include("onnxc_value.h")
    node = ctx.node
    body_fn, off = ctx.subprogram(node.attr("body"))
    ni, nc, no = len(onnx_inputs(node)), len(captures(node)), len(node.outputs)
    inputs = [(j, None if ctx.ins[j].dtype is None else describe(ctx.ins[j], f"sin_[{j}]")) for j in range(ni)]
    return render("control_flow_sequence_map.c.j2", nsin=ni + nc, no=no, inputs=inputs,
                  capture_lines=capture_lines(ctx, "sin_", ni),
                  out_dtypes=[int(ctx.outs[k].value.type.elem.dtype) for k in range(no)],
                  cancelled=cancelled(ctx, "i"), body=call(body_fn, off, "sin_", "so_"))
