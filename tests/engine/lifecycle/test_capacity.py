"""Write-time capacity: the episodic ring buffer and strict retention caps (seed 002 §11, §12)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from engine.clock import DeterministicClock
from engine.config import MemoryConfig, RetentionPolicy, memory_config_from_env
from engine.errors import CapacityExceeded, ConfigInvalid, RetentionViolation
from engine.events import EventFilter
from engine.ingest import Action
from engine.lifecycle import EVENT_ROLLED_OFF, RING_ACTOR
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Layer, NewMemory, RelatedLink
from engine.store import StoreSpec
from tests.engine.retrieval.conftest import DAY, NOW, HashEmbedder

# One distinct topic per episode, sharing no words, so no two are near duplicates or gray-zone
# pairs (the review floor is cosine 0.50 with shared words) and each one is novel.
TOPICS = ("violin lessons on tuesday", "a broken bicycle chain", "the tax return deadline",
          "sourdough starter feeding", "a flight to lisbon", "the dentist appointment",
          "planting tomatoes in pots", "a chess tournament result", "the new espresso grinder",
          "renewing a passport", "a leaking kitchen faucet", "marathon training plan")


def _engine(path: Path, **memory: Any) -> MemoryEngine:
    config = EngineConfig(memory=dataclasses.replace(MemoryConfig(), **memory))
    return MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(NOW),
                             embedder=HashEmbedder(), config=config)


def _episode(i: int, *, age_days: float | None = None, agent: str = "a",
             layer: Layer = Layer.EPISODIC) -> NewMemory:
    created = None if age_days is None else NOW - age_days * DAY
    return NewMemory(f"{TOPICS[i]}.", agent_id=agent, layer=layer,
                     importance=0.5, created_at=created)


def _episodic(engine: MemoryEngine, agent: str = "a") -> list[str]:
    return sorted(r.content for r in engine.list_records().records
                  if r.layer is Layer.EPISODIC and r.agent_id == agent)


def test_the_ring_rolls_the_oldest_episodes_off_with_events_and_undo(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_ring_max=4, episodic_keep_recent=1)
    try:
        for i in range(4):  # oldest first: TOPICS[0] is 10 days old, TOPICS[3] 7 days
            assert eng.ingest(_episode(i, age_days=10 - i)).action is Action.INSERTED
        eng.ingest(_episode(4, age_days=1, agent="b"))  # another agent has its own ring
        result = eng.ingest(_episode(5, age_days=2))
        assert result.action is Action.INSERTED
        assert len(_episodic(eng)) == 4
        assert f"{TOPICS[0]}." not in _episodic(eng)  # the oldest rolled off
        assert f"{TOPICS[5]}." in _episodic(eng)
        assert len(_episodic(eng, "b")) == 1
        rolled = eng.events.query(EventFilter(kinds=(EVENT_ROLLED_OFF,)))
        assert len(rolled) == 1
        assert rolled[0].payload["ringMax"] == 4
        assert rolled[0].agent_id == "a"
        deleted = eng.edit_history(rolled[0].record_id)
        assert deleted[0].op == "delete" and deleted[0].actor == RING_ACTOR
        assert deleted[0].before is not None
        eng.restore([deleted[0].before])  # a roll-off is undoable like any deletion
        assert f"{TOPICS[0]}." in _episodic(eng)

        # a batch rolls off as many as it brings, through the same check
        eng.ingest_batch([_episode(6, age_days=3), _episode(7, age_days=3)])
        assert len(_episodic(eng)) == 4
        assert len(eng.events.query(EventFilter(kinds=(EVENT_ROLLED_OFF,)))) == 4
        # engine.add (compaction summaries, derived records) is held to the ring too
        eng.add(_episode(8, age_days=1))
        assert len(_episodic(eng)) == 4
    finally:
        eng.close()


def test_a_full_ring_of_recent_episodes_refuses_the_write(tmp_path: Path) -> None:
    # episodes written just now are inside the 15-minute episodic window: rolling one off
    # would retire a protected recent episode (MEMORY_RETENTION_VIOLATION), so nothing is written
    eng = _engine(tmp_path / "s", episodic_ring_max=3, episodic_keep_recent=1,
                  episodic_window_ms=900_000)
    try:
        for i in range(3):
            eng.ingest(_episode(i))
        before = eng.count()
        # ingest reports a memory's failure in its result (and an ``error`` event) ...
        result = eng.ingest(_episode(3))
        assert result.action is Action.ERROR
        assert result.error_code == "MEMORY_RETENTION_VIOLATION"
        assert result.error is not None and "MEMORY_EPISODIC_RING_MAX=3" in result.error
        assert "'a'" in result.error
        # ... engine.add and batches raise it
        with pytest.raises(RetentionViolation) as caught:
            eng.add(_episode(4))
        assert caught.value.code == "MEMORY_RETENTION_VIOLATION"
        with pytest.raises(RetentionViolation):
            eng.ingest_batch([_episode(5)])
        assert eng.count() == before
        assert _episodic(eng) == sorted(f"{TOPICS[i]}." for i in range(3))
    finally:
        eng.close()


def test_a_write_larger_than_the_ring_is_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_ring_max=3, episodic_keep_recent=1)
    try:
        with pytest.raises(CapacityExceeded) as caught:
            eng.ingest_batch([_episode(i, age_days=5) for i in range(4)])
        assert caught.value.code == "MEMORY_CAPACITY_EXCEEDED"
        assert "one write of 4 episodic records" in str(caught.value)
        assert eng.count() == 0
    finally:
        eng.close()


def test_strict_retention_refuses_a_write_over_a_cap(tmp_path: Path) -> None:
    strict = _engine(tmp_path / "strict", retention_strict=True,
                     retention_policy=RetentionPolicy(semantic_max=2))
    try:
        for i in range(2):
            strict.ingest(_episode(i, age_days=1, layer=Layer.SEMANTIC))
        result = strict.ingest(_episode(2, age_days=1, layer=Layer.SEMANTIC))
        assert result.error_code == "MEMORY_CAPACITY_EXCEEDED"
        assert result.error is not None and "MEMORY_RETENTION_SEMANTIC_MAX" in result.error
        with pytest.raises(CapacityExceeded) as caught:
            strict.add(_episode(2, age_days=1, layer=Layer.SEMANTIC))
        assert caught.value.code == "MEMORY_CAPACITY_EXCEEDED"
        assert "over its retention cap of 2" in str(caught.value)
        assert strict.count() == 2
        # other agents and uncapped layers are not affected
        strict.ingest(_episode(3, age_days=1, layer=Layer.SEMANTIC, agent="b"))
        strict.ingest(_episode(4, age_days=1))
        assert strict.count() == 4
    finally:
        strict.close()
    lenient = _engine(tmp_path / "lenient", retention_policy=RetentionPolicy(semantic_max=2))
    try:
        for i in range(3):  # not strict: stored, and the lifecycle trims it on its next run
            lenient.ingest(_episode(i, age_days=1, layer=Layer.SEMANTIC))
        assert lenient.count() == 3
        assert len(lenient.enforce_retention().selection) == 1
    finally:
        lenient.close()


def test_capacity_settings_from_the_environment() -> None:
    config = memory_config_from_env({"MEMORY_EPISODIC_RING_MAX": "500",
                                     "MEMORY_RETENTION_STRICT": "on"})
    assert config.episodic_ring_max == 500
    assert config.retention_strict is True
    assert MemoryConfig().episodic_ring_max == 0  # no ring unless asked for
    with pytest.raises(ConfigInvalid, match="MEMORY_RETENTION_STRICT"):
        memory_config_from_env({"MEMORY_RETENTION_STRICT": "sometimes"})
    # a ring no larger than the episodes seed 002 §8 keeps untouched would roll them off
    with pytest.raises(ConfigInvalid, match="MEMORY_EPISODIC_RING_MAX"):
        memory_config_from_env({"MEMORY_EPISODIC_RING_MAX": "10",
                                "MEMORY_EPISODIC_KEEP_RECENT": "10"})


def test_a_record_written_with_a_roll_off_keeps_no_link_to_it(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_ring_max=3, episodic_keep_recent=1)
    try:
        for i in range(3):
            eng.ingest(_episode(i, age_days=10 - i))
        by_text = {r.content: r for r in eng.list_records().records}
        oldest, linked = by_text[f"{TOPICS[0]}."], by_text[
            f"{TOPICS[1]}."]
        # a symmetric pair of links, as ingest leaves them
        eng.store.write([oldest.replace(related=(RelatedLink(linked.id, 0.4),)),
                         linked.replace(related=(RelatedLink(oldest.id, 0.4),))],
                        eng.embed_texts([oldest.content, linked.content]))
        assert eng.ingest(_episode(3, age_days=1)).action is Action.INSERTED
        live = {r.id for r in eng.list_records().records}
        assert oldest.id not in live  # rolled off
        assert eng.get(linked.id).related == ()  # its link to the rolled-off record is gone
        assert all(link.id in live for r in eng.list_records().records for link in r.related)
        unlink = eng.edit_history(linked.id)[0]
        assert (unlink.op, unlink.actor) == ("update", RING_ACTOR)
    finally:
        eng.close()
