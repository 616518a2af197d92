"""``doctor --repair`` leaves no record without its ``create`` history row (issue 18)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.memory_engine import MemoryEngine
from engine.records import MemoryRecord, NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    opened = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock)
    yield opened
    opened.close()


def test_a_record_changed_after_a_lost_create_row_is_reconciled(engine: MemoryEngine) -> None:
    # What a kill -9 between the store write and the ledger write leaves behind ...
    orphan = MemoryRecord.create(NewMemory(content="written without history"), now_ms=1.0)
    engine.store.write([orphan])
    # ... and a re-ingest of the same line afterwards: an exact duplicate from a new source
    # appends provenance, an "update" row, so the record has history but no start.
    again = engine.ingest(NewMemory(content="written without history", source="rerun"))
    assert again.record_id == orphan.id
    assert [e.op for e in engine.edit_history(orphan.id)] == ["update"]
    assert engine.records_without_history() == [orphan.id]
    assert engine.doctor()["ledger"]["records_without_history"] == 1
    assert engine.reconcile_history() == 1
    history = engine.edit_history(orphan.id)  # newest first
    assert [e.op for e in history] == ["create", "update"]
    assert (history[0].actor, history[0].after) == ("reconciled", engine.get(orphan.id))
    assert engine.records_without_history() == []
    assert engine.reconcile_history() == 0
