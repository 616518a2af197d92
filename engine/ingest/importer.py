"""File import and export around the pipeline: JSONL, conversations, atomic export.

:func:`import_jsonl` parses a JSONL file (:mod:`engine.ingest.jsonl`), sends the good lines
through batch ingest and reports every line — its decision, or why it was refused.
:func:`import_conversation` reads a conversation in any format of
:mod:`engine.ingest.conversations`, keeps the salient messages (seed 000 §1, or a
:class:`SalienceCut` the user chose) and ingests them as episodic memories; with ``dry_run`` it
reports what it would do and writes nothing.

Both say what is committed as it is committed: ``on_lines`` receives each chunk's outcomes (with
the refused lines before them) right after the chunk is written, so a caller killed later has
reported every committed line (``ingest --stream``). A run that fails part way raises
:class:`ImportStopped`, which carries the report of what was committed and the line it stopped
at; a cancelled run returns that report with ``cancelled`` set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.errors import EngineError, ValidationError
from engine.exits import ExitPolicy
from engine.ingest.conversations import read_conversation
from engine.ingest.jsonl import file_label, read_jsonl, write_jsonl_atomic
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
)

__all__ = ["ImportReport", "ImportStopped", "LineFn", "LineOutcome", "SalienceCut",
           "export_records",
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
    content: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The CLI's per-line object (``content`` only where the import names the text)."""
        row: dict[str, Any] = {
            "line": self.line, "action": self.action, "reason": self.reason, "id": self.id,
            "target_id": self.target_id,
            "similarity": None if self.similarity is None else round(self.similarity, 6)}
        if self.content is not None:
            row["content"] = self.content
        return row

    @classmethod
    def from_result(cls, line: int, result: IngestResult,
                    content: str | None = None) -> LineOutcome:
        """The outcome of a line that went through the pipeline."""
        reason = result.error if result.action is Action.ERROR and result.error \
            else result.reason.value
        return cls(line, result.action.value, reason, result.record_id, result.target_id,
                   result.similarity, result, content)


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
        dry_run: Nothing was written: the outcomes are what an import would do.
        format: The conversation format detected (conversation imports).
        keep: Which conversation turns were kept, in words (conversation imports).
        import_id: The import's id in the import log (undo it with
            ``MemoryEngine.undo_import``); None for a dry run or a bare pipeline call.
        aliases: ``(content_hash, record_id)`` of the merges it made (what undo forgets).
    """

    path: str
    lines: tuple[LineOutcome, ...]
    cancelled: bool = False
    stopped_at: int | None = None
    dry_run: bool = False
    format: str | None = None
    keep: str | None = None
    import_id: str | None = None
    aliases: tuple[tuple[str, str], ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Lines per action (every action present)."""
        counts = {a.value: 0 for a in Action}
        for outcome in self.lines:
            counts[outcome.action] = counts.get(outcome.action, 0) + 1
        return counts

    @property
    def review_ids(self) -> tuple[str, ...]:
        """The review items the import queued."""
        return tuple(o.result.review_id for o in self.lines
                     if o.result is not None and o.result.review_id is not None)

    @property
    def errors(self) -> tuple[LineOutcome, ...]:
        """The refused or failed lines."""
        return tuple(o for o in self.lines if o.action == Action.ERROR.value)

    def to_json(self) -> dict[str, Any]:
        """``{"results": [...], "counts": {...}, "cancelled": bool}`` (the CLI's document),
        plus ``dry_run``, ``format`` and ``keep`` for conversation imports."""
        document: dict[str, Any] = {"results": [o.to_json() for o in self.lines],
                                    "counts": self.counts, "cancelled": self.cancelled}
        if self.import_id is not None:
            document["import_id"] = self.import_id
        if self.format is not None:
            document.update(format=self.format, keep=self.keep, dry_run=self.dry_run)
        return document


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
                  skipped: Iterable[LineOutcome] = (), *, dry_run: bool = False,
                  import_id: str | None = None, on_lines: LineFn | None = None
                  ) -> ImportReport:
    refused: list[LineOutcome] = list(skipped)
    good: list[tuple[int, NewMemory]] = []
    for line, memory, error in parsed:
        if memory is None:
            refused.append(LineOutcome(line, Action.ERROR.value, error or "invalid"))
        else:
            good.append((line, memory))
    refused.sort(key=lambda o: o.line)
    memories = [m for _, m in good]
    if dry_run:
        batch = pipeline.simulate_batch(memories, progress=progress, cancelled=cancelled)
        decided = [LineOutcome.from_result(line, result, memory.content)
                   for (line, memory), result in zip(good, batch.results, strict=False)]
        stopped = good[len(decided)][0] if len(decided) < len(good) else None
        return ImportReport(path, tuple(sorted([*refused, *decided], key=lambda o: o.line)),
                            batch.cancelled, stopped, dry_run=True)
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
        aliases = tuple(  # committed[i] is good[i]'s outcome
            (memory.content_hash, outcome.target_id)
            for (_, memory), outcome in zip(good, committed, strict=False)
            if outcome.action == Action.MERGED.value and outcome.target_id is not None)
        return ImportReport(path, tuple(outcomes), cancelled, stopped_at,
                            import_id=import_id, aliases=aliases)

    try:
        batch = pipeline.ingest_batch(memories, progress=progress, cancelled=cancelled,
                                      batch_id=import_id, on_commit=commit)
    except EngineError as exc:
        tell((), None)
        raise ImportStopped(report(cancelled=False), exc) from exc
    tell((), None)
    return report(cancelled=batch.cancelled)


