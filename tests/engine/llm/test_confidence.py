"""Seed 000 §5: the canonical confidence table, edge cases and the deterministic fold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import ValidationError
from engine.llm import fold_confidence, merge_confidence


@pytest.mark.parametrize(
    ("x", "y", "stored"),
    [
        (0.8, 0.6, "0.685714"),
        (0.8, 0.7, "0.746667"),
        (0.7, 0.6, "0.646154"),
        (1.0, 0.1, "0.181818"),
        (0.5, 0.5, "0.500000"),
        (0.9, 0.9, "0.900000"),
    ],
)
def test_canonical_table_exact_6dp(x: float, y: float, stored: str) -> None:
    # seed 000 §9: tests assert exact 6-decimal stringified equality, no tolerance.
    assert f"{merge_confidence(x, y):.6f}" == stored
    assert merge_confidence(x, y) == float(stored)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (0, 0, 0.0),
        (1, 1, 1.0),
        (0, 1, 0.0),
        (None, 0.7, 0.583333),
        (-1, 0.5, 0.0),
        (2, 0.5, 0.666667),
        (None, None, 0.5),
    ],
)
def test_edge_cases_and_clamping(x: float | None, y: float | None, expected: float) -> None:
    assert merge_confidence(x, y) == expected


def test_multi_fold_example() -> None:
    # seed 000 §5: fold([0.8,0.6,0.7]) -> 0.692784 (intermediates unrounded, one final rounding).
    assert f"{fold_confidence([0.8, 0.6, 0.7]):.6f}" == "0.692784"
    # Merging into an already-stored (rounded) value one at a time stays within 5e-6.
    stepwise = merge_confidence(merge_confidence(0.8, 0.6), 0.7)
    assert abs(stepwise - 0.692784) <= 5e-6
    assert fold_confidence([0.8, 0.6]) == merge_confidence(0.8, 0.6)
    assert fold_confidence([0, 0, 0.5]) == 0.0
    assert fold_confidence([None, 0.7]) == 0.583333


def test_fold_single_and_empty() -> None:
    assert fold_confidence([0.1234567]) == 0.123457
    with pytest.raises(ValidationError):
        fold_confidence([])


def test_nan_is_rejected_with_field_name() -> None:
    with pytest.raises(ValidationError, match="provider_confidence"):
        merge_confidence(0.5, float("nan"))


def test_custom_default() -> None:
    assert merge_confidence(None, 0.6, default=0.6) == 0.6


@given(st.floats(0, 1), st.floats(0, 1))
def test_result_has_at_most_6dp_and_lies_between_inputs(x: float, y: float) -> None:
    merged = merge_confidence(x, y)
    assert round(merged, 6) == merged
    assert min(x, y) - 5e-7 <= merged <= max(x, y) + 5e-7
    assert merged == merge_confidence(y, x)
