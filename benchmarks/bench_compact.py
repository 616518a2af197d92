"""Resident memory of the columnar view, and retrieval over compact vectors (docs/retrieval.md
"Compact vectors").

Each configuration runs in its own process, so its resident set is its own:

* ``float32`` — the engine of an earlier commit (``--before``, exported with ``git archive``):
  the view holds its float32 vectors in memory (the before figure);
* ``compact`` — this engine, exact vectors in memory (int8 codes beside them);
* ``spilled`` — this engine, exact vectors in a memory-mapped spill file (what an embedded store
  opens with).

A process builds a generated view of ``n`` records (the ``--candidates`` workload of
``bench_retrieval.py``: vectors around 200 topics, 12-word Zipf texts) from columns, as a view
cache load does (``--store``: opens a real embedded store from its view cache instead), then
reports the view's
``resident_bytes()`` and the process's resident set (``VmRSS``, split into anonymous and file
pages, from ``/proc/self/status``) after the build, after loading the embedding model
(``--model``) and after the timed requests. It times ``--runs`` requests (5 query words, a
vector near a record's) on the candidate path and exhaustively, p50/p95 wall and CPU
(``time.thread_time``), and the top-5 agreement of the candidate path with exhaustive float32
scoring, in the same run. The load average is printed with each row.

    python benchmarks/bench_compact.py [--sizes 100000,1000000] [--runs 50] [--model]
                                       [--before 970bd25]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
NOW = 1_750_000_000_000.0
TOPICS = 200
BUDGET = 1800
WARMUP = 3
DEPTH = 5


def resident() -> dict[str, float]:
    """The process's resident set in MiB: total, anonymous and file pages."""
    fields: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def vocabulary() -> tuple[list[str], Any]:
    """The generated texts' words and their Zipf probabilities."""
    import numpy as np

    words = [f"w{i}" for i in range(5000)]
    zipf = 1.0 / np.arange(1, len(words) + 1)
    return words, zipf / zipf.sum()


