"""Cards: the markdown files of a task workspace, and how one is parsed.

A card is a UTF-8 markdown file with optional YAML front matter between ``---`` fences::

    ---
    id: AUTH-2
    title: Implement login
    status: in_progress          # todo | in_progress | review | blocked | done | cancelled
    priority: high               # critical | high | medium | low
    depends_on: [DB-1, AUTH-1]   # ids of tasks that must be done first
    global: false                # true: a global doc, offered to every scene (seed 003 §1.2)
    ---
    # Login
    See @docs/api#Login and @docs/security.

A card without front matter is a plain document; its id is its path without ``.md``.
References are ``@target`` or ``@target#Anchor`` where ``target`` is a card's path without
``.md`` (``docs/api``) or a card's id. A ``@word`` without a ``/`` that names no card is taken
for an ordinary mention (``@alice``, ``@dataclass``) and ignored; a ``@a/b`` that names no card
is an error. References inside fenced code blocks and inline code are ignored.

Parsing is split for speed (seed 003 §6: 500 files cold in < 100 ms): the cold path reads the
front matter (a fast path for simple ``key: value`` lines, PyYAML's C loader otherwise) and scans
lines for references; markdown-it-py runs only when a card's sections are needed (anchors,
scene compression), and its result is cached by content hash.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.tasks.errors import CardFormatError
from engine.text import estimate_tokens

__all__ = [
    "PRIORITIES",
    "STATUSES",
    "Card",
    "Reference",
    "Section",
    "compress_code_blocks",
    "extract_anchor",
    "parse_card",
    "parse_sections",
    "slugify",
]

STATUSES: tuple[str, ...] = ("todo", "in_progress", "review", "blocked", "done", "cancelled")
PRIORITIES: tuple[str, ...] = ("critical", "high", "medium", "low")
_KNOWN_FIELDS = frozenset({"id", "title", "status", "priority", "depends_on", "global", "tags"})

try:  # the C loader is ~10x faster; fall back to the pure-Python one where it is missing
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _YamlLoader = yaml.SafeLoader


@dataclass(frozen=True, slots=True)
class Reference:
    """One ``@target`` or ``@target#Anchor`` in a card body.

    Attributes:
        target: As written, without ``@`` and anchor (``docs/api``).
        anchor: The heading asked for, or ``None`` for the whole card.
        line: 1-based line in the file (front matter included).
    """

    target: str
    anchor: str | None
    line: int


@dataclass(frozen=True, slots=True)
class Card:
    """A parsed card. Immutable; a changed file yields a new ``Card``.

    Attributes:
        id: Front matter ``id``, else the path without ``.md``.
        path: Path relative to the workspace root, ``/``-separated (``tasks/login.md``).
        title: Front matter ``title``, else the first ``# `` heading, else the id.
        status: Task status or ``None`` for a plain document.
        priority: Task priority or ``None``.
        depends_on: Ids of the tasks this one depends on, in file order.
        depends_on_line: Line of the ``depends_on`` key (for errors), 0 when absent.
        is_global: A global doc (seed 003 §1.2 priority 10), offered to every scene.
        references: The references of the body, in order.
        body: The text after the front matter.
        body_line: 1-based file line of the body's first line.
        content_hash: SHA-256 hex of the file's bytes.
        tags: Front matter ``tags``.
    """

    id: str
    path: str
    title: str
    status: str | None
    priority: str | None
    depends_on: tuple[str, ...]
    depends_on_line: int
    is_global: bool
    references: tuple[Reference, ...]
    body: str
    body_line: int
    content_hash: str
    tags: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        """``estimate_tokens(body)`` (computed on demand: the cold parse does not need it)."""
        return estimate_tokens(self.body)

    @property
    def ref_name(self) -> str:
        """The path without ``.md``: what ``@`` references use."""
        return self.path[:-3] if self.path.endswith(".md") else self.path

    @property
    def is_task(self) -> bool:
        """True for a card with a status (a task), False for a plain document."""
        return self.status is not None


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the body lines it governs (seed 003 §3).

    Attributes:
        level: 1 for ``#``, 2 for ``##``, …
        title: The heading text.
        slug: :func:`slugify` of the title (what anchors match).
        start: 0-based body line of the heading.
        end: 0-based body line one past the section (next heading of the same or a higher
            level, or the end of the body).
    """

    level: int
    title: str
    slug: str
    start: int
    end: int


# --- front matter ------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9 _./#()+-]*$")
_INT = re.compile(r"^-?[0-9]{1,9}$")
_YAML_SPECIAL = frozenset(
    {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", "none"}
)
_BAD_ID = re.compile(r"[\s#@]")
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*?))?[ \t]*$")


