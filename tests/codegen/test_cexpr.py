"""codegen/cexpr.py: literals, dim expressions and products checked by compiling them into one C
program and comparing what it prints with numpy / ir.dims.evaluate (one compiler run for the module)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from onnxc.codegen.cexpr import as_symbol, c_expr, c_expr_checked, c_literal, c_product, include_line
from onnxc.codegen.compiler import default_cc, runtime_dir
from onnxc.ir import DType
from onnxc.ir.dims import ceildiv, dmax, dmin, evaluate, floordiv, mod, sym

N, M = sym("N"), sym("M")
ENV = {"N": 7, "M": 3}
SYM_C = {"N": "D[0]", "M": "D[1]"}.__getitem__

FLOATS = [0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, 1e-45, 3.4028234663852886e38, 1e300, -2.5e-310, np.inf, -np.inf]
INTS = {
    DType.INT8: [-128, 127, 0], DType.UINT8: [0, 255], DType.INT16: [-32768, 32767],
    DType.UINT16: [65535], DType.INT32: [-(2**31), 2**31 - 1, -7],
    DType.UINT32: [2**32 - 1, 2**31], DType.INT64: [-(2**63), 2**63 - 1, -(2**31) - 1, 2**31, -5],
    DType.UINT64: [2**64 - 1, 2**63, 2**63 - 1, 0],
}
DIMS = [N, 2 * N + 1, N * M - 4, floordiv(N + 5, 4), ceildiv(3 * N, 8), mod(N * M, 5), dmin(N, M + 2),
        dmax(N - 10, 0), 5_000_000_000 * N]
STRING = 'a"b\\c\u00e9'
PRODUCTS = [([], None), (["3", "4"], None), (["0", "D[0]"], None), (["D[0]", "2", "D[1] + 1"], None),
            ([N, 2, M], SYM_C), ([N + 1, "D[1]", 3], SYM_C), ([2, 3], None)]


def _values(dt: DType, vals) -> list[str]:
    """C statements writing each literal into a variable of its storage type and printing its bits."""
    out = []
    for k, v in enumerate(vals):
        lit = c_literal(v, dt)
        out.append(f"{{ {dt.c} v_ = {lit}; unsigned char b_[sizeof v_]; memcpy(b_, &v_, sizeof v_);"
                   f" printf(\"{dt.short} {k} \"); for (size_t i = 0; i < sizeof v_; i++) printf(\"%02x\", b_[i]);"
                   " printf(\"\\n\"); }")
        if dt.is_int and v != -(2**63) and dt.is_signed:  # a negative literal after a minus sign
            out.append(f"printf(\"neg{dt.short} {k} %lld\\n\", (long long)(0 - {lit}));")
    return out


def _program() -> str:
    lines = ["#include <stdio.h>", "#include <string.h>", "#include <math.h>", '#include "onnxc.h"',
             "int main(void) {", f"  const int64_t D[2] = {{{ENV['N']}, {ENV['M']}}}; int ovf_ = 0;"]
    lines += _values(DType.FLOAT, FLOATS) + _values(DType.DOUBLE, FLOATS)
    lines += _values(DType.FLOAT16, [0.1, -2.0, 65504.0, -0.0]) + _values(DType.BFLOAT16, [0.1, -3.0e38, 1.0])
    lines += _values(DType.BOOL, [True, False])
    for dt, vals in INTS.items():
        lines += _values(dt, vals)
    lines += ["{ float f_ = " + c_literal(np.nan, DType.FLOAT) + "; double d_ = " + c_literal(np.nan, DType.DOUBLE)
              + "; printf(\"nan 0 %d %d\\n\", isnan(f_) != 0, isnan(d_) != 0); }",
              "{ double x_ = 2.0 - " + c_literal(-0.5, DType.DOUBLE) + "; printf(\"sub 0 %.17g\\n\", x_); }"]
    for k, d in enumerate(DIMS):
        lines.append(f"printf(\"dim {k} %lld\\n\", (long long)({c_expr(d, SYM_C)}));")
        lines.append(f"{{ ovf_ = 0; long long v_ = {c_expr_checked(d, SYM_C)}; "
                     f"printf(\"checked {k} %lld %d\\n\", v_, ovf_); }}")
    for k, (dims, sc) in enumerate(PRODUCTS):
        lines.append(f"printf(\"prod {k} %lld\\n\", (long long)({c_product(dims, sc)}));")
    lines.append(f"printf(\"str 0 %s\\n\", {c_literal(STRING, DType.STRING)});")
    return "\n".join(lines + ["  return 0;", "}"])


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cexpr")
    (d / "t.c").write_text(_program())
    subprocess.run([default_cc(), "-std=gnu11", "-O1", "-Wall", "-Werror", "-Wno-unused-function", "-I",
                    str(runtime_dir()), str(d / "t.c"), "-o", str(d / "t"), "-lm"], check=True)
    out = subprocess.run([str(d / "t")], check=True, capture_output=True, text=True).stdout
    return {" ".join(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in out.splitlines()}


def _bits(printed: dict, dt: DType, k: int) -> bytes:
    return bytes.fromhex(printed[f"{dt.short} {k}"])


@pytest.mark.parametrize("dt", [DType.FLOAT, DType.DOUBLE])
def test_float_literals_round_trip(printed, dt):
    with np.errstate(over="ignore"):  # 1e300 as float32 is inf, in numpy as in C
        want = [np.array(v, dt.np).tobytes() for v in FLOATS]
    for k, v in enumerate(FLOATS):
        assert _bits(printed, dt, k) == want[k], (dt, v, c_literal(v, dt))
    assert printed["nan 0"] == "1 1"
    assert printed["sub 0"] == "2.5"


def test_half_literals_are_bit_patterns(printed):
    from onnxc.passes.shapes.cast import float_to_bfloat16

    for k, v in enumerate([0.1, -2.0, 65504.0, -0.0]):
        assert _bits(printed, DType.FLOAT16, k) == np.array(v, np.float16).tobytes()
    for k, v in enumerate([0.1, -3.0e38, 1.0]):
        assert _bits(printed, DType.BFLOAT16, k) == float_to_bfloat16(np.array([v], np.float32)).tobytes()
    assert [_bits(printed, DType.BOOL, k) for k in range(2)] == [b"\x01", b"\x00"]


def test_integer_literals_cover_the_whole_range(printed):
    for dt, vals in INTS.items():
        for k, v in enumerate(vals):
            assert _bits(printed, dt, k) == np.array(v, dt.np).tobytes(), (dt, v, c_literal(v, dt))
            if dt.is_signed and v != -(2**63):
                assert printed[f"neg{dt.short} {k}"] == str(-v)
    assert c_literal(2**63, DType.INT64) == "UINT64_C(9223372036854775808)"
    assert c_literal(-(2**63), DType.INT64) == "INT64_MIN"


def test_dims_render_and_evaluate(printed):
    for k, d in enumerate(DIMS):
        want = evaluate(d, ENV)
        assert printed[f"dim {k}"] == str(want), d
        assert printed[f"checked {k}"] == f"{want} 0", d


def test_products(printed):
    want = [1, 12, 0, 7 * 2 * 4, 7 * 2 * 3, 8 * 3 * 3, 6]
    for k, w in enumerate(want):
        assert printed[f"prod {k}"] == str(w)
    assert c_product([]) == "1" and c_product(["3", "4"]) == "12" and c_product(["1", "D[0]"]) == "D[0]"
    assert c_product([N, M, "2"], SYM_C) == "2 * (D[1]*D[0])"
    assert printed["str 0"] == STRING


def test_as_symbol():
    assert as_symbol(N) == "N"
    assert [as_symbol(d) for d in (2 * N, N + 1, N * N, N * M, floordiv(N, 2), 3)] == [None] * 6


def test_errors():
    with pytest.raises(TypeError, match="needs sym_c"):
        c_product([N])
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        c_literal(2**64, DType.UINT64)
    with pytest.raises(NotImplementedError, match="NUL character"):
        c_literal("a\0b", DType.STRING)
    with pytest.raises(NotImplementedError, match="complex64"):
        c_literal(1, DType.COMPLEX64)
    with pytest.raises(ValueError, match="neither a header"):
        include_line('x.h"\n#define')
    assert include_line("<regex.h>") == "#include <regex.h>"
    assert include_line("onnxc_vmath.h") == '#include "onnxc_vmath.h"'
