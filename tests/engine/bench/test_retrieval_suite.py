"""The retrieval suite reports the steady state and the states after a write as rows."""

from __future__ import annotations

from engine.bench.suites import RETRIEVAL_TARGETS, retrieval_suite


def test_rows_after_access_counting_and_after_an_append_follow_the_steady_ones() -> None:
    lines: list[str] = []
    result = retrieval_suite([300, 10_000], 4, lines.append)
    keys = [row.key for row in result.rows]
    assert keys == ["retrieval@300", "retrieval@10000",
                    "retrieval-after-access@300", "retrieval-after-append@300",
                    "retrieval-after-access@10000", "retrieval-after-append@10000"]
    rows = {row.key: row for row in result.rows}
    for key in ("retrieval@10000", "retrieval-after-access@10000",
                "retrieval-after-append@10000"):
        row = rows[key]
        assert row.target == RETRIEVAL_TARGETS[10_000] and row.status in ("met", "missed")
        assert row.stats is not None and row.stats.p95 > 0
    assert "after access counting" in rows["retrieval-after-access@300"].note
    assert "after appending one record" in rows["retrieval-after-append@300"].note
    assert set(result.series) == {"retrieval@300", "retrieval@300 baseline",
                                  "retrieval@10000", "retrieval@10000 baseline"}
    assert len(lines) == 6