def _plain_scalar(raw: str) -> tuple[bool, object]:
    """Parse ``raw`` as YAML would, for the few shapes the fast path accepts."""
    if _INT.match(raw):
        return True, int(raw)
    if _PLAIN.match(raw) and raw.lower() not in _YAML_SPECIAL and " #" not in raw \
            and not raw.endswith(":") and ": " not in raw:
        return True, raw.rstrip()
    return False, None


def _fast_front_matter(text: str) -> dict[str, object] | None:
    """Parse simple ``key: value`` / ``key: [a, b]`` lines; None when YAML proper is needed."""
    result: dict[str, object] = {}
    for line in text.split("\n"):
        if not line.strip():
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            return None
        key, raw = match.group(1), (match.group(2) or "")
        if key in result:
            return None  # let YAML decide about duplicate keys
        if raw == "":
            return None  # a block value follows (or null): YAML proper
        if raw.startswith("[") and raw.endswith("]"):
            items: list[object] = []
            inner = raw[1:-1].strip()
            for part in inner.split(",") if inner else []:
                ok, value = _plain_scalar(part.strip())
                if not ok:
                    return None
                items.append(value)
            result[key] = items
            continue
        ok, value = _plain_scalar(raw)
        if not ok:
            return None
        result[key] = value
    return result


def _split_front_matter(text: str) -> tuple[str | None, str, int]:
    """Return (front matter text or None, body, 1-based body line)."""
    if not text.startswith("---"):
        return None, text, 1
    first_nl = text.find("\n")
    if first_nl < 0 or text[:first_nl].rstrip() != "---":
        return None, text, 1
    pos = first_nl + 1
    line_no = 2
    while True:
        nl = text.find("\n", pos)
        line = text[pos:] if nl < 0 else text[pos:nl]
        if line.rstrip() in ("---", "..."):
            body = "" if nl < 0 else text[nl + 1:]
            return text[first_nl + 1:pos], body, line_no + 1
        if nl < 0:
            return "", "", -1  # opened, never closed
        pos = nl + 1
        line_no += 1


def _field_line(front: str, key: str) -> int:
    """1-based file line of ``key:`` in the front matter (which starts on file line 2)."""
    for offset, line in enumerate(front.split("\n")):
        if line.startswith(f"{key}:"):
            return offset + 2
    return 1


