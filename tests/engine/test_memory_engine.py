from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.clock import DeterministicClock
from engine.errors import RecordNotFound, StoreReadOnly, ValidationError
from engine.events import EventFilter
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.records import Layer, NewMemory, Privacy
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock)
    yield eng
    eng.close()


def test_add_embeds_and_audits(engine: MemoryEngine) -> None:
    record = engine.add(NewMemory(content="Alice likes green tea", agent_id="alice"))
    assert record.embedding_model == "hashing-test"
    assert engine.store.view.vector(record.id) is not None
    assert engine.get(record.id) == record
    kinds = [e.kind for e in engine.events.query(EventFilter(record_id=record.id))]
    assert kinds == ["memory:record:created"]
    assert [e.op for e in engine.edit_history(record.id)] == ["create"]


def test_model_not_ready_stores_pending_then_embeds(engine: MemoryEngine,
                                                    fake_embedder: HashingEmbedder) -> None:
    fake_embedder.set_ready(False)
    record = engine.add(NewMemory(content="Bob drinks coffee"))
    assert record.embedding_model == "" and engine.stats().pending_embeddings == 1
    fallback = engine.events.query(EventFilter(kinds=["embedding-fallback"]))
    assert fallback and fallback[0].decision_reason == "loading"
    fake_embedder.set_ready(True)
    assert engine.embed_pending() == 1
    assert engine.stats().pending_embeddings == 0
    assert engine.get(record.id).embedding_model == "hashing-test"


def test_update_validates_writes_nothing_on_error_and_reembeds(engine: MemoryEngine) -> None:
    record = engine.add(NewMemory(content="standup at 3pm", agent_id="team"))
    before_vector = engine.store.view.vector(record.id)
    with pytest.raises(ValidationError, match="importance"):
        engine.update(record.id, {"importance": 3})
    with pytest.raises(ValidationError, match="content_hash: not editable"):
        engine.update(record.id, {"content_hash": "x"})
    with pytest.raises(ValidationError, match="layer: must be one of"):
        engine.update(record.id, {"layer": "dreams"})
    assert engine.get(record.id) == record
    updated = engine.update(record.id, {"content": "standup at 4pm", "layer": "EPISODIC",
                                        "tags": ["work"], "expires_at": "2026-02-01T00:00:00Z"})
    assert updated.version == 2 and updated.layer is Layer.EPISODIC and updated.tags == ("work",)
    assert updated.content_hash != record.content_hash
    after_vector = engine.store.view.vector(record.id)
    assert before_vector is not None and after_vector is not None
    assert not np.allclose(before_vector, after_vector)
    history = engine.edit_history(record.id)
    assert [e.op for e in history] == ["update", "create"]
    assert history[0].before == record and history[0].after == updated


def test_delete_and_restore_round_trip(engine: MemoryEngine) -> None:
    kept = engine.add(NewMemory(content="keep me"))
    gone = engine.add(NewMemory(content="delete me"))
    with pytest.raises(RecordNotFound):
        engine.delete([gone.id, "missing"])
    assert engine.count() == 2
    deleted = engine.delete([gone.id])
    assert engine.count() == 1 and deleted == [gone]
    engine.restore(deleted)
    assert engine.count() == 2 and engine.get(gone.id) == gone
    assert engine.get(kept.id) == kept
    ops = [e.kind for e in engine.events.query(EventFilter(record_id=gone.id))]
    assert ops == ["memory:record:created", "memory:record:deleted", "memory:record:restored"]


