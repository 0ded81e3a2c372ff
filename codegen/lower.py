"""Lowering: an optimized IR model becomes a Program — buffers, dimension variables and kernel steps.

The Program is plain data (no C text except kernel bodies); ``emit.py`` renders it to one C
translation unit. Storage of each value:

- ``input``: a graph input, read in place from the caller's array;
- ``weight``: a constant, at a 64-byte-aligned offset in the weights blob;
- ``temp``: an intermediate, placed in the arena by the memory plan (``memory_plan.py``);
- ``output``: a graph output, allocated by the library and handed to the caller;
- ``slice``: a contiguous block of buffer ``parent`` at element ``offset`` (an input of a Concat
  done in place, ``concat_inplace.py``).

View ops (Reshape, Squeeze, ...) emit no code: their output shares the buffer of their input.

Data-dependent shapes: dimension variables are either bound from the graph inputs (the first
``Program.n_bound`` of ``dimvars``) or defined at run time by a node (``node.defines_dims``), whose
step then carries a shape function run right before its kernel. Buffers whose size depends on such
a variable are *dynamic*: the run function allocates them after the shape function of their
producer and frees them after their last use, outside the planned arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxc.ir import (
    CONTAINER_TYPES,
    CompileError,
    Dim,
    DType,
    Graph,
    Model,
    Node,
    OnnxcError,
    OptionalType,
    SequenceType,
    TensorType,
    UnsupportedOpError,
    Value,
    dtype_from_numpy,
)
from onnxc.ir.dims import free_symbols, to_c
from onnxc.ir.mapped import release

from . import concat_inplace, weight_budget
from .cexpr import include_line
from .contracts import Placer, check_c
from .kernels import registry as kb
from .kernels.base import KernelCtx, Operand
from .native import aligned_empty
from .templating import c_string


@dataclass
class Buffer:
    id: int
    kind: str              # input | weight | temp | output
    dtype: DType | None    # None: a sequence or optional value (an ``onnxc_value``)
    shape: tuple           # Dims of the value that owns the storage
    index: int = -1        # input/output position, weight byte offset, temp slot
    first: int = 0         # first step writing it (temps)
    last: int = 0          # last step reading it (temps)
    owned: bool = False    # allocated at run time by the kernel that produces it
    symbol: str = ""       # a weight held by a static C array of this name (string constants)
    parent: int = -1       # slices: the buffer holding this one
    offset: str = "0"      # slices: C expression of the element offset in the parent
    vtype: object = None   # values (dtype None): the IR type, checked at the entry (codegen/entry_checks.py)

    @property
    def ctype(self) -> str:
        return "onnxc_value" if self.dtype is None else self.dtype.c

    @property
    def is_value(self) -> bool:
        return self.dtype is None


@dataclass
class AllocOut:
    """What the run function does with output descriptor ``index`` of an allocating kernel."""

    buffer: int
    rank: int | None                  # None: a value (sequence/optional), no dims
    defines: list[tuple[int, str]]    # (axis, D[k]) assigned from the descriptor
    checks: list[tuple[int, str]]     # (axis, C expression) the descriptor's dim must equal


@dataclass
class Step:
    fn: str                        # C function name
    body: str | None               # C statements; None: no kernel (a view that only binds run-time dims)
    params: list[str]              # C parameter declarations after (rt, D)
    args: list[tuple[int, bool]]   # (buffer id, is_output) per parameter, in order
    node: str                      # description for errors and profiles
    shape_body: str | None = None  # C statements of ``<fn>_shape(rt, D, <inputs>)``, binding run-time dims
    # Kernels that allocate their outputs (``@kernel(..., allocates=True)``) fill ``onnxc_tensor``
    # descriptors; per output: the dims the run function reads back into D[] and the ones it checks.
    allocs: list[AllocOut] | None = None
    checks: list[str] = field(default_factory=list)  # run-time shape contracts checked after the step

    @property
    def in_params(self) -> list[tuple[str, int]]:
        """(declaration, buffer id) of the input parameters: the shape function's parameters."""
        return [(p, bid) for p, (bid, out) in zip(self.params, self.args) if not out]


