"""Importance decay (seed 004 "Memory Decay"): Ebbinghaus curve with an access boost.

``decayed = importance × exp(-ln2 / halfLifeDays × ageDays) × (1 + log2(1 + accessCount) × 0.1)``

Vectorized over numpy columns so the records browser and retrieval score 100K rows at once.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["MS_PER_DAY", "access_boost", "decay_factor", "decayed_importance"]

MS_PER_DAY = 86_400_000.0
ACCESS_BOOST_PER_DOUBLING = 0.1  # seed 004: boost = 1 + log2(1 + n) × 0.1

FloatArray = npt.NDArray[np.float64]


def decay_factor(age_ms: npt.ArrayLike, half_life_days: float) -> FloatArray:
    """``exp(-λ t)`` with ``λ = ln 2 / half_life`` and ``t`` the age in days (negative ages → 1)."""
    age_days = np.maximum(np.asarray(age_ms, dtype=np.float64), 0.0) / MS_PER_DAY
    result: FloatArray = np.exp(-(math.log(2.0) / half_life_days) * age_days)
    return result


def access_boost(access_count: npt.ArrayLike) -> FloatArray:
    """``1 + log2(1 + n) × 0.1`` (seed 004: 0 → 1.0, 1 → 1.1, 3 → 1.2, 100 → 1.67)."""
    counts = np.maximum(np.asarray(access_count, dtype=np.float64), 0.0)
    result: FloatArray = 1.0 + np.log2(1.0 + counts) * ACCESS_BOOST_PER_DOUBLING
    return result


def decayed_importance(importance: npt.ArrayLike, created_at_ms: npt.ArrayLike,
                       access_count: npt.ArrayLike, now_ms: float,
                       half_life_days: float = 30.0) -> FloatArray:
    """Seed 004 decayed importance for arrays (or scalars) of records at ``now_ms``.

    Not clipped: a much-accessed fresh record can exceed its stored importance, as in the seed.
    """
    age = now_ms - np.asarray(created_at_ms, dtype=np.float64)
    result: FloatArray = (np.asarray(importance, dtype=np.float64)
                          * decay_factor(age, half_life_days) * access_boost(access_count))
    return result
