"""Mnemoscope's memory engine: records in Chroma, ingest/merge, retrieval, lifecycle.

This package is the engine's one public door: agents, the CLI, the desktop app and the MCP
server import what they use from here (``__all__``). Pure Python + numpy; no Qt anywhere
below it.

Open a store, add memories, retrieve, review and manage them::

    import engine

    # Pass embedder=engine.SentenceTransformerEmbedder() for semantic similarity; without a
    # model the engine compares words (token Jaccard) and says so.
    try:
        memory = engine.MemoryEngine.open(engine.StoreSpec("~/agent-memory"))
    except engine.StoreLocked as exc:          # another process holds the store: says which
        raise SystemExit(str(exc)) from exc
    try:
        result = memory.ingest(engine.NewMemory(content="Ana prefers tea to coffee",
                                                agent_id="assistant"))
        print(result.action, result.reason)    # inserted / merged / deferred / skipped ...
        bundle = memory.retrieve(engine.RetrievalRequest(max_tokens=500,
                                                         query="what does Ana drink?",
                                                         agent_id="assistant"))
        for record in bundle.records:
            print(record.id, record.content)
        for item in memory.review_queue():     # merges the engine was unsure of
            memory.approve_review(item.id)
        memory.expire()                        # lifecycle: TTL expiry (also prune, compact)
    finally:
        memory.close()                         # releases the store's lock

Every error the engine raises is an :class:`EngineError` (the tree is in
:mod:`engine.errors`): what the environment did (:class:`StoreLocked`,
:class:`StoreUnavailable`, ...) and bad input (:class:`ValidationError` naming the field).

What is here, by task:

* opening a store: :class:`MemoryEngine` (``open``, ``close``), :class:`StoreSpec`,
  :class:`EngineConfig` / :func:`engine_config_from_env`, :class:`MemoryConfig`,
  :class:`DedupConfig`, :class:`ModelSpec` and :class:`SentenceTransformerEmbedder`;
  :func:`list_collections` for what a location holds;
* records: :class:`NewMemory` in, :class:`MemoryRecord` out, their enums, :func:`content_hash`;
* add and ingest: ``MemoryEngine.add`` / ``ingest`` / ``ingest_batch`` / ``import_jsonl``
  (:class:`IngestResult`, :class:`ImportReport`, :class:`IngestPolicy`), stepping the pipeline
  (:class:`SteppedRun`, :class:`StageReport` with a typed ``detail`` per stage:
  :class:`StartDetail` ... :class:`EventsDetail`), :func:`threshold_what_if`;
* retrieve: :class:`RetrievalRequest` → :class:`RetrievedBundle` (with
  :class:`RetrievalDiagnostics`; :func:`inspect_retrieval` names the candidates);
* list, get, update, delete: ``MemoryEngine.list_rows`` / ``get`` / ``update`` / ``delete``
  with :class:`RecordQuery`, :class:`RecordRow`, :class:`RowPage`;
* review: ``MemoryEngine.review_queue`` / ``approve_review`` / ``reject_review``
  (:class:`ReviewItem`);
* consolidation: ``MemoryEngine.consolidate`` (``dry_run=True`` plans) and
  ``apply_consolidation`` (chosen steps of a plan) (:class:`ConsolidationReport`,
  :class:`ConsolidationStep`);
* lifecycle: ``MemoryEngine.expire`` / ``prune`` / ``enforce_retention`` / ``compact``
  (:class:`LifecycleReport`, :class:`PruneMode`), a record's story (:func:`record_fate`);
* events: :class:`Event`, :class:`EventBus` (``MemoryEngine.events``), :class:`EventFilter`,
  :class:`EventKind` (the ingest pipeline's kinds);
* reading for a browser: :class:`MemoryReader`, :class:`LocalReader` (in process) and
  :class:`RemoteReader` (an agent's ``serve``), :func:`map_points`;
* errors: :class:`EngineError` and its tree (drawn in :mod:`engine.errors`).

Declared sub-APIs (import these modules directly; everything else under ``engine`` is
internal and an import-linter contract keeps ``ui`` and ``app`` out of it):

* :mod:`engine.errors` — the exception tree;
* :mod:`engine.records` — record types, timestamps and text checks;
* :mod:`engine.llm` — the LLM gateway, providers, settings and seed 000's algorithms;
* :mod:`engine.tasks` — task workspaces (cards, graph, scenes, search);
* :mod:`engine.introspection` — the read-only HTTP API server and the remote reader;
* :mod:`engine.bench` — the benchmark runner behind ``mnemoscope bench``.

Importing ``engine`` is cheap: the names above that need numpy, the store or the pipeline are
imported on first use (module ``__getattr__``), and torch, sentence-transformers and chromadb
only by the code that needs them, in the worker that runs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine.clock import RNG, Clock, DeterministicClock, DeterministicRNG, SystemClock, SystemRNG
from engine.config import DedupConfig, MemoryConfig, RetentionPolicy
from engine.errors import (
    Cancelled,
    ConfigInvalid,
    CycleDetected,
    EditConflict,
    EmbeddingFailed,
    EmbeddingUnavailable,
    EngineError,
    InputFormatError,
    RecordNotFound,
    SchemaMismatch,
    StoreLocked,
    StoreReadOnly,
    StoreTimeout,
    StoreUnavailable,
    ValidationError,
)
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    ProvenanceEntry,
    RecordState,
    RelatedLink,
    TrustTier,
)
from engine.text import content_hash, normalize

if TYPE_CHECKING:
    from engine.browse import Facets, LinkedRecord, RecordDetail, SimilarRecords, similar_records
    from engine.config import (
        EngineConfig,
        RetrievalConfig,
        engine_config_from_env,
        memory_config_from_env,
    )
    from engine.embedding import (
        EmbedBackend,
        Embedder,
        EmbedderState,
        EmbedderStatus,
        ModelSpec,
        SentenceTransformerEmbedder,
    )
    from engine.events import Event, EventBus, EventFilter
    from engine.exits import ExitPolicy, Masker, Masking, RedactingLogFilter
    from engine.fate import DEFAULT_MASS_LIMIT, FateStep, RecordFate, mass_retirements, record_fate
    from engine.ingest import (
        STAGES,
        ImportReport,
        ImportStopped,
        IngestPolicy,
        IngestResult,
        LineOutcome,
        ReviewItem,
        Stage,
        StageReport,
        SteppedRun,
    )
    from engine.ingest.consolidate import ConsolidationReport, ConsolidationStep
    from engine.ingest.conversations import ConversationFormat, read_conversation
    from engine.ingest.evaluation import evaluate_dedup, read_sts
    from engine.ingest.importer import LineFn, SalienceCut
    from engine.ingest.imports import ImportEntry, UndoPlan
    from engine.ingest.kinds import Action, EventKind
    from engine.ingest.pipeline import RunWrites
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
    from engine.inspection import (
        MapPoints,
        RetrievalInspection,
        inspect_retrieval,
        map_points,
    )
    from engine.introspection.remote import RemoteReader
    from engine.layers import PatternDetail, PatternHistoryPoint, SocialSummary, SpatialHit
    from engine.ledger import LEDGER_FILENAME, Ledger
    from engine.lifecycle import CompactionReport, LifecycleReport, PruneMode, SummarizationTask
    from engine.locomo import SPLITS, evaluate_locomo
    from engine.memory_engine import (
        CancelFn,
        EditEntry,
        MemoryEngine,
        ProgressFn,
        RedactionHit,
        StoreStats,
    )
    from engine.projection import Projection, umap_available
    from engine.query import (
        ALL_STATES,
        SHOWN_STATES,
        RecordQuery,
        RecordRow,
        RowPage,
        SortKey,
        parse_states,
    )
    from engine.reader import EventFeed, LocalReader, MemoryReader
    from engine.redaction import Redactor, placeholder_for, redact_text
    from engine.retrieval import (
        COMPONENTS,
        DropReason,
        PressureState,
        Purpose,
        RetrievalDiagnostics,
        RetrievalRequest,
        RetrievedBundle,
        ScoringWeights,
        Strategy,
    )
    from engine.scheduler import LifecycleRun, LifecycleScheduler
    from engine.store import (
        DEFAULT_COLLECTION,
        DEFAULT_CONNECT_TIMEOUT_S,
        DEFAULT_READ_TIMEOUT_S,
        CollectionInfo,
        StoreSpec,
        list_collections,
    )
    from engine.store.foreign import (
        MAPPED_FIELDS,
        FieldMapping,
        ForeignInfo,
        ForeignLayout,
        ForeignSample,
    )
    from engine.whatif import PairChange, WhatIf, threshold_what_if

# Names imported on first use, by the module that defines them: keeps ``import engine`` from
# loading numpy, the store, the pipeline and the retriever (tests/engine/test_public_api.py).
_LAZY: dict[str, str] = {
    "ALL_STATES": "engine.query",
    "RunWrites": "engine.ingest.pipeline",
    "DropReason": "engine.retrieval",
    "ForeignLayout": "engine.store.foreign",
    "ForeignSample": "engine.store.foreign",
    "MAPPED_FIELDS": "engine.store.foreign",
    "Masker": "engine.exits",
    "Masking": "engine.exits",
    "LifecycleRun": "engine.scheduler",
    "LifecycleScheduler": "engine.scheduler",
    "Action": "engine.ingest.kinds",
    "EventKind": "engine.ingest.kinds",
    "ImportEntry": "engine.ingest.imports",
    "UndoPlan": "engine.ingest.imports",
    "read_conversation": "engine.ingest.conversations",
    **dict.fromkeys(("Facets", "LinkedRecord", "RecordDetail", "SimilarRecords",
                     "similar_records"), "engine.browse"),
    **dict.fromkeys(("EngineConfig", "RetrievalConfig", "engine_config_from_env",
                     "memory_config_from_env"), "engine.config"),
    **dict.fromkeys(("EmbedBackend", "Embedder", "EmbedderState", "EmbedderStatus", "ModelSpec",
                     "SentenceTransformerEmbedder"), "engine.embedding"),
    **dict.fromkeys(("Event", "EventBus", "EventFilter"), "engine.events"),
    **dict.fromkeys(("ExitPolicy", "RedactingLogFilter"), "engine.exits"),
    **dict.fromkeys(("DEFAULT_MASS_LIMIT", "FateStep", "RecordFate", "mass_retirements",
                     "record_fate"), "engine.fate"),
    **dict.fromkeys(("STAGES", "ImportReport", "ImportStopped", "IngestPolicy", "IngestResult",
                     "LineOutcome", "ReviewItem", "Stage", "StageReport", "SteppedRun"),
                    "engine.ingest"),
    "ConversationFormat": "engine.ingest.conversations",
    **dict.fromkeys(("ConsolidationReport", "ConsolidationStep"), "engine.ingest.consolidate"),
    **dict.fromkeys(("evaluate_dedup", "read_sts"), "engine.ingest.evaluation"),
    **dict.fromkeys(("LineFn", "SalienceCut"), "engine.ingest.importer"),
    **dict.fromkeys(("ApplyDetail", "CandidatesDetail", "DecisionDetail", "EmbedDetail",
                     "EventsDetail", "FailedDetail", "NormalizeDetail", "PersistDetail",
                     "StageDetail", "StartDetail"), "engine.ingest.stages"),
    **dict.fromkeys(("MapPoints", "RetrievalInspection", "inspect_retrieval", "map_points"),
                    "engine.inspection"),
    **dict.fromkeys(("PatternDetail", "PatternHistoryPoint", "SocialSummary", "SpatialHit"),
                    "engine.layers"),
    **dict.fromkeys(("LEDGER_FILENAME", "Ledger"), "engine.ledger"),
    **dict.fromkeys(("CompactionReport", "LifecycleReport", "PruneMode", "SummarizationTask"),
                    "engine.lifecycle"),
    **dict.fromkeys(("CancelFn", "EditEntry", "MemoryEngine", "ProgressFn", "RedactionHit",
                     "StoreStats"), "engine.memory_engine"),
    **dict.fromkeys(("Projection", "umap_available"), "engine.projection"),
    **dict.fromkeys(("SHOWN_STATES", "RecordQuery", "RecordRow", "RowPage", "SortKey",
                     "parse_states"), "engine.query"),
    **dict.fromkeys(("EventFeed", "LocalReader", "MemoryReader"), "engine.reader"),
    "RemoteReader": "engine.introspection.remote",
    **dict.fromkeys(("Redactor", "placeholder_for", "redact_text"), "engine.redaction"),
    **dict.fromkeys(("COMPONENTS", "PressureState", "Purpose", "RetrievalDiagnostics",
                     "RetrievalRequest", "RetrievedBundle", "ScoringWeights", "Strategy"),
                    "engine.retrieval"),
    **dict.fromkeys(("SPLITS", "evaluate_locomo"), "engine.locomo"),
    **dict.fromkeys(("DEFAULT_COLLECTION", "DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_READ_TIMEOUT_S",
                     "CollectionInfo", "StoreSpec", "list_collections"), "engine.store"),
    **dict.fromkeys(("FieldMapping", "ForeignInfo"), "engine.store.foreign"),
    **dict.fromkeys(("PairChange", "WhatIf", "threshold_what_if"), "engine.whatif"),
}


if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error there

    def __getattr__(name: str) -> object:
        """Import a lazily exported name from its module on first use (PEP 562)."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'engine' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ALL_STATES",
    "COMPONENTS",
    "DEFAULT_COLLECTION",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MASS_LIMIT",
    "DEFAULT_READ_TIMEOUT_S",
    "LEDGER_FILENAME",
    "MAPPED_FIELDS",
    "RNG",
    "SHOWN_STATES",
    "SPLITS",
    "STAGES",
    "Action",
    "ApplyDetail",
    "CancelFn",
    "Cancelled",
    "CandidatesDetail",
    "Category",
    "Clock",
    "CollectionInfo",
    "CompactionReport",
    "ConfigInvalid",
    "ConsolidationReport",
    "ConsolidationStep",
    "ConversationFormat",
    "CycleDetected",
    "DecisionDetail",
    "DedupConfig",
    "DeterministicClock",
    "DeterministicRNG",
    "DropReason",
    "EditConflict",
    "EditEntry",
    "EmbedBackend",
    "EmbedDetail",
    "Embedder",
    "EmbedderState",
    "EmbedderStatus",
    "EmbeddingFailed",
    "EmbeddingUnavailable",
    "EngineConfig",
    "EngineError",
    "Event",
    "EventBus",
    "EventFeed",
    "EventFilter",
    "EventKind",
    "EventsDetail",
    "ExitPolicy",
    "Facets",
    "FailedDetail",
    "FateStep",
    "FieldMapping",
    "ForeignInfo",
    "ForeignLayout",
    "ForeignSample",
    "ImportEntry",
    "ImportReport",
    "ImportStopped",
    "IngestPolicy",
    "IngestResult",
    "InputFormatError",
    "Layer",
    "Ledger",
    "LifecycleReport",
    "LifecycleRun",
    "LifecycleScheduler",
    "LineFn",
    "LineOutcome",
    "LinkedRecord",
    "LocalReader",
    "MapPoints",
    "Masker",
    "Masking",
    "MemoryConfig",
    "MemoryEngine",
    "MemoryReader",
    "MemoryRecord",
    "ModelSpec",
    "NewMemory",
    "NormalizeDetail",
    "PairChange",
    "PatternDetail",
    "PatternHistoryPoint",
    "PersistDetail",
    "PressureState",
    "Privacy",
    "ProgressFn",
    "Projection",
    "ProvenanceEntry",
    "PruneMode",
    "Purpose",
    "RecordDetail",
    "RecordFate",
    "RecordNotFound",
    "RecordQuery",
    "RecordRow",
    "RecordState",
    "RedactingLogFilter",
    "RedactionHit",
    "Redactor",
    "RelatedLink",
    "RemoteReader",
    "RetentionPolicy",
    "RetrievalConfig",
    "RetrievalDiagnostics",
    "RetrievalInspection",
    "RetrievalRequest",
    "RetrievedBundle",
    "ReviewItem",
    "RowPage",
    "RunWrites",
    "SalienceCut",
    "SchemaMismatch",
    "ScoringWeights",
    "SentenceTransformerEmbedder",
    "SimilarRecords",
    "SocialSummary",
    "SortKey",
    "SpatialHit",
    "Stage",
    "StageDetail",
    "StageReport",
    "StartDetail",
    "SteppedRun",
    "StoreLocked",
    "StoreReadOnly",
    "StoreSpec",
    "StoreStats",
    "StoreTimeout",
    "StoreUnavailable",
    "Strategy",
    "SummarizationTask",
    "SystemClock",
    "SystemRNG",
    "TrustTier",
    "UndoPlan",
    "ValidationError",
    "WhatIf",
    "content_hash",
    "engine_config_from_env",
    "evaluate_dedup",
    "evaluate_locomo",
    "inspect_retrieval",
    "list_collections",
    "map_points",
    "mass_retirements",
    "memory_config_from_env",
    "normalize",
    "parse_states",
    "placeholder_for",
    "read_conversation",
    "read_sts",
    "record_fate",
    "redact_text",
    "similar_records",
    "threshold_what_if",
    "umap_available",
]
