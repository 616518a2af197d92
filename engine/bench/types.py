"""Result types of a benchmark run: latency statistics, report rows, the report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.bench.machine import MachineInfo

__all__ = ["BenchReport", "BenchRow", "Stats", "Status", "Target", "judged", "percentile"]

Status = Literal["met", "missed", "not run"]


def percentile(values: Sequence[float], p: float) -> float:
    """seed 000 §11 percentile: ``sorted[ceil(p/100 · n) − 1]`` (nan for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    index = max(0, math.ceil(p / 100.0 * len(ordered)) - 1)
    return float(ordered[min(index, len(ordered) - 1)])


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of repeated measurements (warm-up already excluded).

    Attributes:
        n: Number of measurements.
        median: p50 (seed 000 §11 percentile).
        p95: 95th percentile.
        p99: 99th percentile.
        minimum: The least disturbed run.
        maximum: The worst run.
    """

    n: int
    median: float
    p95: float
    p99: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """Statistics of ``values`` (at least one)."""
        if not values:
            raise ValueError("Stats.of needs at least one value")
        return cls(len(values), percentile(values, 50), percentile(values, 95),
                   percentile(values, 99), float(min(values)), float(max(values)))

    def get(self, name: str) -> float:
        """The statistic called ``name`` (``median``, ``p95``, ``p99``, ``max``, ``min``)."""
        return {"median": self.median, "p50": self.median, "p95": self.p95, "p99": self.p99,
                "max": self.maximum, "min": self.minimum}[name]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"n": self.n, "median": self.median, "p95": self.p95, "p99": self.p99,
                "min": self.minimum, "max": self.maximum}


@dataclass(frozen=True, slots=True)
class Target:
    """A DESIGN performance budget: ``statistic op bound`` (``p99 <= 5`` ms, ``ratio >= 0.9``).

    Attributes:
        text: How DESIGN.md states it ("p99 ≤ 5 ms at 100K").
        statistic: Which figure is compared: a :class:`Stats` name or ``ratio``.
        op: ``<=`` (latency) or ``>=`` (throughput ratio).
        bound: The bound.
        seed_target: The seed's own target, shown beside ours ("" if none).
    """

    text: str
    statistic: str
    op: Literal["<=", ">="]
    bound: float
    seed_target: str = ""

    def check(self, value: float) -> bool:
        """Whether ``value`` meets the target (nan never does)."""
        if math.isnan(value):
            return False
        return value <= self.bound if self.op == "<=" else value >= self.bound


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One line of the report.

    Attributes:
        key: Stable identifier (``dedup@100000``), also the plot series name.
        what: Human description.
        size: Record / card count the row was measured at (0 if not applicable).
        unit: Unit of the figures (``ms``, ``texts/s``).
        stats: Measured statistics, or None when not run.
        baseline: Name of the in-run baseline ("" if none).
        baseline_stats: The baseline's statistics, same unit.
        ratio: Measured / baseline (compared statistic), nan if no baseline.
        target: The DESIGN budget, or None for an informational row.
        status: met / missed / not run, set by :func:`judged` from the target and figures.
        note: Anything the reader needs (search path used, why it did not run).
        load: 1-minute load average when the row finished.
    """

    key: str
    what: str
    size: int
    unit: str
    stats: Stats | None
    baseline: str = ""
    baseline_stats: Stats | None = None
    ratio: float = math.nan
    target: Target | None = None
    status: Status = "not run"
    note: str = ""
    load: float = math.nan

    @property
    def verdict(self) -> str:
        """``met`` / ``missed`` / ``not run`` for target rows; ``info`` / ``not run`` otherwise."""
        if self.target is None:
            return "not run" if self.stats is None else "info"
        return self.status

    def compared_value(self) -> float:
        """The figure the target is compared with (nan if none)."""
        if self.target is None:
            return math.nan
        if self.target.statistic == "ratio":
            return self.ratio
        return math.nan if self.stats is None else self.stats.get(self.target.statistic)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (nan becomes null)."""
        def num(value: float) -> float | None:
            return None if math.isnan(value) else value

        return {
            "key": self.key, "what": self.what, "size": self.size, "unit": self.unit,
            "stats": None if self.stats is None else self.stats.to_json(),
            "baseline": self.baseline or None,
            "baseline_stats": None if self.baseline_stats is None
            else self.baseline_stats.to_json(),
            "ratio": num(self.ratio),
            "target": None if self.target is None else {
                "text": self.target.text, "statistic": self.target.statistic,
                "op": self.target.op, "bound": self.target.bound,
                "seed_target": self.target.seed_target or None},
            "status": self.verdict, "note": self.note, "load_average": num(self.load),
        }


def judged(row: BenchRow) -> BenchRow:
    """``row`` with its status computed from its target and figures."""
    from dataclasses import replace

    if row.target is None:
        return replace(row, status="not run")
    value = row.compared_value()
    if math.isnan(value):
        return replace(row, status="not run")
    return replace(row, status="met" if row.target.check(value) else "missed")


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole ``mnemoscope bench`` run.

    Attributes:
        machine: Machine and load information.
        rows: Report rows in order.
        started_at: ISO-8601 UTC start time.
        duration_s: Wall time of the run.
        sizes: Record counts asked for.
        quick: A smoke run (tiny sizes; figures not comparable with targets).
        series: Raw latency samples per row key (ms), for the plots.
        log: Progress lines printed during the run.
    """

    machine: MachineInfo
    rows: tuple[BenchRow, ...]
    started_at: str
    duration_s: float
    sizes: tuple[int, ...]
    quick: bool
    series: dict[str, list[float]] = field(default_factory=dict)
    log: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many target rows were met, missed, not run."""
        out = {"met": 0, "missed": 0, "not run": 0}
        for row in self.rows:
            if row.target is not None:
                out[row.verdict] += 1
        return out