@dataclass
class Program:
    inputs: list[tuple[str, Buffer]]
    outputs: list[tuple[str, Buffer, tuple]]     # name, buffer, shape (Dims of the output value)
    buffers: dict[int, Buffer]
    steps: list[Step]
    dimvars: list[str]                           # D[i] is the variable dimvars[i]
    weights: memoryview                          # the blob: bytes in 64-byte aligned memory (no copy to run)
    helpers: dict[str, str] = field(default_factory=dict)
    value_buffer: dict[int, int] = field(default_factory=dict)  # Value.id -> buffer id
    n_bound: int = 0                             # dimvars[:n_bound] are bound from the inputs
    subprograms: list[str] = field(default_factory=list)  # C of the bodies of If/Loop/Scan nodes
    bind_checks: list[str] = field(default_factory=list)  # contracts over input dims, checked when binding
    n_input_dims: int = 0                        # dimvars[:n_input_dims] come from the inputs' dims; the rest
                                                 # of the bound ones are defined by contracts (broadcasts)

    def is_dynamic(self, b: Buffer) -> bool:
        """Whether ``b`` is allocated at run time: by its producing kernel, or because its size depends
        on a dimension variable defined at run time by a node."""
        if b.owned:
            return True
        late = set(self.dimvars[self.n_bound:])
        return any(free_symbols(d) & late for d in b.shape)

    def dim_c(self, d: Dim) -> str:
        return to_c(d, self.sym_c)

    def sym_c(self, name: str) -> str:
        return f"D[{self.dimvars.index(name)}]"


