"""Dedup-decision latency (hash cache + nearest neighbours + rules), excluding embedding.

Synthetic records with random unit vectors (no model) are written straight to a fresh embedded
store; then incoming memories — half near-duplicates of stored records (perturbed vectors), half
unrelated — are run through the pipeline's stages up to the decision with precomputed vectors,
and the time from ``ingest-start`` through ``decision`` is measured per memory, as wall time
and as process CPU time (all threads; on a shared machine the CPU time is the better estimate
of the uncontended latency). Nothing is written (the runs stop before ``merge/defer``).

A stream of single ingests writes after every decision, so the next decision takes a fresh view
snapshot and recomputes its partition masks. The benchmark reproduces that by default (view
``changed``: an access is counted on one record before each decision, which changes the view
without touching Chroma); ``shared`` rows let consecutive decisions share one snapshot, as the
memories of one batch-ingest chunk do. The last column is the CPU cost of the view's
``snapshot()`` alone under the same condition (no copy either way; see engine/store/view.py).

Past ``exact_search_max`` the search takes the in-process partition index (``ivf``,
engine/ingest/partition_index.py); ``--hnsw`` adds rows with it off (Chroma's HNSW, as before
issue 24's index). Each large-partition row is followed by the index's **recall**
(:func:`recall`): the neighbours at or above the review floor (cosine 0.50: every pair that can
merge, be reviewed or be linked) that exact search finds among a decision's candidates, and the
share of those the approximate path finds too, with the same similarity.

Usage: ``python benchmarks/bench_dedup.py [--sizes 10000 100000] [--queries 400] [--keep DIR]
[--hnsw]``
Prints a table: store size, search path (numpy exact / in-process ``ivf`` / Chroma HNSW), view
condition, wall p50 / p95 / p99 / max and process CPU p50 / p99 in ms, the view snapshot's CPU,
the calling thread's CPU p50 / p99 (the decision's own, without other threads of the process),
and the load average before and after each row.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.clock import DeterministicClock
from engine.config import DedupConfig
from engine.ingest import IngestPolicy, Stage
from engine.ingest.partition_index import PartitionIndex
from engine.ingest.search import CandidateSearch
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import MemoryRecord, NewMemory
from engine.store import StoreSpec
from engine.store.view import ColumnarView
from engine.text import content_hash

DIM = 384
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
         "sierra", "tango", "uniform", "victor", "whiskey", "xray"]


def _text(rng: np.random.Generator, i: int) -> str:
    return f"record {i} " + " ".join(rng.choice(WORDS, size=8))


def build(path: Path, size: int, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    vectors = rng.standard_normal((size, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [_text(rng, i) for i in range(size)]
    engine = MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(1.7e12))
    try:
        chunk = 5000
        for start in range(0, size, chunk):
            records = [MemoryRecord.create(NewMemory(t), now_ms=1.7e12, importance=0.5,
                                           embedding_model="synthetic")
                       for t in texts[start:start + chunk]]
            engine.store.write(records, vectors[start:start + chunk])
    finally:
        engine.close()
    return vectors, texts


def _incoming(vectors: np.ndarray, texts: list[str], q: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, str]:
    """Incoming memory ``q``: a near duplicate of a stored one (even ``q``) or unrelated."""
    if q % 2 == 0:
        source = int(rng.integers(len(texts)))
        noise = rng.standard_normal(DIM).astype(np.float32) * 0.02
        vector = vectors[source] + noise
        text = texts[source] + " again"
    else:
        vector = rng.standard_normal(DIM).astype(np.float32)
        text = _text(rng, 10_000_000 + q)
    vector /= np.linalg.norm(vector)
    return vector, text


def measure(path: Path, vectors: np.ndarray, texts: list[str], queries: int,
            exact_max: int, rng: np.random.Generator, *,
            changed: bool = True, index: bool = True, read_only: bool = False,
            new: Callable[[str], NewMemory] = NewMemory) -> tuple[str, np.ndarray]:
    """(search path used, [[wall ms, process CPU ms, view-snapshot CPU ms, calling thread CPU
    ms]] per decision).

    Process CPU counts every thread of the process (Chroma's own included); the calling
    thread's CPU is the decision's alone (the stages run on it).

    Args:
        new: Makes an incoming memory of a text (its agent, layer and privacy choose the
            partition searched; the default matches :func:`build`'s records).
        changed: Change the view before each decision, as the write of a single ingest does
            (False: the decisions share one snapshot, as in a batch-ingest chunk).
        index: Large partitions through the in-process partition index (False: Chroma HNSW).
        read_only: Open the store read-only (a cached store that must not be written).
    """
    config = EngineConfig(dedup=DedupConfig(exact_search_max=exact_max), sampling_rate=0.0)
    engine = MemoryEngine.open(StoreSpec(str(path), read_only=read_only),
                               clock=DeterministicClock(1.8e12), config=config)
    engine.set_ingest_policy(IngestPolicy(dedup=config.dedup, partition_index=index))
    timings: list[tuple[float, float, float, float]] = []
    try:
        pipeline = engine._ingest_pipeline()  # the benchmark drives stages with its own vectors
        view = engine.store.view
        touched = [str(view.snapshot().id_array[0])]
        for q in range(queries + 20):
            vector, text = _incoming(vectors, texts, q, rng)
            run = pipeline.stepped(new(text), vector=vector)
            if changed:
                view.touch(touched, 1.8e12)
            wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
            while run.next_stage is not Stage.APPLY:  # ingest-start .. decision
                run.step()
            elapsed = (time.perf_counter() - wall) * 1000.0, (time.process_time() - cpu) * 1000.0
            thread_ms = (time.thread_time() - own) * 1000.0
            if changed:
                view.touch(touched, 1.8e12)
            snap_cpu = time.process_time()
            view.snapshot()  # what the candidate stage's snapshot alone costs
            snap_ms = (time.process_time() - snap_cpu) * 1000.0
            if q >= 20:  # warm-up excluded
                timings.append((*elapsed, snap_ms, thread_ms))
        path_used = str(run.state[Stage.CANDIDATES.value]["method"])
    finally:
        engine.close()
    return path_used, np.asarray(timings)


def recall(path: Path, vectors: np.ndarray, texts: list[str], queries: int,
           exact_max: int, rng: np.random.Generator, *, index: bool = True,
           read_only: bool = False, floor: float = 0.5,
           new: Callable[[str], NewMemory] = NewMemory) -> tuple[int, int, int]:
    """Recall of the approximate path's candidates against exact search on the same snapshot.

    The same incoming memories as :func:`measure` are searched twice (large partitions through
    the partition index, or Chroma's HNSW with ``index`` False; and exactly): every candidate
    exact search finds at or above ``floor`` must be among the approximate path's candidates
    with the same similarity.

    Returns:
        (neighbours at or above ``floor`` exact search found, how many of them the approximate
        path found, decisions whose highest cosine in the partition is at or above ``floor``
        and differs).
    """
    engine = MemoryEngine.open(StoreSpec(str(path), read_only=read_only),
                               clock=DeterministicClock(1.8e12))
    dedup = DedupConfig(exact_search_max=exact_max)
    approximate = CandidateSearch(engine.store, IngestPolicy(dedup=dedup, partition_index=index))
    exact = CandidateSearch(engine.store, IngestPolicy(dedup=DedupConfig(
        exact_search_max=10 ** 12)))
    wanted = found = max_differs = 0
    try:
        snapshot = engine.store.view.snapshot()
        for q in range(queries):
            vector, text = _incoming(vectors, texts, q, rng)
            memory = new(text)
            digest = content_hash(text)
            got = approximate.search(memory, digest, vector, snapshot)
            want = exact.search(memory, digest, vector, snapshot)
            have = {c.id: c.similarity for c in got.candidates}
            for candidate in want.candidates:
                if candidate.similarity >= floor:
                    wanted += 1
                    found += abs(have.get(candidate.id, -2.0) - candidate.similarity) < 1e-5
            if (want.max_cosine or 0.0) >= floor:  # below the floor nothing is decided by it
                max_differs += abs((got.max_cosine or 0.0) - (want.max_cosine or 0.0)) > 1e-5
    finally:
        engine.close()
    return wanted, found, max_differs


def recall_on_vectors(matrix: np.ndarray, queries: int, shares: list[float],
                      rng: np.random.Generator, *, floors: tuple[float, ...] = (0.5, 0.7, 0.85)
                      ) -> list[tuple[float, dict[float, tuple[int, int]], float]]:
    """The partition index's recall on given vectors (e.g. the real model's), no Chroma.

    ``matrix`` goes into a view as one partition, less ``queries`` rows held out as the incoming
    memories; each is searched through the index and exactly (its top ``4 × candidate_k``).

    Returns:
        Per probe share: (share, {floor: (exact neighbours >= floor, of them found)}, the
        index search's thread CPU p50 in ms).
    """
    vectors = matrix.astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    view = ColumnarView(vectors.shape[1])
    view.upsert([MemoryRecord.create(NewMemory(f"v{i}"), now_ms=1.7e12, record_id=f"v{i}")
                 for i in range(len(vectors))], vectors)
    snapshot = view.snapshot()
    held_out = rng.choice(len(vectors), queries, replace=False)
    mask = snapshot.alive.copy()
    mask[held_out] = False
    rows = np.flatnonzero(mask)
    k = 4 * IngestPolicy().candidate_k
    exact = []
    for q in held_out.tolist():
        sims = snapshot.vectors[rows] @ snapshot.vectors[q]
        top = np.argpartition(-sims, k)[:k]
        exact.append((rows[top], sims[top]))
    results = []
    for share in shares:
        index = PartitionIndex(probe_share=share)
        counts = {floor: [0, 0] for floor in floors}
        cpu: list[float] = []
        for q, (want_rows, want_sims) in zip(held_out.tolist(), exact, strict=True):
            started = time.thread_time()
            got, _ = index.search(snapshot.vectors[q], snapshot, mask, len(rows), k)
            cpu.append((time.thread_time() - started) * 1000.0)
            found = set(got.tolist())
            for floor, count in counts.items():
                wanted = want_rows[want_sims >= floor].tolist()
                count[0] += len(wanted)
                count[1] += len(found.intersection(wanted))
        results.append((share, {f: (c[0], c[1]) for f, c in counts.items()},
                        float(np.median(cpu[1:]))))  # the first search trains
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build stores under DIR and keep them (reused when present)")
    parser.add_argument("--hnsw", action="store_true",
                        help="also rows with the partition index off (Chroma's HNSW)")
    parser.add_argument("--real-vectors", type=Path, metavar="NPZ",
                        help="only the partition index's recall on these vectors (an .npz with "
                             "a 'vectors' array, e.g. the real model's: tune_quality.py's cache)")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    if args.real_vectors is not None:
        with np.load(args.real_vectors, allow_pickle=False) as data:
            matrix = np.asarray(data["vectors"])
        print(f"{len(matrix):,} vectors from {args.real_vectors}; {args.queries} held out")
        for share, counts, cpu in recall_on_vectors(matrix, args.queries,
                                                    [0.04, 0.08, 0.12, 0.2], rng):
            cells = "; ".join(f">= {floor}: {found}/{wanted} = {found / max(1, wanted):.4f}"
                              for floor, (wanted, found) in counts.items())
            print(f"probe share {share:.2f}: {cells}; search thread CPU p50 {cpu:.2f} ms")
        return
    print(f"{'records':>8} {'path':>6} {'view':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8}   {'cpu p50':>8} {'cpu p99':>8} {'snapshot':>9} {'thr p50':>8} "
          f"{'thr p99':>8}   load")
    for size in args.sizes:
        directory = (args.keep / str(size)) if args.keep else \
            Path(tempfile.mkdtemp(prefix="bench-dedup-"))
        try:
            began = time.perf_counter()
            saved = directory / "vectors.npy"
            if args.keep and saved.exists():
                vectors = np.load(saved)
                texts = (directory / "texts.txt").read_text(encoding="utf-8").split("\n")
            else:
                directory.mkdir(parents=True, exist_ok=True)
                vectors, texts = build(directory / "store", size, rng)
                if args.keep:
                    np.save(saved, vectors)
                    (directory / "texts.txt").write_text("\n".join(texts), encoding="utf-8")
            build_s = time.perf_counter() - began
            default = DedupConfig().exact_search_max
            configs = [(default, True, True), (default, False, True), (10 * size, True, True)]
            if args.hnsw:
                configs[2:2] = [(default, True, False), (default, False, False)]
            for exact_max, changed, index in configs:
                load = os.getloadavg()[0]
                used, timings = measure(directory / "store", vectors, texts, args.queries,
                                        exact_max, rng, changed=changed, index=index)
                p50, p95, p99 = np.percentile(timings[:, 0], [50, 95, 99])
                c50, c99 = np.percentile(timings[:, 1], [50, 99])
                print(f"{size:>8} {used:>6} {'changed' if changed else 'shared':>8} "
                      f"{p50:>8.2f} {p95:>8.2f} {p99:>8.2f} "
                      f"{timings[:, 0].max():>8.2f}   {c50:>8.2f} {c99:>8.2f} "
                      f"{np.percentile(timings[:, 2], 50):>9.2f} "
                      f"{np.percentile(timings[:, 3], 50):>8.2f} "
                      f"{np.percentile(timings[:, 3], 99):>8.2f}   "
                      f"{load:.1f}-{os.getloadavg()[0]:.1f}")
                if used != "exact" and changed:
                    wanted, found, differs = recall(directory / "store", vectors, texts,
                                                    args.queries, exact_max, rng, index=index)
                    print(f"{'':>8} {used:>6} recall of neighbours >= 0.50: {found}/{wanted} = "
                          f"{found / max(1, wanted):.4f}; highest cosine (>= 0.50) differs in "
                          f"{differs} of {args.queries}")
            print(f"{'':>8} (store of {size} built or loaded in {build_s:.0f} s)")
        finally:
            if not args.keep:
                shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
