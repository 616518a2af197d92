"""kill -9 during an ingest (small in-suite version; scripts/reliability runs the long one)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.reliability.kill_trials import run_trial

TRIALS = 2
RECORDS = 1000


@pytest.mark.slow
def test_sigkill_during_ingest_loses_no_acknowledged_record(tmp_path: Path) -> None:
    rng = random.Random(20261122)  # seeded: the kill moments are reproducible
    results = [run_trial(tmp_path / f"trial{i}", RECORDS, rng, batch=128) for i in range(TRIALS)]
    for i, result in enumerate(results):
        print(f"trial {i}: {result}")
        assert result.ok, f"trial {i}: {result}"
        assert result.rerun_count == RECORDS
        assert result.stored_after_kill >= result.acked
    # the kills landed mid-ingest, not before the first record or after the last
    assert all(r.acked < RECORDS for r in results), results
