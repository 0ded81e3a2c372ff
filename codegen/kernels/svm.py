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

from ..cexpr import c_literal
from ..templating import render
from . import ml_post
from .base import KernelCtx, kernel
from .ctables import int_table, table
from .parcall import par_call

ROWS_PAR_MIN = 32  # rows from which the rows run on several threads
_POST = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _ftable(ctx: KernelCtx, name: str, values: list[float]) -> str:
    """A float table in the weights blob (bodies on the pool read it through ``ctx.blob_captures()``)."""
    return ctx.blob_table(name, np.asarray(values, dtype=np.float32))


def _f(v: float) -> str:
    return c_literal(v, DType.FLOAT)


def _render(ctx: KernelCtx, spec: SvmSpec, kind: str, dscratch: int, fscratch: int, **values) -> str:
    """The kernel (templates/svm_rows.c.j2): the feature check, then the rows of ``kind`` on the runtime's pool
    from ROWS_PAR_MIN rows with per-thread scratch of ``dscratch`` doubles and ``fscratch`` floats (one block
    per pool slot; bodies on the pool read the blob tables through ``ctx.blob_captures()``)."""
    x = ctx.ins[0]
    n, f = (x.dims[0], x.dims[1]) if x.rank == 2 else ("1", x.dims[0])
    return render("svm_rows.c.j2", kind=kind, N=n, NF=f, F=spec.n_features, who=ctx.who,
                  slots="(int64_t)rt->threads" if ctx.threads > 1 else "1", dscratch=dscratch, fscratch=fscratch,
                  kernel=spec.kernel, gamma=_f(spec.gamma), coef0=_f(spec.coef0), degree=_f(spec.degree),
                  rho0=_f(spec.rho[0]) if spec.rho else "0.0f", post=_POST[spec.post], post_name=spec.post, grain=ROWS_PAR_MIN // 2,
                  captures=[("double *", "ws_all_"), ("float *", "fs_all_"), *ctx.blob_captures()],
                  par=par_call(ctx), **values)


def _classifier_svc(ctx: KernelCtx, spec: SvmSpec, labels: str) -> str:
    nc, npair = spec.n_classes, spec.n_pairs
    tables = {"sv": _ftable(ctx, "sv", spec.support_vectors), "coef": _ftable(ctx, "coef", spec.coefficients),
              "rho": _ftable(ctx, "rho", spec.rho),
              "start": ctx.blob_table("start", np.asarray(spec.starts, dtype=np.int64)),
              "count": ctx.blob_table("count", np.asarray(spec.vectors_per_class, dtype=np.int64))}
    if spec.proba:
        tables["prob_a"], tables["prob_b"] = _ftable(ctx, "prob_a", spec.prob_a), _ftable(ctx, "prob_b", spec.prob_b)
    # float scratch: the row [F], the pair scores [pairs], then (probabilities) r and Q [nc * nc] each, Qp [nc]
    f_sc = spec.n_features
    f_prob = f_sc + npair
    fscratch = f_prob + (2 * nc * nc + 2 * nc if spec.proba else 0)
    return _render(ctx, spec, "svc", spec.n_vectors, fscratch, nc=nc, nv=spec.n_vectors, npair=npair,
                   ns=spec.n_scores, f_sc=f_sc, f_prob=f_prob, proba=spec.proba, labels=labels, **tables)


def _classifier_linear(ctx: KernelCtx, spec: SvmSpec, labels: str) -> str:
    rule = None  # onnxruntime's label rule of binary models without probabilities
    if spec.n_classes == 2 and not spec.proba:
        rule = "nonneg" if min(spec.coefficients) >= 0 else "mixed"
    return _render(ctx, spec, "linear", 1, spec.n_features, nc=spec.n_classes, binary_rule=rule,
                   coef=_ftable(ctx, "coef", spec.coefficients), labels=labels)


@kernel("SVMClassifier", domain=ML, types=INPUT_TYPES)
def svm_classifier(ctx: KernelCtx) -> str:
    spec = classifier_spec(ctx.node)
    ml_post.use(ctx)  # onnxc_svm_logistic, onnxc_svm_post, onnxc_ml_probit
    # libsvm's coupling stays in the model's translation unit: compiled there, the class count k is a
    # constant and GCC contracts its float arithmetic into FMAs differently than in a generic copy
    # (last-bit differences in the probabilities); a runtime-library copy would change the outputs.
    ctx.helper("onnxc_svm_coupling", render("svm_coupling.c.j2"))
    if spec.label_type == DType.STRING:
        labels = table(ctx, "onnxc_str", [c_literal(s, DType.STRING) for s in spec.labels])
    else:
        labels = int_table(ctx, spec.labels)
    return (_classifier_svc if spec.svc else _classifier_linear)(ctx, spec, labels)


@kernel("SVMRegressor", domain=ML, types=INPUT_TYPES)
def svm_regressor(ctx: KernelCtx) -> str:
    spec = regressor_spec(ctx.node)
    coef = _ftable(ctx, "coef", spec.coefficients)
    sv = _ftable(ctx, "sv", spec.support_vectors) if spec.svc else None
    return _render(ctx, spec, "regressor", max(spec.n_vectors, 1), spec.n_features, svc=spec.svc, coef=coef,
                   sv=sv, nv=spec.n_vectors, one_class=spec.one_class)
