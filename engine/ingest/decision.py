"""The merge decision: one pure function from what the search found to what happens.

Rules, in order (DESIGN decisions 2-5; seed 000 §9, seed 001, seed 004):

1. **Exact duplicate** (same content hash in the same agent, privacy and layer partition):
   update only if the incoming confidence is strictly greater, with
   ``merge_confidence(old, new)``; else skip with ``equal_confidence`` / ``lower_confidence``.
2. **Near duplicate**: the most similar candidate of the partition decides — a turn attributed
   to another speaker (``"Nate: ..."`` / ``"Joanna: ..."``) is not a candidate
   (``policy.distinct_speakers``). Its merge threshold is the incoming source's trust-tier
   threshold (human 0.80, agent 0.85, auto 0.90 on cosine; the Jaccard table on the fallback
   path), raised to 0.95 when the categories differ; on the embedding path a merge needs the
   **merge point**, ``threshold + merge_margin`` capped at 0.95
   (:meth:`IngestPolicy.merge_point`: human 0.90, agent and auto 0.95).

   * on the embedding path, below 0.95 (the cross-category threshold), texts that share less
     than ``min_jaccard`` of their words (speaker prefixes left out) are distinct: the memory
     is judged as new (step 3);
   * the contradiction guard finds a conflict → ``deferred`` (``possible_contradiction``); on
     the embedding path only when the texts share at least ``contradiction_min_jaccard`` of
     their words or their similarity is at least 0.95 (else two different statements:
     distinct, step 3);
   * similarity ≥ the merge point → ``merged``, unless
     - (embedding path, ``confirm_band`` > 0, off by default) it is within ``confirm_band``
       above the merge point with token Jaccard below ``confirm_min_jaccard`` → ``deferred``
       (``low_overlap``);
     - the runner-up (another record it could merge into, without a contradiction) is within
       ``confidence_gap`` of it → ``deferred`` (``confidence_gap``, seed 001 "confidence gap
       too small"): which record it duplicates is a person's call;
   * categories differ and similarity is between the tier threshold and 0.95 → ``deferred``
     (``category_mismatch``);
   * similarity from the review floor (the gray zone) up to the merge point → ``deferred``
     (``gray_zone``);
   * a pair the user already rejected is not a candidate.

   The values were chosen on STS-B train (docs/ingest.md, "Quality on unseen data").

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
from engine.text import jaccard, split_speaker, tokenize

__all__ = ["Candidate", "Decision", "ExactMatch", "body_jaccard", "decide"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored record similar to the incoming memory, in its merge partition.

    Attributes:
        id: Record id.
        similarity: Cosine (embedding path) or token Jaccard (fallback path).
        category: The record's category.
        content: The record's text (for the contradiction guard and keyword novelty).
        found_by: ``exact`` (numpy over the partition), ``ivf`` (the in-process partition
            index, :mod:`engine.ingest.partition_index`), ``hnsw`` (Chroma), ``linear``
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
    same = [c for c in candidates if not _other_speaker(c.content, content, policy)]
    if same:
        best = same[0]
        effective = threshold
        if best.category != category:
            # seed 004 shouldMerge: different categories merge only above 0.95
            effective = max(threshold, dedup.cross_category_threshold)
        merge_at = policy.merge_point(effective, semantic=semantic)
        thresholds["effective"] = merge_at
        if semantic and policy.merge_margin > 0.0:
            thresholds["merge_margin"] = policy.merge_margin
        overlap = body_jaccard(best.content, content)
        if best.similarity >= floor and not _lexically_distinct(
                best.similarity, overlap, semantic=semantic, policy=policy,
                thresholds=thresholds):
            conflicts = find_conflicts(best.content, content) if policy.contradiction_guard \
                else ()
            if conflicts and semantic and overlap < policy.contradiction_min_jaccard \
                    and best.similarity < dedup.cross_category_threshold:
                # Different statements that name different details, not one statement with a
                # detail changed: distinct, the memory is judged as new.
                thresholds["contradiction_min_jaccard"] = policy.contradiction_min_jaccard
            elif conflicts:
                return Decision(Action.DEFERRED, Reason.POSSIBLE_CONTRADICTION, best.id,
                                best.similarity, thresholds, conflicts)
            elif best.similarity >= merge_at:
                if semantic and best.similarity < merge_at + policy.confirm_band:
                    thresholds["confirm_min_jaccard"] = policy.confirm_min_jaccard
                    if overlap < policy.confirm_min_jaccard:
                        return Decision(Action.DEFERRED, Reason.LOW_OVERLAP, best.id,
                                        best.similarity, thresholds)
                if _ambiguous(best, same, content, category, threshold=threshold,
                              semantic=semantic, policy=policy, thresholds=thresholds):
                    return Decision(Action.DEFERRED, Reason.CONFIDENCE_GAP, best.id,
                                    best.similarity, thresholds)
                return Decision(Action.MERGED, Reason.NEAR_DUPLICATE, best.id, best.similarity,
                                thresholds)
            else:
                reason = Reason.CATEGORY_MISMATCH if best.similarity >= threshold \
                    and best.category != category else Reason.GRAY_ZONE
                return Decision(Action.DEFERRED, reason, best.id, best.similarity, thresholds)
    nearest = candidates[0] if candidates else None
    if surprise.surprise >= dedup.surprise_threshold:
        reason = Reason.NOVEL if nearest is not None else Reason.UNIQUE_HASH
        return Decision(Action.INSERTED, reason, None,
                        None if nearest is None else nearest.similarity, thresholds)
    return Decision(Action.SKIPPED, Reason.NOT_NOVEL,
                    None if nearest is None else nearest.id,
                    None if nearest is None else nearest.similarity, thresholds)


def body_jaccard(stored: str, incoming: str) -> float:
    """Token Jaccard of two texts without their speaker prefixes (:func:`split_speaker`): the
    name a turn is attributed to is one shared token that says nothing about what was said."""
    return jaccard(tokenize(split_speaker(stored)[1]), tokenize(split_speaker(incoming)[1]))


def _other_speaker(stored: str, incoming: str, policy: IngestPolicy) -> bool:
    """True when both texts are turns attributed to speakers and the speakers differ."""
    if not policy.distinct_speakers:
        return False
    first, second = split_speaker(stored)[0], split_speaker(incoming)[0]
    return first is not None and second is not None and first.lower() != second.lower()


def _lexically_distinct(similarity: float, overlap: float, *, semantic: bool,
                        policy: IngestPolicy, thresholds: dict[str, float]) -> bool:
    """True when, on the embedding path, the texts share too few words (``overlap`` below
    ``policy.min_jaccard``) to be duplicates: the pair is distinct. At or above the
    cross-category threshold (seed 004's 0.95, where similarity alone merges even records of
    different categories) the embedding is trusted alone."""
    if not semantic or policy.min_jaccard <= 0.0 \
            or similarity >= policy.dedup.cross_category_threshold:
        return False
    thresholds["min_jaccard"] = policy.min_jaccard
    return overlap < policy.min_jaccard


def _ambiguous(best: Candidate, candidates: Sequence[Candidate], content: str,
               category: Category, *, threshold: float, semantic: bool, policy: IngestPolicy,
               thresholds: dict[str, float]) -> bool:
    """True when the runner-up could take the merge as well and is within
    ``policy.confidence_gap`` of ``best`` (seed 001's "confidence gap too small")."""
    if policy.confidence_gap <= 0.0 or len(candidates) < 2:
        return False
    runner = candidates[1]
    if runner.id == best.id or best.similarity - runner.similarity >= policy.confidence_gap:
        return False
    effective = policy.merge_point(
        threshold if runner.category == category
        else max(threshold, policy.dedup.cross_category_threshold), semantic=semantic)
    if runner.similarity < effective:
        return False
    if policy.contradiction_guard and find_conflicts(runner.content, content):
        return False  # the runner-up disagrees with the memory: not a target it could take
    thresholds["confidence_gap"] = policy.confidence_gap
    return True
