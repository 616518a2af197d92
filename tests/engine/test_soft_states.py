"""Soft states (issue 20): paused and archived records are kept, never retrieved, and come back
when resumed — through the real engine on embedded Chroma (with the hashing embedder)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.clock import DeterministicClock
from engine.config import DedupConfig, RetentionPolicy
from engine.errors import RecordNotFound, ValidationError
from engine.events import EventFilter
from engine.fate import record_fate
from engine.ingest.kinds import Action
from engine.ingest.policy import IngestPolicy
from engine.lifecycle.compaction import select_compaction
from engine.lifecycle.pruning import PruneMode, select_retention
from engine.memory_engine import MemoryEngine
from engine.query import ALL_STATES, RecordQuery, parse_states
from engine.records import Layer, MemoryRecord, NewMemory, RecordState
from engine.retrieval import RetrievalRequest
from engine.retrieval.types import DropReason
from engine.store import StoreSpec
from engine.store.codec import record_from_chroma, record_to_chroma
from engine.store.view_cache import CACHE_META, is_current
from tests.support.fakes import HashingEmbedder

DAY_MS = 86_400_000.0
TOPICS = ("tea", "coffee", "chess", "hiking", "piano", "sailing", "garden", "kites")


def _open(store_dir: Path, clock: DeterministicClock,
          embedder: HashingEmbedder) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(str(store_dir)), embedder=embedder, clock=clock)


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    eng = _open(store_dir, clock, fake_embedder)
    yield eng
    eng.close()


def _fill(engine: MemoryEngine, count: int = 8, **fields: object) -> list[MemoryRecord]:
    return [engine.add(NewMemory(content=f"bob talks about {TOPICS[i % len(TOPICS)]} {i}",
                                 agent_id="bob", **fields))  # type: ignore[arg-type]
            for i in range(count)]


def _retrieved(engine: MemoryEngine, query: str = "bob talks about") -> list[str]:
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000, query=query, agent_id="bob"),
                             inspect=True)
    return [record.id for record in bundle.records]


@pytest.mark.parametrize("partition_min", [4096, 1], ids=["exhaustive", "partitioned"])
def test_paused_and_archived_are_never_retrieved_and_come_back_when_resumed(
        engine: MemoryEngine, partition_min: int) -> None:
    # partition_min=1 ranks a top slice first (the path large stores take); 4096 sorts all.
    engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config,
                                                    partition_min=partition_min))
    records = _fill(engine)
    everyone = {r.id for r in records}
    assert set(_retrieved(engine)) == everyone
    paused, archived = records[0], records[1]
    engine.pause([paused.id])
    engine.archive([archived.id])
    # Each query names the withheld record's own words: it would rank first if it could.
    for target in (paused, archived):
        found = _retrieved(engine, target.content)
        assert target.id not in found and set(found) == everyone - {paused.id, archived.id}
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000, query=paused.content,
                                              agent_id="bob"), inspect=True)
    diagnostics = bundle.diagnostics
    rows = {diagnostics.ids[r]: r for r in diagnostics.rows.tolist()}
    assert diagnostics.candidate(rows[paused.id]).drop_reason is DropReason.PAUSED
    assert diagnostics.candidate(rows[archived.id]).drop_reason is DropReason.ARCHIVED
    assert diagnostics.filtered_count == 2
    assert diagnostics.drop_counts()["paused"] == 1 == diagnostics.drop_counts()["archived"]
    # The non-inspecting path (access counting, event) withholds them too.
    live = engine.retrieve(RetrievalRequest(max_tokens=10_000, query=paused.content,
                                            agent_id="bob"))
    assert paused.id not in {r.id for r in live.records}
    engine.resume([paused.id, archived.id])
    assert set(_retrieved(engine)) == everyone
    assert _retrieved(engine, paused.content)[0] == paused.id


def test_state_changes_write_history_and_events_and_undo_restores(
        engine: MemoryEngine) -> None:
    record = _fill(engine, 2)[0]
    paused = engine.pause([record.id], actor="tester")
    assert [r.state for r in paused] == [RecordState.PAUSED]
    assert paused[0].version == record.version + 1
    assert engine.get(record.id).state is RecordState.PAUSED
    assert engine.pause([record.id]) == paused  # already paused: nothing written
    engine.archive([record.id])
    engine.resume([record.id])
    history = engine.edit_history(record.id)
    assert [e.op for e in history] == ["resume", "archive", "pause", "create"]
    assert history[2].actor == "tester"
    assert history[2].before == record and history[2].after == paused[0]
    kinds = [e.kind for e in engine.events.query(EventFilter(record_id=record.id))]
    assert kinds[-3:] == ["memory:record:paused", "memory:record:archived",
                          "memory:record:resumed"]
    event = engine.events.query(EventFilter(kinds=["memory:record:paused"]))[0]
    assert event.payload["state_before"] == "active" and event.payload["state"] == "paused"
    # Undo of a pause: restore the record as it was before the edit.
    engine.pause([record.id])
    assert record.id not in _retrieved(engine, record.content)
    before = engine.edit_history(record.id)[0].before
    assert before is not None and before.state is RecordState.ACTIVE
    engine.restore([before])
    assert engine.get(record.id).state is RecordState.ACTIVE
    assert _retrieved(engine, record.content)[0] == record.id


def test_unknown_id_changes_nothing(engine: MemoryEngine) -> None:
    record = _fill(engine, 1)[0]
    with pytest.raises(RecordNotFound):
        engine.pause([record.id, "missing"])
    assert engine.get(record.id).state is RecordState.ACTIVE
    assert [e.op for e in engine.edit_history(record.id)] == ["create"]


def test_listing_hides_archived_by_default(engine: MemoryEngine) -> None:
    active, paused, archived = _fill(engine, 3)
    engine.pause([paused.id])
    engine.archive([archived.id])
    default = engine.list_records()
    assert {r.id for r in default.records} == {active.id, paused.id} and default.total == 2
    rows = engine.list_rows(RecordQuery(states=ALL_STATES))
    assert {(r.id, r.state) for r in rows.rows} == {
        (active.id, RecordState.ACTIVE), (paused.id, RecordState.PAUSED),
        (archived.id, RecordState.ARCHIVED)}
    only = engine.list_records(RecordQuery(states=parse_states("archived")))
    assert [r.id for r in only.records] == [archived.id]
    assert parse_states("Paused, active") == {RecordState.PAUSED, RecordState.ACTIVE}
    with pytest.raises(ValidationError, match="state: unknown state 'sleeping'"):
        parse_states("sleeping")
    with pytest.raises(ValidationError, match="states: must name at least one state"):
        RecordQuery(states=frozenset())


@pytest.mark.parametrize("cached", [True, False], ids=["view-cache", "chroma"])
def test_state_survives_reopen(store_dir: Path, clock: DeterministicClock,
                               fake_embedder: HashingEmbedder, cached: bool) -> None:
    engine = _open(store_dir, clock, fake_embedder)
    records = _fill(engine, 3)
    engine.pause([records[0].id])
    engine.archive([records[1].id])
    engine.close()
    if cached:
        assert is_current(store_dir, "mnemoscope_memories", fake_embedder.dimension)
    else:
        (store_dir / CACHE_META).unlink()  # the next open reads Chroma
    engine = _open(store_dir, clock, fake_embedder)
    try:
        assert engine.store._view_from_cache is cached
        states = {r.id: r.state for r in engine.list_rows(RecordQuery(states=ALL_STATES)).rows}
        assert states == {records[0].id: RecordState.PAUSED,
                          records[1].id: RecordState.ARCHIVED,
                          records[2].id: RecordState.ACTIVE}
        assert engine.get(records[0].id).state is RecordState.PAUSED  # stored in Chroma
        assert _retrieved(engine) == [records[2].id]
    finally:
        engine.close()


def test_codec_reads_a_record_without_state_as_active() -> None:
    record = MemoryRecord.create(NewMemory(content="old record"), now_ms=0.0)
    meta = record_to_chroma(record.replace(state=RecordState.PAUSED))
    assert meta["state"] == "paused"
    assert record_from_chroma(record.id, record.content, meta).state is RecordState.PAUSED
    del meta["state"]  # written before soft states
    assert record_from_chroma(record.id, record.content, meta).state is RecordState.ACTIVE
    meta["state"] = "snoozed"  # a newer build's state: kept, not retrieved
    assert record_from_chroma(record.id, record.content, meta).state is RecordState.PAUSED
    assert MemoryRecord.from_json({**record.to_json(), "state": "archived"}).state \
        is RecordState.ARCHIVED
    legacy = record.to_json()
    del legacy["state"]
    assert MemoryRecord.from_json(legacy).state is RecordState.ACTIVE
    with pytest.raises(ValidationError, match="state: must be one of active, paused, archived"):
        MemoryRecord.from_json({**record.to_json(), "state": "gone"})


def test_lifecycle_leaves_paused_and_archived_records(engine: MemoryEngine,
                                                      clock: DeterministicClock) -> None:
    low = _fill(engine, 4, importance=0.001)
    engine.pause([low[0].id])
    engine.archive([low[1].id])
    report = engine.prune(PruneMode.AGGRESSIVE, dry_run=True)
    assert set(report.selection.ids) == {low[2].id, low[3].id}
    engine.prune(PruneMode.NORMAL)
    assert {r.id for r in engine.list_records(RecordQuery(states=ALL_STATES)).records} == {
        low[0].id, low[1].id}
    # Retention: kept records neither go nor count against the cap.
    semantic = _fill(engine, 3, importance=0.9)
    engine.pause([semantic[0].id])
    cap = RetentionPolicy(semantic_max=2)
    selection = select_retention(engine.store.view.snapshot(), cap, clock.now(),
                                 half_life_days=30.0, agent_id="bob")
    assert selection.ids == ()  # 2 active semantic records: at the cap, none over it
    engine.resume([semantic[0].id])
    selection = select_retention(engine.store.view.snapshot(), cap, clock.now(),
                                 half_life_days=30.0, agent_id="bob")
    assert len(selection.ids) == 1 and low[0].id not in selection.ids
    # TTL expiry still applies: the record's expiry was chosen for it too.
    expiring = engine.add(NewMemory(content="bob has a dentist visit friday", agent_id="bob",
                                    expires_at=clock.now() + DAY_MS))
    engine.pause([expiring.id])
    clock.advance(2 * DAY_MS)
    assert engine.expire().selection.ids == (expiring.id,)


def test_compaction_leaves_paused_and_archived_records(engine: MemoryEngine,
                                                       clock: DeterministicClock) -> None:
    old = _fill(engine, 6, layer=Layer.EPISODIC, importance=0.2)
    engine.pause([old[0].id])
    engine.archive([old[1].id])
    clock.advance(30 * DAY_MS)
    snapshot = engine.store.view.snapshot()
    rows = select_compaction(snapshot, "bob", clock.now(),
                             decayed=np.zeros(snapshot.n), window_ms=DAY_MS, keep_recent=0)
    assert {snapshot.ids[r] for r in rows} == {r.id for r in old[2:]}


def test_a_merge_into_a_paused_record_keeps_it_paused(engine: MemoryEngine) -> None:
    target = engine.ingest(NewMemory(content="Bob prefers green tea in the morning",
                                     agent_id="bob", confidence=0.6)).record
    assert target is not None
    engine.pause([target.id])
    result = engine.ingest(NewMemory(content="Bob prefers green tea in the morning",
                                     agent_id="bob", confidence=0.9))
    assert result.action in (Action.UPDATED, Action.MERGED) and result.target_id == target.id
    assert result.record is not None and result.record.state is RecordState.PAUSED
    assert engine.get(target.id).state is RecordState.PAUSED
    applied = [e for e in result.events if e.kind == "merge-applied"]
    assert applied and applied[0].payload["target_state"] == "paused"
    assert target.id not in _retrieved(engine, target.content)
    assert engine.count() == 1


@pytest.mark.server
@pytest.mark.slow
def test_state_is_shared_through_a_chroma_server(chroma_server_url: str, unique_collection: str,
                                                 tmp_path: Path) -> None:
    # Two engines on one real `chroma run` (the several-process setup): a pause by one is a
    # metadata write the other reads back, and neither retrieves the paused record.
    spec = StoreSpec(chroma_server_url, collection=unique_collection)
    writer = MemoryEngine.open(spec, ledger_path=tmp_path / "a.sqlite3",
                               embedder=HashingEmbedder(), clock=DeterministicClock(1e12))
    reader = MemoryEngine.open(spec, ledger_path=tmp_path / "b.sqlite3",
                               embedder=HashingEmbedder(), clock=DeterministicClock(1e12))
    try:
        records = _fill(writer, 3)
        writer.pause([records[0].id])
        writer.archive([records[1].id])
        reader.refresh()
        assert reader.get(records[0].id).state is RecordState.PAUSED
        assert _retrieved(reader) == [records[2].id]
        assert {r.id for r in reader.list_records().records} == {records[0].id, records[2].id}
        writer.resume([records[0].id, records[1].id])
        reader.refresh()
        assert set(_retrieved(reader)) == {r.id for r in records}
    finally:
        writer.close()
        reader.close()


def test_an_export_imported_elsewhere_keeps_each_state(engine: MemoryEngine, tmp_path: Path,
                                                       clock: DeterministicClock,
                                                       fake_embedder: HashingEmbedder) -> None:
    active, paused, archived = _fill(engine, 3)
    engine.pause([paused.id])
    engine.archive([archived.id])
    exported = tmp_path / "export.jsonl"
    assert engine.export_jsonl(exported) == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "bob naps", "state": "asleep"}\n', encoding="utf-8")
    other = _open(tmp_path / "other", clock, fake_embedder)
    # "bob talks about <topic> <i>" are alike by construction (the hashed bag of words puts them
    # near cosine 0.6, inside the review band that starts at 0.50); this test is about states,
    # so the import keeps them apart with a band from 0.70
    other.set_ingest_policy(IngestPolicy(dedup=DedupConfig(gray_zone=0.10)))
    try:
        report = other.import_jsonl(exported)
        states = {r.content: r.state for r in
                  other.list_records(RecordQuery(states=ALL_STATES)).records}
        assert states == {active.content: RecordState.ACTIVE,
                          paused.content: RecordState.PAUSED,
                          archived.content: RecordState.ARCHIVED}
        assert all("state" not in r.metadata for r in
                   other.list_records(RecordQuery(states=ALL_STATES)).records)
        assert [line.action for line in report.lines] == ["inserted"] * 3
        refused = other.import_jsonl(bad)
        assert refused.lines[0].action == "error"
        assert "state" in refused.lines[0].reason and "asleep" in refused.lines[0].reason
        assert other.count() == 3
    finally:
        other.close()


def test_fate_tells_the_state_changes(engine: MemoryEngine) -> None:
    record = _fill(engine, 1)[0]
    engine.pause([record.id], actor="tester")
    engine.resume([record.id], actor="tester")
    fate = record_fate(engine, record.id)
    texts = [step.text for step in fate.steps]
    assert "paused by tester: kept, not retrieved" in texts
    assert "resumed by tester: retrieved again" in texts
    assert fate.status == "alive"


def test_layer_views_withhold_paused_and_archived_records(
        engine: MemoryEngine, clock: DeterministicClock) -> None:
    """Social evidence, spatial points and derived records follow the records' states."""
    talks = []
    for sentiment in (0.5, -0.5, 0.25):
        clock.advance(3_600_000.0)
        talks.append(engine.add(NewMemory(
            f"talked with dana at {clock.now()}", agent_id="scout", layer=Layer.SOCIAL,
            metadata={"social": {"otherAgentId": "dana", "sentiment": sentiment}})))
    well = engine.add(NewMemory("the well", layer=Layer.SPATIAL,
                                metadata={"spatial": {"x": 1, "y": 0, "z": 0}}))
    layers = engine.layers
    layers.flush()
    [dana] = layers.social_summaries("scout", "dana")
    assert dana.interactions == 3
    assert [h.record_id for h in engine.spatial_within((0, 0, 0), 2)] == [well.id]

    engine.pause([talks[0].id])
    engine.archive([talks[1].id, well.id])
    layers.flush()
    [dana] = layers.social_summaries("scout", "dana")
    assert dana.interactions == 1 and dana.sentiment == 0.25
    assert {o.record_id for o in layers.observations("scout")} == {talks[2].id}
    assert engine.spatial_within((0, 0, 0), 2) == []
    assert layers.spatial_points() == []

    engine.resume([talks[0].id, talks[1].id, well.id])
    layers.flush()
    [dana] = layers.social_summaries("scout", "dana")
    assert dana.interactions == 3
    assert [h.record_id for h in engine.spatial_within((0, 0, 0), 2)] == [well.id]

    # A person pauses the derived summary itself: it leaves the social list, and a later
    # rewrite (a new interaction) keeps it paused.
    engine.pause([dana.record_id])
    assert layers.social_summaries("scout", "dana") == []
    clock.advance(3_600_000.0)
    engine.add(NewMemory("talked with dana again", agent_id="scout", layer=Layer.SOCIAL,
                         metadata={"social": {"otherAgentId": "dana", "sentiment": 0.9}}))
    layers.flush()
    stored = engine.get(dana.record_id)
    assert stored.state is RecordState.PAUSED and "4" in stored.content
    assert layers.social_summaries("scout", "dana") == []
    engine.resume([dana.record_id])
    assert [s.interactions for s in layers.social_summaries("scout", "dana")] == [4]