def import_jsonl(pipeline: IngestPipeline, path: str | Path, *, source: str | None = None,
                 tier: TrustTier | None = None, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None, import_id: str | None = None,
                 on_lines: LineFn | None = None) -> ImportReport:
    """Ingest a JSONL file; every line is reported (see :mod:`engine.ingest.jsonl`).

    Args:
        import_id: The edit-history batch id of every write (one undo step).
        on_lines: Receives the outcomes of each chunk as soon as it is written.

    Raises:
        InputFormatError: the file cannot be opened.
        ImportStopped: a chunk could not be written (earlier chunks stay written; the error
            carries their report and has the code of its cause, e.g. ``STORE_UNAVAILABLE``).
    """
    parsed = [(p.line, p.memory, p.error) for p in read_jsonl(path, source=source, tier=tier)]
    return _ingest_lines(pipeline, str(path), parsed, progress, cancelled,
                         import_id=import_id, on_lines=on_lines)


@dataclass(frozen=True, slots=True)
class SalienceCut:
    """Which conversation messages an import keeps.

    Attributes:
        mode: ``default`` (seed 000 §1 salience selection with its limits), ``all`` (every
            turn), or ``top`` (the ``percent`` highest-scoring turns by the same salience
            score, in conversation order).
        percent: For ``top``: 0 < percent <= 100.
    """

    mode: str = "default"
    percent: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("default", "all", "top"):
            raise ValidationError("keep", self.mode, "expected default, all or a percentage")
        if self.mode == "top" and (self.percent is None or not 0 < self.percent <= 100):
            raise ValidationError("keep", self.percent, "a percentage must be in (0, 100]")

    @classmethod
    def parse(cls, text: str) -> SalienceCut:
        """``default``, ``all``, or ``N%`` / ``N`` (the top N percent).

        Raises:
            ValidationError: naming the value.
        """
        value = text.strip().lower()
        if value in ("default", "all"):
            return cls(value)
        try:
            percent = float(value.removesuffix("%"))
        except ValueError:
            raise ValidationError("keep", text, "expected default, all or a percentage such "
                                  "as 50%") from None
        return cls("top", percent)

    def describe(self) -> str:
        """How the cut is named to a person."""
        if self.mode == "top":
            return f"the top {self.percent:g}% by salience"
        return "every turn" if self.mode == "all" else "salient turns (the default)"


def _select(contents: list[str], cut: SalienceCut,
            config: SalienceConfig | None) -> dict[int, float]:
    """Position → salience score of the kept messages."""
    if cut.mode == "default":
        return {s.index: s.score for s in select_salient(contents, config=config)}
    # every message scored by the same formula (no top-k, no token cap)
    everything = SalienceConfig(top_k=max(1, len(contents)), max_tokens=10**12)
    scored = {s.index: s.score for s in select_salient(contents, config=everything)}
    if cut.mode == "all":
        return scored
    assert cut.percent is not None
    count = max(1, math.ceil(len(contents) * cut.percent / 100.0)) if contents else 0
    best = sorted(scored, key=lambda index: (-scored[index], index))[:count]
    return {index: scored[index] for index in sorted(best)}


