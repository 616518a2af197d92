"""Card parsing: front matter, references, anchors (seed 003 §3), compression (§5)."""

from __future__ import annotations

import pytest
import yaml

from engine.errors import InputFormatError
from engine.tasks.cards import (
    _fast_front_matter,
    compress_code_blocks,
    extract_anchor,
    parse_card,
    parse_sections,
    slugify,
)
from engine.tasks.errors import CardFormatError


def parse(text: str, path: str = "tasks/a.md"):  # type: ignore[no-untyped-def]  # test helper
    return parse_card(path, text.encode("utf-8"))


def test_front_matter_fields() -> None:
    card = parse("---\nid: AUTH-2\ntitle: Implement login\nstatus: In Progress\n"
                 "priority: High\ndepends_on: [DB-1, AUTH-1]\ntags: [api]\n---\n# Body\ntext\n")
    assert (card.id, card.title, card.status, card.priority) == (
        "AUTH-2", "Implement login", "in_progress", "high")
    assert card.depends_on == ("DB-1", "AUTH-1")
    assert card.depends_on_line == 6
    assert card.body == "# Body\ntext\n"
    assert card.body_line == 9
    assert card.is_task
    assert card.tags == ("api",)


def test_block_list_front_matter_goes_through_yaml() -> None:
    card = parse("---\nid: X\ndepends_on:\n  - A\n  - B\nstatus: todo\n---\nbody\n")
    assert card.depends_on == ("A", "B")


def test_plain_document_defaults() -> None:
    card = parse("# API reference\n\nSee @docs/auth.\n", path="docs/api.md")
    assert card.id == "docs/api"
    assert card.title == "API reference"
    assert card.status is None
    assert not card.is_task
    assert [(r.target, r.anchor, r.line) for r in card.references] == [("docs/auth", None, 3)]


@pytest.mark.parametrize(
    ("front", "line", "field"),
    [
        ("id: [unclosed\n", 2, "front matter"),
        ("id: X\nstatus: sleeping\n", 3, "status"),
        ("id: X\npriority: urgent!\n", 3, "priority"),
        ("id: X\ndepends_on: {a: 1}\n", 3, "depends_on"),
        ("id: X\nglobal: maybe\n", 3, "global"),
        ("id: has space\n", 2, "id"),
        ("- just\n- a list\n", 2, "front matter"),
    ],
)
def test_invalid_front_matter_names_file_line_and_field(front: str, line: int, field: str) -> None:
    with pytest.raises(CardFormatError) as info:
        parse(f"---\n{front}---\nbody\n", path="tasks/bad.md")
    error = info.value
    assert isinstance(error, InputFormatError)
    assert error.source == "tasks/bad.md"
    assert error.line == line
    assert error.field == field
    assert str(error).startswith(f"tasks/bad.md:{line}: {field}:")


def test_unclosed_front_matter() -> None:
    with pytest.raises(CardFormatError, match=r"tasks/a.md:1: front matter: .*no closing"):
        parse("---\nid: X\nbody without fence\n")


def test_not_utf8() -> None:
    with pytest.raises(CardFormatError, match="not UTF-8"):
        parse_card("x.md", b"\xff\xfe\x00bad")


@pytest.mark.parametrize(
    "front",
    ["id: T-1\ntitle: Login flow (v2)\nstatus: todo\ndepends_on: [A, B-2, docs/x]\n",
     "id: 12\npriority: low\n", "title: yes\n", "title: a: b\n", "depends_on: []\n",
     "title: Fix #12 now\n", "title: x # comment\n"],
)
def test_fast_front_matter_agrees_with_yaml(front: str) -> None:
    fast = _fast_front_matter(front)
    if fast is not None:
        assert fast == yaml.safe_load(front)


def test_references_skip_code_emails_and_keep_line_numbers() -> None:
    body = ("---\nid: X\n---\n"
            "Intro @docs/api#Login, then mail bob@example.com.\n"
            "Inline `@docs/not-a-ref` and @tasks/next.\n"
            "```python\n@dataclass\nclass A: ...  # @docs/nope\n```\n"
            "After fence @alice and @docs/api#login-flow.\n")
    card = parse(body)
    assert [(r.target, r.anchor, r.line) for r in card.references] == [
        ("docs/api", "Login", 4), ("tasks/next", None, 5), ("alice", None, 10),
        ("docs/api", "login-flow", 10)]


def test_slugify() -> None:
    assert slugify("Login Flow (v2)!") == "login-flow-v2"
    assert slugify("login_flow") == "login-flow"


DOC = """# Title
intro
## Login
login text
### Login errors
401
## Logout
bye
#### Deep
deep text
# Second top
tail
"""


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        # H1: runs to the next H1.
        ("Title", "# Title\nintro\n## Login\nlogin text\n### Login errors\n401\n## Logout\nbye\n"
                  "#### Deep\ndeep text\n"),
        # H2: includes its H3, stops at the next H2.
        ("Login", "## Login\nlogin text\n### Login errors\n401\n"),
        # H3: stops at the next heading of level <= 3 (here an H2).
        ("login-errors", "### Login errors\n401\n"),
        # H2 whose section runs past a deeper H4 and stops at an H1.
        ("Logout", "## Logout\nbye\n#### Deep\ndeep text\n"),
        # The last section runs to the end of the file.
        ("Second top", "# Second top\ntail\n"),
        ("Deep", "#### Deep\ndeep text\n"),
    ],
)
def test_anchor_extraction_boundaries(anchor: str, expected: str) -> None:
    assert extract_anchor(DOC, anchor) == expected


def test_anchor_at_end_without_trailing_newline_and_missing_anchor() -> None:
    assert extract_anchor("# A\nx\n## B\nlast line", "B") == "## B\nlast line\n"
    assert extract_anchor(DOC, "Nowhere") is None


def test_sections_ignore_hashes_in_code_and_see_setext() -> None:
    body = "Setext Title\n============\n```\n# not a heading\n```\n## Real\nx\n"
    sections = parse_sections(body)
    assert [(s.level, s.title, s.start, s.end) for s in sections] == [
        (1, "Setext Title", 0, 7), (2, "Real", 5, 7)]


def test_compress_code_blocks_keeps_signatures_and_summary() -> None:
    body = ("Text before.\n```typescript\n"
            "// Fetch a user by id.\n"
            "export async function fetchUserData(userId: string): Promise<User> {\n"
            "  const response = await fetch(`/api/users/${userId}`);\n"
            "  if (!response.ok) { throw new Error('x'); }\n"
            "  return (await response.json()) as User;\n"
            "}\n```\nText after.\n```\nshort\n```\n")
    out = compress_code_blocks(body, "src/api.md")
    assert "export async function fetchUserData(userId: string): Promise<User>" in out
    assert "Fetch a user by id.; 6 lines elided (full code: src/api.md)" in out
    assert "const response" not in out
    assert out.startswith("Text before.\n```typescript\n")
    assert "Text after.\n```\nshort\n```" in out
    assert len(out) < len(body)


def test_fences_with_tildes_longer_markers_and_unclosed() -> None:
    body = ("---\nid: X\n---\n"
            "~~~\n@docs/in-tilde\n~~~\n"
            "````md\n```\n@docs/in-nested\n```\n````\n"
            "   ```\n@docs/in-indented\n   ```\n"
            "@docs/visible\n"
            "```\n@docs/in-unclosed\n")
    assert [r.target for r in parse(body).references] == ["docs/visible"]
