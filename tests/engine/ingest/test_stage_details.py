"""Typed stage reports (issue 22): every stage of a stepped run carries a frozen ``detail`` with
the same facts as its wire ``data``, built from the run's own values."""

from __future__ import annotations

import dataclasses

import pytest

import engine as door
from engine.ingest import Action, Reason, Stage
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from tests.engine.ingest.conftest import TableEmbedder


def _step_all(memory: MemoryEngine, text: str) -> list[door.StageReport]:
    run = memory.stepped(NewMemory(text))
    reports = []
    while not run.done:
        reports.append(run.step())
    return reports


def test_a_merge_stage_by_stage(engine: MemoryEngine, table: TableEmbedder) -> None:
    table.pair("Erin runs on Tuesdays", "Erin goes running every Tuesday.", 0.97)
    stored = engine.ingest(NewMemory("Erin runs on Tuesdays"))
    reports = _step_all(engine, "  Erin goes running every Tuesday. ")
    details = {report.stage: report.detail for report in reports}
    data = {report.stage: report.data for report in reports}

    start = details[Stage.START]
    assert isinstance(start, door.StartDetail)
    assert start.memory.content == data[Stage.START]["content"]
    assert start.incoming_id == data[Stage.START]["incoming_id"]

    normalize = details[Stage.NORMALIZE]
    assert isinstance(normalize, door.NormalizeDetail)
    assert (normalize.normalized, normalize.content_hash) == (
        "erin goes running every tuesday", data[Stage.NORMALIZE]["content_hash"])

    embed = details[Stage.EMBED]
    assert isinstance(embed, door.EmbedDetail)
    assert (embed.semantic, embed.model, embed.dimension) == (True, "table-test", 384)
    assert round(embed.latency_ms, 3) == data[Stage.EMBED]["latency_ms"]

    candidates = details[Stage.CANDIDATES]
    assert isinstance(candidates, door.CandidatesDetail)
    assert candidates.search.candidates[0].id == stored.record_id
    assert round(candidates.search.candidates[0].similarity, 6) == \
        data[Stage.CANDIDATES]["candidates"][0]["similarity"]
    assert (candidates.search.hash_hit, candidates.search.method) == (False, "exact")
    assert candidates.budget_ms == data[Stage.CANDIDATES]["budget_ms"]

    decision = details[Stage.DECISION]
    assert isinstance(decision, door.DecisionDetail)
    assert (decision.decision.action, decision.decision.reason) == (Action.MERGED,
                                                                    Reason.NEAR_DUPLICATE)
    assert decision.decision.to_json() == data[Stage.DECISION]["decision"]
    assert decision.surprise.to_json() == data[Stage.DECISION]["surprise"]

    apply = details[Stage.APPLY]
    assert isinstance(apply, door.ApplyDetail)
    assert apply.before is not None and apply.after is not None
    assert apply.before.to_json() == data[Stage.APPLY]["before"]
    assert apply.after.to_json() == data[Stage.APPLY]["after"]
    assert apply.merge_weight == data[Stage.APPLY]["merge_weight"]
    assert apply.deferred_to is None

    persist = details[Stage.PERSIST]
    assert isinstance(persist, door.PersistDetail)
    assert list(persist.written) == data[Stage.PERSIST]["written"]
    assert stored.record_id in persist.written and not persist.batched

    events = details[Stage.EVENTS]
    assert isinstance(events, door.EventsDetail)
    assert list(events.kinds) == data[Stage.EVENTS]["events"]
    assert events.emitted == data[Stage.EVENTS]["emitted"]

    with pytest.raises(dataclasses.FrozenInstanceError):
        events.emitted = 0  # type: ignore[misc]  # frozen


def test_a_deferral_names_the_record_it_waits_on(engine: MemoryEngine,
                                                 table: TableEmbedder) -> None:
    table.pair("Bob takes his coffee black", "Bob always has black coffee", 0.76)
    stored = engine.ingest(NewMemory("Bob takes his coffee black"))
    reports = _step_all(engine, "Bob always has black coffee")
    apply = next(r.detail for r in reports if r.stage is Stage.APPLY)
    persist = next(r.detail for r in reports if r.stage is Stage.PERSIST)
    assert isinstance(apply, door.ApplyDetail) and apply.action is Action.DEFERRED
    assert apply.deferred_to == stored.record_id
    assert isinstance(persist, door.PersistDetail) and persist.review_id is not None


def test_a_failed_stage_says_why(engine: MemoryEngine, table: TableEmbedder) -> None:
    table.pair("Erin runs on Tuesdays", "Erin goes running every Tuesday.", 0.97)
    stored = engine.ingest(NewMemory("Erin runs on Tuesdays"))
    run = engine.stepped(NewMemory("Erin goes running every Tuesday."))
    while run.next_stage is not Stage.PERSIST:
        run.step()
    engine.delete([stored.record_id or ""])  # the merge target goes while the run is paused
    report = run.step()
    assert isinstance(report.detail, door.FailedDetail)
    assert stored.record_id is not None
    assert report.detail.error == report.data["error"] and stored.record_id in report.detail.error
    assert run.done
