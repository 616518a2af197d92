"""The consolidation pass over stored memories (issue 23): same rules as ingest, one undo step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.errors import Cancelled, EditConflict, RecordNotFound, ValidationError
from engine.ingest import Action, Reason
from engine.ingest.consolidate import ConsolidationReport, ConsolidationStep
from engine.memory_engine import MemoryEngine
from engine.records import MemoryRecord, NewMemory, Privacy, RelatedLink
from tests.engine.ingest.conftest import EngineFactory, TableEmbedder

SHORT, LONG = "Bob takes his coffee black", "Bob always has his coffee black"
EARLY, LATE = "Standup is at 3pm", "Standup is at 5pm"
OTHER = "The build server lives in Frankfurt"


@pytest.fixture
def planted(engine: MemoryEngine, table: TableEmbedder) -> dict[str, MemoryRecord]:
    """A near-duplicate pair, a contradicting pair and an unrelated record, stored side by side
    (``add`` stores as given, as records stored before a threshold change would be)."""
    table.pair(SHORT, LONG, 0.92)
    table.pair(EARLY, LATE, 0.95)
    return {text: engine.add(NewMemory(text, importance=importance))
            for text, importance in ((SHORT, 0.4), (LONG, 0.7), (EARLY, 0.5), (LATE, 0.5),
                                     (OTHER, 0.5))}


def _records(engine: MemoryEngine) -> list[MemoryRecord]:
    return list(engine.list_records().records)


def _state(engine: MemoryEngine) -> dict[str, tuple[str, int]]:
    return {r.id: (r.content, r.version) for r in _records(engine)}


def _steps(engine: MemoryEngine) -> dict[Action, ConsolidationStep]:
    report = engine.consolidate()
    steps = {s.action: s for s in report.steps}
    assert len(steps) == len(report.steps)
    return steps


def test_merges_a_near_duplicate_and_defers_a_contradiction(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    report = engine.consolidate()
    assert report.counts == {"merged": 1, "deferred": 1} and report.scanned == 5
    # most similar pair first: the contradiction (0.95), then the paraphrase (0.92)
    deferred, merged = report.steps
    # seed 004: the higher-importance version is kept, the other merged into it and deleted
    assert (merged.action, merged.reason) == (Action.MERGED, Reason.NEAR_DUPLICATE)
    assert (merged.kept.id, merged.other.id) == (planted[LONG].id, planted[SHORT].id)
    kept = engine.get(planted[LONG].id)
    assert kept.content == LONG and kept.merged_from == (planted[SHORT].id,)
    assert planted[SHORT].id not in {r.id for r in _records(engine)}
    # the contradiction is not merged: a review item, both records kept
    assert (deferred.action, deferred.reason) == (Action.DEFERRED,
                                                  Reason.POSSIBLE_CONTRADICTION)
    assert {deferred.kept.content, deferred.other.content} == {EARLY, LATE}
    items = engine.review_queue()
    assert [(i.id, i.target_id, i.incoming_id) for i in items] == [
        (deferred.review_id, deferred.kept.id, deferred.other.id)]
    assert engine.count() == 4
    # the merged-away text is now an exact duplicate of the kept record
    again = engine.ingest(NewMemory(SHORT, importance=0.4))
    assert (again.action, again.target_id) == (Action.SKIPPED, planted[LONG].id)
    # a second pass finds nothing new: the deferral already waits for a person
    assert engine.consolidate().steps == ()


def test_dry_run_writes_nothing(engine: MemoryEngine,
                                planted: dict[str, MemoryRecord]) -> None:
    before = _state(engine)
    report = engine.consolidate(dry_run=True)
    assert report.dry_run and report.id is None
    assert report.counts == {"merged": 1, "deferred": 1}
    assert _state(engine) == before and engine.review_queue() == []
    assert engine.consolidate().counts == report.counts  # the real pass does what it showed


def test_undo_import_takes_the_pass_back(engine: MemoryEngine,
                                         planted: dict[str, MemoryRecord]) -> None:
    before = _state(engine)
    report = engine.consolidate()
    assert report.id is not None
    assert [e.kind for e in engine.imports()] == ["consolidation"]
    plan = engine.undo_import(report.id)
    assert plan.counts == {"deleted": 0, "restored": 2, "withdrawn": 1, "conflicts": 0}
    assert {r: c for r, (c, _) in _state(engine).items()} == {
        r: c for r, (c, _) in before.items()}
    assert engine.review_queue() == []
    # the alias went with it: the merged-away text is its own record again
    again = engine.ingest(NewMemory(SHORT, importance=0.4))
    assert (again.action, again.target_id) == (Action.SKIPPED, planted[SHORT].id)


def test_approving_a_deferral_merges_the_stored_pair(engine: MemoryEngine,
                                                      planted: dict[str, MemoryRecord]) -> None:
    step = _steps(engine)[Action.DEFERRED]
    assert step.review_id is not None
    result = engine.approve_review(step.review_id)
    assert result.record is not None and result.record.id == step.kept.id
    assert result.record.merged_from == (step.other.id,)
    assert step.other.id not in {r.id for r in _records(engine)}
    assert engine.count() == 3


def test_rejecting_a_deferral_keeps_both_and_is_not_asked_again(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    step = _steps(engine)[Action.DEFERRED]
    assert step.review_id is not None
    before = _state(engine)
    engine.reject_review(step.review_id)
    assert _state(engine) == before
    assert engine.consolidate().steps == ()


def test_partitions_never_merge(engine: MemoryEngine, table: TableEmbedder) -> None:
    table.pair(SHORT, LONG, 0.99)
    engine.add(NewMemory(SHORT, privacy=Privacy.PUBLIC))
    engine.add(NewMemory(LONG, privacy=Privacy.PRIVATE))
    engine.add(NewMemory(SHORT, agent_id="other"))
    assert engine.consolidate().steps == ()


def test_agent_option_limits_the_pass(engine: MemoryEngine, table: TableEmbedder) -> None:
    table.pair(SHORT, LONG, 0.92)
    for agent in ("a", "b"):
        engine.add(NewMemory(SHORT, agent_id=agent, importance=0.4))
        engine.add(NewMemory(LONG, agent_id=agent, importance=0.7))
    report = engine.consolidate("a")
    assert report.scanned == 2 and report.counts["merged"] == 1
    assert {r.agent_id for r in _records(engine)
            if r.content == SHORT} == {"b"}


def test_records_stored_on_the_jaccard_path_are_compared_by_embedding(
        make_engine: EngineFactory, table: TableEmbedder) -> None:
    # stored while the model was not ready: no vectors, and token Jaccard (0.5) called the
    # paraphrase distinct; once the model is ready the pass compares their embeddings
    table.pair(SHORT, LONG, 0.92)
    loading = make_engine(embedder=None, name="shared")
    loading.add(NewMemory(SHORT, importance=0.4))
    loading.add(NewMemory(LONG, importance=0.7))
    loading.close()
    ready = make_engine(name="shared")
    report = ready.consolidate()
    assert [(s.action, s.semantic) for s in report.steps] == [(Action.MERGED, True)]
    assert ready.count() == 1


THIRD = "Alice takes her tea with lemon"


def test_links_to_a_merged_away_record_follow_it_to_the_survivor(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    # a record that linked to the paraphrase merged away (and to its survivor): after the pass
    # its link points at the survivor, once, with the higher similarity; no link dangles
    third = engine.add(NewMemory(THIRD, importance=0.5))
    short, long = planted[SHORT], planted[LONG]
    linked = third.replace(related=(RelatedLink(short.id, 0.6), RelatedLink(long.id, 0.4),
                                    RelatedLink(planted[OTHER].id, 0.3)))
    engine.store.write([linked], engine.embed_texts([THIRD]))
    report = engine.consolidate()
    assert [after.id for _, after in report.relinked] == [third.id]
    after = engine.get(third.id)
    assert after.related == (RelatedLink(long.id, 0.6), RelatedLink(planted[OTHER].id, 0.3))
    assert after.version == third.version + 1
    live = {r.id for r in _records(engine)}
    assert all(link.id in live for r in _records(engine) for link in r.related)
    # one undo step takes the rewrite back with the merge
    assert report.id is not None
    engine.undo_import(report.id)
    assert engine.get(third.id).related == linked.related


def test_a_dry_run_names_the_records_it_would_relink(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    third = engine.add(NewMemory(THIRD, importance=0.5))
    engine.store.write([third.replace(related=(RelatedLink(planted[SHORT].id, 0.6),))],
                       engine.embed_texts([THIRD]))
    report = engine.consolidate(dry_run=True)
    assert report.to_json()["relinked"] == [third.id]
    assert engine.get(third.id).related == (RelatedLink(planted[SHORT].id, 0.6),)


def test_records_waiting_for_the_model_are_merged_on_the_jaccard_path(
        make_engine: EngineFactory) -> None:
    # no model at all: every pair is on the Jaccard path (through the inverted index)
    loading = make_engine(embedder=None)
    loading.add(NewMemory("the deploy script lives in the ops repository", importance=0.4))
    kept = loading.add(NewMemory("the deploy script lives in the ops repository now",
                                 importance=0.7))
    for i in range(40):
        # unrelated: no word in common (the Jaccard path's review floor is 0.30 of words)
        loading.add(NewMemory(f"topic{i} subject{i} item{i} detail{i}"))
    report = loading.consolidate()
    assert [(s.action, s.semantic, s.kept.id) for s in report.steps] == [
        (Action.MERGED, False, kept.id)]

# -- applying chosen steps of a dry run (the GUI's stepper) -------------------------------------

def test_applying_one_step_of_a_dry_run_writes_only_that_step(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    plan = engine.consolidate(dry_run=True)
    merge = _by_action(plan)[Action.MERGED]
    report = engine.apply_consolidation([merge])
    assert report.id is not None and report.counts == {"merged": 1, "deferred": 0}
    kept = engine.get(planted[LONG].id)
    assert kept.content == LONG and kept.merged_from == (planted[SHORT].id,)
    assert engine.count() == 4 and engine.review_queue() == []
    # one undoable step, like a whole pass
    engine.undo_import(report.id)
    assert engine.count() == 5 and engine.get(planted[LONG].id).merged_from == ()


def test_a_merge_held_by_a_person_goes_to_review(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    merge = _by_action(engine.consolidate(dry_run=True))[Action.MERGED]
    report = engine.apply_consolidation([replace(merge, action=Action.DEFERRED)])
    (step,) = report.steps
    assert step.review_id is not None and engine.count() == 5
    assert [(i.target_id, i.incoming_id) for i in engine.review_queue()] == [
        (planted[LONG].id, planted[SHORT].id)]


def test_steps_of_one_kept_record_applied_apart_carry_only_what_was_applied(
        engine: MemoryEngine, table: TableEmbedder) -> None:
    third = "Bob drinks his coffee black"
    table.put(SHORT, np.eye(384, dtype=np.float32)[0])
    table.put(LONG, np.eye(384, dtype=np.float32)[0] + 0.3 * np.eye(384, dtype=np.float32)[1])
    table.put(third, np.eye(384, dtype=np.float32)[0] + 0.3 * np.eye(384, dtype=np.float32)[2])
    kept = engine.add(NewMemory(SHORT, importance=0.9))
    for text in (LONG, third):
        engine.add(NewMemory(text, importance=0.3))
    plan = engine.consolidate(dry_run=True)
    first, second = plan.steps
    assert {first.kept.id, second.kept.id} == {kept.id}
    assert first.result is not None and len(first.result.merged_from) == 2  # the whole plan
    engine.apply_consolidation([first])
    assert engine.get(kept.id).merged_from == (first.other.id,)  # not the skipped one
    engine.apply_consolidation([second])  # the kept record changed only by the pass: fine
    assert set(engine.get(kept.id).merged_from) == {first.other.id, second.other.id}


def test_a_step_whose_records_changed_since_the_dry_run_is_refused(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    merge = _by_action(engine.consolidate(dry_run=True))[Action.MERGED]
    engine.update(merge.other.id, {"content": "Bob has switched to tea"})
    with pytest.raises(EditConflict, match=merge.other.id):
        engine.apply_consolidation([merge])
    engine.delete([merge.other.id])
    with pytest.raises(RecordNotFound, match=merge.other.id):
        engine.apply_consolidation([merge])
    with pytest.raises(ValidationError, match="steps"):
        engine.apply_consolidation([merge, merge])
    assert engine.get(merge.kept.id).merged_from == () and engine.imports() == []


def test_a_whole_plan_applied_at_once_is_the_pass(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    plan = engine.consolidate(dry_run=True)
    report = engine.apply_consolidation(plan.steps)
    assert report.counts == plan.counts == {"merged": 1, "deferred": 1}
    assert engine.count() == 4 and len(engine.review_queue()) == 1
    assert engine.consolidate(dry_run=True).steps == ()


def test_steps_the_plan_would_never_make_are_refused(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    merge = _by_action(engine.consolidate(dry_run=True))[Action.MERGED]
    chained = replace(merge, kept=planted[OTHER], other=merge.kept)  # the absorber merged away
    with pytest.raises(ValidationError, match=merge.kept.id):
        engine.apply_consolidation([merge, chained])
    # a deferral against a record another step merges away is what the pass itself may plan
    held = replace(merge, action=Action.DEFERRED, kept=merge.other, other=planted[OTHER])
    report = engine.apply_consolidation([held, merge])
    assert report.counts == {"merged": 1, "deferred": 1}


def test_the_dry_run_reports_progress_and_can_be_cancelled(
        engine: MemoryEngine, planted: dict[str, MemoryRecord]) -> None:
    seen: list[tuple[int, int]] = []
    engine.consolidate(dry_run=True, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (5, 5)
    with pytest.raises(Cancelled):
        engine.consolidate(cancelled=lambda: True)
    assert engine.count() == 5 and engine.review_queue() == [] and engine.imports() == []


def _by_action(report: ConsolidationReport) -> dict[Action, ConsolidationStep]:
    return {s.action: s for s in report.steps}
