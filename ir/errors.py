"""The onnxc error hierarchy. Every message names what was wrong: node, op, value, expected vs got."""


class OnnxcError(Exception):
    """Base class of every error onnxc raises on purpose."""


class ModelError(OnnxcError):
    """The model file or message is malformed or violates the ONNX spec in a way execution depends on."""


class UnsupportedOpError(OnnxcError):
    """The model uses operators (or versions / element types of them) onnxc cannot compile."""

    def __init__(self, message: str, ops: list | None = None):
        super().__init__(message)
        self.ops = ops or []


class ShapeError(OnnxcError):
    """Shapes or types are inconsistent at compile time."""


class CompileError(OnnxcError):
    """The C compiler failed, or compiling was forbidden (ONNXC_FAIL_ON_COMPILE)."""


class InputError(OnnxcError):
    """A call passed inputs of the wrong name, dtype or shape."""


class RuntimeFailure(OnnxcError):
    """The compiled code reported an error while running."""


class CacheWarning(RuntimeWarning):
    """A cached file failed its integrity check (or the cache folder is not private): onnxc discards and
    rebuilds it; the message names the file."""
