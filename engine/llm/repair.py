"""JSON repair for LLM output (seed 000 §7 behaviour, §12 corpora).

The seed's state machine drops whitespace and bare words while tokenizing and closes braces
before brackets, so it fails its own corpus (``{'key': 'value'}`` loses its text; the streaming
test's ``{"memories":[{"content":"test"`` would close as ``}}]``). This module keeps the seed's
*behaviour* — find the JSON boundaries, tokenize strings properly, drop trailing commas, turn
single quotes into double quotes, close an unclosed string, balance structures, validate — but
edits the text minimally and in nesting order, so every corpus case yields exactly the expected
string, formatting included.

Safety limits (seed 000 §7): inputs over :data:`MAX_LENGTH` characters are not repaired, and an
input needing more than :data:`MAX_REPAIRS` edits is rejected (too broken to trust). When the
minimal editor cannot produce valid JSON, the ``json-repair`` library gets one bounded try; its
answer counts only if it is the same kind of container the input starts with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_LENGTH", "MAX_REPAIRS", "RepairResult", "repair_json", "repair_json_detailed"]

MAX_LENGTH = 50_000
"""seed 000 §7 ``maxLength``: longer inputs are refused."""
MAX_REPAIRS = 10
"""seed 000 §7 ``maxRepairs``: more edits than this and the input is refused."""

_LITERALS = {"True": "true", "False": "false", "None": "null", "NULL": "null",
             "TRUE": "true", "FALSE": "false", "undefined": "null"}
_JSON_WORDS = {"true", "false", "null"}
_CLOSER = {"{": "}", "[": "]"}


@dataclass(frozen=True, slots=True)
class RepairResult:
    """A successful repair.

    Attributes:
        text: Valid JSON text (the input itself when nothing needed fixing).
        value: ``json.loads(text)``: a dict or a list.
        repairs: Kinds of edit made, in order (``trailing_comma``, ``single_quotes``,
            ``unclosed_string``, ``unclosed_brace``, ``unclosed_bracket``, ``python_literal``,
            ``unquoted_key``, ``comment``, ``control_char``, ``dangling_key``,
            ``mismatched_close``, ``library``); empty when the input was already valid.
        unclosed: Containers the input left open at its end, outermost first (``"{"``/``"["``);
            non-empty means the text was cut off, so its last item may be incomplete.
        closed_string: True when the input ended inside a string.
    """

    text: str
    value: Any
    repairs: tuple[str, ...]
    unclosed: tuple[str, ...] = ()
    closed_string: bool = False

    @property
    def was_repaired(self) -> bool:
        """True when any edit was made."""
        return bool(self.repairs)

    @property
    def truncated(self) -> bool:
        """True when the input ended before its structure closed."""
        return bool(self.unclosed) or self.closed_string


class _Editor:
    """One pass over the text from its first ``{``/``[``, emitting a minimally edited copy."""

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.i = start
        self.out: list[str] = []
        self.stack: list[str] = []
        self.repairs: list[str] = []
        self.closed_string = False
        self.unclosed: tuple[str, ...] = ()

    def note(self, kind: str) -> None:
        if kind == "single_quotes" and kind in self.repairs:
            return  # one systematic style fix, not one repair per string
        self.repairs.append(kind)

    def run(self) -> str:
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            if c in "\"'":
                self.read_string(c)
                continue
            if c == "/" and self.i + 1 < n and text[self.i + 1] in "/*":
                self.skip_comment()
                continue
            if c in "{[":
                self.stack.append(c)
                self.out.append(c)
            elif c in "}]":
                if not self.stack:
                    break  # a stray closer ends the JSON
                if _CLOSER[self.stack[-1]] != c:
                    # '[1, 2}': close what is open first, then look at this closer again.
                    self.note("mismatched_close")
                    self.close_top()
                    if not self.stack:
                        break
                    continue
                self.close_top()
                if not self.stack:
                    return "".join(self.out)  # structure complete; ignore what follows
            elif c.isalpha() or c == "_":
                self.read_word()
                continue
            else:
                self.out.append(c)
            self.i += 1
        return self.finish()

    def finish(self) -> str:
        self.unclosed = tuple(self.stack)
        self.strip_trailing_comma()
        last = self.last_significant()
        if last == ":":
            self.out.append("null")
            self.note("dangling_key")
        while self.stack:
            self.note("unclosed_brace" if self.stack[-1] == "{" else "unclosed_bracket")
            self.close_top()
        return "".join(self.out)

    def close_top(self) -> None:
        opener = self.stack.pop()
        self.strip_trailing_comma()
        self.out.append(_CLOSER[opener])

    def last_significant(self) -> str:
        for piece in reversed(self.out):
            if piece.strip():
                return piece.strip()[-1]
        return ""

    def strip_trailing_comma(self) -> None:
        for k in range(len(self.out) - 1, -1, -1):
            piece = self.out[k]
            if not piece.strip():
                continue
            if piece == ",":
                del self.out[k]
                self.note("trailing_comma")
            return

    def read_string(self, quote: str) -> None:
        text, n = self.text, len(self.text)
        j = self.i + 1
        buf: list[str] = []
        closed = False
        while j < n:
            d = text[j]
            if d == "\\":
                if j + 1 >= n:
                    j += 1
                    break  # a dangling backslash at the very end is dropped
                nxt = text[j + 1]
                buf.append("'" if quote == "'" and nxt == "'" else d + nxt)
                j += 2
                continue
            if d == quote:
                closed = True
                j += 1
                break
            if quote == "'" and d == '"':
                buf.append('\\"')
            elif d in "\n\r\t":
                buf.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[d])
                self.note("control_char")
            else:
                buf.append(d)
            j += 1
        if quote == "'":
            self.note("single_quotes")
        if not closed:
            self.note("unclosed_string")
            self.closed_string = True
        self.out.append('"' + "".join(buf) + '"')
        self.i = j

    def read_word(self) -> None:
        text, n = self.text, len(self.text)
        j = self.i
        while j < n and (text[j].isalnum() or text[j] in "_-$"):
            j += 1
        word = text[self.i:j]
        k = j
        while k < n and text[k] in " \t\r\n":
            k += 1
        if word in _JSON_WORDS:
            self.out.append(word)
        elif word in _LITERALS:
            self.out.append(_LITERALS[word])
            self.note("python_literal")
        elif self.stack and self.stack[-1] == "{" and k < n and text[k] == ":" \
                and self.last_significant() in "{,":
            self.out.append(json.dumps(word))
            self.note("unquoted_key")
        else:
            self.out.append(word)  # left as is; validation decides
        self.i = j

    def skip_comment(self) -> None:
        text = self.text
        if text[self.i + 1] == "/":
            end = text.find("\n", self.i)
            self.i = len(text) if end == -1 else end
        else:
            end = text.find("*/", self.i + 2)
            self.i = len(text) if end == -1 else end + 2
        self.note("comment")


def _library_repair(fragment: str) -> Any:
    import json_repair  # local import: only needed on the rare slow path

    try:
        return json_repair.repair_json(fragment, return_objects=True)
    except (ValueError, RecursionError):  # pragma: no cover - the library is lenient
        return None


def repair_json_detailed(text: str, *, max_length: int = MAX_LENGTH,
                         max_repairs: int = MAX_REPAIRS) -> RepairResult | None:
    """Repair ``text`` into a JSON object or array, or return None if it cannot be trusted.

    Args:
        text: Raw model output (prose or a Markdown fence around the JSON is fine).
        max_length: Refuse longer inputs (seed 000 §7 safety check).
        max_repairs: Refuse inputs needing more edits than this.

    Returns:
        The repaired text with its parsed value and what was done, or None when the text has no
        ``{``/``[``, is too long, needs too many edits, or still does not parse.
    """
    if len(text) > max_length:
        return None
    starts = [p for p in (text.find("{"), text.find("[")) if p != -1]
    if not starts:
        return None  # seed 000 §7 findJSONBoundaries: no structure at all
    start = min(starts)
    editor = _Editor(text, start)
    candidate = editor.run()
    if len(editor.repairs) > max_repairs:
        return None
    try:
        value = json.loads(candidate)
    except ValueError:
        value = None
    else:
        return RepairResult(candidate, value, tuple(editor.repairs), editor.unclosed,
                            editor.closed_string)
    fallback = _library_repair(text[start:])
    wanted = dict if text[start] == "{" else list
    if isinstance(fallback, wanted) and fallback:
        fixed = json.dumps(fallback, ensure_ascii=False)
        return RepairResult(fixed, fallback, (*editor.repairs, "library"), editor.unclosed,
                            editor.closed_string)
    return None


def repair_json(text: str) -> str | None:
    """Seed 000 §7 ``repair(input)``: valid JSON text, or None when unrepairable.

    Example:
        >>> repair_json('{"key": "value",}')
        '{"key": "value"}'
    """
    result = repair_json_detailed(text)
    return None if result is None else result.text