def test_list_filters_sorts_and_pages(engine: MemoryEngine, clock: DeterministicClock) -> None:
    for i in range(25):
        clock.advance(1000)
        engine.add(NewMemory(content=f"note {i} about {'tea' if i % 2 else 'coffee'}",
                             agent_id="a" if i < 20 else "b", importance=i / 25,
                             layer=Layer.EPISODIC if i % 5 == 0 else Layer.SEMANTIC,
                             privacy=Privacy.PUBLIC if i % 3 == 0 else Privacy.PRIVATE,
                             tags=("even",) if i % 2 == 0 else ()))
    page = engine.list_records(RecordQuery(limit=10))
    assert page.total == 25 and len(page.records) == 10
    assert page.records[0].content.startswith("note 24")  # newest first
    assert engine.list_records(RecordQuery(offset=20, limit=10)).records[-1].content \
        .startswith("note 0 ")
    assert engine.list_records(RecordQuery(agent_id="b")).total == 5
    assert engine.list_records(RecordQuery(agent_id="nobody")).total == 0
    assert engine.list_records(RecordQuery(layer=Layer.EPISODIC)).total == 5
    assert engine.list_records(RecordQuery(privacy=Privacy.PUBLIC)).total == 9
    assert engine.list_records(RecordQuery(tags=("even",))).total == 13
    assert engine.list_records(RecordQuery(text="TEA")).total == 12
    by_importance = engine.list_records(RecordQuery(sort_by=SortKey.IMPORTANCE, descending=False,
                                                    importance_min=0.5, limit=100))
    values = [r.importance for r in by_importance.records]
    assert values == sorted(values) and min(values) >= 0.5
    decayed = engine.list_records(RecordQuery(sort_by=SortKey.DECAYED_IMPORTANCE, limit=3))
    assert list(decayed.decayed_importance) == sorted(decayed.decayed_importance, reverse=True)
    with pytest.raises(ValidationError, match="limit"):
        RecordQuery(limit=0)


def test_stats_and_doctor(engine: MemoryEngine) -> None:
    engine.add(NewMemory(content="x", agent_id="a", layer=Layer.SOCIAL))
    stats = engine.stats()
    assert stats.records == 1 and stats.by_layer["social"] == 1 and stats.by_agent == {"a": 1}
    report = engine.doctor()
    assert report["store"]["records"] == 1
    assert report["model"]["dimension"] == 384
    assert report["store"]["lock_holder"]["pid"] > 0
    assert report["versions"]["chromadb"] != "not installed"


def test_read_only_engine_refuses_edits(store_dir: Path, clock: DeterministicClock) -> None:
    writer = MemoryEngine.open(StoreSpec(str(store_dir)), clock=clock)
    record = writer.add(NewMemory(content="x"))
    writer.close()
    reader = MemoryEngine.open(StoreSpec(str(store_dir), read_only=True), clock=clock)
    try:
        assert reader.read_only and reader.get(record.id) == record
        with pytest.raises(StoreReadOnly):
            reader.update(record.id, {"importance": 0.1})
        with pytest.raises(StoreReadOnly):
            reader.add(NewMemory(content="y"))
        assert reader.count() == 1
    finally:
        reader.close()


def test_records_left_without_history_are_found_and_reconciled(engine: MemoryEngine) -> None:
    from engine.records import MemoryRecord

    kept = engine.add(NewMemory(content="written with its history"))
    # What a kill -9 between the store write and the ledger write leaves behind:
    orphan = MemoryRecord.create(NewMemory(content="written without history"), now_ms=1.0)
    engine.store.write([orphan])
    assert engine.records_without_history() == [orphan.id]
    assert engine.doctor()["ledger"]["records_without_history"] == 1
    assert engine.reconcile_history() == 1
    assert engine.records_without_history() == []
    entry = engine.edit_history(orphan.id)[0]
    assert (entry.op, entry.actor, entry.after) == ("create", "reconciled", orphan)
    assert [e.op for e in engine.edit_history(kept.id)] == ["create"]
    assert engine.reconcile_history() == 0


def test_stored_ids_keeps_the_stored_ones_in_order(engine: MemoryEngine) -> None:
    first = engine.add(NewMemory(content="first"))
    second = engine.add(NewMemory(content="second"))
    engine.delete([first.id])
    assert engine.stored_ids([second.id, first.id, "missing", second.id]) == [second.id,
                                                                             second.id]
    assert engine.stored_ids([]) == []
