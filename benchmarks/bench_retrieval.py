"""Retrieval latency (score + pack, excluding query embedding) at 2K, 10K and 100K candidates.

Builds a columnar view directly (no Chroma: the retrieval hot path never touches it) with random
unit vectors and short synthetic texts, warms up, then times each request three ways:

* ``retrieve``: ``Retriever.retrieve`` — filter, score, sort, pack (what the DESIGN budget
  "retrieval (score + pack), excluding query embedding" names and what
  ``RetrievalDiagnostics.time_ms`` reports), with a no-op fetch (record materialization is a
  separate Chroma cost);
* ``+ snapshot``: the same plus taking the view snapshot first (what ``MemoryEngine.retrieve``
  does besides embedding and fetching);
* CPU time (``time.thread_time``) of ``retrieve``: on a shared machine the wall clock also
  counts time spent waiting for a core; CPU time is the work itself.

and prints medians, p95 and p99 (seed 000 §11 percentiles) beside an in-run baseline: one numpy
matvec over the same vectors (the floor of any exact cosine ranking). The load average is
printed before and after each size.

Each size is measured in three states (``--after``; :data:`STATES`):

* ``steady``: nothing changes between requests (the view's derived data is reused);
* ``access``: after access counting — each request's packed records are touched before the next
  request (what ``MemoryEngine.retrieve`` does; an agent calling retrieve in a loop is always
  in this state);
* ``append``: one record is appended before each request (untimed, like the touch).

    python benchmarks/bench_retrieval.py [--sizes 2000,10000,100000] [--runs 200]
                                         [--after steady,access,append]

``--candidates`` instead compares the candidate path with exhaustive scoring
(docs/retrieval.md "How candidates are found") on a generated store whose data look like real
memories — vectors around 200 topics (unit vectors near a topic's centre), texts over a Zipf
vocabulary of 5,000 words, queries near one record's vector with 5 words — and prints per size:
exhaustive and candidate retrieval p50/p95 (wall clock and CPU), top-5 agreement of the packed
records, how many requests fell back to every row, the view's resident vector memory and the
dense index's, and a plain Chroma HNSW query (documents and metadata included, top 10) on a
Chroma store of the same records and vectors in the same run. The Chroma stores are built once
and kept under ``$MNEMOSCOPE_BENCH_CACHE`` (default ``/tmp/mnemoscope-bench``):

    python benchmarks/bench_retrieval.py --candidates [--sizes 10000,100000] [--runs 200]

BLAS runs single-threaded when this runs as a script (``OPENBLAS_NUM_THREADS=1`` etc., set
before numpy loads unless already set): on a shared 2-core machine a multi-threaded BLAS matvec
of 2K × 384 took 6-15 ms waiting for its threads, single-threaded 0.05 ms. Set
``MNEMOSCOPE_BENCH_BLAS_THREADS`` to compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # not when imported: `mnemoscope bench` loads the model later, and
    # OMP_NUM_THREADS=1 would leave torch one thread for the ingest suite (numpy is loaded by then)
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, os.environ.get("MNEMOSCOPE_BENCH_BLAS_THREADS", "1"))

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import MemoryConfig, RetrievalConfig
from engine.metrics import LatencySummary, PercentileSummary
from engine.records import Layer, MemoryRecord, NewMemory
from engine.retrieval import RetrievalRequest, Retriever
from engine.store.view import ColumnarView

_TEXT = ("alpha beta gamma delta cafe jazz deploy database migration cat dog tea coffee "
         "paint lake sunrise support group counselor swim kids work career friend "
         "birthday concert guitar piano book movie trip beach mountain city")
WORDS = _TEXT.split()
NOW = 1_750_000_000_000.0
BUDGET = 1800
WARMUP = 3
# What happens to the view between two requests: nothing, access counting, one append.
STATES = ("steady", "access", "append")


def build(n: int, seed: int = 7) -> ColumnarView:
    """A view of ``n`` records: 4 agents, episodic/semantic, 12-word texts, random vectors."""
    rng = np.random.default_rng(seed)
    view = ColumnarView(384, capacity=n)
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    records = [synthetic(i, rng) for i in range(n)]
    for start in range(0, n, 5000):
        view.upsert(records[start:start + 5000], vectors[start:start + 5000])
    return view


def synthetic(i: int, rng: np.random.Generator) -> MemoryRecord:
    """Record ``i`` of :func:`build`'s workload."""
    text = " ".join(rng.choice(WORDS, size=12))
    new = NewMemory(f"{text} {i}", agent_id=f"agent{i % 4}",
                    layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                    importance=float(rng.random()), created_at=NOW - float(rng.random())
                    * 90 * 86_400_000.0)
    return MemoryRecord.create(new, now_ms=NOW, record_id=f"id{i:07d}")