def _load_front_matter(path: str, front: str) -> dict[str, object]:
    data = _fast_front_matter(front)
    if data is not None:
        return data
    try:
        loaded = yaml.load(front, Loader=_YamlLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        last = max(0, front.rstrip("\n").count("\n"))  # a mark at EOF points past the fence
        line = min(mark.line, last) + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise CardFormatError(path, line, "front matter", f"invalid YAML: {problem}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise CardFormatError(path, 2, "front matter",
                              f"must be a mapping of fields, got {type(loaded).__name__}")
    return {str(key): value for key, value in loaded.items()}


def _str_field(path: str, front: str, data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise CardFormatError(path, _field_line(front, key), key,
                              f"must be a string, got {value!r}")
    text = str(value).strip()
    if not text:
        raise CardFormatError(path, _field_line(front, key), key, "must not be empty")
    return text


def _list_field(path: str, front: str, data: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if isinstance(value, str | int) and not isinstance(value, bool):
        return (str(value),)
    if not isinstance(value, list) or not all(
        isinstance(item, str | int) and not isinstance(item, bool) for item in value
    ):
        raise CardFormatError(path, _field_line(front, key), key,
                              f"must be a list of ids, got {value!r}")
    return tuple(str(item).strip() for item in value)


# --- body scanning -----------------------------------------------------------------------

# "@" first, then a look-behind over it: a pattern that starts with a literal is scanned fast.
_REFERENCE = re.compile(
    r"@(?<![\w@./`-]@)([A-Za-z0-9_](?:[A-Za-z0-9_./-]*[A-Za-z0-9_])?)"
    r"(?:#([A-Za-z0-9_][\w.-]*\w|\w))?"
)
_H1 = re.compile(r"^# +(.+?)[ #]*$", re.MULTILINE)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


def _closes(fence: str, line: str) -> bool:
    """True when ``line`` closes a block opened by ``fence`` (same character, not shorter)."""
    match = _FENCE_CLOSE.match(line)
    return match is not None and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)


def _fence_lines(body: str) -> list[tuple[int, int, str, str]]:
    """Fence lines as (line start, line end, marker, rest of line), in order.

    Found with ``str.find`` on the two markers: a regex anchored at every line start costs
    several times more on the cold path.
    """
    found: list[tuple[int, int, str, str]] = []
    for char in "`~":
        needle = char * 3
        pos = body.find(needle)
        while pos >= 0:
            line_start = body.rfind("\n", 0, pos) + 1
            run_end = pos
            while run_end < len(body) and body[run_end] == char:
                run_end += 1
            line_end = body.find("\n", run_end)
            line_end = len(body) if line_end < 0 else line_end
            indent = body[line_start:pos]
            if len(indent) <= 3 and not indent.strip(" "):
                found.append((line_start, line_end, body[pos:run_end], body[run_end:line_end]))
            pos = body.find(needle, line_end)
    found.sort()
    return found


def _fence_spans(body: str) -> list[tuple[int, int]]:
    """Character spans of fenced code blocks (an unclosed fence runs to the end)."""
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    fence = ""
    for line_start, line_end, marker, rest in _fence_lines(body):
        if open_at is None:
            open_at, fence = line_start, marker
        elif marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip():
            spans.append((open_at, line_end))
            open_at = None
    if open_at is not None:
        spans.append((open_at, len(body)))
    return spans


def _in_inline_code(line: str, column: int) -> bool:
    return any(m.start() <= column < m.end() for m in _INLINE_CODE.finditer(line))


def _scan_references(body: str, body_line: int) -> tuple[tuple[Reference, ...], str | None]:
    """References outside code, and the first ``# `` heading (for the title).

    One regex pass over the body; code fences are located only when the body has one, and
    inline code is checked only on lines with a backtick (cold-parse speed, seed 003 §6).
    """
    fences = _fence_spans(body) if ("```" in body or "~~~" in body) else []

    def in_fence(pos: int) -> bool:
        return any(start <= pos < end for start, end in fences)

    first_h1 = next((m.group(1).strip() for m in _H1.finditer(body) if not in_fence(m.start())),
                    None)
    if "@" not in body:
        return (), first_h1
    refs: list[Reference] = []
    last_pos, last_line = 0, 0
    for match in _REFERENCE.finditer(body):
        pos = match.start()
        if fences and in_fence(pos):
            continue
        line_start = body.rfind("\n", 0, pos) + 1
        line_end = body.find("\n", pos)
        line = body[line_start:line_end if line_end >= 0 else len(body)]
        if "`" in line and _in_inline_code(line, pos - line_start):
            continue
        last_line += body.count("\n", last_pos, pos)
        last_pos = pos
        refs.append(Reference(match.group(1), match.group(2), body_line + last_line))
    return tuple(refs), first_h1


def parse_card(path: str, raw: bytes, digest: str | None = None) -> Card:
    """Parse one card file.

    Args:
        path: Path relative to the workspace root, ``/``-separated.
        raw: The file's bytes (UTF-8).
        digest: ``sha256(raw).hexdigest()`` when the caller has it already.

    Raises:
        CardFormatError: not UTF-8, unclosed or invalid front matter, or a field of the wrong
            type or value; the message names the file, the line and the field.
    """
    digest = digest or hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CardFormatError(path, 0, "encoding", f"not UTF-8 ({exc.reason})") from exc
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    front, body, body_line = _split_front_matter(text)
    if body_line < 0:
        raise CardFormatError(path, 1, "front matter", "opening '---' has no closing '---'")
    data: dict[str, object] = _load_front_matter(path, front) if front is not None else {}
    front_text = front or ""
    default_id = path[:-3] if path.endswith(".md") else path
    card_id = _str_field(path, front_text, data, "id") or default_id
    if _BAD_ID.search(card_id):
        raise CardFormatError(path, _field_line(front_text, "id"), "id",
                              f"must not contain spaces, '#' or '@', got {card_id!r}")
    status = _str_field(path, front_text, data, "status")
    if status is not None:
        status = status.lower().replace("-", "_").replace(" ", "_")
        if status not in STATUSES:
            raise CardFormatError(path, _field_line(front_text, "status"), "status",
                                  f"must be one of {', '.join(STATUSES)}, got {status!r}")
    priority = _str_field(path, front_text, data, "priority")
    if priority is not None:
        priority = priority.lower()
        if priority not in PRIORITIES:
            raise CardFormatError(path, _field_line(front_text, "priority"), "priority",
                                  f"must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    depends_on = _list_field(path, front_text, data, "depends_on")
    if depends_on and status is None:
        status = "todo"  # a card with dependencies is a task even without a status line
    is_global = data.get("global", False)
    if not isinstance(is_global, bool):
        raise CardFormatError(path, _field_line(front_text, "global"), "global",
                              f"must be true or false, got {is_global!r}")
    refs, first_h1 = _scan_references(body, body_line)
    title = _str_field(path, front_text, data, "title") or first_h1 or card_id
    return Card(
        id=card_id,
        path=path,
        title=title,
        status=status,
        priority=priority,
        depends_on=depends_on,
        depends_on_line=_field_line(front_text, "depends_on") if depends_on else 0,
        is_global=is_global,
        references=refs,
        body=body,
        body_line=body_line,
        content_hash=digest,
        tags=_list_field(path, front_text, data, "tags"),
    )


# --- sections and anchors (seed 003 §3) -----------------------------------------------------

_SLUG_DROP = re.compile(r"[^\w\s-]")
_SLUG_SPACE = re.compile(r"[\s_-]+")


def slugify(text: str) -> str:
    """Anchor form of a heading: lower case, punctuation dropped, runs of spaces → ``-``."""
    return _SLUG_SPACE.sub("-", _SLUG_DROP.sub("", text.lower())).strip("-")


@dataclass(slots=True)
class _Parser:
    md: Any = field(default=None)

    def get(self) -> Any:
        if self.md is None:
            from markdown_it import MarkdownIt

            self.md = MarkdownIt("commonmark")
        return self.md


_PARSER = _Parser()


def parse_sections(body: str) -> tuple[Section, ...]:
    """Headings of ``body`` with the line ranges they govern (markdown-it-py token stream).

    Seed 003 §3 state machine: a section starts at its heading and stops at the next heading
    of the same or a higher level (``<=`` the saved level), or at the end of the file.
    Setext headings count; ``#`` lines inside code blocks do not.
    """
    tokens = _PARSER.get().parse(body)
    total = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    heads: list[tuple[int, str, int]] = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            inline = tokens[index + 1]
            heads.append((int(token.tag[1]), inline.content.strip(), token.map[0]))
    sections: list[Section] = []
    for position, (level, title, start) in enumerate(heads):
        end = total
        for other_level, _, other_start in heads[position + 1:]:
            if other_level <= level:
                end = other_start
                break
        sections.append(Section(level, title, slugify(title), start, end))
    return tuple(sections)


def extract_anchor(body: str, anchor: str, sections: Sequence[Section] | None = None) -> str | None:
    """The text of the section whose heading matches ``anchor`` (by slug), or None.

    Args:
        body: The card body.
        anchor: As written after ``#`` (``Login``, ``login-flow``).
        sections: ``parse_sections(body)`` when the caller has it cached.
    """
    wanted = slugify(anchor)
    for section in sections if sections is not None else parse_sections(body):
        if section.slug == wanted:
            lines = body.split("\n")[section.start:section.end]
            return "\n".join(lines).rstrip("\n") + "\n"
    return None


# --- semantic compression (seed 003 §5 strategy 1) -------------------------------------------

_SIGNATURE = re.compile(
    r"^\s*(?:export\s+)?(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?(?:def|class|fn|func|function|"
    r"interface|struct|enum|trait|impl|type|CREATE\s+TABLE|create\s+table)\b"
    r"|^\s*(?:export\s+)?(?:const|let)\s+\w+\s*=\s*(?:async\s*)?\(.*\)\s*=>"
    r"|^\s*(?:public|private|protected)\s+[\w<>\[\], ]+\s+\w+\s*\("
)
_COMMENT = re.compile(r'^\s*(?:#|//|--|/\*+|\*|"""|\'\'\')\s*(.*?)\s*(?:\*/|"""|\'\'\')?\s*$')


def _summarize_block(lines: Sequence[str]) -> str:
    for line in lines:
        match = _COMMENT.match(line)
        if match and match.group(1) and not line.lstrip().startswith("#!"):
            return match.group(1)
    return ""


def compress_code_blocks(body: str, source: str = "") -> str:
    """Replace each fenced code block by its signatures and a one-line summary.

    Seed 003 §5 strategy 1: keep what a reader needs to call the code (the ``def``/``fn``/
    ``class``… lines) and say where the rest is. Blocks of 3 lines or fewer stay as they are.

    Args:
        body: Card body.
        source: Card path, named in the summary line so the reader can fetch the full code.
    """
    lines = body.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        match = _FENCE.match(line)
        if not match:
            out.append(line)
            index += 1
            continue
        fence = match.group(1)
        close = index + 1
        while close < len(lines) and not _closes(fence, lines[close]):
            close += 1
        code = lines[index + 1:close]
        if len(code) <= 3:
            out.extend(lines[index:close + 1])
        else:
            signatures = [c.rstrip().rstrip("{").rstrip() for c in code if _SIGNATURE.match(c)]
            summary = _summarize_block(code)
            where = f" (full code: {source})" if source else ""
            out.append(line)
            out.extend(signatures)
            note = f"{summary}; " if summary else ""
            out.append(f"  … {note}{len(code)} lines elided{where}")
            out.append(lines[close] if close < len(lines) else fence)
        index = close + 1
    return "\n".join(out)
