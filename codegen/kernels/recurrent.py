"""Kernels of onnxc::RNN, onnxc::GRU and onnxc::LSTM: the standard recurrent ops (all opsets) with W
and R packed (see passes/expansions/recurrent.py; attributes parsed by passes/shapes/recurrent.py).

Each direction runs as a static function rendered from templates/recurrent.c.j2 with the node's
activations, clip, peepholes and GRU/LSTM variant baked into the fused gate math: the input
projection X W^T of all time steps is one matrix product; each time step is one small product of
the batch's states with R^T, followed by one vectorized loop of gate math per batch row. Both
products read weights packed in panels (runtime_c/onnxc_recurrent.h). Threads are the runtime's
pool (onnxc_pool.h): the two directions of a bidirectional node run as two chunks of one job
(par_for) when the node may use several threads; an RNN/LSTM direction whose steps are large
(ONNXC_RNN_STEP_PAR_MIN) runs its steps on several threads, each owning whole panels of hidden units,
with one barrier per step (onnxc_rnn_steps: roles that start late or never are not waited for). LSTM
with the default activations computes its gate math with 512-bit vectors where there are
(``onnxc_lstm_gates_s``); at batch 1 with whole panels per gate its step is one fused pass over R
(``onnxc_lstm_step_s``: the four gate columns of 32 units accumulate in registers and go through the
gate math at once; threads from ONNXC_LSTM_FUSED_PAR_MIN multiply-adds per step).

sequence_lens: a batch entry is processed only over its own length (a reverse direction starts at
its last valid step); Y is zero past the length and Y_h/Y_c are the states of the last valid step,
zero for an empty sequence (onnxruntime's convention). Lengths outside [0, seq_length] are a run-time
error naming the node. float16/bfloat16 run the float32 kernel on converted copies.
"""

from __future__ import annotations

import hashlib

from onnxc.ir import DType
from onnxc.passes.shapes.recurrent import (
    INTERNAL_DOMAIN,
    Activation,
    RecurrentSpec,
    panel_width,
    recurrent_spec,
)

from ..cexpr import c_literal
from ..templating import render
from . import half
from .base import KernelCtx, kernel
from .nncommon import is_used
from .parfor import par_for
from .typesets import ALL_FLOATS


def _act(a: Activation, v: str, dt: DType) -> list[str]:
    """C statements applying activation ``a`` to variable ``v`` in place."""
    sfx = "float" if dt == DType.FLOAT else "double"
    al, be, one, zero = c_literal(a.alpha, dt), c_literal(a.beta, dt), c_literal(1.0, dt), c_literal(0.0, dt)
    return {
        "relu": [f"{v} = {v} > {zero} ? {v} : {zero};"],
        "tanh": [f"{v} = onnxc_tanh_{sfx}({v});"],
        "sigmoid": [f"{v} = onnxc_sigmoid_{sfx}({v});"],
        "affine": [f"{v} = {al} * {v} + {be};"],
        "leakyrelu": [f"{v} = {v} >= {zero} ? {v} : {al} * {v};"],
        "thresholdedrelu": [f"{v} = {v} > {al} ? {v} : {zero};"],
        "scaledtanh": [f"{v} = {al} * onnxc_tanh_{sfx}({be} * {v});"],
        "hardsigmoid": [f"{v} = {al} * {v} + {be};", f"{v} = {v} < {zero} ? {zero} : ({v} > {one} ? {one} : {v});"],
        "elu": [f"{v} = {v} >= {zero} ? {v} : {al} * onnxc_expm1_{sfx}({v});"],
        "softsign": [f"{v} = {v} / ({one} + ({v} < {zero} ? -{v} : {v}));"],
        "softplus": [f"{v} = onnxc_softplus_{sfx}({v});"],
    }[a.name]


def _gate(v: str, pre: str, act: Activation, spec: RecurrentSpec, dt: DType) -> list[str]:
    """Declare ``v`` = pre-activation ``pre``, clipped, through ``act``."""
    lines = [f"{dt.c} {v} = {pre};"]
    if spec.clip is not None:
        c = c_literal(spec.clip, dt)
        lines.append(f"{v} = {v} < -{c} ? -{c} : ({v} > {c} ? {c} : {v});")
    return lines + _act(act, v, dt)


