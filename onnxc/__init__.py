"""onnxc: compile ONNX models to C for CPUs and call them from Python."""

from onnxc.ir.errors import (
                             CacheWarning,
                             CompileError,
                             InputError,
                             ModelError,
                             OnnxcError,
                             RuntimeFailure,
                             ShapeError,
                             UnsupportedOpError,
)

from .aot import build, load
from .api import CompiledModel, TensorInfo, compile

__all__ = ["compile", "build", "load", "CompiledModel", "TensorInfo", "OnnxcError", "ModelError", "UnsupportedOpError",
           "ShapeError", "CompileError", "InputError", "RuntimeFailure", "CacheWarning"]
__version__ = "0.1.0"
