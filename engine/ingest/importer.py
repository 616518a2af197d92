"""File import and export around the pipeline: JSONL, conversations, atomic export.

:func:`import_jsonl` parses a JSONL file (:mod:`engine.ingest.jsonl`), sends the good lines
through batch ingest and reports every line — its decision, or why it was refused.
:func:`import_conversation` reads a conversation (a JSON list of ``{speaker|role, content,
ts}``), keeps the salient messages (seed 000 §1) and ingests them as episodic memories.

Both say what is committed as it is committed: ``on_lines`` receives each chunk's outcomes (with
the refused lines before them) right after the chunk is written, so a caller killed later has
reported every committed line (``ingest --stream``). A run that fails part way raises
:class:`ImportStopped`, which carries the report of what was committed and the line it stopped
at; a cancelled run returns that report with ``cancelled`` set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import EngineError, InputFormatError, ValidationError
from engine.ingest.jsonl import file_label, json_error_text, read_jsonl, write_jsonl_atomic
from engine.ingest.kinds import Action
from engine.ingest.pipeline import CancelFn, IngestPipeline, IngestResult, ProgressFn
from engine.ingest.salience import SalienceConfig, select_salient
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    TrustTier,
    check_text,
    parse_timestamp,
)

__all__ = ["ImportReport", "ImportStopped", "LineFn", "LineOutcome", "export_records",
           "import_conversation", "import_jsonl"]


@dataclass(frozen=True, slots=True)
class LineOutcome:
    """What happened to one line (or conversation message) of an input file.

    Attributes:
        line: 1-based line number (message number for conversations).
        action: inserted, updated, skipped, merged, deferred or error.
        reason: The decision reason, or why the line was refused.
        id: The record the outcome concerns, if any.
        target_id: The existing record it was compared with, if any.
        similarity: Similarity to the target, if any.
        result: The full pipeline result (None for refused lines).
    """

    line: int
    action: str
    reason: str
    id: str | None = None
    target_id: str | None = None
    similarity: float | None = None
    result: IngestResult | None = None

    def to_json(self) -> dict[str, Any]:
        """The CLI's per-line object."""
        return {"line": self.line, "action": self.action, "reason": self.reason, "id": self.id,
                "target_id": self.target_id,
                "similarity": None if self.similarity is None else round(self.similarity, 6)}

    @classmethod
    def from_result(cls, line: int, result: IngestResult) -> LineOutcome:
        """The outcome of a line that went through the pipeline."""
        reason = result.error if result.action is Action.ERROR and result.error \
            else result.reason.value
        return cls(line, result.action.value, reason, result.record_id, result.target_id,
                   result.similarity, result)


