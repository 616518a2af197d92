"""What a candidate request costs, and what it returns, on ``bench_retrieval.py --candidates``'
workload: a harness for changes that must not change any result (docs/retrieval.md
"First-round cost (issue 24)").

For each size it runs the workload's requests on the candidate path (forced, 3 warm-ups first,
single-threaded BLAS) and writes, per request, CPU time (``time.thread_time``), wall time, the
rounds the request took, and what a caller sees: the packed ids in order, the scores of every
row (their bytes' digest and the packed records' scores), the component matrix and drop codes
(digests), the candidate sources, the scored count and the bound. ``--compare`` checks two such
files request by request and prints the timing side by side:

    python benchmarks/bench_first_round.py --sizes 10000,100000 --out after.json
    python benchmarks/bench_first_round.py --compare before.json after.json

Run a copy of this file inside another checkout (``git archive``) to measure that code: the
engine is imported from the tree this file sits in. The corpora (records and vectors) are
pickled once under ``$MNEMOSCOPE_BENCH_CACHE`` (default ``/tmp/mnemoscope-bench``), so both
versions score the same records. ``--profile N`` prints a cProfile of N requests at the
first size instead. ``--store PATH`` runs the requests on a cached ``bench_scale.py`` store
opened read-only instead of ``--sizes`` (at 1M: under ``flock /work/notes/1m.lock``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_retrieval as workload

from engine.config import MemoryConfig, RetrievalConfig
from engine.records import MemoryRecord
from engine.retrieval import RetrievalRequest, Retriever
from engine.store.view import ColumnarView


def corpus(n: int, seed: int = 7) -> tuple[ColumnarView, np.ndarray, list[str]]:
    """The workload's view of ``n`` records, its query vectors and query texts (as
    ``bench_retrieval.compare`` draws them), the records cached on disk."""
    root = Path(os.environ.get("MNEMOSCOPE_BENCH_CACHE", "/tmp/mnemoscope-bench"))
    path = root / f"topical-{n}-{seed}.pickle"
    records: list[MemoryRecord]
    if path.exists():
        with path.open("rb") as file:
            records, vectors = pickle.load(file)
    else:
        built = workload.build_topical(n, seed)
        records, vectors = built.records, built.vectors
        root.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as file:
            pickle.dump((records, vectors), file)
    view = ColumnarView(384, capacity=n)
    for start in range(0, n, 5000):
        view.upsert(records[start:start + 5000], vectors[start:start + 5000])
    rng = np.random.default_rng(seed + 1)
    runs = 200
    queries = [" ".join(rng.choice(workload.VOCABULARY, size=5, p=workload._ZIPF))
               for _ in range(runs + workload.WARMUP)]
    near = vectors[rng.integers(0, n, len(queries))]
    near = near + 0.03 * rng.standard_normal(near.shape).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    return view, near, queries


def _digest(values: Any) -> str:
    return hashlib.sha1(np.ascontiguousarray(values).tobytes()).hexdigest()


def run(n: int, runs: int) -> dict[str, Any]:
    """Time ``runs`` candidate requests on ``n`` records and record what each returned."""
    view, vectors, queries = corpus(n)
    return measure(view.snapshot(), queries, vectors, runs)


def run_store(path: Path, runs: int, seed: int = 7) -> dict[str, Any]:
    """:func:`measure` on a cached ``bench_scale.py`` store opened read-only (the 1M store),
    with ``bench_scale.retrieval``'s queries."""
    import bench_scale

    rng = np.random.default_rng(seed + 1)
    with bench_scale.opened(path) as store:
        snapshot = store.view.snapshot()
        queries = [" ".join(rng.choice(workload.VOCABULARY, size=5, p=workload._ZIPF))
                   for _ in range(runs + workload.WARMUP)]
        near = snapshot.vectors[rng.integers(0, snapshot.n, len(queries))]
        near = near + 0.03 * rng.standard_normal(near.shape).astype(np.float32)
        near /= np.linalg.norm(near, axis=1, keepdims=True)
        return measure(snapshot, queries, near, runs)


