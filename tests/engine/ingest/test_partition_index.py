"""The in-process IVF index of large dedup partitions (engine/ingest/partition_index.py).

A partition past ``exact_search_max`` is searched through the index; it must decide as the
exact scan does on small stores, and it must stay current across every kind of write (rows
appended, updated with a new vector, deleted, moved into the partition, renumbered by the
view's compaction) without being rebuilt: a duplicate it misses after a write is a merge lost.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.config import DedupConfig
from engine.errors import ConfigInvalid
from engine.ingest import IngestPolicy, Stage
from engine.ingest.partition_index import PartitionIndex
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import MemoryRecord, NewMemory
from engine.store.view import ColumnarView, ViewSnapshot
from tests.engine.ingest.conftest import (
    T0,
    EngineFactory,
    TableEmbedder,
    at_cosine,
    unit_rows,
)

DIM = 384
F32 = npt.NDArray[np.float32]


def _clustered(rng: np.random.Generator, count: int, clusters: int) -> F32:
    centers = unit_rows(rng.standard_normal((clusters, DIM)).astype(np.float32))
    members = rng.integers(clusters, size=count)
    return unit_rows(centers[members] + 0.9 * rng.standard_normal((count, DIM)).astype(
        np.float32) / np.sqrt(DIM))


def _records(count: int, agent: str, start: int = 0) -> list[MemoryRecord]:
    return [MemoryRecord.create(NewMemory(f"note {start + i} by {agent}", agent_id=agent),
                                now_ms=T0, importance=0.5, embedding_model="table-test")
            for i in range(count)]


def _use(engine: MemoryEngine, *, index: bool) -> None:
    """Large partitions (over 100 vectors) through the index, or everything exact."""
    limit = 100 if index else 10**9
    engine.set_ingest_policy(IngestPolicy(dedup=DedupConfig(exact_search_max=limit),
                                          partition_index=index))


def _decide(engine: MemoryEngine, table: TableEmbedder, text: str, vector: F32,
            agent: str = "alice") -> dict[str, Any]:
    table.put(text, vector)
    run = engine.stepped(NewMemory(text, agent_id=agent))
    while run.next_stage is not Stage.APPLY:
        run.step()
    return run.state


def _found(state: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """Candidate id -> (similarity, found_by) of a decision's candidate stage."""
    return {c["id"]: (c["similarity"], c["found_by"])
            for c in state[Stage.CANDIDATES.value]["candidates"]}


@pytest.mark.parametrize("share", [0, -0.1, 1.5, "4%"])
def test_a_bad_probe_share_is_refused_naming_the_field(share: object) -> None:
    with pytest.raises(ConfigInvalid, match="index_probe_share") as caught:
        IngestPolicy(index_probe_share=share)  # type: ignore[arg-type]  # the bad input
    assert caught.value.field == "index_probe_share"


def test_index_and_exact_search_decide_the_same_on_a_small_store(
        make_engine: EngineFactory, table: TableEmbedder) -> None:
    engine = make_engine(config=EngineConfig(sampling_rate=0.0))
    rng = np.random.default_rng(3)
    records = _records(1200, "alice")
    vectors = _clustered(rng, 1200, 40)
    engine.store.write(records, vectors)
    queries: list[tuple[str, F32]] = []
    for q in range(160):  # merges, both gray-zone depths, a related link only, new topics
        row = int(rng.integers(len(records)))
        cosine = (0.97, 0.86, 0.78, 0.62, 0.3)[q % 5]
        text = f"{records[row].content} {''.join(chr(97 + int(d)) for d in str(q))}"
        queries.append((text, at_cosine(vectors[row], cosine, rng)))
    states = {}
    for index in (True, False):
        _use(engine, index=index)
        states[index] = [_decide(engine, table, text, vector) for text, vector in queries]
    assert {s[Stage.CANDIDATES.value]["method"] for s in states[True]} == {"ivf"}
    assert {s[Stage.CANDIDATES.value]["method"] for s in states[False]} == {"exact"}
    floor = 0.5  # the review floor: every pair that can merge, be reviewed or be linked
    for via_index, exact in zip(states[True], states[False], strict=True):
        wanted = {i: round(sim, 5) for i, (sim, _) in _found(exact).items() if sim >= floor}
        got = {i: round(sim, 5) for i, (sim, _) in _found(via_index).items() if sim >= floor}
        assert got == wanted
        assert via_index[Stage.DECISION.value]["decision"] == \
            exact[Stage.DECISION.value]["decision"]
    decided = [s[Stage.DECISION.value]["decision"]["action"] for s in states[False]]
    assert decided.count("merged") >= 20 and decided.count("deferred") >= 20


