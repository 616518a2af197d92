"""The computations the views used to do over engine internals, now engine functions (issue 22):
the threshold what-if, LLM call activity, the map's points and a retrieval's inspection."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import engine
import engine.llm
from engine.clock import DeterministicClock
from engine.ledger import Ledger
from engine.llm.persistence import CallRow, LLMLedger
from engine.records import Layer, NewMemory, TrustTier
from engine.whatif import compare_thresholds
from tests.support.fakes import HashingEmbedder


@pytest.fixture
def memory(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[engine.MemoryEngine]:
    eng = engine.MemoryEngine.open(engine.StoreSpec(str(store_dir)), embedder=fake_embedder,
                                   clock=clock)
    yield eng
    eng.close()


def _cosine(memory: engine.MemoryEngine, a: str, b: str) -> float:
    va, vb = memory.store.view.vector(a), memory.store.view.vector(b)
    assert va is not None and vb is not None
    return float(np.dot(va, vb))


# -- threshold what-if -----------------------------------------------------------------------


def test_compare_thresholds_is_exact_per_partition() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(size=8)
    vectors = [base, base + rng.normal(scale=0.35, size=8), rng.normal(size=8)]
    unit = np.asarray([v / np.linalg.norm(v) for v in vectors], np.float32)
    sims = unit @ unit.T
    snapshot: Any = SimpleNamespace(
        n=3, alive=np.ones(3, bool), has_vector=np.ones(3, bool), vectors=unit,
        agent=np.zeros(3, np.int32), privacy=np.zeros(3, np.int8), layer=np.zeros(3, np.int8),
        ids=["a", "b", "c"], contents=["A", "B", "C"])
    s01 = float(sims[0, 1])
    lowered = compare_thresholds(snapshot, old=min(0.99, s01 + 0.01), new=s01 - 0.01)
    assert [(p.a, p.b, p.verdict) for p in lowered.pairs] == [("a", "b", "merge")]
    raised = compare_thresholds(snapshot, old=s01 - 0.01, new=min(0.99, s01 + 0.01))
    assert [p.verdict for p in raised.pairs] == ["split"]
    assert compare_thresholds(snapshot, 0.9, 0.9).total == 0
    # Another agent's copy of the same vector is another partition: never a pair.
    snapshot.agent = np.asarray([0, 1, 0], np.int32)
    assert compare_thresholds(snapshot, old=min(0.99, s01 + 0.01), new=s01 - 0.01).total == 0


def test_threshold_what_if_reads_the_policy_and_writes_nothing(
        memory: engine.MemoryEngine) -> None:
    a = memory.add(NewMemory(content="alice likes green tea in the morning", agent_id="alice"))
    b = memory.add(NewMemory(content="alice likes strong black coffee in the evening",
                             agent_id="alice"))
    memory.add(NewMemory(content="alice likes green tea in the morning", agent_id="bob"))
    similarity = _cosine(memory, a.id, b.id)
    old = memory.ingest_policy.threshold(TrustTier.AGENT, semantic=True)
    assert similarity < old  # the pair does not merge today
    count, events = memory.count(), len(memory.events.query(engine.EventFilter()))

    result = engine.threshold_what_if(memory, TrustTier.AGENT, similarity - 0.01)

    assert isinstance(result, engine.WhatIf) and result.old == old
    assert [(p.a, p.b, p.verdict) for p in result.pairs] == [(a.id, b.id, "merge")]
    assert result.pairs[0].similarity == pytest.approx(similarity)
    assert (result.pairs[0].content_a, result.pairs[0].content_b) == (a.content, b.content)
    assert result.total == 1 and result.rows_compared == 2 and not result.sampled
    assert memory.count() == count and len(memory.events.query(engine.EventFilter())) == events
    with pytest.raises(AttributeError):
        result.total = 2  # type: ignore[misc]  # frozen


# -- LLM call activity -----------------------------------------------------------------------


def test_llm_activity_reads_newest_first_without_migrating(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    try:
        assert engine.llm.llm_activity(ledger) == engine.llm.LLMActivity()
        assert ledger.version("llm") == 0  # a read never creates the tables
        llm = LLMLedger(ledger)
        llm.add_call(CallRow(1000.0, "c1", "openai", "gpt-x", "summarize", 1, "retry",
                             status=503, failure="server", input_tokens=10))
        llm.add_call(CallRow(2000.0, "c1", "openai", "gpt-x", "summarize", 2, "ok",
                             input_tokens=10, output_tokens=4, cost=Decimal("0.00012"),
                             latency_ms=850.0))
        llm.add_transition(1500.0, "openai", "closed", "open", "3 failures", 3)

        activity = engine.llm.llm_activity(ledger, limit=5)

        assert [c.attempt for c in activity.calls] == [2, 1]
        newest = activity.calls[0]
        assert (newest.ts_ms, newest.purpose, newest.model, newest.outcome, newest.failure,
                newest.input_tokens, newest.output_tokens, newest.cost_usd,
                newest.latency_ms) == (2000.0, "summarize", "gpt-x", "ok", None, 10, 4,
                                       0.00012, 850.0)
        assert activity.calls[1].failure == "server" and activity.calls[1].latency_ms is None
        assert activity.transitions == (
            engine.llm.BreakerTransition(1500.0, "closed", "open", "3 failures"),)
        assert len(engine.llm.llm_activity(ledger, limit=1).calls) == 1
    finally:
        ledger.close()


# -- the map's points ------------------------------------------------------------------------


def test_map_points_carry_each_records_layer_agent_importance_and_text(
        memory: engine.MemoryEngine) -> None:
    added = [
        memory.add(NewMemory(content="the robot charges at dock 3", agent_id="robot",
                             layer=Layer.EPISODIC, importance=0.9)),
        memory.add(NewMemory(content="Ana prefers tea", agent_id="assistant", importance=0.2)),
        memory.add(NewMemory(content="deploys happen on Fridays", agent_id="assistant",
                             layer=Layer.PROCEDURAL, importance=0.5)),
    ]
    gone = memory.add(NewMemory(content="deleted before mapping", agent_id="robot"))
    memory.delete([gone.id])

    points = engine.map_points(memory)

    assert points.projection.points.shape == (3, 2)
    by_id = {r.id: r for r in added}
    assert set(points.projection.ids) == set(by_id)
    for i, record_id in enumerate(points.projection.ids):
        record = by_id[record_id]
        assert points.texts[i] == record.content
        assert points.layer_names[int(points.layer[i])] == record.layer.value
        assert points.agents[int(points.agent[i])] == record.agent_id
        assert points.importance[i] == pytest.approx(record.importance)
    assert points.layer_names == tuple(layer.value for layer in Layer)
    with pytest.raises(engine.ValidationError, match="method"):
        engine.map_points(memory, "tsne")


# -- a retrieval's inspection ----------------------------------------------------------------


def test_inspect_retrieval_names_candidates_and_counts_no_access(
        memory: engine.MemoryEngine, fake_embedder: HashingEmbedder) -> None:
    tea = memory.add(NewMemory(content="Ana drinks green tea every morning", agent_id="a"))
    other = memory.add(NewMemory(content="the build server runs on Fridays", agent_id="a"))
    request = engine.RetrievalRequest(max_tokens=200, query="what does Ana drink?")

    inspection = engine.inspect_retrieval(memory, request)

    assert isinstance(inspection.bundle, engine.RetrievedBundle)
    assert tea.id in [r.id for r in inspection.bundle.records]
    assert inspection.texts[tea.id] == tea.content
    assert inspection.texts[other.id] == other.content
    assert inspection.query_vector is not None
    np.testing.assert_allclose(inspection.query_vector,
                               fake_embedder.embed([request.query or ""])[0])
    assert memory.get(tea.id).access_count == tea.access_count  # inspect: nothing touched
    no_query = engine.inspect_retrieval(memory, engine.RetrievalRequest(max_tokens=200))
    assert no_query.query_vector is None
