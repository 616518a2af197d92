"""Fuzzing (hypothesis) of what enters from outside: JSONL import, conversation import, LLM
JSON (repair + extractor validation) and markdown cards.

The rule for every input: no crash; a bad input is a clear error naming the place (file, line,
field or item); good input is kept. (Record JSON, new memories, config env values and the
settings file are fuzzed in tests/engine/test_fuzz_inputs.py.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import EngineError, InputFormatError
from engine.llm.extractor import SCHEMA_VERSION, validate_extraction
from engine.llm.repair import repair_json
from engine.memory_engine import MemoryEngine
from engine.store import StoreSpec
from engine.tasks.cards import parse_card
from engine.tasks.errors import CardFormatError
from engine.text import content_hash
from tests.support.fakes import HashingEmbedder

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=10)
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _unique_text(extra: str = "") -> str:
    """Content no earlier example shares words with (so dedup never folds good lines)."""
    words = " ".join(f"u{uuid.uuid4().hex[:12]}" for _ in range(6))
    return f"{words} {extra}".strip()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryEngine]:
    """One embedded store for all examples of the module (opening Chroma is slow)."""
    engine = MemoryEngine.open(StoreSpec(str(tmp_path_factory.mktemp("fuzz") / "store")),
                               embedder=HashingEmbedder())
    yield engine
    engine.close()


# -- JSONL import ------------------------------------------------------------------------------

good_line = st.builds(
    lambda extra, fields: json.dumps({"content": _unique_text(extra), **fields}),
    st.text(alphabet="abcdefghij ", max_size=12),
    st.fixed_dictionaries({}, optional={
        "importance": st.floats(0, 1), "confidence": st.floats(0, 1),
        "tags": st.lists(st.sampled_from(["a", "b", "work"]), max_size=2, unique=True),
        "layer": st.sampled_from(["episodic", "semantic", "procedural"]),
        "category": st.sampled_from(["fact", "preference", "skill", "episode", "context"])}))
bad_line = (
    st.text(min_size=1).filter(lambda t: "\n" not in t and "\r" not in t and t.strip() != "")
    .map(lambda t: "{" + t)                                              # not JSON
    | json_values.filter(lambda v: not isinstance(v, dict)).map(json.dumps)   # not an object
    | st.dictionaries(st.sampled_from(["agent_id", "tags", "layer"]), json_values,
                      max_size=3).map(json.dumps)                        # no content
    | st.just('{"content": "x", "importance": NaN}')
    | st.just('{"content": "   "}')
)


@FUZZ
@given(st.lists(st.tuples(st.booleans(), good_line, bad_line), min_size=1, max_size=8),
       st.booleans())
def test_jsonl_import_keeps_good_lines_and_names_bad_ones(
        engine: MemoryEngine, tmp_path: Path, lines: list[tuple[bool, str, str]],
        invalid_utf8: bool) -> None:
    path = tmp_path / f"in-{uuid.uuid4().hex[:8]}.jsonl"
    chosen = [(good, good_text if good else bad_text) for good, good_text, bad_text in lines]
    data = b"\n".join(text.encode("utf-8") for _, text in chosen)
    if invalid_utf8:
        data += b"\n\xff\xfe{\"content\": \"bad bytes\"}"
    path.write_bytes(data + b"\n")
    report = engine.import_jsonl(path)
    outcomes = {outcome.line: outcome for outcome in report.lines}
    for number, (good, text) in enumerate(chosen, start=1):
        outcome = outcomes[number]
        if good:
            assert outcome.action == "inserted", (text, outcome)
            stored = engine.store.view.ids_with_hash(content_hash(json.loads(text)["content"]))
            assert stored == [outcome.id]
        else:
            assert outcome.action == "error" and outcome.reason, (text, outcome)
    if invalid_utf8:
        last = outcomes[len(chosen) + 1]
        assert last.action == "error" and "UTF-8" in last.reason


# -- conversation import -----------------------------------------------------------------------

message = st.fixed_dictionaries({
    "speaker": st.sampled_from(["Ana", "Ben"]),
    "content": st.text(alphabet="abcdefghij ", min_size=1, max_size=20).map(_unique_text),
    "ts": st.sampled_from(["2026-01-01T10:00:00Z", "2026-01-02T11:30:00Z"])})


@FUZZ
@given(st.lists(message, min_size=1, max_size=6) | json_values)
def test_conversation_import_never_crashes_and_names_the_file(
        engine: MemoryEngine, tmp_path: Path, payload: Any) -> None:
    path = tmp_path / f"conv-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    good = isinstance(payload, list) and payload and all(
        isinstance(m, dict) and set(m) == {"speaker", "content", "ts"} for m in payload)
    try:
        report = engine.import_conversation(path, agent_id="fuzz")
    except InputFormatError as exc:
        assert not good, exc
        assert path.name in str(exc)
        return
    for outcome in report.lines:
        assert outcome.line >= 1
        if outcome.action == "error":
            assert outcome.reason
    if good:
        assert len(report.lines) == len(payload)
        assert not report.errors
        kept = [o for o in report.lines if o.action == "inserted"]
        assert kept, report  # salience keeps at least one message of a short conversation


# -- LLM JSON: repair, then extractor validation -----------------------------------------------

item = st.fixed_dictionaries({
    "content": st.text(alphabet="abcdefghij klmnop", min_size=3, max_size=30)
    .filter(lambda t: t.strip()),
    "category": st.sampled_from(["fact", "preference", "skill", "episode", "context"]),
    "importance": st.floats(0, 1), "confidence": st.floats(0, 1),
    "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True)})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | json_values.map(json.dumps))
def test_llm_output_is_repaired_or_refused_never_crashes(text: str) -> None:
    fixed = repair_json(text)
    if fixed is None:
        return
    payload = json.loads(fixed)  # whatever repair returns parses
    valid, invalid, _repairs = validate_extraction(payload)
    for bad in invalid:
        assert bad.reason  # every refused item says why (and which field, when one is at fault)
    assert all(candidate.content for candidate in valid)


@settings(max_examples=150, deadline=None)
@given(st.lists(item, min_size=1, max_size=4, unique_by=lambda i: str(i["content"]).strip()),
       st.sampled_from(["plain", "fenced", "prose", "unclosed"]))
def test_good_llm_answers_survive_common_damage(items: list[dict[str, Any]], damage: str) -> None:
    text = json.dumps({"schemaVersion": SCHEMA_VERSION, "memories": items})
    if damage == "fenced":
        text = f"```json\n{text}\n```"
    elif damage == "prose":
        text = f"Here are the memories:\n{text}\nHope this helps."
    elif damage == "unclosed":
        text = text[:-2]  # the closing "]}" lost (a cut-off answer)
    fixed = repair_json(text)
    assert fixed is not None, text
    valid, invalid, _repairs = validate_extraction(json.loads(fixed))
    assert not invalid, invalid
    kept = {c.content for c in valid}
    assert kept == {str(i["content"]).strip() for i in items}


# -- markdown cards ----------------------------------------------------------------------------

front_value = st.text(alphabet="abc:-[]{}#'\" \t\n|>*&!%@`", max_size=20) | st.sampled_from(
    ["[a, b", "{x: 1", "- - -", "todo", "'unclosed", "&anchor", "*alias", "!!python/object:os"])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.builds(
    lambda key, value, body: f"---\n{key}: {value}\n---\n{body}".encode(),
    st.sampled_from(["id", "title", "status", "priority", "depends_on", "tags", "global",
                     "other"]), front_value, st.text(max_size=60)))
def test_card_parses_or_names_file_line_and_field(raw: bytes) -> None:
    try:
        card = parse_card("tasks/fuzz.md", raw)
    except CardFormatError as exc:
        assert str(exc).startswith("tasks/fuzz.md") and exc.field
        return
    except EngineError as exc:  # pragma: no cover - reported with the input
        raise AssertionError(f"{raw!r} raised {type(exc).__name__}, not CardFormatError") from exc
    assert card.path == "tasks/fuzz.md" and card.id


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcdefgh ", min_size=1, max_size=20).filter(lambda t: t.strip()),
       st.text(alphabet="abcdefgh \n#", max_size=80))
def test_good_card_keeps_its_fields(title: str, body: str) -> None:
    raw = f"---\nid: T-1\ntitle: {title.strip()}\nstatus: todo\n---\n{body}".encode()
    card = parse_card("tasks/t1.md", raw)
    assert card.id == "T-1" and card.title == title.strip() and card.status is not None
    assert card.body.rstrip("\n") == body.rstrip("\n") or card.body.strip() == body.strip()
