"""Spatial index queries and the physics-event adapter."""

from __future__ import annotations

import math

import pytest

from engine.clock import DeterministicClock
from engine.errors import ValidationError
from engine.layers import SpatialEvent, SpatialEventKind, SpatialIndex
from engine.memory_engine import MemoryEngine
from engine.records import Category, Layer, MemoryRecord, NewMemory, Privacy, TrustTier


def _record(record_id: str, xyz: tuple[float, float, float], *, agent: str = "a",
            t: float = 0.0) -> MemoryRecord:
    return MemoryRecord(id=record_id, content=f"at {xyz}", layer=Layer.SPATIAL, agent_id=agent,
                        importance=0.5, confidence=0.5, category=Category.FACT, tags=(),
                        privacy=Privacy.PRIVATE, source="t", source_tier=TrustTier.AUTO,
                        created_at=t,
                        last_accessed=t, metadata={"spatial": dict(zip("xyz", xyz,
                                                                       strict=True))})


@pytest.fixture
def index() -> SpatialIndex:
    idx = SpatialIndex()
    idx.update([_record("o", (0, 0, 0)), _record("p", (3, 4, 0), t=5),
                _record("q", (0, 0, 10), agent="b"), _record("r", (-3, -4, 0), t=9),
                _record("s", (1, 1, 1), t=2)])
    return idx


def test_within_radius_is_inclusive_and_sorted(index: SpatialIndex) -> None:
    hits = index.within((0, 0, 0), 5.0)
    assert [h.record_id for h in hits] == ["o", "s", "p", "r"]  # p and r tie at 5: by id
    assert hits[1].distance == pytest.approx(math.sqrt(3))
    assert [h.record_id for h in index.within((0, 0, 0), 4.99)] == ["o", "s"]
    assert [h.record_id for h in index.within((0, 0, 10), 0.0)] == ["q"]


def test_filters_agent_time_and_limit(index: SpatialIndex) -> None:
    assert [h.record_id for h in index.within((0, 0, 0), 100, agent_id="b")] == ["q"]
    assert [h.record_id for h in index.within((0, 0, 0), 100, since=3, until=9)] == ["p", "r"]
    assert [h.record_id for h in index.within((0, 0, 0), 100, limit=2)] == ["o", "s"]
    assert index.within((0, 0, 0), 100, agent_id="nobody") == []


def test_nearest_with_ties(index: SpatialIndex) -> None:
    assert [h.record_id for h in index.nearest((0, 0, 0), 3)] == ["o", "s", "p"]
    assert [h.record_id for h in index.nearest((3, 4, 0), 1)] == ["p"]
    assert index.nearest((0, 0, 0), 0) == []


def test_move_and_remove(index: SpatialIndex) -> None:
    moved = _record("o", (100, 100, 100))
    index.update([moved])
    assert [h.record_id for h in index.nearest((100, 100, 100), 1)] == ["o"]
    index.remove(["o", "unknown"])
    assert "o" not in index and len(index) == 4


def test_bad_queries_raise(index: SpatialIndex) -> None:
    with pytest.raises(ValidationError, match="radius"):
        index.within((0, 0, 0), -1)
    with pytest.raises(ValidationError, match="center"):
        index.within((0, 0), 1)
    with pytest.raises(ValidationError, match="center"):
        index.nearest((0, float("nan"), 0), 1)


def test_engine_spatial_query_follows_records(engine: MemoryEngine) -> None:
    near = engine.add(NewMemory("the well", layer=Layer.SPATIAL,
                                metadata={"spatial": {"x": 1, "y": 0, "z": 0}}))
    engine.add(NewMemory("the tower", layer=Layer.SPATIAL,
                         metadata={"spatial": {"x": 50, "y": 0, "z": 0}}))
    engine.add(NewMemory("no place at all", layer=Layer.SEMANTIC))
    assert [h.record_id for h in engine.spatial_within((0, 0, 0), 2)] == [near.id]
    engine.update(near.id, {"metadata": {"spatial": {"x": 40, "y": 0, "z": 0}}})
    engine.layers.flush()
    assert [h.record_id for h in engine.spatial_nearest((0, 0, 0), 1)] == [near.id]
    assert engine.spatial_within((0, 0, 0), 2) == []
    engine.delete([near.id])
    engine.layers.flush()
    assert len(engine.layers.spatial_points()) == 1


def test_adapter_ingests_only_flagged_events(engine: MemoryEngine,
                                             clock: DeterministicClock) -> None:
    adapter = engine.layers.spatial_adapter()
    move = SpatialEventKind.MOVE
    assert adapter.handle(SpatialEvent(move, "bot", (0, 0, 0), region="hall")) is not None
    clock.advance(1000)
    assert adapter.handle(SpatialEvent(move, "bot", (1, 0, 0), region="hall")) is None
    clock.advance(1000)
    crossed = adapter.handle(SpatialEvent(move, "bot", (5, 0, 0), region="kitchen"))
    clock.advance(1000)
    assert crossed is not None and "from hall into kitchen" in crossed.content
    contact = SpatialEventKind.CONTACT
    first = adapter.handle(SpatialEvent(contact, "bot", (5, 1, 0), contact_class="door"))
    assert first is not None and first.metadata["spatialEvent"]["contactClass"] == "door"
    assert adapter.handle(SpatialEvent(contact, "bot", (6, 1, 0), contact_class="Door")) is None
    engine.layers.flush()
    assert len(engine.spatial_within((5, 0, 0), 1.5)) == 2
    # A new adapter (e.g. after a restart) remembers what was seen from the stored memories.
    again = engine.layers.spatial_adapter()
    assert again.handle(SpatialEvent(contact, "bot", (0, 0, 0), contact_class="door")) is None
    assert again.handle(SpatialEvent(move, "bot", (5, 2, 0), region="kitchen")) is None
    with pytest.raises(ValidationError, match="contact_class"):
        again.handle(SpatialEvent(contact, "bot", (0, 0, 0)))


def test_read_only_opener_builds_layers_from_records(engine: MemoryEngine,
                                                     clock: DeterministicClock,
                                                     store_dir: object) -> None:
    engine.add(NewMemory("met eve", agent_id="a", layer=Layer.SOCIAL,
                         metadata={"social": {"otherAgentId": "eve", "sentiment": 0.5},
                                   "spatial": {"x": 1, "y": 2, "z": 3}}))
    from engine.store import StoreSpec

    reader = MemoryEngine.open(StoreSpec(str(store_dir), read_only=True), clock=clock)
    try:
        [eve] = reader.layers.social_summaries("a")
        assert eve.counterpart == "eve" and eve.sentiment == 0.5
        assert [h.x for h in reader.spatial_nearest((0, 0, 0), 5)] == [1.0]
    finally:
        reader.close_layers()
        reader.close()
