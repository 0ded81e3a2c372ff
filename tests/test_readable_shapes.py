"""Readable shapes (issue 19): a YOLO-style detector whose head builds its anchor grid from the feature
maps' shapes (Shape -> Gather -> Cast -> Range -> meshgrid -> Reshape to a computed shape) gets output
dims that are formulas of the input dims, simplified (``ceil(H / 8)``, no ``floor`` of constants, no
``max(0, ...)``), with no internal tensor names in public shapes, ``onnxc info`` or the AOT header; a
dim that only data decides gets a readable name (``range_len0``). Both models run and match
onnxruntime at two sizes."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import onnxc
from onnxc.cli import main

NC = 3
NO = 4 + NC
A_FORMULA = "5*ceil(H / 8)*ceil(W / 8)"  # anchors: 2*ceil(H/8) x 2*ceil(W/8) at stride 4, ceil x ceil at 8
SIZES = [(1, 3, 64, 96), (2, 3, 40, 24)]


class Builder:
    """Nodes and initializers of a model under construction, with export-style value names."""

    def __init__(self) -> None:
        self.nodes, self.inits = [], []
        self.rng = np.random.default_rng(0)

    def const(self, name: str, arr) -> str:
        self.inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def node(self, op: str, ins: list[str], out: str, **kw) -> str:
        self.nodes.append(h.make_node(op, ins, [out], **kw))
        return out

    def conv(self, x: str, cin: int, cout: int, name: str, stride: int = 2, k: int = 3) -> str:
        wname, bname = self.const(name + ".w", (self.rng.standard_normal([cout, cin, k, k]) * 0.3).astype(np.float32)), \
            self.const(name + ".b", (self.rng.standard_normal([cout]) * 0.1).astype(np.float32))
        y = self.node("Conv", [x, wname, bname], f"/model.{name}/Conv_output_0", strides=[stride] * 2,
                      pads=[k // 2] * 4, kernel_shape=[k, k])
        return self.node("Relu", [y], f"/model.{name}/Relu_output_0") if k == 3 else y


def _anchors(b: Builder, p: str, f: str, float_range: bool) -> tuple[str, str, str]:
    """Flattened head output [N, NO, h*w], anchor points [h*w, 2] and strides [h*w, 1] of one level,
    built from the feature map's shape the way ultralytics' make_anchors exports."""
    shp = b.node("Shape", [f], p + "/Shape_output_0")
    bu = b.node("Unsqueeze", [b.node("Gather", [shp, "i0"], p + "/Gather_output_0", axis=0), "ax0"], p + "/Unsq_0")
    flat = b.node("Reshape", [f, b.node("Concat", [bu, "no", "m1"], p + "/Concat_output_0", axis=0)],
                  p + "/Reshape_output_0")
    hh = b.node("Gather", [shp, "i2"], p + "/Gather_1_output_0", axis=0)
    ww = b.node("Gather", [shp, "i3"], p + "/Gather_2_output_0", axis=0)
    if float_range:  # torch.arange(end=w, dtype=float32)
        sx = b.node("Range", ["f0", b.node("Cast", [ww], p + "/Cast_1_output_0", to=TP.FLOAT), "f1"], p + "/Range_output_0")
        sy = b.node("Range", ["f0", b.node("Cast", [hh], p + "/Cast_output_0", to=TP.FLOAT), "f1"], p + "/Range_1_output_0")
    else:  # torch.arange(end=w).float()
        sx = b.node("Cast", [b.node("Range", ["l0", ww, "l1"], p + "/Range_output_0")], p + "/Cast_output_0", to=TP.FLOAT)
        sy = b.node("Cast", [b.node("Range", ["l0", hh, "l1"], p + "/Range_1_output_0")], p + "/Cast_1_output_0", to=TP.FLOAT)
    sx, sy = b.node("Add", [sx, "half"], p + "/Add_output_0"), b.node("Add", [sy, "half"], p + "/Add_1_output_0")
    hw = b.node("Concat", [b.node("Unsqueeze", [hh, "ax0"], p + "/Unsq_1"), b.node("Unsqueeze", [ww, "ax0"], p + "/Unsq_2")],
                p + "/Concat_1_output_0", axis=0)
    gy = b.node("Expand", [b.node("Unsqueeze", [sy, "one"], p + "/Unsq_3"), hw], p + "/Expand_output_0")
    gx = b.node("Expand", [b.node("Unsqueeze", [sx, "ax0"], p + "/Unsq_4"), hw], p + "/Expand_1_output_0")
    grid = b.node("Concat", [b.node("Unsqueeze", [gx, "m1"], p + "/Unsq_5"), b.node("Unsqueeze", [gy, "m1"], p + "/Unsq_6")],
                  p + "/Concat_2_output_0", axis=-1)
    area = b.node("Unsqueeze", [b.node("Mul", [hh, ww], p + "/Mul_output_0"), "ax0"], p + "/Unsq_7")
    anchors = b.node("Reshape", [grid, b.node("Concat", [area, "two"], p + "/Concat_3_output_0", axis=0)],
                     p + "/Reshape_1_output_0")
    stride = 4 if p.endswith("L0") else 8
    strides = b.node("ConstantOfShape", [b.node("Concat", [area, "one"], p + "/Concat_4_output_0", axis=0)],
                     p + "/ConstantOfShape_output_0", value=nh.from_array(np.array([stride], np.float32)))
    return flat, anchors, strides


def yolo_model(float_range: bool) -> onnx.ModelProto:
    """images [batch, 3, H, W] -> output0 [batch, 4 + NC, anchors]: three strided convs, an upsample +
    concat, two 1x1 heads, and the anchor decode of an ultralytics head."""
    b = Builder()
    for name, v in [("i0", 0), ("i2", 2), ("i3", 3), ("l0", 0), ("l1", 1)]:
        b.const(name, np.array(v, np.int64))
    for name, v in [("ax0", [0]), ("no", [NO]), ("m1", [-1]), ("two", [2]), ("one", [1]), ("split", [2, 2, NC])]:
        b.const(name, np.array(v, np.int64))
    for name, v in [("f0", 0.0), ("f1", 1.0), ("half", 0.5), ("fdiv", 2.0)]:
        b.const(name, np.array(v, np.float32))
    p2 = b.conv(b.conv("images", 3, 8, "0"), 8, 16, "1")
    p3 = b.conv(p2, 16, 16, "2")
    up = b.node("Resize", [p3, "", b.const("scales", np.array([1, 1, 2, 2], np.float32))], "/model.3/Resize_output_0",
                mode="nearest")
    cat = b.node("Concat", [up, p2], "/model.4/Concat_output_0", axis=1)
    feats = [b.conv(cat, 32, NO, "22.cv0", stride=1, k=1), b.conv(p3, 16, NO, "22.cv1", stride=1, k=1)]
    levels = [_anchors(b, f"/model.22/L{i}", f, float_range) for i, f in enumerate(feats)]
    q = "/model.22/"
    xcat = b.node("Concat", [lv[0] for lv in levels], q + "Concat_output_0", axis=2)
    anc = b.node("Transpose", [b.node("Concat", [lv[1] for lv in levels], q + "Concat_1_output_0", axis=0)],
                 q + "Transpose_output_0", perm=[1, 0])
    strd = b.node("Transpose", [b.node("Concat", [lv[2] for lv in levels], q + "Concat_2_output_0", axis=0)],
                  q + "Transpose_1_output_0", perm=[1, 0])
    lt, rb, cls = (q + f"Split_output_{i}" for i in range(3))
    b.nodes.append(h.make_node("Split", [xcat, "split"], [lt, rb, cls], axis=1))
    x1y1, x2y2 = b.node("Sub", [anc, lt], q + "Sub_output_0"), b.node("Add", [anc, rb], q + "Add_output_0")
    cxy = b.node("Div", [b.node("Add", [x1y1, x2y2], q + "Add_1_output_0"), "fdiv"], q + "Div_output_0")
    wh = b.node("Sub", [x2y2, x1y1], q + "Sub_1_output_0")
    box = b.node("Mul", [b.node("Concat", [cxy, wh], q + "Concat_3_output_0", axis=1), strd], q + "Mul_output_0")
    b.node("Concat", [box, b.node("Sigmoid", [cls], q + "Sigmoid_output_0")], "output0", axis=1)
    g = h.make_graph(b.nodes, "yolo", [h.make_tensor_value_info("images", TP.FLOAT, ["batch", 3, "H", "W"])],
                     [h.make_tensor_value_info("output0", TP.FLOAT, ["batch", NO, "anchors"])], b.inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    return m


def internal_names(text: str) -> list[str]:
    """Tensor paths of an export (``/model.22/...``, ``..._output_0``) in ``text``."""
    return re.findall(r"\S*(?:/model\.|_output_\d)\S*", text)


@pytest.fixture(scope="module", params=[True, False], ids=["float_range", "int_range"])
def yolo(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("yolo") / "yolo.onnx"
    onnx.save(yolo_model(request.param), path)
    return str(path), onnxc.compile(str(path))


def test_outputs_are_formulas_of_the_input_dims_and_match_onnxruntime(yolo):
    path, m = yolo
    assert m.inputs[0].shape == ("batch", 3, "H", "W")
    assert m.outputs[0].shape == ("batch", NO, A_FORMULA)
    assert m.program.dimvars[:3] == ["batch", "H", "W"] and len(m.program.dimvars) == 3
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shape in SIZES:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        got, want = m.run({"images": x})["output0"], sess.run(None, {"images": x})[0]
        assert got.shape == want.shape == (shape[0], NO, 5 * -(-shape[2] // 8) * -(-shape[3] // 8))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_info_shows_no_internal_names_and_no_unsimplified_dims(yolo, capsys):
    path, _ = yolo
    assert main(["info", path]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    outputs = lines[lines.index("outputs:") + 1]
    assert outputs.strip() == f"output0: float[batch, {NO}, {A_FORMULA}]"
    assert next(ln for ln in lines if ln.startswith("dimension variables:")) == "dimension variables: batch, H, W"
    # shapes anywhere (value types in the IR listing, contracts, arena): the IR names values, so drop
    # %value references and quoted node outputs before looking for tensor paths
    shapes = re.sub(r"%\S+?(?=[:,)]|$)|'[^']*'", "", text, flags=re.M)
    assert internal_names(shapes) == []
    for bad in ("floor(", "max(0", "broadcast(", "[0]"):
        assert bad not in shapes, bad
    arena = next(ln for ln in lines if ln.startswith("arena:"))
    assert len(arena) < 400 and "bytes without reuse" in arena
    assert re.search(r"; \d+ bytes at batch, H, W = 1 \(\d+ without reuse\)$", arena), arena


def test_info_arena_at_given_dims_and_unknown_dim(yolo, capsys):
    path, _ = yolo
    main(["info", path, "--dim", "H=640", "--dim", "W=640"])
    arena = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("arena:"))
    at = int(re.search(r"; (\d+) bytes at H=640, W=640, batch = 1", arena).group(1))
    assert at > 640 * 640 * 8 * 4 // 4  # the first conv's output alone: 8 x 320 x 320 floats
    assert main(["info", path, "--dim", "Q=3"]) != 0
    assert "--dim Q: no such dimension variable (batch, H, W)" in capsys.readouterr().err


def test_aot_header_shows_the_formula(yolo, tmp_path):
    path, _ = yolo
    out = onnxc.build(path, tmp_path / "art", name="det", emit_only=True, quiet=True)
    header = (out / "det.h").read_text()
    assert f"output0  float[batch, {NO}, {A_FORMULA}]" in header
    assert internal_names(header) == []


def range_model() -> onnx.ModelProto:
    """y = arange(0, float(len(x)), 0.5) + 1 (a fractional step: a dim decided at run time) and
    z = arange(1, float(len(x)) + 0, 2) (integral: ceil((n - 1) / 2))."""
    nodes = [h.make_node("Shape", ["x"], ["/m/Shape_output_0"]),
             h.make_node("Gather", ["/m/Shape_output_0", "i0"], ["/m/Gather_output_0"], axis=0),
             h.make_node("Cast", ["/m/Gather_output_0"], ["/m/Cast_output_0"], to=TP.FLOAT),
             h.make_node("Range", ["f0", "/m/Cast_output_0", "half"], ["/m/Range_output_0"]),
             h.make_node("Add", ["/m/Range_output_0", "f1"], ["y"]),
             h.make_node("Range", ["f1", "/m/Cast_output_0", "f2"], ["/m/Range_1_output_0"]),
             h.make_node("Mul", ["/m/Range_1_output_0", "f2"], ["z"])]
    inits = [nh.from_array(np.array(0, np.int64), "i0")] + \
        [nh.from_array(np.array(v, np.float32), n) for n, v in [("f0", 0.0), ("f1", 1.0), ("f2", 2.0), ("half", 0.5)]]
    g = h.make_graph(nodes, "r", [h.make_tensor_value_info("x", TP.FLOAT, ["n"])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None), h.make_tensor_value_info("z", TP.FLOAT, None)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_run_time_dims_get_readable_names():
    model = range_model()
    m = onnxc.compile(model)
    assert m.outputs[0].shape == ("range_len0",)
    assert m.outputs[1].shape == ("floor(n / 2)",)  # ceil((n - 1) / 2)
    assert not internal_names(" ".join(m.program.dimvars))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (0, 1, 7, 10):
        x = np.zeros(n, np.float32)
        got, want = m.run({"x": x}), dict(zip(["y", "z"], sess.run(None, {"x": x})))
        for k in ("y", "z"):
            np.testing.assert_array_equal(got[k], want[k])
