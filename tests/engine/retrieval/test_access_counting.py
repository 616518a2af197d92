"""Access counting and appends against the data retrieval derives from a view snapshot.

A non-inspecting retrieval counts accesses of the packed records; the next retrieval (what an
agent calling retrieve in a loop always sees) must reuse everything that does not read the
access columns, recompute what does, and rank exactly as a fresh retriever over the same data.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.memory_engine import MemoryEngine
from engine.records import Layer
from engine.retrieval import COMPONENTS, RetrievalRequest, RetrievedBundle
from engine.retrieval import retriever as retriever_module
from engine.retrieval.retriever import Retriever
from engine.store.view import ViewSnapshot
from tests.engine.retrieval.conftest import make_record, write

TOPICS = ["cat", "deploy", "coffee", "garden", "travel", "music", "budget"]
REQUEST = RetrievalRequest(max_tokens=60, query="cat garden coffee", agent_id="a")


def _fill(engine: MemoryEngine, count: int = 120, start: int = 0) -> None:
    layers = (Layer.SEMANTIC, Layer.EPISODIC)
    write(engine, [make_record(i, f"note {i} about the {TOPICS[i % 7]} and the "
                                  f"{TOPICS[(i * 3) % 7]} on day {i % 13}",
                               layer=layers[i % 2], importance=(i % 10) / 10,
                               age_days=(i % 40) / 4 + 0.1)
                   for i in range(start, start + count)])


def _counting(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> Counter[str]:
    """Count calls of the retriever module's helpers ``names`` (still doing their work)."""
    calls: Counter[str] = Counter()

    def wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)
        return counted

    for name in names:
        monkeypatch.setattr(retriever_module, name, wrap(name, getattr(retriever_module, name)))
    return calls


def _retriever(engine: MemoryEngine) -> Retriever:
    return engine._retrieval_runtime().retriever


def _run(retriever: Retriever, engine: MemoryEngine, snapshot: ViewSnapshot) -> RetrievedBundle:
    vector = engine.embed_texts([REQUEST.query or ""])
    assert vector is not None
    return retriever.retrieve(snapshot, REQUEST, now_ms=engine.clock.now(),
                              memory=engine.config.memory, query_vector=vector[0],
                              fetch=engine.store.get_many)


def _fresh_snapshot(engine: MemoryEngine) -> ViewSnapshot:
    """The engine's current snapshot with nothing derived from it yet (same arrays).

    Its access columns are checked against the records read back from Chroma, so the data is
    what the store holds.
    """
    snapshot = engine.store.view.snapshot()
    live = snapshot.live_rows
    stored = engine.store.get_many([snapshot.ids[r] for r in live])
    assert [r.access_count for r in stored] == snapshot.access_count[live].tolist()
    assert [r.last_accessed for r in stored] == snapshot.last_accessed[live].tolist()
    return dataclasses.replace(snapshot, _lists={}, _derived={}, _access_derived={},
                               _grown={})


def _ranking(bundle: RetrievedBundle) -> list[tuple[str, float]]:
    diagnostics = bundle.diagnostics
    rows = diagnostics.rows[diagnostics.eligible[diagnostics.rows]]
    pairs = [(diagnostics.ids[r], float(diagnostics.scores[r])) for r in rows]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def _assert_same(bundle: RetrievedBundle, fresh: RetrievedBundle) -> None:
    assert [r.id for r in bundle.records] == [r.id for r in fresh.records]
    ours, theirs = _ranking(bundle), _ranking(fresh)
    assert [i for i, _ in ours] == [i for i, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], rtol=0, atol=1e-9)
    by_id = {c.id: c.components for c in fresh.diagnostics.candidates}
    for candidate in bundle.diagnostics.candidates:
        for name in COMPONENTS:
            assert candidate.components[name] == pytest.approx(
                by_id[candidate.id][name], abs=1e-9), (candidate.id, name)


