"""Mnemoscope's memory engine: records in Chroma, ingest/merge, retrieval, lifecycle.

Pure Python + numpy; no Qt anywhere below this package. Importing ``engine`` is cheap: torch,
sentence-transformers and chromadb are imported only by the code that needs them, in the worker
that runs it.
"""

from engine.clock import RNG, Clock, DeterministicClock, DeterministicRNG, SystemClock, SystemRNG
from engine.config import DedupConfig, MemoryConfig, RetentionPolicy
from engine.errors import (
    Cancelled,
    ConfigInvalid,
    CycleDetected,
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

__all__ = [
    "RNG",
    "Cancelled",
    "Category",
    "Clock",
    "ConfigInvalid",
    "CycleDetected",
    "DedupConfig",
    "DeterministicClock",
    "DeterministicRNG",
    "EmbeddingFailed",
    "EmbeddingUnavailable",
    "EngineError",
    "InputFormatError",
    "Layer",
    "MemoryConfig",
    "MemoryRecord",
    "NewMemory",
    "Privacy",
    "ProvenanceEntry",
    "RecordNotFound",
    "RecordState",
    "RelatedLink",
    "RetentionPolicy",
    "SchemaMismatch",
    "StoreLocked",
    "StoreReadOnly",
    "StoreTimeout",
    "StoreUnavailable",
    "SystemClock",
    "SystemRNG",
    "TrustTier",
    "ValidationError",
    "content_hash",
    "normalize",
]
