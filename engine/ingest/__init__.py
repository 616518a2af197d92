"""Ingest and merge: exact and semantic dedup, merge rules, surprise, review queue, events.

Where things are decided (one module per concept):

* :mod:`.pipeline`      the named stages and their drivers (headless, stepped, batch)
* :mod:`.search`        candidate search: hash cache → nearest neighbours → linear scan
* :mod:`.partition_index` the IVF index of large partitions the search uses (kept current)
* :mod:`.decision`      the merge decision (exact duplicate, tier thresholds, gray zone, ...)
* :mod:`.contradiction` the contradiction guard (numbers, times, negation, names, ...)
* :mod:`.surprise`      seed 004 surprise and derived importance
* :mod:`.merge`         seed 001/004 merge rules, symmetric related links
* :mod:`.confidence`    seed 000 §5 confidence merge
* :mod:`.review`        the review queue (ledger)
* :mod:`.jsonl`, :mod:`.importer`, :mod:`.salience`  file import/export, conversations
* :mod:`.evaluation`    ``eval dedup`` on STS-B-format pairs
"""

from engine.ingest.confidence import fold_confidence, merge_confidence
from engine.ingest.contradiction import Conflict, find_conflicts
from engine.ingest.decision import Candidate, Decision, ExactMatch, decide
from engine.ingest.importer import ImportReport, ImportStopped, LineOutcome
from engine.ingest.kinds import Action, EventKind, Reason, Stage
from engine.ingest.pipeline import (
    STAGES,
    BatchResult,
    IngestPipeline,
    IngestResult,
    RunWrites,
    StageReport,
    SteppedRun,
)
from engine.ingest.policy import GrayZoneScope, IngestPolicy
from engine.ingest.review import ReviewItem, ReviewQueue, ReviewStatus
from engine.ingest.surprise import SurpriseScore, surprise_score

__all__ = [
    "STAGES",
    "Action",
    "BatchResult",
    "Candidate",
    "Conflict",
    "Decision",
    "EventKind",
    "ExactMatch",
    "GrayZoneScope",
    "ImportReport",
    "ImportStopped",
    "IngestPipeline",
    "IngestPolicy",
    "IngestResult",
    "LineOutcome",
    "Reason",
    "ReviewItem",
    "ReviewQueue",
    "ReviewStatus",
    "RunWrites",
    "Stage",
    "StageReport",
    "SteppedRun",
    "SurpriseScore",
    "decide",
    "find_conflicts",
    "fold_confidence",
    "merge_confidence",
    "surprise_score",
]
