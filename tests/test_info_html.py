"""``onnxc info --html``: the page is well-formed, self-contained and shows every step (with its fused
members and shapes), the arena and, with --profile, the time per step; headless Chromium renders it."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxc.cli import main
from onnxc.frontend import load_model
from onnxc.passes.pipeline import optimize

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "source", "wbr", "area", "base", "embed", "track"}
SVG_LEAVES = {"rect", "path", "line", "circle"}  # may be written self-closing inside <svg>


def save_model(path: Path) -> str:
    """Depthwise 3x3 -> Relu -> pointwise 1x1 (a DepthwisePointwise pair), a 3x3 Conv + Relu (an epilogue),
    Tanh * 2 + 0.5 (an ElementwiseChain), and scaled dot-product attention (FusedAttention); batch N."""
    rng = np.random.default_rng(0)
    c = 8
    init = [numpy_helper.from_array(a.astype(np.float32), name) for name, a in [
        ("wdw", rng.standard_normal((c, 1, 3, 3))), ("wpw", rng.standard_normal((c, c, 1, 1))),
        ("w3", rng.standard_normal((4, c, 3, 3))), ("b3", rng.standard_normal(4)),
        ("two", np.array(2.0)), ("half", np.array(0.5)), ("scale", np.array(4.0))]]
    nodes = [
        helper.make_node("Conv", ["x", "wdw"], ["dw"], group=c, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["dw"], ["dwr"]),
        helper.make_node("Conv", ["dwr", "wpw"], ["pw"]),
        helper.make_node("Conv", ["pw", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["c3r"]),
        helper.make_node("Tanh", ["c3r"], ["t"]), helper.make_node("Mul", ["t", "two"], ["t2"]),
        helper.make_node("Add", ["t2", "half"], ["y"]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "scale"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["att"]),
    ]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 64, 64]),
           helper.make_tensor_value_info("q", TensorProto.FLOAT, ["N", 2, 16, 8]),
           helper.make_tensor_value_info("kt", TensorProto.FLOAT, ["N", 2, 8, 16]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, ["N", 2, 16, 8])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("att", TensorProto.FLOAT, None)]
    g = helper.make_graph(nodes, "fused_zoo", ins, outs, init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


class Page(HTMLParser):
    """Checks nesting while collecting text, tags, attribute URLs and the ids of the sections."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)
        self.in_script = tag in ("script", "style")

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID and tag not in SVG_LEAVES:
            self.errors.append(f"self-closed <{tag}/>")

    def handle_endtag(self, tag):
        self.in_script = False
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if not self.in_script:
            self.text.append(data)


def parse(path: Path) -> tuple[Page, str, str]:
    src = path.read_text(encoding="utf-8")
    p = Page()
    p.feed(src)
    p.close()
    assert not p.errors, p.errors[:5]
    assert p.stack == [], f"unclosed: {p.stack}"
    return p, " ".join(" ".join(p.text).split()), src


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The model, its optimized IR, and the pages written without and with --profile (one profiling compile)."""
    d = tmp_path_factory.mktemp("html")
    model = save_model(d / "zoo.onnx")
    plain, prof = d / "plain.html", d / "prof.html"
    assert main(["info", model, "--html", str(plain)]) == 0
    assert main(["info", model, "--html", str(prof), "--profile", "--dim", "N=2", "--runs", "3"]) == 0
    return model, optimize(load_model(model)), plain, prof


def test_page_lists_every_step_with_shapes_and_fused_groups(pages, capsys):
    model, m, plain, _ = pages
    page, text, src = parse(plain)
    ops = [n.op_type for n in m.graph.nodes]
    assert {"DepthwisePointwise", "Conv", "ElementwiseChain", "FusedAttention"} <= set(ops), ops
    steps = [a for t, a in page.tags if t == "details" and "step" in a.get("class", "")]
    assert [int(a["data-k"]) for a in steps] == list(range(len(ops)))
    for n in m.graph.nodes:  # each step's op and the formula of each output shape
        assert (n.domain + "::" if n.domain else "") + n.op_type in text
        for o in n.outputs:
            assert str(o.type) in text, o.type
    assert "float[N, 2, 16, 8]" in text and "float[N, 4, 64, 64]" in text
    for label in ("fused epilogue", "elementwise chain", "depthwise+pointwise", "fused attention"):
        assert label in text
    assert "activation Relu" in text  # the Conv's epilogue and the depthwise half of the pair
    assert re.search(r"3 elementwise ops in one loop: (Add|Mul|Tanh)", text)
    assert "MatMul(Q, Kt) -> / 4 -> Softmax(axis=-1) -> MatMul(., V)" in text
    assert "ms/run" not in text and 'id="profile"' not in src  # no timing without --profile


def test_page_arena_section_and_self_contained(pages):
    _, _, plain, prof = pages
    for path in (plain, prof):
        page, text, src = parse(path)
        ids = {a.get("id") for _, a in page.tags}
        assert {"summary", "steps", "arena"} <= ids
        assert "Arena (memory plan)" in text and "without reuse" in text.lower()
        assert any(t == "svg" for t, _ in page.tags)  # the buffer lifetime chart
        urls = [v for _, a in page.tags for k, v in a.items() if k in ("src", "href", "action") and v]
        assert all(u.startswith("#") for u in urls), urls
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", src.replace("http://www.w3.org/2000/svg", ""))
        assert not any(t in ("link", "img", "iframe") for t, _ in page.tags)
    _, text, _ = parse(plain)
    assert "Sizes are symbolic" in text and "N" in text  # arena bytes as a formula of the batch dim
    _, text, _ = parse(prof)
    assert re.search(r"Arena: \d+ bytes at N=2", text)


def test_profile_times_every_kernel(pages, capsys):
    _, m, _, prof = pages
    page, text, src = parse(prof)
    assert 'id="profile"' in src and "Time per operator" in text
    assert "3 timed run(s)" in text
    times = [float(a["data-t"]) for t, a in page.tags if t == "details" and "step" in a.get("class", "")]
    assert len(times) == len(m.graph.nodes) and all(t > 0 for t in times), times
    assert len(re.findall(r"\d+\.\d+ (?:ms|µs)", text)) >= len(times)


def test_info_html_errors(tmp_path, capsys):
    model = save_model(tmp_path / "zoo.onnx")
    rc = main(["info", model, "--html", str(tmp_path / "x.html"), "--dim", "B=2"])
    err = capsys.readouterr().err
    assert rc == 1 and "--dim B: no such dimension variable (N)" in err
    rc = main(["info", model, "--profile"])  # N unbound: random inputs cannot be made
    err = capsys.readouterr().err
    assert rc == 1 and "symbolic dim 'N'" in err and "--dim N=SIZE" in err
    assert not (tmp_path / "x.html").exists()


def png_variance(path: Path) -> float:
    """Variance of the gray levels of an 8-bit RGB/RGBA PNG, decoded with zlib (filters undone)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    px = np.frombuffer(b"".join(rows), np.uint8).reshape(h, w, bpp)[..., :3].astype(np.float64)
    return float(px.mean(axis=2).var())


@pytest.mark.slow
def test_chromium_renders_the_page(pages, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; CI installs Debian's chromium package")
        pytest.skip("chromium is not installed")
    _, _, _, prof = pages
    shot = tmp_path / "shot.png"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,900",
           prof.resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists(), (r.returncode, r.stderr[-2000:])
    assert png_variance(shot) > 100.0
