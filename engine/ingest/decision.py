"""The merge decision: one pure function from what the search found to what happens.

Rules, in order (DESIGN decisions 2-5; seed 000 §9, seed 001, seed 004):

1. **Exact duplicate** (same content hash in the same agent, privacy and layer partition):
   update only if the incoming confidence is strictly greater, with
   ``merge_confidence(old, new)``; else skip with ``equal_confidence`` / ``lower_confidence``.
2. **Near duplicate**: the most similar candidate of the partition decides. Its merge threshold
   is the incoming source's trust-tier threshold (human 0.80, agent 0.85, auto 0.90 on cosine;
   the Jaccard table on the fallback path), raised to 0.95 when the categories differ.

   * similarity ≥ threshold and the contradiction guard finds nothing → ``merged``;
   * similarity ≥ threshold but the texts disagree on a detail → ``deferred``
     (``possible_contradiction``);
   * on the embedding path, similarity within ``confirm_band`` above the threshold but token
     Jaccard below ``confirm_min_jaccard`` → ``deferred`` (``low_overlap``): near the
     threshold, embedding and words must both say "same";
   * the best candidate would merge but the runner-up (another record it could merge into,
     without a contradiction) is within ``confidence_gap`` of it → ``deferred``
     (``confidence_gap``, seed 001 "confidence gap too small"): which record it duplicates is
     a person's call;
   * categories differ and similarity is between the tier threshold and 0.95 → ``deferred``
     (``category_mismatch``);
   * similarity in the gray zone below the threshold → ``deferred`` (``gray_zone``), on the
     embedding path only when the texts also share at least ``gray_min_jaccard`` of their
     tokens (else the pair is distinct and the memory is judged as new, step 3);
   * a pair the user already rejected is not a candidate.

   Before any of these: a memory that already waits in the review queue (same content, agent,
   privacy and layer) is ``skipped`` (``pending_review``), whatever it resembles most now.
3. **New**: stored if surprise ≥ the surprise threshold (seed 004, DESIGN 5), else ``skipped``
   (``not_novel``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.ingest.confidence import merge_confidence
from engine.ingest.contradiction import Conflict, find_conflicts
from engine.ingest.kinds import Action, Reason
from engine.ingest.policy import IngestPolicy
from engine.ingest.surprise import SurpriseScore
from engine.records import Category, TrustTier
from engine.text import jaccard, tokenize

__all__ = ["Candidate", "Decision", "ExactMatch", "decide"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored record similar to the incoming memory, in its merge partition.

    Attributes:
        id: Record id.
        similarity: Cosine (embedding path) or token Jaccard (fallback path).
        category: The record's category.
        content: The record's text (for the contradiction guard and keyword novelty).
        found_by: ``exact`` (numpy over the partition), ``hnsw`` (Chroma), ``linear``
            (Jaccard scan) or ``batch`` (a record written earlier in the same batch).
    """

    id: str
    similarity: float
    category: Category
    content: str
    found_by: str = "exact"

    def to_json(self) -> dict[str, Any]:
        """Wire form (content is left out: events carry ids, the stepper reads records)."""
        return {"id": self.id, "similarity": round(self.similarity, 6),
                "category": self.category.value, "found_by": self.found_by}


@dataclass(frozen=True, slots=True)
class ExactMatch:
    """A record with the same content hash in the same partition (the hash cache hit)."""

    id: str
    confidence: float
    via_alias: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """What the pipeline will do with one incoming memory, and why.

    Attributes:
        action: inserted, updated, skipped, merged or deferred.
        reason: Why (also the events' ``decision_reason``).
        target_id: The stored record the decision concerns (None for a plain insert).
        similarity: Similarity to the target (1.0 for an exact duplicate).
        thresholds: Every threshold applied (name → value).
        conflicts: What the contradiction guard found.
        new_confidence: The updated confidence of an exact-duplicate update.
    """

    action: Action
    reason: Reason
    target_id: str | None = None
    similarity: float | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()
    new_confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"action": self.action.value, "reason": self.reason.value,
                "target_id": self.target_id,
                "similarity": None if self.similarity is None else round(self.similarity, 6),
                "thresholds": dict(self.thresholds),
                "conflicts": [c.to_json() for c in self.conflicts],
                "new_confidence": self.new_confidence}


