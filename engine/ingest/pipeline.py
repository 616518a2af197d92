"""The ingest pipeline as named stages, with a headless and a stepped driver (DESIGN 10).

Stages, in order (:class:`~engine.ingest.kinds.Stage`)::

    ingest-start → normalize+hash → embed → candidate-search → decision → merge/defer
                 → persist → events

Each stage is one method of :class:`_Run` that reads and extends the run's state and returns
the data it produced (a :class:`StageReport`). The **stepped driver** (:class:`SteppedRun`)
calls them one at a time so a caller — the GUI's slow-motion stepper — can pause between stages
and show each stage's data; the **headless driver** (:meth:`IngestPipeline.ingest`) calls the
same methods back to back, and **batch ingest** (:meth:`IngestPipeline.ingest_batch`) runs the
same stages per memory while embedding and writing a chunk at a time. There is no second
implementation for the GUI.

Events of a run are collected and emitted in the ``events`` stage, after ``persist`` wrote
the records: an event never describes a write that did not happen, and a cancelled batch chunk
leaves neither records nor events behind.

A **simulated** run (``stepped(new, simulate=True)``, the GUI pipeline's default, and
:meth:`IngestPipeline.simulate_batch`) runs every stage with the same numbers but stages its
writes into a write set that is never flushed: ``persist`` reports what it would write and
``events`` what it would emit, and nothing reaches the store, the ledger or the event bus.
A real stepped run keeps what its ``persist`` wrote (:attr:`SteppedRun.written`) so a caller
can take the write back (``MemoryEngine.undo_run``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.clock import Clock
from engine.collector import fewer_collections
from engine.errors import (
    EngineError,
    RecordNotFound,
    StoreReadOnly,
    StoreUnavailable,
    ValidationError,
)
from engine.events import Event, EventBus
from engine.ingest.contradiction import Conflict
from engine.ingest.decision import Decision, decide
from engine.ingest.kinds import Action, EventKind, Reason, Stage
from engine.ingest.merge import (
    add_provenance,
    add_related,
    apply_exact_update,
    merge_records,
    merge_weight,
)
from engine.ingest.policy import IngestPolicy
from engine.ingest.review import (
    ReviewItem,
    ReviewLookup,
    ReviewQueue,
    ReviewStatus,
    review_key,
)
from engine.ingest.search import BatchOverlay, CandidateSearch, SearchResult
from engine.ingest.stages import (
    ApplyDetail,
    CandidatesDetail,
    DecisionDetail,
    EmbedDetail,
    EventsDetail,
    FailedDetail,
    NormalizeDetail,
    PersistDetail,
    StageDetail,
    StartDetail,
)
from engine.ingest.surprise import SurpriseScore, surprise_score
from engine.lifecycle.capacity import CapacityPlan, roll_off
from engine.records import MemoryRecord, NewMemory, ProvenanceEntry, RelatedLink
from engine.store import MemoryStore
from engine.store.view import ViewSnapshot
from engine.text import normalize

__all__ = [
    "STAGES",
    "BatchResult",
    "EditRecorder",
    "IngestPipeline",
    "IngestResult",
    "RunWrites",
    "StageReport",
    "SteppedRun",
]

F32 = npt.NDArray[np.float32]
STAGES: tuple[Stage, ...] = tuple(Stage)

EditRecorder = Callable[[str, Sequence[tuple[MemoryRecord | None, MemoryRecord | None]], str,
                         str], object]
"""``(op, [(before, after)], actor, batch_id)``: writes the edit history (undo)."""
Embed = Callable[[Sequence[str]], F32 | None]
# New records and the ids the same write updates → what to roll off (engine.lifecycle.capacity)
CapacityFn = Callable[[Sequence[MemoryRecord], Collection[str]], CapacityPlan]
"""Texts → unit vectors, or None when the model is not ready (the Jaccard path)."""
ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]
CommitFn = Callable[[int, Sequence["IngestResult"]], None]
"""Called after each chunk is written with the index of its first item and its results."""


@dataclass(frozen=True, slots=True)
class StageReport:
    """What one stage did, for the stepper.

    Attributes:
        stage: The stage.
        index: Its position (0-based) in :data:`STAGES`.
        data: The stage's data (JSON-compatible): see ``docs/ingest.md`` per stage.
        latency_ms: Time the stage took.
        detail: The same facts typed (:mod:`engine.ingest.stages`; :class:`FailedDetail` when
            the stage failed): what code reading a stage uses.
    """

    stage: Stage
    index: int
    data: Mapping[str, Any]
    latency_ms: float
    detail: StageDetail

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"stage": self.stage.value, "index": self.index, "data": dict(self.data),
                "latency_ms": round(self.latency_ms, 3)}


class _LazyData(Mapping[str, Any]):
    """A stage's wire-form data (:attr:`StageReport.data`), built on its first read.

    Batch ingest runs every stage of every memory, but only the stepper, the API and a test
    read a stage's ``data``, and a batch's reports are never handed out; building the
    candidates, decision and records as JSON for each memory cost about a tenth of the
    pipeline's own CPU (issue 24), so a batch's runs build it on first read. The builder
    reads only frozen values captured when the stage ran: the data is what it was then.
    """

    __slots__ = ("_build", "_data")

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build: Callable[[], dict[str, Any]] | None = build
        self._data: dict[str, Any] | None = None

    def _built(self) -> dict[str, Any]:
        if self._data is None:
            assert self._build is not None
            self._data = self._build()
            self._build = None
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


@dataclass(frozen=True, slots=True)
class IngestResult:
    """The outcome for one incoming memory.

    Attributes:
        action: inserted, updated, skipped, merged, deferred or error.
        reason: Why (:class:`~engine.ingest.kinds.Reason`).
        record: The stored record the outcome concerns after the write (the new record, the
            updated/merged target, the duplicate it was skipped against, the deferral target),
            or None.
        incoming_id: The id given to the incoming memory (its record id when inserted; its
            ``merged_from`` entry when merged).
        target_id: The existing record it was compared with, if any.
        similarity: Similarity to the target, if any.
        thresholds: Thresholds applied.
        conflicts: What the contradiction guard found.
        surprise: The surprise score (None when not computed).
        review_id: The review item of a deferral.
        semantic: True on the embedding path.
        events: Events emitted for this memory (those sampling kept).
        error: Message of an ``error`` outcome.
        error_code: The taxonomy code of an ``error`` outcome (``MEMORY_CAPACITY_EXCEEDED``,
            ``MEMORY_RETENTION_VIOLATION``, ...), so a caller can branch on it.
    """

    action: Action
    reason: Reason
    record: MemoryRecord | None
    incoming_id: str
    target_id: str | None = None
    similarity: float | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()
    surprise: SurpriseScore | None = None
    review_id: str | None = None
    semantic: bool = False
    events: tuple[Event, ...] = ()
    error: str | None = None
    error_code: str | None = None

    @property
    def record_id(self) -> str | None:
        """Id of :attr:`record`, if any."""
        return None if self.record is None else self.record.id

    def to_json(self) -> dict[str, Any]:
        """The ``ingest`` object of the CLI: action, reason, target_id, similarity and more."""
        return {
            "action": self.action.value, "reason": self.reason.value,
            "target_id": self.target_id,
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "id": self.record_id, "incoming_id": self.incoming_id,
            "review_id": self.review_id,
            "path": "embedding" if self.semantic else "jaccard",
            "surprise": None if self.surprise is None else round(self.surprise.surprise, 6),
            "conflicts": [c.to_json() for c in self.conflicts],
            "error": self.error,
            "error_code": self.error_code,
        }


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Outcome of a batch ingest.

    Attributes:
        results: Per-memory outcomes of the committed memories, in input order.
        total: How many memories were given.
        cancelled: True when the caller cancelled; the chunk in progress was not written.
    """

    results: tuple[IngestResult, ...]
    total: int
    cancelled: bool = False

    @property
    def committed(self) -> int:
        """Memories whose outcome was written."""
        return len(self.results)

    @property
    def counts(self) -> dict[str, int]:
        """Outcomes per action (every action present, zeros included)."""
        counts = {a.value: 0 for a in Action}
        for result in self.results:
            counts[result.action.value] += 1
        return counts


