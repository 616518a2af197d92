"""Threshold what-if: which stored neighbour pairs a different merge threshold would change.

Read-only (never writes): exact cosine over the columnar view's vectors, per merge partition
(same agent, privacy and layer — DESIGN 3, 5), keeping the pairs whose similarity lies between
the old and the new threshold. Lowering the threshold makes those pairs *merge*; raising it
makes pairs that would have merged *split*. Large stores are capped to ``max_rows`` rows per
partition (evenly sampled; the result says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.memory_engine import MemoryEngine
    from engine.records import TrustTier
    from engine.store.view import ViewSnapshot

__all__ = ["PairChange", "WhatIf", "compare_thresholds", "threshold_what_if"]


@dataclass(frozen=True, slots=True)
class PairChange:
    """One stored pair whose merge outcome the new threshold changes.

    Attributes:
        a: The first record's id.
        b: The second record's id.
        similarity: Their cosine similarity.
        verdict: ``"merge"`` (the new threshold is lower) or ``"split"`` (higher).
        content_a: The first record's text.
        content_b: The second record's text.
    """

    a: str
    b: str
    similarity: float
    verdict: str
    content_a: str
    content_b: str


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The answer: changed pairs (most similar first) and how much was looked at.

    Attributes:
        old: The threshold in force.
        new: The threshold considered.
        pairs: The changed pairs, at most ``max_pairs`` of them.
        total: How many pairs change (all of them, not only those in ``pairs``).
        rows_compared: Records compared (after sampling).
        sampled: True when a partition was larger than ``max_rows`` and was sampled.
    """

    old: float
    new: float
    pairs: tuple[PairChange, ...]
    total: int
    rows_compared: int
    sampled: bool


def threshold_what_if(memory: MemoryEngine, tier: TrustTier, new: float, *,
                      max_rows: int = 3000, max_pairs: int = 500) -> WhatIf:
    """The stored pairs that a semantic merge threshold of ``new`` for ``tier`` would change.

    The threshold in force is the engine's ingest policy's for ``tier`` on the embedding path.
    Blocking (reads the view; exact cosine per partition): run it on a worker.

    Args:
        memory: The engine whose records are compared (read only).
        tier: The source trust tier whose threshold is considered.
        new: The threshold being considered.
        max_rows: Rows per partition compared exactly; bigger partitions are sampled.
        max_pairs: Pairs returned (``total`` counts them all).
    """
    old = memory.ingest_policy.threshold(tier, semantic=True)
    return compare_thresholds(memory.store.view.snapshot(), old, new, max_rows=max_rows,
                              max_pairs=max_pairs)


def compare_thresholds(snapshot: ViewSnapshot, old: float, new: float, *,
                       max_rows: int = 3000, max_pairs: int = 500) -> WhatIf:
    """Pairs of stored records with similarity in ``[min(old,new), max(old,new))``.

    Args:
        snapshot: The view snapshot (read only).
        old: The current threshold.
        new: The threshold being considered.
        max_rows: Rows per partition compared exactly; bigger partitions are sampled.
        max_pairs: Pairs returned (``total`` counts them all).
    """
    lo, hi = min(old, new), max(old, new)
    verdict = "merge" if new < old else "split"
    n = snapshot.n
    rows = np.flatnonzero(snapshot.alive[:n] & snapshot.has_vector[:n])
    changes: list[tuple[float, int, int]] = []
    compared = 0
    sampled = False
    if hi > lo and len(rows):
        # The merge partition: agent, privacy and layer codes, in that (lexicographic) order.
        codes = np.stack([snapshot.agent[rows].astype(np.int64),
                          snapshot.privacy[rows].astype(np.int64),
                          snapshot.layer[rows].astype(np.int64)], axis=1)
        _, partition = np.unique(codes, axis=0, return_inverse=True)
        partition = partition.reshape(-1)
        for part in range(int(partition.max()) + 1):
            members = rows[partition == part]
            if len(members) < 2:
                continue
            if len(members) > max_rows:
                members = members[np.linspace(0, len(members) - 1, max_rows).astype(np.intp)]
                sampled = True
            compared += len(members)
            vectors = snapshot.vectors[members]
            sims = vectors @ vectors.T
            i, j = np.nonzero(np.triu((sims >= lo) & (sims < hi), k=1))
            changes.extend((float(sims[a, b]), int(members[a]), int(members[b]))
                           for a, b in zip(i.tolist(), j.tolist(), strict=True))
    changes.sort(key=lambda c: -c[0])
    pairs = tuple(PairChange(snapshot.ids[a], snapshot.ids[b], s, verdict,
                             snapshot.contents[a], snapshot.contents[b])
                  for s, a, b in changes[:max_pairs])
    return WhatIf(old, new, pairs, len(changes), compared, sampled)
