"""An import undoes as one step: inserts deleted, merges written back, reviews withdrawn, and
work done since the import left alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.errors import RecordNotFound, ValidationError
from engine.events import EventFilter
from engine.ingest.importer import SalienceCut
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery
from engine.records import MemoryRecord, NewMemory, TrustTier
from tests.engine.ingest.conftest import TableEmbedder
from tests.support.conversations import LOCOMO

BEFORE = [NewMemory(content="Kim's favourite colour is green", agent_id="kim"),
          NewMemory(content="Kim's shift starts at 8am", agent_id="kim")]
LINES = [
    {"content": "Kim likes the colour green most", "agent_id": "kim"},  # merges into BEFORE[0]
    {"content": "Kim's shift starts at 9am", "agent_id": "kim"},  # deferred against BEFORE[1]
    {"content": "Kim works at the harbour office", "agent_id": "kim"},  # inserted
    {"content": "Kim owns a red bicycle", "agent_id": "kim"},  # inserted
]


def _records(engine: MemoryEngine) -> list[MemoryRecord]:
    return list(engine.list_records(RecordQuery(limit=1000)).records)


def _state(engine: MemoryEngine) -> dict[str, tuple[str, float, int]]:
    return {r.id: (r.content, r.confidence, r.version) for r in _records(engine)}


@pytest.fixture
def seeded(engine: MemoryEngine, table: TableEmbedder) -> MemoryEngine:
    table.pair("Kim's favourite colour is green", "Kim likes the colour green most", 0.96)
    table.pair("Kim's shift starts at 8am", "Kim's shift starts at 9am", 0.97)
    for memory in BEFORE:
        engine.ingest(memory)
    return engine


def _import(engine: MemoryEngine, tmp_path: Path) -> str:
    path = tmp_path / "kim.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    report = engine.import_jsonl(path, tier=TrustTier.HUMAN)
    assert [o.action for o in report.lines] == ["merged", "deferred", "inserted", "inserted"]
    assert report.import_id is not None and report.to_json()["import_id"] == report.import_id
    return report.import_id


def test_undo_returns_the_store_to_its_state_before_the_import(seeded: MemoryEngine,
                                                               tmp_path: Path) -> None:
    before = _state(seeded)
    import_id = _import(seeded, tmp_path)
    assert seeded.count() == 4 and len(seeded.review_queue()) == 1
    plan = seeded.undo_import(import_id, dry_run=True)
    assert plan.counts == {"deleted": 2, "restored": 1, "withdrawn": 1, "conflicts": 0}
    assert seeded.count() == 4  # the plan wrote nothing
    seeded.undo_import(import_id)
    assert seeded.count() == 2 and seeded.review_queue() == []
    after = _state(seeded)
    assert {i: (c, conf) for i, (c, conf, _) in after.items()} == \
        {i: (c, conf) for i, (c, conf, _) in before.items()}
    entry = seeded.imports()[0]
    assert entry.id == import_id and entry.undone_at is not None
    assert entry.undo_counts == {"deleted": 2, "restored": 1, "withdrawn": 1, "conflicts": 0}
    kinds = [e.kind for e in seeded.events.query(EventFilter(limit=50))]
    assert "memory:import:undone" in kinds
    with pytest.raises(ValidationError, match="undone already"):
        seeded.undo_import(import_id)


def test_the_merged_paraphrase_is_forgotten_so_it_can_be_imported_again(
        seeded: MemoryEngine, tmp_path: Path) -> None:
    import_id = _import(seeded, tmp_path)
    seeded.undo_import(import_id)
    again = seeded.import_jsonl(tmp_path / "kim.jsonl", tier=TrustTier.HUMAN)
    # without the alias the paraphrase merges again instead of being skipped as seen before
    assert [o.action for o in again.lines] == ["merged", "deferred", "inserted", "inserted"]


def test_records_changed_since_the_import_are_left_alone(seeded: MemoryEngine,
                                                         tmp_path: Path) -> None:
    import_id = _import(seeded, tmp_path)
    inserted = next(r for r in _records(seeded) if r.content == "Kim owns a red bicycle")
    seeded.update(inserted.id, {"importance": 0.9})
    plan = seeded.undo_import(import_id)
    assert plan.conflicts == ((inserted.id, "changed since the import (version 2, the import "
                                            "left version 1)"),)
    assert plan.counts["deleted"] == 1
    assert seeded.get(inserted.id).importance == 0.9  # the user's edit survives


def test_an_unknown_import_is_named(seeded: MemoryEngine) -> None:
    with pytest.raises(RecordNotFound, match="no import with id 'nope'"):
        seeded.undo_import("nope")


def test_a_conversation_import_undoes_as_one_step_across_chunks(
        engine: MemoryEngine, tmp_path: Path) -> None:
    policy = engine.ingest_policy
    engine.set_ingest_policy(replace(policy, batch_size=2))  # two chunks for three turns
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    engine.ingest(NewMemory(content="Caroline: I joined a pottery class!", agent_id="c"))
    before = {r.id: r for r in _records(engine)}
    report = engine.import_conversation(path, agent_id="c", keep=SalienceCut("all"))
    assert report.counts["inserted"] == 2 and report.counts["skipped"] == 1  # one exact dup
    assert report.import_id is not None
    engine.undo_import(report.import_id)
    after = {r.id: r for r in _records(engine)}
    assert after.keys() == before.keys()
    restored: MemoryRecord = after[next(iter(before))]
    assert restored.provenance == before[restored.id].provenance
