"""seed 000 §5 confidence merge: the canonical table and fold are tests (exact 6 dp)."""

from __future__ import annotations

import pytest

from engine.ingest.confidence import fold_confidence, merge_confidence


@pytest.mark.parametrize(("x", "y", "stored"), [
    (0.8, 0.6, "0.685714"),
    (0.8, 0.7, "0.746667"),
    (0.7, 0.6, "0.646154"),
    (1.0, 0.1, "0.181818"),
    (0.5, 0.5, "0.500000"),
    (0.9, 0.9, "0.900000"),
])
def test_canonical_reference_vectors(x: float, y: float, stored: str) -> None:
    assert f"{merge_confidence(x, y):.6f}" == stored
    assert merge_confidence(x, y) == float(stored)


def test_fold_matches_the_seed_example() -> None:
    # seed 000 §5: fold([0.8, 0.6, 0.7]) -> 0.692784 (unrounded intermediates, rounded once)
    assert f"{fold_confidence([0.8, 0.6, 0.7]):.6f}" == "0.692784"
    # merging one at a time into a stored (rounded) value stays within the seed's 5e-6
    stepwise = merge_confidence(merge_confidence(0.8, 0.6), 0.7)
    assert abs(stepwise - 0.692784) <= 5e-6


@pytest.mark.parametrize(("x", "y", "expected"), [
    (0.0, 0.0, 0.0),
    (1.0, 1.0, 1.0),
    (0.0, 1.0, 0.0),
    (None, 0.7, 0.583333),
    (-1.0, 0.5, 0.0),
    (2.0, 0.5, 0.666667),
])
def test_edge_cases_and_clamping(x: float | None, y: float, expected: float) -> None:
    assert merge_confidence(x, y) == expected


def test_fold_of_nothing_and_one() -> None:
    assert fold_confidence([]) == 0.5
    assert fold_confidence([0.1234567]) == 0.123457