@dataclass(frozen=True, slots=True)
class RunWrites:
    """What the ``persist`` stage of one stepped run wrote: enough to take it back.

    Attributes:
        incoming_id: The run's incoming id.
        batch_id: The edit-history batch id of its writes.
        pairs: ``(before, after)`` of every record written (``before`` None: it created the
            record). Besides the run's own record this holds the stored records that got a
            symmetric ``related`` back-link.
        review_id: The review item a deferral queued, if any.
        aliases: ``(content_hash, record_id)`` merge aliases it added.
    """

    incoming_id: str
    batch_id: str
    pairs: tuple[tuple[MemoryRecord | None, MemoryRecord], ...]
    review_id: str | None = None
    aliases: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        """True when the run wrote nothing (a skip without a new source, a failure)."""
        return not self.pairs and self.review_id is None and not self.aliases


# -- the unit of work ---------------------------------------------------------------------------


@dataclass
class _QueuedEvent:
    kind: str
    fields: dict[str, Any]
    force: bool = False


class _WriteSet:
    """Records, edits, review items, aliases and events of one run or one batch chunk.

    :meth:`flush` writes records with one ``store.write`` (all or nothing), then the edit
    history, review items and aliases; :meth:`emit` then emits the queued events.
    """

    def __init__(self, pipeline: IngestPipeline, snapshot: ViewSnapshot | None,
                 lookup: ReviewLookup | None = None, *, simulated: bool = False,
                 batch_id: str | None = None) -> None:
        self.pipeline = pipeline
        self.simulated = simulated  # a dry run: staged like a batch, never flushed or emitted
        self.snapshot = snapshot  # what batch runs search (None: each run takes its own)
        self.lookup = lookup  # the chunk's aliases, rejections, pending reviews (batch only)
        self.overlay = BatchOverlay()
        # the edit history's batch id: an import's chunks share one, so it undoes as one step
        self.batch_id = batch_id or uuid.uuid4().hex
        self.writes: dict[str, MemoryRecord] = {}
        self.befores: dict[str, MemoryRecord | None] = {}
        self.vectors: dict[str, F32 | None] = {}
        self.actors: dict[str, str] = {}
        self.links: dict[str, list[RelatedLink]] = {}
        self.reviews: list[tuple[_Run, dict[str, Any]]] = []
        self.deferred_targets: list[_Run] = []  # batch deferrals whose target is read at flush
        self.aliases: list[tuple[str, str]] = []
        self.runs: list[_Run] = []

    def get(self, record_id: str) -> MemoryRecord:
        if record_id in self.writes:
            return self.writes[record_id]
        return self.pipeline.store.get(record_id)

    def stage(self, record: MemoryRecord, *, before: MemoryRecord | None,
              vector: F32 | None, actor: str) -> None:
        if record.id not in self.befores:
            self.befores[record.id] = before
        self.writes[record.id] = record
        if vector is not None or record.id not in self.vectors:
            self.vectors[record.id] = vector
        self.actors.setdefault(record.id, actor)
        self.overlay.put(record, vector, new=self.befores[record.id] is None)

    def link(self, record_id: str, link: RelatedLink) -> None:
        self.links.setdefault(record_id, []).append(link)

    def flush(self) -> None:
        """Write everything staged (records all-or-nothing); raises StoreUnavailable."""
        pipeline = self.pipeline
        store = pipeline.store
        top_k = pipeline.policy.dedup.related_top_k
        if self.deferred_targets:  # one read for the chunk's deferral targets
            ids = [run.target_id for run in self.deferred_targets]
            targets = {r.id: r for r in store.get_many(list(dict.fromkeys(ids)))}
            for run, target_id in zip(self.deferred_targets, ids, strict=True):
                run.before = targets[target_id]
        # symmetric related links (seed 001): back-links onto their targets
        missing = [i for i in self.links if i not in self.writes and i in store.view]
        fetched = {r.id: r for r in store.get_many(missing)} if missing else {}
        for record_id, links in self.links.items():
            base = self.writes.get(record_id) or fetched.get(record_id)
            if base is None:
                continue
            linked = add_related(base, links, top_k)
            if linked is not base:
                self.stage(linked, before=self.befores.get(record_id, base), vector=None,
                           actor="ingest")
        if self.writes:
            records = list(self.writes.values())
            matrix = np.zeros((len(records), store.view.dimension), dtype=np.float32)
            for i, record in enumerate(records):
                vector = self.vectors.get(record.id)
                before = self.befores.get(record.id)
                if vector is None and before is not None \
                        and before.content_hash == record.content_hash:
                    vector = store.view.vector(record.id)  # unchanged content keeps its vector
                if vector is not None:
                    matrix[i] = vector
            new = [r for r in records if self.befores[r.id] is None]
            # the episodic ring and strict caps (engine.lifecycle.capacity): raises before
            # anything of the chunk is written
            plan = pipeline.capacity(new, self.writes.keys()) \
                if pipeline.capacity is not None and new else CapacityPlan()
            store.write(records, matrix)
            created = [(None, r) for r in new]
            updated = [(self.befores[r.id], r) for r in records if self.befores[r.id] is not None]
            for op, pairs in (("create", created), ("update", updated)):
                if pairs:
                    pipeline.record_edits(op, pairs, "ingest", self.batch_id)
            if plan:
                rolled = roll_off(store, plan, pipeline.ring_max, pipeline.record_edits,
                                  self.batch_id)
                pipeline.events.emit_many(rolled, force=True)  # an audit: never sampled out
        items = pipeline.review.add_many([spec for _, spec in self.reviews])
        for (run, _), item in zip(self.reviews, items, strict=True):
            run.review_item = item
        pipeline.review.add_aliases(self.aliases)

    def emit(self) -> None:
        """Emit the events of every run of this unit in one ledger transaction."""
        batches = [run.event_items() for run in self.runs]
        emitted = self.pipeline.events.emit_many([item for batch in batches for item in batch])
        start = 0
        for run, batch in zip(self.runs, batches, strict=True):
            run.took(emitted[start:start + len(batch)])
            start += len(batch)


