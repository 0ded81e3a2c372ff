"""Kernels of ai.onnx.ml SVMClassifier and SVMRegressor (ml opset 1), written to match onnxruntime.

The attributes are validated and decoded once (passes/shapes/ml_svm.py ``svm_spec``); support
vectors, coefficients, rho and the Platt coefficients become float tables in the weights blob (no C
literals: thousands of support vectors cost the C compiler nothing). Like onnxruntime,
every input type (float, double, int64, int32) is first rounded to float. A row's kernel values
``K(x, sv)`` are computed directly per support vector: LINEAR ``x.sv``, POLY
``(gamma x.sv + coef0)^degree``, SIGMOID ``tanh(gamma x.sv + coef0)``, RBF ``exp(-gamma sum (x -
sv)^2)`` — the RBF sum in float, in onnxruntime's order, the dot products in double — never as
``|x|^2 - 2 x.sv + |sv|^2``, whose cancellation could flip votes. Rows run in parallel (on the
runtime's pool, from ROWS_PAR_MIN rows) when the model may use several threads.

Classifier, support-vector mode (``vectors_per_class`` sums to V > 0): the decision value of the
class pair (i, j), i < j, pairs in row-major order, is ``rho[p] + sum_{v in i} coef[j-1][v] K_v +
sum_{v in j} coef[i][v] K_v`` (``coefficients`` is [classes - 1, V]), summed in double and stored as
float; a value > 0 votes for i, else (NaN too) for j. The label is the class with the most votes,
the first on ties — also for binary models and with probabilities (probabilities do not choose the
label). Scores: with ``prob_a``/``prob_b``, each pair's Platt probability ``1 - logistic(prob_a s +
prob_b)`` clamped to [1e-7, 1 - 1e-7] is coupled into class probabilities by libsvm's iterative
method (at most 100 rounds, tolerance 0.005 / classes, in float as onnxruntime computes it), then
``post_transform``; without, the pairwise decision values and ``post_transform`` over them, except
that a binary model writes two columns from its one value s: NONE ``[-s, s]``, LOGISTIC
``[logistic(-s), logistic(s)]``, SOFTMAX and SOFTMAX_ZERO ``[1 - s, s]`` (s untransformed), PROBIT
``[probit(s), 0]``.

Classifier, linear mode (no support vectors): ``coefficients`` are per-class weight rows, scores
``x.w_c + rho[0]`` (rho[0] for every class, as both onnxruntime and the reference do), labels by
argmax (first on ties) except for two classes, where onnxruntime's rule applies: without prob_a,
label 1 when all coefficients are >= 0 and the top score >= 0.5, or when some coefficient is < 0
and the top score > 0; otherwise the argmax. Post transforms follow onnxruntime: PROBIT is
``sqrt(2) erfinv(2p - 1)`` with its single-precision erfinv approximation, SOFTMAX_ZERO leaves
scores within 1e-7 of zero (scaled by exp(-max)) out of the exponentials.

Regressor: ``sum_v coef[v] K_v + rho[0]`` (or ``x.coefficients + rho[0]`` when n_supports is 0); a
one-class model writes 1 when that is > 0, else -1. ``post_transform`` is ignored, as in onnxruntime.

Divergences from onnx.reference (onnxruntime is followed): double inputs are rounded to float (the
reference computes in double); a binary linear-mode model with mixed-sign weights picks label 1 when
the top score is > 0 (the reference picks the argmax); binary support-vector scores under SOFTMAX,
SOFTMAX_ZERO and PROBIT (the reference transforms [-s, s], or writes one PROBIT column); linear-mode
models honour prob_a for the binary label rule (the reference ignores it); the regressor ignores
post_transform (the reference refuses other than NONE) and runs on every input type (onnxruntime
only has float). Where onnxruntime leaves memory unwritten (second PROBIT column of binary scores)
onnxc writes 0. Unknown kernel_type/post_transform strings are compile-time errors (onnxruntime reads
them as SIGMOID/PROBIT); missing kernel_params mean zeros (onnxruntime requires the attribute). A
wrong feature count is a run-time error (onnxruntime's classifier does not check it).
"""

from __future__ import annotations

import numpy as np

from onnxc.ir import DType
from onnxc.passes.shapes.ml import ML
from onnxc.passes.shapes.ml_svm import INPUT_TYPES, SvmSpec, classifier_spec, regressor_spec

from . import ml_post
from .base import KernelCtx, kernel
from .ctables import float_lit, int_table, str_lit, table
from .parfor import par_for