@dataclass(frozen=True, slots=True)
class ImportReport:
    """Per-line outcomes of an import.

    Attributes:
        path: The file.
        lines: Outcomes, in file order (refused lines included; lines of a cancelled chunk
            are absent).
        cancelled: The caller cancelled; nothing of the chunk in progress was written.
        stopped_at: When the run was cancelled or failed, the first line whose memory was not
            committed (nothing from it on was); None when every good line went through.
    """

    path: str
    lines: tuple[LineOutcome, ...]
    cancelled: bool = False
    stopped_at: int | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Lines per action (every action present)."""
        counts = {a.value: 0 for a in Action}
        for outcome in self.lines:
            counts[outcome.action] = counts.get(outcome.action, 0) + 1
        return counts

    @property
    def errors(self) -> tuple[LineOutcome, ...]:
        """The refused or failed lines."""
        return tuple(o for o in self.lines if o.action == Action.ERROR.value)

    def to_json(self) -> dict[str, Any]:
        """``{"results": [...], "counts": {...}, "cancelled": bool}`` (the CLI's document)."""
        return {"results": [o.to_json() for o in self.lines], "counts": self.counts,
                "cancelled": self.cancelled}


LineFn = Callable[[Sequence[LineOutcome]], None]
"""Receives outcomes in file order as they are final (see the module docstring)."""


class ImportStopped(EngineError):
    """An import failed part way; the chunks before the failure stay written.

    Its code and message are those of the cause (``STORE_UNAVAILABLE``, ...), so a caller that
    only branches on codes sees the same error as before.

    Attributes:
        report: What was committed, the refused lines, and ``stopped_at``.
        cause: The error that stopped the run.
    """

    def __init__(self, report: ImportReport, cause: EngineError) -> None:
        super().__init__(f"{cause}; lines before {report.stopped_at} were committed, "
                         f"line {report.stopped_at} and later were not"
                         if report.stopped_at is not None else str(cause))
        self.code = cause.code
        self.report = report
        self.cause = cause


def _ingest_lines(pipeline: IngestPipeline, path: str,
                  parsed: Iterable[tuple[int, NewMemory | None, str | None]],
                  progress: ProgressFn | None, cancelled: CancelFn | None,
                  skipped: Iterable[LineOutcome] = (), on_lines: LineFn | None = None
                  ) -> ImportReport:
    refused: list[LineOutcome] = list(skipped)
    good: list[tuple[int, NewMemory]] = []
    for line, memory, error in parsed:
        if memory is None:
            refused.append(LineOutcome(line, Action.ERROR.value, error or "invalid"))
        else:
            good.append((line, memory))
    refused.sort(key=lambda o: o.line)
    committed: list[LineOutcome] = []
    told = 0  # refused lines passed to on_lines so far

    def tell(outcomes: Sequence[LineOutcome], until: int | None) -> None:
        nonlocal told
        if on_lines is None:
            return
        upto = told
        while upto < len(refused) and (until is None or refused[upto].line < until):
            upto += 1
        batch = sorted([*refused[told:upto], *outcomes], key=lambda o: o.line)
        told = upto
        if batch:
            on_lines(batch)

    def commit(start: int, results: Sequence[IngestResult]) -> None:
        outcomes = [LineOutcome.from_result(good[start + offset][0], result)
                    for offset, result in enumerate(results)]
        committed.extend(outcomes)
        tell(outcomes, outcomes[-1].line if outcomes else None)

    def report(*, cancelled: bool) -> ImportReport:
        stopped_at = good[len(committed)][0] if len(committed) < len(good) else None
        outcomes = sorted([*refused, *committed], key=lambda o: o.line)
        return ImportReport(path, tuple(outcomes), cancelled, stopped_at)

    try:
        batch = pipeline.ingest_batch([m for _, m in good], progress=progress,
                                      cancelled=cancelled, on_commit=commit)
    except EngineError as exc:
        tell((), None)
        raise ImportStopped(report(cancelled=False), exc) from exc
    tell((), None)
    return report(cancelled=batch.cancelled)


def import_jsonl(pipeline: IngestPipeline, path: str | Path, *, source: str | None = None,
                 tier: TrustTier | None = None, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None,
                 on_lines: LineFn | None = None) -> ImportReport:
    """Ingest a JSONL file; every line is reported (see :mod:`engine.ingest.jsonl`).

    Args:
        on_lines: Receives the outcomes of each chunk as soon as it is written.

    Raises:
        InputFormatError: the file cannot be opened.
        ImportStopped: a chunk could not be written (earlier chunks stay written; the error
            carries their report and has the code of its cause, e.g. ``STORE_UNAVAILABLE``).
    """
    parsed = [(p.line, p.memory, p.error) for p in read_jsonl(path, source=source, tier=tier)]
    return _ingest_lines(pipeline, str(path), parsed, progress, cancelled, on_lines=on_lines)


def _messages(path: Path) -> Iterator[tuple[int, str, str, float | None, str | None]]:
    """(number, speaker, content, ts, error) per conversation message."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputFormatError(str(path), 0, "file", f"cannot open: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InputFormatError(str(path), 0, "file", f"not valid UTF-8 at byte {exc.start}"
                               ) from exc
    except json.JSONDecodeError as exc:
        raise InputFormatError(str(path), exc.lineno, "file", json_error_text(exc)) from exc
    except RecursionError:
        # json raises it past Python's recursion limit (~1000 levels); a conversation is two
        raise InputFormatError(str(path), 0, "file", "not JSON: nested too deeply") from None
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list):
        raise InputFormatError(str(path), 0, "file",
                               "expected a JSON list of {speaker|role, content, ts} objects")
    for number, item in enumerate(data, start=1):
        if not isinstance(item, Mapping):
            yield number, "", "", None, f"message {number}: expected an object"
            continue
        speaker = item.get("speaker", item.get("role"))
        content = item.get("content", item.get("text"))
        if not isinstance(speaker, str) or not speaker.strip():
            yield number, "", "", None, f"message {number}: needs a 'speaker' or 'role' string"
            continue
        if not isinstance(content, str) or not content.strip():
            yield number, "", "", None, f"message {number}: needs a non-empty 'content' string"
            continue
        try:
            check_text(speaker, f"message {number}.speaker")
            check_text(content, f"message {number}.content")
            ts = parse_timestamp(item.get("ts"), f"message {number}.ts")
        except ValidationError as exc:
            yield number, "", "", None, str(exc)
            continue
        yield number, speaker.strip(), content.strip(), ts, None


def import_conversation(pipeline: IngestPipeline, path: str | Path, *, agent_id: str = "default",
                        progress: ProgressFn | None = None, cancelled: CancelFn | None = None,
                        config: SalienceConfig | None = None,
                        on_lines: LineFn | None = None) -> ImportReport:
    """Turn a conversation into episodic memories of ``agent_id`` via salience selection.

    Each selected message becomes ``"<speaker>: <content>"`` (layer episodic, category
    episode, trust tier agent, source ``conversation:<file name>``, created at its ``ts``);
    messages salience did not select are reported as ``skipped`` / ``not_salient``.

    Raises:
        InputFormatError: the file is not a JSON list of messages.
        ImportStopped: a chunk could not be written (as :func:`import_jsonl`).
    """
    file = Path(path)
    rows = list(_messages(file))
    good = [r for r in rows if r[4] is None]
    selected = select_salient([r[2] for r in good], config=config)
    chosen = {s.index: s.score for s in selected}
    parsed: list[tuple[int, NewMemory | None, str | None]] = []
    skipped: list[LineOutcome] = []
    for position, (number, speaker, content, ts, _) in enumerate(good):
        if position not in chosen:
            skipped.append(LineOutcome(number, Action.SKIPPED.value, "not_salient"))
            continue
        try:
            memory = NewMemory(
                content=f"{speaker}: {content}", agent_id=agent_id, layer=Layer.EPISODIC,
                category=Category.EPISODE, source=f"conversation:{file_label(file)}",
                source_tier=TrustTier.AGENT, created_at=ts,
                metadata={"speaker": speaker, "message": number,
                          "salience": round(chosen[position], 6)})
        except ValidationError as exc:
            parsed.append((number, None, str(exc)))
            continue
        parsed.append((number, memory, None))
    parsed.extend((number, None, error) for number, _, _, _, error in rows if error is not None)
    return _ingest_lines(pipeline, str(file), parsed, progress, cancelled, skipped,
                         on_lines=on_lines)


def export_records(records: Iterable[MemoryRecord], path: str | Path, *,
                   redact: Callable[[str], str] | None = None) -> int:
    """Write records as JSONL atomically; ``redact`` is applied to each record's content.

    Returns:
        The number of records written.
    """
    def rows() -> Iterator[dict[str, Any]]:
        for record in records:
            row = record.to_json()
            if redact is not None:
                row["content"] = redact(record.content)
                row["redacted"] = True
            yield row

    return write_jsonl_atomic(path, rows())
