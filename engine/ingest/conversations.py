"""Read a conversation file in the formats agents and datasets actually use.

:func:`read_conversation` detects the format, names it, and returns the messages in order:

========================  ==============================================================
format                    what it looks like
========================  ==============================================================
``message-list``          a JSON list (or ``{"messages": [...]}``) of
                          ``{speaker|role, content|text, ts}`` — Mnemoscope's own format
``openai-chat``           ``{"messages": [{"role", "content", "name"?}]}``, content a string
                          or a list of parts (``{"type": "text", "text": ...}``)
``anthropic-messages``    ``{"system"?, "messages": [{"role", "content"}]}``, content a
                          string or a list of blocks (``text``, ``tool_use``, ``tool_result``)
``locomo``                LoCoMo samples: ``{"conversation": {"session_N": [{speaker, text,
                          dia_id}], "session_N_date_time": "1:56 pm on 8 May, 2023"}}``,
                          one sample or a list of them (the file ``eval locomo`` reads)
``transcript``            plain text, one ``Name: text`` per line (continuation lines join
                          the message above; an optional ``[2026-01-31 12:00]`` stamp first)
========================  ==============================================================

Instructions and tool traffic (``system``/``developer`` roles, tool calls and results) are not
turns of the conversation: they come back as messages with a ``skip`` reason, so an import
reports them instead of storing them. A message that cannot be read comes back with an
``error`` naming it; the rest are kept. A file in no known format raises
:class:`InputFormatError` listing the accepted formats.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.errors import InputFormatError, ValidationError
from engine.ingest.jsonl import json_error_text, read_input_text
from engine.records import parse_timestamp

__all__ = ["ACCEPTED_FORMATS", "Conversation", "ConversationFormat", "ConversationMessage",
           "locomo_session_time", "parse_conversation", "read_conversation"]


class ConversationFormat(StrEnum):
    """The formats :func:`read_conversation` reads."""

    MESSAGE_LIST = "message-list"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    LOCOMO = "locomo"
    TRANSCRIPT = "transcript"

    @property
    def label(self) -> str:
        """How the format is named to a person."""
        return _TITLES[self]


_TITLES = {
    ConversationFormat.MESSAGE_LIST: "message list ({speaker, content, ts} objects)",
    ConversationFormat.OPENAI_CHAT: "OpenAI chat messages",
    ConversationFormat.ANTHROPIC_MESSAGES: "Anthropic messages",
    ConversationFormat.LOCOMO: "LoCoMo sessions",
    ConversationFormat.TRANSCRIPT: "plain transcript (Name: text lines)",
}

ACCEPTED_FORMATS = (
    "a JSON list of {speaker|role, content, ts} objects (or {\"messages\": [...]})",
    "OpenAI chat: {\"messages\": [{\"role\", \"content\"}]}, content a string or text parts",
    "Anthropic messages: {\"system\", \"messages\": [{\"role\", \"content\"}]} with content "
    "blocks",
    "LoCoMo: {\"conversation\": {\"session_1\": [...], \"session_1_date_time\": ...}}, one "
    "sample or a list",
    "a plain-text transcript with one \"Name: text\" per line",
)

_INSTRUCTION_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function", "ipython"})
_OPENAI_PART_TYPES = frozenset({"text", "input_text", "output_text", "image_url", "input_audio",
                                "refusal", "file"})
_ANTHROPIC_BLOCK_TYPES = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                                    "document", "server_tool_use"})
_SESSION = re.compile(r"^session_(\d+)$")
_LOCOMO_TIME = "%I:%M %p on %d %B, %Y"
# "Name: text", a name of at most 40 characters that starts with a letter; an optional stamp.
_TRANSCRIPT_LINE = re.compile(r"^\s*(?:\[(?P<stamp>[^\]]{4,40})\]\s*)?"
                              r"(?P<name>[^\W\d_][\w .'-]{0,39}?)\s*:\s+(?P<text>\S.*)$")


@dataclass(frozen=True, slots=True)
class ConversationMessage:
    """One message of a conversation, in file order.

    Attributes:
        number: 1-based position among the file's messages (what reports call the line).
        speaker: Who said it (a name or a role).
        content: The text, trimmed.
        ts: When, in epoch milliseconds, if the file says.
        session: The session it belongs to (LoCoMo ``session_N``, a sample id), if any.
        skip: Why it is not a turn to remember (instructions, tool traffic), if so.
        error: Why it could not be read, if so.
    """

    number: int
    speaker: str
    content: str
    ts: float | None = None
    session: str | None = None
    skip: str | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """A turn with text that can be stored."""
        return self.skip is None and self.error is None


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation file read: its detected format and its messages."""

    path: str
    format: ConversationFormat
    messages: tuple[ConversationMessage, ...]


