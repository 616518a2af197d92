"""JSONL import and export: one memory per line, fields by name as the CLI's JSON.

Import is strict about what it can check and forgiving about what it cannot know: each line
must be a JSON object with a non-empty string ``content``; the fields of
:class:`~engine.records.NewMemory` are read by name with their JSON types (the names of
:meth:`MemoryRecord.to_json`, so an export imports back); fields an export carries but the
engine derives (hash, token estimate, version, ...) are ignored; any other field is kept in the
memory's ``metadata`` under its own name (an exported ``id`` becomes ``metadata.imported_id``).

Every bad line is reported with its number and the reason — not JSON, bad UTF-8, a line over
:data:`MAX_LINE_BYTES`, NaN/Infinity, a duplicate key, a wrong type, missing content — and the
good lines are kept.

Export writes :meth:`MemoryRecord.to_json` per line to a temporary file beside the target,
fsyncs it and renames it over the target, so a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import InputFormatError, StoreUnavailable, ValidationError
from engine.records import NewMemory, TrustTier, format_timestamp, parse_timestamp

__all__ = [
    "DERIVED_FIELDS",
    "MAX_INPUT_FILE_BYTES",
    "MAX_LINE_BYTES",
    "NEW_MEMORY_FIELDS",
    "ParsedLine",
    "file_label",
    "json_error_text",
    "new_memory_from_json",
    "new_memory_to_json",
    "read_input_text",
    "read_jsonl",
    "write_jsonl_atomic",
]

MAX_LINE_BYTES = 1_048_576
"""Longest accepted line (1 MiB): content is at most 32,000 characters, so a longer line is
either not a memory or a runaway file."""
MAX_INPUT_FILE_BYTES = 64 * 1_048_576
"""Largest whole-file input (a conversation, an STS-B file: 64 MiB; LoCoMo's ten
conversations take 2.8 MB). Such a file is read and parsed whole, which takes several times
its size in memory; past this it is a runaway file (or ``/dev/zero``), not a conversation."""

NEW_MEMORY_FIELDS = ("content", "agent_id", "layer", "importance", "confidence", "category",
                     "tags", "privacy", "source", "source_tier", "created_at", "expires_at",
                     "metadata", "state")
DERIVED_FIELDS = frozenset({"content_hash", "token_estimate", "unique_sources", "version",
                            "embedding_model", "redacted", "last_accessed", "access_count",
                            "related", "provenance", "merged_from", "recency_anchor"})
_STRING_FIELDS = ("content", "agent_id", "layer", "category", "privacy", "source",
                  "source_tier")


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """One line of an input file: a memory, or the reason it was refused.

    Attributes:
        line: 1-based line number.
        memory: The parsed memory (None when the line is bad).
        error: Why the line was refused (None when good).
    """

    line: int
    memory: NewMemory | None
    error: str | None = None


class _DuplicateKey(ValueError):
    pass


class _BadConstant(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constants(name: str) -> float:
    raise _BadConstant(name)


def new_memory_to_json(new: NewMemory) -> dict[str, Any]:
    """The wire form of a :class:`NewMemory` (the review queue keeps deferred memories so)."""
    return {
        "content": new.content, "agent_id": new.agent_id, "layer": new.layer.value,
        "importance": new.importance, "confidence": new.confidence,
        "category": new.category.value, "tags": list(new.tags), "privacy": new.privacy.value,
        "source": new.source, "source_tier": new.source_tier.value,
        "created_at": format_timestamp(new.created_at),
        "expires_at": format_timestamp(new.expires_at), "metadata": dict(new.metadata),
        "state": new.state.value,
    }


def new_memory_from_json(data: Mapping[str, Any], *, source: str | None = None,
                         tier: TrustTier | None = None,
                         default_source: str = "import",
                         default_tier: TrustTier = TrustTier.AUTO) -> NewMemory:
    """Build a :class:`NewMemory` from a JSON object, checking JSON types field by field.

    Args:
        source, tier: Override the line's own ``source`` / ``source_tier`` when given.
        default_source, default_tier: Used when the line has none.

    Raises:
        ValidationError: naming the first bad field.
    """
    if "content" not in data:
        # another tool's export keeps the text under its own name ("text", "memory"): naming
        # the line's keys shows which one to rename
        keys = ", ".join(json.dumps(key if len(key) <= 40 else key[:39] + "…", ensure_ascii=False)
                         for key in list(data)[:8]) + (", …" if len(data) > 8 else "")
        raise ValidationError("content", None, "is required: the memory's text goes in "
                              f'"content" (this line has {keys or "no field"})')
    for name in _STRING_FIELDS:
        if name in data and data[name] is not None and not isinstance(data[name], str):
            raise ValidationError(name, data[name], "must be a string")
    for name in ("importance", "confidence"):
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValidationError(name, value, "must be a number in 0..1")
    tags = data.get("tags", [])
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationError("tags", tags, "must be a list of strings")
    metadata = data.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValidationError("metadata", metadata, "must be an object")
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in NEW_MEMORY_FIELDS or key in DERIVED_FIELDS:
            continue
        extra["imported_id" if key == "id" else key] = value
    fields: dict[str, Any] = {
        "content": data["content"],
        "tags": tuple(tags),
        "metadata": {**extra, **metadata},
        "source": source or data.get("source") or default_source,
        "source_tier": tier or data.get("source_tier") or default_tier,
    }
    # state: an exported paused or archived record comes back so (a merge keeps the target's)
    for name in ("agent_id", "layer", "category", "privacy", "importance", "state"):
        if data.get(name) is not None:
            fields[name] = data[name]
    if data.get("confidence") is not None:
        fields["confidence"] = data["confidence"]
    for name in ("created_at", "expires_at"):
        if data.get(name) is not None:
            fields[name] = parse_timestamp(data[name], name)
    return NewMemory(**fields)


def file_label(path: Path) -> str:
    """``path``'s name as valid text for a memory's ``source``: a POSIX file name may hold
    bytes that are not UTF-8 (Python shows them as lone surrogates); those become U+FFFD."""
    return os.fsencode(path.name).decode("utf-8", "replace")


def read_input_text(path: str | Path) -> str:
    """A whole UTF-8 input file (a conversation, an STS-B file).

    Raises:
        InputFormatError: it cannot be opened, is larger than :data:`MAX_INPUT_FILE_BYTES`
            (nothing past the limit is read), or is not UTF-8 (naming the byte).
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_INPUT_FILE_BYTES + 1)
    except OSError as exc:
        raise InputFormatError(str(file), 0, "file", f"cannot open: {exc.strerror}") from exc
    if len(data) > MAX_INPUT_FILE_BYTES:
        raise InputFormatError(str(file), 0, "file", f"larger than {MAX_INPUT_FILE_BYTES:,} "
                               "bytes, the most read as one conversation or evaluation file: "
                               "split it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(str(file), 0, "file", f"not valid UTF-8 at byte {exc.start}"
                               ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode read it


def json_error_text(exc: json.JSONDecodeError) -> str:
    """``not JSON: <what> at column <n>``. Some of json's messages already end in "at"
    ("Unterminated string starting at"); those get the column without a second "at"."""
    where = "column" if exc.msg.endswith(" at") else "at column"
    return f"not JSON: {exc.msg} {where} {exc.colno}"


def _parse_line(raw: bytes, number: int, *, source: str | None, tier: TrustTier | None,
                default_source: str) -> ParsedLine:
    if len(raw) > MAX_LINE_BYTES:
        return ParsedLine(number, None,
                          f"line is {len(raw)} bytes, longer than the {MAX_LINE_BYTES}-byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ParsedLine(number, None, f"not valid UTF-8 at byte {exc.start}")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _DuplicateKey as exc:
        return ParsedLine(number, None, f"duplicate key {exc.args[0]!r}")
    except _BadConstant as exc:
        return ParsedLine(number, None, f"{exc.args[0]} is not a valid number")
    except json.JSONDecodeError as exc:
        return ParsedLine(number, None, json_error_text(exc))
    except RecursionError:
        return ParsedLine(number, None, "not JSON: nested too deeply")
    if not isinstance(data, dict):
        return ParsedLine(number, None, f"expected a JSON object, got {type(data).__name__}")
    try:
        memory = new_memory_from_json(data, source=source, tier=tier,
                                      default_source=default_source)
    except ValidationError as exc:
        return ParsedLine(number, None, str(exc))
    return ParsedLine(number, memory)


def read_jsonl(path: str | Path, *, source: str | None = None, tier: TrustTier | None = None
               ) -> Iterator[ParsedLine]:
    """Parse a JSONL file line by line; blank lines are skipped, bad lines reported.

    Args:
        source: Source instance for every memory (default: each line's own, else
            ``import:<file name>``).
        tier: Trust tier for every memory (default: each line's own, else ``auto``, seed 001's
            tier for ingested material).

    Raises:
        InputFormatError: the file cannot be opened (line 0).
    """
    file = Path(path)
    default_source = f"import:{file_label(file)}"
    try:
        handle = file.open("rb")
    except OSError as exc:
        raise InputFormatError(str(file), 0, "file", f"cannot open: {exc.strerror}") from exc
    with handle:
        first = True
        for number, raw in enumerate(handle, start=1):
            body = raw.rstrip(b"\r\n")
            if number == 1 and body.startswith(b"\xef\xbb\xbf"):
                body = body[3:]  # a UTF-8 byte-order mark is not content
            if not body.strip():
                continue
            if first:
                _check_whole_file(file, number, body)
                first = False
            yield _parse_line(body, number, source=source, tier=tier,
                              default_source=default_source)


def _check_whole_file(file: Path, number: int, body: bytes) -> None:
    """Refuse, before any line is read as a memory, the files that are not JSONL at all and
    would otherwise show a "not JSON" error for every line: UTF-16 text, and one JSON
    document spread over lines (a pretty-printed array or object, e.g. a conversation).

    Raises:
        InputFormatError: naming the file, the line and what to do instead.
    """
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputFormatError(str(file), number, "file",
                               "is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                               "save it as UTF-8")
    if body.strip() in (b"[", b"{"):
        raise InputFormatError(str(file), number, "file",
                               "is one JSON document spread over several lines, not JSONL: "
                               "each line must hold one whole memory object, such as "
                               '{"content": "Alice prefers green tea"} (a conversation is '
                               "imported as one: Import Conversation… in the app, "
                               "`mnemoscope import-conversation` on the command line)")


def write_jsonl_atomic(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` as JSONL atomically (temp file, fsync, rename). Returns the row count.

    Raises:
        StoreUnavailable: the file cannot be written (nothing is left behind).
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    count = 0
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=directory)
    except OSError as exc:
        raise StoreUnavailable(f"cannot write {target}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, allow_nan=False, default=str))
                out.write("\n")
                count += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, target)
    except OSError as exc:
        _unlink_quietly(temp_name)
        raise StoreUnavailable(f"cannot write {target}: {exc.strerror}") from exc
    except BaseException:
        _unlink_quietly(temp_name)
        raise
    return count


def _unlink_quietly(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)
