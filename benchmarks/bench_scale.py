"""Issue 24 at scale: a generated store of 10K, 100K or 1M records, built once and cached.

The store is a real embedded Mnemoscope store (``MemoryStore.write``: the engine's Chroma schema,
Chroma's largest batch per call) of generated records with precomputed vectors, so no model is
needed to build it. The data look like real memories, as in ``bench_retrieval.py --candidates``:
vectors around 200 topics, texts of 12 words over a Zipf vocabulary of 5,000 words; agents,
layers, privacy and tags cycle as in ``tests/ui/bigstore.py`` (so the server filters of
``bench_gui.py --server`` select the same shares). Record ``i`` is a pure function of
``(seed, i)``: a build interrupted part-way resumes where it stopped.

Cache layout (``--cache DIR``; outside the repository, never committed)::

    DIR/<records>/store/         the embedded store (chroma.sqlite3, HNSW segment, view cache)
    DIR/<records>/scale.json     the marker: format, records, seed, written, complete

A run whose marker says ``complete`` with the same format, size and seed reuses the store and
logs ``reusing cached store``; anything else builds (or resumes) and logs ``building``.

Measured per size, all in one run on the same store (:func:`measure`):

* open with the view cache and without it (the cache moved aside: every record read from
  Chroma), read-only, as the app opens a store;
* retrieval p50/p95 (wall and CPU), exhaustive scoring and the candidate path, top-5 agreement
  of the candidate path's packed records with exhaustive scoring, beside a plain Chroma query on
  the same collection (HNSW, documents and metadata, top 10) in the same run (the peer);
* the dedup decision (hash cache + nearest neighbours + rules, no embedding) p99, through
  ``bench_dedup.measure`` on this store;
* resident memory in a fresh process (:func:`resident`): process RSS after opening the store
  and loading the embedding model, and ``ColumnarView.resident_bytes()``;
* the store served by ``chroma run --path`` over the same directory: connect, first page,
  agent + layer filtered page and text filter page of the records table before any full view
  (``bench_gui.bench_server_pages``).

Run from the repository root (build the 1M store with ``nice -n 10``: the cores are shared)::

    python benchmarks/bench_scale.py --cache /work/cache-1m [--sizes 10000,100000,1000000]
                                     [--runs 200] [--build-only]
    python benchmarks/bench_scale.py --resident STORE --json   (one fresh process; internal)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.records import Layer, MemoryRecord, NewMemory, Privacy  # noqa: E402
from engine.store import DEFAULT_COLLECTION, MemoryStore, StoreSpec, view_cache  # noqa: E402

# 1: the first layout (store/ + scale.json); a marker of another format is rebuilt.
FORMAT = 1
DIM = 384
TOPICS = 200
VOCABULARY = [f"w{i}" for i in range(5000)]
_ZIPF = 1.0 / np.arange(1, len(VOCABULARY) + 1)
_ZIPF /= _ZIPF.sum()
# tests/ui/bigstore.py's cycles: agent i % 4, layer i % 6 (an agent + layer filter: 1 in 12)
AGENTS = ("alpha", "beta", "gamma", "delta")
LAYERS = tuple(Layer)
NOW = 1_750_000_000_000.0
DAY_MS = 86_400_000.0
MARKER = "scale.json"
BLOCK = 1000  # records generated from one RNG stream
AGREEMENT_DEPTH = 5
BUDGET = 1800
WARMUP = 3
Log = Callable[[str], None]


def _quiet(_text: str) -> None:
    """A :data:`Log` that drops the line."""


# -- the generated store -------------------------------------------------------------------------


def topic_centres(seed: int) -> np.ndarray:
    """The :data:`TOPICS` topic centres of the store generated with ``seed``."""
    return np.random.default_rng(seed).standard_normal((TOPICS, DIM)).astype(np.float32)


def _block(index: int, seed: int, centres: np.ndarray
           ) -> tuple[list[MemoryRecord], np.ndarray]:
    """Records ``index * BLOCK ..`` (:data:`BLOCK` of them) and their unit vectors."""
    rng = np.random.default_rng([seed, index])
    start = index * BLOCK
    vectors = centres[rng.integers(0, TOPICS, BLOCK)]
    vectors = vectors + 0.9 * rng.standard_normal((BLOCK, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = rng.choice(len(VOCABULARY), size=(BLOCK, 12), p=_ZIPF)
    importance = rng.random(BLOCK)
    age = rng.random(BLOCK) * 90 * DAY_MS
    records = []
    for row in range(BLOCK):
        i = start + row
        new = NewMemory(" ".join(VOCABULARY[w] for w in words[row]) + f" {i}",
                        agent_id=AGENTS[i % 4], layer=LAYERS[i % 6],
                        importance=float(importance[row]), confidence=0.8,
                        privacy=Privacy.PUBLIC if i % 3 else Privacy.PRIVATE,
                        tags=(f"t{i % 5}",), source="bench", created_at=NOW - float(age[row]))
        records.append(MemoryRecord.create(new, now_ms=NOW, record_id=f"s{i:07d}"))
    return records, vectors.astype(np.float32)


def generate(start: int, stop: int, seed: int,
             centres: np.ndarray) -> tuple[list[MemoryRecord], np.ndarray]:
    """Records ``start .. stop-1`` of the store generated with ``seed``, and their unit vectors.

    Record ``i`` depends only on ``(seed, i)`` (it comes from block ``i // BLOCK``, whatever the
    batches it is written in), so a resumed build writes what an uninterrupted one would have.
    """
    records: list[MemoryRecord] = []
    vectors: list[np.ndarray] = []
    first = start // BLOCK
    for index in range(first, (stop + BLOCK - 1) // BLOCK):
        block, block_vectors = _block(index, seed, centres)
        records += block
        vectors.append(block_vectors)
    offset = start - first * BLOCK
    matrix = np.concatenate(vectors)[offset:offset + stop - start]
    return records[offset:offset + stop - start], matrix


@dataclass(frozen=True, slots=True)
class CachedStore:
    """A generated store in the cache.

    Attributes:
        path: The embedded store's directory.
        records: How many records it holds.
        seed: The generator's seed.
        built: Whether this run built (or finished) it; False when reused as it was.
        build_s: Seconds this run spent building (0 when reused).
    """

    path: Path
    records: int
    seed: int
    built: bool
    build_s: float


def _marker(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_marker(folder: Path, data: dict[str, Any]) -> None:
    """Replace the marker atomically (a crash leaves the old one or the new one)."""
    temporary = folder / f".{MARKER}.tmp"
    temporary.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(temporary, folder / MARKER)


def ensure_store(cache: Path, records: int, *, seed: int = 7, log: Log = _quiet) -> CachedStore:
    """The cached store of ``records`` generated records under ``cache``, built if needed.

    Reused as it is when its marker says it is complete for this format, size and seed (logs
    ``reusing cached store``). Otherwise the records the marker does not count as written are
    generated and written in Chroma's largest batches (logs ``building``), the marker updated
    after each batch, and the store closed cleanly so that its view cache is saved.

    Raises:
        ValueError: ``records`` is not positive.
    """
    if records <= 0:
        raise ValueError(f"records must be positive, got {records}")
    folder = cache / str(records)
    path = folder / "store"
    marker = _marker(folder)
    same = marker.get("format") == FORMAT and marker.get("records") == records \
        and marker.get("seed") == seed
    if same and marker.get("complete") and (path / "chroma.sqlite3").exists():
        log(f"reusing cached store of {records:,} records at {path}")
        return CachedStore(path, records, seed, built=False, build_s=0.0)
    written = int(marker.get("written", 0)) if same and path.exists() else 0
    if not written:
        shutil.rmtree(path, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    log(f"building store of {records:,} records at {path} (from record {written:,})")
    store = MemoryStore.open(StoreSpec(str(path)), dimension=DIM, now_ms=NOW)
    try:
        # A write of several Chroma calls first reads the previous state of every record for
        # its rollback; one batch per call has none to read.
        batch = store.max_batch_size
        written = min(written, store.count())  # the marker is written after each batch
        centres = topic_centres(seed)
        state = {"format": FORMAT, "records": records, "seed": seed, "complete": False}
        for start in range(written, records, batch):
            chunk, vectors = generate(start, min(records, start + batch), seed, centres)
            store.write(chunk, vectors)
            _write_marker(folder, {**state, "written": start + len(chunk)})
            done = start + len(chunk)
            if done % (20 * batch) < batch or done == records:
                elapsed = time.perf_counter() - began
                log(f"  {done:,} / {records:,} records written ({elapsed:.0f} s)")
    finally:
        store.close()  # saves the view cache
    _write_marker(folder, {**state, "written": records, "complete": True})
    build_s = time.perf_counter() - began
    log(f"built {records:,} records in {build_s:.0f} s")
    return CachedStore(path, records, seed, built=True, build_s=build_s)


# -- measurements --------------------------------------------------------------------------------


def _script(name: str) -> Any:
    """A sibling benchmark script (``bench_retrieval``, ``bench_dedup``, ``bench_gui``)."""
    from engine.bench.suites import load_script

    module = load_script(name, ROOT)
    if module is None:
        raise RuntimeError(f"benchmarks/{name}.py is not on this checkout")
    return module


@contextlib.contextmanager
def opened(path: Path) -> Iterator[MemoryStore]:
    """The cached store at ``path`` opened read-only (the view from its cache), then closed."""
    store = MemoryStore.open(StoreSpec(str(path), read_only=True), dimension=DIM, now_ms=NOW)
    try:
        yield store
    finally:
        store.close()


def _collection(store: MemoryStore) -> Any:
    """The store's Chroma collection, for the plain-Chroma peer figures.

    The benchmark reaches past the store's API on purpose: the peer is Chroma itself, asked
    directly, on the very collection the engine reads.
    """
    return store._collection


@dataclass
class OpenTimes:
    """Seconds to open the store read-only as the app does (warm: the files in the page cache).

    Attributes:
        cached: Each timed open with the view cache (the first, untimed open warms it up).
        uncached: The open without it (every record read from Chroma), if measured.
        chroma_read: A plain Chroma read of every record (documents, metadata, embeddings,
            Chroma's largest batch per call) on the same collection: the peer of ``uncached``.
        cpu: The process CPU seconds (all threads: Chroma reads on its own) of each, by the
            same names: on a shared machine the wall clock also counts waiting for a core.
    """

    cached: list[float] = field(default_factory=list)
    uncached: list[float] = field(default_factory=list)
    chroma_read: list[float] = field(default_factory=list)
    cpu: dict[str, list[float]] = field(default_factory=lambda: {
        "cached": [], "uncached": [], "chroma_read": []})


def open_times(path: Path, runs: int, *, uncached: bool = True) -> OpenTimes:
    """Time opening the store at ``path`` with its view cache (``runs`` times) and without it.

    Args:
        uncached: Also open it once without the view cache, and read it once whole with
            plain Chroma (each takes minutes at 1M).
    """
    from tests.ui.bigstore import restore_view_cache, view_cache_aside

    out = OpenTimes()
    restore_view_cache(path)  # a run killed during the uncached open left it aside
    with opened(path):
        pass  # warm-up: chromadb imported, files in the page cache
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        store = MemoryStore.open(StoreSpec(str(path), read_only=True), dimension=DIM,
                                 now_ms=NOW)
        out.cached.append(time.perf_counter() - started)
        out.cpu["cached"].append(time.process_time() - cpu)
        store.close()
    if not uncached:
        return out
    with view_cache_aside(path):
        started, cpu = time.perf_counter(), time.process_time()
        store = MemoryStore.open(StoreSpec(str(path), read_only=True), dimension=DIM,
                                 now_ms=NOW)
        out.uncached.append(time.perf_counter() - started)
        out.cpu["uncached"].append(time.process_time() - cpu)
        try:
            collection = _collection(store)
            started, cpu = time.perf_counter(), time.process_time()
            for offset in range(0, store.count(), store.max_batch_size):
                collection.get(offset=offset, limit=store.max_batch_size,
                               include=["documents", "metadatas", "embeddings"])
            out.chroma_read.append(time.perf_counter() - started)
            out.cpu["chroma_read"].append(time.process_time() - cpu)
        finally:
            store.close()
    if not view_cache.is_current(path, DEFAULT_COLLECTION, DIM):
        raise RuntimeError(f"the view cache of {path} did not survive the uncached open")
    return out


def retrieval(path: Path, runs: int, *, seed: int = 7) -> Any:
    """Exhaustive scoring vs the candidate path vs a plain Chroma query, on the cached store.

    Queries as in ``bench_retrieval.py --candidates``: 5 Zipf words, a vector near one stored
    record's. Returns ``bench_retrieval.compare_requests``'s ``Comparison``.
    """
    script = _script("bench_retrieval")
    rng = np.random.default_rng(seed + 1)
    with opened(path) as store:
        snapshot = store.view.snapshot()
        count = len(queries := [" ".join(rng.choice(VOCABULARY, size=5, p=_ZIPF))
                                for _ in range(runs + WARMUP)])
        near = snapshot.vectors[rng.integers(0, snapshot.n, count)]
        near = near + 0.03 * rng.standard_normal(near.shape).astype(np.float32)
        near /= np.linalg.norm(near, axis=1, keepdims=True)
        return script.compare_requests(snapshot, _collection(store), queries, near)


DEDUP_SAMPLE = 4096  # stored records the near-duplicate queries are made from


def _partition(i: int) -> NewMemory:
    """An incoming memory in record ``i``'s partition (agent, layer, privacy), no content."""
    return NewMemory("-", agent_id=AGENTS[i % 4], layer=LAYERS[i % 6],
                     privacy=Privacy.PUBLIC if i % 3 else Privacy.PRIVATE, source="bench")


def dedup(path: Path, queries: int, *, seed: int = 7) -> tuple[str, np.ndarray, list[float]]:
    """The dedup decision on the cached store (``bench_dedup.measure``) and its Chroma peer.

    The incoming memories belong to the partition of record 1 (agent, layer and privacy: one
    record in 12, the candidates the pipeline searches) and are made from a sample of
    :data:`DEDUP_SAMPLE` of its records (half near-duplicates of them, half unrelated), which
    keeps a second copy of a 1M store's vectors out of memory. Nothing is written.

    Returns:
        (search path used, ``[[wall ms, CPU ms, snapshot CPU ms, thread CPU ms]]`` per
        decision, a plain Chroma nearest-10 query's wall ms per query on the same store).
    """
    from dataclasses import replace

    from engine.bench.suites import _dedup_baselines
    from engine.config import DedupConfig
    from engine.memory_engine import MemoryEngine

    script = _script("bench_dedup")
    rng = np.random.default_rng(seed + 2)
    template = _partition(1)
    vectors, texts = _dedup_sample(path, rng)
    # read-only: the cached store is never written (measure only steps up to the decision)
    used, timings = script.measure(path, vectors, texts, queries,
                                   DedupConfig().exact_search_max, rng, read_only=True,
                                   new=lambda text: replace(template, content=text))
    peer, _numpy = _dedup_baselines(MemoryEngine, StoreSpec, path, vectors, queries, rng)
    return str(used), timings, peer


def _dedup_sample(path: Path, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Vectors and texts of :data:`DEDUP_SAMPLE` records of record 1's partition."""
    with opened(path) as store:
        snapshot = store.view.snapshot()
        # record i is "s{i:07d}"; i % 12 == 1 is record 1's partition
        ids = snapshot.ids
        partition = np.flatnonzero([int(ids[row][1:]) % 12 == 1 for row in range(snapshot.n)])
        rows = rng.choice(partition, size=min(DEDUP_SAMPLE, len(partition)), replace=False)
        vectors = np.array(snapshot.vectors[rows], dtype=np.float32)
        contents = snapshot.contents
        texts = [contents[int(row)] for row in rows]
    return vectors, texts


def dedup_recall(path: Path, queries: int, *, seed: int = 7) -> tuple[int, int, int]:
    """``bench_dedup.recall`` on the cached store: the dedup search's candidates at or above
    the review floor, found through the large-partition path against exact search (the same
    kind of incoming memories as :func:`dedup`; read-only).

    Returns:
        (neighbours exact search found, of them found by the approximate path, decisions whose
        highest cosine at or above the floor differs).
    """
    from dataclasses import replace

    from engine.config import DedupConfig

    script = _script("bench_dedup")
    rng = np.random.default_rng(seed + 3)
    template = _partition(1)
    vectors, texts = _dedup_sample(path, rng)
    found: tuple[int, int, int] = script.recall(
        path, vectors, texts, queries, DedupConfig().exact_search_max, rng, read_only=True,
        new=lambda text: replace(template, content=text))
    return found


def _vm(field_name: str) -> int:
    """A ``/proc/self/status`` memory figure in bytes (0 where there is no such file)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1]) * 1024
    return 0


def resident_here(path: Path, *, model: bool, model_cache: Path | None = None
                  ) -> dict[str, Any]:
    """Resident memory of this process after opening ``path`` (and loading the model).

    Opens the store as the app does (``MemoryEngine.open``, read-only, the view from its
    cache), loads the embedding model if ``model`` (the engine's default backend, its
    conversion kept in ``model_cache`` as the app keeps it), and runs one retrieval (which
    builds the candidate path's dense index past its threshold, and embeds the query with the
    model), then reads the process's RSS and its peak.
    """
    from engine.embedding import ModelSpec
    from engine.memory_engine import MemoryEngine
    from engine.retrieval import RetrievalRequest

    cache_dir = None if model_cache is None else str(model_cache)
    embedder = ModelSpec(cache_dir=cache_dir).embedder() if model else None
    if embedder is not None:
        embedder.start_loading()
    engine = MemoryEngine.open(StoreSpec(str(path), read_only=True), embedder=embedder)
    try:
        if embedder is not None and not embedder.wait_ready():
            raise RuntimeError(f"the embedding model did not load: {embedder.status()}")
        before_retrieval = _vm("VmRSS")
        engine.retrieve(RetrievalRequest(query="w1 w7 w42", max_tokens=BUDGET))
        resident = engine.store.view.resident_bytes()
        return {"rss": _vm("VmRSS"), "peak": _vm("VmHWM"), "opened": before_retrieval,
                "view_vectors": resident["vectors"], "view_columns": resident["columns"],
                "records": engine.store.count(), "model": bool(model),
                "backend": embedder.status().backend if embedder is not None else ""}
    finally:
        engine.close()


def resident(path: Path, *, model: bool = True) -> dict[str, Any]:
    """:func:`resident_here` in a fresh process (nothing else of the benchmark resident).

    The model's conversion is kept in ``model`` beside the cached stores; when there is none
    yet, a first process makes it and is not measured (converting imports torch, which the
    app's later launches do not).

    Raises:
        RuntimeError: the child process failed (its stderr's last lines say why).
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--resident", str(path), "--json"]
    model_cache = path.parent.parent / "model"
    if not model:
        command.append("--no-model")
    else:
        command += ["--model-cache", str(model_cache)]
    runs = 2 if model and not (model_cache.exists() and any(model_cache.iterdir())) else 1
    for _ in range(runs):
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"resident-memory process exited with {done.returncode}: {tail}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


TEXT_FILTER = "w4321"  # a rare word of the Zipf vocabulary: about 3 records in 10,000


def server(path: Path, records: int, runs: int, *, full_view_runs: int) -> list[Any]:
    """The cached store served by ``chroma run --path`` over its own directory: the records
    table's pages from the server (``bench_gui.server_pages``).

    The agent + layer filter selects 1 record in 12; the text filter :data:`TEXT_FILTER`.
    """
    from engine.query import RecordQuery
    from tests.support.chroma_server import chroma_server

    script = _script("bench_gui")
    with chroma_server(path) as url:
        return list(script.server_pages(
            url, DEFAULT_COLLECTION, records, runs,
            filtered=RecordQuery(agent_id=AGENTS[0], layer=LAYERS[2], limit=200),
            text=TEXT_FILTER, full_view_runs=full_view_runs))


# -- command line ---------------------------------------------------------------------------------


def _print(rows: Sequence[Any]) -> None:
    print(f"{'row':34} {'n':>5} {'p50':>10} {'p95':>10} {'p99':>10} | {'peer p50':>10} "
          f"{'p95':>10} {'ratio':>7} {'load':>5}  result")
    for row in rows:
        s, b = row.stats, row.baseline_stats
        figures = "" if s is None else f"{s.n:>5} {s.median:>10.2f} {s.p95:>10.2f} {s.p99:>10.2f}"
        peer = "" if b is None else f"{b.median:>10.2f} {b.p95:>10.2f}"
        print(f"{row.key:34} {figures:38} | {peer:21} {row.ratio:>7.2f} {row.load:>5.1f}  "
              f"{row.verdict} {row.unit}; {row.note}", flush=True)


def _dedup_only(path: Path, size: int, queries: int, log: Log) -> None:
    """Log :func:`dedup` and :func:`dedup_recall` on the cached store at ``path``."""
    if not path.exists():
        raise SystemExit(f"no cached store at {path}: build it first (--build-only)")
    log(f"dedup at {size:,} on {path}")
    used, timings, peer = dedup(path, queries)
    wall = np.percentile(timings[:, 0], [50, 95, 99])
    cpu = np.percentile(timings[:, 1], [50, 99])
    own = np.percentile(timings[:, 3], [50, 99])
    chroma = np.percentile(peer, [50, 99])
    log(f"dedup@{size} ({used}, {len(timings)} decisions): wall p50 {wall[0]:.2f} p95 "
        f"{wall[1]:.2f} p99 {wall[2]:.2f} max {timings[:, 0].max():.2f} ms; process CPU p50 "
        f"{cpu[0]:.2f} p99 {cpu[1]:.2f} ms; thread CPU p50 {own[0]:.2f} p99 {own[1]:.2f} ms; "
        f"Chroma nearest-10 p50 {chroma[0]:.2f} p99 "
        f"{chroma[1]:.2f} ms")
    wanted, found, differs = dedup_recall(path, queries)
    log(f"dedup@{size} recall of neighbours >= 0.50 against exact search: {found}/{wanted} = "
        f"{found / max(1, wanted):.4f}; highest cosine (>= 0.50) differs in {differs} of "
        f"{queries}")


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the cached stores and print the scale rows (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder of the cached stores (default: the temp folder's "
                             "mnemoscope-bench-scale)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=200, help="retrievals timed per size")
    parser.add_argument("--queries", type=int, default=400, help="dedup decisions per size")
    parser.add_argument("--build-only", action="store_true", help="build the stores, no more")
    parser.add_argument("--dedup-only", action="store_true",
                        help="only the dedup decision (and its recall against exact search) on "
                             "the cached stores, read-only")
    parser.add_argument("--no-server", action="store_true", help="skip the chroma run rows")
    parser.add_argument("--no-model", action="store_true",
                        help="resident memory without the embedding model")
    parser.add_argument("--resident", type=Path, default=None, metavar="STORE",
                        help="internal: print this process's resident memory with STORE open")
    parser.add_argument("--model-cache", type=Path, default=None,
                        help="with --resident: where the model's conversion is kept")
    parser.add_argument("--json", action="store_true", help="with --resident: JSON only")
    args = parser.parse_args(argv)
    # SIGTERM, and SIGINT even where the shell started this in the background with SIGINT
    # ignored, stop a build between Chroma calls: ensure_store closes the store (its view
    # cache saved), and the next run resumes from the marker.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.resident is not None:
        print(json.dumps(resident_here(args.resident, model=not args.no_model,
                                       model_cache=args.model_cache)))
        return 0
    from engine.bench.scale import DEFAULT_CACHE, scale_suite

    cache = args.cache or DEFAULT_CACHE
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]

    def log(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {text}", flush=True)

    if args.build_only:
        for size in sizes:
            try:
                ensure_store(cache, size, log=log)
            except KeyboardInterrupt:
                written = _marker(cache / str(size)).get("written", 0)
                log(f"stopped with {written:,} of {size:,} records written; run again to resume")
                return 130
        return 0
    if args.dedup_only:
        for size in sizes:
            _dedup_only(cache / str(size) / "store", size, args.queries, log)
        return 0
    result = scale_suite(sizes, cache, args.runs, args.queries, log, server=not args.no_server,
                         model=not args.no_model)
    _print(result.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
