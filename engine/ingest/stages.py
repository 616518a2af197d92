"""Typed reports of the pipeline's stages: what each stage of one memory found and did.

A :class:`~engine.ingest.pipeline.StageReport` carries two forms of the same facts: ``data``,
the JSON-compatible wire form (events, the API, the stepper's Raw tab; ``docs/ingest.md``), and
``detail``, one of the frozen dataclasses below, built from the run's own typed values (the
search result, the decision, the records before and after), for code that reads the stage —
the GUI's stepper reads these, not string keys of ``data``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ingest.decision import Decision
from engine.ingest.kinds import Action
from engine.ingest.search import SearchResult
from engine.ingest.surprise import SurpriseScore
from engine.records import MemoryRecord, NewMemory

__all__ = [
    "ApplyDetail",
    "CandidatesDetail",
    "DecisionDetail",
    "EmbedDetail",
    "EventsDetail",
    "FailedDetail",
    "NormalizeDetail",
    "PersistDetail",
    "StageDetail",
    "StartDetail",
]


@dataclass(frozen=True, slots=True)
class StartDetail:
    """``ingest-start``: the incoming memory as given and the id it gets."""

    incoming_id: str
    memory: NewMemory


@dataclass(frozen=True, slots=True)
class NormalizeDetail:
    """``normalize+hash``: the canonical text and its SHA-256 (DESIGN decision 1)."""

    normalized: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class EmbedDetail:
    """``embed``: which similarity path the memory takes, and the model call if one was made.

    Attributes:
        semantic: True on the embedding path, False on the token-Jaccard path.
        model: The model's name on the embedding path.
        precomputed: The vector came with the memory (a batch encoded it in one call).
        dimension: The vector's length, or None without a vector.
        latency_ms: Time the stage took.
        error: Why a model call failed (the memory then takes the Jaccard path).
        budget_ms: Seed 001's embedding time budget.
        over_budget: The model call took longer than the budget (None: no call was timed).
    """

    semantic: bool
    model: str | None
    precomputed: bool
    dimension: int | None
    latency_ms: float
    error: str | None
    budget_ms: float
    over_budget: bool | None


@dataclass(frozen=True, slots=True)
class CandidatesDetail:
    """``candidate-search``: the neighbours found and the search's time budget.

    Attributes:
        search: What the search found (candidates most similar first, the exact duplicate).
        budget_ms: Seed 001's search time budget ("ANN query < 25 ms").
        over_budget: The search took longer than the budget.
    """

    search: SearchResult
    budget_ms: float
    over_budget: bool


@dataclass(frozen=True, slots=True)
class DecisionDetail:
    """``decision``: what will happen to the memory and why, with its surprise."""

    decision: Decision
    surprise: SurpriseScore


@dataclass(frozen=True, slots=True)
class ApplyDetail:
    """``merge/defer``: the stored record before and after, as they will be written.

    Attributes:
        action: The decision's action.
        before: The stored record the memory was compared with (None for an insert).
        after: The record to write (None when nothing is written, or a batch defers).
        merge_weight: The merge's interpolation weight (merges only).
        deferred_to: The record a deferral waits on in the review queue.
    """

    action: Action
    before: MemoryRecord | None
    after: MemoryRecord | None
    merge_weight: float | None
    deferred_to: str | None


@dataclass(frozen=True, slots=True)
class PersistDetail:
    """``persist``: the records written (a batch stages them and writes them per chunk).

    Attributes:
        written: Ids written to the store by this stage.
        staged: Ids staged for writing.
        batched: Part of a batch (the chunk writes them).
        review_id: The review item a deferral queued.
        simulated: A dry run (the Pipeline view's Simulate): nothing was written.
        would_write: On a dry run, the ids a real run would have written.
        would_queue_review: On a dry run, whether a real run would have queued a review item.
    """

    written: tuple[str, ...]
    staged: tuple[str, ...]
    batched: bool
    review_id: str | None
    simulated: bool = False
    would_write: tuple[str, ...] = ()
    would_queue_review: bool = False


@dataclass(frozen=True, slots=True)
class EventsDetail:
    """``events``: the event kinds of this memory, and how many were emitted (sampling)."""

    kinds: tuple[str, ...]
    emitted: int
    batched: bool


@dataclass(frozen=True, slots=True)
class FailedDetail:
    """Any stage that failed: why (the run stops there; nothing more is written)."""

    error: str


StageDetail = (StartDetail | NormalizeDetail | EmbedDetail | CandidatesDetail | DecisionDetail
               | ApplyDetail | PersistDetail | EventsDetail | FailedDetail)
"""One stage's typed report (``StageReport.detail``)."""
