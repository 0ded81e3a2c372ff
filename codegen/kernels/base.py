"""The kernel interface: what a lowering function sees and the registry that maps ops to lowerings.

A lowering turns one IR node into the body of a C function

    static int kN(onnxc_rt *rt, const int64_t *D, <in0>, <in1>, ..., <out0>, ...)

whose parameters are typed data pointers (``const float *restrict in0``). Shapes are not passed at
run time: every dim is a C expression over the dimension variables ``D[]`` (a literal when static),
so kernels specialize on static sizes for free. A body returns 0 on success or
``onnxc_fail(rt, ONNXC_ERR_RUNTIME, ...)``.

Lowerings register with ``@kernel("Op", ...)``. A lowering marked ``alias=True`` emits no code: its
single output is a view of input 0 (Reshape, Squeeze, ...).

Element types: ``types=`` declares the element types the kernel computes correctly for the op's main
type parameter, read from input 0 by default or from the value ``typed=`` names ("in1", "out0"; the
element type of a sequence/optional value is that of its tensors). A node whose type is not listed is
unsupported with the reason "element type X is not supported (supported: ...)"; ``onnxc ops`` prints
the list. ``accepts=`` is for every other restriction (attributes, other inputs' types). Both are
checked in one place, ``KernelDef.reason``: by ``unsupported_reason`` before compiling and again
when the lowering runs (types may be inferred only by then).

Data-dependent output shapes: a node whose shape rule created run-time dimension variables
(``node.defines_dims``, e.g. NonZero's count, Reshape to a shape computed at run time) also needs a
*shape function*, registered with ``@kernel(..., shape_fn=f)`` or ``@shape_function("Op")`` (for
views). ``f(ctx)`` returns the body of

    static int kN_shape(onnxc_rt *rt, int64_t *D, <in0>, <in1>, ...)

which reads the input data, validates it (``onnxc_fail`` naming the node) and assigns every defined
variable: ``ctx.defines`` maps each name to its C lvalue (``D[k]``), ``ctx.lvalue(dim)`` gives it for
an output dim. The run function calls it right before the kernel and allocates the buffers whose
sizes depend on those variables in between.

Kernels whose output sizes are only known once they ran (If, Loop, Scan, sequence ops) register
with ``allocates=True``: each output parameter is then an ``onnxc_tensor *outK`` descriptor the
kernel fills with memory from ``onnxc_alloc`` (ownership passes to the run function), rank and dims;
sequence/optional outputs point ``data`` at an ``onnxc_value`` (runtime_c/onnxc_value.h). The run
function reads the node's run-time dims back from the descriptors and checks the others.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import Dim, DType, Node, TensorType, Value, dtype_from_numpy, innermost
from onnxc.ir.dims import as_symbol, evaluate, is_static
from onnxc.ir.mapped import release

from ..cexpr import c_product, include_line
from .typesets import type_name, type_names


@dataclass
class Operand:
    """One tensor argument of a kernel."""

    ptr: str            # C name of the pointer parameter inside the kernel body
    value: Value
    dtype: DType | None  # None: a sequence/optional (``const onnxc_value *``)
    shape: tuple        # tuple of Dim
    dims: list[str]     # C expressions for each dim
    const: np.ndarray | None = None

    @property
    def ctype(self) -> str:
        return "onnxc_value" if self.dtype is None else self.dtype.c

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def static(self) -> bool:
        return all(is_static(d) for d in self.shape)

    def numel(self) -> str:
        """C expression for the element count."""
        return c_product(self.dims)

    def strides(self) -> list[str]:
        """Row-major element strides as C expressions."""
        out, acc = [], "1"
        for d in reversed(self.dims):
            out.append(acc)
            acc = c_product([acc, d])
        return list(reversed(out))


WHO = "who_"  # the kernel parameter naming the node (KernelCtx.who)


@dataclass
class KernelCtx:
    """Everything a lowering may read, plus a sink for shared helper functions."""

    node: Node
    ins: list[Operand | None]
    outs: list[Operand]
    dim_c: Callable[[Dim], str]
    helpers: dict[str, str] = field(default_factory=dict)
    threads: int = 1
    defines: dict[str, str] = field(default_factory=dict)  # run-time dim name -> C lvalue (shape functions)
    # Compile a closed body graph into the translation unit: (run function name, weights offset).
    subprogram: Callable | None = None
    repacked: dict[int, np.ndarray] = field(default_factory=dict)  # input index -> data (repack_const)
    # ids of the nodes whose kernels may grow their weights (codegen/weight_budget.py); None: all may
    grow_weights: set[int] | None = None
    blobs: list[tuple[str, np.ndarray]] = field(default_factory=list)  # (parameter, data): blob_table
    precision: str = "fp32"  # "bf16": float GEMM/Conv weights in bfloat16 (codegen/kernels/bf16.py)

    def may_grow_weights(self) -> bool:
        """Whether this node's kernel may take a path that stores its constants transformed and larger."""
        return self.grow_weights is None or self.node.id in self.grow_weights

    def dim(self, d: Dim) -> str:
        return self.dim_c(d)

    def lvalue(self, d: Dim) -> str | None:
        """``D[k]`` when ``d`` is exactly a run-time dimension variable this node defines, else None."""
        name = as_symbol(d)
        return None if name is None else self.defines.get(name)

    def attr(self, name: str, default=None):
        return self.node.attr(name, default)

    @property
    def who(self) -> str:
        """C expression of the string naming the node (for error messages). It is a parameter of the
        kernel (``const char *who_``, passed by the run function), not a literal in its body, so the
        kernels of identical nodes have identical C and are emitted once (codegen/emit.py)."""
        return WHO

    def include(self, header: str) -> None:
        """Include ``header`` in the translation unit once: a runtime header by file name
        ("onnxc_vmath.h") or a system header in angle brackets ("<regex.h>"); the key is that name."""
        self.helpers.setdefault(header, include_line(header))

    def helper(self, name: str, code: str) -> str:
        """Register a static helper function once per translation unit; returns its name."""
        self.helpers.setdefault(name, code)
        return name

    def const_input(self, i: int) -> np.ndarray | None:
        op = self.ins[i] if i < len(self.ins) else None
        return None if op is None else op.const

    def repack_const(self, i: int, data: np.ndarray) -> None:
        """Have the kernel's ``in<i>`` point at ``data`` (same element type; any shape, stored flat) instead
        of constant input i, e.g. weights packed for the GEMM at compile time. The original constant stays
        in the weights blob only if another step reads it."""
        op = self.ins[i]
        if op is None or op.const is None:
            raise NotImplementedError(f"input {i} of {self.node.describe()} is not a constant")
        self.repacked[i] = data
        release(op.const)  # read once to pack it: a weight mapped from the model's file lets go of its pages

    def blob_table(self, name: str, data: np.ndarray) -> str:
        """Put ``data`` (a numeric or bool array, stored flat in C order) in the weights blob, 64-byte aligned,
        and return the name of the kernel parameter ``const T *restrict bt_<name>`` pointing at it (T: the C
        type of its dtype). For tables a kernel derives from attributes (tree nodes, lookup keys, support
        vectors): unlike C literal tables they cost the C compiler nothing, and identical kernels over
        different data share their C. Loops run by ``par_for`` get the pointer through ``captures`` (it is
        not an operand): ``blob_captures()``."""
        param = f"bt_{name}"
        if not name.isidentifier() or any(p == param for p, _ in self.blobs):
            raise ValueError(f"blob table name {name!r} is not a fresh C identifier")
        arr = np.ascontiguousarray(data)
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"blob table {name!r}: {arr.dtype} is not a numeric type")
        self.blobs.append((param, arr))
        return param

    def blob_captures(self) -> list[tuple[str, str]]:
        """(C type, name) of the blob_table parameters so far: the ``captures`` of a ``par_for`` that reads them."""
        return [(f"const {dtype_from_numpy(a.dtype).c} *", p) for p, a in self.blobs]


