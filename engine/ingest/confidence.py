"""Confidence merge: seed 000 §5's canonical pairwise harmonic mean, rounded to 6 dp.

Used by the exact-duplicate rule (DESIGN decision 2). The integrator may point this at
``engine.llm.confidence`` once both exist; the signature is shared on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["DEFAULT_CONFIDENCE", "fold_confidence", "merge_confidence"]

DEFAULT_CONFIDENCE = 0.5
"""seed 000 §5: the value a missing confidence stands for."""


def _round6(value: float) -> float:
    # seed 000 §5 step 5: Math.round(x * 1e6) / 1e6 — JavaScript rounds .5 up (towards +inf),
    # Python's round() would round half to even, so floor(x + 0.5) is the faithful form.
    return math.floor(value * 1_000_000 + 0.5) / 1_000_000


def _harmonic(existing: float | None, incoming: float | None, default: float) -> float:
    base = default if existing is None or math.isnan(existing) else existing
    provider = default if incoming is None or math.isnan(incoming) else incoming
    base = max(0.0, min(1.0, base))
    provider = max(0.0, min(1.0, provider))
    if base == 0.0 and provider == 0.0:  # seed 000 §5 step 3
        return 0.0
    return (2.0 * base * provider) / (base + provider)


def merge_confidence(existing: float | None, incoming: float | None,
                     default: float = DEFAULT_CONFIDENCE) -> float:
    """Combine two confidences with the harmonic mean ``2xy / (x + y)`` (seed 000 §5).

    Missing values count as ``default``; values are clamped to [0, 1]; two zeros give 0; the
    result is rounded to exactly 6 decimal places.
    """
    return _round6(_harmonic(existing, incoming, default))


def fold_confidence(values: Iterable[float | None]) -> float:
    """Fold several confidences pairwise, left to right, rounding once at the end.

    seed 000 §5 states ``fold([0.8, 0.6, 0.7]) = 0.692784``. Its shown step
    ``merge(0.685714, 0.7)`` is arithmetically 0.69278336 (→ 0.692783); the stated 0.692784 is
    the pairwise fold with unrounded intermediates (0.6857142857 → 0.6927835052), rounded once —
    which is what this does (the same choice as ``engine.llm.confidence``). An empty sequence
    folds to the default.
    """
    items = list(values)
    if not items:
        return DEFAULT_CONFIDENCE
    first = items[0]
    result = max(0.0, min(1.0, DEFAULT_CONFIDENCE if first is None or math.isnan(first)
                          else first))
    for value in items[1:]:
        result = _harmonic(result, value, DEFAULT_CONFIDENCE)
    return _round6(result)
