"""Import and export jobs the GUI runs on a worker thread (plain Python, no Qt).

Each job takes ``progress(done, total)`` and ``cancelled() -> bool`` and returns a frozen
summary the import dialog shows. When the engine has the ingest pipeline
(``MemoryEngine.import_jsonl`` / ``import_conversation`` / ``export_jsonl``) the jobs call it, so
the summary shows the pipeline's real actions (inserted / merged / deferred / skipped / errors).
Until then they parse the file here and insert the records in batches with
:meth:`MemoryEngine.restore` — no dedup (the pipeline owns it; this module never decides a
merge).

All-or-nothing on cancel: the batched path checks ``cancelled`` between lines and batches and,
when asked to stop, deletes what it inserted in this run, so the store is as before.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import Cancelled, ValidationError
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.records import Category, Layer, MemoryRecord, NewMemory, parse_timestamp

__all__ = [
    "ACTIONS",
    "ImportSummary",
    "LineOutcome",
    "export_records",
    "import_conversation",
    "import_jsonl",
    "parse_memory_line",
]

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]

ACTIONS = ("inserted", "updated", "merged", "deferred", "skipped", "error")
"""The outcomes of one input line, in the order the summary lists them."""

_BATCH = 500
_NEW_FIELDS = ("content", "agent_id", "layer", "importance", "confidence", "category", "tags",
               "privacy", "source", "source_tier", "metadata")


@dataclass(frozen=True, slots=True)
class LineOutcome:
    """What happened to one input line.

    Attributes:
        line: 1-based line (or item) number.
        action: One of :data:`ACTIONS`.
        record_id: The record written or merged into, if any.
        reason: Why (error message, skip reason), empty when nothing to say.
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
        outcomes: One per input line that held something, in line order.
        cancelled: True when the user stopped it (then nothing was written).
        pipeline: True when the ingest pipeline decided (else a plain batched insert).
    """

    source: str
    outcomes: Sequence[LineOutcome]
    cancelled: bool = False
    pipeline: bool = False

    @property
    def counts(self) -> Mapping[str, int]:
        """Lines per action, every action present."""
        found = Counter(o.action for o in self.outcomes)
        return {action: found.get(action, 0) for action in ACTIONS}

    @property
    def problems(self) -> list[LineOutcome]:
        """Lines that were skipped or failed, for the summary's detail list."""
        return [o for o in self.outcomes if o.action in ("error", "skipped", "deferred")]


def parse_memory_line(text: str, line: int, source_name: str) -> NewMemory:
    """One JSONL line (the CLI's record JSON fields by name) as a :class:`NewMemory`.

    Unknown fields (``id``, ``content_hash``, …) are ignored; an import creates new records.

    Raises:
        ValidationError: naming the file, the line and the bad field.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{source_name}:{line}", text[:60], f"not JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ValidationError(f"{source_name}:{line}", text[:60], "must be a JSON object")
    values: dict[str, Any] = {k: data[k] for k in _NEW_FIELDS if data.get(k) is not None}
    try:
        if "tags" in values:
            values["tags"] = tuple(values["tags"])
        for name in ("created_at", "expires_at"):
            if data.get(name) is not None:
                values[name] = parse_timestamp(data[name], name)
        return NewMemory(**values)
    except ValidationError as exc:
        raise ValidationError(f"{source_name}:{line}: {exc.field}", exc.value,
                              exc.reason) from exc
    except TypeError as exc:
        raise ValidationError(f"{source_name}:{line}", text[:60], str(exc)) from exc


def _pipeline(engine: MemoryEngine, name: str) -> Callable[..., Any] | None:
    method = getattr(engine, name, None)
    return method if callable(method) else None


def _insert_batched(engine: MemoryEngine, items: Sequence[tuple[int, NewMemory]],
                    outcomes: list[LineOutcome], progress: ProgressFn | None,
                    cancelled: CancelFn | None, total: int, done_before: int,
                    source: str) -> ImportSummary:
    """Insert parsed memories in batches; on cancel delete this run's records again."""
    written: list[str] = []
    done = done_before
    try:
        for start in range(0, len(items), _BATCH):
            if cancelled is not None and cancelled():
                raise Cancelled(f"import of {source} stopped after {len(written)} records")
            chunk = items[start:start + _BATCH]
            now = engine.clock.now()
            records = [MemoryRecord.create(new, now_ms=now) for _, new in chunk]
            engine.restore(records, actor=f"import:{Path(source).name}")
            written.extend(r.id for r in records)
            outcomes.extend(LineOutcome(line, "inserted", r.id)
                            for (line, _), r in zip(chunk, records, strict=True))
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    except Cancelled:
        _undo_partial(engine, written)
        return ImportSummary(source, [], cancelled=True)
    except BaseException:
        _undo_partial(engine, written)
        raise
    outcomes.sort(key=lambda o: o.line)
    return ImportSummary(source, outcomes)


def _undo_partial(engine: MemoryEngine, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), 5000):
        engine.delete(ids[start:start + 5000], actor="import", reason="import-cancelled")