def generate(n: int, step: int = 10_000) -> Any:
    """``n`` generated records and their unit vectors, ``step`` at a time (none kept)."""
    import numpy as np

    from engine.records import Layer, MemoryRecord, NewMemory

    rng = np.random.default_rng(11)
    centres = rng.standard_normal((TOPICS, 384)).astype(np.float32)
    words, zipf = vocabulary()
    for start in range(0, n, step):
        count = min(step, n - start)
        vectors = centres[rng.integers(0, TOPICS, count)]
        vectors = vectors + 0.9 * rng.standard_normal((count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        texts = rng.choice(words, size=(count, 12), p=zipf)
        records = [MemoryRecord.create(
            NewMemory(" ".join(texts[i]) + f" {start + i}", agent_id=f"agent{i % 4}",
                      layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                      importance=float(rng.random()),
                      created_at=NOW - float(rng.random()) * 90 * 86_400_000.0),
            now_ms=NOW, record_id=f"id{start + i:07d}") for i in range(count)]
        yield records, vectors


def generated_view(n: int, spill: str | None) -> Any:
    """A view of ``n`` generated records built from columns, as a view cache load builds it
    (``ColumnarView.from_columns``; no record objects: a million of them took the shared
    machine tens of minutes), with the exact vectors spilled to ``spill`` if given."""
    import numpy as np

    from engine.records import Layer
    from engine.store.view import LAYERS, ColumnarView
    from engine.text import content_hash, estimate_tokens

    rng = np.random.default_rng(11)
    centres = rng.standard_normal((TOPICS, 384)).astype(np.float32)
    words, zipf = vocabulary()
    vectors = np.empty((n, 384), dtype=np.float32)
    for start in range(0, n, 50_000):
        count = min(50_000, n - start)
        block = centres[rng.integers(0, TOPICS, count)]
        block += 0.9 * rng.standard_normal((count, 384)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        vectors[start:start + count] = block
    choice = rng.choice(len(words), size=(n, 12), p=zipf)
    contents = [" ".join(words[w] for w in row) + f" {i}" for i, row in enumerate(choice.tolist())]
    del choice
    created = NOW - rng.random(n) * 90 * 86_400_000.0
    layer = np.where(np.arange(n) % 2 == 0, LAYERS.index(Layer.EPISODIC),
                     LAYERS.index(Layer.SEMANTIC)).astype(np.int8)
    columns = {
        "agent": (np.arange(n) % 4).astype(np.int32), "source": np.zeros(n, np.int32),
        "layer": layer, "privacy": np.zeros(n, np.int8), "tier": np.zeros(n, np.int8),
        "category": np.zeros(n, np.int8), "state": np.zeros(n, np.int8),
        "importance": rng.random(n).astype(np.float32), "confidence": np.ones(n, np.float32),
        "created_at": created, "last_accessed": created, "access_count": np.zeros(n, np.int32),
        "expires_at": np.full(n, np.inf), "recency_anchor": created,
        "token_estimate": np.fromiter((estimate_tokens(c) for c in contents), np.int32, n),
        "has_vector": np.ones(n, bool), "vectors": vectors,
    }
    kwargs: dict[str, Any] = {} if spill is None else {"spill": Path(spill)}
    return ColumnarView.from_columns(
        384, columns, ids=[f"id{i:07d}" for i in range(n)], contents=contents,
        hashes=[content_hash(c) for c in contents], tags=[()] * n,
        agents=[f"agent{i}" for i in range(4)], sources=["bench"], **kwargs)


def built_store(n: int) -> str:
    """A Mnemoscope embedded store of ``n`` generated records, built once (this engine) and
    kept under ``$MNEMOSCOPE_BENCH_CACHE``; closed, so its view cache is saved."""
    from engine.store import MemoryStore, StoreSpec

    directory = Path(_scratch()) / f"mnemoscope-store-{n}"
    if not (directory / "done").exists():
        store = MemoryStore.open(StoreSpec(str(directory)), now_ms=NOW)
        for records, vectors in generate(n, step=5000):
            store.write(records, vectors)
        store.close()
        (directory / "done").touch()
    return str(directory)


def child(n: int, runs: int, mode: str, model: bool, spill: str | None,
          store_dir: str | None = None) -> dict[str, Any]:
    """One configuration, in this process (the engine on ``sys.path`` decides which)."""
    import numpy as np

    from engine.config import MemoryConfig, RetrievalConfig
    from engine.retrieval import RetrievalRequest, Retriever

    out: dict[str, Any] = {"mode": mode, "n": n, "baseline": resident()}
    rng = np.random.default_rng(7)
    store = None
    started = time.perf_counter()
    if store_dir is not None:  # open a real embedded store (from its view cache), read-only
        from engine.store import MemoryStore, StoreSpec

        store = MemoryStore.open(StoreSpec(store_dir, read_only=True), now_ms=NOW)
        out["from_cache"] = bool(store._view_from_cache)
        view = store.view
    else:
        view = generated_view(n, spill)
    gc.collect()
    out["build_s"] = time.perf_counter() - started
    words, zipf = vocabulary()
    out["view"] = {k: v / 2**20 for k, v in view.resident_bytes().items()}
    out["after_build"] = resident()
    if model:
        from engine.embedding import ModelSpec

        embedder = ModelSpec().embedder()
        embedder.start_loading()
        embedder.wait_ready()
        embedder.embed(["warm up the model"])
        out["after_model"] = resident()

    snapshot = view.snapshot()
    n = snapshot.count
    queries = [" ".join(rng.choice(words, size=5, p=zipf)) for _ in range(runs + WARMUP)]
    rows = snapshot.live_rows[rng.integers(0, n, len(queries))]
    # a query near a record: its exact vector plus a little noise (a paraphrase)
    near = np.asarray(snapshot.vectors[rows], dtype=np.float32)
    near = near + 0.03 * rng.standard_normal(near.shape).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    exhaustive = Retriever(RetrievalConfig(candidate_threshold=n + 1))
    candidate = Retriever(RetrievalConfig(candidate_threshold=0))
    memory = MemoryConfig()
    packed: dict[tuple[str, int], list[str]] = {}
    wall: dict[str, list[float]] = {"exhaustive": [], "candidate": []}
    cpu: dict[str, list[float]] = {"exhaustive": [], "candidate": []}
    agreement: list[float] = []
    # the candidate requests first, then the exhaustive ones: the resident set after the first
    # phase is what an agent's retrievals leave (the exhaustive path reads every exact vector)
    for name, retriever in (("candidate", candidate), ("exhaustive", exhaustive)):
        for i, (query, vector) in enumerate(zip(queries, near, strict=True)):
            request = RetrievalRequest(max_tokens=BUDGET, query=query)

            def fetch(ids: Any, i: int = i, name: str = name) -> list[Any]:
                packed[(name, i)] = list(ids)[:DEPTH]
                return []

            began, cpu_began = time.perf_counter(), time.thread_time()
            retriever.retrieve(snapshot, request, now_ms=NOW, memory=memory,
                               query_vector=vector, fetch=fetch)
            if i >= WARMUP:
                wall[name].append((time.perf_counter() - began) * 1000.0)
                cpu[name].append((time.thread_time() - cpu_began) * 1000.0)
        out[f"after_{name}"] = resident()
    for i in range(WARMUP, len(queries)):
        top = packed[("exhaustive", i)]
        agreement.append(len(set(packed[("candidate", i)]) & set(top)) / len(top))
    out["after_requests"] = resident()
    for name in wall:
        out[name] = {"p50": percentile(wall[name], 0.5), "p95": percentile(wall[name], 0.95),
                     "cpu_p50": percentile(cpu[name], 0.5),
                     "cpu_p95": percentile(cpu[name], 0.95)}
    out["agreement"] = float(np.mean(agreement))
    out["load"] = os.getloadavg()[0]
    if store is not None:
        store.close()
    return out


def run(n: int, runs: int, mode: str, model: bool, before: str | None,
        store_dir: str | None = None) -> dict[str, Any]:
    """:func:`child` in a fresh interpreter with the engine ``mode`` needs."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="bench-compact-", dir=_scratch()) as scratch:
        path = str(ROOT)
        if mode == "float32":
            if before is None:
                raise SystemExit("--before <commit> names the engine to measure float32 with")
            tree = Path(scratch) / "before"
            tree.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, "engine"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            path = str(tree)
        spill = scratch if mode == "spilled" else None
        code = (f"import sys; sys.path.insert(0, {path!r}); "
                f"sys.path.insert(1, {str(ROOT / 'benchmarks')!r}); import json, bench_compact; "
                f"print(json.dumps(bench_compact.child({n}, {runs}, {mode!r}, {model}, "
                f"{spill!r}, {store_dir!r})))")
        result = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                capture_output=True, text=True)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _scratch() -> str:
    """A disk-backed folder for spill files (``/tmp`` may be memory: tmpfs)."""
    root = Path(os.environ.get("MNEMOSCOPE_BENCH_CACHE", "/tmp/mnemoscope-bench"))
    root.mkdir(parents=True, exist_ok=True)
    return str(root)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--model", action="store_true", help="load the embedding model too")
    parser.add_argument("--before", default=None, help="commit of the float32 engine")
    parser.add_argument("--modes", default="float32,compact,spilled")
    parser.add_argument("--store", action="store_true",
                        help="open a real embedded store (from its view cache) of each size")
    options = parser.parse_args()
    print("MiB; ms (wall p50/p95, cpu p50); top-5 agreement of candidates with exhaustive; "
          "RSS = VmRSS (anon + file) after the candidate requests; all = VmRSS after the "
          "exhaustive ones too")
    print(f"{'records':>8} {'mode':>9} {'load':>5} | {'vectors':>8} {'exact':>7} {'mapped':>7}"
          f" | {'rss':>7} {'anon':>7} {'file':>6} {'model+':>7} | {'cand p50':>8} {'p95':>6}"
          f" {'cpu':>6} | {'exh p50':>7} {'p95':>6} {'cpu':>6} {'all':>6} | {'agree':>5}")
    for n in (int(s) for s in options.sizes.split(",")):
        store_dir = built_store(n) if options.store else None
        # a store opens spilled (its folder); "compact" is then the same: measure it once
        modes = [m for m in options.modes.split(",") if not (store_dir and m == "compact")]
        for mode in modes:
            r = run(n, options.runs, mode, options.model, options.before, store_dir)
            view = r["view"]
            vectors = view["vectors"]
            exact = view.get("exact", 0.0 if mode != "float32" else vectors)
            if mode == "float32":
                vectors = 0.0  # the old view's "vectors" were its float32 matrix
            rss = r["after_candidate"]
            model_mib = r["after_model"]["VmRSS"] - r["after_build"]["VmRSS"] \
                if "after_model" in r else 0.0
            c, e = r["candidate"], r["exhaustive"]
            print(f"{n:>8} {mode:>9} {r['load']:>5.2f} | {vectors:>8.1f} {exact:>7.1f} "
                  f"{view.get('mapped', 0.0):>7.1f} | {rss['VmRSS']:>7.0f} {rss['RssAnon']:>7.0f}"
                  f" {rss['RssFile']:>6.0f} {model_mib:>7.0f} | {c['p50']:>8.2f} {c['p95']:>6.2f}"
                  f" {c['cpu_p50']:>6.2f} | {e['p50']:>7.2f} {e['p95']:>6.2f} {e['cpu_p50']:>6.2f}"
                  f" {r['after_requests']['VmRSS']:>6.0f} | {r['agreement']:>5.3f}", flush=True)
            print("   " + json.dumps(r), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