def measure(snapshot: Any, queries: list[str], vectors: np.ndarray, runs: int
            ) -> dict[str, Any]:
    """Time ``runs`` candidate requests on ``snapshot`` (after :data:`WARMUP` untimed ones)
    and record what each returned."""
    n = snapshot.n
    retriever = Retriever(RetrievalConfig(candidate_threshold=0))
    memory = MemoryConfig()
    rounds = [0]
    inner = retriever._score_candidates

    def counted(*args: Any, **kwargs: Any) -> Any:
        rounds[0] += 1
        return inner(*args, **kwargs)

    retriever._score_candidates = counted  # type: ignore[method-assign]
    retriever.dense_index(snapshot)
    packed: list[str] = []

    def fetch(ids: Any) -> list[MemoryRecord]:
        packed[:] = list(ids)
        return []

    requests: list[dict[str, Any]] = []
    loads = [os.getloadavg()[0]]
    for i, (query, vector) in enumerate(zip(queries[:runs + workload.WARMUP],
                                            vectors, strict=False)):
        request = RetrievalRequest(max_tokens=workload.BUDGET, query=query)
        rounds[0] = 0
        packed.clear()
        started, cpu_started = time.perf_counter(), time.thread_time()
        bundle = retriever.retrieve(snapshot, request, now_ms=workload.NOW, memory=memory,
                                    query_vector=vector, fetch=fetch)
        cpu = (time.thread_time() - cpu_started) * 1000.0
        wall = (time.perf_counter() - started) * 1000.0
        if i < workload.WARMUP:
            continue
        d = bundle.diagnostics
        packed_rows = np.flatnonzero(d.drop_codes == -1)
        row_of = dict(zip(snapshot.id_array[packed_rows].tolist(), packed_rows.tolist(),
                          strict=True))
        rows = [row_of[record_id] for record_id in packed]
        requests.append({
            "cpu": cpu, "wall": wall, "rounds": rounds[0], "packed": list(packed),
            "packed_scores": [float(d.scores[r]).hex() for r in rows],
            "scores": _digest(d.scores), "eligible": _digest(d.eligible),
            "components": _digest(d.components), "drop_codes": _digest(d.drop_codes),
            "sources": dict(d.candidate_sources), "scored": d.scored_count,
            "bound": None if d.candidate_bound is None else float(d.candidate_bound).hex(),
            "total_tokens": bundle.total_tokens, "truncated": bundle.truncated})
    loads.append(os.getloadavg()[0])
    return {"n": n, "loads": loads, "requests": requests}


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{np.percentile(values, 50):6.2f} / {np.percentile(values, 95):6.2f}"


def compare(before_path: str, after_path: str) -> int:
    """Print timings side by side; return the number of requests whose results differ."""
    before = json.loads(Path(before_path).read_text())
    after = json.loads(Path(after_path).read_text())
    differ = 0
    for old, new in zip(before["sizes"], after["sizes"], strict=True):
        assert old["n"] == new["n"]
        for i, (a, b) in enumerate(zip(old["requests"], new["requests"], strict=True)):
            keys = [k for k in a if k not in ("cpu", "wall") and a[k] != b.get(k)]
            if keys:
                differ += 1
                print(f"n={old['n']} request {i}: differs in {keys}")
        for name, size in (("before", old), ("after", new)):
            reqs = size["requests"]
            one = [r["cpu"] for r in reqs if r["rounds"] == 1]
            print(f"{size['n']:>8} {name:>6} load {size['loads'][0]:.1f}-{size['loads'][1]:.1f}"
                  f" | cpu p50/p95 {_summary([r['cpu'] for r in reqs])}"
                  f" | wall {_summary([r['wall'] for r in reqs])}"
                  f" | one-round ({len(one)}) cpu {_summary(one)}")
        print(f"{old['n']:>8} {len(old['requests'])} requests compared")
    print(f"requests with different results: {differ}")
    return differ


def profile(n: int, runs: int) -> None:
    """cProfile ``runs`` candidate requests (CPU time) at ``n`` records."""
    import cProfile
    import pstats

    view, vectors, queries = corpus(n)
    snapshot = view.snapshot()
    retriever = Retriever(RetrievalConfig(candidate_threshold=0))
    memory = MemoryConfig()
    retriever.dense_index(snapshot)
    for query, vector in zip(queries[:workload.WARMUP], vectors, strict=False):
        retriever.retrieve(snapshot, RetrievalRequest(max_tokens=workload.BUDGET, query=query),
                           now_ms=workload.NOW, memory=memory, query_vector=vector,
                           fetch=lambda ids: [])
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    for query, vector in zip(queries[workload.WARMUP:workload.WARMUP + runs],
                             vectors[workload.WARMUP:], strict=False):
        retriever.retrieve(snapshot, RetrievalRequest(max_tokens=workload.BUDGET, query=query),
                           now_ms=workload.NOW, memory=memory, query_vector=vector,
                           fetch=lambda ids: [])
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--out", help="write the results here (JSON)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--profile", type=int, metavar="N")
    parser.add_argument("--store", type=Path, help="a cached bench_scale.py store (read-only) "
                        "instead of --sizes; run it under flock /work/notes/1m.lock at 1M")
    options = parser.parse_args()
    if options.compare:
        sys.exit(1 if compare(*options.compare) else 0)
    sizes = [int(s) for s in options.sizes.split(",")]
    if options.profile:
        profile(sizes[0], options.profile)
        return
    results = {"sizes": [run_store(options.store, options.runs)] if options.store
               else [run(n, options.runs) for n in sizes]}
    if options.out:
        Path(options.out).write_text(json.dumps(results))
    for size in results["sizes"]:
        cpu = [r["cpu"] for r in size["requests"]]
        print(f"{size['n']:>8} load {size['loads'][0]:.1f}-{size['loads'][1]:.1f} "
              f"cpu p50/p95 {_summary(cpu)}", flush=True)


if __name__ == "__main__":
    main()
