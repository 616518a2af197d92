"""``engine`` is the engine's one public door (issue 22): what it exports, that every name
resolves to its defining module's object, that importing it stays cheap, and that the example
in its docstring runs."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import engine

OPEN = {"MemoryEngine", "StoreSpec", "EngineConfig", "engine_config_from_env", "MemoryConfig",
        "DedupConfig", "RetentionPolicy", "RetrievalConfig", "memory_config_from_env",
        "ModelSpec", "Embedder", "EmbedBackend", "EmbedderState", "EmbedderStatus",
        "SentenceTransformerEmbedder", "CollectionInfo", "list_collections",
        "DEFAULT_COLLECTION", "DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_READ_TIMEOUT_S",
        "FieldMapping", "ForeignInfo", "ForeignLayout", "ForeignSample", "MAPPED_FIELDS",
        "Ledger", "LEDGER_FILENAME", "StoreStats",
        "ProgressFn", "CancelFn", "Clock", "SystemClock", "DeterministicClock", "RNG",
        "SystemRNG", "DeterministicRNG"}
RECORDS = {"MemoryRecord", "NewMemory", "Category", "Layer", "Privacy", "ProvenanceEntry",
           "RecordState", "RelatedLink", "TrustTier", "content_hash", "normalize"}
INGEST = {"IngestResult", "IngestPolicy", "ImportReport", "ImportStopped", "LineOutcome",
          "LineFn", "SalienceCut", "ConversationFormat", "SteppedRun", "StageReport", "Stage",
          "STAGES", "threshold_what_if", "WhatIf", "PairChange", "evaluate_dedup", "read_sts",
          "StageDetail", "StartDetail", "NormalizeDetail", "EmbedDetail", "CandidatesDetail",
          "DecisionDetail", "ApplyDetail", "PersistDetail", "EventsDetail", "FailedDetail",
          "Action", "read_conversation", "ImportEntry", "UndoPlan", "RunWrites",
          "ConsolidationReport", "ConsolidationStep"}
RETRIEVE = {"DropReason", "RetrievalRequest", "RetrievedBundle", "RetrievalDiagnostics", "Purpose",
            "Strategy", "PressureState", "ScoringWeights", "COMPONENTS", "inspect_retrieval",
            "RetrievalInspection", "evaluate_locomo", "SPLITS"}
BROWSE = {"ALL_STATES", "RecordQuery", "RecordRow", "RowPage", "SortKey", "SHOWN_STATES",
          "parse_states",
          "MemoryReader", "LocalReader", "RemoteReader", "EventFeed", "Facets", "LinkedRecord",
          "RecordDetail", "SimilarRecords", "similar_records",
          "EditEntry", "map_points", "MapPoints", "Projection", "umap_available",
          "PatternDetail", "PatternHistoryPoint", "SocialSummary", "SpatialHit"}
REVIEW_AND_LIFECYCLE = {"ReviewItem", "LifecycleReport", "LifecycleScheduler", "LifecycleRun",
                        "CompactionReport", "PruneMode",
                        "SummarizationTask", "record_fate", "RecordFate", "FateStep",
                        "mass_retirements", "DEFAULT_MASS_LIMIT"}
EVENTS_AND_EXITS = {"Event", "EventBus", "EventFilter", "EventKind", "ExitPolicy",
                    "RedactingLogFilter", "Masking", "Masker",
                    "Redactor", "RedactionHit", "redact_text", "placeholder_for"}
ERRORS = {"EngineError", "Cancelled", "ConfigInvalid", "CycleDetected", "EditConflict",
          "EmbeddingFailed", "EmbeddingUnavailable", "InputFormatError", "RecordNotFound",
          "SchemaMismatch", "StoreLocked", "StoreReadOnly", "StoreTimeout", "StoreUnavailable",
          "ValidationError"}
PROMISED = (OPEN | RECORDS | INGEST | RETRIEVE | BROWSE | REVIEW_AND_LIFECYCLE
            | EVENTS_AND_EXITS | ERRORS)


def test_the_door_exports_what_was_meant() -> None:
    assert set(engine.__all__) == PROMISED
    assert len(engine.__all__) == len(set(engine.__all__))


def test_every_name_is_its_defining_modules_object() -> None:
    for name in engine.__all__:
        value = getattr(engine, name)
        module = engine._LAZY.get(name)
        if module is not None:
            assert value is getattr(importlib.import_module(module), name), name
    assert set(engine._LAZY) <= set(engine.__all__)
    assert set(dir(engine)) >= set(engine.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'engine' has no attribute 'MemoryEngines'"):
        _ = engine.MemoryEngines  # type: ignore[attr-defined]  # the point of the test
    with pytest.raises(ImportError):
        exec("from engine import MemoryEngines", {})


def test_importing_the_door_loads_no_heavy_part() -> None:
    code = ("import sys, engine\n"
            "loaded = [m for m in ('numpy', 'chromadb', 'torch', 'sentence_transformers', "
            "'PySide6', 'engine.memory_engine', 'engine.store', 'engine.ingest', "
            "'engine.retrieval') if m in sys.modules]\n"
            "print(','.join(loaded))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == ""


def test_the_docstring_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = engine.__doc__ or ""
    lines = doc.split("::\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if line and not line.startswith("    "))
    code = textwrap.dedent("\n".join(lines[:end])).replace("~/agent-memory",
                                                            str(tmp_path / "store"))
    exec(compile(code, "engine-docstring-example", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "inserted unique_hash"
    assert out[1].endswith("Ana prefers tea to coffee")