def _phases(spec: RecurrentSpec, acts: tuple[Activation, ...], peep: bool, dt: DType) -> list[list[str]]:
    """The gate math of one step (per element k of one batch row), in one or two phases."""
    def pre(g: int, extra: str = "") -> str:
        off = f"{g} * H + k" if g else "k"
        return f"gx[{off}] + gr[{off}] + bias[{off}]{extra}"

    one = c_literal(1.0, dt)
    if spec.op == "RNN":
        return [_gate("a", pre(0), acts[0], spec, dt) + ["hb[k] = a;"]]
    if spec.op == "LSTM":
        f, g, h = acts
        lines = [f"const {dt.c} cp = cb[k];"]
        lines += _gate("ig", pre(0, " + pi[k] * cp" if peep else ""), f, spec, dt)
        if spec.input_forget:
            lines.append(f"const {dt.c} fg = {one} - ig;")
        else:
            lines += _gate("fg", pre(2, " + pf[k] * cp" if peep else ""), f, spec, dt)
        lines += _gate("cg", pre(3), g, spec, dt)
        lines.append(f"const {dt.c} cn = fg * cp + ig * cg;")
        lines += _gate("og", pre(1, " + po[k] * cn" if peep else ""), f, spec, dt)
        lines += [f"{dt.c} hc = cn;", *_act(h, "hc", dt), "hb[k] = og * hc;", "cb[k] = cn;"]
        return [lines]
    f, g = acts
    zr = _gate("z", pre(0), f, spec, dt) + _gate("r", pre(1), f, spec, dt)
    if spec.linear_before_reset:
        n = _gate("n", "gx[2 * H + k] + bias[2 * H + k] + r * (gr[2 * H + k] + rbh[k])", g, spec, dt)
        return [zr + n + [f"hb[k] = ({one} - z) * n + z * hb[k];"]]
    phase_a = zr + ["zr[k] = z;", "hrb[k] = r * hb[k];"]
    phase_b = _gate("n", "gx[2 * H + k] + bias[2 * H + k] + g2[k]", g, spec, dt)
    return [phase_a, phase_b + [f"hb[k] = ({one} - zr[k]) * n + zr[k] * hb[k];"]]


def _direction_fn(ctx: KernelCtx, spec: RecurrentSpec, d: int, dt: DType) -> str:
    """Name of the static function running direction ``d`` (shared by identical nodes)."""
    peep = spec.op == "LSTM" and ctx.node.input(7) is not None
    two = spec.op == "GRU" and not spec.linear_before_reset
    acts = spec.activations[d]
    vgates = (spec.op == "LSTM" and dt == DType.FLOAT and [a.name for a in acts] == ["sigmoid", "tanh", "tanh"]
              and (spec.clip is None or spec.clip > 0))
    vals = dict(
        what=f"{spec.op}, activations {', '.join(a.name for a in acts)}",
        TT=dt.c, S="s" if dt == DType.FLOAT else "d", PW=panel_width(dt),
        op=spec.op, G=spec.gates,
        G1=2 if two else spec.gates, two_products=two, lbr=spec.linear_before_reset, peep=peep,
        phases=_phases(spec, acts, peep, dt),
        # the time steps of one direction may run on several threads (one product and gate math per step
        # that read only the previous states)
        par=spec.op in ("LSTM", "RNN"),
        # LSTM gate math of the default activations with vectors (onnxc_lstm_gates_s)
        vgates=vgates, clip="INFINITY" if spec.clip is None else c_literal(spec.clip, dt),
        # multiply-adds per step from which the steps run on several threads (a tuning knob of its own for
        # the fused batch-1 LSTM step)
        step_par_min="(fused ? ONNXC_LSTM_FUSED_PAR_MIN : ONNXC_RNN_STEP_PAR_MIN)" if vgates else "ONNXC_RNN_STEP_PAR_MIN",
        input_forget=int(bool(spec.input_forget)))
    code = render("recurrent.c.j2", fname="NAME", **vals)
    name = "onnxc_rnn_" + hashlib.sha1(code.encode()).hexdigest()[:16]
    ctx.include("onnxc_recurrent.h")
    ctx.include("onnxc_elementwise.h")
    return ctx.helper(name, code.replace("NAME", name))