def test_preview_rows_leave_archived_records_out(store_dir: Path, clock: DeterministicClock,
                                                 fake_embedder: HashingEmbedder) -> None:
    """The records browser's preview (while the view loads) hides what its filter hides."""
    engine = _open(store_dir, clock, fake_embedder)
    records = _fill(engine, 5)
    engine.pause([records[1].id])
    engine.archive([records[2].id, records[4].id])
    engine.close()
    (store_dir / CACHE_META).unlink()  # the next open reads Chroma: a deferred view
    engine = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock,
                               defer_view=True)
    try:
        assert not engine.view_ready
        page = engine.preview_rows(0, 10)
        assert page.total == 3
        assert [(r.id, r.state) for r in page.rows] == [
            (records[3].id, RecordState.ACTIVE), (records[1].id, RecordState.PAUSED),
            (records[0].id, RecordState.ACTIVE)]
        assert [r.id for r in engine.preview_rows(1, 1).rows] == [records[1].id]
    finally:
        engine.close()


def test_a_store_holding_soft_states_is_marked_and_refused_by_an_older_build(
        store_dir: Path, clock: DeterministicClock, fake_embedder: HashingEmbedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first soft state written marks the collection (``soft_states``: the preview then
    leaves archived records out), never unmarked; builds before the lean layout (schema 3,
    which also carries states) refuse the store. Migrating flat stores that held states:
    tests/engine/test_lean_schema.py."""
    from engine.errors import SchemaMismatch
    from engine.store import chroma_store

    def collection_meta() -> dict[str, object]:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.PersistentClient(path=str(store_dir),
                                           settings=Settings(anonymized_telemetry=False))
        return dict(client.get_collection("mnemoscope_memories").metadata or {})

    engine = _open(store_dir, clock, fake_embedder)
    records = _fill(engine, 2)
    assert engine.store.schema_version == 3
    engine.close()
    assert "soft_states" not in collection_meta()
    engine = _open(store_dir, clock, fake_embedder)
    engine.pause([records[0].id])
    engine.resume([records[0].id])  # the mark is never lowered
    engine.close()
    assert collection_meta()["soft_states"] is True
    for older in (1, 2):
        monkeypatch.setattr(chroma_store, "SCHEMA_VERSION", older)
        with pytest.raises(SchemaMismatch,
                           match=f"schema version 3; this Mnemoscope reads up to {older}"):
            _open(store_dir, clock, fake_embedder)
    monkeypatch.undo()
    engine = _open(store_dir, clock, fake_embedder)  # this build reads it
    try:
        assert engine.get(records[0].id).state is RecordState.ACTIVE
    finally:
        engine.close()
