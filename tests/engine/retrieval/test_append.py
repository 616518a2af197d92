"""Retrieval after appends against a full recompute (issue #4: an agent that writes and reads
in a loop).

What retrieval derives from a view state is extended by the rows appended since
(:meth:`ViewSnapshot.grown`) instead of recomputed. These tests hold every extension to what a
full recompute over the same snapshot gives: the same packed records, the same scores and
components bit for bit, the same determinism hash (seed 002 QG2) — through appends that move
the centring's mean, the decay epoch and the time neighbours, add records without vectors,
expired ones and other agents', and across deletes, updates and access counting (which start
a new lineage or redo only the access parts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.config import MemoryConfig, RetrievalConfig
from engine.records import Layer, MemoryRecord, NewMemory
from engine.retrieval import RetrievalRequest, RetrievedBundle
from engine.retrieval import retriever as retriever_module
from engine.retrieval import scoring as scoring_module
from engine.retrieval.retriever import Retriever
from engine.retrieval.scoring import (
    DECAY_EPOCH_MS,
    Centring,
    TimeOrder,
    mean_rows,
    neighbour_matrix,
)
from engine.store.view import ColumnarView, ViewSnapshot

NOW = 1_750_000_000_000.0
MINUTE = 60_000.0
DIM = 48
WORDS = ["cat", "garden", "coffee", "deploy", "budget", "music", "travel", "lake", "guitar",
         "friend", "birthday", "paint", "swim", "book"]
MEMORY = MemoryConfig()


class Workload:
    """A view and the records in it; records share a direction in embedding space."""

    def __init__(self, seed: int = 4) -> None:
        self.rng = np.random.default_rng(seed)
        self.view = ColumnarView(DIM, capacity=16)
        self.records: dict[str, MemoryRecord] = {}
        self.count = 0
        self.shared = self.rng.standard_normal(DIM).astype(np.float32)

    def add(self, count: int = 1, *, created: float | None = None, agent: str | None = None,
            vector: bool = True, tags: tuple[str, ...] = (), expires: float | None = None
            ) -> list[str]:
        """Append ``count`` records (one ``upsert``); returns their ids."""
        batch = [self._record(created, agent, tags, expires) for _ in range(count)]
        vectors = self.rng.standard_normal((count, DIM)).astype(np.float32) + self.shared
        if not vector:
            vectors[:] = 0.0  # stored without an embedding
        self.view.upsert(batch, vectors)
        self.records.update((r.id, r) for r in batch)
        return [r.id for r in batch]

    def _record(self, created: float | None, agent: str | None, tags: tuple[str, ...],
                expires: float | None) -> MemoryRecord:
        i = self.count
        self.count += 1
        text = " ".join(self.rng.choice(WORDS, size=8))
        if i % 5 == 0:
            text = f"Caroline: {text}"  # a speaker turn
        when = created if created is not None else \
            NOW - 40 * 86_400_000.0 + 5 * MINUTE * i  # turns minutes apart: neighbours
        new = NewMemory(f"{text} {i}", agent_id=agent or f"a{i % 3}",
                        layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                        importance=float(self.rng.random()), created_at=when, tags=tags,
                        expires_at=expires)
        return MemoryRecord.create(new, now_ms=when, record_id=f"r{i:05d}")

    def fetch(self, ids: Sequence[str]) -> list[MemoryRecord]:
        return [self.records[i] for i in ids]

    def query(self) -> tuple[str, npt.NDArray[np.float32]]:
        vector = self.rng.standard_normal(DIM).astype(np.float32) + self.shared
        return "what did caroline say about the " + " ".join(self.rng.choice(WORDS, size=3)), \
            vector / np.linalg.norm(vector)


def _fresh(snapshot: ViewSnapshot) -> ViewSnapshot:
    """``snapshot`` (the same arrays) with nothing derived from it or its lineage yet."""
    return dataclasses.replace(snapshot, _lists={}, _derived={}, _access_derived={}, _grown={})


def _retrieve(retriever: Retriever, work: Workload, snapshot: ViewSnapshot, query: str,
              vector: npt.NDArray[np.float32], agent: str | None, now: float
              ) -> RetrievedBundle:
    request = RetrievalRequest(max_tokens=120, query=query, agent_id=agent)
    return retriever.retrieve(snapshot, request, now_ms=now, memory=MEMORY,
                              query_vector=vector, fetch=work.fetch)


def _assert_identical(bundle: RetrievedBundle, fresh: RetrievedBundle) -> None:
    ours, theirs = bundle.diagnostics, fresh.diagnostics
    assert [r.id for r in bundle.records] == [r.id for r in fresh.records]
    assert bundle.records  # something was packed: the comparison means something
    np.testing.assert_array_equal(ours.scores, theirs.scores)  # bit for bit
    np.testing.assert_array_equal(ours.components, theirs.components)
    np.testing.assert_array_equal(ours.eligible, theirs.eligible)
    np.testing.assert_array_equal(ours.neighbours, theirs.neighbours)
    np.testing.assert_array_equal(ours.blended, theirs.blended)
    np.testing.assert_array_equal(ours.drop_codes, theirs.drop_codes)
    assert bundle.retrieval_hash() == fresh.retrieval_hash()


def _check(retriever: Retriever, work: Workload, agent: str | None, now: float) -> None:
    """The long-lived retriever on the view's snapshot against a fresh one on a fresh copy."""
    query, vector = work.query()
    snapshot = work.view.snapshot()
    bundle = _retrieve(retriever, work, snapshot, query, vector, agent, now)
    fresh = _retrieve(Retriever(retriever.config), work, _fresh(snapshot), query, vector,
                      agent, now)
    _assert_identical(bundle, fresh)


