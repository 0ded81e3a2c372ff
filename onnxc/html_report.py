"""``onnxc info --html``: one self-contained HTML page showing what the compiler made of a model.

The page shows the optimized graph as a list of steps in run order (one collapsible entry per IR
node: its op, output shapes as formulas of the input dims, inputs and attributes), with fused groups
marked and spelled out (epilogues folded into Conv/Gemm/MatMul, ElementwiseChain trees,
DepthwisePointwise pairs, FusedAttention), the memory plan (arena buffers, sizes as formulas,
lifetimes as an SVG chart; offsets when the plan is static or example dims are given) and, from a
profiling build (``--profile``), the time per kernel step and per operator.

Everything is inline (CSS, a little JavaScript for filtering and sorting, SVG): the page needs no
network and opens from a file or an e-mail attachment. Profile steps are matched to program steps by
their descriptions (codegen/emit.py labels each timed step with its node's description).
"""

from __future__ import annotations

import os
from collections import Counter
from html import escape
from pathlib import Path

import numpy as np

from onnxc.codegen.emit import _comment
from onnxc.codegen.lower import Buffer, Program
from onnxc.codegen.memory_plan import Slot, first_fit
from onnxc.ir import Dim, Model, Node
from onnxc.ir.dims import evaluate, free_symbols
from onnxc.passes.shapes.epilogue_spec import (
    ACT_ATTR,
    BIAS_ATTR,
    DW_ACT_ATTR,
    DW_PARAMS_ATTR,
    DWPW_OP,
    EX_ACT_ATTR,
    EX_PARAMS_ATTR,
    EXPAND_INPUT,
    PARAMS_ATTR,
    RESIDUAL_ATTR,
)
from onnxc.passes.shapes.fused import Op, walk
from onnxc.profile import Profile

FUSED_LABELS = {"epilogue": "fused epilogue", "chain": "elementwise chain", "dwpw": "depthwise+pointwise",
                "attention": "fused attention", "internal": "onnxc op"}


# ------------------------------------------------------------------------------------- what is fused

def _act(node: Node, act: str, params: str) -> str:
    name = node.attr(act)
    if name is None:
        return ""
    name = name.decode() if isinstance(name, bytes) else str(name)
    ps = node.attr(params)
    return name + (f"({', '.join(f'{p:g}' for p in ps)})" if ps else "")


def _epilogue(node: Node) -> list[str]:
    """The ops folded into a product's output tiles (passes/fuse_epilogues.py), in the order applied."""
    parts = []
    if node.attr(BIAS_ATTR):
        parts.append(f"+ bias ({BIAS_ATTR})")
    if node.attr(RESIDUAL_ATTR):
        parts.append("+ residual (Add)")
    act = _act(node, ACT_ATTR, PARAMS_ATTR)
    if act:
        parts.append(f"activation {act}")
    return parts


