"""engine.bench: percentiles, targets, verdicts and the generated markdown."""

from __future__ import annotations

import math

from engine.bench import BenchReport, BenchRow, MachineInfo, Stats, Target, percentile
from engine.bench.report import render_markdown, report_to_json
from engine.bench.types import judged


def test_percentile_follows_seed_000_11() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))


def test_verdicts_are_honest() -> None:
    target = Target("p99 ≤ 5 ms", "p99", "<=", 5.0)
    fast = judged(BenchRow("a", "a", 10, "ms", Stats.of([1.0, 2.0, 4.0]), target=target))
    slow = judged(BenchRow("b", "b", 10, "ms", Stats.of([1.0, 2.0, 9.0]), target=target))
    absent = judged(BenchRow("c", "c", 10, "ms", None, target=target))
    ratio = judged(BenchRow("d", "d", 1, "texts/s", Stats.of([80.0]), ratio=0.8,
                            target=Target("≥ 90 %", "ratio", ">=", 0.9)))
    info = judged(BenchRow("e", "e", 1, "ms", Stats.of([1.0])))
    assert [r.verdict for r in (fast, slow, absent, ratio, info)] == [
        "met", "missed", "not run", "missed", "info"]
    report = BenchReport(MachineInfo("cpu", 2, 2, 4.0, "Linux", "3.11"),
                         (fast, slow, absent, ratio, info), "2026-01-01T00:00:00Z", 1.0,
                         (10,), quick=True)
    assert report.counts() == {"met": 1, "missed": 2, "not run": 1}
    text = render_markdown(report, [("plot", "benchmarks/targets.png")])
    assert "**met**" in text and text.count("**missed**") == 2 and "| not run |" in text
    assert "1 met, 2 missed, 1 not run" in text and "quick smoke run" in text
    assert "![plot](benchmarks/targets.png)" in text
    document = report_to_json(report)
    assert [row["status"] for row in document["rows"]] == [
        "met", "missed", "not run", "missed", "info"]