def import_jsonl(engine: MemoryEngine, path: str | Path, *, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a JSONL file of memories; one outcome per non-blank line.

    Raises:
        StoreReadOnly: the store refuses writes (nothing is written).
        StoreUnavailable: the file cannot be read, or the store failed.
    """
    pipeline = _pipeline(engine, "import_jsonl")
    if pipeline is not None:
        return _from_report(str(path), _call_pipeline(pipeline, path, progress, cancelled))
    lines = _read_lines(path)
    total = len(lines)
    items: list[tuple[int, NewMemory]] = []
    outcomes: list[LineOutcome] = []
    for index, (line, text) in enumerate(lines):
        if cancelled is not None and index % 256 == 0 and cancelled():
            return ImportSummary(str(path), [], cancelled=True)
        try:
            items.append((line, parse_memory_line(text, line, Path(path).name)))
        except ValidationError as exc:
            outcomes.append(LineOutcome(line, "error", None, str(exc)))
    if progress is not None:
        progress(len(outcomes), total)
    return _insert_batched(engine, items, outcomes, progress, cancelled, total, len(outcomes),
                           str(path))


def import_conversation(engine: MemoryEngine, path: str | Path, *, agent_id: str,
                        progress: ProgressFn | None = None,
                        cancelled: CancelFn | None = None) -> ImportSummary:
    """Import a conversation (a JSON list of ``{speaker, content, ts}``) as episodic memories.

    Raises:
        StoreUnavailable: the file cannot be read.
        ValidationError: the file is not a JSON list.
    """
    pipeline = _pipeline(engine, "import_conversation")
    if pipeline is not None:
        return _from_report(str(path), pipeline(path, agent_id=agent_id))
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError(str(path), None, f"cannot read the conversation: {exc}") from exc
    if not isinstance(data, list):
        raise ValidationError(str(path), type(data).__name__, "must be a JSON list of turns")
    items: list[tuple[int, NewMemory]] = []
    outcomes: list[LineOutcome] = []
    for number, turn in enumerate(data, start=1):
        try:
            if not isinstance(turn, dict):
                raise ValidationError("turn", turn, "must be an object")
            speaker = str(turn.get("speaker") or "unknown")
            items.append((number, NewMemory(
                content=f"{speaker}: {turn.get('content', '')}", agent_id=agent_id,
                layer=Layer.EPISODIC, category=Category.EPISODE,
                tags=("conversation", speaker), source=f"conversation:{Path(path).name}",
                created_at=parse_timestamp(turn.get("ts"), "ts"))))
        except ValidationError as exc:
            outcomes.append(LineOutcome(number, "error", None, f"item {number}: {exc}"))
    return _insert_batched(engine, items, outcomes, progress, cancelled, len(data),
                           len(outcomes), str(path))


def export_records(engine: MemoryEngine, path: str | Path, *,
                   redact: Callable[[str], str] | None = None,
                   progress: ProgressFn | None = None,
                   cancelled: CancelFn | None = None) -> int:
    """Write every record as JSONL (oldest first), content redacted when ``redact`` is given.

    The file is written to a temporary name and renamed at the end, so a cancelled or failed
    export leaves no half-written file. Returns the number of records written.

    Raises:
        Cancelled: the user stopped it (no file is left behind).
        StoreUnavailable: the file cannot be written.
    """
    from engine.errors import StoreUnavailable

    target = Path(path)
    temporary = target.with_name(f".{target.name}.partial")
    written = 0
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            offset = 0
            while True:
                if cancelled is not None and cancelled():
                    raise Cancelled(f"export to {target} stopped after {written} records")
                page = engine.list_records(RecordQuery(sort_by=SortKey.CREATED, descending=False,
                                                       offset=offset, limit=1000))
                for record in page.records:
                    data = record.to_json()
                    if redact is not None:
                        data["content"] = redact(record.content)
                        data["redacted"] = data["content"] != record.content or record.redacted
                    handle.write(json.dumps(data, ensure_ascii=False) + "\n")
                written += len(page.records)
                offset += len(page.records)
                if progress is not None:
                    progress(written, page.total)
                if not page.records or offset >= page.total:
                    break
        temporary.replace(target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StoreUnavailable(f"cannot write the export {target}: {exc}") from exc
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return written


def _read_lines(path: str | Path) -> list[tuple[int, str]]:
    from engine.errors import StoreUnavailable

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreUnavailable(f"cannot read {path}: {exc}") from exc
    return [(number, line) for number, line in enumerate(text.splitlines(), start=1)
            if line.strip()]


def _call_pipeline(pipeline: Callable[..., Any], path: str | Path,
                   progress: ProgressFn | None, cancelled: CancelFn | None) -> Any:
    try:
        return pipeline(path, progress=progress, cancelled=cancelled)
    except Cancelled:
        return None


def _from_report(source: str, report: Any) -> ImportSummary:
    """The pipeline's ImportReport (per-line results) as an :class:`ImportSummary`."""
    if report is None:
        return ImportSummary(source, [], cancelled=True, pipeline=True)
    outcomes = []
    items: Any = getattr(report, "lines", None) or getattr(report, "results", None) or ()
    for item in items:
        action = str(getattr(item, "action", "error"))
        outcomes.append(LineOutcome(int(getattr(item, "line", 0)),
                                    action if action in ACTIONS else "error",
                                    getattr(item, "record_id", None),
                                    str(getattr(item, "reason", "") or "")))
    return ImportSummary(source, outcomes, bool(getattr(report, "cancelled", False)), True)