def fusion(node: Node) -> tuple[str, list[str]] | None:
    """(kind, lines describing the members) of a fused node, None for a plain one."""
    op = node.op_type
    if node.domain == "onnxc" and op == "ElementwiseChain":
        expr = node.attr("expr")
        ops = [e.op for e in walk(expr) if isinstance(e, Op)]
        counts = ", ".join(f"{o}" + (f" x{k}" if k > 1 else "") for o, k in Counter(ops).items())
        text = repr(expr)
        return "chain", [f"{len(ops)} elementwise ops in one loop: {counts}",
                         "expression (%k = input k): " + (text if len(text) <= 1500 else text[:1497] + "...")]
    if node.domain == "onnxc" and op == DWPW_OP:
        ks = "x".join(str(k) for k in node.attr("kernel_shape", []))
        dw = f"depthwise Conv {ks}, strides {node.attr('strides')}, pads {node.attr('pads')}"
        act = _act(node, DW_ACT_ATTR, DW_PARAMS_ATTR)
        pw = ["pointwise 1x1 Conv"] + _epilogue(node)
        lines = [dw + (f", activation {act}" if act else ""), "then " + ", ".join(pw),
                 "the depthwise output stays in a per-thread band buffer (never written to memory)"]
        if node.input(3) is None:
            lines[1:] = ["no pointwise Conv after: the depthwise rows are the output"]
        if node.input(EXPAND_INPUT) is not None:
            ex = _act(node, EX_ACT_ATTR, EX_PARAMS_ATTR)
            lines[:0] = ["expanding pointwise 1x1 Conv" + (f", activation {ex}" if ex else "") +
                         ": its rows are computed per band, in the band buffer"]
        return "dwpw", lines
    if node.domain == "onnxc" and op == "FusedAttention":
        mode = node.attr("scale_mode", 0)
        scale = {1: f"x {node.attr('scale'):g}", 2: f"/ {node.attr('scale'):g}"}.get(mode)
        chain = ["MatMul(Q, Kt)"] + ([scale] if scale else []) + (["+ mask"] if node.input(3) is not None else [])
        lines = [" -> ".join(chain + ["Softmax(axis=-1)", "MatMul(., V)"])]
        for name in ("q_perm", "k_perm", "v_perm", "out_perm"):
            perm = list(node.attr(name) or [])
            if perm != sorted(perm):
                lines.append(f"transpose folded in: {name} {perm}")
        return "attention", lines
    if op in ("Conv", "Gemm", "MatMul") and _epilogue(node):
        return "epilogue", [f"{op}, then " + ", then ".join(_epilogue(node)) + ", applied to each output tile"]
    if node.domain == "onnxc":
        return "internal", [f"onnxc::{op}, written by the passes"]
    return None


# ------------------------------------------------------------------------------------ steps and times

def step_seconds(program: Program, profile: Profile | None) -> dict[int, float]:
    """Seconds (summed over the profile's runs) by program step index; profile entries are the
    timed steps in order, named by their node's description."""
    if profile is None:
        return {}
    out, j = {}, 0
    for i, st in enumerate(program.steps):
        if j < len(profile.steps) and profile.steps[j].node == _comment(st.node):
            out[i] = profile.steps[j].seconds
            j += 1
    return out


def duration(seconds: float) -> str:
    """A step's time per run: ms with 3 decimals, or µs below 10 µs."""
    return f"{1e3 * seconds:.3f} ms" if seconds >= 1e-5 else f"{1e6 * seconds:.2f} µs"


def _value_html(v) -> str:
    if v is None:
        return '<span class="dim">(absent)</span>'
    t = str(v.type) if v.type is not None else "?"
    return f'<code class="val">%{escape(v.name)}</code> <code class="shape">{escape(t)}</code>'


def _attr_text(a) -> str:
    text = repr(a)
    return text if len(text) <= 300 else text[:297] + "..."


def _step_html(k: int, node: Node, steps: list[int], secs: float | None, per_run: float, total: float) -> str:
    f = fusion(node)
    dom = f"{node.domain}::" if node.domain else ""
    kind = f[0] if f else "plain"
    badge = f'<span class="badge {kind}">{FUSED_LABELS[kind]}</span>' if f else ""
    outs = ", ".join(escape(str(o.type) if o.type is not None else "?") for o in node.outputs)
    where = f"kernel step {', '.join(map(str, steps))}" if steps else "no kernel (a view of its input)"
    ms = "" if secs is None else duration(secs * per_run)
    pct = 0.0 if secs is None or total <= 0 else 100 * secs / total
    bar = f'<span class="bar"><span style="width:{min(pct, 100):.1f}%"></span></span>' if secs is not None else ""
    detail = [f"<p>{escape(where)}" + (f"; node name <code>{escape(node.name)}</code>" if node.name else "") + "</p>"]
    if f:
        detail.append('<ul class="fused">' + "".join(f"<li>{escape(x)}</li>" for x in f[1]) + "</ul>")
    detail.append("<h4>inputs</h4><ul>" + "".join(f"<li>{_value_html(v)}</li>" for v in node.inputs) + "</ul>")
    detail.append("<h4>outputs</h4><ul>" + "".join(f"<li>{_value_html(v)}</li>" for v in node.outputs) + "</ul>")
    attrs = [a for a in node.attrs.values() if a.kind not in ("GRAPH", "GRAPHS") and a.name != "expr"]
    if attrs:
        detail.append("<h4>attributes</h4><ul>" + "".join(f"<li><code>{escape(_attr_text(a))}</code></li>"
                                                          for a in attrs) + "</ul>")
    subs = list(node.subgraphs())
    if subs:
        detail.append("<h4>subgraphs</h4><ul>" + "".join(
            f"<li><code>{escape(g.name)}</code>: {len(g.nodes)} nodes ({escape(_ops(g.nodes))})</li>"
            for g in subs) + "</ul>")
    text = f"{dom}{node.op_type} {node.name} " + " ".join(o.name for o in node.outputs)
    return (f'<details class="step {kind}" data-k="{k}" data-t="{secs or 0:.9g}" data-text="{escape(text.lower())}">'
            f'<summary><span class="idx">{k}</span><span class="op">{escape(dom + node.op_type)}</span>{badge}'
            f'<span class="outs">{outs}</span><span class="ms">{ms}</span>{bar}'
            f'<span class="pct">{f"{pct:.1f}%" if secs is not None else ""}</span></summary>'
            f'<div class="detail">{"".join(detail)}</div></details>')