def decide(
    *,
    content: str,
    confidence: float,
    tier: TrustTier,
    category: Category,
    exact: ExactMatch | None,
    candidates: Sequence[Candidate],
    semantic: bool,
    surprise: SurpriseScore,
    policy: IngestPolicy,
    pending_targets: Collection[str] = (),
) -> Decision:
    """Decide what to do with one incoming memory (see the module docstring for the rules).

    Args:
        content: The incoming text.
        confidence: Its confidence.
        tier: Its source's trust tier.
        category: Its category.
        exact: The exact-duplicate hit in its partition, if any.
        candidates: Near-duplicate candidates of its partition, most similar first, rejected
            pairs already removed.
        semantic: True on the embedding path, False on the Jaccard path.
        surprise: Its surprise against the agent's privacy partition.
        policy: Thresholds and switches.
        pending_targets: Targets for which this memory (its content in its partition) already
            waits in the review queue; any makes it ``skipped`` (``pending_review``).
    """
    dedup = policy.dedup
    threshold = policy.threshold(tier, semantic=semantic)
    floor = policy.review_floor(tier, semantic=semantic)
    thresholds: dict[str, float] = {
        "threshold": threshold, "review_floor": floor,
        "cross_category": dedup.cross_category_threshold,
        "surprise": dedup.surprise_threshold,
    }
    if exact is not None:
        # seed 000 §9: update only if the new confidence is STRICTLY greater
        if confidence > exact.confidence:
            return Decision(Action.UPDATED, Reason.CONFIDENCE_IMPROVED, exact.id, 1.0,
                            thresholds, (), merge_confidence(exact.confidence, confidence))
        reason = (Reason.EQUAL_CONFIDENCE if confidence == exact.confidence
                  else Reason.LOWER_CONFIDENCE)
        return Decision(Action.SKIPPED, reason, exact.id, 1.0, thresholds)
    if pending_targets:
        # The same memory already waits for a person: one item per memory, whatever record it
        # resembles most now (records inserted since can outrank the item's target).
        best_pending = candidates[0] if candidates and candidates[0].id in pending_targets \
            else None
        return Decision(Action.SKIPPED, Reason.PENDING_REVIEW,
                        best_pending.id if best_pending else min(pending_targets),
                        best_pending.similarity if best_pending else None, thresholds)
    if candidates:
        best = candidates[0]
        effective = threshold
        if best.category != category:
            # seed 004 shouldMerge: different categories merge only above 0.95
            effective = max(threshold, dedup.cross_category_threshold)
        thresholds["effective"] = effective
        if best.similarity >= floor and not _distinct_in_gray_zone(
                best, content, semantic=semantic, threshold=threshold, policy=policy,
                thresholds=thresholds):
            conflicts = find_conflicts(best.content, content) if policy.contradiction_guard \
                else ()
            if conflicts:
                return Decision(Action.DEFERRED, Reason.POSSIBLE_CONTRADICTION, best.id,
                                best.similarity, thresholds, conflicts)
            if best.similarity >= effective:
                if semantic and best.similarity < effective + policy.confirm_band:
                    overlap = jaccard(tokenize(best.content), tokenize(content))
                    thresholds["confirm_min_jaccard"] = policy.confirm_min_jaccard
                    if overlap < policy.confirm_min_jaccard:
                        return Decision(Action.DEFERRED, Reason.LOW_OVERLAP, best.id,
                                        best.similarity, thresholds)
                if _ambiguous(best, candidates, content, category, threshold=threshold,
                              policy=policy, thresholds=thresholds):
                    return Decision(Action.DEFERRED, Reason.CONFIDENCE_GAP, best.id,
                                    best.similarity, thresholds)
                return Decision(Action.MERGED, Reason.NEAR_DUPLICATE, best.id, best.similarity,
                                thresholds)
            reason = Reason.CATEGORY_MISMATCH if best.similarity >= threshold \
                else Reason.GRAY_ZONE
            return Decision(Action.DEFERRED, reason, best.id, best.similarity, thresholds)
    nearest = candidates[0] if candidates else None
    if surprise.surprise >= dedup.surprise_threshold:
        reason = Reason.NOVEL if nearest is not None else Reason.UNIQUE_HASH
        return Decision(Action.INSERTED, reason, None,
                        None if nearest is None else nearest.similarity, thresholds)
    return Decision(Action.SKIPPED, Reason.NOT_NOVEL,
                    None if nearest is None else nearest.id,
                    None if nearest is None else nearest.similarity, thresholds)


def _distinct_in_gray_zone(best: Candidate, content: str, *, semantic: bool, threshold: float,
                           policy: IngestPolicy, thresholds: dict[str, float]) -> bool:
    """True when ``best`` is below the merge threshold on the embedding path and the texts share
    too few words (``policy.gray_min_jaccard``) to be worth a review: the pair is distinct."""
    if not semantic or best.similarity >= threshold or policy.gray_min_jaccard <= 0.0:
        return False
    thresholds["gray_min_jaccard"] = policy.gray_min_jaccard
    return jaccard(tokenize(best.content), tokenize(content)) < policy.gray_min_jaccard


def _ambiguous(best: Candidate, candidates: Sequence[Candidate], content: str,
               category: Category, *, threshold: float, policy: IngestPolicy,
               thresholds: dict[str, float]) -> bool:
    """True when the runner-up could take the merge as well and is within
    ``policy.confidence_gap`` of ``best`` (seed 001's "confidence gap too small")."""
    if policy.confidence_gap <= 0.0 or len(candidates) < 2:
        return False
    runner = candidates[1]
    if runner.id == best.id or best.similarity - runner.similarity >= policy.confidence_gap:
        return False
    effective = threshold if runner.category == category \
        else max(threshold, policy.dedup.cross_category_threshold)
    if runner.similarity < effective:
        return False
    if policy.contradiction_guard and find_conflicts(runner.content, content):
        return False  # the runner-up disagrees with the memory: not a target it could take
    thresholds["confidence_gap"] = policy.confidence_gap
    return True