def locomo_session_time(text: str, source: str) -> float:
    """A LoCoMo ``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``, UTC) in epoch ms.

    Raises:
        InputFormatError: naming the unreadable date.
    """
    try:
        moment = datetime.strptime(text.strip(), _LOCOMO_TIME)
    except ValueError as exc:
        raise InputFormatError(source, 0, "session date", f"unreadable date {text!r}") from exc
    return moment.replace(tzinfo=UTC).timestamp() * 1000.0


def read_conversation(path: str | Path) -> Conversation:
    """Read and detect a conversation file.

    Raises:
        InputFormatError: the file cannot be read, or is in none of the accepted formats.
    """
    return parse_conversation(read_input_text(path), str(path))


def parse_conversation(text: str, source: str) -> Conversation:
    """:func:`read_conversation` on text already read (``source`` names it in errors)."""
    stripped = text.lstrip("\ufeff").strip()
    if not stripped:
        raise _unknown(source, "the file is empty")
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            if _TRANSCRIPT_LINE.match(stripped.splitlines()[0]):  # "[09:00] Dana: ..." lines
                return Conversation(source, ConversationFormat.TRANSCRIPT,
                                    tuple(_transcript(stripped, source)))
            raise InputFormatError(source, exc.lineno, "file", json_error_text(exc)) from exc
        except RecursionError as exc:
            # json raises it past Python's recursion limit (~1000 levels); a conversation is two
            raise InputFormatError(source, 0, "file", "not JSON: nested too deeply") from exc
        return _from_json(data, source)
    return Conversation(source, ConversationFormat.TRANSCRIPT, tuple(_transcript(stripped,
                                                                                 source)))


def _unknown(source: str, why: str) -> InputFormatError:
    accepted = "; ".join(ACCEPTED_FORMATS)
    return InputFormatError(source, 0, "file",
                            f"not a conversation format Mnemoscope reads ({why}). Accepted: "
                            f"{accepted}")


def _from_json(data: Any, source: str) -> Conversation:
    if _is_locomo(data):
        samples = data if isinstance(data, list) else [data]
        return Conversation(source, ConversationFormat.LOCOMO, tuple(_locomo(samples, source)))
    items: Any = None
    if isinstance(data, list):
        items = data
    elif isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        items = data["messages"]
    if items is None:
        keys = ", ".join(sorted(map(str, data)))[:200] if isinstance(data, Mapping) else ""
        raise _unknown(source, f"a JSON object with keys {keys}" if keys else
                       f"a JSON {type(data).__name__}")
    kind = _chat_kind(data, items)
    messages = tuple(_chat(items))
    if items and all(m.error is not None for m in messages):
        raise _unknown(source, f"none of its {len(items)} messages has a speaker or role and "
                       f"text: {messages[0].error}")
    return Conversation(source, kind, messages)


def _is_locomo(data: Any) -> bool:
    sample = data[0] if isinstance(data, list) and data else data
    if not isinstance(sample, Mapping):
        return False
    conversation = sample.get("conversation", sample)
    return isinstance(conversation, Mapping) and any(
        _SESSION.match(str(key)) and isinstance(value, list)
        for key, value in conversation.items())


def _locomo(samples: Sequence[Any], source: str) -> Iterator[ConversationMessage]:
    number = 0
    for index, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise InputFormatError(source, 0, f"sample {index + 1}", "expected an object")
        conversation = sample.get("conversation", sample)
        name = str(sample.get("sample_id", f"conversation {index + 1}"))
        sessions = sorted((int(m.group(1)), key) for key in conversation
                           if (m := _SESSION.match(str(key)))
                           and isinstance(conversation[key], list))
        for session, key in sessions:
            stamp = conversation.get(f"{key}_date_time")
            start = locomo_session_time(stamp, source) if isinstance(stamp, str) else None
            for turn_index, turn in enumerate(conversation[key]):
                number += 1
                where = f"{name} {key} turn {turn_index + 1}"
                if not isinstance(turn, Mapping):
                    yield ConversationMessage(number, "", "", error=f"{where}: expected an "
                                              "object")
                    continue
                speaker, text = turn.get("speaker"), turn.get("text")
                if not isinstance(speaker, str) or not speaker.strip() \
                        or not isinstance(text, str):
                    yield ConversationMessage(number, "", "", error=f"{where}: needs 'speaker' "
                                              "and 'text' strings")
                    continue
                caption = turn.get("blip_caption")
                content = text.strip()
                if isinstance(caption, str) and caption.strip():
                    content = f"{content} [shares a photo of {caption.strip()}]".strip()
                if not content:
                    yield ConversationMessage(number, speaker.strip(), "", error=f"{where}: "
                                              "empty text")
                    continue
                extra: dict[str, Any] = {"sample": name, "session": session}
                if isinstance(turn.get("dia_id"), str):
                    extra["dia_id"] = turn["dia_id"]
                # one second per turn keeps the order of a session's turns (as eval locomo does)
                ts = None if start is None else start + turn_index * 1000.0
                yield ConversationMessage(number, speaker.strip(), content, ts,
                                          f"{name} session {session}", extra=extra)