def _ops(nodes) -> str:
    return ", ".join(f"{o} x{k}" if k > 1 else o for o, k in Counter(n.op_type for n in nodes).most_common(8))


def steps_html(m: Model, program: Program, profile: Profile | None) -> tuple[str, str]:
    """One collapsible entry per node of the optimized graph, in run order; and the steps that belong
    to no node (the run-time shape contracts)."""
    secs = step_seconds(program, profile)
    by_desc: dict[str, list[int]] = {}
    for i, st in enumerate(program.steps):
        by_desc.setdefault(st.node, []).append(i)
    runs = max(profile.runs, 1) if profile else 1
    total = (profile.total if profile.total > 0 else profile.step_sum) if profile else 0.0
    parts, used, extra = [], set(), []
    for k, node in enumerate(m.graph.nodes):
        idx = by_desc.get(node.describe(), [])
        used.update(idx)
        t = sum(secs[i] for i in idx if i in secs) if profile and idx else None  # views: no step
        parts.append(_step_html(k, node, idx, t, 1 / runs, total))
    rest = [i for i in range(len(program.steps)) if i not in used]
    for i in rest:
        t = secs.get(i)
        ms = "" if t is None else f' <span class="ms">{duration(t / runs)}</span>'
        extra.append(f'<p class="extra">kernel step {i}: {escape(program.steps[i].node)}{ms}</p>')
    return "\n".join(parts), "".join(extra)


