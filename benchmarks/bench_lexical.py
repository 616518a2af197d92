"""The lexical index's memory, build time and look-up cost (issue 24, "Compact lexical index").

Indexes the texts of ``bench_retrieval.py --candidates``'s generated store (12 Zipf words over
a 5,000-word vocabulary plus the record's number, 4 agents) with
:class:`~engine.retrieval.lexical.TextIndex` and prints, per size:

* ``traced``: what building the index holds afterwards (``tracemalloc``, MiB and bytes per
  record; the texts, hashes and tags are the view's and are not counted), and its peak during
  the build;
* ``build``: CPU seconds (``time.thread_time``) of the first sync;
* look-ups: CPU ms p50 / p95 per query (5 Zipf words, ``bench_retrieval``'s queries) of
  ``term_postings`` for each word over one agent's rows, and of ``bm25`` over them;
* ``append``: CPU ms p50 of syncing one appended record, then reading a query's postings from
  the appended row on (the candidate path's incremental read).

``--module PATH`` indexes with the ``TextIndex`` of another copy of ``lexical.py`` (a file), to
compare two versions in alternating processes on the same texts. The texts are generated once
per size and kept under ``$MNEMOSCOPE_BENCH_CACHE`` (default ``/tmp/mnemoscope-bench``).

    python benchmarks/bench_lexical.py [--sizes 100000] [--runs 200] [--module PATH]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import pickle
import sys
import time
import tracemalloc
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_retrieval as script  # the --candidates workload's generator

from engine.metrics import LatencySummary


def _texts(n: int) -> tuple[list[str], list[tuple[str, ...]], list[str], np.ndarray]:
    """Contents, tags, hashes and agents of ``bench_retrieval.build_topical(n)`` (cached)."""
    root = Path(os.environ.get("MNEMOSCOPE_BENCH_CACHE", "/tmp/mnemoscope-bench"))
    path = root / f"lexical-texts-{n}.pickle"
    if path.exists():
        with path.open("rb") as handle:
            loaded: tuple[list[str], list[tuple[str, ...]], list[str], np.ndarray] = \
                pickle.load(handle)
        return loaded
    snapshot = script.build_topical(n).view.snapshot()
    value = (list(snapshot.content_array[:n]), list(snapshot.tag_array[:n]),
             list(snapshot.hash_array[:n]), np.asarray(snapshot.agent[:n]).copy())
    root.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        pickle.dump(value, handle)
    return value


def _snapshot(contents: list[str], tags: list[tuple[str, ...]], hashes: list[str],
              version: int) -> Any:
    """The fields of a view snapshot the index reads (one lineage, rows only appended)."""
    return types.SimpleNamespace(
        n=len(contents), hashes=hashes, tags=tags, layout=1, version=version, lineage=1,
        content_array=np.array(contents, dtype=object), hash_array=np.array(hashes, dtype=object),
        tag_array=np.fromiter(tags, dtype=object, count=len(tags)))


def _p(values: list[float]) -> str:
    latencies = LatencySummary()
    for value in values:
        latencies.record(value)
    summary = latencies.summary()
    return f"{summary.p50:.3f} / {summary.p95:.3f}"


def measure(n: int, runs: int, index_type: Any) -> None:
    contents, tags, hashes, agents = _texts(n)
    snapshot = _snapshot(contents, tags, hashes, 1)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.thread_time()
    index = index_type()
    index.sync(snapshot)
    build_s = time.thread_time() - started
    traced, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = traced - before
    rng = np.random.default_rng(8)
    queries = [[str(w) for w in rng.choice(script.VOCABULARY, size=5, p=script._ZIPF)]
               for _ in range(runs)]
    mask = agents == 1
    postings, bm25 = [], []
    for query in queries:
        started = time.thread_time()
        for word in query:
            index.term_postings(word, mask)
        postings.append((time.thread_time() - started) * 1000.0)
        started = time.thread_time()
        index.bm25(query, mask)
        bm25.append((time.thread_time() - started) * 1000.0)
    appends = []
    grown_contents, grown_tags, grown_hashes = list(contents), list(tags), list(hashes)
    for i, query in enumerate(queries[:50]):
        grown_contents.append(" ".join(query) + f" appended {i}")
        grown_tags.append(())
        grown_hashes.append(f"appended-{i}")
        grown = _snapshot(grown_contents, grown_tags, grown_hashes, 2 + i)
        grown_mask = np.ones(grown.n, dtype=bool)
        started = time.thread_time()
        index.sync(grown)
        for word in query:
            index.term_postings(word, grown_mask, grown.n - 1)
        appends.append((time.thread_time() - started) * 1000.0)
    load = os.getloadavg()[0]
    print(f"{n:>8} {load:>5.1f} | {held / 2**20:>8.1f} {held / n:>7.0f} {peak / 2**20:>8.1f} | "
          f"{build_s:>6.2f} | {_p(postings):>15} | {_p(bm25):>15} | "
          f"{float(np.median(appends)):>7.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--module", default="", help="a lexical.py file to take TextIndex from")
    args = parser.parse_args()
    if args.module:
        spec = importlib.util.spec_from_file_location("lexical_under_test", args.module)
        if not Path(args.module).is_file() or spec is None or spec.loader is None:
            raise SystemExit(f"--module {args.module}: no such Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        index_type = module.TextIndex
    else:
        from engine.retrieval import lexical

        index_type = lexical.TextIndex
    print(f"TextIndex from {args.module or 'engine.retrieval.lexical'}; MiB, bytes per record, "
          f"CPU s / ms (p50 / p95)")
    print(f"{'records':>8} {'load':>5} | {'traced':>8} {'B/rec':>7} {'peak':>8} | "
          f"{'build':>6} | {'postings ms':>15} | {'bm25 ms':>15} | {'append':>7}")
    for n in (int(s) for s in args.sizes.split(",")):
        measure(n, args.runs, index_type)


if __name__ == "__main__":
    main()
