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
    (gray zone 0.30, merge margin 0.10) the band is [0.50, 0.90) for human and [0.50, 0.95)
    for agent and auto on the embedding path.

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
        partition_index: A partition of more than ``exact_search_max`` vectors is searched
            through an in-process IVF index over the view's vectors
            (:mod:`engine.ingest.partition_index`: exact cosines of the rows of the lists
            nearest the query, kept current across writes; issue 24, dedup p99 at 1M). False:
            Chroma's HNSW index, as before (``hnsw_overfetch``).
        index_probe_share: The least share of a large partition the IVF index scans per query
            (its lists nearest the query first); more finds more of the far neighbours and
            costs proportionally more. 0.08: on the real model's vectors (30,721 STS-B and
            LoCoMo texts) it finds 0.99 of the neighbours at or above the review floor that
            exact search finds, and all those at or above 0.85 (docs/ingest.md, "The partition
            index").
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
        merge_margin: On the embedding path a near duplicate merges at its trust tier's
            threshold plus this margin (human 0.90, agent 0.95, auto 0.95 with the seed 001
            thresholds and the default 0.10, capped at 0.95: :meth:`merge_point`); from the
            review floor up to there it goes to review (``gray_zone``). Chosen on STS-B train
            (docs/ingest.md, "Quality on unseen data"): at the seed thresholds themselves one
            human-tier merge in 15 on train was of two distinct sentences. 0 merges at the
            seed thresholds.
        confirm_band: On the embedding path, a merge within this distance above its merge point
            also needs ``confirm_min_jaccard`` of lexical support, else it goes to review with
            reason ``low_overlap``. 0 (the default since the merge margin) disables the rule.
        confirm_min_jaccard: The token Jaccard that counts as lexical support for
            ``confirm_band``.
        min_jaccard: On the embedding path, a pair below the cross-category threshold (0.95)
            is a duplicate (to merge, or to review) only if the texts also share at least this
            token Jaccard (speaker prefixes left out);
            below it the pair counts as distinct and the memory is judged as new (it still gets
            a ``related`` link). Paraphrases keep some of their words; different utterances of
            one conversation reach the gray zone on shared speakers and tone alone. 0 disables
            the rule.
        contradiction_min_jaccard: On the embedding path, a pair the contradiction guard flags
            goes to review only if its texts share at least this token Jaccard (or are at least
            0.95 similar, where the embedding is trusted alone): a contradiction
            is the same statement with a detail changed ("rent is $1,200" / "rent is $1,500");
            two different statements that happen to name different numbers or people are just
            distinct. 0 sends every flagged pair to review.
        distinct_speakers: Turns attributed to different speakers (``"Nate: ..."`` /
            ``"Joanna: ..."``, :func:`engine.text.split_speaker`) are never duplicates of each
            other: what one person said is not what another said.
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
    partition_index: bool = True
    index_probe_share: float = 0.08
    hnsw_overfetch: int = 8
    batch_size: int = 256
    overlap_encode: bool = True
    embed_budget_ms: float = 150.0
    search_budget_ms: float = 25.0
    merge_margin: float = 0.10
    confirm_band: float = 0.0
    confirm_min_jaccard: float = 0.4
    min_jaccard: float = 0.27
    contradiction_min_jaccard: float = 0.4
    distinct_speakers: bool = True
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
        for name in ("merge_margin", "confirm_band", "confirm_min_jaccard", "min_jaccard",
                     "contradiction_min_jaccard", "confidence_gap"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ConfigInvalid(name, value, "must be in 0..1")
        for name in ("embed_budget_ms", "search_budget_ms"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 < value < math.inf:
                raise ConfigInvalid(name, value, "must be a number of milliseconds > 0")
        if not isinstance(self.index_probe_share, int | float) or \
                not 0.0 < self.index_probe_share <= 1.0:
            raise ConfigInvalid("index_probe_share", self.index_probe_share, "must be in (0, 1]")
        if not 0.0 <= self.related_min_similarity <= 1.0:
            raise ConfigInvalid("related_min_similarity", self.related_min_similarity,
                                "must be in 0..1")

    def threshold(self, tier: TrustTier, *, semantic: bool) -> float:
        """Merge threshold for ``tier`` on the embedding (or Jaccard) path (seed 001)."""
        return self.dedup.threshold(tier, semantic=semantic)

    def merge_point(self, threshold: float, *, semantic: bool) -> float:
        """Where a near duplicate merges, given its merge threshold (tier, or cross-category).

        On the embedding path: ``threshold + merge_margin``, but never above
        ``max(threshold, cross_category_threshold)`` — seed 004's 0.95 is where even records of
        different categories merge, so no same-category merge needs more (the auto tier merges
        at 0.95, not at 1.00). On the Jaccard path: the threshold itself.
        """
        if not semantic:
            return threshold
        cap = max(threshold, self.dedup.cross_category_threshold)
        # rounded so that 0.80 + 0.10 is 0.90, not 0.9000000000000001
        return round(min(threshold + self.merge_margin, cap), 9)

    def review_floor(self, tier: TrustTier, *, semantic: bool) -> float:
        """Lowest similarity that still goes to review instead of counting as distinct."""
        table = self.dedup.thresholds if semantic else self.dedup.jaccard_thresholds
        if self.gray_zone_scope is GrayZoneScope.COMMON_FLOOR:
            base = min(table.values())
        else:
            base = table[tier]
        return round(max(0.0, min(base, table[tier]) - self.dedup.gray_zone), 9)