def import_conversation(pipeline: IngestPipeline, path: str | Path, *, agent_id: str = "default",
                        progress: ProgressFn | None = None, cancelled: CancelFn | None = None,
                        config: SalienceConfig | None = None, keep: SalienceCut | None = None,
                        dry_run: bool = False, import_id: str | None = None,
                        on_lines: LineFn | None = None) -> ImportReport:
    """Turn a conversation into episodic memories of ``agent_id``.

    The file may be in any format :mod:`engine.ingest.conversations` reads (the report names
    the one detected). Each kept message becomes ``"<speaker>: <content>"`` (layer episodic,
    category episode, trust tier agent, source ``conversation:<file name>``, created at its
    time, with speaker, message number, session and dataset ids in metadata); messages the
    salience cut (``keep``, default seed 000 §1) left out are reported as ``skipped`` /
    ``not_salient``, instructions and tool traffic as ``skipped`` with that reason.

    Args:
        keep: Which turns to keep (default: seed 000 §1 salience selection).
        dry_run: Decide everything, write nothing (:meth:`IngestPipeline.simulate_batch`).
        import_id: The edit-history batch id of every write (one undo step).
        on_lines: Receives the outcomes of each chunk as soon as it is written.

    Raises:
        InputFormatError: the file is in none of the accepted formats.
        ImportStopped: a chunk could not be written (as :func:`import_jsonl`).
    """
    file = Path(path)
    conversation = read_conversation(file)
    cut = keep or SalienceCut()
    good = [m for m in conversation.messages if m.usable]
    chosen = _select([m.content for m in good], cut, config)
    parsed: list[tuple[int, NewMemory | None, str | None]] = []
    skipped: list[LineOutcome] = []
    for message in conversation.messages:
        if message.skip is not None:
            skipped.append(LineOutcome(message.number, Action.SKIPPED.value, message.skip,
                                       content=message.content or None))
        elif message.error is not None:
            parsed.append((message.number, None, message.error))
    for position, message in enumerate(good):
        try:  # named per field (a lone surrogate in a speaker's name, say)
            check_text(message.speaker, f"message {message.number}.speaker")
            check_text(message.content, f"message {message.number}.content")
        except ValidationError as exc:
            parsed.append((message.number, None, str(exc)))
            continue
        text = f"{message.speaker}: {message.content}"
        if position not in chosen:
            skipped.append(LineOutcome(message.number, Action.SKIPPED.value, "not_salient",
                                       content=text))
            continue
        metadata: dict[str, Any] = {"speaker": message.speaker, "message": message.number,
                                    "salience": round(chosen[position], 6), **message.extra}
        if message.session is not None:
            metadata["session"] = message.session
        try:
            memory = NewMemory(
                content=text, agent_id=agent_id, layer=Layer.EPISODIC,
                category=Category.EPISODE, source=f"conversation:{file_label(file)}",
                source_tier=TrustTier.AGENT, created_at=message.ts, metadata=metadata)
        except ValidationError as exc:
            parsed.append((message.number, None, str(exc)))
            continue
        parsed.append((message.number, memory, None))
    report = _ingest_lines(pipeline, str(file), parsed, progress, cancelled, skipped,
                           dry_run=dry_run, import_id=import_id, on_lines=on_lines)
    return replace(report, format=conversation.format.value, keep=cut.describe())


def export_records(records: Iterable[MemoryRecord], path: str | Path, *,
                   redact: Callable[[str], str] | None = None) -> int:
    """Write records as JSONL atomically; with ``redact``, through the exit policy.

    A redacted export masks every string of every record — content, tags, source, agent id,
    provenance sources, metadata keys and values at any depth — with the identifier exemption
    of :mod:`engine.exits`, and carries the content hash of the *masked* content (a raw hash
    would let anyone confirm a guessed secret; the masked one is what a re-import computes).

    Returns:
        The number of records written.
    """
    policy = ExitPolicy(redact)

    def rows() -> Iterator[dict[str, Any]]:
        for record in records:
            row: dict[str, Any] = policy.document(record.to_json())
            if redact is not None:
                row["redacted"] = True
            yield row

    return write_jsonl_atomic(path, rows())
