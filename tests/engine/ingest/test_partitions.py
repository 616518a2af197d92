"""Candidate search's partitions, extended across writes, equal partitions computed afresh."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from engine.ingest.search import _Partition
from engine.records import Category, Layer, MemoryRecord, NewMemory, Privacy
from engine.store.view import LAYERS, PRIVACIES, ColumnarView

NOW = 1_767_225_600_000.0
DIM = 8
AGENTS = ("alice", "bob", "carol")


def _record(rng: np.random.Generator, i: int) -> MemoryRecord:
    return MemoryRecord.create(NewMemory(
        content=f"memory {i}", agent_id=AGENTS[int(rng.integers(3))],
        privacy=PRIVACIES[int(rng.integers(2))], layer=LAYERS[int(rng.integers(3))],
        category=list(Category)[int(rng.integers(len(Category)))]), now_ms=NOW + i)


def _vectors(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors[rng.random(n) < 0.2] = 0.0  # some records wait for their embedding
    return vectors


def _same(a: _Partition, b: _Partition) -> None:
    assert (a.n, a.surprise_size, a.merge_size, a.searchable_size) == \
        (b.n, b.surprise_size, b.merge_size, b.searchable_size)
    for name in ("surprise", "merge", "searchable", "category_counts"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_extended_partitions_match_fresh_ones_through_every_kind_of_write() -> None:
    rng = np.random.default_rng(3)
    view = ColumnarView(DIM, capacity=64)
    records = [_record(rng, i) for i in range(1100)]
    view.upsert(records, _vectors(rng, len(records)))
    live = {r.id: r for r in records}
    previous: dict[tuple[int, int, int], _Partition] = {}
    extended = 0
    for step in range(160):
        kind = step % 8
        ids = list(live)
        if kind in (0, 1, 2):  # appends, with and without vectors
            fresh = [_record(rng, 10_000 + step * 10 + j) for j in range(int(rng.integers(1, 6)))]
            view.upsert(fresh, _vectors(rng, len(fresh)) if kind else None)
            live.update((r.id, r) for r in fresh)
        elif kind == 3:  # an update that keeps the partition
            target = live[ids[int(rng.integers(len(ids)))]]
            live[target.id] = target.replace(importance=0.9, version=target.version + 1)
            view.upsert([live[target.id]])
        elif kind == 4:  # an update that moves a record to another layer / privacy / category
            target = live[ids[int(rng.integers(len(ids)))]]
            moved = target.replace(layer=Layer.SEMANTIC if target.layer is Layer.EPISODIC
                                   else Layer.EPISODIC, privacy=Privacy.PRIVATE,
                                   category=Category.SKILL, version=target.version + 1)
            live[target.id] = moved
            view.upsert([moved])
        elif kind == 5:  # new content: the vector is gone until re-embedded, then comes back
            target = live[ids[int(rng.integers(len(ids)))]]
            live[target.id] = target.replace(content=f"rewritten {step}",
                                             version=target.version + 1)
            view.upsert([live[target.id]])
            if step % 16 == 5:
                view.upsert([live[target.id]], _vectors(rng, 1) + np.float32(1.0))
        elif kind == 6:  # deletes (enough of them, once, to compact the arrays)
            count = 500 if step == 118 else 3
            gone = [ids[int(i)] for i in rng.choice(len(ids), size=count, replace=False)]
            view.remove(gone)
            for record_id in gone:
                live.pop(record_id)
        else:
            view.touch(ids[:5], NOW + step)
        snapshot = view.snapshot()
        for agent_id in (*AGENTS, "nobody"):
            for privacy in range(2):
                for layer in range(3):
                    key = (snapshot.agent_code(agent_id), privacy, layer)
                    part = _Partition.of(snapshot, *key, previous.get(key))
                    extended += previous.get(key) is not None and \
                        previous[key].layout == snapshot.layout
                    _same(part, _Partition.of(snapshot, *key))
                    previous[key] = part
    assert extended > 1000  # most writes extended the partitions instead of redoing them
