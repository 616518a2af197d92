"""Engine parts built once (issue 22): one write lock and one edit history per store, shared by
every service; services built on first use exactly once; the edit history in its own module."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.errors import ValidationError
from engine.history import EditHistory
from engine.ledger import Ledger
from engine.memory_engine import MemoryEngine
from engine.parts import Lazy
from engine.records import MemoryRecord, NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock)
    yield eng
    eng.close()


def test_lazy_builds_once_while_another_thread_waits() -> None:
    slot: Lazy[object] = Lazy()
    entered, release = threading.Event(), threading.Event()
    built: list[object] = []

    def slow_build() -> object:
        entered.set()
        assert release.wait(30)
        value = object()
        built.append(value)
        return value

    results: list[object] = []
    first = threading.Thread(target=lambda: results.append(slot.get(slow_build)))
    first.start()
    assert entered.wait(30)  # the first build is under way
    second = threading.Thread(target=lambda: results.append(slot.get(slow_build)))
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert len(built) == 1 and results == [built[0], built[0]]
    assert slot.peek() is built[0]
    assert slot.reset() is built[0] and slot.peek() is None
    assert slot.get(object) is not built[0]  # rebuilt after a reset


def test_services_share_the_engines_parts(engine: MemoryEngine) -> None:
    parts = engine.parts
    pipeline = engine._ingest_pipeline()
    layers = engine.layers
    lifecycle = engine._retrieval_runtime().lifecycle
    assert engine._ingest_pipeline() is pipeline and engine.layers is layers
    assert layers._ctx.write_lock is parts.write_lock
    assert lifecycle._parts is parts
    assert (parts.store, parts.ledger, parts.events, parts.clock) == (
        engine.store, engine.ledger, engine.events, engine.clock)


def test_a_new_ingest_policy_rebuilds_the_pipeline_once(engine: MemoryEngine) -> None:
    before = engine._ingest_pipeline()
    policy = engine.ingest_policy
    engine.set_ingest_policy(policy)
    after = engine._ingest_pipeline()
    assert after is not before and after.policy is policy
    assert engine._ingest_pipeline() is after


def test_every_writer_goes_to_the_one_edit_history(engine: MemoryEngine) -> None:
    added = engine.add(NewMemory(content="the kettle is in the cupboard", agent_id="a"))
    ingested = engine.ingest(NewMemory(content="Ana likes hiking on Sundays", agent_id="a"))
    assert ingested.record is not None
    engine.delete([added.id])
    history = engine.parts.history
    assert [e.op for e in history.entries(added.id)] == ["delete", "create"]
    assert [e.op for e in history.entries(ingested.record.id)] == ["create"]
    assert history.created_ids() == {added.id, ingested.record.id}
    assert engine.edit_history(added.id) == history.entries(added.id)


def test_edit_history_refuses_an_empty_pair_and_writes_nothing(
        tmp_path: Path, clock: DeterministicClock) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    try:
        history = EditHistory(ledger, clock)
        record = MemoryRecord.create(NewMemory(content="kept"), now_ms=clock.now())
        with pytest.raises(ValidationError, match="edit"):
            history.record("update", [(None, record), (None, None)], actor="user")
        assert history.entries() == []
        batch = history.record("create", [(None, record)], actor="user", batch_id="b1")
        assert batch == "b1"
        [entry] = history.entries(batch_id="b1")
        assert (entry.op, entry.record_id, entry.before, entry.after) == (
            "create", record.id, None, record)
    finally:
        ledger.close()


def test_a_ledger_without_the_table_has_no_history(tmp_path: Path,
                                                   clock: DeterministicClock) -> None:
    Ledger(tmp_path / "ledger.sqlite3").close()  # the file exists, without the edits table
    ledger = Ledger(tmp_path / "ledger.sqlite3", read_only=True)
    try:
        history = EditHistory(ledger, clock)
        assert not history.kept
        assert history.entries() == [] and history.created_ids() == set()
    finally:
        ledger.close()
