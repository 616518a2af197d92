"""Issue 24's scale suite: the cached generated store is built once, and the rows it emits."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from engine.bench.scale import (
    AGREEMENT_TARGET,
    CANDIDATE_TARGETS,
    SERVER_TARGET,
    scale_suite,
    server_rows,
)
from engine.bench.suites import load_script
from engine.store import MemoryStore, StoreSpec, view_cache

SIZE = 2000


@pytest.fixture(scope="module")
def script() -> ModuleType:
    module = load_script("bench_scale")
    assert module is not None
    return module


@pytest.fixture(scope="module")
def cached(script: ModuleType, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, list[str]]:
    """A cache folder holding a built 2K store, and the log of building it."""
    cache = tmp_path_factory.mktemp("scale-cache")
    lines: list[str] = []
    store = script.ensure_store(cache, SIZE, log=lines.append)
    assert store.built and store.records == SIZE
    return cache, lines


def test_a_second_run_reuses_the_cached_store(script: ModuleType,
                                              cached: tuple[Path, list[str]]) -> None:
    cache, first = cached
    assert any(line.startswith(f"building store of {SIZE:,} records") for line in first)
    path = cache / str(SIZE) / "store"
    assert view_cache.is_current(path, "mnemoscope_memories", 384)  # saved on close
    marker = json.loads((cache / str(SIZE) / "scale.json").read_text(encoding="utf-8"))
    assert marker["complete"] and marker["written"] == SIZE
    lines: list[str] = []
    again = script.ensure_store(cache, SIZE, log=lines.append)
    assert not again.built and again.path == path
    assert lines == [f"reusing cached store of {SIZE:,} records at {path}"]


def test_a_view_cache_left_aside_by_a_killed_run_is_put_back(
        script: ModuleType, cached: tuple[Path, list[str]]) -> None:
    # A benchmark killed during the uncached open (SIGTERM: no ``finally``) left the cached
    # store's view cache in a folder beside it; the next run's "cached" opens then read
    # every record from Chroma and the run ended in "did not survive the uncached open".
    import os
    import tempfile

    cache, _ = cached
    path = cache / str(SIZE) / "store"
    aside = Path(tempfile.mkdtemp(prefix="view-cache-aside-", dir=path.parent))
    for name in (view_cache.CACHE_META, view_cache.CACHE_ARRAYS, view_cache.CACHE_VECTORS):
        os.replace(path / name, aside / name)
    assert not view_cache.is_current(path, "mnemoscope_memories", 384)
    times = script.open_times(path, runs=1, uncached=False)
    assert view_cache.is_current(path, "mnemoscope_memories", 384) and not aside.exists()
    assert len(times.cached) == 1


def test_an_interrupted_build_resumes_with_the_same_records(
        script: ModuleType, tmp_path: Path) -> None:
    centres = script.topic_centres(7)
    whole, whole_vectors = script.generate(0, 2500, 7, centres)
    part, part_vectors = script.generate(1200, 2100, 7, centres)  # across block edges
    assert [r.content for r in part] == [r.content for r in whole[1200:2100]]
    assert np.array_equal(part_vectors, whole_vectors[1200:2100])
    script.ensure_store(tmp_path, 1500)
    folder = tmp_path / "1500"
    marker = json.loads((folder / "scale.json").read_text(encoding="utf-8"))
    # as a build stopped after its first 1,000 records leaves the marker
    (folder / "scale.json").write_text(json.dumps({**marker, "complete": False,
                                                   "written": 1000}), encoding="utf-8")
    lines: list[str] = []
    resumed = script.ensure_store(tmp_path, 1500, log=lines.append)
    assert resumed.built and "(from record 1,000)" in lines[0]
    store = MemoryStore.open(StoreSpec(str(resumed.path), read_only=True))
    try:
        snapshot = store.view.snapshot()
        assert store.count() == 1500
        assert snapshot.contents[:1500] == [r.content for r in whole[:1500]]
    finally:
        store.close()


def test_the_suite_emits_each_scale_row_beside_its_chroma_peer(
        cached: tuple[Path, list[str]]) -> None:
    cache, _ = cached
    lines: list[str] = []
    result = scale_suite([SIZE], cache, 6, 6, lines.append, server=False, model=False,
                         open_runs=1)
    assert f"reusing cached store of {SIZE:,} records at {cache / str(SIZE) / 'store'}" in lines
    rows = {row.key: row for row in result.rows}
    assert list(rows) == [f"{key}@{SIZE}" for key in (
        "open-cached", "open-uncached", "retrieval-exhaustive", "retrieval-candidate",
        "agreement", "scale-dedup", "resident")]
    for key in ("open-cached", "open-uncached", "retrieval-exhaustive", "retrieval-candidate",
                "scale-dedup", "resident"):
        row = rows[f"{key}@{SIZE}"]
        assert row.stats is not None and row.stats.median > 0, row
        assert row.baseline and row.baseline_stats is not None, row  # the peer, same run
        assert row.baseline_stats.median > 0 and row.ratio > 0, row
    assert "Chroma" in rows[f"retrieval-candidate@{SIZE}"].baseline
    assert "Chroma" in rows[f"open-uncached@{SIZE}"].baseline
    assert "process CPU" in rows[f"open-uncached@{SIZE}"].note  # the load-proof figure
    assert "search path: exact" in rows[f"scale-dedup@{SIZE}"].note  # its partition searched
    agreement = rows[f"agreement@{SIZE}"]
    assert agreement.target == AGREEMENT_TARGET and agreement.status in ("met", "missed")
    assert agreement.stats is not None and 0.0 <= agreement.stats.median <= 1.0
    resident = rows[f"resident@{SIZE}"]
    assert resident.target is None and "no model" in resident.note  # the target has the model
    assert set(result.series) == {f"retrieval-candidate@{SIZE}",
                                  f"retrieval-candidate@{SIZE} baseline", f"scale-dedup@{SIZE}"}
    assert not result.stores  # the GUI suite's first page stays on the dedup store


def test_server_rows_are_judged_at_1m_and_name_what_was_not_timed() -> None:
    pages = [(name, [0.2, 0.3], "note") for name in ("c", "f", "s", "a", "t")]
    rows = server_rows([*pages, ("get", [0.1], "peer")], 1_000_000, lambda _: None)
    keys = [row.key for row in rows]
    assert keys == ["server-connect@1000000", "server-first-page@1000000",
                    "server-second-page@1000000", "server-filter-page@1000000",
                    "server-text-page@1000000"]  # no full-view row: it was not measured
    judged = {row.key: row.target for row in rows}
    assert judged["server-first-page@1000000"] == SERVER_TARGET
    assert judged["server-filter-page@1000000"] == SERVER_TARGET
    assert judged["server-connect@1000000"] is None
    assert all(row.status == "met" for row in rows if row.target)  # 250 ms ≤ 1 s
    assert "full-view open not timed above 100,000 records" in rows[1].note
    small = server_rows([*pages, ("get", [0.1], "peer"), ("full", [9.0], "x")], 100_000,
                        lambda _: None)
    assert [row.target for row in small] == [None] * 6
    assert small[-1].key == "server-full-view@100000"
    assert CANDIDATE_TARGETS[1_000_000].bound == 15.0


@pytest.mark.slow
@pytest.mark.server
def test_the_cached_store_is_served_by_chroma_run_over_its_own_directory(
        script: ModuleType, cached: tuple[Path, list[str]]) -> None:
    cache, _ = cached
    path = cache / str(SIZE) / "store"
    measured = script.server(path, SIZE, 1, full_view_runs=1)
    rows = {row.key: row for row in server_rows(measured, SIZE, lambda _: None)}
    assert set(rows) == {f"server-{key}@{SIZE}" for key in (
        "connect", "first-page", "second-page", "filter-page", "text-page", "full-view")}
    assert all(row.stats is not None and row.stats.median > 0 for row in rows.values())
    assert f"{SIZE:,} shown" in rows[f"server-first-page@{SIZE}"].note
    # agent + layer: record i is agent i % 4, layer i % 6 (the filter's: i % 12 == 8)
    matching = sum(1 for i in range(SIZE) if i % 12 == 8)
    assert f"{matching:,} match" in rows[f"server-filter-page@{SIZE}"].note
    assert view_cache.is_current(path, "mnemoscope_memories", 384)  # serving changed nothing


def test_the_report_names_1m_rows_and_says_how_the_scale_rows_are_made() -> None:
    from engine.bench import BenchReport, MachineInfo
    from engine.bench.report import render_markdown

    rows = server_rows([*((n, [0.2], "") for n in "cfsat"), ("get", [0.1], "")], 1_000_000,
                       lambda _: None)
    report = BenchReport(MachineInfo("cpu", 2, 2, 4.0, "Linux", "3.11"), tuple(rows),
                         "2026-01-01T00:00:00Z", 1.0, (1_000_000,), quick=False)
    text = render_markdown(report)
    assert "| server store → records table first page | 1M |" in text
    assert "`benchmarks/bench_scale.py`" in text and "--cache DIR" in text


def test_sizes_above_100k_go_to_the_scale_suite_only() -> None:
    from dataclasses import replace

    from engine.bench import BenchOptions, run_bench

    options = replace(BenchOptions.quick_run((300, 1_000_000)), only=("retrieval",))
    report = run_bench(options)
    assert {row.size for row in report.rows} == {300}  # no fresh 1M store in a normal run
    assert any("retrieval at [300]" in line for line in report.log)
