"""Latency percentiles (seed 000 §11 ``LatencySummary``): nearest-rank on the sorted values."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

__all__ = ["LatencySummary", "PercentileSummary"]


@dataclass(frozen=True, slots=True)
class PercentileSummary:
    """Seed 000 §11 ``PercentileSummary``."""

    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
    count: int


class LatencySummary:
    """Record latencies and read nearest-rank percentiles; thread-safe."""

    def __init__(self) -> None:
        self._values: list[float] = []
        self._sorted = True
        self._lock = threading.Lock()

    def record(self, value: float) -> None:
        """Add one measurement in milliseconds."""
        with self._lock:
            self._values.append(float(value))
            self._sorted = False

    def get_percentile(self, p: float) -> float:
        """``values[max(0, ceil(p / 100 * n) - 1)]`` of the sorted values; 0 when empty."""
        with self._lock:
            if not self._values:
                return 0.0
            if not self._sorted:
                self._values.sort()
                self._sorted = True
            index = math.ceil((p / 100) * len(self._values)) - 1
            return self._values[max(0, min(index, len(self._values) - 1))]

    def get_summary(self) -> PercentileSummary:
        """p50/p90/p95/p99, min, max and count (all 0 when empty)."""
        with self._lock:
            values = list(self._values)
        if not values:
            return PercentileSummary(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
        return PercentileSummary(self.get_percentile(50), self.get_percentile(90),
                                 self.get_percentile(95), self.get_percentile(99),
                                 min(values), max(values), len(values))