def test_access_counting_keeps_derived_data_and_redoes_the_access_parts(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(engine)
    calls = _counting(monkeypatch, ["neighbour_matrix", "layer_component", "recency_base",
                                    "bm25_weights", "access_frequency", "importance_base"])
    first = engine.retrieve(REQUEST)  # computes everything, then counts accesses
    before = dict(calls)
    assert all(before[name] >= 1 for name in ("neighbour_matrix", "layer_component",
                                               "recency_base", "access_frequency",
                                               "importance_base", "bm25_weights"))
    second = engine.retrieve(REQUEST)  # after access counting
    assert second.diagnostics.eligible is first.diagnostics.eligible
    for name in ("neighbour_matrix", "layer_component", "recency_base", "bm25_weights"):
        assert calls[name] == before[name], name  # survived the access-only write
    assert calls["access_frequency"] == before["access_frequency"] + 1
    assert calls["importance_base"] == before["importance_base"] + 1


def test_access_counting_changes_the_access_component(engine: MemoryEngine) -> None:
    _fill(engine)
    looked = engine.retrieve(REQUEST, inspect=True)
    packed = [r.id for r in engine.retrieve(REQUEST).records]
    assert packed
    cap = engine.retrieval_config.access_cap
    access = {c.id: c.components for c in engine.retrieve(REQUEST, inspect=True)
              .diagnostics.candidates}
    earlier = {c.id: c.components for c in looked.diagnostics.candidates}
    for record_id in packed:
        assert engine.get(record_id).access_count == 1
        assert access[record_id]["access"] == pytest.approx(1 / cap)
        assert earlier[record_id]["access"] == 0.0
        assert access[record_id]["importance"] > earlier[record_id]["importance"]  # the boost


def test_touch_is_one_metadata_write_of_the_touched_records(engine: MemoryEngine) -> None:
    _fill(engine, count=12)
    updates: list[dict[str, Any]] = []
    before = engine.get("r003")
    collection = engine.store._collection
    stored = collection.get(ids=["r003"], include=["embeddings", "documents"])
    engine.store._collection = _Spy(collection, updates)
    engine.touch(["r003", "r005"])
    assert len(updates) == 1
    assert updates[0]["ids"] == ["r003", "r005"]
    assert set(updates[0]) == {"ids", "metadatas"}  # no documents, no embeddings
    after = engine.get("r003")
    assert after.access_count == before.access_count + 1
    assert after.last_accessed == engine.clock.now()
    assert after.replace(access_count=before.access_count,
                         last_accessed=before.last_accessed) == before
    now = collection.get(ids=["r003"], include=["embeddings", "documents"])
    assert now["documents"] == stored["documents"]
    np.testing.assert_array_equal(now["embeddings"], stored["embeddings"])  # left alone
    assert float(np.abs(np.asarray(now["embeddings"])).sum()) > 0.0


class _Spy:
    """The Chroma collection, recording ``update`` calls."""

    def __init__(self, collection: Any, updates: list[dict[str, Any]]) -> None:
        self._collection = collection
        self._updates = updates

    def update(self, **kwargs: Any) -> None:
        self._updates.append(kwargs)
        self._collection.update(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


def test_results_after_touches_and_appends_match_a_fresh_retriever(
        engine: MemoryEngine) -> None:
    _fill(engine)
    retriever = _retriever(engine)
    for step in range(3):
        engine.retrieve(REQUEST)  # counts accesses
        engine.touch([f"r{(step * 17) % 120:03d}"])
        bundle = _run(retriever, engine, engine.store.view.snapshot())
        _assert_same(bundle, _run(Retriever(engine.retrieval_config), engine,
                                  _fresh_snapshot(engine)))
        _fill(engine, count=1 + step, start=200 + 10 * step)  # an append
        bundle = _run(retriever, engine, engine.store.view.snapshot())
        _assert_same(bundle, _run(Retriever(engine.retrieval_config), engine,
                                  _fresh_snapshot(engine)))


def test_a_snapshot_taken_before_access_counting_keeps_its_access_parts(
        engine: MemoryEngine) -> None:
    _fill(engine, count=30)
    retriever = _retriever(engine)
    old = engine.store.view.snapshot()
    looked = _run(retriever, engine, old)
    engine.retrieve(REQUEST)
    assert engine.store.view.snapshot().access_version == old.access_version + 1
    again = _run(retriever, engine, old)  # a reader still holding the older snapshot
    access = COMPONENTS.index("access")
    np.testing.assert_array_equal(again.diagnostics.components[:, access],
                                  looked.diagnostics.components[:, access])