# -- one run ------------------------------------------------------------------------------------


class _Run:
    """The state of one incoming memory moving through the stages."""

    def __init__(self, pipeline: IngestPipeline, new: NewMemory, *, vector: F32 | None,
                 precomputed: bool, writes: _WriteSet | None, lazy_data: bool = False) -> None:
        self.pipeline = pipeline
        # a batch driver's run: its stage data is built only if read (see _LazyData)
        self.lazy_data = lazy_data
        self.new = new
        self.incoming_id = str(uuid.uuid4())
        self.batched = writes is not None
        # a dry run: stages into a write set that is never flushed, emits nothing
        self.simulated = writes is not None and writes.simulated
        self.writes = writes
        self.written: RunWrites | None = None  # what a stepped run's persist wrote
        self.vector = vector
        self.precomputed = precomputed
        self.index = 0
        self.reports: list[StageReport] = []
        self.queued: list[_QueuedEvent] = []
        self.emitted: list[Event] = []
        self.started = time.perf_counter()
        self.normalized = ""
        self.content_hash = ""
        self.semantic = False
        self.search: SearchResult | None = None
        self.surprise: SurpriseScore | None = None
        self.decision: Decision | None = None
        self.before: MemoryRecord | None = None
        self.after: MemoryRecord | None = None
        self.review_item: ReviewItem | None = None
        self.error: str | None = None
        self.error_code: str | None = None
        self.done = False

    # -- driving --------------------------------------------------------------------------

    @property
    def next_stage(self) -> Stage | None:
        return None if self.done else STAGES[self.index]

    def step(self) -> StageReport:
        if self.done:
            raise ValidationError("stage", None, "the run is finished; no stage is left")
        stage = STAGES[self.index]
        handler = getattr(self, "_" + stage.name.lower())
        began = time.perf_counter()
        detail: StageDetail
        try:
            data, detail = handler()
        except StoreUnavailable:
            self._fail(stage, "the store refused the write")
            raise
        except EngineError as exc:
            data, detail = self._fail(stage, str(exc), exc.code)
        report = StageReport(stage, self.index, data, (time.perf_counter() - began) * 1000.0,
                             detail)
        self.reports.append(report)
        self.index += 1
        if self.index >= len(STAGES) or self.error is not None:
            self.done = True
        return report

    def _fail(self, stage: Stage, message: str, code: str | None = None
              ) -> tuple[dict[str, Any], FailedDetail]:
        self.error = message
        self.error_code = code
        self.queued.append(_QueuedEvent(EventKind.ERROR, self._envelope(
            stage, decision_reason=Reason.FAILED.value,
            payload={"error": message, "incoming_id": self.incoming_id, "code": code})))
        if not self.batched:
            self.emit_events()
        elif self.writes is not None and self not in self.writes.runs:
            self.writes.runs.append(self)
        return {"error": message}, FailedDetail(message)

    def _data(self, build: Callable[[], dict[str, Any]]) -> Mapping[str, Any]:
        """A stage's wire-form data: built now for the stepper and the API, on first read in a
        batch (whose stage reports nobody reads unless a test does)."""
        return _LazyData(build) if self.lazy_data else build()

    def _envelope(self, stage: Stage, **fields: Any) -> dict[str, Any]:
        fields.setdefault("memory_hash", self.content_hash or None)
        fields.setdefault("source", self.new.source)
        fields.setdefault("agent_id", self.new.agent_id)
        fields["stage"] = stage.value
        return fields

    # -- stages -----------------------------------------------------------------------------

    def _start(self) -> tuple[dict[str, Any], StartDetail]:
        new = self.new
        data = {"incoming_id": self.incoming_id, "content": new.content,
                "agent_id": new.agent_id, "layer": new.layer.value,
                "privacy": new.privacy.value, "category": new.category.value,
                "source": new.source, "tier": new.source_tier.value,
                "confidence": new.confidence, "importance": new.importance}
        self.queued.append(_QueuedEvent(EventKind.INGEST_START, self._envelope(
            Stage.START, payload=dict(data))))
        return data, StartDetail(self.incoming_id, new)

    def _normalize(self) -> tuple[dict[str, Any], NormalizeDetail]:
        self.normalized = normalize(self.new.content)
        self.content_hash = self.new.content_hash
        return ({"normalized": self.normalized, "content_hash": self.content_hash},
                NormalizeDetail(self.normalized, self.content_hash))

    def _embed(self) -> tuple[dict[str, Any], EmbedDetail]:
        began = time.perf_counter()
        error = None
        called = False  # this stage ran the model itself (not a batch's chunk encode)
        if self.vector is None and not self.precomputed:
            try:
                vectors = self.pipeline.embed([self.new.content])
            except EngineError as exc:  # a failing model must not lose the memory
                vectors, error = None, str(exc)
            self.vector = None if vectors is None else vectors[0]
            called = self.vector is not None
        self.semantic = self.vector is not None
        latency = (time.perf_counter() - began) * 1000.0
        budget = self.pipeline.policy.embed_budget_ms
        # seed 001 timeout budget, reported (None: no model call was timed here)
        detail = EmbedDetail(
            semantic=self.semantic,
            model=self.pipeline.model_name() if self.semantic else None,
            precomputed=self.precomputed,
            dimension=None if self.vector is None else int(self.vector.shape[0]),
            latency_ms=latency, error=error, budget_ms=budget,
            over_budget=latency > budget if called else None)
        data = {"path": "embedding" if detail.semantic else "jaccard", "model": detail.model,
                "precomputed": detail.precomputed, "dimension": detail.dimension,
                "latency_ms": round(latency, 3), "error": error,
                "budget_ms": budget, "over_budget": detail.over_budget}
        self.queued.append(_QueuedEvent(EventKind.EMBED_REQUEST, self._envelope(
            Stage.EMBED, latency_ms=latency, decision_reason=data["path"],
            payload={k: v for k, v in data.items() if k != "latency_ms"})))
        return data, detail

    def _candidates(self) -> tuple[Mapping[str, Any], CandidatesDetail]:
        began = time.perf_counter()
        pipeline = self.pipeline
        writes = self.writes
        snapshot = writes.snapshot if writes is not None and writes.snapshot is not None \
            else pipeline.store.view.snapshot()
        lookup = writes.lookup if writes is not None else None
        if lookup is not None:
            aliases: Sequence[str] = lookup.aliases.get(self.content_hash, ())
            rejected: Collection[str] = lookup.rejected.get(self.content_hash, ())
        else:
            aliases = pipeline.review.aliases(self.content_hash)
            rejected = pipeline.review.rejected_targets(self.content_hash)
        self.search = pipeline.search.search(
            self.new, self.content_hash, self.vector, snapshot,
            overlay=writes.overlay if writes is not None else None,
            aliases=aliases, rejected=rejected)
        latency = (time.perf_counter() - began) * 1000.0
        search = self.search
        # seed 001 "ANN query < 25 ms", reported with the stage's data and event
        budget = pipeline.policy.search_budget_ms
        over = latency > budget

        def data() -> dict[str, Any]:
            return {**search.to_json(), "budget_ms": budget, "over_budget": over}

        best = search.exact.id if search.exact is not None else (
            search.candidates[0].id if search.candidates else None)
        best_sim = 1.0 if search.exact is not None else (
            search.candidates[0].similarity if search.candidates else None)
        # the event's part of the stage data, built from the search (the whole data is lazy)
        self.queued.append(_QueuedEvent(EventKind.CANDIDATE_MATCH, self._envelope(
            Stage.CANDIDATES, record_id=best, similarity=best_sim, latency_ms=latency,
            payload={"method": search.method,
                     "path": "embedding" if search.semantic else "jaccard",
                     "hash_hit": search.hash_hit,
                     "candidates": [c.to_json() for c in search.candidates[:5]],
                     "partition_size": search.partition_size,
                     "rejected": list(search.rejected), "budget_ms": budget,
                     "over_budget": over})))
        return self._data(data), CandidatesDetail(search, budget, over)

    def _decision(self) -> tuple[Mapping[str, Any], DecisionDetail]:
        search = self.search
        assert search is not None
        new = self.new
        self.surprise = surprise_score(
            category=new.category, max_cosine=search.max_cosine, max_jaccard=search.max_jaccard,
            same_category_count=search.same_category_count,
            partition_size=search.surprise_partition_size,
            exact_duplicate=search.hash_hit or search.duplicate_elsewhere)
        lookup = self.writes.lookup if self.writes is not None else None
        key = review_key(self.content_hash, new)
        pending: Collection[str]
        if lookup is not None:  # with the deferrals made earlier in this chunk
            pending = lookup.pending.get(key, ())
        else:
            pending = self.pipeline.review.pending_targets(key)
            if self.writes is not None:  # deferred earlier in this unit, not yet in the ledger
                pending |= {spec["target_id"] for _, spec in self.writes.reviews
                            if review_key(spec["content_hash"], spec["incoming"]) == key}
        self.decision = decide(
            content=new.content, confidence=new.confidence, tier=new.source_tier,
            category=new.category, exact=search.exact, candidates=search.candidates,
            semantic=search.semantic, surprise=self.surprise, policy=self.pipeline.policy,
            pending_targets=pending)
        decision, surprise = self.decision, self.surprise
        return (self._data(lambda: {"decision": decision.to_json(),
                                    "surprise": surprise.to_json()}),
                DecisionDetail(decision, surprise))

    def _apply(self) -> tuple[Mapping[str, Any], ApplyDetail]:
        decision, search, surprise = self.decision, self.search, self.surprise
        assert decision is not None
        assert search is not None
        assert surprise is not None
        pipeline = self.pipeline
        now = pipeline.clock.now()
        new = self.new
        entry = ProvenanceEntry(new.source, self.content_hash, now, new.source_tier,
                                new.confidence)
        self.before = self.after = None
        review: dict[str, Any] | None = None
        weight: float | None = None
        if decision.action is Action.INSERTED:
            importance = new.importance if new.importance is not None else surprise.importance
            record = MemoryRecord.create(
                new, now_ms=now, record_id=self.incoming_id, importance=importance,
                embedding_model=pipeline.model_name() if self.semantic else "")
            self.after = add_related(record, search.related, pipeline.policy.dedup.related_top_k)
        elif decision.action is Action.DEFERRED and decision.target_id is not None \
                and self.writes is not None and not self.writes.simulated \
                and decision.target_id not in self.writes.writes:
            # batch: the target is read with the chunk's others when the chunk is written
            self.writes.deferred_targets.append(self)
            review = self._review(decision)
        elif decision.target_id is not None and decision.action in (
                Action.UPDATED, Action.MERGED, Action.SKIPPED, Action.DEFERRED):
            self.before = self._get(decision.target_id)
            if decision.action is Action.UPDATED:
                assert decision.new_confidence is not None
                self.after = apply_exact_update(self.before, decision.new_confidence, entry,
                                                now_ms=now)
            elif decision.action is Action.MERGED:
                incoming = MemoryRecord.create(
                    new, now_ms=now, record_id=self.incoming_id,
                    importance=new.importance if new.importance is not None else 0.0,
                    embedding_model=pipeline.model_name() if self.semantic else "")
                weight = merge_weight(self.before, incoming, pipeline.policy)
                merged = merge_records(self.before, incoming, now_ms=now,
                                       policy=pipeline.policy)
                links = [link for link in search.related if link.id != self.before.id]
                self.after = add_related(merged, links, pipeline.policy.dedup.related_top_k)
            elif decision.action is Action.SKIPPED and decision.reason in (
                    Reason.EQUAL_CONFIDENCE, Reason.LOWER_CONFIDENCE):
                # DESIGN 2: a new source is still appended to provenance
                appended = add_provenance(self.before, entry)
                self.after = appended if appended is not self.before else None
            elif decision.action is Action.DEFERRED:
                review = self._review(decision)
        self._review_spec = review
        before, after = self.before, self.after

        def data() -> dict[str, Any]:
            return {"action": decision.action.value,
                    "before": None if before is None else before.to_json(),
                    "after": None if after is None else after.to_json(),
                    "merge_weight": weight,
                    "review": None if review is None else {
                        "reason": review["reason"], "target_id": review["target_id"],
                        "similarity": review["similarity"],
                        "conflicts": [c.to_json() for c in decision.conflicts]}}

        return (self._data(data),
                ApplyDetail(decision.action, before, after, weight,
                            None if review is None else review["target_id"]))

    @property
    def target_id(self) -> str:
        """The decision's target (a run that has one)."""
        assert self.decision is not None and self.decision.target_id is not None
        return self.decision.target_id

    def _review(self, decision: Decision) -> dict[str, Any]:
        """The review item to queue for a deferral (keys of :meth:`ReviewQueue.add`)."""
        return {"reason": decision.reason.value, "target_id": decision.target_id,
                "similarity": decision.similarity, "content_hash": self.content_hash,
                "incoming_id": self.incoming_id, "incoming": self.new,
                "vector": self.vector, "conflicts": decision.conflicts,
                "thresholds": decision.thresholds}

    def _get(self, record_id: str) -> MemoryRecord:
        if self.writes is not None:
            return self.writes.get(record_id)
        return self.pipeline.store.get(record_id)

    def _persist(self) -> tuple[dict[str, Any], PersistDetail]:
        pipeline = self.pipeline
        if self.batched:
            assert self.writes is not None
            self._stage_into(self.writes)
            staged = self._staged_ids()
            if self.simulated:  # what a real run would write: nothing is
                would_write = list(self.writes.writes)
                would_review = self._review_spec is not None
                return ({"written": [], "staged": staged, "batched": False, "simulated": True,
                         "would_write": would_write, "would_queue_review": would_review},
                        PersistDetail((), tuple(staged), False, None, simulated=True,
                                      would_write=tuple(would_write),
                                      would_queue_review=would_review))
            return ({"written": [], "staged": staged, "batched": True},
                    PersistDetail((), tuple(staged), True, None))
        with pipeline.write_lock:
            if self.before is not None and self.after is not None:
                current = pipeline.store.get(self.before.id)
                if current.version != self.before.version:
                    self._apply()  # the target changed while the run was paused: redo the merge
            writes = _WriteSet(pipeline, None)
            self._stage_into(writes)
            writes.flush()
        written, staged = list(writes.writes), self._staged_ids()
        review_id = None if self.review_item is None else self.review_item.id
        self.written = RunWrites(
            self.incoming_id, writes.batch_id,
            tuple((writes.befores.get(i), record) for i, record in writes.writes.items()),
            review_id, tuple(writes.aliases))
        return ({"written": written, "staged": staged, "batched": False,
                 "review_id": review_id},
                PersistDetail(tuple(written), tuple(staged), False, review_id))

    def _staged_ids(self) -> list[str]:
        return [] if self.after is None else [self.after.id]

    def _stage_into(self, writes: _WriteSet) -> None:
        decision, search = self.decision, self.search
        assert decision is not None
        assert search is not None
        if self not in writes.runs:
            writes.runs.append(self)
        if self.after is not None:
            # an insert, or a merge that kept the incoming text (seed 004), carries its vector
            vector = self.vector if decision.action is Action.INSERTED or (
                self.before is not None
                and self.after.content_hash != self.before.content_hash) else None
            writes.stage(self.after, before=self.before, vector=vector, actor=self.new.source)
            links_from = [link for link in self.after.related
                          if link.id != self.after.id]
            for link in links_from:
                writes.link(link.id, RelatedLink(self.after.id, link.similarity))
        if decision.action is Action.MERGED and decision.target_id is not None:
            writes.aliases.append((self.content_hash, decision.target_id))
            if self.before is not None and self.after is not None \
                    and self.after.content_hash != self.before.content_hash:
                # the stored text was replaced: it stays an exact duplicate of the record
                writes.aliases.append((self.before.content_hash, decision.target_id))
        if self._review_spec is not None:
            writes.reviews.append((self, self._review_spec))
            if writes.lookup is not None:
                writes.lookup.add_pending(review_key(self.content_hash, self.new),
                                          self._review_spec["target_id"])

    def _events(self) -> tuple[dict[str, Any], EventsDetail]:
        self._queue_outcome()
        kinds = [str(q.kind) for q in self.queued]
        if self.simulated:  # what a real run would emit: nothing is
            return ({"events": kinds, "emitted": 0, "batched": False, "simulated": True},
                    EventsDetail(tuple(kinds), 0, False))
        if not self.batched:
            self.emit_events()
        return ({"events": kinds, "emitted": len(self.emitted), "batched": self.batched},
                EventsDetail(tuple(kinds), len(self.emitted), self.batched))

    # -- outcome ------------------------------------------------------------------------------

    def _queue_outcome(self) -> None:
        decision, surprise = self.decision, self.surprise
        assert decision is not None
        total_ms = (time.perf_counter() - self.started) * 1000.0
        common = {
            "similarity": decision.similarity, "thresholds": dict(decision.thresholds),
            "decision_reason": decision.reason.value, "latency_ms": total_ms,
        }
        payload: dict[str, Any] = {
            "action": decision.action.value, "incoming_id": self.incoming_id,
            "content": self.new.content, "target_id": decision.target_id,
            "surprise": None if surprise is None else round(surprise.surprise, 6),
        }
        action = decision.action
        if action is Action.INSERTED and self.after is not None:
            record = self.after
            self.queued.append(_QueuedEvent(EventKind.RECORD_CREATED, self._envelope(
                Stage.PERSIST, record_id=record.id, **common,
                payload={**payload, "id": record.id, "layer": record.layer.value,
                         "importance": record.importance,
                         "related": [link.id for link in record.related]})))
        elif action in (Action.MERGED, Action.UPDATED) and self.after is not None:
            assert self.before is not None
            self.queued.append(_QueuedEvent(EventKind.MERGE_APPLIED, self._envelope(
                Stage.APPLY, record_id=self.after.id, **common,
                payload={**payload, "confidence_before": self.before.confidence,
                         "confidence_after": self.after.confidence,
                         # a merge keeps the target's state: a paused record stays paused
                         "target_state": self.after.state.value,
                         "unique_sources": self.after.unique_sources,
                         "merged_from": list(self.after.merged_from),
                         "related": [link.id for link in self.after.related]})))
            self.queued.append(_QueuedEvent(EventKind.RECORD_UPDATED, self._envelope(
                Stage.PERSIST, record_id=self.after.id, **common,
                payload={"action": action.value, "incoming_id": self.incoming_id,
                         "version": self.after.version})))
        elif action is Action.DEFERRED:
            self.queued.append(_QueuedEvent(EventKind.MERGE_DEFERRED, self._envelope(
                Stage.APPLY, record_id=decision.target_id, **common,
                payload={**payload, "conflicts": [c.to_json() for c in decision.conflicts]})))
        else:
            self.queued.append(_QueuedEvent(EventKind.INGEST_SKIPPED, self._envelope(
                Stage.DECISION, record_id=decision.target_id, **common, payload=payload)))

    def event_items(self) -> list[tuple[str, dict[str, Any]]]:
        """The queued events as ``(kind, fields)`` for :meth:`EventBus.emit_many`."""
        review_id = None if self.review_item is None else self.review_item.id
        items: list[tuple[str, dict[str, Any]]] = []
        for queued in self.queued:
            fields = dict(queued.fields)
            if review_id is not None and queued.kind == EventKind.MERGE_DEFERRED:
                fields["payload"] = {**fields.get("payload", {}), "review_id": review_id}
            if fields.get("memory_hash") is None:
                fields["memory_hash"] = self.content_hash or None
            items.append((str(queued.kind), fields))
        return items

    def took(self, events: Sequence[Event | None]) -> None:
        """Record what :meth:`EventBus.emit_many` returned for :meth:`event_items`."""
        self.emitted.extend(e for e in events if e is not None)
        self.queued = []

    def emit_events(self) -> None:
        """Emit the queued events in one ledger transaction."""
        self.took(self.pipeline.events.emit_many(self.event_items()))

    def result(self) -> IngestResult:
        if self.error is not None:
            return IngestResult(Action.ERROR, Reason.FAILED, None, self.incoming_id,
                                semantic=self.semantic, events=tuple(self.emitted),
                                error=self.error, error_code=self.error_code)
        decision = self.decision
        assert decision is not None
        record = self.after if self.after is not None else self.before
        return IngestResult(
            action=decision.action, reason=decision.reason, record=record,
            incoming_id=self.incoming_id, target_id=decision.target_id,
            similarity=decision.similarity, thresholds=decision.thresholds,
            conflicts=decision.conflicts, surprise=self.surprise,
            review_id=None if self.review_item is None else self.review_item.id,
            semantic=self.semantic, events=tuple(self.emitted))

    _review_spec: dict[str, Any] | None = None


