"""The kernel of onnxc::FusedAttention (passes/fuse_attention.py): softmax(Q Kt (op) c + mask) V.

Work items are (batch index, block of query rows), in chunks of consecutive items on the runtime's pool
(codegen/kernels/parfor.py) whenever there are two; each thread (``slot_``) owns a scratch block of scores
``RB x Lk`` (about 256 KB at most, so it stays in L2; the whole row range of a head when Lk <= 512):

1. ``S = Q[rows] Kt`` with the float GEMM (``onnxc_sgemm_ex``, one thread per item);
2. each score row is scaled, masked and normalized in place (``onnxc_att_scores_row`` of
   runtime_c/onnxc_attention.h: single pass over a row in L1, exponentials whose probability would be
   subnormal flushed to zero);
3. ``O[rows] = S V`` with the GEMM, written straight into the output with its strides.

Q, Kt, V and O are strided views (their ``*_perm`` attributes): the matrix axis with unit stride picks
the GEMM operand layout (plain or transposed) and the other axis gives the leading dimension, so the
split-heads / merge-heads transposes cost nothing. The scale is applied the way the graph did it
(multiply, or divide; a divide by a power of two is the same multiply by its exact inverse), so the
scores equal the unfused ones bit for bit; the GEMMs and the row helpers are the ones the unfused
MatMul and Softmax kernels use.
"""

from __future__ import annotations

import math

from onnxc.ir import DType, Node

from ..cexpr import c_literal, c_product
from .base import KernelCtx, Operand, kernel
from .nncommon import use_gemm
from .parfor import par_for

DOMAIN, OP = "onnxc", "FusedAttention"
SCRATCH = 65536  # floats of scores per thread: RB = max(MIN_ROWS, SCRATCH / Lk) rows
MIN_ROWS = 48


def _accepts(node: Node) -> str | None:
    if any(v is None or v.dtype != DType.FLOAT for v in node.inputs) or node.outputs[0].dtype != DType.FLOAT:
        return "only float32 attention is fused"
    return None


def _view(op: Operand, perm: list[int]) -> tuple[list[str], list[str]]:
    """(dims, strides) of the logical tensor whose axis a is axis perm[a] of ``op``."""
    dims, strides = op.dims, op.strides()
    return [dims[p] for p in perm], [strides[p] for p in perm]


def _layout(strides: list[str], rows_axis: int, cols_axis: int, what: str) -> tuple[str, str]:
    """(ONNXC_SG_* flag, leading dimension) of a matrix operand given its row/column strides."""
    sr, sc = strides[rows_axis], strides[cols_axis]
    if sc == "1":
        return "ONNXC_SG_PLAIN", sr
    if sr == "1":
        return "ONNXC_SG_TRANS", sc
    raise NotImplementedError(f"{what} has no unit-stride matrix axis (strides {strides})")


def _scale(mode: int, c: float) -> tuple[str, str]:
    """(ONNXC_ATT_* mode, constant): a divide by a power of two becomes the exact multiply."""
    if mode == 2 and c != 0 and math.isfinite(c) and math.frexp(c)[0] in (0.5, -0.5) and math.isfinite(1 / c):
        return "ONNXC_ATT_MUL", c_literal(1 / c, DType.FLOAT)
    name = {0: "ONNXC_ATT_NONE", 1: "ONNXC_ATT_MUL", 2: "ONNXC_ATT_DIV"}[mode]
    return name, c_literal(1.0 if mode == 0 else c, DType.FLOAT)


