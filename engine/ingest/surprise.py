"""Surprise (novelty) detection, seed 004 "Surprise Detection".

``surprise = 0.6·semantic + 0.3·keyword + 0.1·rarity`` with embeddings, ``0.8·keyword +
0.2·rarity`` without; an exact duplicate has surprise 0. A new record is stored only if
surprise ≥ the threshold (default 0.15), and when no importance is given,
``importance = surprise × category weight`` (DESIGN decision 5).

The pipeline computes it against the records of the same agent AND privacy partition (DESIGN 5),
from the nearest neighbours it already found: semantic novelty is exact (the nearest neighbour
is the most similar record); keyword novelty is measured against those neighbours rather than
every record of the partition, which keeps the decision free of Python loops over records. On
the Jaccard path the neighbours *are* the most token-similar records, so it is exact there too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.records import CATEGORY_WEIGHTS, Category

__all__ = ["SurpriseScore", "category_rarity", "surprise_score"]

# seed 004 "Combine scores"
_W_SEMANTIC, _W_KEYWORD, _W_RARITY = 0.6, 0.3, 0.1
_W_KEYWORD_ONLY, _W_RARITY_ONLY = 0.8, 0.2


@dataclass(frozen=True, slots=True)
class SurpriseScore:
    """A surprise score with its parts (for the stepper and the events).

    Attributes:
        surprise: 0..1.
        semantic_novelty: ``1 - max cosine`` (None on the Jaccard path).
        keyword_novelty: ``1 - max token Jaccard``.
        category_rarity: ``1 / log2(2 + same-category count)``.
        exact_duplicate: True when the content hash matched (surprise 0).
        importance: ``surprise × category weight`` (seed 004 step 6).
    """

    surprise: float
    semantic_novelty: float | None
    keyword_novelty: float
    category_rarity: float
    exact_duplicate: bool
    importance: float

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"surprise": round(self.surprise, 6),
                "semantic_novelty": None if self.semantic_novelty is None
                else round(self.semantic_novelty, 6),
                "keyword_novelty": round(self.keyword_novelty, 6),
                "category_rarity": round(self.category_rarity, 6),
                "exact_duplicate": self.exact_duplicate,
                "importance": round(self.importance, 6)}


def category_rarity(same_category_count: int) -> float:
    """seed 004 "Category Rarity": ``1 / log2(2 + count)``."""
    return 1.0 / math.log2(2 + max(0, same_category_count))


def surprise_score(
    *,
    category: Category,
    max_cosine: float | None,
    max_jaccard: float,
    same_category_count: int,
    partition_size: int,
    exact_duplicate: bool = False,
) -> SurpriseScore:
    """Combine the seed 004 parts into a surprise score.

    Args:
        category: The incoming memory's category (for rarity and the importance weight).
        max_cosine: Highest cosine to a record of the partition, or None on the Jaccard path.
        max_jaccard: Highest token Jaccard to a record of the partition.
        same_category_count: Records of the partition with the same category.
        partition_size: Records in the partition (0: the first memory is always novel).
        exact_duplicate: The content hash matched a record of the partition.
    """
    weight = CATEGORY_WEIGHTS[category]
    rarity = category_rarity(same_category_count)
    if exact_duplicate:
        return SurpriseScore(0.0, 0.0 if max_cosine is not None else None, 0.0, rarity, True,
                             0.0)
    if partition_size == 0:
        # seed 004: "First memory is always novel" (both novelties are 1.0)
        semantic = 1.0 if max_cosine is not None else None
        keyword = 1.0
    else:
        semantic = None if max_cosine is None else 1.0 - max(0.0, min(1.0, max_cosine))
        keyword = 1.0 - max(0.0, min(1.0, max_jaccard))
    if semantic is not None:
        value = _W_SEMANTIC * semantic + _W_KEYWORD * keyword + _W_RARITY * rarity
    else:
        value = _W_KEYWORD_ONLY * keyword + _W_RARITY_ONLY * rarity
    value = max(0.0, min(1.0, value))
    return SurpriseScore(value, semantic, keyword, rarity, False, value * weight)
