"""Shape rules of ai.onnx.ml SVMClassifier and SVMRegressor (ml opset 1).

``svm_spec`` validates a node's attributes once and decodes them into an ``SvmSpec`` that the shape
rules and the kernels (codegen/kernels/svm.py, where the semantics are written down) share. Errors
name the node and the attribute. The input is ``[N, F]`` or ``[F]`` (one row, as in onnxruntime);
the classifier writes labels ``[N]`` and scores ``[N, S]`` (float), the regressor ``[N, 1]`` (float).
``S`` is the class count, except for a support-vector classifier without probabilities: one
column per class pair, or 2 for a binary one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import DType, Node, TensorType
from onnxc.ir.dims import is_static

from .common import fail, shape_of, tensor_type
from .ml import ML
from .registry import shape_rule

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
INPUT_TYPES = (DType.FLOAT, DType.DOUBLE, DType.INT64, DType.INT32)


@dataclass
class SvmSpec:
    """A decoded SVMClassifier/SVMRegressor.

    ``svc``: support vectors are used (``n_vectors`` rows of ``n_features`` in ``support_vectors``);
    otherwise the linear mode: ``coefficients`` are per-class (or, for the regressor, one) weight rows
    of ``n_features`` and the kernel is LINEAR whatever ``kernel_type`` says. Classifier only:
    ``labels`` (ints or strings), ``vectors_per_class``/``starts`` (svc), ``prob_a``/``prob_b``.
    """

    kernel: str
    gamma: float
    coef0: float
    degree: float
    post: str
    svc: bool
    n_features: int
    n_vectors: int
    support_vectors: list[float]
    coefficients: list[float]
    rho: list[float]
    labels: list = field(default_factory=list)
    label_type: DType = DType.INT64
    vectors_per_class: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    prob_a: list[float] = field(default_factory=list)
    prob_b: list[float] = field(default_factory=list)
    one_class: bool = False

    @property
    def n_classes(self) -> int:
        return len(self.labels)

    @property
    def n_pairs(self) -> int:
        return self.n_classes * (self.n_classes - 1) // 2

    @property
    def proba(self) -> bool:
        return bool(self.prob_a)

    @property
    def n_scores(self) -> int:
        """Columns of the classifier's score output."""
        if not self.svc or self.proba:
            return self.n_classes
        return self.n_pairs if self.n_classes > 2 else 2


def _floats(node: Node, name: str) -> list[float]:
    v = node.attr(name)
    return [] if v is None else [float(x) for x in np.asarray(v, dtype=np.float64).reshape(-1).tolist()]


def _str(node: Node, name: str, default: str, allowed: tuple[str, ...]) -> str:
    v = node.attr(name, default)
    s = v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
    if s not in allowed:
        raise fail(node, f"attribute {name} is {s!r}, expected one of {', '.join(allowed)}")
    return s


def _common(node: Node) -> dict:
    kp = _floats(node, "kernel_params")
    if kp and len(kp) != 3:
        raise fail(node, f"attribute kernel_params must hold 3 values (gamma, coef0, degree), got {len(kp)}")
    gamma, coef0, degree = kp or (0.0, 0.0, 0.0)
    coef = _floats(node, "coefficients")
    if not coef:
        raise fail(node, "attribute coefficients is required and must not be empty")
    rho = _floats(node, "rho")
    if not rho:
        raise fail(node, "attribute rho is required and must not be empty")
    return dict(kernel=_str(node, "kernel_type", "LINEAR", KERNELS), gamma=gamma, coef0=coef0, degree=degree,
                post=_str(node, "post_transform", "NONE", POST_TRANSFORMS), coefficients=coef, rho=rho,
                support_vectors=_floats(node, "support_vectors"))


def _features(node: Node, what: str, total: int, rows: int) -> int:
    if rows <= 0 or total % rows or total == 0:
        raise fail(node, f"attribute {what} has {total} values, not a positive multiple of {rows}")
    return total // rows