@kernel(OP, domain=DOMAIN, types={DType.FLOAT}, accepts=_accepts)
def fused_attention(ctx: KernelCtx) -> str:
    q, kt, v = ctx.ins[0], ctx.ins[1], ctx.ins[2]
    mask = ctx.ins[3] if len(ctx.ins) > 3 else None
    out = ctx.outs[0]
    qd, qs = _view(q, list(ctx.attr("q_perm")))
    kd, ks = _view(kt, list(ctx.attr("k_perm")))
    vd, vs = _view(v, list(ctx.attr("v_perm")))
    od, os_ = _view(out, list(ctx.attr("out_perm")))
    r = len(qd)
    nb = r - 2
    name = ctx.node.describe().replace('"', "'").replace("%", "%%").replace("\\", "/")
    fq, lda = _layout(qs, r - 2, r - 1, "Q")
    fk, ldb = _layout(ks, r - 2, r - 1, "K")
    fv, ldv = _layout(vs, r - 2, r - 1, "V")
    if os_[-1] != "1":
        raise NotImplementedError(f"{name}: the output's last axis must be contiguous")
    mode, c = _scale(int(ctx.attr("scale_mode", 0)), float(ctx.attr("scale", 1.0)))
    use_gemm(ctx)
    ctx.include("onnxc_attention.h")
    head = [f"const int64_t NB = {c_product(od[:nb]) if nb else '1'}, LQ = {qd[-2]}, DK = {qd[-1]}, "
            f"LK = {kd[-1]}, DV = {vd[-1]};", "(void)NB; (void)DK; (void)DV;"]
    slots = "(rt->threads > 1 ? rt->threads : 1)"
    lines = head + [
        f"int64_t RB = LK > 0 ? {SCRATCH} / LK : LQ;",
        f"if (RB < {MIN_ROWS}) RB = {MIN_ROWS};",
        "if (NB < rt->threads) {  /* too few batch items: split the rows among the threads */",
        "    const int64_t per = ((LQ + rt->threads - 1) / rt->threads + 11) / 12 * 12;",
        "    if (per < RB) RB = per;",
        "}",
        "if (RB > LQ) RB = LQ;",
        "if (RB < 1) RB = 1;",
        "const int64_t NBLK = (LQ + RB - 1) / RB, T = NB * NBLK;",
        "if (T == 0) return 0;",
        "/* a score block per thread that may run items (slot_) */",
        f"float *Sall = (float *)onnxc_alloc_apart((size_t)({slots} * onnxc_slot_len(RB * LK, sizeof(float))) * sizeof(float));",
        f'if (!Sall) return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in %s", {ctx.who});']
    body = ["    float *restrict S = Sall + (size_t)slot_ * (size_t)onnxc_slot_len(RB * LK, sizeof(float));",
            "    const int64_t i0 = (t % NBLK) * RB, rows = LQ - i0 < RB ? LQ - i0 : RB;",
            "    int64_t b = t / NBLK, oq = 0, ok = 0, ov = 0, oo = 0, om = 0, ix;",
            "    (void)b; (void)ix; (void)om;"]
    if mask is not None:
        md = ["1"] * (r - mask.rank) + list(mask.dims)
        mst = ["0"] * (r - mask.rank) + list(mask.strides())
        ms = ["0" if d == "1" else s for d, s in zip(md, mst)]
    else:
        ms = ["0"] * r
    for a in range(nb - 1, -1, -1):
        body.append(f"    ix = b % ({od[a]}); b /= ({od[a]});")
        terms = [f"o{n} += ix * ({s[a]});" for n, s in (("q", qs), ("k", ks), ("v", vs), ("o", os_), ("m", ms))
                 if s[a] != "0"]
        if terms:
            body.append("    " + " ".join(terms))
    mrow = "NULL" if mask is None else f"in3 + om + (i0 + i) * ({ms[-2]})"
    fail = "{ __atomic_store_n(bad, 1, __ATOMIC_RELAXED); continue; }"
    body += [f"    if (onnxc_sgemm_ex(1, rows, LK, DK, 1.0f, in0 + oq + i0 * ({qs[-2]}), {lda}, {fq}, "
             f"in1 + ok, {ldb}, {fk}, 0.0f, S, LK, NULL)) {fail}",
             "    for (int64_t i = 0; i < rows; i++)",
             f"        onnxc_att_scores_row(S + i * LK, LK, {mode}, {c}, {mrow}, {ms[-1]});",
             f"    if (onnxc_sgemm_ex(1, rows, DV, LK, 1.0f, S, LK, ONNXC_SG_PLAIN, in2 + ov, {ldv}, {fv}, "
             f"0.0f, out0 + oo + i0 * ({os_[-2]}), {os_[-2]}, NULL)) {fail}"]
    # every item is two GEMMs of at least a block of rows: items go to the pool whenever there are two
    lines += ["int bad_ = 0, *bad = &bad_;"]
    lines += par_for(ctx, "t", "T", body, work="T", grain=1, head=head,
                     captures=[("int64_t", "RB"), ("int64_t", "NBLK"), ("float *", "Sall"), ("int *", "bad")])
    lines += ["free(Sall);",
              f'if (bad_) return onnxc_fail(rt, ONNXC_ERR_MEMORY, "out of memory in %s", {ctx.who});',
              "return 0;"]
    return "\n".join(lines)