# libsvm's coupling stays in the model's translation unit: compiled there, the class count k is a
# constant and GCC contracts its float arithmetic into FMAs differently than in a generic copy
# (last-bit differences in the probabilities); a runtime-library copy would change the outputs.
_COUPLING = r"""
/* libsvm's multi-class probability from pairwise probabilities r[k * k] into p[k]; Q[k * k], Qp[k]
 * are scratch. Never inlined: its float arithmetic (contracted into FMAs) then compiles to the same code
 * whichever function calls it, the kernel or the pool's row task, so threads give the one-thread bits. */
static __attribute__((noinline)) void onnxc_svm_coupling(int64_t k, const float *r, float *p, float *Q, float *Qp) {
    const float eps = 0.005f / (float)k;
    for (int64_t i = 0; i < k * k; i++) Q[i] = 0.0f;
    for (int64_t i = 0; i < k; i++) {
        p[i] = 1.0f / (float)k;
        for (int64_t j = 0; j < i; j++) {
            Q[i * k + i] += r[j * k + i] * r[j * k + i];
            Q[i * k + j] = Q[j * k + i];
        }
        for (int64_t j = i + 1; j < k; j++) {
            Q[i * k + i] += r[j * k + i] * r[j * k + i];
            Q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    for (int loop = 0; loop < 100; loop++) {
        float pQp = 0.0f, max_error = 0.0f;
        for (int64_t i = 0; i < k; i++) {
            Qp[i] = 0.0f;
            for (int64_t j = 0; j < k; j++) Qp[i] += Q[i * k + j] * p[j];
            pQp += p[i] * Qp[i];
        }
        for (int64_t i = 0; i < k; i++) {
            const float e = fabsf(Qp[i] - pQp);
            if (e > max_error) max_error = e;
        }
        if (max_error < eps) break;
        for (int64_t i = 0; i < k; i++) {
            const float diff = (-Qp[i] + pQp) / Q[i * k + i];
            p[i] += diff;
            pQp = (pQp + diff * (diff * Q[i * k + i] + 2 * Qp[i])) / (1 + diff) / (1 + diff);
            for (int64_t j = 0; j < k; j++) {
                Qp[j] = (Qp[j] + diff * Q[i * k + j]) / (1 + diff);
                p[j] /= (1 + diff);
            }
        }
    }
}
"""

ROWS_PAR_MIN = 32  # rows from which the rows run on several threads
_POST = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _ftable(ctx: KernelCtx, name: str, values: list[float]) -> str:
    """A float table in the weights blob (bodies on the pool read it through ``ctx.blob_captures()``)."""
    return ctx.blob_table(name, np.asarray(values, dtype=np.float32))


def _f(v: float) -> str:
    return float_lit(v, single=True)


def _kernel_values(spec: SvmSpec, sv: str, nv: int, out: str) -> list[str]:
    """C setting ``out[v]`` to K(xd, sv_v) for the ``nv`` vectors of table ``sv`` (xd: the row, double)."""
    f = spec.n_features
    lines = [f"for (int64_t v = 0; v < {nv}; v++) {{", f"const float *restrict s_ = {sv} + v * {f};"]
    if spec.kernel == "RBF":  # onnxruntime's float loop, term by term
        lines += ["float d = 0.0f;", f"for (int64_t k = 0; k < {f}; k++) {{ const float t = xf[k] - s_[k]; "
                  "d += t * t; }", f"{out}[v] = (double)expf(-{_f(spec.gamma)} * d);", "}"]
        return lines
    lines += ["double d = 0.0;", f"for (int64_t k = 0; k < {f}; k++) d += (double)xf[k] * (double)s_[k];"]
    t = f"(double){_f(spec.gamma)} * d + (double){_f(spec.coef0)}"
    expr = {"LINEAR": "d", "POLY": f"pow({t}, (double){_f(spec.degree)})", "SIGMOID": f"tanh({t})"}[spec.kernel]
    lines += [f"{out}[v] = (double)(float)({expr});", "}"]
    return lines


