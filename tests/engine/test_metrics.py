"""Seed 000 §11 percentiles and seed 002 §20 counters."""

from __future__ import annotations

import pytest

from engine.metrics import LatencySummary, MemoryMetrics


def test_percentiles_follow_seed000_index_rule() -> None:
    summary = LatencySummary()
    for value in range(1, 101):  # 1..100
        summary.record(float(value))
    # index = ceil(p/100 × n) - 1
    assert summary.percentile(50) == 50.0
    assert summary.percentile(95) == 95.0
    assert summary.percentile(99) == 99.0
    result = summary.summary()
    assert (result.min, result.max, result.count, result.p90) == (1.0, 100.0, 100, 90.0)


def test_small_and_empty_samples() -> None:
    empty = LatencySummary()
    assert empty.percentile(95) == 0.0
    assert empty.summary().count == 0
    three = LatencySummary()
    for value in (30.0, 10.0, 20.0):
        three.record(value)
    assert three.percentile(50) == 20.0  # ceil(1.5) - 1 = 1
    assert three.percentile(0) == 10.0


def test_counters_per_agent_and_aggregate() -> None:
    metrics = MemoryMetrics()
    metrics.record_retrieval(2.0, agent_id="a", compressed=True)
    metrics.record_retrieval(4.0, agent_id="b", compressed=False)
    metrics.count("summarization_tasks_failed", agent_id="a")
    report = metrics.report(layer_counts={"episodic": 3, "semantic": 1},
                            agent_layer_counts={"a": {"episodic": 3}, "b": {"semantic": 1}})
    assert report["aggregate"]["memory_records_total"] == 4
    assert report["aggregate"]["compression_usage_rate"] == 0.5
    assert report["aggregate"]["p95_retrieval_ms"] == 4.0
    assert report["agents"]["a"]["summarization_tasks_failed"] == 1
    assert report["agents"]["b"]["average_retrieval_ms"] == 4.0
    with pytest.raises(KeyError):
        metrics.count("nonsense")