# the query-time blend with each record's predecessor (an agent's records are 30 minutes
# apart here: a window of an hour gives them predecessors, which appends change)
PLAIN = RetrievalConfig(semantic_blend=0.0)
BLENDED = RetrievalConfig(semantic_blend=0.3, context_window_ms=3_600_000.0,
                          semantic_blend_layers=frozenset(Layer))


@pytest.mark.parametrize("config", [PLAIN, BLENDED], ids=["plain", "blended"])
@pytest.mark.parametrize("agent", [None, "a1"])
def test_retrieval_after_appends_is_a_full_recompute_bit_for_bit(
        agent: str | None, config: RetrievalConfig) -> None:
    work = Workload()
    work.add(2000)
    retriever = Retriever(config)
    now = NOW
    _check(retriever, work, agent, now)
    first_lineage = work.view.snapshot().lineage
    counted = int(np.count_nonzero(work.view.snapshot().has_vector))
    newest = first_newest = max(r.created_at for r in work.records.values())
    for step in range(90):
        if step % 30 == 29:
            work.add(7)  # a batch
        elif step % 11 == 3:
            work.add(vector=False)  # no embedding yet: Jaccard for it
        elif step % 13 == 5:
            work.add(tags=("important",))  # flagged: boosted importance
        elif step % 17 == 7:
            work.add(expires=now - MINUTE, created=now - 2 * MINUTE)  # expired on arrival
        elif step % 19 == 9:
            work.add(agent="a1", created=newest - 20 * 86_400_000.0)  # an old one, inserted
        else:
            newest += 7 * MINUTE  # written "now": moves the decay epoch every ~9 appends
            work.add(created=newest)
        now = max(now, newest) + MINUTE
        _check(retriever, work, agent, now)
    snapshot = work.view.snapshot()
    assert snapshot.lineage == first_lineage  # only appends: every state was extended
    grown = int(np.count_nonzero(snapshot.has_vector))
    assert mean_rows(grown) != mean_rows(counted)  # the centring's mean moved
    assert newest - first_newest > 2 * DECAY_EPOCH_MS  # the decay epoch moved
    if config.semantic_blend:
        query, vector = work.query()
        blended = _retrieve(retriever, work, snapshot, query, vector, agent, now).diagnostics
        assert np.count_nonzero(blended.blended >= 0) > 500


@pytest.mark.parametrize("config", [PLAIN, BLENDED], ids=["plain", "blended"])
def test_deletes_updates_and_access_counting_between_appends_keep_it_a_full_recompute(
        config: RetrievalConfig) -> None:
    work = Workload(seed=9)
    work.add(400)
    retriever = Retriever(config)
    now = NOW
    _check(retriever, work, None, now)
    lineage = work.view.snapshot().lineage
    for step in range(12):
        work.add(created=now + step * MINUTE)
        _check(retriever, work, None, now + 20 * MINUTE)
        if step % 4 == 1:
            work.view.remove([f"r{step * 7:05d}"])
        elif step % 4 == 2:
            record = work.records[f"r{step * 5:05d}"]
            changed = record.replace(importance=0.99, content=record.content + " coffee")
            work.records[changed.id] = changed
            work.view.upsert([changed])  # new content, no vector yet
        else:
            work.view.touch([f"r{step:05d}", f"r{step + 50:05d}"], now)
        touched = step % 4 in (0, 3)
        assert (work.view.snapshot().lineage == lineage) == touched
        lineage = work.view.snapshot().lineage
        _check(retriever, work, None, now + 20 * MINUTE)


