"""Retrieval: hybrid ranking with full diagnostics, token packing and pressure compression.

Public surface: the seed 002 request/bundle types (:mod:`.types`), the weights and tables
(defined in :mod:`engine.config`, ``MemoryConfig.retrieval``), the orchestrator
(:class:`Retriever`) and :func:`rescore`, which re-ranks a bundle's candidates under other
weights without touching the store (the GUI's sliders).
"""

from engine.config import (
    DEFAULT_LAYER_WEIGHTS,
    DEFAULT_PURPOSE_WEIGHTS,
    RetrievalConfig,
    ScoringWeights,
)
from engine.retrieval.compression import compress, first_sentence
from engine.retrieval.lexical import TextIndex, stem, terms
from engine.retrieval.retriever import Ranking, Retriever, rescore
from engine.retrieval.types import (
    COMPONENTS,
    CandidateDiagnostic,
    DropReason,
    PressureState,
    Purpose,
    RetrievalDiagnostics,
    RetrievalRequest,
    RetrievedBundle,
    SemanticMode,
    Strategy,
)

__all__ = [
    "COMPONENTS",
    "DEFAULT_LAYER_WEIGHTS",
    "DEFAULT_PURPOSE_WEIGHTS",
    "CandidateDiagnostic",
    "DropReason",
    "PressureState",
    "Purpose",
    "Ranking",
    "RetrievalConfig",
    "RetrievalDiagnostics",
    "RetrievalRequest",
    "RetrievedBundle",
    "Retriever",
    "ScoringWeights",
    "SemanticMode",
    "Strategy",
    "TextIndex",
    "compress",
    "first_sentence",
    "rescore",
    "stem",
    "terms",
]
