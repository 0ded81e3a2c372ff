"""pytest plugin of the conformance suite: per-case results -> conformance_report.json + summary line.

Results are collected from ``pytest_runtest_logreport``:

- without xdist, in the one test process;
- with xdist, in the controller, which receives every worker's reports (and a report for a worker
  that crashed or was killed by the hard time limit). The controller tells its workers so through
  ``pytest_configure_node``;
- with xdist when the controller does not have this plugin (pytest only loads conftest files of the
  paths on the command line, so ``pytest -n 2`` from the repo root misses ``tests/conformance``),
  each worker appends its results to a shard file and, when it finishes, merges all shards of the
  run into the report (the last worker to finish writes the complete report; no summary line then).

The report path is ``$ONNXC_CONFORMANCE_REPORT`` or ``conformance_report.json`` in the rootdir.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import tempfile
import time
import zlib
from pathlib import Path

import pytest

PLUGIN_NAME = "onnxc-conformance"
CONTROLLER_KEY = "onnxc_conformance_controller"
_NODEID = re.compile(r"::test_(node|model)_case\[(.*)\]$")
STATUSES = ("passed", "failed", "xfail", "skipped")


def report_path(config: pytest.Config) -> Path:
    env = os.environ.get("ONNXC_CONFORMANCE_REPORT")
    return Path(env).resolve() if env else Path(config.rootpath) / "conformance_report.json"


def one_line(text: str) -> str:
    """Collapse a multi-line message (e.g. the unsupported-operator list) into one line."""
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _failure_reason(report: pytest.TestReport) -> str:
    lr = report.longrepr
    crash = getattr(lr, "reprcrash", None)
    text = crash.message if crash is not None else str(lr)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "failed")
    if report.when == "???":  # xdist: the worker died while running this case
        first += " (a crash in native code, or the hard per-case time limit; see the hang log " \
                 f"{Path(tempfile.gettempdir()) / 'onnxc-conformance-hang-<pid>.log'})"
    elif report.when in ("setup", "teardown"):
        first = f"in {report.when}: {first}"
    return first


def _suite(kind: str, name: str) -> str:
    if kind == "node":
        return "node"
    from .cases import model_cases

    case = model_cases().get(name)
    return case.suite if case else "?"


def build_report(records: list[dict]) -> dict:
    """The JSON document: summary, the summary line, blocking operators, failures, every case."""
    cases = sorted(records, key=lambda r: (r["kind"], r["name"]))
    summary = {k: {"total": 0, **dict.fromkeys(STATUSES, 0)} for k in ("node", "model")}
    for r in cases:
        s = summary.setdefault(r["kind"], {"total": 0, **dict.fromkeys(STATUSES, 0)})
        s["total"] += 1
        s[r["status"]] = s.get(r["status"], 0) + 1
    blocking = collections.Counter(op for r in cases if r["status"] == "xfail"
                                   for op in r.get("unsupported_ops", ()))
    import onnx

    return {
        "line": summary_line(summary),
        "summary": summary,
        "onnx_version": onnx.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "blocking_ops": dict(blocking.most_common()),
        "failures": [{"name": r["name"], "kind": r["kind"], "suite": r["suite"], "reason": r["reason"]}
                     for r in cases if r["status"] == "failed"],
        "cases": cases,
    }


def summary_line(summary: dict) -> str:
    n, m = summary["node"], summary["model"]
    return f"conformance: {n['passed']}/{n['total']} node, {m['passed']}/{m['total']} model"


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def _remove_stale(root: Path, keep: Path, age: float = 86400.0) -> None:
    """Delete shard directories of runs older than ``age`` seconds."""
    now = time.time()
    for d in root.iterdir():
        try:
            if d != keep and now - d.stat().st_mtime > age:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


class ConformanceReporter:
    """Collects one record per conformance case and writes the report at the end of the session."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.path = report_path(config)
        self.records: dict[str, dict] = {}
        winput = getattr(config, "workerinput", None)
        self.worker = winput is not None
        self.collect = not self.worker or not winput.get(CONTROLLER_KEY, False)
        self.shard = None
        if self.worker and self.collect:
            root = Path(tempfile.gettempdir()) / "onnxc-conformance-shards"
            run_dir = root / winput["testrunuid"]
            run_dir.mkdir(parents=True, exist_ok=True)
            _remove_stale(root, keep=run_dir)
            self.shard = run_dir / f"{winput['workerid']}.jsonl"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist controller: workers need not record, the controller receives all reports."""
        node.workerinput[CONTROLLER_KEY] = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.collect:
            return
        m = _NODEID.search(report.nodeid)
        if m is None:
            return
        kind, name = m.group(1), m.group(2)
        rec = self.records.get(report.nodeid)
        if rec is None:
            rec = self.records[report.nodeid] = {"name": name, "kind": kind, "suite": _suite(kind, name),
                                                 "status": "passed", "reason": "", "seconds": 0.0}
        rec["seconds"] = round(rec["seconds"] + (report.duration or 0.0), 4)
        props = dict(report.user_properties or ())
        if "unsupported_ops" in props:
            rec["unsupported_ops"] = list(props["unsupported_ops"])
        if report.failed and rec["status"] != "failed":
            rec["status"], rec["reason"] = "failed", _failure_reason(report)
        elif report.skipped and hasattr(report, "wasxfail"):
            rec["status"], rec["reason"] = "xfail", one_line(report.wasxfail)
        elif report.skipped and rec["status"] == "passed":
            lr = report.longrepr
            rec["status"] = "skipped"
            rec["reason"] = one_line(lr[2] if isinstance(lr, tuple) else lr)
        if self.shard is not None and report.when == "teardown":
            with open(self.shard, "a") as f:
                f.write(json.dumps(rec) + "\n")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.collect:
            return
        if self.shard is not None:
            self._merge_shards()
        elif self.records:
            write_json(self.path, build_report(list(self.records.values())))

    def _merge_shards(self) -> None:
        import fcntl

        run_dir = self.shard.parent
        with open(run_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records: dict[tuple, dict] = {}
            for part in sorted(run_dir.glob("*.jsonl")):
                for line in part.read_text().splitlines():
                    if line.strip():
                        r = json.loads(line)
                        records[(r["kind"], r["name"])] = r
            if records:
                write_json(self.path, build_report(list(records.values())))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.worker or not self.records:
            return
        doc = build_report(list(self.records.values()))
        s = doc["summary"]
        tr = terminalreporter
        tr.write_sep("-", "onnx conformance")
        tr.write_line(doc["line"])
        tr.write_line("  " + "; ".join(f"{k}: {s[k]['xfail']} xfail (unsupported), {s[k]['failed']} failed"
                                       + (f", {s[k]['skipped']} skipped" if s[k]["skipped"] else "")
                                       for k in ("node", "model")))
        if doc["blocking_ops"]:
            top = list(doc["blocking_ops"].items())[:10]
            tr.write_line("  most blocking unsupported ops: " + ", ".join(f"{op} ({n})" for op, n in top))
        tr.write_line(f"  report: {self.path}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--conformance-sample", type=int, default=0, metavar="N",
                     help="run one conformance case in N (chosen by a stable hash of its name; no light "
                          "models): the bounded slice of python -m tests.sanitize --slice")


def in_sample(nodeid: str, n: int) -> bool:
    """Whether the conformance case of ``nodeid`` is in the 1-in-``n`` sample (other tests always are)."""
    m = _NODEID.search(nodeid)
    if m is None or n <= 1:
        return True
    kind, name = m.group(1), m.group(2)
    return (kind == "node" or _suite(kind, name) != "light") and zlib.crc32(name.encode()) % n == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    n = config.getoption("--conformance-sample", 0)
    if n > 1:
        keep = [it for it in items if in_sample(it.nodeid, n)]
        config.hook.pytest_deselected(items=[it for it in items if not in_sample(it.nodeid, n)])
        items[:] = keep


def ensure_registered(config: pytest.Config) -> None:
    """Register the one reporter of this process (idempotent: conftest and -p/pytest_plugins)."""
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
        config.pluginmanager.register(ConformanceReporter(config), PLUGIN_NAME)


def pytest_configure(config: pytest.Config) -> None:
    ensure_registered(config)