@kernel("RNN", "GRU", "LSTM", domain=INTERNAL_DOMAIN, types=ALL_FLOATS)
@half.via_float32
def recurrent(ctx: KernelCtx) -> str:
    spec = recurrent_spec(ctx.node)
    x, w, r = ctx.ins[0], ctx.ins[1], ctx.ins[2]
    dt = x.dtype
    nd, layout = spec.num_directions, spec.layout
    seq, batch = (x.dims[1], x.dims[0]) if layout else (x.dims[0], x.dims[1])

    def present(i: int) -> bool:
        return i < len(ctx.ins) and ctx.ins[i] is not None

    def out_ptr(i: int, off: str) -> str:
        used = i < len(ctx.outs) and is_used(ctx.outs[i].value)
        return f"out{i} + {off}" if used else "NULL"

    lines = [f"const int64_t T = {seq}, N = {batch}, I = {x.dims[2]}, H = {r.dims[2]}, GH = {spec.gates} * H;",
             "int64_t *lens = onnxc_alloc((size_t)N * sizeof(int64_t));",
             f"if (!lens) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ctx.who});",
             "for (int64_t b = 0; b < N; b++) {"]
    if present(4):
        lines += ["    lens[b] = (int64_t)in4[b];",
                  "    if (lens[b] < 0 || lens[b] > T) {",
                  "        const long long bad = (long long)lens[b];",
                  "        free(lens);",
                  f"        return onnxc_fail(rt, ONNXC_ERR_RUNTIME, \"%s: sequence_lens[%lld] = %lld is outside [0, "
                  f"%lld]\", {ctx.who}, (long long)b, bad, (long long)T);",
                  "    }"]
    else:
        lines.append("    lens[b] = T;")
    lines += ["}", "(void)GH;"]
    # per direction d: offset of its part of the states and of Y (the same), and the row strides
    s_off = (lambda d: f"{d} * H") if layout else (lambda d: f"{d} * N * H")
    s_sb = f"{nd} * H" if layout else "H"
    y_st, y_sb = (f"{nd} * H", f"T * {nd} * H") if layout else (f"{nd} * N * H", "H")
    x_st, x_sb = ("1", "T") if layout else ("N", "1")
    calls = []
    for d in range(nd):
        fn = _direction_fn(ctx, spec, d, dt)
        args = [
            "inner", "T", "N", "I", "H", "1" if (spec.direction == "reverse" or d == 1) else "0",
            "in0", x_st, x_sb, f"in1 + {d} * {w.dims[1]} * I * {w.dims[3]}", f"in2 + {d} * {r.dims[1]} * H * {r.dims[3]}",
            f"in3 + {d} * 2 * GH" if present(3) else "NULL", "lens",
            f"in5 + {s_off(d)}" if present(5) else "NULL", f"in6 + {s_off(d)}" if present(6) else "NULL", s_sb,
            f"in7 + {d} * 3 * H" if present(7) else "NULL",
            out_ptr(0, s_off(d)), y_st, y_sb, out_ptr(1, s_off(d)), out_ptr(2, s_off(d)), s_sb,
        ]
        calls.append(f"{fn}({', '.join(args)})")
    if nd == 1:
        lines += ["const int inner = rt->threads;", f"const int rc = {calls[0]};"]
    else:
        # the directions are independent: one thread each on the pool (a direction runs its own products and
        # steps on the thread that runs it: a pool job inside a job would run on its caller alone anyway)
        work = "2.0 * (double)T * (double)N * (double)GH * (double)(I + H)"
        lines += ["const int inner = 1;", "int rc = 0, *bad_ = &rc;"]
        lines += par_for(ctx, "d", "2", [f"if (d == 0 ? {calls[0]} : {calls[1]}) __atomic_store_n(bad_, 1, __ATOMIC_RELAXED);"],
                         work=work, head=[lines[0]], captures=[("int64_t *", "lens"), ("int", "inner"), ("int *", "bad_")])
    lines += ["free(lens);",
              f"if (rc) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {ctx.who});",
              "return 0;"]
    return "\n".join(lines)