def classifier_spec(node: Node) -> SvmSpec:
    """The validated attributes of an SVMClassifier (see SvmSpec)."""
    c = _common(node)
    ints, strs = node.attr("classlabels_ints"), node.attr("classlabels_strings")
    ints = [] if ints is None else [int(x) for x in np.asarray(ints).reshape(-1).tolist()]
    strs = [] if strs is None else [s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)
                                    for s in strs]
    if bool(ints) == bool(strs):
        raise fail(node, "exactly one of the attributes classlabels_ints and classlabels_strings must be set "
                         "and not empty")
    labels, ltype = (ints, DType.INT64) if ints else (strs, DType.STRING)
    nc = len(labels)
    vpc = [int(v) for v in node.attr("vectors_per_class", []) or []]
    if any(v < 0 for v in vpc):
        raise fail(node, "attribute vectors_per_class must not hold negative counts")
    nv = sum(vpc)
    pa, pb = _floats(node, "prob_a"), _floats(node, "prob_b")
    if len(pa) != len(pb):
        raise fail(node, f"attributes prob_a ({len(pa)} values) and prob_b ({len(pb)}) must have the same length")
    spec = SvmSpec(**c, svc=nv > 0, n_features=0, n_vectors=nv, labels=labels, label_type=ltype, prob_a=pa,
                   prob_b=pb)
    if nv == 0:  # linear mode: one weight row per class, rho[0] added to every class
        spec.kernel = "LINEAR"
        spec.n_features = _features(node, "coefficients", len(spec.coefficients), nc)
        return spec
    if len(vpc) != nc:
        raise fail(node, f"attribute vectors_per_class has {len(vpc)} entries for {nc} class labels")
    if nc < 2:
        raise fail(node, "a support-vector classifier needs at least 2 class labels")
    spec.vectors_per_class = vpc
    spec.starts = [sum(vpc[:k]) for k in range(nc)]
    spec.n_features = _features(node, "support_vectors", len(spec.support_vectors), nv)
    np_ = spec.n_pairs
    if len(spec.coefficients) != (nc - 1) * nv:
        raise fail(node, f"attribute coefficients has {len(spec.coefficients)} values, expected (classes - 1) * "
                         f"vectors = {(nc - 1) * nv}")
    if len(spec.rho) != np_:
        raise fail(node, f"attribute rho has {len(spec.rho)} values, expected one per class pair ({np_})")
    if pa and len(pa) != np_:
        raise fail(node, f"attributes prob_a/prob_b have {len(pa)} values, expected one per class pair ({np_})")
    return spec


def regressor_spec(node: Node) -> SvmSpec:
    """The validated attributes of an SVMRegressor (see SvmSpec)."""
    c = _common(node)
    ns = int(node.attr("n_supports", 0))
    if ns < 0:
        raise fail(node, f"attribute n_supports must not be negative, got {ns}")
    spec = SvmSpec(**c, svc=ns > 0, n_features=0, n_vectors=ns, one_class=bool(int(node.attr("one_class", 0))))
    if ns == 0:
        spec.kernel = "LINEAR"
        spec.n_features = len(spec.coefficients)
        return spec
    spec.n_features = _features(node, "support_vectors", len(spec.support_vectors), ns)
    if len(spec.coefficients) != ns:
        raise fail(node, f"attribute coefficients has {len(spec.coefficients)} values, expected n_supports = {ns}")
    return spec


def svm_spec(node: Node) -> SvmSpec:
    return classifier_spec(node) if node.op_type == "SVMClassifier" else regressor_spec(node)


def _rows(node: Node, spec: SvmSpec):
    """Row count of the input, after checking its type, rank and (static) feature count."""
    t, shape = tensor_type(node, 0), shape_of(node, 0)
    if t.dtype not in INPUT_TYPES:
        raise fail(node, f"input must be float, double, int64 or int32, got {t.dtype.short}")
    if len(shape) not in (1, 2):
        raise fail(node, f"input must have shape [N, F] or [F], got {list(shape)}")
    f = shape[-1]
    if is_static(f) and f != spec.n_features:
        raise fail(node, f"input has {f} features, the model expects {spec.n_features}")
    return shape[0] if len(shape) == 2 else 1


@shape_rule("SVMClassifier", domain=ML)
def _svm_classifier(node: Node) -> list:
    spec = classifier_spec(node)
    n = _rows(node, spec)
    return [TensorType(spec.label_type, (n,)), TensorType(DType.FLOAT, (n, spec.n_scores))]


@shape_rule("SVMRegressor", domain=ML)
def _svm_regressor(node: Node) -> list:
    spec = regressor_spec(node)
    return [TensorType(DType.FLOAT, (_rows(node, spec), 1))]


__all__ = ["SvmSpec", "svm_spec", "classifier_spec", "regressor_spec", "KERNELS", "POST_TRANSFORMS"]
