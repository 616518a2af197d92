"""Confidence merge: the canonical pairwise harmonic mean of seed 000 §5.

:func:`merge_confidence` is a plain pure function shared by the LLM extractor and the ingest
pipeline's exact-duplicate rule (DESIGN decision 2).

Folding several values: seed 000 §5's multi-fold example states ``fold([0.8, 0.6, 0.7]) =
0.692784``, but the step it shows (``merge(0.685714, 0.7)``, "raw ≈ 0.6927840") is arithmetically
0.69278336 and would round to 0.692783. 0.692784 is what the pairwise fold gives when the
intermediate harmonic means are kept unrounded (0.6857142857 → 0.6927835052) and the result is
rounded once. :func:`fold_confidence` does exactly that, so it reproduces the seed's stated
value; each pairwise step still uses the seed's clamping, default and both-zero rules. Merging
one value at a time into a *stored* (already rounded) confidence — what ingest does over time —
is :func:`merge_confidence` and may differ from a one-shot fold by 1e-6, inside the seed's
5e-6 tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from engine.errors import ValidationError

__all__ = ["DEFAULT_CONFIDENCE", "fold_confidence", "merge_confidence", "round_6dp"]

DEFAULT_CONFIDENCE = 0.5
"""Seed 000 §5 ``defaultConfidence``: stands in for a missing value."""

_SCALE = 1_000_000


def round_6dp(value: float) -> float:
    """Round to exactly 6 decimal places the way JavaScript's ``Math.round`` does.

    ``Math.round`` rounds halves towards +infinity (``floor(x + 0.5)``); Python's ``round`` rounds
    halves to even, which would differ on exact ties.
    """
    return math.floor(value * _SCALE + 0.5) / _SCALE


def _clamp(value: float | None, default: float, field: str) -> float:
    # seed 000 §5 step 1-2: missing -> default, then clamp to [0, 1].
    chosen = default if value is None else value
    if isinstance(chosen, bool) or not isinstance(chosen, int | float) or math.isnan(chosen):
        raise ValidationError(field, chosen, "confidence must be a number (NaN is not)")
    return max(0.0, min(1.0, float(chosen)))


def merge_confidence(
    base: float | None,
    provider: float | None,
    default: float = DEFAULT_CONFIDENCE,
) -> float:
    """Merge two confidences with the harmonic mean, rounded to 6 dp (seed 000 §5).

    Args:
        base: The stored confidence, or None for "unknown" (replaced by ``default``).
        provider: The incoming confidence, or None (replaced by ``default``).
        default: Value used for a missing side.

    Returns:
        ``round6(2xy / (x + y))`` of the clamped values; 0 when both are 0.

    Raises:
        ValidationError: when a value is NaN or not a number.

    Example:
        >>> merge_confidence(0.8, 0.6)
        0.685714
    """
    x = _clamp(base, default, "base_confidence")
    y = _clamp(provider, default, "provider_confidence")
    return round_6dp(_harmonic(x, y))


def _harmonic(x: float, y: float) -> float:
    if x == 0.0 and y == 0.0:  # seed 000 §5 step 3
        return 0.0
    return (2.0 * x * y) / (x + y)


def fold_confidence(values: Iterable[float | None], default: float = DEFAULT_CONFIDENCE) -> float:
    """Fold several confidences pairwise, left to right, rounding once to 6 dp at the end.

    ``fold([0.8, 0.6, 0.7]) == 0.692784`` (seed 000 §5 multi-fold example; see the module
    docstring for why intermediates stay unrounded). A single value is clamped and rounded.

    Raises:
        ValidationError: when ``values`` is empty or holds NaN.
    """
    items = list(values)
    if not items:
        raise ValidationError("confidences", items, "need at least one value to fold")
    result = _clamp(items[0], default, "confidences[0]")
    for index, value in enumerate(items[1:], start=1):
        result = _harmonic(result, _clamp(value, default, f"confidences[{index}]"))
    return round_6dp(result)
