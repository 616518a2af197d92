"""The social layer handler on hand-built interactions."""

from __future__ import annotations

import pytest

from engine.clock import DeterministicClock
from engine.events import EventFilter
from engine.layers import SocialObservation, summarize
from engine.layers.social import summary_record_id
from engine.memory_engine import MemoryEngine
from engine.records import Layer, NewMemory

HOUR = 3_600_000.0


def _talk(engine: MemoryEngine, clock: DeterministicClock, counterpart: str,
          sentiment: float | None, agent: str = "scout") -> str:
    clock.advance(HOUR)
    social = {"otherAgentId": counterpart}
    if sentiment is not None:
        social["sentiment"] = sentiment  # type: ignore[assignment]
    record = engine.add(NewMemory(f"talked with {counterpart} at {clock.now()}", agent_id=agent,
                                  layer=Layer.SOCIAL, metadata={"social": social}))
    return record.id


def test_summarize_rising_trend_and_ewma() -> None:
    obs = [SocialObservation(f"r{i}", "a", "bob", s, 1000.0 * i)
           for i, s in enumerate([-0.5, -0.2, 0.1, 0.4, 0.7])]
    [summary] = summarize(reversed(obs))  # order given does not matter
    assert summary.interactions == 5
    assert summary.first_contact == 0.0 and summary.last_contact == 4000.0
    assert summary.trend == "rising"
    assert summary.slope == pytest.approx(0.3)
    assert summary.mean_sentiment == pytest.approx(0.1)
    ewma = -0.5
    for s in (-0.2, 0.1, 0.4, 0.7):
        ewma = 0.3 * s + 0.7 * ewma
    assert summary.sentiment == pytest.approx(ewma, abs=1e-6)
    assert [p.sentiment for p in summary.series] == [-0.5, -0.2, 0.1, 0.4, 0.7]
    assert summary.series[-1].ewma == pytest.approx(ewma, abs=1e-6)


def test_summarize_falling_steady_unknown() -> None:
    falling = [SocialObservation(f"f{i}", "a", "x", s, i) for i, s in enumerate([0.9, 0.5, 0.0])]
    steady = [SocialObservation(f"s{i}", "a", "y", 0.2, i) for i in range(4)]
    unknown = [SocialObservation("u0", "a", "z", None, 0.0),
               SocialObservation("u1", "a", "z", 0.5, 1.0)]
    trends = {s.counterpart: s.trend for s in summarize(falling + steady + unknown)}
    assert trends == {"x": "falling", "y": "steady", "z": "unknown"}


def test_handler_keeps_one_summary_per_counterpart(engine: MemoryEngine,
                                                   clock: DeterministicClock) -> None:
    service = engine.layers
    for s in (-0.6, -0.1, 0.3, 0.8):
        _talk(engine, clock, "bob", s)
    _talk(engine, clock, "carol", None)
    assert service.flush() == 5
    summaries = {s.counterpart: s for s in service.social_summaries("scout")}
    assert set(summaries) == {"bob", "carol"}
    bob = summaries["bob"]
    assert bob.interactions == 4 and bob.trend == "rising"
    assert bob.last_contact == clock.now() - HOUR
    record = engine.get(summary_record_id("scout", "bob"))
    assert record.layer is Layer.SOCIAL
    assert record.metadata["derivedBy"] == "social-handler"
    assert record.metadata["social"]["interactionCount"] == 4
    assert record.metadata["social"]["trend"] == "rising"
    assert "4 interactions" in record.content and "rising" in record.content
    # A new contact updates the same record (stable id), not a second one.
    _talk(engine, clock, "bob", -0.9)
    service.flush()
    updated = engine.get(summary_record_id("scout", "bob"))
    assert updated.version == record.version + 1
    assert updated.metadata["social"]["interactionCount"] == 5
    social_records = [r for r in engine.list_records().records if r.layer is Layer.SOCIAL
                      and "derivedBy" in r.metadata]
    assert len(social_records) == 2
    kinds = [e.kind for e in engine.events.query(EventFilter(kinds=["memory:social:summary"]))]
    assert len(kinds) == 3  # bob, carol, then bob again


def test_user_delete_removes_evidence_retention_delete_keeps_it(
        engine: MemoryEngine, clock: DeterministicClock) -> None:
    first = _talk(engine, clock, "bob", 0.5)
    second = _talk(engine, clock, "bob", -0.5)
    engine.layers.flush()
    engine.delete([first])  # a user's deletion: the memory was wrong
    engine.delete([second], actor="lifecycle", reason="compacted")
    engine.layers.flush()
    [bob] = engine.layers.social_summaries("scout", "bob")
    assert bob.interactions == 1 and bob.sentiment == -0.5


def test_social_cap_keeps_most_recent_counterparts(capped_engine: MemoryEngine,
                                                   clock: DeterministicClock) -> None:
    for name in ("ann", "ben", "cat"):
        _talk(capped_engine, clock, name, 0.1)
    capped_engine.layers.flush()
    assert [s.counterpart for s in capped_engine.layers.social_summaries("scout")] == \
        ["cat", "ben"]
    assert summary_record_id("scout", "ann") not in capped_engine.store.view
    _talk(capped_engine, clock, "ann", 0.2)  # ann is back in touch: ben drops out
    capped_engine.layers.flush()
    assert summary_record_id("scout", "ann") in capped_engine.store.view
    assert summary_record_id("scout", "ben") not in capped_engine.store.view


def test_background_worker_follows_ingest(engine: MemoryEngine,
                                          clock: DeterministicClock) -> None:
    service = engine.start_layers()
    _talk(engine, clock, "dan", 0.4)
    engine.close_layers()  # drains the queue before stopping
    assert service.errors == []
    assert summary_record_id("scout", "dan") in engine.store.view


def test_sync_catches_records_whose_events_were_dropped(engine: MemoryEngine,
                                                       clock: DeterministicClock) -> None:
    from engine.records import MemoryRecord

    engine.layers.flush()
    silent = MemoryRecord.create(NewMemory("met fay quietly", agent_id="scout",
                                           layer=Layer.SOCIAL,
                                           metadata={"social": {"otherAgentId": "fay",
                                                                "sentiment": 0.3}}),
                                 now_ms=clock.now())
    engine.store.write([silent])  # no event at all, as if sampling had dropped it
    assert engine.layers.social_summaries("scout", "fay") == []
    engine.layers.sync()
    [fay] = engine.layers.social_summaries("scout", "fay")
    assert fay.interactions == 1


def test_ingest_pipeline_feeds_the_layers(engine: MemoryEngine,
                                          clock: DeterministicClock) -> None:
    service = engine.layers
    actions: list[str] = []
    for i, sentiment in enumerate((-0.5, 0.0, 0.6)):
        clock.advance(HOUR)
        result = engine.ingest(NewMemory(
            f"Conversation {i} about the harbour schedule, berth {i * 17}", agent_id="scout",
            layer=Layer.SOCIAL, importance=0.5,
            metadata={"social": {"otherAgentId": "bob", "sentiment": sentiment},
                      "spatial": {"x": i, "y": 0, "z": 0}}))
        assert result.record is not None
        actions.append(str(result.action))
    service.flush()
    [bob] = service.social_summaries("scout")
    assert bob.interactions == actions.count("inserted")
    assert engine.get(summary_record_id("scout", "bob")).layer is Layer.SOCIAL
    assert engine.spatial_within((0, 0, 0), 10)
