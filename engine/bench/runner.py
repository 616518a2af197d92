"""The benchmark run: every suite in turn, machine info and load, one :class:`BenchReport`."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from engine.bench.machine import collect_machine_info, load_average
from engine.bench.scale import DEFAULT_CACHE, scale_suite
from engine.bench.suites import (
    ROOT,
    SuiteResult,
    dedup_suite,
    ingest_suite,
    retrieval_suite,
    situation_stall_rows,
    stall_row,
    timeline_row,
    workspace_suite,
)
from engine.bench.types import BenchReport

__all__ = ["SUITES", "BenchOptions", "GuiSuite", "TimelineSuite", "run_bench"]

SUITES = ("dedup", "retrieval", "ingest", "workspace", "gui", "timeline", "scale")
# Sizes above this are measured by the scale suite only, on its cached store: the dedup and
# retrieval suites build their stores afresh in every run (an hour for 1M records).
FRESH_MAX = 100_000

# The GUI benchmarks need Qt; the app passes them in: (largest store or None, log) -> result.
GuiSuite = Callable[[Path | None, int, Callable[[str], None]], SuiteResult]
# The timeline benchmark (Qt too): (events, frames, log) -> result.
TimelineSuite = Callable[[int, int, Callable[[str], None]], SuiteResult]


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What to run and how big.

    Attributes:
        sizes: Record counts for the scale suite, and for dedup and retrieval up to
            :data:`FRESH_MAX`; the largest dedup store is reused for the first-page benchmark.
        quick: Smoke run: few repetitions, small ingest and workspace.
        only: Suites to run (subset of :data:`SUITES`); empty = all.
        queries: Dedup decisions timed per size.
        runs: Retrievals timed per size.
        turns: Dialogue turns for the ingest benchmark.
        cards: Workspace cards.
        repeat: Workspace parses timed.
        gui_runs: Start-up / first-page runs.
        stall_records: Records imported while the GUI event loop is timed.
        timeline_events: Events in the timeline benchmark.
        timeline_frames: Pan/zoom frames timed.
        cache: Where the scale suite keeps its generated stores between runs (None: the temp
            folder's ``mnemoscope-bench-scale``).
        scale_server: The scale suite also times each store served by ``chroma run``.
    """

    sizes: tuple[int, ...] = (10_000, 100_000)
    quick: bool = False
    only: tuple[str, ...] = ()
    queries: int = 400
    runs: int = 200
    turns: int = 2000
    cards: int = 500
    repeat: int = 30
    gui_runs: int = 5
    stall_records: int = 10_000
    timeline_events: int = 100_000
    timeline_frames: int = 120
    cache: Path | None = None
    scale_server: bool = True

    @classmethod
    def quick_run(cls, sizes: tuple[int, ...] = (300, 600)) -> BenchOptions:
        """A smoke run at tiny sizes (the suite's report test)."""
        return cls(sizes=sizes, quick=True, queries=20, runs=20, turns=40, cards=40, repeat=3,
                   gui_runs=1, stall_records=300, timeline_events=2000, timeline_frames=12)

    def wants(self, suite: str) -> bool:
        """Whether ``suite`` is selected."""
        return not self.only or suite in self.only


def run_bench(options: BenchOptions, *, gui: GuiSuite | None = None,
              timeline: TimelineSuite | None = None,
              log: Callable[[str], None] | None = None, root: Path = ROOT) -> BenchReport:
    """Run the selected suites and return the report (nothing is written to docs here).

    Args:
        options: Sizes and repetitions.
        gui: The Qt-side suite (start-up, first page), from the app; None = not run.
        timeline: The Qt-side timeline suite, from the app; None = not run.
        log: Progress lines (also kept in the report).
        root: The checkout whose ``benchmarks/`` scripts are driven.
    """
    lines: list[str] = []

    def say(text: str) -> None:
        stamp = f"[{time.strftime('%H:%M:%S')} load {load_average()[0]:.1f}] {text}"
        lines.append(stamp)
        if log is not None:
            log(stamp)

    machine = collect_machine_info(root)
    started_at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    began = time.perf_counter()
    sizes = sorted(set(options.sizes))
    fresh = [size for size in sizes if size <= FRESH_MAX]
    results: list[SuiteResult] = []
    workdir = Path(tempfile.mkdtemp(prefix="mnemoscope-bench-"))
    try:
        if options.wants("dedup"):
            say(f"dedup decision at {fresh}")
            results.append(dedup_suite(fresh, options.queries, workdir, say))
        if options.wants("retrieval"):
            say(f"retrieval at {fresh}")
            results.append(retrieval_suite(fresh, options.runs, say))
        if options.wants("ingest"):
            say(f"ingest of {options.turns} turns with the real model")
            results.append(ingest_suite(options.turns, say))
        if options.wants("gui"):
            stores = {k: v for r in results for k, v in r.stores.items()}
            largest = stores[max(stores)] if stores else None
            if gui is None:
                from engine.bench.suites import (
                    FIRST_PAGE_TARGET,
                    STARTUP_TARGET,
                    missing_row,
                )
                reason = "GUI suite not available (needs the app and Qt)"
                results.append(SuiteResult(rows=[
                    missing_row("startup", "window shown after launch", 0, "ms",
                                STARTUP_TARGET, reason),
                    missing_row("first-page", "first page of records", 0, "ms",
                                FIRST_PAGE_TARGET, reason)]))
            else:
                say(f"GUI start-up and first page ({largest})")
                results.append(gui(largest, options.gui_runs, say))
            say(f"GUI event-loop gaps during an import of {options.stall_records:,} records")
            results.append(SuiteResult(rows=[stall_row(options.stall_records, say, root)]))
            say("GUI event-loop gaps at start-up (model loading), on resize, in Review, on undo")
            results.append(SuiteResult(rows=situation_stall_rows(
                1 if options.quick else 3, say, root)))
        if options.wants("workspace"):
            say(f"workspace of {options.cards} cards")
            results.append(workspace_suite(options.cards, options.repeat, say))
        if options.wants("timeline"):
            if timeline is None:
                results.append(SuiteResult(rows=[timeline_row()]))
            else:
                say(f"timeline frames with {options.timeline_events:,} events")
                results.append(timeline(options.timeline_events, options.timeline_frames, say))
        if options.wants("scale"):
            cache = options.cache or DEFAULT_CACHE
            say(f"scale: cached stores of {sizes} in {cache}, beside plain Chroma")
            # a smoke run's resident memory is measured without the model (loading it in a
            # fresh process is most of the suite's time at tiny sizes)
            results.append(scale_suite(sizes, cache, options.runs, options.queries, say,
                                       server=options.scale_server, model=not options.quick,
                                       open_runs=1 if options.quick else 3, root=root))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = tuple(row for result in results for row in result.rows)
    series = {k: v for result in results for k, v in result.series.items()}
    machine = replace(machine, load_end=load_average())
    say("done")
    return BenchReport(machine=machine, rows=rows, started_at=started_at,
                       duration_s=time.perf_counter() - began, sizes=tuple(sizes),
                       quick=options.quick, series=series, log=tuple(lines))
