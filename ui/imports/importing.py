"""Import and export jobs the GUI runs off the GUI thread (plain Python, no Qt).

The ingest pipeline decides every line (``MemoryEngine.import_jsonl`` /
``import_conversation``: inserted / updated / merged / deferred / skipped / error, with line
numbers); these jobs only turn its :class:`~engine.ingest.ImportReport` into the frozen
:class:`ImportSummary` the import dialogs show (and that crosses the process boundary of
:mod:`app.import_process` as JSON). Cancelling drops the pipeline's chunk in progress — nothing of
it is written — and the summary lists the lines written before the cancel.

A conversation import is previewed first (issue 20): :func:`detect_conversation` names the
file's format, :func:`preview_conversation` runs the same import as a dry run (every stage,
nothing written) for the salience cut the user chose, and only a confirmed import writes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine import (
    ConversationFormat,
    ImportEntry,
    ImportReport,
    MemoryEngine,
    SalienceCut,
    StoreSpec,
    read_conversation,
)
from engine.errors import EngineError

__all__ = [
    "ACTIONS",
    "DECISIONS",
    "ConversationInfo",
    "ImportSummary",
    "LineOutcome",
    "adopt_collection_into",
    "decision_of",
    "detect_conversation",
    "export_records",
    "import_conversation",
    "import_formats",
    "import_jsonl",
    "keep_argument",
    "preview_conversation",
    "summary_from_report",
]

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]

ACTIONS = ("inserted", "updated", "merged", "deferred", "skipped", "error")
"""The outcomes of one input line, in the order the summary lists them."""

NOT_SALIENT = "not_salient"
"""The reason of a conversation turn the salience cut left out (engine.ingest.importer)."""

DECISIONS = ("inserted", "merged", "updated", "deferred", NOT_SALIENT, "skipped", "error")
"""What the preview and the summary count and filter by: the actions, with the turns the
salience cut left out apart from the other skipped lines (they are what a different cut
changes)."""


@dataclass(frozen=True, slots=True)
class LineOutcome:
    """What happened to one input line.

    Attributes:
        line: 1-based line (or message) number.
        action: One of :data:`ACTIONS`.
        record_id: The record written or merged into, if any.
        reason: The pipeline's decision reason, or why the line was refused.
        text: What the line said (its memory's content; the raw line when it is not one).
        target_text: The stored record the line concerns other than its own new record (the
            record it merged into or updated, the duplicate it was skipped against, the one
            it was held for review against), by its content; empty when none.
    """

    line: int
    action: str
    record_id: str | None = None
    reason: str = ""
    text: str = ""
    target_text: str = ""

    @property
    def decision(self) -> str:
        """The line's entry of :data:`DECISIONS`."""
        return decision_of(self.action, self.reason)


def decision_of(action: str, reason: str) -> str:
    """The entry of :data:`DECISIONS` of a line with ``action`` and ``reason``."""
    return NOT_SALIENT if action == "skipped" and reason == NOT_SALIENT else action


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """The result of an import, or of its preview.

    Attributes:
        source: The file imported.
        outcomes: One per input line the pipeline reported, in line order.
        cancelled: True when the user stopped it (the chunk in progress was not written).
        import_id: The import's id in the store's import log (what undoes it), if written.
        format: The conversation format detected (conversation imports).
        keep: Which conversation turns were kept, in words (conversation imports).
        dry_run: A preview: nothing was written.
    """

    source: str
    outcomes: Sequence[LineOutcome]
    cancelled: bool = False
    import_id: str | None = None
    format: str | None = None
    keep: str | None = None
    dry_run: bool = False

    @property
    def counts(self) -> Mapping[str, int]:
        """Lines per action, every action present."""
        found = Counter(o.action for o in self.outcomes)
        return {action: found.get(action, 0) for action in ACTIONS}

    @property
    def decisions(self) -> Mapping[str, int]:
        """Lines per entry of :data:`DECISIONS`, every entry present."""
        found = Counter(o.decision for o in self.outcomes)
        return {decision: found.get(decision, 0) for decision in DECISIONS}

    @property
    def written(self) -> int:
        """Lines that changed the store (inserted, updated or merged)."""
        counts = self.counts
        return counts["inserted"] + counts["updated"] + counts["merged"]

    @property
    def problems(self) -> list[LineOutcome]:
        """Lines that were refused, skipped or deferred."""
        return [o for o in self.outcomes if o.action in ("error", "skipped", "deferred")]

    def samples(self, decision: str, count: int = 5) -> list[LineOutcome]:
        """The first ``count`` lines with ``decision``, in line order (the preview's samples)."""
        return [o for o in self.outcomes if o.decision == decision][:count]


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """A conversation file as detected, before anything is decided about it.

    Attributes:
        path: The file.
        format: The detected format's code (:class:`ConversationFormat`).
        messages: How many messages the file has (turns, instructions, tool traffic).
        turns: How many of them are turns that can be stored.
    """

    path: str
    format: str
    messages: int
    turns: int

    @property
    def label(self) -> str:
        """The format in words ("LoCoMo sessions")."""
        return ConversationFormat(self.format).label


_TEXT_LIMIT = 500  # characters of a line's text kept for the summary


def detect_conversation(path: str | Path) -> ConversationInfo:
    """Read ``path`` and name its conversation format (worker: it reads the file).

    Raises:
        InputFormatError: the file cannot be read or is in none of the accepted formats (the
            message lists them).
    """
    conversation = read_conversation(path)
    return ConversationInfo(str(path), conversation.format.value, len(conversation.messages),
                            sum(1 for m in conversation.messages if m.usable))


def import_formats(entries: Sequence[ImportEntry]) -> dict[str, str]:
    """Import id → the format of its conversation file, in words, for the Imports window.

    The import log keeps the kind of an import, not the format, so the file is read again
    (worker: it reads files); a file moved, deleted or no longer a conversation gives nothing.
    """
    found: dict[str, str] = {}
    by_path: dict[str, str] = {}
    for entry in entries:
        if entry.kind != "conversation":
            continue
        if entry.path not in by_path:
            try:
                by_path[entry.path] = detect_conversation(entry.path).label
            except (OSError, EngineError):
                by_path[entry.path] = ""
        if by_path[entry.path]:
            found[entry.id] = by_path[entry.path]
    return found


def keep_argument(cut: SalienceCut) -> str:
    """``cut`` as :meth:`SalienceCut.parse` reads it (how it crosses to the import child)."""
    return f"{cut.percent:g}%" if cut.mode == "top" else cut.mode


def _conversation_texts(path: str | Path) -> dict[int, str]:
    """Message number → the text an import stores for it (``"speaker: content"``, as
    ``engine.ingest.importer.import_conversation`` builds it); empty when unreadable."""
    try:
        conversation = read_conversation(path)
    except (OSError, EngineError):  # changed since the import read it: numbers only
        return {}
    return {m.number: (f"{m.speaker}: {m.content}" if m.speaker and m.content
                       else m.content)[:_TEXT_LIMIT] for m in conversation.messages}


def _line_texts(path: str | Path, numbers: set[int]) -> dict[int, str]:
    """The memory text of lines ``numbers`` of the JSONL file ``path``.

    Worker-side and best effort: a line that is not a JSON object with a ``content`` string is
    given as it is, and a file that cannot be read again gives nothing (the summary then shows
    line numbers only).
    """
    if not numbers:
        return {}
    found: dict[int, str] = {}
    try:
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


def summary_from_report(report: ImportReport, *, conversation: bool = False,
                        from_file: bool = True) -> ImportSummary:
    """The pipeline's per-line report as an :class:`ImportSummary`.

    Every line carries its text and the text of the stored record it concerns (merged into,
    updated, skipped against, held for review against), so the summary names memories, not
    only line numbers. ``from_file=False``: the report's source is no file (an adopted
    collection); its lines carry their texts themselves.
    """
    if not from_file:
        texts: dict[int, str] = {}
    elif conversation:
        texts = _conversation_texts(report.path)
    else:
        texts = _line_texts(report.path, {o.line for o in report.lines})
    outcomes = []
    for o in report.lines:
        action = o.action if o.action in ACTIONS else "error"
        target = o.result.record if o.result is not None and action != "inserted" else None
        text = (o.content or texts.get(o.line, ""))[:_TEXT_LIMIT]
        outcomes.append(LineOutcome(
            o.line, action, o.id, o.reason, text,
            target.content[:_TEXT_LIMIT] if target is not None else ""))
    return ImportSummary(report.path, outcomes, report.cancelled, report.import_id,
                         report.format, report.keep, report.dry_run)


def import_jsonl(engine: MemoryEngine, path: str | Path, *, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a JSONL file through the ingest pipeline.

    Raises:
        InputFormatError: the file cannot be opened.
        StoreReadOnly, StoreUnavailable: the store refused a chunk (earlier chunks stay).
    """
    return summary_from_report(engine.import_jsonl(path, progress=progress, cancelled=cancelled))


def import_conversation(engine: MemoryEngine, path: str | Path, *, agent_id: str,
                        keep: SalienceCut | None = None, progress: ProgressFn | None = None,
                        cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a conversation (any format :func:`detect_conversation` names) through the
    pipeline, keeping the turns ``keep`` selects (default: the salient ones).

    Raises:
        InputFormatError: the file is not a readable conversation.
    """
    return summary_from_report(engine.import_conversation(
        path, agent_id=agent_id, keep=keep, progress=progress, cancelled=cancelled),
        conversation=True)


def preview_conversation(engine: MemoryEngine, path: str | Path, *, agent_id: str,
                         keep: SalienceCut | None = None, progress: ProgressFn | None = None,
                         cancelled: CancelFn | None = None) -> ImportSummary:
    """What :func:`import_conversation` would do, with nothing written (a dry run: every
    pipeline stage with the same numbers; no record, event, review item or log entry).

    Raises:
        InputFormatError: the file is not a readable conversation.
    """
    return summary_from_report(engine.import_conversation(
        path, agent_id=agent_id, keep=keep, dry_run=True, progress=progress,
        cancelled=cancelled), conversation=True)


def adopt_collection_into(open_target: Callable[[StoreSpec], MemoryEngine],
                          source: MemoryEngine, target: StoreSpec, *,
                          progress: ProgressFn | None = None,
                          cancelled: CancelFn | None = None) -> ImportSummary:
    """Copy the records of ``source`` (another tool's collection, open read-only) into the
    store ``target`` through its ingest pipeline (``MemoryEngine.adopt``, as ``mnemoscope adopt
    --into`` does); the target is opened with ``open_target``, its view read, and closed.

    Raises:
        EngineError: the target could not be opened, is the source itself, or a write failed
            (``ImportStopped``: what was committed stays, and is in the target's import log).
    """
    engine = open_target(target)
    try:
        engine.load_view()
        return summary_from_report(engine.adopt(source, progress=progress, cancelled=cancelled),
                                   from_file=False)
    finally:
        engine.close()


def export_records(engine: MemoryEngine, path: str | Path, *,
                   redact: Callable[[str], str] | None = None) -> int:
    """Write every record as JSONL (atomically), content redacted when ``redact`` is given.

    Returns:
        The number of records written.
    """
    return engine.export_jsonl(path, redact=redact)