def _between(view: ColumnarView, state: str, packed: Sequence[str],
             rng: np.random.Generator) -> None:
    """Change ``view`` as ``state`` says before the next request (untimed)."""
    if state == "access" and packed:
        view.touch(packed, NOW)
    elif state == "append":
        vector = rng.standard_normal((1, 384)).astype(np.float32)
        # a new id each time, also across measure() runs over one view (an id seen before
        # would make this an update of an existing record, not an append)
        view.upsert([synthetic(10_000_000 + len(view), rng)], vector)


@dataclass
class Timings:
    """Per-request times in ms of one size and agent filter (warm-up requests excluded)."""

    retrieve: list[float] = field(default_factory=list)
    with_snapshot: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    matvec: list[float] = field(default_factory=list)


def measure(view: ColumnarView, queries: Sequence[str], vectors: np.ndarray,
            agent: str | None, retriever: Retriever | None = None,
            state: str = "steady") -> Timings:
    """Time ``retrieve`` for each query (the first :data:`WARMUP` are not recorded).

    Args:
        state: One of :data:`STATES`: what changes in ``view`` between requests (untimed).
    """
    if state not in STATES:
        raise ValueError(f"state {state!r} is not one of {', '.join(STATES)}")
    retriever = retriever or Retriever()
    memory = MemoryConfig()
    out = Timings()
    rng = np.random.default_rng(11)
    packed: list[str] = []

    def fetch(ids: Sequence[str]) -> list[MemoryRecord]:
        packed[:] = ids  # what the engine would count accesses of
        return []

    for i, (query, qv) in enumerate(zip(queries, vectors, strict=True)):
        _between(view, state, packed, rng)
        request = RetrievalRequest(max_tokens=BUDGET, query=query, agent_id=agent)
        started = time.perf_counter()
        snapshot = view.snapshot()
        snapped = time.perf_counter()
        cpu_started = time.thread_time()
        retriever.retrieve(snapshot, request, now_ms=NOW, memory=memory, query_vector=qv,
                           fetch=fetch)
        cpu = (time.thread_time() - cpu_started) * 1000.0
        done = time.perf_counter()
        _ = snapshot.vectors @ qv
        matvec = (time.perf_counter() - done) * 1000.0
        if i >= WARMUP:  # seed 000 §11: discard warm-up requests
            out.retrieve.append((done - snapped) * 1000.0)
            out.with_snapshot.append((done - started) * 1000.0)
            out.cpu.append(cpu)
            out.matvec.append(matvec)
    return out


