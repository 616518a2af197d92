"""Ingest settings that go beyond :class:`engine.config.DedupConfig`: merge weights, search sizes.

The thresholds, gray-zone width, surprise threshold, related top-k and the exact-search limit
come from :class:`~engine.config.DedupConfig` (DESIGN decisions 3-5); this module adds what the
merge rules and the candidate search need. Every value is documented in ``docs/ingest.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from engine.config import DedupConfig
from engine.errors import ConfigInvalid
from engine.records import TrustTier

__all__ = ["GrayZoneScope", "IngestPolicy"]


class GrayZoneScope(StrEnum):
    """Where the review band below a merge threshold starts.

    ``COMMON_FLOOR``: at ``min(thresholds) - gray_zone`` for every tier, so a pair similar
    enough to be reviewed from a human source is also reviewed from a less trusted one (the tier
    decides how much merges automatically, not how much a person gets to see). With the defaults
    the band is [0.70, 0.80) for human, [0.70, 0.85) for agent and [0.70, 0.90) for auto.

    ``BELOW_THRESHOLD``: ``[threshold - gray_zone, threshold)`` for each tier (DESIGN 3 read
    literally).
    """

    COMMON_FLOOR = "common_floor"
    BELOW_THRESHOLD = "below_threshold"


_TIER_WEIGHTS = MappingProxyType({TrustTier.HUMAN: 1.0, TrustTier.AGENT: 0.6,
                                  TrustTier.AUTO: 0.3})


@dataclass(frozen=True, slots=True)
class IngestPolicy:
    """Knobs of the ingest pipeline beyond :class:`DedupConfig`.

    Attributes:
        dedup: Thresholds, gray zone, surprise threshold, related top-k, exact-search limit.
        gray_zone_scope: See :class:`GrayZoneScope`.
        contradiction_guard: Defer near-duplicates that disagree on a detail (issue 3).
        tier_weights: seed 001 merge weight of an incoming source by trust tier (the ``w`` of
            ``lerp(old, incoming, w)`` before recency and the per-source cap).
        recency_half_life_days: How fast a restatement's recency factor approaches 1: an
            incoming memory ``Δt`` after the stored one was last touched gets
            ``1 - 0.5·exp(-Δt/τ)`` (an immediate repeat counts half, old news restated later
            counts fully).
        candidate_k: Nearest neighbours examined per incoming memory.
        related_min_similarity: Neighbours at least this similar become ``related`` links.
        hnsw_overfetch: At most this many Chroma HNSW neighbours are fetched per wanted
            partition neighbour when the partition is large (other partitions' hits are filtered
            out afterwards); the factor used is the store's size over the partition's.
        batch_size: Records embedded and written per chunk by batch ingest.
        overlap_encode: Batch ingest encodes the next chunk on a helper thread while it
            decides and writes the current one.
        embed_budget_ms: seed 001 "Timeout budget: embedding call < 150 ms": the ``embed``
            stage reports ``over_budget`` when its own model call took longer (a report, not a
            timeout: the memory is still embedded; a batch embeds per chunk, not per stage).
        search_budget_ms: seed 001 "ANN query < 25 ms": the ``candidate-search`` stage (hash
            cache, nearest neighbours, linear scan) reports ``over_budget`` above it.
        confirm_band: On the embedding path, a merge within this distance above its threshold
            also needs lexical support (two weak signals must agree), else it goes to review
            with reason ``low_overlap``. 0 disables the rule.
        confirm_min_jaccard: The token Jaccard that counts as lexical support.
        gray_min_jaccard: On the embedding path, a pair in the gray zone (below its merge
            threshold) is worth a person's review only if the texts also share at least this
            token Jaccard; below it the pair counts as distinct and the memory is judged as new
            (it still gets a ``related`` link). Dialogue turns of one conversation share
            speakers and style, so many distinct turns reach the gray zone on embedding
            similarity alone. 0 disables the rule.
        confidence_gap: seed 001 "Conflict handling: … or confidence gap too small, enqueue for
            review". A merge is confident when one stored record is clearly the one the memory
            duplicates: when the runner-up candidate (another record the memory could merge
            into, no contradiction with it) is within this similarity of the best one, the
            choice of target is a coin toss and the memory goes to review with reason
            ``confidence_gap``. 0 disables the rule.
    """

    dedup: DedupConfig = field(default_factory=DedupConfig)
    gray_zone_scope: GrayZoneScope = GrayZoneScope.COMMON_FLOOR
    contradiction_guard: bool = True
    tier_weights: Mapping[TrustTier, float] = field(default_factory=lambda: dict(_TIER_WEIGHTS))
    recency_half_life_days: float = 30.0
    candidate_k: int = 16
    related_min_similarity: float = 0.6
    hnsw_overfetch: int = 8
    batch_size: int = 256
    overlap_encode: bool = True
    embed_budget_ms: float = 150.0
    search_budget_ms: float = 25.0
    confirm_band: float = 0.05
    confirm_min_jaccard: float = 0.4
    gray_min_jaccard: float = 0.2
    confidence_gap: float = 0.02

    def __post_init__(self) -> None:
        object.__setattr__(self, "gray_zone_scope", GrayZoneScope(self.gray_zone_scope))
        missing = [t.value for t in TrustTier if t not in self.tier_weights]
        if missing:
            raise ConfigInvalid("tier_weights", dict(self.tier_weights),
                                f"missing tier(s) {', '.join(missing)}")
        for tier, weight in self.tier_weights.items():
            if not isinstance(weight, int | float) or not 0.0 <= weight <= 1.0:
                raise ConfigInvalid(f"tier_weights.{tier}", weight, "must be in 0..1")
        object.__setattr__(self, "tier_weights", MappingProxyType(dict(self.tier_weights)))
        if not math.isfinite(self.recency_half_life_days) or self.recency_half_life_days <= 0:
            raise ConfigInvalid("recency_half_life_days", self.recency_half_life_days,
                                "must be a number > 0")
        for name in ("candidate_k", "hnsw_overfetch", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigInvalid(name, value, "must be an integer >= 1")
        for name in ("confirm_band", "confirm_min_jaccard", "gray_min_jaccard",
                     "confidence_gap"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ConfigInvalid(name, value, "must be in 0..1")
        for name in ("embed_budget_ms", "search_budget_ms"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 < value < math.inf:
                raise ConfigInvalid(name, value, "must be a number of milliseconds > 0")
        if not 0.0 <= self.related_min_similarity <= 1.0:
            raise ConfigInvalid("related_min_similarity", self.related_min_similarity,
                                "must be in 0..1")

    def threshold(self, tier: TrustTier, *, semantic: bool) -> float:
        """Merge threshold for ``tier`` on the embedding (or Jaccard) path (seed 001)."""
        return self.dedup.threshold(tier, semantic=semantic)

    def review_floor(self, tier: TrustTier, *, semantic: bool) -> float:
        """Lowest similarity that still goes to review instead of counting as distinct."""
        table = self.dedup.thresholds if semantic else self.dedup.jaccard_thresholds
        if self.gray_zone_scope is GrayZoneScope.COMMON_FLOOR:
            base = min(table.values())
        else:
            base = table[tier]
        return max(0.0, min(base, table[tier]) - self.dedup.gray_zone)
