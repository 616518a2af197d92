"""Engine metrics: seed 000 §11 latency percentiles and seed 002 §20 counters.

:class:`LatencySummary` follows seed 000 §11 exactly: the p-th percentile of ``n`` sorted values
is the value at index ``ceil(p/100 × n) - 1`` (clamped at 0), and an empty summary reports 0.
Values are milliseconds rounded to 6 decimal places when reported. :class:`MemoryMetrics`
collects the seed 002 §20 metrics (records per layer come from the view at report time; the rest
are counters and latency summaries updated by retrieval and the lifecycle).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LatencySummary", "MemoryMetrics", "PercentileSummary"]

MAX_SAMPLES = 10_000  # keep the most recent samples per summary (bounded memory)


@dataclass(frozen=True, slots=True)
class PercentileSummary:
    """Seed 000 §11 ``getSummary()``."""

    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
    count: int
    mean: float

    def to_json(self) -> dict[str, float | int]:
        """Wire form (6 dp, seed 000 §11 precision)."""
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in (
            ("p50", self.p50), ("p90", self.p90), ("p95", self.p95), ("p99", self.p99),
            ("min", self.min), ("max", self.max), ("mean", self.mean), ("count", self.count))}


class LatencySummary:
    """Latency samples with seed 000 §11 percentiles. Thread-safe; keeps the last 10K samples."""

    def __init__(self, max_samples: int = MAX_SAMPLES) -> None:
        self._values: list[float] = []
        self._max = max_samples
        self._lock = threading.Lock()

    def record(self, value_ms: float) -> None:
        """Add one sample (milliseconds)."""
        with self._lock:
            self._values.append(float(value_ms))
            if len(self._values) > self._max:
                del self._values[: len(self._values) - self._max]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def percentile(self, p: float) -> float:
        """Seed 000 §11: ``sorted[max(0, ceil(p/100 × n) - 1)]``, 0 when empty."""
        with self._lock:
            values = sorted(self._values)
        return _percentile(values, p)

    # The seed's own method names (seed 000 §11 getPercentile / getSummary).
    def get_percentile(self, p: float) -> float:
        """Seed 000 §11 ``getPercentile``: the same as :meth:`percentile`."""
        return self.percentile(p)

    def get_summary(self) -> PercentileSummary:
        """Seed 000 §11 ``getSummary``: the same as :meth:`summary`."""
        return self.summary()

    def summary(self) -> PercentileSummary:
        """p50/p90/p95/p99, min, max, count and mean."""
        with self._lock:
            values = sorted(self._values)
        if not values:
            return PercentileSummary(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0.0)
        return PercentileSummary(
            p50=_percentile(values, 50), p90=_percentile(values, 90),
            p95=_percentile(values, 95), p99=_percentile(values, 99),
            min=values[0], max=values[-1], count=len(values), mean=sum(values) / len(values))


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    index = math.ceil((p / 100.0) * len(values)) - 1
    return values[max(0, min(index, len(values) - 1))]


class MemoryMetrics:
    """Seed 002 §20 counters, per agent and in aggregate. Thread-safe.

    Counters: ``summarization_tasks_queued`` / ``_completed`` / ``_failed``,
    ``retrievals``, ``compressed_retrievals`` (→ ``compression_usage_rate``),
    ``retention_pruned``, ``expired``, ``pruned``, ``compacted``. (Redacted records are counted
    from the store at report time, not here.)
    """

    COUNTERS = ("retrievals", "compressed_retrievals", "summarization_tasks_queued",
                "summarization_tasks_completed", "summarization_tasks_failed",
                "retention_pruned", "expired", "pruned", "compacted")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._retrieval = LatencySummary()
        self._retrieval_by_agent: dict[str, LatencySummary] = {}

    def count(self, name: str, amount: int = 1, *, agent_id: str | None = None) -> None:
        """Add ``amount`` to counter ``name`` (aggregate, and the agent's if given)."""
        if name not in self.COUNTERS:
            raise KeyError(f"unknown metric counter {name!r}")
        with self._lock:
            self._counts[(name, "*")] += amount
            if agent_id is not None:
                self._counts[(name, agent_id)] += amount

    def record_retrieval(self, time_ms: float, *, agent_id: str | None,
                         compressed: bool) -> None:
        """One retrieval's scoring+packing latency and whether it compressed."""
        self._retrieval.record(time_ms)
        if agent_id is not None:
            with self._lock:
                summary = self._retrieval_by_agent.setdefault(agent_id, LatencySummary())
            summary.record(time_ms)
        self.count("retrievals", agent_id=agent_id)
        if compressed:
            self.count("compressed_retrievals", agent_id=agent_id)

    def counter(self, name: str, agent_id: str | None = None) -> int:
        """Current value of a counter (aggregate when ``agent_id`` is None)."""
        with self._lock:
            return self._counts[(name, agent_id or "*")]

    def report(self, *, layer_counts: Mapping[str, int],
               agent_layer_counts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        """The seed 002 §20 metrics as one JSON-able document.

        Args:
            layer_counts: Records per layer now (aggregate).
            agent_layer_counts: Records per layer now, per agent.
        """
        def block(agent: str, layers: Mapping[str, int], latency: LatencySummary | None
                  ) -> dict[str, Any]:
            summary = latency.summary() if latency is not None else LatencySummary().summary()
            with self._lock:
                counts = {name: self._counts[(name, agent)] for name in self.COUNTERS}
            retrievals = counts["retrievals"]
            return {
                "memory_records_total": sum(layers.values()),
                **{f"{layer}_count": count for layer, count in layers.items()},
                "average_retrieval_ms": round(summary.mean, 6),
                "p95_retrieval_ms": round(summary.p95, 6),
                "retrieval_latency_ms": summary.to_json(),
                **counts,
                "compression_usage_rate": round(counts["compressed_retrievals"] / retrievals, 6)
                if retrievals else 0.0,
            }

        with self._lock:
            by_agent_latency = dict(self._retrieval_by_agent)
        return {
            "aggregate": block("*", layer_counts, self._retrieval),
            "agents": {agent: block(agent, layers, by_agent_latency.get(agent))
                       for agent, layers in sorted(agent_layer_counts.items())},
        }
