"""Run pytest with every compiled model and runtime object under AddressSanitizer and UBSan.

    python -m tests.sanitize [--sanitize=address,undefined] [--slice] [pytest args...]

``ONNXC_SANITIZE`` makes onnxc compile and link all C with ``-fsanitize=...`` (codegen/compiler.py,
``sanitize_flags``; the flags are part of every cache key, so sanitized libraries are cached apart). An
ASan-instrumented library can only be loaded into a process whose first library is the ASan runtime:
this runner starts pytest in a child process with ``LD_PRELOAD`` set to it and with

- ``ASAN_OPTIONS``: ``detect_leaks=0`` (the interpreter keeps memory until exit by design),
  ``allocator_may_return_null=1`` (a huge request fails as malloc does, and onnxc must report it),
  reports written to files in a fresh folder (``log_path``);
- ``UBSAN_OPTIONS``: stack traces (undefined behaviour aborts the process: the libraries are built
  with ``-fno-sanitize-recover=undefined``).

With both runtimes loaded, UBSan writes its reports to stderr whatever ``log_path`` says, so pytest
runs with ``--capture=sys`` (Python output is still captured, native writes to fd 2 pass) and its
output is scanned for sanitizer reports while it is echoed. The run fails when pytest fails or when
any sanitizer report was seen (report files are printed). Child processes (fuzz workers, C test
programs) inherit the environment: their ASan reports land in the folder too.

``--slice`` runs the bounded CI slice instead of the given tests (more pytest args may follow): every
test marked ``hostile`` (malformed and hostile inputs, the fuzz test with a few examples) and a stable
sample of the conformance suite (``--conformance-sample``, tests/conformance/plugin.py), with 2 xdist
workers and a compile cache of its own under the system temp folder (kept between runs; ``--cold``
empties it first).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLICE_SAMPLE = 12       # one conformance case in this many (a stable hash of the name)
SLICE_FUZZ_EXAMPLES = 60
ROOT = Path(__file__).resolve().parent.parent
REPORT_LINE = re.compile(r"ERROR: \w+Sanitizer|: runtime error: |^SUMMARY: \w+Sanitizer", re.M)


def asan_runtime(cc: str) -> str:
    """Path of the compiler's shared ASan runtime (for LD_PRELOAD)."""
    r = subprocess.run([*shlex.split(cc), "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = r.stdout.strip()
    if r.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        sys.exit(f"tests.sanitize: {cc} has no shared ASan runtime (libasan.so); install it (e.g. libasan8)")
    return os.path.realpath(path)


def sanitizer_env(sanitizers: str, log_dir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process that loads libraries built with ``ONNXC_SANITIZE=sanitizers``."""
    from onnxc.codegen.compiler import default_cc

    env = dict(os.environ if env is None else env)
    env["ONNXC_SANITIZE"] = sanitizers
    if "address" in sanitizers.split(","):
        pre = env.get("LD_PRELOAD", "")
        lib = asan_runtime(env.get("CC") or default_cc())
        if lib not in pre.split():
            env["LD_PRELOAD"] = f"{lib} {pre}".strip()
    env["ASAN_OPTIONS"] = f"detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:log_path={log_dir / 'asan'}"
    # (UBSan ignores its log_path when ASan is loaded too, but ASan's reports then need it set alike)
    env["UBSAN_OPTIONS"] = f"print_stacktrace=1:halt_on_error=1:log_path={log_dir / 'asan'}"
    return env


def reports(log_dir: Path) -> list[Path]:
    """The sanitizer report files written so far (``asan.<pid>``) that report an error (not only a
    warning, such as a failed huge allocation, which ``allocator_may_return_null`` turns into NULL)."""
    return sorted(p for p in log_dir.iterdir()
                  if p.name.startswith("asan.") and REPORT_LINE.search(p.read_text(errors="replace")))


def run_scanned(cmd: list[str], env: dict[str, str]) -> tuple[int, int]:
    """Run ``cmd`` echoing its output; (exit status, lines that look like a sanitizer report)."""
    seen = 0
    with subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as p:
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace")
            sys.stdout.write(line)
            sys.stdout.flush()
            seen += bool(REPORT_LINE.search(line))
    return p.returncode, seen


def slice_args() -> list[str]:
    return ["-n", "2", "-q", "-p", "no:cacheprovider", "-m", "hostile or conformance",
            f"--conformance-sample={SLICE_SAMPLE}", str(ROOT / "tests")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sanitize", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanitize", default=os.environ.get("ONNXC_SANITIZE") or "address,undefined",
                    help="sanitizers (a comma list for -fsanitize=; default: address,undefined)")
    ap.add_argument("--slice", action="store_true", help="run the CI slice (hostile tests + a conformance sample)")
    ap.add_argument("--cold", action="store_true", help="with --slice: empty the slice's compile cache first")
    args, rest = ap.parse_known_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="onnxc-sanitize-"))
    env = sanitizer_env(args.sanitize, log_dir)
    pytest_args = rest
    if args.slice:
        cache = Path(tempfile.gettempdir()) / "onnxc-sanitize-cache"
        if args.cold:
            shutil.rmtree(cache, ignore_errors=True)
        env["ONNXC_CACHE_DIR"] = str(cache)
        env.setdefault("ONNXC_FUZZ_EXAMPLES", str(SLICE_FUZZ_EXAMPLES))
        env.setdefault("ONNXC_CONFORMANCE_REPORT", str(Path(tempfile.gettempdir()) / "onnxc-sanitize-conformance.json"))
        pytest_args = [*slice_args(), *rest]
    if not any(a == "-s" or a.startswith("--capture") for a in pytest_args):
        pytest_args = ["--capture=sys", *pytest_args]
    cmd = [sys.executable, "-m", "pytest", *pytest_args]
    print(f"tests.sanitize: ONNXC_SANITIZE={args.sanitize} LD_PRELOAD={env.get('LD_PRELOAD', '')} "
          f"reports -> {log_dir}\n  {shlex.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc, seen = run_scanned(cmd, env)
    found = reports(log_dir)
    for p in found:
        print(f"\n===== sanitizer report {p} =====\n{p.read_text(errors='replace')[-20000:]}", flush=True)
    print(f"tests.sanitize: pytest exit status {rc}, {len(found)} sanitizer report file(s), {seen} report "
          f"line(s) in the output, {time.perf_counter() - t0:.0f} s", flush=True)
    if not found:
        shutil.rmtree(log_dir, ignore_errors=True)
    return rc or (1 if found or seen else 0)


if __name__ == "__main__":
    sys.exit(main())