def test_the_same_appends_give_the_same_determinism_hash() -> None:
    hashes = []
    for _ in range(2):
        work = Workload(seed=21)
        work.add(600)
        retriever = Retriever()
        query, vector = work.query()
        for step in range(20):
            work.add(created=NOW + step * MINUTE)
            bundle = _retrieve(retriever, work, work.view.snapshot(), query, vector, None,
                               NOW + DECAY_EPOCH_MS)
        hashes.append(bundle.retrieval_hash())
    assert hashes[0] == hashes[1]


def _sizes(monkeypatch: pytest.MonkeyPatch, module: Any, names: list[str],
           size: Callable[..., int]) -> dict[str, list[int]]:
    """Record ``size(*args)`` of each call of ``module``'s functions ``names``."""
    seen: dict[str, list[int]] = {name: [] for name in names}

    def wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            seen[name].append(size(*args))
            return function(*args, **kwargs)
        return recorded

    for name in names:
        monkeypatch.setattr(module, name, wrap(name, getattr(module, name)))
    return seen


def test_an_append_costs_the_new_rows_not_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    work = Workload(seed=2)
    work.add(3000)
    retriever = Retriever()
    query, vector = work.query()
    _retrieve(retriever, work, work.view.snapshot(), query, vector, None, NOW)
    full = _sizes(monkeypatch, retriever_module, ["neighbour_matrix", "neighbour_lines"],
                  lambda *args: len(args[1]))
    scoring = _sizes(monkeypatch, scoring_module, ["recency", "decayed_importance",
                                                   "_mean_dots"], lambda *args: len(args[0]))
    whole = _sizes(monkeypatch, Centring, ["of"], lambda *args: len(args[0]))
    for _ in range(5):
        work.add(created=NOW - 60 * 86_400_000.0)  # older than the newest: same decay epoch
        _retrieve(retriever, work, work.view.snapshot(), query, vector, None, NOW)
    assert full["neighbour_matrix"] == [] and whole["of"] == []
    assert len(full["neighbour_lines"]) == 5 and max(full["neighbour_lines"]) <= 5
    assert scoring["recency"] == [1] * 5
    assert scoring["decayed_importance"] == [1] * 5
    assert scoring["_mean_dots"] == [1] * 5  # d·m of the new row, not of all


def test_view_lineage_stays_through_appends_and_access_counting_only() -> None:
    work = Workload(seed=3)
    work.add(20)
    view = work.view
    first = view.snapshot()
    work.add(3)
    appended = view.snapshot()
    view.touch(["r00002"], NOW)
    touched = view.snapshot()
    assert first.lineage == appended.lineage == touched.lineage
    calls: list[tuple[str, str, int]] = []

    def counter(column: str) -> tuple[Callable[[ViewSnapshot], int],
                                      Callable[[ViewSnapshot, int, int], int]]:
        """A sum of ``column`` computed or extended, and each call noted."""
        def compute(snapshot: ViewSnapshot) -> int:
            calls.append((column, "compute", snapshot.n))
            return int(getattr(snapshot, column).sum())

        def extend(snapshot: ViewSnapshot, old: int, start: int) -> int:
            calls.append((column, "extend", start))
            return old + int(getattr(snapshot, column)[start:].sum())
        return compute, extend

    live, accesses = counter("alive"), counter("access_count")
    assert first.grown("live", *live) == 20
    assert appended.grown("live", *live) == 23
    assert touched.grown("live", *live) == 23  # not access-reading: appended's value
    assert touched.grown("accesses", *accesses, reads_access=True) == 1
    work.add(1)
    view.touch(["r00003"], NOW)
    assert view.snapshot().grown("accesses", *accesses, reads_access=True) == 2  # redone
    assert calls == [("alive", "compute", 20), ("alive", "extend", 20),
                     ("access_count", "compute", 23),
                     ("access_count", "compute", 24)]
    record = work.records["r00001"]
    view.upsert([record.replace(importance=0.1)])  # an existing row changed
    assert view.snapshot().lineage != touched.lineage
    work.add(1)
    lineage = view.snapshot().lineage
    view.remove(["r00004"])
    assert view.snapshot().lineage != lineage
    assert view.snapshot().grown("live", *live) == 24
    assert calls[-1] == ("alive", "compute", 25)


