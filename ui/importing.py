"""Import and export jobs the GUI runs off the GUI thread (plain Python, no Qt).

The ingest pipeline decides every line (``MemoryEngine.import_jsonl`` /
``import_conversation``: inserted / updated / merged / deferred / skipped / error, with line
numbers); these jobs only turn its :class:`~engine.ingest.ImportReport` into the frozen
:class:`ImportSummary` the import dialog shows (and that crosses the process boundary of
:mod:`app.import_process` as JSON). Cancelling drops the pipeline's chunk in progress — nothing of
it is written — and the summary lists the lines written before the cancel.
"""

from __future__ import annotations

import json
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
        text: What the line said (its memory's content; the raw line when it is not one) —
            kept for the summary's problem lines (:attr:`ImportSummary.problems`) only.
        target_text: The stored record a problem line was compared with (skipped as its
            duplicate, deferred against it), by its content; empty when none.
    """

    line: int
    action: str
    record_id: str | None = None
    reason: str = ""
    text: str = ""
    target_text: str = ""


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


_PROBLEMS = ("error", "skipped", "deferred")
_TEXT_LIMIT = 500  # characters of a problem line's text kept for the summary


def _line_texts(path: str | Path, numbers: set[int], *, conversation: bool) -> dict[int, str]:
    """The memory text of lines (JSONL) or messages (conversation) ``numbers`` of ``path``.

    Worker-side and best effort: a line that is not a JSON object with a ``content`` string is
    given as it is, and a file that cannot be read again gives nothing (the summary then shows
    line numbers only).
    """
    if not numbers:
        return {}
    found: dict[int, str] = {}
    try:
        if conversation:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            messages = data.get("messages") if isinstance(data, dict) else data
            for number in numbers:
                item = messages[number - 1] if isinstance(messages, list) \
                    and 0 < number <= len(messages) else None
                content = item.get("content", item.get("text")) if isinstance(item, dict) \
                    else None
                if isinstance(content, str):
                    found[number] = content[:_TEXT_LIMIT]
            return found
        with Path(path).open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if number in numbers:
                    try:
                        item = json.loads(line)
                    except ValueError:
                        item = None
                    content = item.get("content") if isinstance(item, dict) else None
                    found[number] = (content if isinstance(content, str)
                                     else line.strip())[:_TEXT_LIMIT]
    except (OSError, ValueError):
        return found
    return found


def summary_from_report(report: ImportReport, *, conversation: bool = False) -> ImportSummary:
    """The pipeline's per-line report as an :class:`ImportSummary`.

    Problem lines (refused, skipped, deferred) carry their text and the text of the stored
    record they were compared with, so the summary names memories, not only line numbers.
    """
    texts = _line_texts(report.path, {o.line for o in report.lines if o.action in _PROBLEMS},
                        conversation=conversation)
    outcomes = []
    for o in report.lines:
        action = o.action if o.action in ACTIONS else "error"
        target = o.result.record if o.result is not None and action in _PROBLEMS else None
        outcomes.append(LineOutcome(
            o.line, action, o.id, o.reason, texts.get(o.line, ""),
            target.content[:_TEXT_LIMIT] if target is not None else ""))
    return ImportSummary(report.path, outcomes, report.cancelled)


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
        path, agent_id=agent_id, progress=progress, cancelled=cancelled), conversation=True)


def export_records(engine: MemoryEngine, path: str | Path, *,
                   redact: Callable[[str], str] | None = None) -> int:
    """Write every record as JSONL (atomically), content redacted when ``redact`` is given.

    Returns:
        The number of records written.
    """
    return engine.export_jsonl(path, redact=redact)
