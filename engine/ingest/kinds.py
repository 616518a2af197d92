"""Names used by the ingest pipeline: stages, actions, reasons and event kinds.

One place to read what the pipeline can say. Event kinds are seed 001's voyeur kinds plus seed
002's ``memory:*`` kinds (DESIGN decision 7); ``docs/ingest.md`` lists each with its fields.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Action", "EventKind", "Reason", "Stage"]


class Stage(StrEnum):
    """The named pipeline stages, in order (DESIGN decision 10)."""

    START = "ingest-start"
    NORMALIZE = "normalize+hash"
    EMBED = "embed"
    CANDIDATES = "candidate-search"
    DECISION = "decision"
    APPLY = "merge/defer"
    PERSIST = "persist"
    EVENTS = "events"


class Action(StrEnum):
    """What happened to one incoming memory."""

    INSERTED = "inserted"
    UPDATED = "updated"
    SKIPPED = "skipped"
    MERGED = "merged"
    DEFERRED = "deferred"
    ERROR = "error"


class Reason(StrEnum):
    """Why: the ``decision_reason`` of the outcome event."""

    UNIQUE_HASH = "unique_hash"  # seed 000 §9 insert reason, nothing similar either
    NOVEL = "novel"  # similar records exist, none close enough; surprise >= threshold
    CONFIDENCE_IMPROVED = "confidence_improved"  # seed 000 §9 exact duplicate, update
    EQUAL_CONFIDENCE = "equal_confidence"  # seed 000 §9 exact duplicate, skip
    LOWER_CONFIDENCE = "lower_confidence"  # seed 000 §9 exact duplicate, skip
    NEAR_DUPLICATE = "near_duplicate"  # seed 001 similarity >= tier threshold: merge
    GRAY_ZONE = "gray_zone"  # DESIGN 3: just under the threshold: review
    CATEGORY_MISMATCH = "category_mismatch"  # seed 004: other category below 0.95: review
    POSSIBLE_CONTRADICTION = "possible_contradiction"  # the guard: review, never merge
    LOW_OVERLAP = "low_overlap"  # just above the threshold without lexical support: review
    CONFIDENCE_GAP = "confidence_gap"  # seed 001: two targets nearly as similar: review
    NOT_NOVEL = "not_novel"  # seed 004 surprise below threshold: skip
    PENDING_REVIEW = "pending_review"  # the same pair already waits in the review queue
    REVIEW_APPROVED = "review_approved"
    REVIEW_REJECTED = "review_rejected"
    INVALID_INPUT = "invalid_input"
    FAILED = "failed"


class EventKind(StrEnum):
    """Event kinds the pipeline emits (seed 001 voyeur kinds + seed 002 ``memory:*``)."""

    INGEST_START = "ingest-start"
    EMBED_REQUEST = "embed-request"
    CANDIDATE_MATCH = "candidate-match"
    MERGE_APPLIED = "merge-applied"
    MERGE_DEFERRED = "merge-deferred"
    INGEST_SKIPPED = "ingest-skipped"
    ERROR = "error"
    RECORD_CREATED = "memory:record:created"
    RECORD_UPDATED = "memory:record:updated"
    RECORD_LINKED = "memory:record:linked"
    REVIEW_APPROVED = "review-approved"
    REVIEW_REJECTED = "review-rejected"