def by_op_html(profile: Profile) -> str:
    runs = max(profile.runs, 1)
    total = profile.total if profile.total > 0 else max(profile.step_sum, 1e-12)
    rows = "".join(f"<tr><td><code>{escape(op)}</code></td><td>{n}</td><td>{1e3 * t / runs:.3f}</td>"
                   f"<td>{100 * t / total:.1f}%</td></tr>" for op, n, t in profile.by_op())
    return (f"<p>{profile.runs} timed run(s), {1e3 * profile.total / runs:.3f} ms per run, "
            f"{100 * profile.step_sum / total:.1f}% inside the kernel steps.</p>"
            f"<table><thead><tr><th>operator</th><th>steps</th><th>ms/run</th><th>share</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


# ------------------------------------------------------------------------------------------- arena

def _bytes(b: Buffer) -> Dim:
    n: Dim = b.dtype.itemsize
    for d in b.shape:
        n = n * d
    return n


def _eval(d: Dim, dims: dict[str, int]) -> int | None:
    if isinstance(d, int):
        return d
    if not free_symbols(d) <= set(dims):
        return None
    try:
        return int(evaluate(d, dims))
    except (KeyError, ValueError, ZeroDivisionError, ArithmeticError):
        return None


def _value_names(m: Model, program: Program) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    values = list(m.graph.inputs) + [o for n in m.graph.nodes for o in n.outputs]
    for v in values:
        bid = program.value_buffer.get(v.id)
        if bid is not None:
            names.setdefault(bid, []).append(v.name)
    return names


def arena_rows(program: Program, dims: dict[str, int]) -> tuple[list[dict], int | None]:
    """The intermediate buffers (size formula, bytes at ``dims``, lifetime, arena offset) and the
    arena's bytes at those sizes (None when a size is unknown there)."""
    temps = [b for b in program.buffers.values() if b.kind == "temp" and not b.is_value]
    rows = []
    for b in temps:
        size = _bytes(b)
        rows.append({"buf": b, "size": size, "bytes": _eval(size, dims), "dynamic": program.is_dynamic(b),
                     "offset": None})
    planned = [r for r in rows if not r["dynamic"]]
    if any(r["bytes"] is None for r in planned):
        return rows, None
    slots = [Slot(r["buf"].id, r["bytes"], r["buf"].first, r["buf"].last) for r in planned]
    offsets, total = first_fit(sorted(slots, key=lambda s: -(s.size or 0)))
    for r in planned:
        r["offset"] = offsets[r["buf"].id]
    return rows, total


def _sum(sizes: list[Dim]) -> Dim:
    total: Dim = 0
    for s in sizes:
        total = total + s
    return total


def lifetime_svg(rows: list[dict], n_steps: int, total: int | None) -> str:
    """Buffers as bars over the steps they live through; y is the arena offset when known."""
    if not rows:
        return ""
    w, h, left = 1000, 260 if total else max(60, 14 * len(rows) + 20), 40
    sx = (w - left - 10) / max(n_steps, 1)
    bars = []
    for i, r in enumerate(rows):
        b = r["buf"]
        if total and r["offset"] is not None:
            y, bh = 10 + (h - 20) * r["offset"] / total, max((h - 20) * (r["bytes"] or 0) / total, 1.5)
        else:
            y, bh = 10 + 14 * i, 11
        x, bw = left + sx * b.first, max(sx * (b.last - b.first + 1), 2)
        tip = f"buffer {b.id}: {r['size']} bytes, steps {b.first}-{b.last}"
        bars.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                    f'fill="hsl({(b.id * 47) % 360},60%,55%)"><title>{escape(tip)}</title></rect>')
    axis = (f'<text x="{left}" y="{h - 1}" class="ax">step 0</text>'
            f'<text x="{w - 10}" y="{h - 1}" class="ax" text-anchor="end">step {n_steps - 1}</text>'
            f'<text x="2" y="14" class="ax">{"offset" if total else "buffer"}</text>')
    return (f'<svg class="life" viewBox="0 0 {w} {h + 4}" role="img" aria-label="buffer lifetimes">'
            f'<rect x="{left}" y="6" width="{w - left - 10}" height="{h - 12}" class="frame"/>'
            f'{"".join(bars)}{axis}</svg>')


def arena_html(m: Model, program: Program, dims: dict[str, int]) -> str:
    rows, total = arena_rows(program, dims)
    if not rows:
        return "<p>No intermediate buffers: every kernel reads the inputs or weights and writes an output.</p>"
    names = _value_names(m, program)
    planned = [r for r in rows if not r["dynamic"]]
    formula = _sum([r["size"] for r in planned])
    at = ", ".join(f"{k}={v}" for k, v in dims.items())
    lines = [f"<p>{len(planned)} buffer(s) planned in the arena, {len(rows) - len(planned)} allocated at run time "
             f"(their size depends on data). Without reuse: <code class='shape'>{escape(str(formula))}</code> bytes.</p>"]
    if total is not None:
        lines.append(f"<p>Arena: <b>{total}</b> bytes" + (f" at {escape(at)}" if at else "") +
                     f" (buffers with disjoint lifetimes share offsets; {_eval(formula, dims)} without reuse).</p>")
    elif not all(isinstance(r["size"], int) for r in planned):
        lines.append("<p>Sizes are symbolic: the plan runs at the start of each call (give <code>--dim</code> "
                     "to see the bytes at an example size).</p>")
    lines.append(lifetime_svg(rows, len(program.steps), total))
    body = []
    for r in rows:
        b = r["buf"]
        body.append(f"<tr><td>{b.id}</td><td><code>{escape(', '.join(names.get(b.id, ['?'])))}</code></td>"
                    f"<td>{escape(b.dtype.short)}</td><td><code class='shape'>"
                    f"[{escape(', '.join(str(d) for d in b.shape))}]</code></td><td><code class='shape'>{escape(str(r['size']))}</code>"
                    f"</td><td>{'' if r['bytes'] is None else r['bytes']}</td><td>{b.first}-{b.last}</td>"
                    f"<td>{'run time' if r['dynamic'] else ('' if r['offset'] is None else r['offset'])}</td></tr>")
    lines.append("<table><thead><tr><th>buffer</th><th>values</th><th>type</th><th>shape</th><th>bytes (formula)"
                 "</th><th>bytes</th><th>steps</th><th>offset</th></tr></thead><tbody>" + "".join(body) +
                 "</tbody></table>")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- page

