"""Conversation files in the formats people have: detection, reading, the salience cut, and
the dry run that decides everything and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputFormatError, ValidationError
from engine.events import EventFilter
from engine.ingest.conversations import ConversationFormat, parse_conversation
from engine.ingest.importer import SalienceCut
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery
from engine.records import parse_timestamp
from tests.engine.ingest.conftest import TableEmbedder
from tests.support.conversations import ANTHROPIC, FORMATS, LOCOMO, OPENAI, TRANSCRIPT


def _file(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "data", "kind", "turns"), FORMATS,
                         ids=[f[2].value for f in FORMATS])
def test_each_format_is_detected_and_read(name: str, data: object, kind: ConversationFormat,
                                          turns: list[tuple[str, str]]) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    conversation = parse_conversation(text, name)
    assert conversation.format is kind
    assert [(m.speaker, m.content) for m in conversation.messages if m.usable] == turns


def test_instructions_and_tool_traffic_are_reported_not_stored() -> None:
    messages = parse_conversation(json.dumps(OPENAI), "o.json").messages
    assert [(m.number, m.skip) for m in messages if m.skip] == [
        (1, "instructions"), (4, "tool_traffic"), (5, "tool_traffic")]
    blocks = parse_conversation(json.dumps(ANTHROPIC), "a.json").messages
    assert [(m.number, m.skip) for m in blocks if m.skip] == [(3, "tool_traffic")]


def test_locomo_turns_carry_session_times_and_ids() -> None:
    messages = parse_conversation(json.dumps(LOCOMO), "l.json").messages
    first, second, third = messages
    assert first.ts == parse_timestamp("2023-05-08T13:56:00Z", "t")
    assert second.ts == (first.ts or 0) + 1000.0  # one second per turn keeps the order
    assert third.ts == parse_timestamp("2023-06-09T10:00:00Z", "t")
    assert third.extra == {"sample": "conv-x", "session": 2, "dia_id": "D2:1"}
    # the whole file `eval locomo` reads is a list of such samples
    single = parse_conversation(json.dumps(LOCOMO[0]), "one.json")
    assert single.format is ConversationFormat.LOCOMO and len(single.messages) == 3


def test_transcript_stamps_become_times() -> None:
    messages = parse_conversation(TRANSCRIPT, "t.txt").messages
    assert messages[0].ts == parse_timestamp("2026-03-01T09:00:00Z", "t")
    assert messages[2].ts is None


@pytest.mark.parametrize(("text", "expected"), [
    ('{"title": "notes", "body": "x"}', "keys body, title"),
    ("42", "line 1 is not"),
    ("just some prose without a speaker\nand another line", "line 1 is not"),
    ('[{"foo": 1}, {"bar": 2}]', "none of its 2 messages"),
    ("", "empty"),
])
def test_an_unknown_format_lists_the_accepted_ones(text: str, expected: str) -> None:
    with pytest.raises(InputFormatError) as caught:
        parse_conversation(text, "weird.json")
    message = str(caught.value)
    assert expected in message
    assert "OpenAI chat" in message and "LoCoMo" in message and "Name: text" in message


def test_deep_nesting_and_broken_json_are_clear_errors() -> None:
    with pytest.raises(InputFormatError, match="nested too deeply"):
        parse_conversation("[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(InputFormatError, match="not JSON"):
        parse_conversation('[{"speaker": "a", "content": }]', "broken.json")


def test_salience_cut_parses_and_refuses_nonsense() -> None:
    assert SalienceCut.parse("all") == SalienceCut("all")
    assert SalienceCut.parse("25%") == SalienceCut("top", 25.0)
    for bad in ("most", "0%", "150"):
        with pytest.raises(ValidationError, match="keep"):
            SalienceCut.parse(bad)


class TestImport:
    def test_each_format_imports_its_turns_with_speakers_and_times(
            self, engine: MemoryEngine, tmp_path: Path) -> None:
        for name, data, kind, turns in FORMATS:
            path = _file(tmp_path, name, data)
            report = engine.import_conversation(path, agent_id=kind.value,
                                                keep=SalienceCut("all"))
            assert report.format == kind.value and not report.dry_run
            stored = [engine.get(o.id or "") for o in report.lines if o.action == "inserted"]
            assert [r.content for r in stored] == [f"{s}: {t}" for s, t in turns]
            assert [r.metadata["speaker"] for r in stored] == [s for s, _ in turns]
            assert all(r.agent_id == kind.value for r in stored)
        locomo = engine.list_records(RecordQuery(agent_id="locomo")).records
        assert {r.metadata.get("dia_id") for r in locomo} == {"D1:1", "D1:2", "D2:1"}
        assert min(r.created_at for r in locomo) == parse_timestamp("2023-05-08T13:56:00Z", "t")

    def test_dry_run_writes_nothing_and_agrees_with_the_real_import(
            self, make_engine: Any, table: TableEmbedder, tmp_path: Path) -> None:
        engine = make_engine()
        messages = [{"speaker": "Kim", "content": "Kim's favourite colour is green"},
                    {"speaker": "Kim", "content": "Kim likes the colour green most"},
                    {"speaker": "Kim", "content": "Kim's favourite colour is green"},
                    {"speaker": "Kim", "content": "Kim works at the harbour office"}]
        # 0.96: at least the agent tier's merge point, where the embedding is trusted alone
        table.pair("Kim: Kim's favourite colour is green", "Kim: Kim likes the colour green most",
                   0.96)
        path = _file(tmp_path, "kim.json", messages)
        before_events = len(engine.events.query(EventFilter(limit=1000)))
        preview = engine.import_conversation(path, agent_id="kim", keep=SalienceCut("all"),
                                             dry_run=True)
        assert preview.dry_run and engine.count() == 0
        assert len(engine.events.query(EventFilter(limit=1000))) == before_events
        assert engine.review_queue() == []
        real = engine.import_conversation(path, agent_id="kim", keep=SalienceCut("all"))
        assert [(o.action, o.reason) for o in preview.lines] == \
            [(o.action, o.reason) for o in real.lines]
        assert preview.counts == real.counts and preview.counts["inserted"] == 2
        assert [o.content for o in preview.lines] == [f"Kim: {m['content']}" for m in messages]

    def test_top_percent_keeps_that_share(self, engine: MemoryEngine, tmp_path: Path) -> None:
        messages = [{"speaker": "Ola", "content": f"Routine note number {i} about the rota"}
                    for i in range(20)]
        messages[7]["content"] = "I am so excited, we won the league!"
        path = _file(tmp_path, "ola.json", messages)
        report = engine.import_conversation(path, agent_id="ola", keep=SalienceCut("top", 10),
                                            dry_run=True)
        kept = [o.line for o in report.lines if o.reason != "not_salient"]
        assert len(kept) == 2 and 8 in kept  # 10% of 20, the emotional one among them
        assert report.keep == "the top 10% by salience"
