"""CLI polish: ``onnxc ops`` names each operator's ONNX domain (checked against onnx's own schemas),
hides onnxc's internal ops unless --internal, filters by --domain; every subcommand has a description."""

from __future__ import annotations

import argparse
import json

import onnx.defs
import pytest

from onnxc.cli import build_parser, main, supported_ops

PUBLIC = {"ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview", "com.microsoft"}
# onnxruntime registers this contrib op in the ONNX domain (kOnnxDomain, version 1), so models carry it with
# domain "": onnxc lists it there too, though onnx itself does not define it
ORT_IN_ONNX_DOMAIN = {"SimplifiedLayerNormalization"}
INTERNAL = {"ElementwiseChain", "FusedAttention", "DepthwisePointwise", "SymValue"}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def table(out: str) -> list[list[str]]:
    """The rows of the ops table (split on runs of 2+ spaces), header first."""
    import re

    lines = out.split("\n\n", 1)[0].splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


def test_ops_shows_domains_and_hides_internal_ops(capsys):
    rc, out, _ = run_cli(capsys, "ops")
    assert rc == 0
    rows = table(out)
    assert rows[0][:2] == ["domain", "op"]
    domains = {r[0] for r in rows[1:]}
    assert {"ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "com.microsoft"} <= domains <= PUBLIC
    ops = {(r[0], r[1]) for r in rows[1:]}
    assert {("ai.onnx", "Conv"), ("ai.onnx.ml", "TreeEnsembleClassifier"), ("com.microsoft", "FusedMatMul"),
            ("ai.onnx.preview.training", "Adam")} <= ops
    assert not {op for _, op in ops} & INTERNAL and "onnxc " not in out
    assert "by domain: ai.onnx " in out and "--internal" in out
    rc, out, _ = run_cli(capsys, "ops", "--internal")
    internal = {r[1] for r in table(out)[1:] if r[0] == "onnxc"}
    assert INTERNAL <= internal
    assert "no shape rule" not in out  # the fused ops say where they come from instead


def test_ops_domains_match_onnx_schemas():
    """Every ai.onnx* row names an op onnx defines in that domain (com.microsoft: onnxruntime's contrib ops,
    not in onnx's registry, so absent from it)."""
    rows = supported_ops()
    for r in rows:
        dom = "" if r["domain"] == "ai.onnx" else r["domain"]
        if r["domain"] == "ai.onnx" and r["op"] in ORT_IN_ONNX_DOMAIN:
            assert not onnx.defs.has(r["op"])
        elif r["domain"].startswith("ai.onnx"):
            assert onnx.defs.has(r["op"], dom), (r["domain"], r["op"])
        elif r["domain"] == "com.microsoft":
            assert not onnx.defs.has(r["op"], "com.microsoft"), r["op"]
        else:
            assert r["domain"] == "onnxc", r
    onnx_ml = {s.name for s in onnx.defs.get_all_schemas() if s.domain == "ai.onnx.ml"}
    ours = {r["op"] for r in rows if r["domain"] == "ai.onnx.ml"}
    assert ours and ours <= onnx_ml


def test_ops_domain_filter_and_json(capsys):
    rc, out, _ = run_cli(capsys, "ops", "--domain", "ai.onnx.ml", "--json")
    rows = json.loads(out)
    assert rc == 0 and rows and {r["domain"] for r in rows} == {"ai.onnx.ml"}
    assert {"LinearClassifier", "TreeEnsembleRegressor"} <= {r["op"] for r in rows}
    rc, out, _ = run_cli(capsys, "ops", "--json")
    assert {r["domain"] for r in json.loads(out)} <= PUBLIC
    rc, out, _ = run_cli(capsys, "ops", "--domain", "com.microsoft")
    assert rc == 0 and {r[0] for r in table(out)[1:]} == {"com.microsoft"}
    rc, _, err = run_cli(capsys, "ops", "--domain", "onnxc")
    assert rc == 1 and "--domain 'onnxc': no operators in that domain" in err and "with --internal" in err
    rc, _, err = run_cli(capsys, "ops", "--domain", "ai.onnx.mlx")
    assert rc == 1 and "ai.onnx.ml, " in err and "com.microsoft" in err
    rc, out, _ = run_cli(capsys, "ops", "--domain", "onnxc", "--internal")
    assert rc == 0 and {r[1] for r in table(out)[1:]} >= INTERNAL


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("cmd", sorted(_subcommands()))
def test_every_subcommand_has_a_description(cmd, capsys):
    sp = _subcommands()[cmd]
    assert sp.description and len(sp.description.split()) >= 8, (cmd, sp.description)
    rc, out, _ = run_cli(capsys, cmd, "--help")
    assert rc == 0
    flat = " ".join(out.split())
    assert " ".join(sp.description.split()[:8]) in flat, (cmd, out[:400])
    for a in sp._actions:  # and every option says what it does
        assert a.help, (cmd, a.option_strings or a.dest)
    rc, out, _ = run_cli(capsys, "--help")
    assert cmd in out  # listed with its one-line help in `onnxc --help`


def test_info_help_documents_html_and_profile(capsys):
    rc, out, _ = run_cli(capsys, "info", "--help")
    flat = " ".join(out.split())
    assert rc == 0 and "--html FILE" in flat and "--profile" in flat and "self-contained" in flat
