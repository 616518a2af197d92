"""Hostile input never costs good lines (issue 18): lone surrogates, out-of-range times and deep
nesting are per-line errors naming line, field and position; the good lines around them are
kept; re-ingesting a file queues no second review item."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from engine.errors import InputFormatError, ValidationError
from engine.ingest.contradiction import find_conflicts
from engine.ingest.jsonl import MAX_INPUT_FILE_BYTES
from engine.memory_engine import MemoryEngine
from engine.records import (
    MAX_METADATA_DEPTH,
    MAX_TIMESTAMP_MS,
    MemoryRecord,
    NewMemory,
    parse_timestamp,
)
from tests.engine.ingest.conftest import T0, TableEmbedder


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_surrogate_and_timestamp_lines_are_per_line_errors(engine: MemoryEngine,
                                                           tmp_path: Path) -> None:
    # json.dumps writes a lone surrogate as the (valid JSON) escape \ud800
    path = _write_lines(tmp_path / "hostile.jsonl", [
        json.dumps({"content": "Ada keeps the spare key under the mat"}),
        json.dumps({"content": "bad \ud800 text"}),
        json.dumps({"content": "Ada's van is parked on Elm Street"}),
        json.dumps({"content": "huge time", "created_at": 1e30}),
        json.dumps({"content": "negative time", "created_at": -1e20}),
        json.dumps({"content": "year one", "expires_at": "0001-01-01T00:00:00Z"}),
        json.dumps({"content": "tagged", "tags": ["ok", "x\udc00"]}),
        json.dumps({"content": "meta", "metadata": {"notes": [{"k\ud83d": 1}]}}),
        json.dumps({"content": "Ada's sister lives in Porto", "agent_id": "ad\udfffa"}),
        json.dumps({"content": "Ada plays chess on Sundays"}),
    ])
    report = engine.import_jsonl(path)
    by_line = {o.line: o for o in report.lines}
    expected = {
        2: "content: lone surrogate U+D800 at character 5",
        4: "created_at: must be a time in the years 1970..9999",
        5: "created_at: must be a time in the years 1970..9999",
        6: "expires_at: must be a time in the years 1970..9999",
        7: "tags: lone surrogate U+DC00 at character 2",
        8: "metadata.notes[0] key: lone surrogate U+D83D at character 2",
        9: "agent_id: lone surrogate U+DFFF at character 3",
    }
    for line, reason in expected.items():
        assert by_line[line].action == "error", line
        assert by_line[line].reason.startswith(reason), (line, by_line[line].reason)
        json.dumps(by_line[line].to_json()).encode("utf-8")  # the report itself is printable
    assert [by_line[n].action for n in (1, 3, 10)] == ["inserted"] * 3
    assert engine.count() == 3


def test_timestamps_at_the_edges_of_the_range() -> None:
    assert parse_timestamp(0, "created_at") == 0.0
    assert parse_timestamp("9999-12-31T23:59:59.999Z", "created_at") == MAX_TIMESTAMP_MS
    for bad in (MAX_TIMESTAMP_MS + 1, -1, "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z"):
        with pytest.raises(ValidationError, match="created_at: must be a time in the years"):
            parse_timestamp(bad, "created_at")
    # a float given directly (the API) is checked too, and so is a stored record's
    with pytest.raises(ValidationError, match="expires_at"):
        NewMemory("x", expires_at=1e30)
    record = MemoryRecord.create(NewMemory("x"), now_ms=T0)
    with pytest.raises(ValidationError, match="last_accessed"):
        record.replace(last_accessed=1e30)


def test_errors_carry_the_input_code() -> None:
    with pytest.raises(ValidationError) as info:
        NewMemory("a\ud800")
    assert info.value.code == "MEMORY_INPUT_INVALID"
    assert InputFormatError("f", 1, "content", "bad").code == "MEMORY_INPUT_INVALID"


def test_surrogates_in_flat_metadata_are_named_too() -> None:
    """Flat metadata takes a faster check (one encode of its JSON); the error is the same."""
    with pytest.raises(ValidationError, match=r"^metadata\.note: lone surrogate U\+DBFF at "
                                              r"character 3"):
        NewMemory("x", metadata={"ok": 1, "note": "ab\udbff"})
    with pytest.raises(ValidationError, match=r"^metadata key: lone surrogate U\+DC80"):
        NewMemory("x", metadata={"\udc80": 1})


def test_over_deep_metadata_is_refused_at_any_depth_python_can_build() -> None:
    nested: object = "leaf"
    for _ in range(MAX_METADATA_DEPTH - 1):
        nested = [nested]
    NewMemory("at the limit", metadata={"n": nested})  # metadata itself is the first level
    with pytest.raises(ValidationError, match=r"metadata\.n(\[0\]){31}: nested deeper"):
        NewMemory("one too deep", metadata={"n": [nested]})
    for _ in range(5000):  # deeper than json or the recursion limit would survive
        nested = [nested]
    with pytest.raises(ValidationError, match=f"nested deeper than {MAX_METADATA_DEPTH}"):
        NewMemory("too deep", metadata={"n": nested})


def test_over_deep_jsonl_line_is_a_line_error(engine: MemoryEngine, tmp_path: Path) -> None:
    deep = '{"content": "deep", "metadata": {"n": ' + "[" * 100 + "]" * 100 + "}}"
    path = _write_lines(tmp_path / "deep.jsonl", [
        deep, '{"content": "fine line"}', "[" * 100_000 + "]" * 100_000])
    report = engine.import_jsonl(path)
    assert [o.action for o in report.lines] == ["error", "inserted", "error"]
    assert f"nested deeper than {MAX_METADATA_DEPTH} levels" in report.lines[0].reason
    assert report.lines[2].reason == "not JSON: nested too deeply"


@pytest.mark.parametrize(("data", "line", "reason"), [
    (json.dumps([{"content": "Sam likes Porto"}, {"content": "Alex likes Lisbon"}],
                indent=2).encode(), 1, "is one JSON document spread over several lines"),
    (b"\n\n" + json.dumps({"content": "Sam likes Porto"}, indent=2).encode(), 3,
     "is one JSON document spread over several lines"),
    ('{"content": "Sam likes Porto"}\n'.encode("utf-16"), 1, "is UTF-16 text"),
])
def test_a_file_that_is_not_jsonl_is_refused_whole(engine: MemoryEngine, tmp_path: Path,
                                                   data: bytes, line: int, reason: str) -> None:
    # one error naming the file and what to do, not a "not JSON" error for every line
    path = tmp_path / "pretty.json"
    path.write_bytes(data)
    with pytest.raises(InputFormatError) as info:
        engine.import_jsonl(path)
    assert (info.value.source, info.value.line) == (str(path), line)
    assert info.value.reason.startswith(reason)
    assert engine.stats().records == 0 and engine.imports() == []


def test_a_file_refused_before_any_write_leaves_no_import_behind(engine: MemoryEngine,
                                                                  tmp_path: Path) -> None:
    for refused in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(InputFormatError):
            engine.import_jsonl(refused)
    with pytest.raises(InputFormatError):
        engine.import_conversation(tmp_path / "missing.json")
    assert engine.imports() == []  # not listed as imports that "stopped part way"


def test_json_errors_read_once(engine: MemoryEngine, tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "cut.jsonl", ['{"content": "cut off', "{oops"])
    reasons = [o.reason for o in engine.import_jsonl(path).lines]
    assert reasons == ["not JSON: Unterminated string starting at column 13",
                       "not JSON: Expecting property name enclosed in double quotes at column 2"]


def test_hostile_conversation(engine: MemoryEngine, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"deep\.json: file: not JSON: nested too deeply"):
        engine.import_conversation(deep)
    conversation = tmp_path / "talk.json"
    conversation.write_text(json.dumps([
        {"speaker": "ann", "content": "I moved to Lisbon last spring and I love the light"},
        {"speaker": "bo\ud800", "content": "where exactly?"},
        {"speaker": "cy", "content": "bad \udc01", "ts": 1},
        {"speaker": "dee", "content": "My sister Jo works as a nurse in Porto", "ts": 1e30},
        {"speaker": "ann", "content": "We adopted a grey cat called Miso in March"},
    ]), encoding="utf-8")
    report = engine.import_conversation(conversation)
    reasons = {o.line: o.reason for o in report.errors}
    assert reasons[2].startswith("message 2.speaker: lone surrogate U+D800 at character 3")
    assert reasons[3].startswith("message 3.content: lone surrogate U+DC01 at character 5")
    assert reasons[4].startswith("message 4.ts: must be a time in the years 1970..9999")
    assert {o.line for o in report.lines if o.action == "inserted"} == {1, 5}


def test_a_runaway_conversation_file_is_refused_before_it_is_read_whole(
        engine: MemoryEngine, tmp_path: Path) -> None:
    # A whole-file input was read whole: a 1 GiB file took 2.2 GB of memory before it was
    # refused, and /dev/zero ended in a MemoryError crash report (or the OOM killer).
    runaway = tmp_path / "export.json"
    with runaway.open("wb") as handle:
        handle.truncate(MAX_INPUT_FILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(InputFormatError, match=re.escape(
            f"export.json: file: larger than {MAX_INPUT_FILE_BYTES:,} bytes")):
        engine.import_conversation(runaway)
    at_limit = tmp_path / "talk.txt"
    at_limit.write_bytes(b"ann: We adopted a grey cat called Miso\r\nbo: in March\r\n")
    report = engine.import_conversation(at_limit)  # CRLF read as text mode read it
    assert [o.action for o in report.lines] == ["inserted", "inserted"]
    assert engine.count() == 2


def test_reingest_adds_no_review_items(engine: MemoryEngine, table: TableEmbedder,
                                       tmp_path: Path) -> None:
    """Line 2 waits for review against line 1's record. Line 3, inserted after it, resembles line
    2 more than line 1 does, so on a second run line 2's best candidate is line 3's record: it
    used to be deferred again, against that record, as a second item for the same line."""
    first, second, third = ("The courier comes on Tuesday mornings",
                            "The courier comes on Thursday mornings",
                            "The courier usually comes on Thursday mornings")
    axes = np.eye(table.dimension, dtype=np.float32)
    v2 = 0.6 * axes[0] + np.sqrt(1 - 0.6**2) * axes[1]
    for text, vector in ((first, axes[0]), (second, v2), (third, 0.8 * v2 + 0.6 * axes[2])):
        table.put(text, vector)  # cosines: 1-2 0.60, 2-3 0.80, 1-3 0.48 (review floor 0.50)
    path = _write_lines(tmp_path / "m.jsonl", [json.dumps({"content": c})
                                              for c in (first, second, third)])
    report = engine.import_jsonl(path)
    assert [o.action for o in report.lines] == ["inserted", "deferred", "inserted"]
    pending = engine.review_queue()
    again = engine.import_jsonl(path)
    assert [(o.action, o.reason) for o in again.lines][1] == ("skipped", "pending_review")
    assert again.counts["deferred"] == 0
    assert [i.id for i in engine.review_queue()] == [i.id for i in pending]
    # the same content of another agent is another memory, which waits on its own
    alone = engine.ingest(NewMemory(second, agent_id="someone-else"))
    assert alone.action.value == "inserted"


def test_identical_names_are_no_conflict() -> None:
    stored = "our favourite show was the A-Team when we were young kids"
    assert find_conflicts(stored, stored.replace("young kids", "small children")) == ()
    conflicts = find_conflicts("our favourite show was the A-Team when Bob was young",
                               "our favourite show was the A-Team when Carl was young")
    assert [(c.kind, c.existing, c.incoming) for c in conflicts] == [
        ("name", ("bob",), ("carl",))]