def _chat_kind(data: Any, items: Sequence[Any]) -> ConversationFormat:
    """Which chat dialect a message list is (the readers are one; the name is for the user)."""
    if isinstance(data, Mapping) and (isinstance(data.get("system"), str | list)
                                      or "anthropic_version" in data
                                      or "stop_reason" in data):
        return ConversationFormat.ANTHROPIC_MESSAGES
    openai = False
    for item in items:
        if not isinstance(item, Mapping):
            continue
        content = item.get("content")
        if isinstance(content, list):
            types = {part.get("type") for part in content if isinstance(part, Mapping)}
            if types & _ANTHROPIC_BLOCK_TYPES:
                return ConversationFormat.ANTHROPIC_MESSAGES
            if types & _OPENAI_PART_TYPES:
                openai = True
        role = item.get("role")
        if "tool_calls" in item or "tool_call_id" in item or role in _TOOL_ROLES \
                or role in _INSTRUCTION_ROLES:
            openai = True
        if "speaker" in item or "ts" in item:
            return ConversationFormat.MESSAGE_LIST
    if openai or (isinstance(data, Mapping) and "model" in data):
        return ConversationFormat.OPENAI_CHAT
    return ConversationFormat.MESSAGE_LIST


def _content_text(content: Any) -> tuple[str, bool]:
    """The text of a message's content, and whether it held tool traffic only."""
    if isinstance(content, str):
        return content.strip(), False
    if not isinstance(content, list):
        return "", False
    texts: list[str] = []
    tools = False
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"),
                                                                             str):
                texts.append(part["text"])
            elif kind in ("tool_use", "tool_result", "server_tool_use"):
                tools = True
    return "\n".join(t.strip() for t in texts if t.strip()), tools and not texts


def _chat(items: Sequence[Any]) -> Iterator[ConversationMessage]:
    """The messages of every chat dialect (one reader: they differ in names, not shape)."""
    for number, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            yield ConversationMessage(number, "", "", error=f"message {number}: expected an "
                                      "object")
            continue
        role = item.get("role")
        name = item.get("speaker", item.get("name"))
        speaker = name if isinstance(name, str) and name.strip() else role
        if not isinstance(speaker, str) or not speaker.strip():
            yield ConversationMessage(number, "", "", error=f"message {number}: needs a "
                                      "'speaker' or 'role' string")
            continue
        speaker = speaker.strip()
        content, tool_only = _content_text(item.get("content", item.get("text")))
        if role in _INSTRUCTION_ROLES:
            yield ConversationMessage(number, speaker, content, skip="instructions")
            continue
        if role in _TOOL_ROLES or tool_only or (not content and item.get("tool_calls")):
            yield ConversationMessage(number, speaker, content, skip="tool_traffic")
            continue
        if not content:
            yield ConversationMessage(number, speaker, "", error=f"message {number}: needs a "
                                      "non-empty 'content' string")
            continue
        try:
            ts = parse_timestamp(item.get("ts", item.get("timestamp")), f"message {number}.ts")
        except ValidationError as exc:
            yield ConversationMessage(number, speaker, content, error=str(exc))
            continue
        yield ConversationMessage(number, speaker, content, ts)


def _transcript(text: str, source: str) -> Iterator[ConversationMessage]:
    pending: list[str] = []
    speaker = ""
    ts: float | None = None
    number = 0
    first_line = 0
    for line_number, line in enumerate(text.splitlines(), start=1):
        match = _TRANSCRIPT_LINE.match(line)
        if match is None:
            if line.strip() and pending:
                pending.append(line.strip())  # a continuation of the message above
            elif line.strip():
                raise _unknown(source, f"line {line_number} is not \"Name: text\": "
                               f"{line.strip()[:60]!r}")
            continue
        if pending:
            number += 1
            yield ConversationMessage(number, speaker, "\n".join(pending), ts,
                                      extra={"line": first_line})
        speaker, pending, first_line = match["name"].strip(), [match["text"].strip()], \
            line_number
        ts = None
        if match["stamp"]:
            try:
                ts = parse_timestamp(match["stamp"].strip().replace(" ", "T", 1),
                                     f"line {line_number} time")
            except ValidationError:
                ts = None  # a bracketed note that is not a time (e.g. "[laughs]"): no time
    if pending:
        number += 1
        yield ConversationMessage(number, speaker, "\n".join(pending), ts,
                                  extra={"line": first_line})
