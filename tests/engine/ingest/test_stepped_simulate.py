"""The stepped pipeline's dry run and the undo of a stepped run (issue 20, Pipeline view).

A simulated run goes through every stage with the same numbers as a real one and writes
nothing (records, edit history, review items, aliases, events); a real run's writes are taken
back by ``MemoryEngine.undo_run``, leaving the store and the review queue as they were.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.ingest.kinds import Action, Stage
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from tests.engine.ingest.conftest import TableEmbedder

STORED = "Grace drinks green tea every morning"
# (incoming text, cosine to STORED, fields, the decision it gets)
CASES: list[tuple[str, float | None, dict[str, Any], Action]] = [
    ("Grace has green tea each morning", 0.97, {}, Action.MERGED),  # above 0.95
    (STORED, None, {"confidence": 0.95}, Action.UPDATED),
    ("Grace drinks green tea most mornings", 0.76, {}, Action.DEFERRED),
    ("The deploy script lives in ops/deploy.sh", None, {}, Action.INSERTED),
]


def _state(engine: MemoryEngine) -> dict[str, Any]:
    """Everything a run could write: records, history, review queue, aliases, events."""
    snapshot = engine.store.view.snapshot()
    ids = sorted(snapshot.ids[r] for r in snapshot.live_rows.tolist())
    ledger = engine.ledger
    return {
        "records": {r.id: json.dumps(r.to_json(), sort_keys=True)
                    for r in engine.get_many(ids)},
        "edits": len(engine.edit_history(limit=0)),
        "review": [item.id for item in engine.review_queue()],
        "aliases": [tuple(row) for row in ledger.query(
            "SELECT content_hash, record_id FROM hash_aliases ORDER BY 1, 2")],
        "events": ledger.query("SELECT COUNT(*) AS n FROM events")[0]["n"],
    }


def _stored(engine: MemoryEngine, table: TableEmbedder, text: str, cosine: float | None) -> str:
    if cosine is not None:
        table.pair(STORED, text, cosine)
    result = engine.ingest(NewMemory(STORED, confidence=0.6))
    # a second record the incoming memory may link to (symmetric related links)
    engine.ingest(NewMemory("Grace walks her dog after lunch"))
    assert result.record_id is not None
    return result.record_id


@pytest.mark.parametrize(("text", "cosine", "fields", "action"), CASES,
                         ids=[c[3].value for c in CASES])
def test_a_simulated_run_decides_as_a_real_one_and_writes_nothing(
        make_engine: Any, table: TableEmbedder, text: str, cosine: float | None,
        fields: dict[str, Any], action: Action) -> None:
    engine = make_engine()
    _stored(engine, table, text, cosine)
    before = _state(engine)
    simulated = engine.stepped(NewMemory(text, **fields), simulate=True)
    assert simulated.simulated
    reports = {report.stage: report.data for report in (simulated.step()
                                                        for _ in simulated.stages)}
    assert simulated.done and simulated.written is None
    assert _state(engine) == before  # nothing written: records, history, review, events
    assert reports[Stage.PERSIST]["simulated"] and reports[Stage.PERSIST]["written"] == []
    assert reports[Stage.EVENTS] == {**reports[Stage.EVENTS], "emitted": 0, "simulated": True}

    real = engine.stepped(NewMemory(text, **fields))
    real_reports = {report.stage: report.data for report in (real.step() for _ in real.stages)}
    assert real.result.action is action
    assert simulated.result.action is action
    assert simulated.result.reason is real.result.reason
    assert simulated.result.similarity == real.result.similarity
    assert reports[Stage.DECISION] == real_reports[Stage.DECISION]
    for key in ("partition_size", "surprise_partition_size", "method", "hash_hit"):
        assert reports[Stage.CANDIDATES][key] == real_reports[Stage.CANDIDATES][key]
    after, real_after = reports[Stage.APPLY]["after"], real_reports[Stage.APPLY]["after"]
    if action is Action.INSERTED:  # a fresh record: only its id differs
        assert {**after, "id": None} == {**real_after, "id": None}
    elif action is not Action.DEFERRED:
        assert after == {**real_after, "merged_from": after["merged_from"]}
        assert after["confidence"] == real_after["confidence"]
    assert reports[Stage.EVENTS]["events"] == real_reports[Stage.EVENTS]["events"]


@pytest.mark.parametrize(("text", "cosine", "fields", "action"), CASES,
                         ids=[c[3].value for c in CASES])
def test_undo_run_takes_a_stepped_run_back(
        make_engine: Any, table: TableEmbedder, text: str, cosine: float | None,
        fields: dict[str, Any], action: Action) -> None:
    engine = make_engine()
    _stored(engine, table, text, cosine)
    before = _state(engine)
    run = engine.stepped(NewMemory(text, **fields))
    result = run.run()
    assert result.action is action
    written = run.written
    assert written is not None and not written.empty
    changed = _state(engine)
    assert changed["records"] != before["records"] or changed["review"] != before["review"]

    engine.undo_run(written)
    after = _state(engine)
    assert after["records"] == before["records"]
    assert after["review"] == before["review"] and after["aliases"] == before["aliases"]
    # records the run wrote are taken back in the history (a delete or a restore)
    assert after["edits"] > changed["edits"] or not written.pairs
    # the same memory decides as it did the first time: nothing of the run is left behind
    again = engine.stepped(NewMemory(text, **fields), simulate=True).run()
    assert (again.action, again.reason) == (result.action, result.reason)


def test_a_read_only_store_can_be_simulated_but_not_ingested(
        make_engine: Any, table: TableEmbedder, tmp_path: Any, clock: Any) -> None:
    from engine.errors import StoreReadOnly
    from engine.store import StoreSpec

    engine = make_engine()
    _stored(engine, table, CASES[0][0], CASES[0][1])
    engine.close()
    reader = MemoryEngine.open(StoreSpec(str(tmp_path / "store"), read_only=True),
                               embedder=table, clock=clock)
    try:
        result = reader.stepped(NewMemory(CASES[0][0]), simulate=True).run()
        assert result.action is Action.MERGED
        with pytest.raises(StoreReadOnly):
            reader.stepped(NewMemory(CASES[0][0])).run()
    finally:
        reader.close()


def test_undo_run_leaves_a_record_changed_since_alone(make_engine: Any,
                                                      table: TableEmbedder) -> None:
    engine = make_engine()
    text, cosine, fields, _ = CASES[0]
    target = _stored(engine, table, text, cosine)
    run = engine.stepped(NewMemory(text, **fields))
    assert run.run().action is Action.MERGED and run.written is not None
    edited = engine.update(target, {"importance": 0.9})  # a person's edit after the merge
    conflicts = engine.undo_run(run.written)
    assert [record_id for record_id, _ in conflicts] == [target]
    assert "changed since the run" in conflicts[0][1]
    assert engine.get(target) == edited  # the later edit is kept