class _Lowerer:
    def __init__(self, model: Model, threads: int, prefix: str = "", helpers: dict | None = None,
                 counter: list | None = None, precision: str = "fp32"):
        self.model = model
        self.g = model.graph
        self.threads = threads
        self.precision = precision  # KernelCtx.precision
        self.prefix = prefix          # C names of this program's functions start with it
        self.buffers: dict[int, Buffer] = {}
        self.vbuf: dict[int, int] = {}
        self.steps: list[Step] = []
        # the weights blob: (offset, uint8 array) pieces, copied once into aligned memory by finish_blob()
        self.blob: list[tuple[int, np.ndarray]] = []
        self.blob_size = 0
        self.pending: dict[int, np.ndarray] = {}  # weight buffer id -> data, placed by place_weights()
        self.helpers: dict[str, str] = {} if helpers is None else helpers
        self.dimvars: list[str] = []
        self.subprograms: list[str] = []
        self.slices: dict[int, concat_inplace.Slice] = {}  # values written in place into a Concat's output
        self.noops: set[int] = set()                        # the Concat nodes that emit no code
        self.counter = [0] if counter is None else counter  # subprogram numbering, shared by the tree
        self._nb = 0
        self.grow_weights: set[int] | None = None  # set by run(): codegen/weight_budget.py

    def new_buffer(self, kind: str, v: Value, index: int = -1) -> Buffer:
        if kind == "temp" and v.id in self.slices:
            return self.slice_buffer(v)
        t = v.type
        if isinstance(t, TensorType):
            b = Buffer(self._nb, kind, t.dtype, t.shape, index)
        else:
            b = Buffer(self._nb, kind, None, (), index, owned=kind == "temp", vtype=t)
        self._nb += 1
        self.buffers[b.id] = b
        self.vbuf[v.id] = b.id
        return b

    def slice_buffer(self, v: Value) -> Buffer:
        """The buffer of a Concat input done in place: a slice of the Concat's output buffer (made
        here first, outermost Concat first, when the Concat's output is itself a slice)."""
        s = self.slices[v.id]
        pid = self.vbuf.get(s.of.id)
        if pid is None:
            pid = self.new_buffer("temp", s.of).id
        b = Buffer(self._nb, "slice", v.type.dtype, v.type.shape, parent=pid, offset=self.dim_c(s.offset))
        self._nb += 1
        self.buffers[b.id] = b
        self.vbuf[v.id] = b.id
        return b

    def root(self, bid: int) -> Buffer:
        """The buffer holding ``bid`` (itself unless a slice)."""
        b = self.buffers[bid]
        while b.kind == "slice":
            b = self.buffers[b.parent]
        return b

    def add_weight(self, v: Value) -> None:
        if not isinstance(v.type, TensorType):
            raise UnsupportedOpError(f"constant {v.name!r} of type {v.type} is not supported yet",
                                     [("ai.onnx", f"constant of type {v.type}", 0)])
        if v.type.dtype == DType.STRING:
            self.add_string_weight(v)
            return
        arr = np.ascontiguousarray(np.asarray(v.const, dtype=v.type.dtype.np))
        self.pending[self.new_buffer("weight", v).id] = arr

    def place_weights(self) -> None:
        """Write the constants some step reads into the blob; a constant every reader replaced with its
        own copy (``KernelCtx.repack_const``, e.g. weights packed for the GEMM) is left out."""
        used = {bid for st in self.steps for bid, _ in st.args}
        for bid, arr in self.pending.items():
            if bid in used:
                self.buffers[bid].index = self.append_blob(arr)
        self.pending.clear()

    def add_string_weight(self, v: Value) -> None:
        """A string constant: a static array of C string literals (pointers cannot live in the blob)."""
        b = self.new_buffer("weight", v)
        b.symbol = f"{self.prefix or 'onnxc_'}str{b.id}"
        items = []
        for s in np.asarray(v.const, dtype=object).reshape(-1).tolist():
            s = s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)
            if "\0" in s:
                raise UnsupportedOpError(f"string constant {v.name!r} holds a NUL character; strings are "
                                         "NUL-terminated in C", [("ai.onnx", "strings with NUL", 0)])
            items.append(c_string(s))
        rows = ",\n".join("    " + ", ".join(items[k:k + 8]) for k in range(0, len(items), 8)) or '    ""'
        self.helpers[b.symbol] = f"static const onnxc_str {b.symbol}[{max(1, len(items))}] = {{\n{rows}\n}};"

    def append_blob(self, data: np.ndarray | memoryview) -> int:
        """Append a contiguous array (or bytes-like object) at a 64-byte aligned offset of the weights
        blob; returns the offset. The data is copied by ``finish_blob``."""
        raw = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
        self.blob_size += -self.blob_size % 64
        off = self.blob_size
        self.blob.append((off, raw))
        self.blob_size += raw.size
        return off

    def finish_blob(self) -> memoryview:
        """The weights blob in one aligned buffer, each piece copied once and let go (the run path uses
        this memory as is: no second copy; padding stays zero)."""
        buf = aligned_empty(self.blob_size, zero=True)
        while self.blob:
            off, raw = self.blob.pop()
            buf[off:off + raw.size] = raw
            release(raw)  # a weight mapped from the model's file: its pages are in the blob now
        return memoryview(buf)

    def dim_c(self, d: Dim) -> str:
        return to_c(d, self.sym_c)

    def sym_c(self, name: str) -> str:
        return f"D[{self.dimvars.index(name)}]"

    def operand(self, v: Value, ptr: str) -> Operand:
        t = v.type
        if not isinstance(t, TensorType):
            return Operand(ptr, v, None, (), [], None)
        return Operand(ptr, v, t.dtype, t.shape, [self.dim_c(d) for d in t.shape], v.const)

    def run(self) -> Program:
        g = self.g
        for v in [*g.inputs, *g.outputs]:
            if _nested_strings(v.type):
                raise UnsupportedOpError(f"graph input/output {v.name!r} of type {v.type}: sequences and optionals "
                                         "of strings are not supported yet", [("ai.onnx", "string sequences", 0)])
        for v in g.inputs:
            t = v.type
            if isinstance(t, CONTAINER_TYPES):
                continue
            if not isinstance(t, TensorType) or t.shape is None:
                raise UnsupportedOpError(f"graph input {v.name!r} of type {t} is not supported yet",
                                         [("ai.onnx", f"input type {t}", 0)])
            for d in t.shape:
                for s in sorted(free_symbols(d)):
                    if s not in self.dimvars:
                        self.dimvars.append(s)
        n_input_dims = len(self.dimvars)
        placer = Placer(list(g.contracts.values()))
        bind_checks = [check_c(c, self.sym_c, "return {call};") for c in placer.ready(self.dimvars)]
        n_bound = len(self.dimvars)
        self.slices, self.noops = concat_inplace.plan(g, set(self.dimvars))
        inputs = [(v.name, self.new_buffer("input", v, i)) for i, v in enumerate(g.inputs)]
        for v in g.initializers.values():
            if v.uses() or v in g.outputs:
                self.add_weight(v)
        self.grow_weights = weight_budget.plan(g.nodes, weight_budget.constant_bytes(g))
        for node in g.nodes:
            self.lower_node(node)
            self.place_contracts(placer)
        outputs = self.place_outputs()
        self.plan_lifetimes()
        self.place_weights()
        return Program(inputs, outputs, self.buffers, self.steps, self.dimvars, self.finish_blob(),
                       self.helpers, self.vbuf, n_bound, self.subprograms, bind_checks, n_input_dims)

    def place_contracts(self, placer: Placer) -> None:
        """Check the contracts whose dims the steps so far defined, after the last step."""
        ready = placer.ready(self.dimvars)
        if not ready:
            return
        if not self.steps:
            self.steps.append(Step(self.step_name(), None, [], [], "shape contracts"))
        self.steps[-1].checks.extend(check_c(c, self.sym_c, "{{ st = {call}; goto done; }}")
                                     for c in ready)

    def check_dims(self, node: Node, v: Value) -> None:
        t = v.type
        if isinstance(t, CONTAINER_TYPES):
            return
        if not isinstance(t, TensorType) or t.shape is None:
            raise UnsupportedOpError(f"{node.describe()}: output {v.name!r} has type {t}; only tensors "
                                     "of known rank are supported yet", [(node.domain or "ai.onnx",
                                                                          node.op_type, node.version)])
        for d in t.shape:
            unknown = [s for s in free_symbols(d) if s not in self.dimvars]
            if unknown:
                raise UnsupportedOpError(
                    f"{node.describe()}: output {v.name!r} has data-dependent dims {unknown}; not supported "
                    "yet", [(node.domain or "ai.onnx", node.op_type, node.version)])

    def step_name(self) -> str:
        return f"{self.prefix}k{len(self.steps)}"

    def lower_node(self, node: Node) -> None:
        if node.id in self.noops:  # its inputs were written in place into its output's buffer
            if node.outputs[0].id not in self.vbuf:
                self.new_buffer("temp", node.outputs[0])
            return
        kd = kb.lookup(node)
        if kd is None:
            raise UnsupportedOpError(f"no kernel for {node.describe()}",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)])
        for name in node.defines_dims:
            if name in self.dimvars:
                raise CompileError(f"{node.describe()}: run-time dimension {name!r} is defined twice")
            self.dimvars.append(name)
        for o in node.outputs:
            self.check_dims(node, o)
        ins = [None if v is None else self.operand(v, f"in{i}") for i, v in enumerate(node.inputs)]
        outs = [self.operand(v, f"out{i}") for i, v in enumerate(node.outputs)]
        ctx = KernelCtx(node, ins, outs, self.dim_c, self.helpers, self.threads)
        ctx.subprogram = self.subprogram
        ctx.grow_weights = self.grow_weights
        ctx.precision = self.precision
        if kd.allocates:
            ctx.defines = {name: f"D[{self.dimvars.index(name)}]" for name in node.defines_dims}
            shape_body = None
        else:
            shape_body = self.shape_function(node, ctx) if node.defines_dims else None
        params, args = [], []
        for i, (v, op) in enumerate(zip(node.inputs, ins)):
            if v is None:
                continue
            params.append(f"const {op.ctype} *restrict in{i}")
            args.append((self.vbuf[v.id], False))
        if kd.alias:
            self.vbuf[node.outputs[0].id] = self.vbuf[node.inputs[0].id]
            if shape_body is not None:
                self.steps.append(Step(self.step_name(), None, params, args, node.describe(), shape_body))
            return
        body = self.call(kd.fn, ctx)
        for i, data in ctx.repacked.items():  # the kernel reads its own copy of constant input i
            pos = sum(1 for v in node.inputs[:i] if v is not None)
            src = self.buffers[args[pos][0]]
            b = Buffer(self._nb, "weight", src.dtype, (int(data.size),))
            self._nb += 1
            self.buffers[b.id] = b
            self.pending[b.id] = np.ascontiguousarray(data, dtype=src.dtype.np)
            args[pos] = (b.id, False)
        for param, data in ctx.blobs:  # tables the kernel put in the weights blob (KernelCtx.blob_table)
            b = Buffer(self._nb, "weight", dtype_from_numpy(data.dtype), (int(data.size),))
            self._nb += 1
            self.buffers[b.id] = b
            self.pending[b.id] = data
            params.append(f"const {b.ctype} *restrict {param}")
            args.append((b.id, False))
        allocs = [] if kd.allocates else None
        for i, v in enumerate(node.outputs):
            b = self.new_buffer("temp", v)
            args.append((b.id, True))
            if allocs is None:
                params.append(f"{outs[i].ctype} *restrict out{i}")
                continue
            b.owned = True
            params.append(f"onnxc_tensor *restrict out{i}")
            allocs.append(self.alloc_out(node, ctx, b, v))
        if allocs is not None:
            assigned = {lv for a in allocs for _, lv in a.defines}
            missing = [n for n, lv in ctx.defines.items() if lv not in assigned]
            if missing:
                raise CompileError(f"{node.describe()}: run-time dims {sorted(missing)} are not output dims")
        self.steps.append(Step(self.step_name(), body, params, args, node.describe(), shape_body, allocs))

    def alloc_out(self, node: Node, ctx: KernelCtx, b: Buffer, v: Value) -> AllocOut:
        """How the run function takes over output ``v`` of an allocating kernel."""
        if b.is_value:
            return AllocOut(b.id, None, [], [])
        defines, checks = [], []
        for ax, d in enumerate(b.shape):
            lv = ctx.lvalue(d)
            if lv is not None:
                defines.append((ax, lv))
            else:
                checks.append((ax, self.dim_c(d)))
        return AllocOut(b.id, len(b.shape), defines, checks)

    def subprogram(self, body: Graph) -> tuple[str, int]:
        """Compile a closed body graph (If branch, Loop/Scan body), optimized with the main graph by the
        pass pipeline (passes/bodies.py), into this translation unit as a static run function; returns
        (function name, offset of its weights in this blob)."""
        from .emit import emit_subprogram

        sub = Model(body, dict(self.model.opset_imports), dict(self.model.functions))
        name = f"onnxc_sg{self.counter[0]}"
        self.counter[0] += 1
        prog = _Lowerer(sub, self.threads, name + "_", self.helpers, self.counter, self.precision).run()
        self.subprograms.extend(prog.subprograms)
        self.subprograms.append(emit_subprogram(prog, name))
        return f"{name}_run", self.append_blob(prog.weights)

    @staticmethod
    def call(fn, ctx: KernelCtx) -> str:
        """Run a lowering. A NotImplementedError is how a kernel says a variant of its op is not implemented
        (an UnsupportedOpError for the user); onnxc's own errors pass through; any other exception
        (KeyError, ValueError, IndexError...) is a bug in the lowering and fails loudly as an internal
        CompileError naming the node, never as "unsupported"."""
        node = ctx.node
        try:
            return fn(ctx)
        except OnnxcError:
            raise
        except NotImplementedError as e:
            raise UnsupportedOpError(f"{node.describe()}: {e}",
                                     [(node.domain or "ai.onnx", node.op_type, node.version)]) from e
        except Exception as e:
            raise CompileError(f"internal error while generating the kernel of {node.describe()}: "
                               f"{type(e).__name__}: {e} (a bug in onnxc: please report it)") from e

    def shape_function(self, node: Node, ctx: KernelCtx) -> str:
        """Body of the node's shape function, which must assign every run-time dim the node defines."""
        fn = kb.lookup_shape_fn(node)
        if fn is None:
            raise UnsupportedOpError(
                f"{node.describe()}: its output shape depends on run-time data ({', '.join(node.defines_dims)}) "
                "and the op has no shape function", [(node.domain or "ai.onnx", node.op_type, node.version)])
        ctx.defines = {name: f"D[{self.dimvars.index(name)}]" for name in node.defines_dims}
        body = self.call(fn, ctx)
        missing = [n for n, lv in ctx.defines.items() if f"{lv} =" not in body]
        if missing:
            raise CompileError(f"{node.describe()}: the shape function does not assign {missing}")
        return body

    def place_outputs(self) -> list:
        outs = []
        claimed: set[int] = set()
        for i, v in enumerate(self.g.outputs):
            bid = self.vbuf.get(v.id)
            b = self.buffers.get(bid) if bid is not None else None
            if b is None:
                raise CompileError(f"graph output {v.name!r} has no storage")
            if b.dtype == DType.STRING:  # strings: one self-contained block the caller frees
                b = self.pack_strings(v, b)
            elif b.kind != "temp" or bid in claimed:  # inputs, weights and shared buffers: copy
                b = self.copy_step(v, b)
            b.kind, b.index = "output", i
            claimed.add(b.id)
            outs.append((v.name, b, v.type.shape if isinstance(v.type, TensorType) else ()))
        return outs

    def pack_strings(self, v: Value, src: Buffer) -> Buffer:
        """A step packing string output ``v`` into one block: the pointer array, then the characters
        (runtime_c/onnxc_strings.h); the strings themselves may live in the per-call pool."""
        self.helpers.setdefault("onnxc_strings.h", include_line("onnxc_strings.h"))
        shape = v.type.shape
        b = Buffer(self._nb, "temp", DType.STRING, shape, owned=True)
        self._nb += 1
        self.buffers[b.id] = b
        dims = [self.dim_c(d) for d in shape]
        body = (f"const int64_t d_[{max(1, len(dims))}] = {{{', '.join(dims) or '0'}}};\n"
                f"return onnxc_str_pack(rt, in0, {len(dims)}, d_, out0);")
        self.steps.append(Step(self.step_name(), body, ["const onnxc_str *restrict in0", "onnxc_tensor *restrict out0"],
                               [(src.id, False), (b.id, True)], f"pack strings of output {v.name!r}",
                               allocs=[AllocOut(b.id, len(shape), [], [])]))
        return b

    def copy_step(self, v: Value, src: Buffer) -> Buffer:
        """A step copying ``src`` into a fresh buffer for output ``v`` (outputs own their memory)."""
        b = Buffer(self._nb, "temp", src.dtype, v.type.shape if isinstance(v.type, TensorType) else (),
                   owned=src.is_value)
        self._nb += 1
        self.buffers[b.id] = b
        if src.is_value:
            self.helpers.setdefault("onnxc_value.h", include_line("onnxc_value.h"))
            body = ("onnxc_value *c = onnxc_value_clone(in0);\n"
                    "if (!c) return onnxc_fail(rt, ONNXC_ERR_MEMORY, \"out of memory copying a value\");\n"
                    "*out0 = onnxc_value_desc(c);\nreturn 0;")
            self.steps.append(Step(self.step_name(), body, ["const onnxc_value *restrict in0",
                                                             "onnxc_tensor *restrict out0"],
                                   [(src.id, False), (b.id, True)], f"copy to output {v.name!r}",
                                   allocs=[AllocOut(b.id, None, [], [])]))
            return b
        n = " * ".join(f"({self.dim_c(d)})" for d in v.type.shape) or "1"
        # (an empty tensor may have a NULL data pointer, which memcpy must not get even for 0 bytes)
        body = f"const size_t n_ = (size_t)({n}) * sizeof({v.type.dtype.c});\nif (n_) memcpy(out0, in0, n_);\nreturn 0;"
        self.steps.append(Step(self.step_name(), body,
                               [f"const {v.type.dtype.c} *restrict in0", f"{v.type.dtype.c} *restrict out0"],
                               [(src.id, False), (b.id, True)], f"copy to output {v.name!r}"))
        return b

    def plan_lifetimes(self) -> None:
        """Steps from the first write to the last read of each temp/output (a slice counts for the
        buffer holding it)."""
        written: set[int] = set()
        for si, st in enumerate(self.steps):
            for bid, is_out in st.args:
                b = self.root(bid)
                if b.kind not in ("temp", "output"):
                    continue
                if is_out and b.id not in written:
                    b.first = si
                    written.add(b.id)
                b.last = max(b.last, si)


def _nested_strings(t) -> bool:
    """Whether ``t`` is a sequence/optional holding string tensors (their pointers would outlive the
    per-call string pool)."""
    while isinstance(t, (SequenceType, OptionalType)):
        t = t.elem
        if isinstance(t, TensorType) and t.dtype == DType.STRING:
            return True
    return False


def lower(model: Model, threads: int = 1, precision: str = "fp32") -> Program:
    """Lower an optimized, fully typed model to a Program (``precision``: KernelCtx.precision)."""
    return _Lowerer(model, threads, precision=precision).run()
