"""Issue 24's scale rows: a cached generated store at 10K, 100K and 1M, and Chroma beside it.

``benchmarks/bench_scale.py`` owns the workload (the store, built once under a cache folder and
reused; docs/benchmarks.md "How each figure is produced"); this module runs it per size and
turns what it measures into report rows, each beside a plain Chroma figure on the same store in
the same run (the peer):

* ``open-cached@N`` / ``open-uncached@N`` — opening the store read-only with and without the
  view cache, against Chroma's own read of every record;
* ``retrieval-exhaustive@N`` / ``retrieval-candidate@N`` — score + pack by exhaustive scoring
  and by the candidate path, against a plain Chroma HNSW query (documents and metadata);
* ``agreement@N`` — top-5 agreement of the candidate path's packed records with exhaustive
  scoring's;
* ``scale-dedup@N`` — the dedup decision, against a plain Chroma nearest-10 query;
* ``resident@N`` — a fresh process's RSS with the store open and the model loaded, against the
  view's own arrays (``ColumnarView.resident_bytes()``);
* ``server-…@N`` — the store served by ``chroma run`` over its own directory: connect, first
  page, second page, agent + layer page, text page of the records table from the server,
  against a plain Chroma ``get`` of 200 records (and, up to 100K, the full-view open they
  replace).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.bench.machine import load_average
from engine.bench.suites import ROOT, SuiteResult, load_script, missing_row
from engine.bench.types import BenchRow, Stats, Target, judged

__all__ = ["DEFAULT_CACHE", "FULL_VIEW_MAX", "SERVER_ROWS", "scale_suite", "server_rows"]

Log = Callable[[str], None]

# Where the stores are kept between runs unless ``--cache`` says otherwise (never the repo).
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "mnemoscope-bench-scale"
# Above this many records the full-view open of a server store is not timed (minutes at 1M;
# the server rows exist so that the window need not do it).
FULL_VIEW_MAX = 100_000
MIB = 2**20

# DESIGN.md "Performance budgets" (our bar) and issue 24's goals.
CANDIDATE_TARGETS = {
    100_000: Target("p95 ≤ 5 ms at 100K", "p95", "<=", 5.0, "p95 < 10 ms at 2K"),
    1_000_000: Target("p95 ≤ 15 ms at 1M", "p95", "<=", 15.0, "p95 < 10 ms at 2K"),
}
AGREEMENT_TARGET = Target("top-5 agreement with exhaustive ≥ 0.99 (mean)", "median", ">=",
                          0.99)
DEDUP_TARGETS = {1_000_000: Target("p99 ≤ 5 ms at 1M", "p99", "<=", 5.0,
                                   "p99 < 100 ms at 10K")}
RESIDENT_TARGETS = {1_000_000: Target("≤ 2 GB with a 1M store open, model included", "median",
                                      "<=", 2048.0)}
SERVER_TARGET = Target("≤ 1 s at 1M without a full read (median)", "median", "<=", 1000.0)
# (row key, what, judged at 1M) in bench_gui.server_pages's row order
SERVER_ROWS = (("server-connect", "connect to a server store (Chroma's count)", False),
               ("server-first-page", "server store → records table first page", True),
               ("server-second-page", "server store → records table second page", False),
               ("server-filter-page", "server store → agent + layer filtered page", True),
               ("server-text-page", "server store → text filter page (where_document)", True))


def _ms(values: Sequence[float]) -> list[float]:
    return [float(v) * 1000.0 for v in values]


def _ratio(stats: Stats, baseline: Stats, statistic: str) -> float:
    base = baseline.get(statistic)
    return stats.get(statistic) / base if base > 0 else math.nan


def _row(**fields: Any) -> BenchRow:
    fields.setdefault("load", load_average()[0])
    return judged(BenchRow(**fields))


def scale_suite(sizes: Sequence[int], cache: Path, runs: int, queries: int, log: Log, *,
                server: bool = True, model: bool = True, open_runs: int = 3,
                root: Path = ROOT) -> SuiteResult:
    """Build or reuse the cached store of each size and measure it (module docstring).

    Args:
        sizes: Record counts (one cached store each).
        cache: The cache folder (``bench_scale.py --cache``); stores are reused across runs.
        runs: Retrieval requests timed per size.
        queries: Dedup decisions timed per size.
        log: Progress lines (the builder says ``building`` or ``reusing cached store``).
        server: Also serve each store with ``chroma run`` and time the records table.
        model: Load the embedding model in the resident-memory process.
        open_runs: Timed opens with the view cache (and server connections) per size.
        root: The checkout whose ``benchmarks/`` scripts are driven.
    """
    result = SuiteResult()
    script = load_script("bench_scale", root)
    if script is None:
        for size in sizes:
            result.rows.append(missing_row(f"retrieval-candidate@{size}",
                                           "retrieval, candidate path", size, "ms",
                                           CANDIDATE_TARGETS.get(size),
                                           "benchmarks/bench_scale.py is not on this checkout"))
        return result
    for size in sizes:
        # not in result.stores: the GUI suite's first page stays on the dedup suite's store
        store = script.ensure_store(cache, size, log=log)
        result.rows += _open_rows(script, store.path, size, open_runs, log)
        result.rows += _retrieval_rows(script, store.path, size, runs, result, log)
        result.rows.append(_dedup_row(script, store.path, size, queries, result, log))
        result.rows.append(_resident_row(script, store.path, size, model, log))
        if server:
            try:
                measured = script.server(store.path, size, open_runs,
                                         full_view_runs=1 if size <= FULL_VIEW_MAX else 0)
            except Exception as exc:  # a benchmark that cannot run is a row that says why
                result.rows.append(missing_row(
                    f"server-first-page@{size}", "server store → records table first page",
                    size, "ms", SERVER_TARGET if size >= 1_000_000 else None,
                    f"could not run: {exc}"))
            else:
                result.rows += server_rows(measured, size, log)
    return result


def _open_rows(script: Any, path: Path, size: int, runs: int, log: Log) -> list[BenchRow]:
    times = script.open_times(path, runs)
    peer = Stats.of(_ms(times.chroma_read))
    peer_cpu = Stats.of(_ms(times.cpu["chroma_read"])).median
    rows = []
    for key, name, what, values, note in (
            ("open-cached", "cached", "open a store (read-only), view cache", times.cached,
             f"median of {runs} opens after a warm-up open; MemoryStore.open as the app"),
            ("open-uncached", "uncached", "open a store (read-only), no view cache",
             times.uncached,
             "every record read from Chroma into the view (the cache moved aside), once")):
        stats = Stats.of(_ms(values))
        cpu = Stats.of(_ms(times.cpu[name])).median
        rows.append(_row(key=f"{key}@{size}", what=what, size=size, unit="ms", stats=stats,
                         baseline="plain Chroma read of every record (documents, metadata, "
                                  "embeddings)", baseline_stats=peer,
                         ratio=_ratio(stats, peer, "median"),
                         note=f"{note}; process CPU {cpu:.0f} ms (Chroma's read "
                              f"{peer_cpu:.0f} ms)"))
        log(f"{key}@{size}: {stats.median:.0f} ms (Chroma's full read {peer.median:.0f} ms)")
    return rows


def _retrieval_rows(script: Any, path: Path, size: int, runs: int, result: SuiteResult,
                    log: Log) -> list[BenchRow]:
    measured = script.retrieval(path, runs)
    peer = Stats.of(measured.wall["chroma"])
    baseline = "plain Chroma query (HNSW, top 10, documents + metadata), same store"
    exhaustive, candidate = Stats.of(measured.wall["exhaustive"]), \
        Stats.of(measured.wall["candidate"])
    cpu_e, cpu_c = Stats.of(measured.cpu["exhaustive"]), Stats.of(measured.cpu["candidate"])
    agreement = sum(measured.agreement) / len(measured.agreement) if measured.agreement \
        else math.nan
    result.series[f"retrieval-candidate@{size}"] = measured.wall["candidate"]
    result.series[f"retrieval-candidate@{size} baseline"] = measured.wall["chroma"]
    log(f"retrieval@{size}: exhaustive p95 {exhaustive.p95:.2f}, candidate p95 "
        f"{candidate.p95:.2f}, Chroma p95 {peer.p95:.2f} ms; agreement {agreement:.3f}")
    workload = (f"{script.BUDGET}-token budget, all agents, queries of 5 Zipf words near a "
                "stored record's vector")
    return [
        _row(key=f"retrieval-exhaustive@{size}",
             what="retrieval (score + pack), exhaustive scoring, excl. query embedding",
             size=size, unit="ms", stats=exhaustive, baseline=baseline, baseline_stats=peer,
             ratio=_ratio(exhaustive, peer, "p95"),
             note=f"the reference; {workload}; CPU p50 {cpu_e.median:.2f} / p95 "
                  f"{cpu_e.p95:.2f} ms"),
        _row(key=f"retrieval-candidate@{size}",
             what="retrieval (score + pack), candidate path, excl. query embedding",
             size=size, unit="ms", stats=candidate, baseline=baseline, baseline_stats=peer,
             ratio=_ratio(candidate, peer, "p95"), target=CANDIDATE_TARGETS.get(size),
             note=f"{workload}; CPU p50 {cpu_c.median:.2f} / p95 {cpu_c.p95:.2f} ms; "
                  f"{measured.fallbacks} of {candidate.n} requests scored every row; dense "
                  f"index {measured.index_bytes / MIB:.1f} MiB, built in "
                  f"{measured.index_s:.1f} s"),
        _row(key=f"agreement@{size}",
             what="top-5 agreement, candidate path vs exhaustive scoring", size=size,
             unit="share", stats=Stats.of([agreement]), target=AGREEMENT_TARGET,
             note=f"mean over {len(measured.agreement)} requests: {agreement:.4f}; share of "
                  "exhaustive scoring's first 5 packed records the candidate path packed "
                  "first too"),
    ]


def _dedup_row(script: Any, path: Path, size: int, queries: int, result: SuiteResult,
               log: Log) -> BenchRow:
    used, timings, peer_ms = script.dedup(path, queries)
    wall = [float(v) for v in timings[:, 0]]
    cpu = Stats.of([float(v) for v in timings[:, 1]])
    stats, peer = Stats.of(wall), Stats.of(peer_ms)
    result.series[f"scale-dedup@{size}"] = wall
    log(f"scale-dedup@{size}: p99 {stats.p99:.2f} ms ({used}); Chroma p99 {peer.p99:.2f} ms")
    return _row(key=f"scale-dedup@{size}",
                what="dedup decision (hash + nearest + rules), excl. embedding, cached store",
                size=size, unit="ms", stats=stats,
                baseline="plain Chroma nearest-10 query, same store", baseline_stats=peer,
                ratio=_ratio(stats, peer, "p99"), target=DEDUP_TARGETS.get(size),
                note=f"search path: {used}; CPU p50 {cpu.median:.2f} / p99 {cpu.p99:.2f} ms; "
                     "half near-duplicates of stored records, half unrelated")


def _resident_row(script: Any, path: Path, size: int, model: bool, log: Log) -> BenchRow:
    what = "resident memory with the store open" + (", model loaded" if model else "")
    target = RESIDENT_TARGETS.get(size) if model else None
    try:
        measured = script.resident(path, model=model)
    except Exception as exc:  # a benchmark that cannot run is a row that says why
        return missing_row(f"resident@{size}", what, size, "MiB", target,
                           f"could not run: {exc}")
    view = (measured["view_vectors"] + measured["view_columns"]) / MIB
    loaded = f", the model loaded ({measured['backend']})" if model else ", no model"
    rss = measured["rss"] / MIB
    log(f"resident@{size}: RSS {rss:.0f} MiB (view arrays {view:.0f} MiB)")
    return _row(key=f"resident@{size}", what=what, size=size, unit="MiB",
                stats=Stats.of([rss]), baseline="the view's arrays (ColumnarView.resident_bytes)",
                baseline_stats=Stats.of([view]), ratio=rss / view if view > 0 else math.nan,
                target=target,
                note=f"process RSS in a fresh process after MemoryEngine.open (read-only, view "
                     f"cache){loaded} and one retrieval ({measured['opened'] / MIB:.0f} MiB "
                     f"before it: the retrieval adds the candidate path's indexes); peak "
                     f"{measured['peak'] / MIB:.0f} MiB; view vectors "
                     f"{measured['view_vectors'] / MIB:.0f} MiB, columns "
                     f"{measured['view_columns'] / MIB:.0f} MiB")


def server_rows(measured: Sequence[tuple[str, list[float], str]], size: int, log: Log, *,
                keyed_by_size: bool = True) -> list[BenchRow]:
    """Report rows of ``bench_gui.server_pages``'s measurements (seconds) of a ``size``-record
    server store: each page beside the plain Chroma ``get`` of 200 records, then the full-view
    open when it was measured.

    Args:
        keyed_by_size: Keys end in ``@size`` (several sizes in one report).
    """
    pages, peer = measured[:5], measured[5]
    full = measured[6] if len(measured) > 6 else None
    suffix = f"@{size}" if keyed_by_size else ""
    base = Stats.of(_ms(peer[1]))
    full_stats = Stats.of(_ms(full[1])) if full is not None else None
    replaced = ("full-view open + first page median "
                f"{full_stats.median:.0f} ms (what this replaces)" if full_stats is not None
                else f"full-view open not timed above {FULL_VIEW_MAX:,} records")
    rows = []
    for (key, what, judged_at_scale), (_name, values, note) in zip(SERVER_ROWS, pages,
                                                                    strict=True):
        stats = Stats.of(_ms(values))
        target = SERVER_TARGET if judged_at_scale and size >= 1_000_000 else None
        rows.append(_row(key=f"{key}{suffix}", what=what, size=size, unit="ms", stats=stats,
                         baseline="plain Chroma get of 200 records", baseline_stats=base,
                         ratio=_ratio(stats, base, "median"), target=target,
                         note=f"{note}; {replaced}; goal ≤ 1 s at 1M"))
        log(f"{key}{suffix}: median {stats.median:.0f} ms")
    if full_stats is not None:
        rows.append(_row(key=f"server-full-view{suffix}",
                         what="full-view open + first page (server store)", size=size,
                         unit="ms", stats=full_stats, baseline="plain Chroma get of 200 records",
                         baseline_stats=base, ratio=_ratio(full_stats, base, "median"),
                         note="every record read into the process first: MemoryEngine.open "
                              "without defer_view"))
    return rows