def _rows(ctx: KernelCtx, spec: SvmSpec, dscratch: str, fscratch: str, body: list[str]) -> str:
    """The kernel body: the feature check, then ``body`` per row ``r`` (``xf``: the row as float) with
    per-thread scratch of ``dscratch`` doubles (``ws_``) and ``fscratch`` floats (``fs_``). Rows run on the
    runtime's pool from ROWS_PAR_MIN rows; the scratch is one block per pool slot."""
    x = ctx.ins[0]
    who = ctx.who
    n, f = (x.dims[0], x.dims[1]) if x.rank == 2 else ("1", x.dims[0])
    slots = "(int64_t)rt->threads" if ctx.threads > 1 else "1"
    lines = [f"const int64_t n_ = {n}, f_ = {f};",
             f"if (f_ != {spec.n_features}) return onnxc_fail(rt, ONNXC_ERR_INPUT, \"%s: the input has %lld "
             f"features, the model expects {spec.n_features}\", {who}, (long long)f_);",
             f"double *ws_all_ = (double *)onnxc_alloc((size_t)({slots} * {dscratch}) * sizeof(double));",
             f"float *fs_all_ = (float *)onnxc_alloc((size_t)({slots} * {fscratch}) * sizeof(float));",
             "if (!ws_all_ || !fs_all_) {", "free(ws_all_);", "free(fs_all_);",
             f"return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"%s: out of memory\", {who});", "}"]
    rows = [f"double *ws_ = ws_all_ + (int64_t)slot_ * {dscratch};",
            f"float *fs_ = fs_all_ + (int64_t)slot_ * {fscratch};", "(void)ws_;", "float *restrict xf = fs_;",
            f"for (int64_t k = 0; k < {spec.n_features}; k++) xf[k] = (float)in0[r * {spec.n_features} + k];", *body]
    lines += par_for(ctx, "r", "n_", rows, work="n_", grain=ROWS_PAR_MIN // 2, head=lines[:1],
                     captures=[("double *", "ws_all_"), ("float *", "fs_all_"), *ctx.blob_captures()])
    lines += ["free(ws_all_);", "free(fs_all_);", "return 0;"]
    return "\n".join(lines)


def _classifier_svc(ctx: KernelCtx, spec: SvmSpec, labels: str) -> str:
    nc, nv, npair, ns = spec.n_classes, spec.n_vectors, spec.n_pairs, spec.n_scores
    sv, coef = _ftable(ctx, "sv", spec.support_vectors), _ftable(ctx, "coef", spec.coefficients)
    rho = _ftable(ctx, "rho", spec.rho)
    start = ctx.blob_table("start", np.asarray(spec.starts, dtype=np.int64))
    count = ctx.blob_table("count", np.asarray(spec.vectors_per_class, dtype=np.int64))
    post = _POST[spec.post]
    # float scratch: the row [F], the pair scores [pairs], then (probabilities) r and Q [nc * nc] each, Qp [nc]
    f_sc = spec.n_features
    f_prob = f_sc + npair
    fscratch = f_prob + (2 * nc * nc + 2 * nc if spec.proba else 0)
    body = _kernel_values(spec, sv, nv, "kv")
    body[:0] = ["double *restrict kv = ws_;", f"float *restrict sc = fs_ + {f_sc};", f"int64_t votes[{nc}];",
                f"for (int64_t c = 0; c < {nc}; c++) votes[c] = 0;"]
    body += ["int64_t p = 0;", f"for (int64_t i = 0; i < {nc - 1}; i++)",
             f"for (int64_t j = i + 1; j < {nc}; j++, p++) {{", "double s = 0.0;",
             f"const float *restrict wi = {coef} + (j - 1) * {nv}, *restrict wj = {coef} + i * {nv};",
             f"for (int64_t v = {start}[i]; v < {start}[i] + {count}[i]; v++) s += (double)(wi[v] * (float)kv[v]);",
             f"for (int64_t v = {start}[j]; v < {start}[j] + {count}[j]; v++) s += (double)(wj[v] * (float)kv[v]);",
             f"s += (double){rho}[p];", "sc[p] = (float)s;", "votes[s > 0 ? i : j]++;", "}",
             "int64_t best = 0;", f"for (int64_t c = 1; c < {nc}; c++) if (votes[best] < votes[c]) best = c;",
             f"out0[r] = {labels}[best];", f"float *restrict z = out1 + r * {ns};"]
    if spec.proba:
        pa, pb = _ftable(ctx, "prob_a", spec.prob_a), _ftable(ctx, "prob_b", spec.prob_b)
        body += [f"float *restrict pr = fs_ + {f_prob}, *restrict Q = pr + {nc * nc}, *restrict Qp = Q + {nc * nc};",
                 f"for (int64_t c = 0; c < {nc * nc}; c++) pr[c] = 0.0f;", "p = 0;",
                 f"for (int64_t i = 0; i < {nc - 1}; i++)", f"for (int64_t j = i + 1; j < {nc}; j++, p++) {{",
                 f"float v1 = 1.0f - onnxc_svm_logistic(sc[p] * {pa}[p] + {pb}[p]);",
                 "if (v1 < 1.0e-7f) v1 = 1.0e-7f;", "if (v1 > 1.0f - 1.0e-7f) v1 = 1.0f - 1.0e-7f;",
                 f"pr[i * {nc} + j] = v1;", f"pr[j * {nc} + i] = 1.0f - v1;", "}",
                 f"onnxc_svm_coupling({nc}, pr, z, Q, Qp);"]
        if post:
            body.append(f"onnxc_svm_post(z, {nc}, {post});")
    elif nc == 2:
        body.append("const float s0 = sc[0];")
        body.append({0: "z[0] = -s0; z[1] = s0;", 2: "z[0] = onnxc_svm_logistic(-s0); z[1] = onnxc_svm_logistic(s0);",
                     4: "z[0] = (float)onnxc_ml_probit(s0); z[1] = 0.0f;"}.get(post, "z[0] = 1.0f - s0; z[1] = s0;"))
    else:
        body.append(f"for (int64_t c = 0; c < {npair}; c++) z[c] = sc[c];")
        if post:
            body.append(f"onnxc_svm_post(z, {npair}, {post});")
    return _rows(ctx, spec, str(nv), str(fscratch), body)


