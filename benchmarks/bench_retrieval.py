"""Retrieval latency (score + pack, excluding query embedding) at 2K, 10K and 100K candidates.

Builds a columnar view directly (no Chroma: the retrieval hot path never touches it) with random
unit vectors and short synthetic texts, warms up, then times ``Retriever.retrieve`` with a
no-op fetch (record materialization is a separate Chroma cost, timed on its own at 2K in a
real store). Prints medians and p95/p99 (seed 000 §11 percentiles) and the ratio to an in-run
baseline: one numpy matvec over the same vectors (the floor of any cosine ranking).

    python benchmarks/bench_retrieval.py [--sizes 2000,10000,100000] [--runs 200]

BLAS runs single-threaded here (``OPENBLAS_NUM_THREADS=1`` etc., set before numpy loads unless
already set): on a shared 2-core machine a multi-threaded BLAS matvec of 2K × 384 took 6-15 ms
waiting for its threads, single-threaded 0.05 ms. Set ``MNEMOSCOPE_BENCH_BLAS_THREADS`` to
compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, os.environ.get("MNEMOSCOPE_BENCH_BLAS_THREADS", "1"))

import numpy as np  # noqa: E402  (BLAS threads are set first)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import MemoryConfig  # noqa: E402  (BLAS threads are set first)
from engine.metrics import LatencySummary  # noqa: E402  (BLAS threads are set first)
from engine.records import Layer, MemoryRecord, NewMemory  # noqa: E402  (BLAS threads are set first)
from engine.retrieval import RetrievalRequest, Retriever  # noqa: E402  (BLAS threads are set first)
from engine.store.view import ColumnarView  # noqa: E402  (BLAS threads are set first)

_TEXT = ("alpha beta gamma delta cafe jazz deploy database migration cat dog tea coffee "
         "paint lake sunrise support group counselor swim kids work career friend "
         "birthday concert guitar piano book movie trip beach mountain city")
WORDS = _TEXT.split()
NOW = 1_750_000_000_000.0


def build(n: int, seed: int = 7) -> ColumnarView:
    rng = np.random.default_rng(seed)
    view = ColumnarView(384, capacity=n)
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    records = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS, size=12))
        new = NewMemory(f"{text} {i}", agent_id=f"agent{i % 4}",
                        layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                        importance=float(rng.random()), created_at=NOW - float(rng.random())
                        * 90 * 86_400_000.0)
        records.append(MemoryRecord.create(new, now_ms=NOW, record_id=f"id{i:07d}"))
    for start in range(0, n, 5000):
        view.upsert(records[start:start + 5000], vectors[start:start + 5000])
    return view


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2000,10000,100000")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    memory = MemoryConfig()
    rng = np.random.default_rng(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, load average {load:.1f}, "
          f"{os.cpu_count()} cores; times exclude query embedding and record fetch")
    print(f"{'candidates':>10} {'agent':>6} {'median ms':>10} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'matvec p95':>10} {'ratio':>6}")
    for n in (int(s) for s in args.sizes.split(",")):
        view = build(n)
        retriever = Retriever()
        queries = [" ".join(rng.choice(WORDS, size=6)) for _ in range(args.runs + 3)]
        qvecs = rng.standard_normal((len(queries), 384)).astype(np.float32)
        qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
        for agent in (None, "agent1"):
            ours, base = LatencySummary(), LatencySummary()
            for i, (query, qv) in enumerate(zip(queries, qvecs, strict=True)):
                request = RetrievalRequest(max_tokens=1800, query=query, agent_id=agent)
                started = time.perf_counter()
                snapshot = view.snapshot()
                retriever.retrieve(snapshot, request, now_ms=NOW, memory=memory,
                                   query_vector=qv, fetch=lambda ids: [])
                elapsed = (time.perf_counter() - started) * 1000.0
                started = time.perf_counter()
                _ = snapshot.vectors @ qv
                matvec = (time.perf_counter() - started) * 1000.0
                if i >= 3:  # seed 000 §11: discard warm-up requests
                    ours.record(elapsed)
                    base.record(matvec)
            o, b = ours.summary(), base.summary()
            print(f"{n:>10} {agent or 'all':>6} {o.p50:>10.3f} {o.p95:>8.3f} {o.p99:>8.3f} "
                  f"{b.p95:>10.3f} {o.p95 / b.p95:>6.1f}")


if __name__ == "__main__":
    main()
