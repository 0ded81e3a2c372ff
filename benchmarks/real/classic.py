"""Classic ML family: scikit-learn pipelines converted by skl2onnx, fitted on seeded synthetic data,
with and without ZipMap (a list of {class: probability} dicts) on the probability output."""

from __future__ import annotations

import numpy as np

from benchmarks.real.common import RealModel

FEATURES = 20


def _data(n: int = 2000, classes: int = 3):
    from sklearn.datasets import make_classification

    return make_classification(n_samples=n, n_features=FEATURES, n_informative=10, n_classes=classes,
                               random_state=0)


def _convert(est, zipmap: bool | None) -> bytes:
    """ONNX bytes of ``est``; ``zipmap`` False drops a classifier's ZipMap (None: not a classifier)."""
    from skl2onnx import to_onnx

    x = np.zeros((1, FEATURES), np.float32)
    options = {id(est): {"zipmap": False}} if zipmap is False else None
    return to_onnx(est, x, options=options, target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()


def logreg(zipmap: bool):
    def build() -> bytes:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        x, y = _data()
        return _convert(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y), zipmap)

    return build


def forest(zipmap: bool):
    def build() -> bytes:
        from sklearn.ensemble import RandomForestClassifier

        x, y = _data()
        return _convert(RandomForestClassifier(n_estimators=100, max_depth=10, random_state=0).fit(x, y), zipmap)

    return build


def boosting(zipmap: bool):
    def build() -> bytes:
        from sklearn.ensemble import GradientBoostingClassifier

        x, y = _data()
        return _convert(GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0).fit(x, y), zipmap)

    return build


def regressor() -> bytes:
    from sklearn.datasets import make_regression
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = make_regression(n_samples=2000, n_features=FEATURES, noise=0.1, random_state=0)
    est = make_pipeline(StandardScaler(), RandomForestRegressor(n_estimators=50, max_depth=8, random_state=0))
    return _convert(est.fit(x, y), None)


def _feeds(rng: np.random.Generator, b: int) -> dict[str, np.ndarray]:
    return {"X": rng.standard_normal((b, FEATURES), dtype=np.float32)}


SIZES = (1, 256)
MODELS = [
    RealModel("logreg/skl2onnx", "classic ML", "skl2onnx", "StandardScaler + LogisticRegression, 3 classes, no ZipMap",
              logreg(False), _feeds, SIZES),
    RealModel("logreg_zipmap/skl2onnx", "classic ML", "skl2onnx", "StandardScaler + LogisticRegression with ZipMap",
              logreg(True), _feeds, SIZES),
    RealModel("forest/skl2onnx", "classic ML", "skl2onnx", "RandomForestClassifier 100 trees depth 10, no ZipMap",
              forest(False), _feeds, SIZES),
    RealModel("forest_zipmap/skl2onnx", "classic ML", "skl2onnx", "RandomForestClassifier 100 trees depth 10, ZipMap",
              forest(True), _feeds, SIZES),
    RealModel("boosting_zipmap/skl2onnx", "classic ML", "skl2onnx", "GradientBoostingClassifier 50x3 trees depth 3, "
              "ZipMap", boosting(True), _feeds, SIZES),
    RealModel("forest_reg/skl2onnx", "classic ML", "skl2onnx", "StandardScaler + RandomForestRegressor 50 trees "
              "depth 8", regressor, _feeds, SIZES),
]