def test_index_stays_current_across_writes(make_engine: EngineFactory,
                                           table: TableEmbedder) -> None:
    engine = make_engine(config=EngineConfig(sampling_rate=0.0))
    _use(engine, index=True)
    rng = np.random.default_rng(5)
    alice = _records(2000, "alice")
    alice_vectors = _clustered(rng, 2000, 40)
    bob = _records(50, "bob", start=5000)
    bob_vectors = unit_rows(rng.standard_normal((50, DIM)).astype(np.float32))
    engine.store.write([*alice, *bob], np.concatenate((alice_vectors, bob_vectors)))
    probe = iter(range(10**6))

    def near(vector: F32) -> dict[str, tuple[float, str]]:
        state = _decide(engine, table, f"probe {next(probe)}", at_cosine(vector, 0.97, rng))
        assert state[Stage.CANDIDATES.value]["method"] == "ivf"
        return _found(state)

    # the index is built by the first decision; every later one only follows the writes
    assert near(alice_vectors[7])[alice[7].id][1] == "ivf"

    # appended: a record in a direction no list was trained on
    fresh = _records(1, "alice", start=9000)[0]
    fresh_vector = unit_rows(rng.standard_normal(DIM).astype(np.float32))
    engine.store.write([fresh], fresh_vector[None, :])
    assert fresh.id in near(fresh_vector)

    # updated with new content and a new vector: found at the new one, not at the old one
    moved = alice[11]
    moved_vector = unit_rows(rng.standard_normal(DIM).astype(np.float32))
    engine.store.write([replace(moved, content="rewritten note")], moved_vector[None, :])
    assert moved.id in near(moved_vector)
    old = near(alice_vectors[11])
    assert moved.id not in old or old[moved.id][0] < 0.5

    # deleted: never a candidate again
    engine.store.delete([alice[23].id])
    assert alice[23].id not in near(alice_vectors[23])

    # moved into the partition from another agent's
    joined = bob[3]
    engine.store.write([replace(joined, agent_id="alice")], bob_vectors[3][None, :])
    assert joined.id in near(bob_vectors[3])

    # most rows deleted: the view compacts and renumbers its rows
    gone = [r.id for r in alice[100:1500]]
    engine.store.delete(gone)
    for row in (1600, 1700, 1800):
        assert alice[row].id in near(alice_vectors[row])
    assert not set(gone) & set(near(alice_vectors[200]))
    assert fresh.id in near(fresh_vector) and moved.id in near(moved_vector)


def _exact(snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_], vector: F32, k: int
           ) -> dict[int, float]:
    rows = np.flatnonzero(mask)
    sims = snapshot.vectors[rows] @ vector
    top = np.argsort(-sims, kind="stable")[:k]
    return {int(rows[i]): float(sims[i]) for i in top}


@pytest.mark.slow
def test_index_matches_exact_search_through_many_writes() -> None:
    """The index straight over a view, through writes that re-sort and re-code its lists:
    every near duplicate (0.95) is found with its exact cosine, and so is every neighbour
    above the review floor that exact search finds."""
    rng = np.random.default_rng(9)
    view = ColumnarView(DIM)
    index = PartitionIndex()
    records: dict[str, MemoryRecord] = {}
    vectors: dict[str, F32] = {}

    def write(batch: list[MemoryRecord], batch_vectors: F32) -> None:
        view.upsert(batch, batch_vectors)
        for record, vector in zip(batch, batch_vectors, strict=True):
            records[record.id], vectors[record.id] = record, vector

    def check(queries: int = 40) -> None:
        snapshot = view.snapshot()
        mask = snapshot.alive & snapshot.has_vector
        size = int(mask.sum())
        live = [i for i in records if (row := view.row_of(i)) is not None and mask[row]]
        for q in range(queries):
            target = live[int(rng.integers(len(live)))]
            query = at_cosine(vectors[target], 0.95 if q % 2 else 0.75, rng)
            rows, sims = index.search(query, snapshot, mask, size, 64)
            got = {int(r): float(s) for r, s in zip(rows, sims, strict=True)}
            assert view.row_of(target) in got
            for row, sim in _exact(snapshot, mask, query, 64).items():
                if sim >= 0.5:
                    assert got.get(row) == pytest.approx(sim, abs=1e-5)

    write(_records(4000, "alice"), _clustered(rng, 4000, 30))
    check()
    for round_ in range(3):  # appends past the overflow limit: the lists are re-sorted
        write(_records(1500, "alice", start=10_000 * (round_ + 1)),
              _clustered(rng, 1500, 30))
        check(10)
    # updates with new vectors (some to directions no list was trained on), in two sizes
    for count in (50, 1500):
        chosen = rng.choice(list(records), count, replace=False).tolist()
        fresh = unit_rows(rng.standard_normal((count, DIM)).astype(np.float32))
        write([replace(records[i], content=records[i].content + " v2") for i in chosen], fresh)
        check(20)
        for i in chosen[:10]:
            snapshot = view.snapshot()
            mask = snapshot.alive & snapshot.has_vector
            rows, _ = index.search(at_cosine(vectors[i], 0.95, rng), snapshot, mask,
                                   int(mask.sum()), 64)
            assert view.row_of(i) in rows.tolist()
    # deletes, then enough of them that the view compacts and renumbers its rows
    for share in (0.05, 0.5):
        gone = rng.choice(list(records), int(share * len(records)), replace=False).tolist()
        view.remove(gone)
        for i in gone:
            del records[i], vectors[i]
        check(20)
