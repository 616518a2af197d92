"""Import and export jobs the GUI runs off the GUI thread (plain Python, no Qt).

The ingest pipeline decides every line (``MemoryEngine.import_jsonl`` /
``import_conversation``: inserted / updated / merged / deferred / skipped / error, with line
numbers); these jobs only turn its :class:`~engine.ingest.ImportReport` into the frozen
:class:`ImportSummary` the import dialog shows (and that crosses the process boundary of
:mod:`ui.import_process` as JSON). Cancelling drops the pipeline's chunk in progress — nothing of
it is written — and the summary lists the lines written before the cancel.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.ingest import ImportReport
from engine.memory_engine import MemoryEngine

__all__ = [
    "ACTIONS",
    "ImportSummary",
    "LineOutcome",
    "export_records",
    "import_conversation",
    "import_jsonl",
    "summary_from_report",
]

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]

ACTIONS = ("inserted", "updated", "merged", "deferred", "skipped", "error")
"""The outcomes of one input line, in the order the summary lists them."""


@dataclass(frozen=True, slots=True)
class LineOutcome:
    """What happened to one input line.

    Attributes:
        line: 1-based line (or message) number.
        action: One of :data:`ACTIONS`.
        record_id: The record written or merged into, if any.
        reason: The pipeline's decision reason, or why the line was refused.
    """

    line: int
    action: str
    record_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """The result of an import.

    Attributes:
        source: The file imported.
        outcomes: One per input line the pipeline reported, in line order.
        cancelled: True when the user stopped it (the chunk in progress was not written).
    """

    source: str
    outcomes: Sequence[LineOutcome]
    cancelled: bool = False

    @property
    def counts(self) -> Mapping[str, int]:
        """Lines per action, every action present."""
        found = Counter(o.action for o in self.outcomes)
        return {action: found.get(action, 0) for action in ACTIONS}

    @property
    def written(self) -> int:
        """Lines that changed the store (inserted, updated or merged)."""
        counts = self.counts
        return counts["inserted"] + counts["updated"] + counts["merged"]

    @property
    def problems(self) -> list[LineOutcome]:
        """Lines that were refused, skipped or deferred, for the summary's detail list."""
        return [o for o in self.outcomes if o.action in ("error", "skipped", "deferred")]


def summary_from_report(report: ImportReport) -> ImportSummary:
    """The pipeline's per-line report as an :class:`ImportSummary`."""
    return ImportSummary(report.path,
                         [LineOutcome(o.line, o.action if o.action in ACTIONS else "error",
                                      o.id, o.reason) for o in report.lines],
                         report.cancelled)


def import_jsonl(engine: MemoryEngine, path: str | Path, *, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a JSONL file through the ingest pipeline.

    Raises:
        InputFormatError: the file cannot be opened.
        StoreReadOnly, StoreUnavailable: the store refused a chunk (earlier chunks stay).
    """
    return summary_from_report(engine.import_jsonl(path, progress=progress, cancelled=cancelled))


def import_conversation(engine: MemoryEngine, path: str | Path, *, agent_id: str,
                        progress: ProgressFn | None = None,
                        cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a conversation (JSON list of ``{speaker, content, ts}``) through the pipeline.

    Raises:
        InputFormatError: the file is not a readable conversation.
    """
    return summary_from_report(engine.import_conversation(
        path, agent_id=agent_id, progress=progress, cancelled=cancelled))


def export_records(engine: MemoryEngine, path: str | Path, *,
                   redact: Callable[[str], str] | None = None) -> int:
    """Write every record as JSONL (atomically), content redacted when ``redact`` is given.

    Returns:
        The number of records written.
    """
    return engine.export_jsonl(path, redact=redact)
