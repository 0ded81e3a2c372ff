"""onnxc as an ONNX backend (``onnx.backend.base.Backend``), so the standard ONNX backend harness runs.

    import onnxc.backend
    rep = onnxc.backend.prepare(model_proto)          # compiles once
    outputs = rep.run([x])                            # positional list, dict or one array
    onnx.backend.test.BackendTest(onnxc.backend, __name__)

``onnx`` is a test extra, not a runtime dependency of onnxc: only this module imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import onnx
    from onnx import helper
    from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict
except ImportError as e:  # pragma: no cover - exercised only without the test extra
    raise ImportError("onnxc.backend needs the 'onnx' package (pip install onnx, or onnxc[test]); "
                      "the rest of onnxc works without it") from e

from onnxc.api import CompiledModel, compile
from onnxc.ir import InputError

# Options of onnxc.compile that prepare() passes through.
COMPILE_OPTIONS = ("threads", "cache_dir", "cc", "flags", "check_ir", "dump_ir")


class OnnxcRep(BackendRep):
    """A compiled model; ``run`` takes inputs in the order of the model's runtime inputs."""

    def __init__(self, compiled: CompiledModel, input_names: list[str], output_names: list[str]):
        self.compiled = compiled
        self.input_names = input_names
        self.output_names = output_names

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """``inputs``: a list/tuple (positional), a dict (by name) or one array. Returns a namedtuple
        of outputs that is also indexable by output name."""
        if kwargs:
            raise TypeError(f"unexpected run() options {sorted(kwargs)}")
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise InputError(f"got {len(inputs)} inputs; the model takes {len(self.input_names)} "
                                 f"{self.input_names}")
            feeds = dict(zip(self.input_names, inputs))
        out = self.compiled.run(feeds)
        return namedtupledict("Outputs", self.output_names)(*[out[n] for n in self.output_names])


class OnnxcBackend(Backend):
    """Compiles models to C with onnxc; CPU only."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto | str | bytes, device: str = "CPU", **kwargs: Any) -> OnnxcRep:
        """Compile ``model`` (ModelProto, path or bytes); ``kwargs`` are onnxc.compile options."""
        if not cls.supports_device(device):
            raise ValueError(f"onnxc runs on the CPU only, not on {device!r}")
        unknown = sorted(set(kwargs) - set(COMPILE_OPTIONS))
        if unknown:
            raise TypeError(f"unknown prepare() options {unknown}; onnxc.compile takes {list(COMPILE_OPTIONS)}")
        proto = model if isinstance(model, onnx.ModelProto) else \
            onnx.load_model_from_string(bytes(model)) if isinstance(model, (bytes, bytearray)) else onnx.load(model)
        compiled = compile(proto, **kwargs)
        inits = {t.name for t in proto.graph.initializer}
        names = [i.name for i in proto.graph.input if i.name not in inits]
        return OnnxcRep(compiled, names, [o.name for o in proto.graph.output])

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple:
        """Run one node by compiling a one-node model. ``inputs`` follow ``node.input`` (absent optional
        inputs, named "", are skipped); ``opset_version`` picks the default-domain opset."""
        opset = kwargs.pop("opset_version", None) or onnx.defs.onnx_opset_version()
        names = [n for n in node.input if n]
        if isinstance(inputs, dict):
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(names):
            raise InputError(f"node {node.op_type} has {len(names)} inputs {names}, got {len(arrays)} arrays")
        g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                for n, a in zip(names, arrays)]
        g_out = []
        for i, n in enumerate(node.output):
            if not n:
                continue
            if outputs_info is not None and i < len(outputs_info):
                dt, shape = outputs_info[i]
                g_out.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                                           shape))
            else:
                g_out.append(helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None))
        opsets = [helper.make_opsetid("", opset)]
        if node.domain not in ("", "ai.onnx"):
            opsets.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(helper.make_graph([node], f"run_node_{node.op_type}", g_in, g_out),
                                  opset_imports=opsets)
        return cls.prepare(model, device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False


prepare = OnnxcBackend.prepare
run_model = OnnxcBackend.run_model
run_node = OnnxcBackend.run_node
supports_device = OnnxcBackend.supports_device
is_compatible = OnnxcBackend.is_compatible

__all__ = ["OnnxcBackend", "OnnxcRep", "prepare", "run_model", "run_node", "supports_device", "is_compatible"]
