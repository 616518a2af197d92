"""Benchmark runner behind ``mnemoscope bench`` (issue 12).

Measurement only: no Qt (the GUI benchmarks and the PNG plots are driven from
``app/cli/commands/bench.py``). The scripts under ``benchmarks/`` stay the owners of their
workloads; :mod:`engine.bench.suites` imports them by path and calls their functions.
"""

from engine.bench.machine import MachineInfo, collect_machine_info, load_average
from engine.bench.report import render_markdown, report_to_json
from engine.bench.runner import SUITES, BenchOptions, run_bench
from engine.bench.suites import (
    FIRST_PAGE_TARGET,
    ROOT,
    STARTUP_TARGET,
    TIMELINE_TARGET,
    SuiteResult,
    load_script,
    missing_row,
    timeline_row,
)
from engine.bench.types import BenchReport, BenchRow, Stats, Target, judged, percentile

__all__ = [
    "FIRST_PAGE_TARGET",
    "ROOT",
    "STARTUP_TARGET",
    "SUITES",
    "TIMELINE_TARGET",
    "BenchOptions",
    "BenchReport",
    "BenchRow",
    "MachineInfo",
    "Stats",
    "SuiteResult",
    "Target",
    "collect_machine_info",
    "judged",
    "load_average",
    "load_script",
    "missing_row",
    "percentile",
    "render_markdown",
    "report_to_json",
    "run_bench",
    "timeline_row",
]
