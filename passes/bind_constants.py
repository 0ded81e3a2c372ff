"""Specialize a model for fixed values of some of its inputs (``onnxc.compile(model, constants={"sr": 16000})``,
``--const sr=16000``).

Each named graph input becomes a constant of the model, so shape inference folds what it decides: an If on
the sample rate keeps only the branch it takes, shapes computed from a size input become static. The input
leaves the compiled model's inputs. Values are converted to the input's declared element type and must
fit its declared shape (a scalar or a list for a 1-D input); anything else is a ModelError naming the input.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from onnxc.ir import DType, Model, ModelError, TensorType


def parse_const(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` of the command line: VALUE a number or comma-separated numbers (or true/false)."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise ModelError(f"--const expects NAME=VALUE, got {text!r}")
    items = []
    for s in value.split(","):
        s = s.strip().lower()
        if s in ("true", "false"):
            items.append(s == "true")
            continue
        try:
            items.append(int(s) if s.lstrip("+-").isdigit() else float(s))
        except ValueError:
            raise ModelError(f"--const {name}: {s!r} is not a number") from None
    return name, items[0] if len(items) == 1 else items


def bind_constants(m: Model, constants: Mapping[str, object]) -> None:
    """Turn the graph inputs named in ``constants`` into constants of ``m`` (see the top); records them in
    ``m.bound``."""
    g = m.graph
    by_name = {v.name: v for v in g.inputs}
    for name, value in constants.items():
        v = by_name.get(name)
        if v is None:
            raise ModelError(f"constants: the model has no input {name!r} (inputs: {', '.join(by_name) or 'none'})")
        t = v.type
        if not isinstance(t, TensorType):
            raise ModelError(f"constants: input {name!r} is not a tensor ({t}); only tensors can be bound")
        arr = _as_array(name, value, t)
        g.inputs.remove(v)
        v.const = arr
        v.type = TensorType(t.dtype, arr.shape)
        g.initializers[name] = v
        m.bound[name] = arr


BINDABLE = {DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16, DType.UINT32,
            DType.UINT64, DType.FLOAT, DType.DOUBLE}


def _as_array(name: str, value: object, t: TensorType) -> np.ndarray:
    if t.dtype not in BINDABLE:
        raise ModelError(f"constants: input {name!r} is {t.dtype.short}; onnxc binds bool, integer, float and "
                         "double inputs")
    raw = np.asarray(value)
    if raw.dtype == object or raw.dtype.kind not in "biuf":
        raise ModelError(f"constants: input {name!r} needs numbers, got {value!r}")
    arr = raw.astype(t.dtype.np)
    if not np.array_equal(arr.astype(raw.dtype), raw) and not (raw.dtype.kind == "f" and t.dtype.is_float):
        raise ModelError(f"constants: {value!r} does not fit input {name!r} ({t.dtype.short})")
    if t.shape is None:
        return arr
    if arr.ndim != len(t.shape) and arr.size == 1 and all(d == 1 for d in t.shape if isinstance(d, int)):
        arr = arr.reshape((1,) * len(t.shape))
    if arr.ndim != len(t.shape) or any(isinstance(d, int) and d != n for d, n in zip(t.shape, arr.shape)):
        raise ModelError(f"constants: input {name!r} has shape {list(t.shape)}, got a value of shape {list(arr.shape)}")
    return arr
