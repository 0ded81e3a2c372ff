"""Fuzzing: mutated models compile and run in worker processes; each must finish in time with a
result or an ``OnnxcError`` subclass, never a crash, a hang or another exception.

Byte mutations of the serialized seed models (tests/fuzz/corpus.py) and structure mutations made on
their protobuf messages (tests/fuzz/mutations.py) are drawn by hypothesis with a fixed seed. Failures
do not stop the run: every one is saved as a reproducer (tests/fuzz/run.py) and the test fails at the
end listing them. CI runs ``ONNXC_FUZZ_EXAMPLES`` (default 500) examples; a long run:

    ONNXC_FUZZ_EXAMPLES=10000 ONNXC_FUZZ_REPROS=/tmp/repros nice -n 10 \\
        python -m pytest tests/fuzz/test_fuzz.py -p no:cacheprovider -s

Replay a reproducer with ``python -m tests.fuzz.child PATH``.
"""

from __future__ import annotations

import pytest
from google.protobuf.message import EncodeError
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .corpus import BUILDERS, seed_bytes, seed_model
from .mutations import mutate_bytes, mutate_structure
from .run import FuzzRun, examples, seed

pytestmark = pytest.mark.hostile

BYTE_SHARE = 0.4  # of the examples; the rest are structure mutations (they reach further)


def fuzz(run: FuzzRun, n: int, make) -> None:
    """Draw ``n`` examples with ``make(data) -> (bytes, notes)`` and check each in the pool."""

    @hypothesis_seed(seed())
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: st.DataObject) -> None:
        blob, notes = make(data)
        if blob is not None:
            run.submit(blob, notes)

    one()
    run.drain()


def byte_example(data: st.DataObject) -> tuple[bytes, list[str]]:
    name = data.draw(st.sampled_from(sorted(BUILDERS)), label="seed")
    blob, notes = mutate_bytes(data, seed_bytes(name))
    return blob, [f"seed {name}", *notes]


def structure_example(data: st.DataObject) -> tuple[bytes | None, list[str]]:
    name = data.draw(st.sampled_from(sorted(BUILDERS)), label="seed")
    m = seed_model(name)
    notes = mutate_structure(data, m)
    try:
        blob = m.SerializeToString()
    except (ValueError, TypeError, EncodeError):  # not representable
        return None, notes
    return blob, [f"seed {name}", *notes]


def check_run(run: FuzzRun) -> None:
    text = run.report()
    print("\n" + text)
    assert not run.by_signature, f"the fuzz run found failures (reproducers saved):\n{text}"
    assert run.counts["examples"] > 0


@pytest.mark.slow
def test_byte_mutations_give_results_or_onnxc_errors():
    with FuzzRun("bytes") as run:
        fuzz(run, max(1, round(examples() * BYTE_SHARE)), byte_example)
        check_run(run)


@pytest.mark.slow
def test_structure_mutations_give_results_or_onnxc_errors():
    with FuzzRun("structure") as run:
        fuzz(run, max(1, examples() - round(examples() * BYTE_SHARE)), structure_example)
        check_run(run)
        assert run.counts["compiled"] > 0, "no mutated model compiled: the mutations are too destructive"