def element_type(t: object) -> DType | None:
    """The element type of a tensor type, or of the tensors in a sequence/optional type."""
    t = innermost(t)
    return t.dtype if isinstance(t, TensorType) else None


def _parse_typed(typed: str) -> tuple[str, int]:
    """("in", k) or ("out", k) from "in<k>"/"out<k>"."""
    kind = typed.rstrip("0123456789")
    if kind not in ("in", "out") or kind == typed:
        raise ValueError(f"typed={typed!r}: expected 'in<k>' or 'out<k>'")
    return kind, int(typed[len(kind):])


@dataclass
class KernelDef:
    ops: tuple[str, ...]
    domain: str
    fn: Callable[[KernelCtx], str] | None
    alias: bool = False
    accepts: Callable[[Node], str | None] | None = None  # returns a reason when the node is unsupported
    allocates: bool = False  # outputs are ``onnxc_tensor *`` descriptors the kernel fills (see module doc)
    types: frozenset[DType] | None = None  # element types of the main type parameter; None: not declared
    typed: str = "in0"  # the value whose element type ``types`` constrains: "in<k>" or "out<k>"
    family: str = ""    # the kernel module that registered it (codegen/kernels/<family>.py)

    def principal_type(self, node: Node) -> DType | None:
        """The element type ``types`` constrains (None when the value is absent or not typed yet)."""
        kind, k = _parse_typed(self.typed)
        vals = node.inputs if kind == "in" else node.outputs
        v = vals[k] if k < len(vals) else None
        return None if v is None else element_type(v.type)

    def type_reason(self, node: Node) -> str | None:
        """Why ``node``'s element type is not supported, or None."""
        if self.types is None:
            return None
        dt = self.principal_type(node)
        if dt is None or dt in self.types:
            return None
        return f"element type {type_name(dt)} is not supported (supported: {', '.join(type_names(self.types))})"

    def reason(self, node: Node) -> str | None:
        """None when this kernel can lower ``node``, else why not (element type, then ``accepts``)."""
        return self.type_reason(node) or (self.accepts(node) if self.accepts is not None else None)


