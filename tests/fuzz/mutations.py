"""Mutations of serialized and structured ONNX models, driven by hypothesis draws.

- ``mutate_bytes``: byte-level edits of a serialized model (bit flips, byte overwrites with values
  that upset varints and lengths, inserted and deleted runs, duplicated chunks, truncation).
- ``mutate_structure``: edits made on the protobuf messages (onnx.helper / onnx.ModelProto), so they
  reach past the parser: attribute values and types, dims (huge, negative, zero, odd names, rank
  changes), element types, dropped inputs and outputs, renames that create cycles, dangling
  references and duplicate definitions, swapped op types and domains, nodes nested into If/Loop
  bodies (repeatedly), recursive functions, corrupt initializer data, hostile external-data
  locations, odd opset and IR versions, reordered or duplicated nodes.

Every mutation returns a short description (it goes into the reproducer's notes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import onnx
from google.protobuf import message as protobuf_message
from hypothesis import strategies as st
from onnx import AttributeProto, TensorProto, helper

INTS = [0, 1, -1, 2, 3, -2, 7, 2**31 - 1, 2**31, -(2**31), 2**32, 2**40, 2**62, 2**63 - 1, -(2**63), 1000003]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e30, -1e30, 1e-30, math.inf, -math.inf, math.nan, 3.0e38]
DIMS = [0, 1, 2, 3, -1, -7, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, 65536]
DIM_PARAMS = ["", "N", "M", "2*N", "N-1", "a b", "__proto__", "\u00e9", "N\x00", "$(id)", "unk__0"]
STRINGS = [b"", b"\x00", b"NOTSET", b"SAME_UPPER", b"SAME_LOWER", b"VALID", b"linear", b"nearest", b"cubic",
           b"constant", b"reflect", b"edge", b"DCR", b"CRD", b"\xff\xfe", b"x" * 300, b"../../etc/passwd"]
ATTR_NAMES = ["axis", "axes", "perm", "kernel_shape", "pads", "strides", "dilations", "group", "to", "keepdims",
              "alpha", "beta", "mode", "value", "then_branch", "else_branch", "body", "k", "epsilon", "transB",
              "auto_pad", "split", "shape", "direction", "hidden_size", "seed", "dtype", "largest", "sorted"]
OPS = ["Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Pow", "Where",
       "Greater", "Equal", "Not", "And", "Clip", "Cast", "CastLike", "Identity", "Shape", "Size", "Gather",
       "GatherElements", "GatherND", "Scatter", "ScatterElements", "ScatterND", "Reshape", "Flatten", "Squeeze",
       "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Expand", "Tile", "Pad", "ConstantOfShape", "Range",
       "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
       "InstanceNormalization", "LayerNormalization", "Gemm", "MatMul", "MatMulInteger", "Einsum", "Softmax",
       "LogSoftmax", "TopK", "ArgMax", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd", "CumSum", "NonZero",
       "Unique", "OneHot", "Resize", "DepthToSpace", "SpaceToDepth", "LSTM", "GRU", "RNN", "If", "Loop", "Scan",
       "SequenceConstruct", "SequenceAt", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
       "QuantizeLinear", "DequantizeLinear", "DFT", "STFT", "Einsum", "Trilu", "Mod", "BitShift", "StringNormalizer",
       "RandomNormal", "Bernoulli", "NonMaxSuppression", "RoiAlign", "GridSample", "Constant", "Dropout",
       "FooBar", "", "Inner", "Outer"]
DOMAINS = ["", "local", "ai.onnx.ml", "com.microsoft", "bogus", "ai.onnx"]
LOCATIONS = ["../../../../etc/passwd", "/etc/passwd", "a\x00b", "missing.bin", "", ".", "/dev/zero", "x" * 5000]
OPSETS = [0, 1, 6, 7, 9, 11, 13, 17, 18, 21, 23, 24, 25, 26, 100, -1, 2**62]


# ------------------------------------------------------------------------------------------ walking

def graphs(m: onnx.ModelProto) -> list[onnx.GraphProto]:
    """The main graph and every subgraph (attributes of nodes, in functions too), outermost first."""
    out: list[onnx.GraphProto] = []

    def visit(g: onnx.GraphProto) -> None:
        out.append(g)
        for n in g.node:
            visit_node(n)

    def visit_node(n: onnx.NodeProto) -> None:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH or a.HasField("g"):
                visit(a.g)
            for sub in a.graphs:
                visit(sub)

    visit(m.graph)
    for f in m.functions:
        for n in f.node:
            visit_node(n)
    return out


def node_lists(m: onnx.ModelProto) -> list:
    """Every repeated node field: of each graph and of each function."""
    return [g.node for g in graphs(m)] + [f.node for f in m.functions]


def nodes(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for lst in node_lists(m) for n in lst]


def attributes(m: onnx.ModelProto) -> Iterator[AttributeProto]:
    for n in nodes(m):
        yield from n.attribute


def value_infos(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [v for g in graphs(m) for v in (*g.input, *g.output, *g.value_info)]


def initializers(m: onnx.ModelProto) -> list[TensorProto]:
    return [t for g in graphs(m) for t in g.initializer]


def names(m: onnx.ModelProto) -> list[str]:
    """Every value name defined or used anywhere."""
    out: set[str] = set()
    for n in nodes(m):
        out.update(n.input)
        out.update(n.output)
    out.update(v.name for v in value_infos(m))
    out.update(t.name for t in initializers(m))
    return sorted(x for x in out if x)


def pick(d: st.DataObject, items: list, label: str = ""):
    """One of ``items`` (None when empty)."""
    if not items:
        return None
    return items[d.draw(st.integers(0, len(items) - 1), label=label or None)]


# -------------------------------------------------------------------------------------------- bytes

def mutate_bytes(d: st.DataObject, blob: bytes) -> tuple[bytes, list[str]]:
    """1-8 byte-level edits of ``blob`` (mostly one or two that keep its size: those often leave a
    parseable model whose values changed)."""
    b = bytearray(blob)
    notes = []
    for _ in range(d.draw(st.sampled_from([1, 1, 1, 2, 2, 3, 8]), label="edits")):
        kind = d.draw(st.sampled_from(["flip", "flip", "flip", "set", "set", "insert", "delete", "truncate",
                                       "duplicate", "varint"]))
        pos = d.draw(st.integers(0, max(0, len(b) - 1)), label="pos")
        if kind == "flip" and b:
            bit = d.draw(st.integers(0, 7))
            b[pos] ^= 1 << bit
            notes.append(f"flip bit {bit} at {pos}")
        elif kind == "set" and b:
            v = d.draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x01, 0x08, 0x0A, 0x12, 0x1A, 0x22, 0x2A, 0x3A])
                       | st.integers(0, 255))
            b[pos] = v
            notes.append(f"set {pos} = {v:#x}")
        elif kind == "insert":
            ins = d.draw(st.binary(min_size=1, max_size=16))
            b[pos:pos] = ins
            notes.append(f"insert {ins.hex()} at {pos}")
        elif kind == "delete" and b:
            n = d.draw(st.integers(1, 16))
            del b[pos:pos + n]
            notes.append(f"delete {n} at {pos}")
        elif kind == "truncate":
            del b[pos:]
            notes.append(f"truncate at {pos}")
        elif kind == "duplicate" and b:
            n = d.draw(st.integers(1, 64))
            b[pos:pos] = b[pos:pos + n]
            notes.append(f"duplicate {n} at {pos}")
        elif kind == "varint" and b:
            v = d.draw(st.sampled_from([b"\xff\xff\xff\xff\x0f", b"\xff" * 9 + b"\x01", b"\x80" * 10, b"\xff" * 11]))
            b[pos:pos + 1] = v
            notes.append(f"varint {v.hex()} at {pos}")
    return bytes(b), notes


# ---------------------------------------------------------------------------------------- structure

def mut_attr_value(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    a = pick(d, list(attributes(m)), "attr")
    if a is None:
        return None
    t = a.type
    if t == AttributeProto.INT:
        a.i = d.draw(st.sampled_from(INTS))
        return f"attr {a.name} = {a.i}"
    if t == AttributeProto.FLOAT:
        a.f = d.draw(st.sampled_from(FLOATS))
        return f"attr {a.name} = {a.f}"
    if t == AttributeProto.INTS:
        how = d.draw(st.sampled_from(["set", "append", "clear", "long"]))
        if how == "set" and a.ints:
            a.ints[d.draw(st.integers(0, len(a.ints) - 1))] = d.draw(st.sampled_from(INTS))
        elif how == "append":
            a.ints.append(d.draw(st.sampled_from(INTS)))
        elif how == "clear":
            del a.ints[:]
        else:
            a.ints.extend([d.draw(st.sampled_from(INTS))] * 20)
        return f"attr {a.name} ints {how} -> {list(a.ints)[:8]}"
    if t == AttributeProto.FLOATS:
        a.floats.append(d.draw(st.sampled_from(FLOATS)))
        return f"attr {a.name} floats + 1"
    if t == AttributeProto.STRING:
        a.s = d.draw(st.sampled_from(STRINGS))
        return f"attr {a.name} = {a.s[:20]!r}"
    if t == AttributeProto.TENSOR:
        return "attr tensor: " + mutate_tensor(a.t, d)
    if t == AttributeProto.GRAPH:
        how = d.draw(st.sampled_from(["clear_nodes", "clear_outputs", "add_input", "empty"]))
        if how == "clear_nodes":
            del a.g.node[:]
        elif how == "clear_outputs":
            del a.g.output[:]
        elif how == "add_input":
            a.g.input.append(helper.make_tensor_value_info("extra_in", TensorProto.FLOAT, [2]))
        else:
            a.g.Clear()
        return f"attr graph {a.name} {how}"
    a.type = d.draw(st.integers(0, 14))
    return f"attr {a.name} type -> {a.type}"


def mut_attr_type(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    a = pick(d, list(attributes(m)), "attr")
    if a is None:
        return None
    how = d.draw(st.sampled_from(["retag", "int", "float", "ints", "string", "graph", "ref"]))
    name = a.name
    if how == "retag":
        a.type = d.draw(st.integers(0, 14))  # (the enum's range: protobuf refuses other values)
    else:
        a.Clear()
        a.name = name
        if how == "int":
            a.type, a.i = AttributeProto.INT, d.draw(st.sampled_from(INTS))
        elif how == "float":
            a.type, a.f = AttributeProto.FLOAT, d.draw(st.sampled_from(FLOATS))
        elif how == "ints":
            a.type = AttributeProto.INTS
            a.ints.extend(d.draw(st.lists(st.sampled_from(INTS), max_size=5)))
        elif how == "string":
            a.type, a.s = AttributeProto.STRING, d.draw(st.sampled_from(STRINGS))
        elif how == "graph":
            a.type = AttributeProto.GRAPH
            a.g.CopyFrom(helper.make_graph([], "empty", [], []))
        else:
            a.type, a.ref_attr_name = AttributeProto.INT, d.draw(st.sampled_from(["alpha", "missing", ""]))
    return f"attr {name} as {how}"


def mut_attr_drop_add(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    n = pick(d, nodes(m), "node")
    if n is None:
        return None
    if n.attribute and d.draw(st.booleans()):
        i = d.draw(st.integers(0, len(n.attribute) - 1))
        name = n.attribute[i].name
        del n.attribute[i]
        return f"{n.op_type}: drop attr {name}"
    name = d.draw(st.sampled_from(ATTR_NAMES))
    kind = d.draw(st.sampled_from(["int", "ints", "float", "string", "graph", "tensor"]))
    value = {"int": lambda: d.draw(st.sampled_from(INTS)),
             "ints": lambda: d.draw(st.lists(st.sampled_from(INTS), max_size=6)),
             "float": lambda: d.draw(st.sampled_from(FLOATS)),
             "string": lambda: d.draw(st.sampled_from(STRINGS)),
             "graph": lambda: helper.make_graph([helper.make_node("Identity", ["x"], ["gy"])], "g", [],
                                                [helper.make_tensor_value_info("gy", TensorProto.FLOAT, None)]),
             "tensor": lambda: helper.make_tensor("t", TensorProto.INT64, [2], [1, 2])}[kind]()
    if kind == "ints" and not value:
        n.attribute.append(helper.make_attribute(name, [], attr_type=AttributeProto.INTS))
    else:
        n.attribute.append(helper.make_attribute(name, value))
    return f"{n.op_type}: add attr {name} ({kind})"


def mutate_tensor(t: TensorProto, d: st.DataObject) -> str:
    how = d.draw(st.sampled_from(["dims", "dtype", "truncate", "extend", "clear", "external", "huge_dims"]))
    if how == "dims":
        if t.dims and d.draw(st.booleans()):
            t.dims[d.draw(st.integers(0, len(t.dims) - 1))] = d.draw(st.sampled_from(DIMS))
        else:
            t.dims.append(d.draw(st.sampled_from(DIMS)))
    elif how == "huge_dims":
        del t.dims[:]
        t.dims.extend(d.draw(st.lists(st.sampled_from([2**31, 2**32, 2**20, 2**62, 3]), min_size=1, max_size=4)))
    elif how == "dtype":
        t.data_type = d.draw(st.integers(0, 27) | st.sampled_from([100, 2**20]))
    elif how == "truncate" and t.raw_data:
        t.raw_data = t.raw_data[: d.draw(st.integers(0, len(t.raw_data) - 1))]
    elif how == "extend":
        t.raw_data = t.raw_data + bytes(d.draw(st.integers(1, 9)))
    elif how == "clear":
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("int64_data")
        t.ClearField("int32_data")
    else:
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", d.draw(st.sampled_from(LOCATIONS))),
                     ("offset", str(d.draw(st.sampled_from([0, 1, -1, 2**62])))),
                     ("length", str(d.draw(st.sampled_from([0, 4, 2**62, -5]))))):
            e = t.external_data.add()
            e.key, e.value = k, v
        how += f" {t.external_data[0].value[:30]!r}"
    return f"tensor {t.name}: {how}"


def mut_dims(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    vis = [v for v in value_infos(m) if v.type.HasField("tensor_type")]
    if d.draw(st.booleans()) or not vis:
        t = pick(d, initializers(m), "init")
        return None if t is None else mutate_tensor(t, d)
    v = pick(d, vis, "vi")
    shape = v.type.tensor_type.shape
    how = d.draw(st.sampled_from(["value", "param", "add", "remove", "clear", "rank17"]))
    if how == "value" and shape.dim:
        dim = shape.dim[d.draw(st.integers(0, len(shape.dim) - 1))]
        dim.dim_value = d.draw(st.sampled_from(DIMS))
    elif how == "param" and shape.dim:
        dim = shape.dim[d.draw(st.integers(0, len(shape.dim) - 1))]
        dim.dim_param = d.draw(st.sampled_from(DIM_PARAMS))
    elif how == "add":
        shape.dim.add().dim_value = d.draw(st.sampled_from(DIMS))
    elif how == "remove" and shape.dim:
        del shape.dim[d.draw(st.integers(0, len(shape.dim) - 1))]
    elif how == "clear":
        v.type.tensor_type.ClearField("shape")
    elif how == "rank17":
        for _ in range(17):
            shape.dim.add().dim_value = 1
    return f"value {v.name}: dims {how}"


def mut_dtype(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    code = d.draw(st.integers(0, 27) | st.sampled_from([100, 2**20]), label="dtype")
    if d.draw(st.booleans()):
        t = pick(d, initializers(m))
        if t is None:
            return None
        t.data_type = code
        return f"init {t.name}: data_type {code}"
    v = pick(d, value_infos(m))
    if v is None:
        return None
    how = d.draw(st.sampled_from(["elem", "elem", "sequence", "optional", "map", "none"]))
    if how == "elem":
        v.type.tensor_type.elem_type = code
    elif how == "sequence":
        v.type.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(code, [2])))
    elif how == "optional":
        v.type.CopyFrom(helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    elif how == "map":
        v.type.CopyFrom(helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(code, None)))
    else:
        v.ClearField("type")
    return f"value {v.name}: type {how} {code}"


def mut_drop(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    how = d.draw(st.sampled_from(["node_input", "empty_input", "node_output", "graph_input", "graph_output",
                                  "initializer", "node"]))
    g = pick(d, graphs(m))
    if how in ("node_input", "empty_input", "node_output", "node"):
        lst = pick(d, [x for x in node_lists(m) if len(x)])
        if lst is None:
            return None
        i = d.draw(st.integers(0, len(lst) - 1))
        n = lst[i]
        if how == "node":
            op = n.op_type
            del lst[i]
            return f"drop node {op}"
        field = n.output if how == "node_output" else n.input
        if not field:
            return None
        k = d.draw(st.integers(0, len(field) - 1))
        if how == "empty_input":
            field[k] = ""
        else:
            del field[k]
        return f"{n.op_type}: {how} {k}"
    field = {"graph_input": g.input, "graph_output": g.output, "initializer": g.initializer}[how]
    if not field:
        return None
    del field[d.draw(st.integers(0, len(field) - 1))]
    return f"graph {g.name}: drop {how}"


def mut_rename(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    lst = pick(d, [x for x in node_lists(m) if len(x)])
    if lst is None:
        return None
    i = d.draw(st.integers(0, len(lst) - 1))
    n = lst[i]
    how = d.draw(st.sampled_from(["cycle", "self", "dangling", "duplicate", "graph_output", "outer"]))
    if how == "cycle" and n.input:
        later = [o for x in list(lst)[i:] for o in x.output if o]
        if not later:
            return None
        n.input[d.draw(st.integers(0, len(n.input) - 1))] = pick(d, later)
    elif how == "self" and n.input and n.output:
        n.input[0] = n.output[0]
    elif how == "dangling" and n.input:
        n.input[d.draw(st.integers(0, len(n.input) - 1))] = "missing_" + d.draw(st.sampled_from(["a", "x", ""]))
    elif how == "duplicate" and n.output:
        n.output[0] = pick(d, names(m))
    elif how == "graph_output" and m.graph.output:
        m.graph.output[d.draw(st.integers(0, len(m.graph.output) - 1))].name = pick(d, names(m) + ["nowhere"])
    elif how == "outer" and n.input:
        n.input[0] = pick(d, names(m))
    else:
        return None
    return f"{n.op_type}: rename {how}"


def mut_swap_op(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    n = pick(d, nodes(m), "node")
    if n is None:
        return None
    old = n.op_type
    if d.draw(st.integers(0, 4)) == 0:
        n.domain = d.draw(st.sampled_from(DOMAINS))
        return f"{old}: domain {n.domain!r}"
    n.op_type = d.draw(st.sampled_from(OPS))
    return f"{old} -> {n.op_type}"


def mut_nest(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    """Wrap a main-graph node into an If (both branches hold it) or a 1-trip Loop, ``depth`` times
    (the If's else branch holds the plain node: the model stays linear in ``depth``)."""
    depth = d.draw(st.sampled_from([1, 1, 2, 3, 8, 24]), label="depth")  # (protobuf: 100 levels at most)
    kind = d.draw(st.sampled_from(["If", "Loop"]))
    if not m.graph.node:
        return None
    idx = d.draw(st.integers(0, len(m.graph.node) - 1))
    node = onnx.NodeProto()
    node.CopyFrom(m.graph.node[idx])
    outs = [o for o in node.output if o]
    if not outs:
        return None
    for t in (helper.make_tensor("nest_true", TensorProto.BOOL, [], [True]),
              helper.make_tensor("nest_one", TensorProto.INT64, [], [1])):
        if not any(i.name == t.name for i in m.graph.initializer):
            m.graph.initializer.append(t)
    cur = node
    for level in range(depth):
        inner = onnx.NodeProto()
        inner.CopyFrom(cur)
        suffix = f"_n{level}"
        inner_outs = [o + suffix for o in cur.output]
        del inner.output[:]
        inner.output.extend(inner_outs)
        if kind == "If":  # then: the nest so far; else: the node itself (a linear size, not 2^depth)
            plain = onnx.NodeProto()
            plain.CopyFrom(node)
            del plain.output[:]
            plain.output.extend([o + f"_e{level}" for o in node.output])
            then_g, else_g = (helper.make_graph([n], f"{tag}{level}", [],
                                                [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                                                 for o in n.output if o])
                              for n, tag in ((inner, "t"), (plain, "e")))
            cur = helper.make_node("If", ["nest_true"], list(cur.output), then_branch=then_g, else_branch=else_g)
        else:
            ident = helper.make_node("Identity", ["lc"], ["lc_out" + suffix])
            body = helper.make_graph(
                [inner, ident], f"body{level}",
                [helper.make_tensor_value_info("it" + suffix, TensorProto.INT64, []),
                 helper.make_tensor_value_info("lc", TensorProto.BOOL, [])],
                [helper.make_tensor_value_info("lc_out" + suffix, TensorProto.BOOL, []),
                 *[helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in inner_outs if o]])
            cur = helper.make_node("Loop", ["nest_one", "nest_true"], list(cur.output), body=body)
    m.graph.node[idx].CopyFrom(cur)
    return f"nest {node.op_type} in {kind} x{depth}"


def mut_graph_attr_on_node(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    n = pick(d, nodes(m))
    if n is None:
        return None
    g = helper.make_graph([helper.make_node("Neg", [pick(d, names(m)) or "x"], ["neg_out"])], "stray", [],
                          [helper.make_tensor_value_info("neg_out", TensorProto.FLOAT, None)])
    n.attribute.append(helper.make_attribute(d.draw(st.sampled_from(["body", "then_branch", "else_branch", "g"])), g))
    return f"{n.op_type}: stray graph attribute"


def mut_long_chain(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    """A chain of ``length`` unary nodes after a value of the main graph, as an extra output."""
    src = pick(d, [o for n in m.graph.node for o in n.output if o] + [i.name for i in m.graph.input])
    if src is None:
        return None
    length = d.draw(st.sampled_from([2, 50, 300, 1500]), label="length")
    op = d.draw(st.sampled_from(["Relu", "Neg", "Identity", "Sigmoid"]))
    prev = src
    for k in range(length):
        m.graph.node.append(helper.make_node(op, [prev], [f"chain_{k}"]))
        prev = f"chain_{k}"
    m.graph.output.append(helper.make_tensor_value_info(prev, TensorProto.FLOAT, None))
    return f"chain of {length} {op} after {src}"


def mut_opset(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    how = d.draw(st.sampled_from(["version", "drop", "duplicate", "ir"]))
    if how == "ir":
        m.ir_version = d.draw(st.sampled_from([0, 1, 3, 7, 11, 12, 100, -1, 2**62]))
        return f"ir_version {m.ir_version}"
    if not m.opset_import:
        return None
    i = d.draw(st.integers(0, len(m.opset_import) - 1))
    if how == "version":
        m.opset_import[i].version = d.draw(st.sampled_from(OPSETS))
        return f"opset {m.opset_import[i].domain!r} = {m.opset_import[i].version}"
    if how == "drop":
        del m.opset_import[i]
        return "drop opset import"
    m.opset_import.add().CopyFrom(m.opset_import[i])
    m.opset_import[-1].version += 1
    return "duplicate opset import"


def mut_order(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    lst = pick(d, [x for x in node_lists(m) if len(x) > 1])
    if lst is None:
        return None
    how = d.draw(st.sampled_from(["reverse", "last_first", "duplicate"]))
    items = [onnx.NodeProto() for _ in lst]
    for a, b in zip(items, lst):
        a.CopyFrom(b)
    if how == "reverse":
        items.reverse()
    elif how == "last_first":
        items.insert(0, items.pop())
    else:
        items.insert(d.draw(st.integers(0, len(items))), items[d.draw(st.integers(0, len(items) - 1))])
    del lst[:]
    lst.extend(items)
    return f"nodes {how}"


def mut_function(m: onnx.ModelProto, d: st.DataObject) -> str | None:
    if not m.functions:
        return None
    f = pick(d, list(m.functions))
    how = d.draw(st.sampled_from(["recurse", "mutual", "drop", "inputs", "missing_attr", "chain", "exponential"]))
    if how == "recurse":
        f.node.append(helper.make_node(f.name, list(f.input), [f"rec_{len(f.node)}"], domain=f.domain))
    elif how == "mutual" and len(m.functions) > 1:
        for a, b in zip(m.functions, list(m.functions)[1:] + [m.functions[0]]):
            a.node.append(helper.make_node(b.name, list(b.input)[:1] * len(b.input), ["mut_out"], domain=b.domain))
    elif how == "drop":
        del m.functions[d.draw(st.integers(0, len(m.functions) - 1))]
    elif how == "inputs":
        f.input.append("extra_in")
    elif how == "missing_attr":
        for n in f.node:
            for a in n.attribute:
                if a.ref_attr_name:
                    a.ref_attr_name = "missing"
    elif how == "exponential":  # F_k calls F_{k-1} twice: 2^depth nodes when inlined
        depth = d.draw(st.sampled_from([4, 10, 20, 30]))
        opsets = [helper.make_operatorsetid("", 18), helper.make_operatorsetid(f.domain, 1)]
        prev = f.name
        for k in range(depth):
            name = f"Exp{k}"
            n_in = len(f.input) if k == 0 else 1
            body = [helper.make_node(prev, ["a"] * n_in, ["t1"], domain=f.domain),
                    helper.make_node(prev, ["t1"] * n_in, ["t2"], domain=f.domain),
                    helper.make_node("Add", ["t1", "t2"], ["o"])]
            m.functions.append(helper.make_function(f.domain, name, ["a"], ["o"], body, opsets))
            prev = name
        n = pick(d, list(m.graph.node))
        if n is None or not n.input:
            return None
        m.graph.node.append(helper.make_node(prev, [n.input[0]], [n.output[0] + "_exp"], domain=f.domain))
        m.graph.output.append(helper.make_tensor_value_info(n.output[0] + "_exp", TensorProto.FLOAT, None))
        how += f" depth {depth}"
    else:  # every function's body calls the previous function twice
        for k in range(1, len(m.functions)):
            prev, cur = m.functions[k - 1], m.functions[k]
            cur.node.append(helper.make_node(prev.name, [cur.input[0]] * len(prev.input), ["c1"], domain=prev.domain))
            cur.node.append(helper.make_node(prev.name, [cur.input[0]] * len(prev.input), ["c2"], domain=prev.domain))
    return f"function {f.name}: {how}"


STRUCTURE: dict[str, Callable[[onnx.ModelProto, st.DataObject], str | None]] = {
    "attr_value": mut_attr_value, "attr_type": mut_attr_type, "attr_drop_add": mut_attr_drop_add,
    "dims": mut_dims, "dtype": mut_dtype, "drop": mut_drop, "rename": mut_rename, "swap_op": mut_swap_op,
    "nest": mut_nest, "graph_attr": mut_graph_attr_on_node, "long_chain": mut_long_chain, "opset": mut_opset, "order": mut_order,
    "function": mut_function,
}


def mutate_structure(d: st.DataObject, m: onnx.ModelProto) -> list[str]:
    """Apply 1-3 structure mutations to ``m`` in place; their descriptions."""
    notes = []
    for _ in range(d.draw(st.integers(1, 3), label="mutations")):
        name = d.draw(st.sampled_from(sorted(STRUCTURE)), label="mutation")
        try:
            note = STRUCTURE[name](m, d)
        except (ValueError, TypeError, protobuf_message.Error) as e:  # protobuf refuses the value (or the
            # nesting depth, 100 levels): not a model
            note = f"refused by protobuf ({e})"
        if note is not None:
            notes.append(f"{name}: {note}")
    return notes