def _summary_html(m: Model, program: Program, title: str) -> str:
    kinds = Counter(f[0] for f in (fusion(n) for n in m.graph.nodes) if f)
    fused = ", ".join(f"{FUSED_LABELS[k]} x{v}" for k, v in kinds.items()) or "none"
    ios = "".join(f"<tr><td>input</td>{_io(v)}</tr>" for v in m.graph.inputs)
    ios += "".join(f"<tr><td>output</td>{_io(v)}</tr>" for v in m.graph.outputs)
    dv = ", ".join(program.dimvars) or "(none)"
    return (f"<p>{len(m.graph.nodes)} nodes after the passes, {len(program.steps)} kernel steps, "
            f"{len(program.weights)} bytes of weights. Fused groups: {escape(fused)}.</p>"
            f"<p>Dimension variables: <code>{escape(dv)}</code></p>"
            f"<table><tbody>{ios}</tbody></table>")


def _io(v) -> str:
    return f"<td><code>{escape(v.name)}</code></td><td><code class='shape'>{escape(str(v.type))}</code></td>"


def build_report(m: Model, program: Program, title: str, dims: dict[str, int] | None = None,
                 profile: Profile | None = None) -> str:
    """The page as a string: summary, steps (with times from ``profile``), per-operator times, arena."""
    dims = dict(dims or {})
    import onnxc

    prof = (f'<section id="profile"><h2>Time per operator</h2>{by_op_html(profile)}</section>'
            if profile is not None else "")
    steps, extra = steps_html(m, program, profile)
    sort = '<button type="button" id="sort">sort by time</button>' if profile is not None else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>onnxc: {escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head><body>'
            f'<header><h1>{escape(title)}</h1><p class="sub">optimized by onnxc {escape(onnxc.__version__)}</p>'
            f'<nav><a href="#steps">steps</a> <a href="#arena">arena</a>'
            f'{" <a href=" + chr(34) + "#profile" + chr(34) + ">time per operator</a>" if profile else ""}</nav></header>'
            f'<section id="summary"><h2>Summary</h2>{_summary_html(m, program, title)}</section>'
            f'<section id="steps"><h2>Steps</h2><div class="controls"><input id="filter" type="search" '
            f'placeholder="filter by op or value name"> <button type="button" id="expand">expand all</button> '
            f'{sort}</div><div id="steplist">{steps}</div>{extra}</section>'
            f'{prof}<section id="arena"><h2>Arena (memory plan)</h2>{arena_html(m, program, dims)}</section>'
            f'<script>{JS}</script></body></html>\n')


def write_report(path: str | os.PathLike, m: Model, program: Program, title: str,
                 dims: dict[str, int] | None = None, profile: Profile | None = None) -> None:
    """Write the page to ``path``."""
    Path(path).write_text(build_report(m, program, title, dims, profile), encoding="utf-8")