KERNELS: dict[tuple[str, str], KernelDef] = {}
SHAPE_FNS: dict[tuple[str, str], Callable[[KernelCtx], str]] = {}


def _checked(kd: KernelDef, fn: Callable[[KernelCtx], str]) -> Callable[[KernelCtx], str]:
    """``fn`` preceded by the kernel's checks: the up-front check may run before types are inferred."""

    def run(ctx: KernelCtx) -> str:
        reason = kd.reason(ctx.node)
        if reason:
            raise NotImplementedError(reason)
        return fn(ctx)

    return run


def kernel(*ops: str, domain: str = "", alias: bool = False,
           accepts: Callable[[Node], str | None] | None = None,
           shape_fn: Callable[[KernelCtx], str] | None = None, allocates: bool = False,
           types: Iterable[DType] | None = None, typed: str = "in0"):
    """Register a lowering for ``ops`` (ONNX op types) of ``domain``; ``shape_fn`` renders the shape
    function of nodes with data-dependent output shapes; ``types``/``typed`` declare the element types
    handled (module doc)."""
    _parse_typed(typed)

    def deco(fn):
        kd = KernelDef(ops, domain, None, alias, accepts, allocates, None if types is None else frozenset(types),
                       typed, fn.__module__.rsplit(".", 1)[-1])
        if not alias:
            kd.fn = _checked(kd, fn) if kd.accepts is not None or kd.types is not None else fn
        for op in ops:
            KERNELS[(domain, op)] = kd
            if shape_fn is not None:
                SHAPE_FNS[(domain, op)] = shape_fn
        return fn

    return deco


def shape_function(*ops: str, domain: str = ""):
    """Register the shape function of ``ops`` (for ops whose kernel is registered elsewhere, e.g. views)."""

    def deco(fn):
        for op in ops:
            SHAPE_FNS[(domain, op)] = fn
        return fn

    return deco


def lookup_shape_fn(node: Node) -> Callable[[KernelCtx], str] | None:
    return SHAPE_FNS.get((node.domain, node.op_type))


def alias_kernel(*ops: str, domain: str = "", types: Iterable[DType] | None = None, typed: str = "in0") -> None:
    """Ops whose single output is a view of input 0 with another shape."""
    _parse_typed(typed)
    family = sys._getframe(1).f_globals.get("__name__", "").rsplit(".", 1)[-1]
    kd = KernelDef(ops, domain, None, True, types=None if types is None else frozenset(types), typed=typed,
                   family=family)
    for op in ops:
        KERNELS[(domain, op)] = kd


def lookup(node: Node) -> KernelDef | None:
    return KERNELS.get((node.domain, node.op_type))


def unsupported_reason(node: Node) -> str | None:
    """None when a kernel can lower ``node``, else why not."""
    kd = lookup(node)
    if kd is None:
        return "no kernel"
    return kd.reason(node)


def c_dims(shape: tuple, dim_c: Callable[[Dim], str]) -> list[str]:
    return [dim_c(d) for d in shape]


def static_value(d: Dim) -> int | None:
    return d if is_static(d) else None


__all__ = ["Operand", "KernelCtx", "KernelDef", "KERNELS", "SHAPE_FNS", "kernel", "alias_kernel", "shape_function",
           "lookup", "lookup_shape_fn", "element_type",
           "unsupported_reason", "c_dims", "static_value", "evaluate"]