def test_centring_and_time_order_extensions_equal_full_computations() -> None:
    work = Workload(seed=6)
    work.add(2045)
    snapshot = work.view.snapshot()
    rows = snapshot.has_vector.copy()
    centring = Centring.of(snapshot.vectors, rows, 0.5)
    order = TimeOrder.of(snapshot)
    for count in (1, 2, 5, 40, 1):  # across a mean step
        start = snapshot.n
        work.add(count, created=NOW - 30 * 86_400_000.0 + 11 * MINUTE * start)
        snapshot = work.view.snapshot()
        rows = snapshot.has_vector.copy()
        centring = centring.extended(snapshot.vectors, rows, start, 0.5)
        full = Centring.of(snapshot.vectors, rows, 0.5)
        for field in ("mean", "mean_dot", "inverse_norm"):
            np.testing.assert_array_equal(getattr(centring, field), getattr(full, field))
        assert (centring.mean_norm2, centring.count) == (full.mean_norm2, full.count)
        order, positions = order.merged(snapshot)
        assert sorted(order.rows[positions].tolist()) == list(range(start, snapshot.n))
        np.testing.assert_array_equal(order.rows, TimeOrder.of(snapshot).rows)
    assert mean_rows(centring.count) != mean_rows(2045)
    np.testing.assert_array_equal(
        neighbour_matrix(snapshot, 2, 10 * MINUTE, order),
        neighbour_matrix(snapshot, 2, 10 * MINUTE))


def test_a_lineage_keeps_at_most_grown_limit_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.store import view as view_module

    monkeypatch.setattr(view_module, "GROWN_LIMIT", 3)
    work = Workload(seed=8)
    work.add(5)
    snapshot = work.view.snapshot()
    def times_n(factor: int) -> Callable[[ViewSnapshot], int]:
        return lambda s: factor * s.n

    for key in range(5):
        assert snapshot.grown(key, times_n(key), lambda s, old, start: old) == key * 5
    assert list(snapshot._grown) == [2, 3, 4]  # the oldest went first
    work.add(1)
    later = work.view.snapshot()
    assert later.grown(4, lambda s: -1, lambda s, old, start: old + s.n) == 26  # extended
    assert later.grown(0, lambda s: -1, lambda s, old, start: old) == -1  # dropped: computed


def test_postings_from_a_start_row_read_one_by_one_equal_the_filtered_posting() -> None:
    work = Workload(seed=12)
    work.add(300)
    retriever = Retriever()
    snapshot = work.view.snapshot()
    retriever.index.sync(snapshot)
    mask = snapshot.alive & (snapshot.agent != 1)
    for word in ("cat", "garden", "caroline", "nowhere"):
        for start in (0, 150, 260, 299, 300):
            few = retriever.index.term_postings(word, mask, start)
            whole = retriever.index.term_postings(word, mask)
            chosen = whole[0] >= start
            order = np.argsort(few[0])
            np.testing.assert_array_equal(few[0][order], np.sort(whole[0][chosen]))
            np.testing.assert_array_equal(few[1][order],
                                          whole[1][chosen][np.argsort(whole[0][chosen])])
    assert len(retriever.index.term_postings("cat", mask, 260)[0]) > 0


def test_append_rows_writes_after_an_array_once_and_copies_otherwise() -> None:
    from engine.store.view import append_rows

    first = np.arange(5.0)
    grown = append_rows(first, np.array([5.0]))
    longer = append_rows(grown, np.array([6.0, 7.0]))
    assert longer.base is grown.base  # written after it, no copy
    forked = append_rows(grown, np.array([9.0]))  # grown was appended to already: a copy
    assert forked.base is not grown.base
    np.testing.assert_array_equal(grown, [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(longer, [0, 1, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(forked, [0, 1, 2, 3, 4, 5, 9])
    assert not longer.flags.writeable and not forked.flags.writeable
    lines = append_rows(np.zeros((2, 3), dtype=np.int32), np.full((1, 3), -1, dtype=np.int32))
    assert lines.shape == (3, 3) and lines.dtype == np.int32
    assert append_rows(np.zeros(2, dtype=bool), np.ones(1, dtype=bool)).tolist() == [
        False, False, True]


def test_append_rows_of_nothing_is_the_same_read_only_array() -> None:
    from engine.store.view import append_rows

    rows = append_rows(np.arange(3), np.arange(3, 5))
    assert append_rows(rows, np.zeros(0, dtype=rows.dtype)) is rows
    writable = np.arange(3)
    kept = append_rows(writable, np.zeros(0, dtype=writable.dtype))
    assert kept is not writable and not kept.flags.writeable  # never hands out a writable one
    np.testing.assert_array_equal(kept, writable)