def _classifier_linear(ctx: KernelCtx, spec: SvmSpec, labels: str) -> str:
    nc, f, post = spec.n_classes, spec.n_features, _POST[spec.post]
    coef = _ftable(ctx, "coef", spec.coefficients)
    body = [f"float *restrict z = out1 + r * {nc};", f"for (int64_t c = 0; c < {nc}; c++) {{", "double d = 0.0;",
            f"const float *restrict w = {coef} + c * {f};",
            f"for (int64_t k = 0; k < {f}; k++) d += (double)xf[k] * (double)w[k];",
            f"z[c] = (float)(d + (double){_f(spec.rho[0])});", "}",
            "int64_t best = 0;", f"for (int64_t c = 1; c < {nc}; c++) if (z[best] < z[c]) best = c;"]
    if nc == 2 and not spec.proba:
        if min(spec.coefficients) >= 0:
            body.append("if (z[best] >= 0.5f) best = 1;")
        else:
            body.append("if (z[best] > 0.0f) best = 1;")
    body.append(f"out0[r] = {labels}[best];")
    if post and nc >= 2:
        body.append(f"onnxc_svm_post(z, {nc}, {post});")
    elif post == 4:
        body.append("z[0] = (float)onnxc_ml_probit(z[0]);")
    return _rows(ctx, spec, "1", str(f), body)


@kernel("SVMClassifier", domain=ML, types=INPUT_TYPES)
def svm_classifier(ctx: KernelCtx) -> str:
    spec = classifier_spec(ctx.node)
    ml_post.use(ctx)  # onnxc_svm_logistic, onnxc_svm_post, onnxc_ml_probit
    ctx.helper("onnxc_svm_coupling", _COUPLING)
    if spec.label_type == DType.STRING:
        labels = table(ctx, "onnxc_str", [str_lit(s) for s in spec.labels])
    else:
        labels = int_table(ctx, spec.labels)
    return (_classifier_svc if spec.svc else _classifier_linear)(ctx, spec, labels)


@kernel("SVMRegressor", domain=ML, types=INPUT_TYPES)
def svm_regressor(ctx: KernelCtx) -> str:
    spec = regressor_spec(ctx.node)
    coef = _ftable(ctx, "coef", spec.coefficients)
    if spec.svc:
        body = _kernel_values(spec, _ftable(ctx, "sv", spec.support_vectors), spec.n_vectors, "kv")
        body[:0] = ["double *restrict kv = ws_;"]
        body += ["double s = 0.0;", f"for (int64_t v = 0; v < {spec.n_vectors}; v++) s += {coef}[v] * kv[v];"]
    else:
        body = ["double s = 0.0;",
                f"for (int64_t k = 0; k < {spec.n_features}; k++) s += (double)xf[k] * (double){coef}[k];"]
    body.append(f"const float y = (float)(s + (double){_f(spec.rho[0])});")
    body.append("out0[r] = y > 0.0f ? 1.0f : -1.0f;" if spec.one_class else "out0[r] = y;")
    return _rows(ctx, spec, str(max(spec.n_vectors, 1)), str(spec.n_features), body)