def measure_profile(model_path: str, threads: int, dims: dict[str, int], constants: dict | None = None,
                    runs: int = 10, seed: int = 0, quiet: bool = False) -> Profile:
    """Compile ``model_path`` with profiling, run it once to warm up and ``runs`` times on seeded random
    inputs (symbolic dims from ``dims``), and return the summed step times."""
    import onnxc
    from onnxc.cli import random_input
    from onnxc.profile import read_profile, reset_profile

    cm = onnxc.compile(model_path, threads=threads, profile=True, constants=constants, quiet=quiet)
    rng = np.random.default_rng(seed)
    feeds = {i.name: random_input(i, dims, rng) for i in cm.inputs}
    cm.run(feeds)
    reset_profile(cm)
    for _ in range(max(runs, 1)):
        cm.run(feeds)
    return read_profile(cm)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1f3b5a;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px;word-break:break-all}
.sub{margin:2px 0 6px;opacity:.8}nav a{color:#cfe3ff;margin-right:14px}
section{background:#fff;margin:14px 24px;padding:10px 18px;border-radius:6px;box-shadow:0 1px 3px #0002}
h2{font-size:17px;margin:6px 0 10px}h4{margin:8px 0 2px;font-size:13px;color:#445}
code{font:12px ui-monospace,Menlo,Consolas,monospace}.shape{color:#6a3d9a}.val{color:#1f5f8b}.dim{color:#889}
table{border-collapse:collapse;margin:6px 0}td,th{border-bottom:1px solid #e3e6ea;padding:3px 10px;text-align:left}
.controls{margin-bottom:8px}.controls input{width:260px;padding:3px 6px}
details.step{border-left:4px solid #c9ced6;margin:2px 0;background:#fbfbfc}
details.step>summary{cursor:pointer;padding:3px 8px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
details.step[open]{background:#f0f4fa}.detail{padding:2px 14px 8px 30px}.detail ul{margin:2px 0;padding-left:18px}
.idx{color:#889;min-width:2.5em;text-align:right}.op{font-weight:600;min-width:11em}
.outs{font:12px ui-monospace,Menlo,monospace;color:#6a3d9a;flex:1;word-break:break-all}
.ms{min-width:6em;text-align:right}.pct{min-width:3.5em;color:#667}
.bar{display:inline-block;width:120px;height:9px;background:#e8ebef;border-radius:2px}
.bar span{display:block;height:100%;background:#d9822b;border-radius:2px}
.badge{font-size:11px;padding:1px 6px;border-radius:8px;color:#fff}
.epilogue{border-left-color:#2e8b57}.badge.epilogue{background:#2e8b57}
.chain{border-left-color:#3a7bd5}.badge.chain{background:#3a7bd5}
.dwpw{border-left-color:#8e44ad}.badge.dwpw{background:#8e44ad}
.attention{border-left-color:#c0392b}.badge.attention{background:#c0392b}
.internal{border-left-color:#7f8c8d}.badge.internal{background:#7f8c8d}
ul.fused{background:#eef6ee;border-radius:4px;padding:4px 6px 4px 22px}
.extra{color:#556;margin:2px 0 2px 12px}
svg.life{width:100%;max-width:1000px;height:auto;display:block}svg .frame{fill:#f3f4f6;stroke:#ccd}
svg .ax{font-size:11px;fill:#556}
"""

JS = """
(function(){
var list=document.getElementById('steplist');
var items=function(){return Array.prototype.slice.call(list.querySelectorAll('details.step'));};
document.getElementById('filter').addEventListener('input',function(e){
  var q=e.target.value.toLowerCase();
  items().forEach(function(d){d.style.display=d.dataset.text.indexOf(q)>=0?'':'none';});});
var open=false;
document.getElementById('expand').addEventListener('click',function(e){
  open=!open;items().forEach(function(d){d.open=open;});
  e.target.textContent=open?'collapse all':'expand all';});
var sort=document.getElementById('sort');
if(sort){var byTime=false;sort.addEventListener('click',function(){
  byTime=!byTime;var xs=items();
  xs.sort(function(a,b){return byTime?(+b.dataset.t)-(+a.dataset.t):(+a.dataset.k)-(+b.dataset.k);});
  xs.forEach(function(d){list.appendChild(d);});
  sort.textContent=byTime?'run order':'sort by time';});}
})();
"""

__all__ = ["build_report", "write_report", "measure_profile", "fusion", "step_seconds", "arena_rows"]
