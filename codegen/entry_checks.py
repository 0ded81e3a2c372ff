"""The C of the run function's entry checks and run-time sizes (runtime_c/onnxc_check.h).

Every descriptor a caller hands to ``<prefix>_run``/``_run_into`` is checked before any kernel runs:
a tensor input's dtype, rank, dims (sign, ONNXC_MAX_DIM, element count, byte size) and data
pointer (``onnxc_check_input``), then its static dims and the dimension variables it binds; a value
input's whole tree against its type (``onnxc_check_value``); the caller's output buffers of
``run_into`` (``onnxc_check_into``). Sizes computed from run-time dims are rendered with checked
arithmetic (``cexpr.c_expr_checked``) and go through ``onnxc_check_size``: an error naming the tensor, never a
wrapped size.
"""

from __future__ import annotations

from onnxc.ir import CompileError, MapType, OptionalType, SequenceType, TensorType

from .cexpr import as_symbol, c_expr_checked
from .templating import c_string

_STATIC_ELEMENTS = 2**58  # static sizes up to this many elements are constants (times 16 bytes: below 2^62)
# runtime_c/onnxc_check.h enum onnxc_vtype
VT_TENSOR, VT_SEQUENCE, VT_MAP, VT_OPTIONAL = 1, 2, 3, 4


def value_type_code(t) -> list[int]:
    """The prefix code of a value type that ``onnxc_check_value`` walks."""
    if isinstance(t, TensorType):
        return [VT_TENSOR, int(t.dtype)]
    if isinstance(t, SequenceType):
        return [VT_SEQUENCE, *value_type_code(t.elem)]
    if isinstance(t, OptionalType):
        return [VT_OPTIONAL, *value_type_code(t.elem)]
    if isinstance(t, MapType) and isinstance(t.value, TensorType):
        return [VT_MAP, int(t.key), int(t.value.dtype)]
    raise CompileError(f"values of type {t} cannot be graph inputs")


def checked_dims(p, shape: tuple) -> list[str]:
    """C of each dim of ``shape``, products and sums overflow-checked into ``ovf_``."""
    return [c_expr_checked(d, p.sym_c) for d in shape]


def size_check(p, what: str, ctype: str, shape: tuple, out: str, fail: str) -> list[str]:
    """C statements setting the ``size_t`` lvalue ``out`` to the bytes of a ``ctype`` buffer of
    ``shape``: a constant when static, else the checked dims through ``onnxc_check_size``, whose
    error (naming ``what``) runs ``fail`` (e.g. ``return st;``)."""
    if all(isinstance(d, int) for d in shape):
        n = 1
        for d in shape:
            n *= d
        if 0 <= n <= _STATIC_ELEMENTS:
            return [f"{out} = (size_t){n}u * sizeof({ctype});"]
    dims = checked_dims(p, shape)
    return [f"{{ ovf_ = 0; const int64_t d_[{len(dims)}] = {{{', '.join(dims)}}};",
            f"  if ((st = onnxc_check_size(rt, {c_string(what)}, ovf_, sizeof({ctype}), {len(dims)}, d_, &{out}))) "
            f"{fail} }}"]


def describe(name: str, shape: tuple) -> str:
    return f"{name} [{', '.join(str(d) for d in shape)}]"


def value_types(p, prefix: str) -> list[str]:
    """Static arrays holding the type codes of the value inputs."""
    return [f"static const int32_t {prefix}_vtype{i}[] = {{{', '.join(map(str, value_type_code(b.vtype)))}}};"
            for i, (_name, b) in enumerate(p.inputs) if b.is_value]


def input_checks(p, prefix: str) -> list[str]:
    """The body of ``<prefix>_bind``: each input checked, the dimension variables bound from the first
    input axis carrying them and compared on the others, then the dims that are expressions."""
    lines: list[str] = []
    late: list[str] = []
    names, dimnames = f"{prefix}_input_names", f"{prefix}_dim_names"
    if p.inputs:
        lines.append("    if (!in) return onnxc_fail(rt, ONNXC_ERR_INPUT, \"the inputs array is NULL\");")
    for i, (_name, b) in enumerate(p.inputs):
        if b.is_value:
            lines.append(f"    if ((st = onnxc_check_value(rt, {names}[{i}], &in[{i}], {prefix}_vtype{i}))) return st;")
            continue
        lines.append(f"    if ((st = onnxc_check_input(rt, {names}[{i}], &in[{i}], {int(b.dtype)}, {len(b.shape)}, "
                     f"sizeof({b.dtype.c})))) return st;")
        for k, d in enumerate(b.shape):
            got = f"in[{i}].dims[{k}]"
            if isinstance(d, int):
                lines.append(f"    if ({got} != {d}) return onnxc_fail(rt, ONNXC_ERR_INPUT, \"input '%s' axis "
                             f"%d: expected %lld, got %lld\", {names}[{i}], {k}, (long long){d}, "
                             f"(long long){got});")
                continue
            s = as_symbol(d)
            if s is not None:
                j = p.dimvars.index(s)
                code = 1 + i * 16 + k
                lines.append(
                    f"    if (!bound[{j}]) {{ D[{j}] = {got}; bound[{j}] = {code}; }}\n"
                    f"    else if (D[{j}] != {got}) return onnxc_fail(rt, ONNXC_ERR_INPUT, \"input '%s' axis %d:"
                    f" dimension '%s' is %lld (from input '%s' axis %d) but got %lld\", {names}[{i}], {k}, "
                    f"{dimnames}[{j}], (long long)D[{j}], {names}[(bound[{j}] - 1) / 16], "
                    f"(bound[{j}] - 1) % 16, (long long){got});")
            else:  # after every variable is bound; the expression overflow-checked
                late.append(
                    f"    {{ ovf_ = 0; const int64_t e_ = {c_expr_checked(d, p.sym_c)};\n"
                    f"      if (ovf_ || {got} != e_) return onnxc_fail(rt, ONNXC_ERR_INPUT, \"input '%s' axis "
                    f"%d: expected %s = %lld%s, got %lld\", {names}[{i}], {k}, {c_string(str(d))}, (long long)e_, "
                    f"ovf_ ? \" (overflows int64)\" : \"\", (long long){got}); }}")
    return lines + late