# -- drivers ------------------------------------------------------------------------------------


class _ChunkEncoder:
    """Embeddings of a batch's chunks, encoded one chunk ahead on a helper thread.

    ``vectors(i)`` returns chunk ``i``'s embeddings (None when the model is not ready or
    failed: its memories then embed one by one and report the error) and, with ``overlap``,
    starts encoding chunk ``i + 1`` before returning, so the model works while the caller
    decides and writes chunk ``i``. After a failed chunk nothing is encoded ahead, so the model
    is never used by two threads of this batch at once. :meth:`close` waits for the helper.
    """

    def __init__(self, pipeline: IngestPipeline, chunks: Sequence[Sequence[NewMemory]], *,
                 overlap: bool) -> None:
        self._embed = pipeline.embed
        self._chunks = chunks
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mnemoscope-ingest-encode") \
            if overlap and len(chunks) > 1 else None
        self._ahead: tuple[int, Future[F32 | None]] | None = None

    def _encode(self, number: int) -> F32 | None:
        try:
            return self._embed([item.content for item in self._chunks[number]])
        except EngineError:
            return None  # per-item embedding reports the failure

    def vectors(self, number: int) -> F32 | None:
        """Chunk ``number``'s embeddings (see the class docstring)."""
        if self._ahead is not None and self._ahead[0] == number:
            found = self._ahead[1].result()
        else:
            found = self._encode(number)
        self._ahead = None
        if self._pool is not None and found is not None and number + 1 < len(self._chunks):
            self._ahead = (number + 1, self._pool.submit(self._encode, number + 1))
        return found

    def close(self) -> None:
        """Wait for the helper thread (an encode in flight finishes; its result is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class SteppedRun:
    """The stepped driver: one incoming memory, advanced a stage at a time.

    Build it with :meth:`IngestPipeline.stepped` (or ``MemoryEngine.stepped``). Each
    :meth:`step` runs the next stage and returns its :class:`StageReport`; :attr:`state` shows
    everything known so far. Safe to step from different worker threads one call at a time
    (the GUI's task runner): no lock is held between steps; ``persist`` takes the engine's write
    lock and redoes the merge if the target changed while the run was paused.
    """

    def __init__(self, run: _Run, *, sleep: Callable[[float], None]) -> None:
        self._run = run
        self._sleep = sleep
        self._lock = threading.Lock()

    @property
    def stages(self) -> tuple[Stage, ...]:
        """All stages, in order."""
        return STAGES

    @property
    def next_stage(self) -> Stage | None:
        """The stage :meth:`step` will run, or None when finished."""
        return self._run.next_stage

    @property
    def done(self) -> bool:
        """True when every stage ran (or a stage failed)."""
        return self._run.done

    @property
    def reports(self) -> tuple[StageReport, ...]:
        """Reports of the stages run so far."""
        return tuple(self._run.reports)

    @property
    def incoming_id(self) -> str:
        """The id given to the incoming memory."""
        return self._run.incoming_id

    @property
    def simulated(self) -> bool:
        """True for a dry run: every stage, nothing written or emitted."""
        return self._run.simulated

    @property
    def written(self) -> RunWrites | None:
        """What ``persist`` wrote (None before it ran, and always for a simulated run)."""
        return self._run.written

    @property
    def state(self) -> dict[str, Any]:
        """Everything known so far, merged from the stage reports (JSON-compatible)."""
        merged: dict[str, Any] = {"incoming_id": self._run.incoming_id,
                                  "next_stage": None if self.next_stage is None
                                  else self.next_stage.value}
        for report in self._run.reports:
            merged[report.stage.value] = dict(report.data)
        return merged

    def step(self) -> StageReport:
        """Run the next stage and return what it did.

        Raises:
            ValidationError: the run is already finished.
            StoreUnavailable: the store refused the write (nothing was written).
        """
        with self._lock:
            return self._run.step()

    def run(self, *, pace_ms: float = 0.0,
            sleep: Callable[[float], None] | None = None) -> IngestResult:
        """Run the remaining stages, sleeping ``pace_ms`` between them (slow motion).

        Args:
            pace_ms: Delay between stages (the event bus's ``slow_mo_ms`` is the usual value).
            sleep: Replaces ``time.sleep`` (tests).
        """
        pause = sleep or self._sleep
        while not self.done:
            self.step()
            if pace_ms > 0 and not self.done:
                pause(pace_ms / 1000.0)
        return self.result

    @property
    def result(self) -> IngestResult:
        """The outcome.

        Raises:
            ValidationError: stages are left to run.
        """
        if not self.done:
            raise ValidationError("stage", self.next_stage, "the run is not finished")
        return self._run.result()


class IngestPipeline:
    """Ingest, merge and review for one store (built once by the engine).

    Args:
        store: The record store.
        events: The event bus.
        review: The review queue.
        clock: Time source.
        policy: Thresholds and merge weights.
        embed: Texts → unit vectors, or None while the model is not ready.
        model_name: Name of the embedding model (stored with vectors).
        record_edits: Writes the edit history.
        write_lock: The engine's write lock.
        sleep: Used for slow-motion pacing (tests pass a fake).
        capacity: Checks the new records of each write against the episodic ring and strict
            retention caps (:func:`engine.lifecycle.capacity.plan_capacity`); None: no limits.
        ring_max: The episodic ring size ``capacity`` enforces (reported in events).
    """

    def __init__(self, *, store: MemoryStore, events: EventBus, review: ReviewQueue,
                 clock: Clock, policy: IngestPolicy, embed: Embed,
                 model_name: Callable[[], str], record_edits: EditRecorder,
                 write_lock: threading.RLock | Any,
                 sleep: Callable[[float], None] = time.sleep,
                 capacity: CapacityFn | None = None, ring_max: int = 0) -> None:
        self.store = store
        self.events = events
        self.review = review
        self.clock = clock
        self.policy = policy
        self.embed = embed
        self.model_name = model_name
        self.record_edits = record_edits
        self.write_lock = write_lock
        self.capacity = capacity
        self.ring_max = ring_max
        self.search = CandidateSearch(store, policy)
        self._sleep = sleep

    # -- single ------------------------------------------------------------------------------

    def stepped(self, new: NewMemory, *, vector: F32 | None = None,
                simulate: bool = False) -> SteppedRun:
        """A run of ``new`` that the caller advances stage by stage.

        Args:
            vector: A precomputed embedding (else the ``embed`` stage runs the model).
            simulate: A dry run: the same stages and numbers as a real run (the same
                candidate search, thresholds and merge rules, the target read from the store),
                but ``persist`` and ``events`` only report what they would write and emit.
        """
        writes = _WriteSet(self, None, simulated=True) if simulate else None
        run = _Run(self, new, vector=vector, precomputed=vector is not None, writes=writes)
        return SteppedRun(run, sleep=self._sleep)

    def ingest(self, new: NewMemory, *, vector: F32 | None = None) -> IngestResult:
        """The headless driver: every stage back to back, under the write lock.

        With the event bus's ``slow_mo_ms`` above 0 (seed 001 slow-mo, ``EngineConfig``) the
        stages run through the stepped driver instead, pausing that long between them, so a
        headless run can be watched on the event stream like the GUI's stepper: the same
        stages, and no lock held while paused (``persist`` redoes the merge if the target
        changed meanwhile). Batch ingest and imports always run at full speed: pausing every
        stage of thousands of memories would hold their chunk's write lock for hours.

        Raises:
            StoreReadOnly, StoreUnavailable: the store refused the write (nothing written).
        """
        pace = self.events.slow_mo_ms
        if pace > 0:
            return self.stepped(new, vector=vector).run(pace_ms=pace)
        with self.write_lock:
            run = _Run(self, new, vector=vector, precomputed=vector is not None, writes=None)
            while not run.done:
                run.step()
        return run.result()

    # -- batch -------------------------------------------------------------------------------

    def ingest_batch(self, items: Sequence[NewMemory], *, progress: ProgressFn | None = None,
                     cancelled: CancelFn | None = None,
                     vectors: F32 | None = None, batch_id: str | None = None,
                     on_commit: CommitFn | None = None) -> BatchResult:
        """Ingest many memories, embedding and writing ``policy.batch_size`` at a time.

        Each memory goes through the same stages as :meth:`ingest`; later memories see earlier
        ones of the same chunk. A chunk is written all at once (records, edit history, review
        items), then its events are emitted. With ``policy.overlap_encode`` the next chunk is
        encoded on a helper thread while this one is decided and written (the model releases
        the GIL while it encodes); the helper is joined before this returns.

        Args:
            progress: Called with (processed, total) after each memory.
            cancelled: Polled before each memory; when it returns True the chunk in progress
                is dropped (nothing of it is written) and the committed results are returned.
            vectors: Precomputed embeddings, one row per item (benchmarks, the eval).
            batch_id: The edit-history batch id of every chunk (an import's id, so the import
                undoes as one step); default: one per chunk.
            on_commit: Called after each chunk is written (and its events emitted) with the
                index of its first item and its results, so a caller that fails or is killed
                later has already reported what is committed (``ingest --stream``).

        Raises:
            StoreReadOnly, StoreUnavailable: a chunk could not be written; earlier chunks stay
                (each was passed to ``on_commit``; a ``StoreUnavailable`` says how many
                memories they hold in its message and ``committed``, and that a re-run of the
                same input resumes).
        """
        size = self.policy.batch_size
        chunks = [items[start:start + size] for start in range(0, len(items), size)]
        with fewer_collections():  # fewer GC passes over the batch's garbage (engine/collector.py)
            return self._run_chunks(chunks, len(items), vectors, progress=progress,
                                    cancelled=cancelled, batch_id=batch_id,
                                    on_commit=on_commit)

    def _run_chunks(self, chunks: Sequence[Sequence[NewMemory]], total: int,
                    vectors: F32 | None, *, progress: ProgressFn | None,
                    cancelled: CancelFn | None, batch_id: str | None,
                    on_commit: CommitFn | None) -> BatchResult:
        results: list[IngestResult] = []
        size = self.policy.batch_size
        encoder = None if vectors is not None else _ChunkEncoder(
            self, chunks, overlap=self.policy.overlap_encode)
        try:
            for number, chunk in enumerate(chunks):
                start = number * size
                if cancelled is not None and cancelled():
                    return BatchResult(tuple(results), total, cancelled=True)
                chunk_vectors = vectors[start:start + size] if vectors is not None else \
                    encoder.vectors(number) if encoder is not None else None
                try:
                    runs = self._decide_chunk(chunk, chunk_vectors, start, total,
                                              progress=progress, cancelled=cancelled,
                                              batch_id=batch_id)
                except StoreUnavailable as exc:
                    if not isinstance(exc, StoreReadOnly):  # read-only: nothing could commit
                        exc.note_committed(len(results), total)
                    raise
                if runs is None:
                    return BatchResult(tuple(results), total, cancelled=True)
                committed = [run.result() for run in runs]
                results.extend(committed)
                if on_commit is not None:
                    on_commit(start, committed)
        finally:
            if encoder is not None:
                encoder.close()
        return BatchResult(tuple(results), total)

    def _decide_chunk(self, chunk: Sequence[NewMemory], chunk_vectors: F32 | None, start: int,
                      total: int, *, progress: ProgressFn | None, cancelled: CancelFn | None,
                      batch_id: str | None = None) -> list[_Run] | None:
        """Run one chunk's memories through the stages and write them; None when cancelled
        (nothing of the chunk written)."""
        with self.write_lock:
            writes = _WriteSet(self, self.store.view.snapshot(),
                               self.review.lookup([item.content_hash for item in chunk]),
                               batch_id=batch_id)
            runs = self._run_items(chunk, chunk_vectors, writes, start, total,
                                   progress=progress, cancelled=cancelled)
            if runs is None:
                return None
            writes.flush()
        writes.emit()
        return runs

    def _run_items(self, items: Sequence[NewMemory], vectors: F32 | None, writes: _WriteSet,
                   start: int, total: int, *, progress: ProgressFn | None,
                   cancelled: CancelFn | None) -> list[_Run] | None:
        """Every stage of each item, staged into ``writes``; None when cancelled."""
        runs: list[_Run] = []
        for offset, item in enumerate(items):
            if cancelled is not None and cancelled():
                return None
            vector = None if vectors is None else vectors[offset]
            run = _Run(self, item, vector=vector, precomputed=vectors is not None,
                       writes=writes, lazy_data=True)
            while not run.done:
                run.step()
            runs.append(run)
            if progress is not None:
                progress(start + offset + 1, total)
        return runs

    def simulate_batch(self, items: Sequence[NewMemory], *, progress: ProgressFn | None = None,
                       cancelled: CancelFn | None = None) -> BatchResult:
        """What :meth:`ingest_batch` would decide for ``items``, with nothing written.

        Every stage runs with the same numbers (embeddings, candidates, thresholds, merge
        rules); later items see what earlier ones would have stored or merged, across chunks
        too. No record, edit, review item, alias or event is written, so a preview can be
        shown before the user confirms. Records an insert would create are not in the store:
        their ids exist only in the result.
        """
        size = self.policy.batch_size
        chunks = [items[begin:begin + size] for begin in range(0, len(items), size)]
        writes = _WriteSet(self, self.store.view.snapshot(),
                           self.review.lookup([item.content_hash for item in items]),
                           simulated=True)
        encoder = _ChunkEncoder(self, chunks, overlap=self.policy.overlap_encode)
        results: list[IngestResult] = []
        try:
            for number, chunk in enumerate(chunks):
                runs = self._run_items(chunk, encoder.vectors(number), writes, number * size,
                                       len(items), progress=progress, cancelled=cancelled)
                if runs is None:
                    return BatchResult(tuple(results), len(items), cancelled=True)
                results.extend(run.result() for run in runs)
        finally:
            encoder.close()
        return BatchResult(tuple(results), len(items))

    # -- review ------------------------------------------------------------------------------

    def approve(self, review_id: str) -> IngestResult:
        """Apply a deferred merge (idempotent: approving twice returns the same record).

        Raises:
            RecordNotFound: no such item, or its target record was deleted (the item stays
                pending; reject it to keep the memory as a record of its own).
            ValidationError: the item was already rejected.
        """
        with self.write_lock:
            item = self.review.get(review_id)
            if item.status is ReviewStatus.REJECTED:
                raise ValidationError("review", review_id, "was already rejected")
            if item.status is ReviewStatus.APPROVED:
                return self._resolved(item, Action.MERGED, Reason.REVIEW_APPROVED)
            target = self.store.get(item.target_id)
            now = self.clock.now()
            # a consolidation deferral's incoming memory is a stored record: merged, then deleted
            stored = self.store.get(item.incoming_id) if item.incoming_id in self.store.view \
                else None
            if stored is not None:
                incoming = stored
                vector = self.store.view.vector(stored.id, content_hash=stored.content_hash)
            else:
                vector = self.review.vector(review_id)
                incoming = MemoryRecord.create(
                    item.incoming, now_ms=now, record_id=item.incoming_id,
                    importance=item.incoming.importance if item.incoming.importance is not None
                    else 0.0, embedding_model=self.model_name() if vector is not None else "")
            after = merge_records(target, incoming, now_ms=now, policy=self.policy)
            swapped = after.content_hash != target.content_hash  # seed 004: incoming text kept
            writes = _WriteSet(self, None)
            writes.stage(after, before=target, vector=vector if swapped else None,
                         actor="review")
            writes.aliases.append((item.content_hash, target.id))
            if swapped:
                writes.aliases.append((target.content_hash, target.id))
            writes.flush()
            if stored is not None:
                self.store.delete([stored.id])
                self.record_edits("delete", [(stored, None)], "review", writes.batch_id)
            self.review.resolve(review_id, ReviewStatus.APPROVED, target.id)
        events = self._review_events(EventKind.REVIEW_APPROVED, item, after, target)
        return IngestResult(Action.MERGED, Reason.REVIEW_APPROVED, after, item.incoming_id,
                            item.target_id, item.similarity, item.thresholds, item.conflicts,
                            review_id=item.id, semantic=True, events=events)

    def reject(self, review_id: str) -> IngestResult:
        """Keep both memories: store the incoming one as its own record, and remember the pair
        so it is not asked again (idempotent).

        Raises:
            RecordNotFound: no such item.
            ValidationError: the item was already approved.
        """
        with self.write_lock:
            item = self.review.get(review_id)
            if item.status is ReviewStatus.APPROVED:
                raise ValidationError("review", review_id, "was already approved")
            if item.status is ReviewStatus.REJECTED:
                return self._resolved(item, Action.INSERTED, Reason.REVIEW_REJECTED)
            if item.incoming_id in self.store.view:
                # a consolidation deferral: both memories are stored already; keep both and
                # remember the pair
                self.review.resolve(review_id, ReviewStatus.REJECTED, item.incoming_id)
                kept = self.store.get(item.incoming_id)
                events = self._review_events(EventKind.REVIEW_REJECTED, item, kept, None,
                                             audit_only=True)
                return IngestResult(Action.SKIPPED, Reason.REVIEW_REJECTED, kept,
                                    item.incoming_id, item.target_id, item.similarity,
                                    item.thresholds, item.conflicts, review_id=item.id,
                                    events=events)
            vector = self.review.vector(review_id)
            snapshot = self.store.view.snapshot()
            search = self.search.search(item.incoming, item.content_hash, vector, snapshot)
            surprise = surprise_score(
                category=item.incoming.category, max_cosine=search.max_cosine,
                max_jaccard=search.max_jaccard, same_category_count=search.same_category_count,
                partition_size=search.surprise_partition_size)
            now = self.clock.now()
            importance = item.incoming.importance if item.incoming.importance is not None \
                else surprise.importance
            record = MemoryRecord.create(
                item.incoming, now_ms=now, record_id=item.incoming_id, importance=importance,
                embedding_model=self.model_name() if vector is not None else "")
            links = list(search.related)
            if item.target_id in self.store.view and all(link.id != item.target_id
                                                         for link in links):
                links.append(RelatedLink(item.target_id, item.similarity or 0.0))
            record = add_related(record, links, self.policy.dedup.related_top_k)
            writes = _WriteSet(self, snapshot)
            writes.stage(record, before=None, vector=vector, actor="review")
            for link in record.related:
                writes.link(link.id, RelatedLink(record.id, link.similarity))
            writes.flush()
            self.review.resolve(review_id, ReviewStatus.REJECTED, record.id)
        events = self._review_events(EventKind.REVIEW_REJECTED, item, record, None)
        return IngestResult(Action.INSERTED, Reason.REVIEW_REJECTED, record, item.incoming_id,
                            item.target_id, item.similarity, item.thresholds, item.conflicts,
                            review_id=item.id, semantic=vector is not None, events=events)

    def _resolved(self, item: ReviewItem, action: Action, reason: Reason) -> IngestResult:
        record: MemoryRecord | None = None
        if item.result_id is not None:
            try:
                record = self.store.get(item.result_id)
            except RecordNotFound:
                record = None
        return IngestResult(action, reason, record, item.incoming_id, item.target_id,
                            item.similarity, item.thresholds, item.conflicts, review_id=item.id)

    def _review_events(self, kind: EventKind, item: ReviewItem, after: MemoryRecord,
                       before: MemoryRecord | None, *,
                       audit_only: bool = False) -> tuple[Event, ...]:
        """The decision's audit event, then (unless ``audit_only``: nothing was written) the
        event of the write that followed."""
        emitted: list[Event] = []
        reason = (Reason.REVIEW_APPROVED if kind is EventKind.REVIEW_APPROVED
                  else Reason.REVIEW_REJECTED).value
        payload = {"review_id": item.id, "incoming_id": item.incoming_id,
                   "target_id": item.target_id, "content": item.incoming.content,
                   "result_id": after.id}
        # A person's decision is an audit event: sampling never drops it.
        steps: list[tuple[EventKind, str, dict[str, Any]]] = [(kind, item.target_id, {})]
        if not audit_only:
            steps.append((
                EventKind.MERGE_APPLIED if before is not None else EventKind.RECORD_CREATED,
                after.id, {"action": "merged" if before is not None else "inserted",
                           "layer": after.layer.value, "importance": after.importance,
                           "target_state": after.state.value}))
        for event_kind, record_id, extra in steps:
            event = self.events.emit(
                str(event_kind), record_id=record_id, memory_hash=item.content_hash,
                source=item.incoming.source, agent_id=item.incoming.agent_id,
                similarity=item.similarity, thresholds=dict(item.thresholds),
                decision_reason=reason, stage=Stage.APPLY.value, payload={**payload, **extra},
                force=True)
            if event is not None:
                emitted.append(event)
        return tuple(emitted)