def summary(values: Sequence[float]) -> PercentileSummary:
    """Seed 000 §11 percentiles of ``values``."""
    latencies = LatencySummary()
    for value in values:
        latencies.record(value)
    return latencies.summary()


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2000,10000,100000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--after", default=",".join(STATES),
                        help=f"states to measure, of {', '.join(STATES)}")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, {os.cpu_count()} cores; "
          f"ms; times exclude query embedding and record fetch; budget {BUDGET} tokens")
    print(f"{'candidates':>10} {'state':>7} {'agent':>6} {'load':>9} | {'retrieve p50':>12} "
          f"{'p95':>6} "
          f"{'p99':>6} | {'cpu p50':>7} {'p95':>6} | {'+snapshot p50':>13} {'p95':>6} | "
          f"{'matvec p50':>10} {'p95':>6}")
    states = args.after.split(",")
    for n in (int(s) for s in args.sizes.split(",")):
        queries = [" ".join(rng.choice(WORDS, size=6)) for _ in range(args.runs + WARMUP)]
        vectors = rng.standard_normal((len(queries), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        view = build(n)  # the states in order: steady first, appends last
        for state, agent in ((s, a) for s in states for a in (None, "agent1")):
            before = _load()
            t = measure(view, queries, vectors, agent, state=state)
            r_, c_, s_, m_ = (summary(v) for v in (t.retrieve, t.cpu, t.with_snapshot, t.matvec))
            print(f"{n:>10} {state:>7} {agent or 'all':>6} {before:>4.1f}-{_load():<4.1f} | "
                  f"{r_.p50:>12.2f} {r_.p95:>6.2f} {r_.p99:>6.2f} | {c_.p50:>7.2f} "
                  f"{c_.p95:>6.2f} | {s_.p50:>13.2f} {s_.p95:>6.2f} | {m_.p50:>10.2f} "
                  f"{m_.p95:>6.2f}", flush=True)


TOPICS = 200
VOCABULARY = [f"w{i}" for i in range(5000)]
_ZIPF = 1.0 / np.arange(1, len(VOCABULARY) + 1)
_ZIPF /= _ZIPF.sum()
AGREEMENT_DEPTH = 5


@dataclass
class Corpus:
    """The ``--candidates`` workload: records, their unit vectors, and the view of them."""

    records: list[MemoryRecord]
    vectors: np.ndarray
    view: ColumnarView


def build_topical(n: int, seed: int = 7) -> Corpus:
    """``n`` records around :data:`TOPICS` topics, texts of 12 Zipf-distributed words."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((TOPICS, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, TOPICS, n)]
    vectors += 0.9 * rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = []
    for i in range(n):
        new = NewMemory(" ".join(rng.choice(VOCABULARY, size=12, p=_ZIPF)) + f" {i}",
                        agent_id=f"agent{i % 4}", layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                        importance=float(rng.random()),
                        created_at=NOW - float(rng.random()) * 90 * 86_400_000.0)
        records.append(MemoryRecord.create(new, now_ms=NOW, record_id=f"id{i:07d}"))
    view = ColumnarView(384, capacity=n)
    for start in range(0, n, 5000):
        view.upsert(records[start:start + 5000], vectors[start:start + 5000])
    return Corpus(records, vectors, view)


def chroma_peer(corpus: Corpus, seed: int) -> object:
    """A Chroma collection (cosine HNSW) of ``corpus``, built once and cached on disk."""
    import chromadb  # only this mode needs it (a slow import)
    from chromadb.config import Settings

    n = len(corpus.records)
    root = Path(os.environ.get("MNEMOSCOPE_BENCH_CACHE", "/tmp/mnemoscope-bench"))
    client = chromadb.PersistentClient(str(root / f"chroma-topical-{n}-{seed}"),
                                       settings=Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("bench", metadata={"hnsw:space": "cosine"})
    if collection.count() != n:
        client.delete_collection("bench")
        collection = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
        step = min(5000, client.get_max_batch_size())
        for start in range(0, n, step):
            chunk = corpus.records[start:start + step]
            collection.add(ids=[r.id for r in chunk], documents=[r.content for r in chunk],
                           metadatas=[{"agent": r.agent_id, "importance": r.importance}
                                      for r in chunk],
                           embeddings=corpus.vectors[start:start + step])
    return collection


@dataclass
class Comparison:
    """What :func:`compare_requests` measured (warm-up requests excluded).

    Attributes:
        wall: Per-request wall ms of ``exhaustive``, ``candidate`` and the ``chroma`` peer.
        cpu: Per-request CPU ms (``time.thread_time``) of ``exhaustive`` and ``candidate``.
        agreement: Per request, the share of exhaustive scoring's first
            :data:`AGREEMENT_DEPTH` packed records that the candidate path packed first too.
        fallbacks: Candidate-path requests that scored every row (no candidate sources).
        index_bytes: Resident bytes of the candidate path's dense index.
        index_s: Seconds its first build took.
    """

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]
    agreement: list[float]
    fallbacks: int
    index_bytes: int
    index_s: float


def compare_requests(snapshot: Any, collection: Any, queries: Sequence[str],
                     vectors: np.ndarray) -> Comparison:
    """Time each request on ``snapshot`` by exhaustive scoring and by the candidate path, and
    a plain Chroma query (HNSW, documents and metadata, top 10) on ``collection`` (None: no
    peer; ``wall["chroma"]`` stays empty).

    The first :data:`WARMUP` requests are not recorded. Records are not fetched (a no-op
    fetch: materialising them is a separate Chroma cost).
    """
    n = snapshot.n
    exhaustive = Retriever(RetrievalConfig(candidate_threshold=n + 1))
    candidate = Retriever(RetrievalConfig(candidate_threshold=0))
    memory = MemoryConfig()
    index_started = time.perf_counter()
    index = candidate.dense_index(snapshot)  # built lazily on the first candidate request
    index_s = time.perf_counter() - index_started
    wall: dict[str, list[float]] = {"exhaustive": [], "candidate": [], "chroma": []}
    cpu: dict[str, list[float]] = {"exhaustive": [], "candidate": []}
    agreement: list[float] = []
    fallbacks = 0
    packed: dict[str, list[str]] = {}

    def fetch_for(name: str) -> Callable[[Sequence[str]], list[MemoryRecord]]:
        def fetch(ids: Sequence[str]) -> list[MemoryRecord]:
            packed[name] = list(ids)
            return []
        return fetch

    for i, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
        request = RetrievalRequest(max_tokens=BUDGET, query=query)
        packed.clear()
        for name, retriever in (("exhaustive", exhaustive), ("candidate", candidate)):
            fetch = fetch_for(name)
            started, cpu_started = time.perf_counter(), time.thread_time()
            bundle = retriever.retrieve(snapshot, request, now_ms=NOW, memory=memory,
                                        query_vector=vector, fetch=fetch)
            if i >= WARMUP:
                wall[name].append((time.perf_counter() - started) * 1000.0)
                cpu[name].append((time.thread_time() - cpu_started) * 1000.0)
                if name == "candidate" and not bundle.diagnostics.candidate_sources:
                    fallbacks += 1
        started = time.perf_counter()
        if collection is not None:
            collection.query(query_embeddings=[vector.tolist()], n_results=10,
                             include=["documents", "metadatas", "distances"])
        if i >= WARMUP:
            if collection is not None:
                wall["chroma"].append((time.perf_counter() - started) * 1000.0)
            top = packed.get("exhaustive", [])[:AGREEMENT_DEPTH]
            if top:
                found = set(packed.get("candidate", [])[:AGREEMENT_DEPTH])
                agreement.append(len(found & set(top)) / len(top))
    return Comparison(wall, cpu, agreement, fallbacks, index.nbytes, index_s)


def compare(n: int, runs: int, seed: int = 7, *, peer: bool = True) -> None:
    """One ``--candidates`` row: candidate path vs exhaustive vs Chroma on ``n`` records.

    Args:
        peer: Also build (once, cached) and query the Chroma store of the same records.
    """
    corpus = build_topical(n, seed)
    rng = np.random.default_rng(seed + 1)
    queries = [" ".join(rng.choice(VOCABULARY, size=5, p=_ZIPF)) for _ in range(runs + WARMUP)]
    near = corpus.vectors[rng.integers(0, n, len(queries))]
    near = near + 0.03 * rng.standard_normal(near.shape).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    collection: Any = chroma_peer(corpus, seed) if peer else None
    measured = compare_requests(corpus.view.snapshot(), collection, queries, near)
    wall, cpu = measured.wall, measured.cpu
    e, c = (summary(wall[k]) for k in ("exhaustive", "candidate"))
    h = summary(wall["chroma"] or [float("nan")])
    ec, cc = (summary(cpu[k]) for k in ("exhaustive", "candidate"))
    resident = corpus.view.resident_bytes()
    print(f"{n:>8} {_load():>5.1f} | {e.p50:>7.2f} {e.p95:>6.2f} {ec.p50:>6.2f} {ec.p95:>6.2f} | "
          f"{c.p50:>7.2f} {c.p95:>6.2f} {cc.p50:>6.2f} {cc.p95:>6.2f} | "
          f"{float(np.mean(measured.agreement)):>6.3f} {measured.fallbacks:>4} | "
          f"{resident['vectors'] / 2**20:>8.1f} "
          f"{measured.index_bytes / 2**20:>6.1f} "
          f"{measured.index_s:>6.1f} | {h.p50:>7.2f} {h.p95:>6.2f}", flush=True)


def main_candidates(sizes: Sequence[int], runs: int, *, peer: bool = True) -> None:
    """``--candidates``: :func:`compare` for each size."""
    print(f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS')}, {os.cpu_count()} cores; "
          f"ms (wall p50/p95, cpu p50/p95); budget {BUDGET} tokens; top-{AGREEMENT_DEPTH} "
          f"agreement with exhaustive; MiB; index build s")
    print(f"{'records':>8} {'load':>5} | {'exh p50':>7} {'p95':>6} {'cpu':>6} {'p95':>6} | "
          f"{'cand p50':>7} {'p95':>6} {'cpu':>6} {'p95':>6} | {'agree':>6} {'all':>4} | "
          f"{'vectors':>8} {'index':>6} {'build':>6} | {'chroma':>7} {'p95':>6}")
    for n in sizes:
        compare(n, runs, peer=peer)


if __name__ == "__main__":
    if "--candidates" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--candidates", action="store_true")
        parser.add_argument("--sizes", default="10000,100000")
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--no-peer", action="store_true",
                            help="no Chroma store (its build is the slow part at 1M)")
        options = parser.parse_args()
        main_candidates([int(s) for s in options.sizes.split(",")], options.runs,
                        peer=not options.no_peer)
    else:
        main()
