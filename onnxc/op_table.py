"""The table of supported operators (``onnxc ops``), generated from the registries: shape rules, fold rules,
kernels and expansions."""

from __future__ import annotations

INTERNAL_DOMAIN = "onnxc"  # the ops onnxc's passes write (fused forms), hidden by `onnxc ops` unless --internal


def _versions(v: tuple[int, int]) -> str:
    lo, hi = v
    return f"{lo}+" if hi >= 10**9 else f"{lo}-{hi}"


def _how(kd, key, fold_rules) -> str:
    """How an op with a shape rule is implemented."""
    if kd is not None:
        return "view" if kd.alias else "kernel"
    return "fold-only" if key in fold_rules else "none"


def supported_ops() -> list[dict]:
    """One row per (domain, op) known to any registry, generated from the registries: the opset
    versions of its shape rule (or expansion), the element types its kernel declares (``types=``,
    codegen/kernels/base.py) and how it is implemented (kernel, view, expansion, fold-only)."""
    from onnxc.codegen.kernels.registry import KERNELS
    from onnxc.codegen.kernels.typesets import describe_types, type_names
    from onnxc.passes.expansions import EXPANSIONS
    from onnxc.passes.shapes.registry import FOLD_RULES, SHAPE_RULES

    rows = []
    for key in sorted(set(SHAPE_RULES) | set(FOLD_RULES) | set(KERNELS) | set(EXPANSIONS),
                      key=lambda k: (k[0], k[1].lower())):
        rule, kd = SHAPE_RULES.get(key), KERNELS.get(key)
        row = {"domain": key[0] or "ai.onnx", "op": key[1]}
        if rule is None and kd is None and key in EXPANSIONS:
            vs = [e.versions for e in EXPANSIONS[key]]
            row.update(opsets=_versions((min(v[0] for v in vs), max(v[1] for v in vs))), types="as its expansion",
                       types_text="as its expansion", implementation="expansion", family=None,
                       restricted=False, shape_rule=False, fold=False, compiles=True)
        else:
            declared = kd is not None and kd.types is not None
            bare = "kernel, written only by the passes" if key[0] == INTERNAL_DOMAIN else "kernel, no shape rule"
            how = _how(kd, key, FOLD_RULES) if rule is not None else (bare if kd else "fold rule only")
            row.update(opsets=_versions(rule.versions) if rule else None,
                       types=type_names(kd.types) if declared else None,
                       types_text=describe_types(kd.types) if declared else
                       ("-" if kd is None else "(not declared)"),
                       implementation=how, family=kd.family if kd is not None else None,
                       restricted=kd is not None and kd.accepts is not None,
                       shape_rule=rule is not None, fold=key in FOLD_RULES,
                       compiles=rule is not None and (kd is not None or key in FOLD_RULES))
        rows.append(row)
    return rows
