"""Extractor and summarizer: schema validation, repair, truncation, fallbacks with reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import InputFormatError
from engine.events import Event, EventBus
from engine.llm import (
    EVENT_FALLBACK,
    CircuitConfig,
    DeterministicClock,
    DeterministicRNG,
    Extractor,
    LLMGateway,
    LLMSettings,
    Summarizer,
    load_conversation,
    parse_conversation,
    validate_extraction,
)
from engine.llm.extractor import heuristic_extract
from engine.llm.summarizer import heuristic_summary
from engine.records import Category, TrustTier
from tests.engine.llm.conftest import MakeRig
from tests.support.llm_server import Behaviour, LLMTestServer

CONVERSATION = parse_conversation({
    "agent_id": "agent-7",
    "messages": [
        {"id": "u1", "role": "user", "content": "Hi! I love hiking in the Alps."},
        {"id": "a1", "role": "assistant", "content": "That sounds amazing. I like it too."},
        {"id": "u2", "role": "user", "content": "My sister lives in Lyon. I work as a nurse."},
    ],
})


def _memory(content: str, **extra: object) -> dict[str, object]:
    return {"content": content, "category": "fact", "importance": 0.6, "confidence": 0.8,
            **extra}


def _answer(*memories: dict[str, object]) -> str:
    return json.dumps({"schemaVersion": "v1", "memories": list(memories)})


def test_validation_reports_each_invalid_item() -> None:
    payload = {"schemaVersion": "v1", "memories": [
        _memory("User works as a nurse", category="FACT", tags=["job"]),
        _memory(""),
        _memory("x", category="opinion"),
        _memory("y", importance=1.5),
        _memory("z", confidence="high"),
        "just text",
        _memory("w", tags="not-a-list"),
    ]}
    valid, invalid, repairs = validate_extraction(payload)
    assert [c.content for c in valid] == ["User works as a nurse"]
    assert valid[0].category is Category.FACT
    assert valid[0].tags == ("job",)
    assert [(i.index, i.reason, i.field) for i in invalid] == [
        (1, "invalid_field", "content"), (2, "invalid_field", "category"),
        (3, "invalid_field", "importance"), (4, "invalid_field", "confidence"),
        (5, "not_an_object", None), (6, "invalid_field", "tags")]
    assert repairs == ()


def test_schema_version_is_checked() -> None:
    valid, invalid, _ = validate_extraction({"schemaVersion": "v2", "memories": []})
    assert valid == ()
    assert invalid[0].reason == "schema_version_mismatch"
    assert validate_extraction([])[1][0].reason == "not_an_object"
    assert validate_extraction({"schemaVersion": "v1"})[1][0].field == "memories"


@pytest.mark.parametrize(("field", "default"), [
    ("category", "fact"), ("importance", None), ("confidence", 0.5)])
@pytest.mark.parametrize("how", ["missing", "null"])
def test_missing_optional_field_takes_its_default_and_is_a_repair(field: str,
                                                                  default: object,
                                                                  how: str) -> None:
    item = _memory("User works as a nurse", category="preference", importance=0.7,
                   confidence=0.9)
    if how == "missing":
        del item[field]
    else:
        item[field] = None
    [candidate], invalid, repairs = validate_extraction(
        {"schemaVersion": "v1", "memories": [item]})
    assert invalid == ()
    value = candidate.category.value if field == "category" else getattr(candidate, field)
    assert value == default
    assert [r.to_json() for r in repairs] == [
        {"index": 0, "field": field, "value": default, "reason": how}]


def test_seed_example_memory_is_kept_with_every_default() -> None:
    # seed 000 §8's own example answer: {"content": "test"}, and no schemaVersion at all.
    [candidate], invalid, repairs = validate_extraction({"memories": [{"content": "test"}]})
    assert invalid == ()
    assert (candidate.content, candidate.category, candidate.importance,
            candidate.confidence) == ("test", Category.FACT, None, 0.5)
    assert [(r.index, r.field, r.value) for r in repairs] == [
        (None, "schemaVersion", "v1"), (0, "category", "fact"), (0, "importance", None),
        (0, "confidence", 0.5)]
    new = candidate.to_new_memory(agent_id="a", source="extractor:test")
    assert new.importance is None  # left to the ingest pipeline (surprise × category weight)


def test_missing_content_is_still_an_error_naming_the_field() -> None:
    valid, invalid, repairs = validate_extraction({"schemaVersion": "v1", "memories": [
        {"category": "fact", "confidence": 0.9}, {"content": "User likes tea"}]})
    assert [c.content for c in valid] == ["User likes tea"]
    assert [(i.index, i.reason, i.field) for i in invalid] == [(0, "missing_field", "content")]
    # the rejected item's defaults were never used, so only the kept item's are reported
    assert {r.index for r in repairs} == {1}


def test_defaulted_importance_stays_unknown_when_combined() -> None:
    [candidate], _, _ = validate_extraction({"memories": [
        {"content": "User likes tea"}, {"content": "user likes tea.", "confidence": 0.7}]})
    assert candidate.importance is None
    assert candidate.confidence == 0.583333  # seed 000 §5: merge(0.5 default, 0.7)


def test_same_fact_twice_merges_confidence() -> None:
    payload = {"schemaVersion": "v1", "memories": [
        _memory("User likes tea.", confidence=0.8, importance=0.3),
        _memory("user likes tea", confidence=0.6, importance=0.9)]}
    [candidate], _, _ = validate_extraction(payload)
    assert candidate.confidence == 0.685714  # seed 000 §5 merge
    assert candidate.importance == 0.9


def test_candidate_becomes_new_memory() -> None:
    [candidate], _, _ = validate_extraction({"schemaVersion": "v1", "memories": [
        _memory("User is a nurse", emotionalContext="proud", sourceMessageIds=["u2"])]})
    new = candidate.to_new_memory(agent_id="agent-7", source="extractor:test")
    assert (new.content, new.agent_id, new.source_tier) == ("User is a nurse", "agent-7",
                                                            TrustTier.AUTO)
    assert new.metadata == {"emotional_context": "proud", "source_message_ids": ["u2"]}
    assert candidate.to_json()["contentHash"] == new.content_hash


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_extract_through_the_real_server(server: LLMTestServer, make_rig: MakeRig,
                                         kind: str) -> None:
    server.script(Behaviour(content=_answer(_memory("User works as a nurse"),
                                            _memory("User's sister lives in Lyon")), chunks=7))
    rig = make_rig(kind)
    result = Extractor(rig.gateway, rig.bus, DeterministicRNG(1)).extract(CONVERSATION)
    assert result.source == "llm"
    assert [c.content for c in result.candidates] == ["User works as a nurse",
                                                      "User's sister lives in Lyon"]
    assert result.invalid == ()
    prompt = server.requests[-1].body
    assert "[u2] user: My sister lives in Lyon." in json.dumps(prompt)
    assert rig.kinds()[-1] == "llm:extraction"


def test_small_model_answer_without_optional_fields_is_kept(server: LLMTestServer,
                                                             make_rig: MakeRig) -> None:
    # What small local models answer: no schemaVersion, memories with content only.
    server.script(Behaviour(content=json.dumps({"memories": [
        {"content": "User works as a nurse"},
        {"content": "User's sister lives in Lyon", "confidence": 0.9}]})))
    rig = make_rig("openai")
    result = Extractor(rig.gateway, rig.bus, DeterministicRNG(1)).extract(CONVERSATION)
    assert (result.source, result.invalid) == ("llm", ())
    assert [(c.content, c.confidence) for c in result.candidates] == [
        ("User works as a nurse", 0.5), ("User's sister lives in Lyon", 0.9)]
    document = result.to_json()
    assert {(r["index"], r["field"]) for r in document["field_repairs"]} == {
        (None, "schemaVersion"), (0, "category"), (0, "importance"), (0, "confidence"),
        (1, "category"), (1, "importance")}
    extraction = [e for e in rig.events if e.kind == "llm:extraction"][-1]
    assert extraction.decision_reason == "ok"
    assert len(extraction.payload["field_repairs"]) == 6


def test_model_json_is_repaired(server: LLMTestServer, make_rig: MakeRig) -> None:
    broken = ("Here you go:\n{'schemaVersion': 'v1', 'memories': [{'content': 'User likes tea',"
              " 'category': 'preference', 'importance': 0.5, 'confidence': 0.9},]}")
    server.script(Behaviour(content=broken))
    rig = make_rig("openai", stream=False)
    result = Extractor(rig.gateway).extract(CONVERSATION)
    assert [c.content for c in result.candidates] == ["User likes tea"]
    assert "single_quotes" in result.repairs and "trailing_comma" in result.repairs


def test_unrepairable_answer_is_rejected_not_half_used(server: LLMTestServer,
                                                       make_rig: MakeRig) -> None:
    server.script(Behaviour(content="I'm sorry, I can't do that."))
    rig = make_rig("openai", stream=False)
    result = Extractor(rig.gateway).extract(CONVERSATION)
    assert result.candidates == ()
    assert result.invalid[0].reason == "unrepairable_json"
    assert result.source == "llm"


@pytest.mark.parametrize("stream", [True, False])
def test_answer_cut_inside_a_memory_drops_that_memory(server: LLMTestServer, make_rig: MakeRig,
                                                      stream: bool) -> None:
    text = _answer(_memory("User works as a nurse"), _memory("User's sister lives in Lyon"))
    cut = text[: text.index("Lyon") + 2]  # the model hit max_tokens inside the 2nd memory
    server.script(Behaviour(content=cut, finish_reason="length"))
    rig = make_rig("anthropic", stream=stream)
    result = Extractor(rig.gateway).extract(CONVERSATION)
    assert [c.content for c in result.candidates] == ["User works as a nurse"]
    assert [(i.index, i.reason) for i in result.invalid] == [(1, "truncated")]


def test_stream_cut_every_time_falls_back_without_half_memories(server: LLMTestServer,
                                                                make_rig: MakeRig) -> None:
    text = _answer(_memory("User works as a nurse in Lyon hospital"))
    server.default = Behaviour("truncate", content=text, chunks=8, cut_after=3)
    rig = make_rig("openai", max_attempts=3)
    result = Extractor(rig.gateway, rig.bus).extract(CONVERSATION)
    assert result.source == "heuristic"
    assert result.fallback_reason == "provider_error"
    assert all("Lyon hospital" not in c.content for c in result.candidates)
    assert len(server.requests) == 3


def test_fallback_reasons_are_said(server: LLMTestServer, make_rig: MakeRig) -> None:
    events: list[Event] = []
    bus = EventBus(clock=DeterministicClock(0))
    bus.subscribe(events.append)
    # No provider.
    result = Extractor(LLMGateway(LLMSettings()), bus).extract(CONVERSATION)
    assert (result.source, result.fallback_reason) == ("heuristic", "no_provider")
    # Budget spent.
    rig = make_rig("openai", daily_budget_usd=0.000001)
    assert Extractor(rig.gateway, bus).extract(CONVERSATION).fallback_reason == "budget_exceeded"
    # Breaker open.
    server.default = Behaviour("status", status=500)
    rig = make_rig("openai", circuit=CircuitConfig(window_size=2), max_attempts=2)
    assert Extractor(rig.gateway, bus).extract(CONVERSATION).fallback_reason == "circuit_open"
    assert Extractor(rig.gateway, bus).extract(CONVERSATION).fallback_reason == "circuit_open"
    assert [e.decision_reason for e in events if e.kind == EVENT_FALLBACK] == \
        ["no_provider", "budget_exceeded", "circuit_open", "circuit_open"]
    # Summarizer says why too.
    summary = Summarizer(rig.gateway, bus).summarize(["One. Two.", "Three."])
    assert (summary.source, summary.fallback_reason, summary.text) == \
        ("heuristic", "circuit_open", "One. Three.")


def test_summarizer_through_the_gateway(server: LLMTestServer, make_rig: MakeRig) -> None:
    server.script(Behaviour(content="User hikes and works as a nurse.\n- hikes\n- nurse"))
    rig = make_rig("anthropic")
    result = Summarizer(rig.gateway).summarize(["I love hiking.", "I work as a nurse."])
    assert result.source == "llm"
    assert result.text.startswith("User hikes")
    assert "Memories to compact" in json.dumps(server.requests[-1].body)


def test_heuristic_extraction() -> None:
    found = {c.content: c for c in heuristic_extract(CONVERSATION)}
    assert set(found) == {"User love hiking in the Alps.", "User's sister lives in Lyon.",
                          "User work as a nurse."}
    assert found["User love hiking in the Alps."].category is Category.PREFERENCE
    assert found["User work as a nurse."].source_message_ids == ("u2",)
    assert all(c.importance is None and c.confidence == 0.5 for c in found.values())


def test_heuristic_uses_speaker_names_for_transcripts() -> None:
    transcript = parse_conversation({"sample_id": "s", "conversation": {"session_1": [
        {"speaker": "Caroline", "dia_id": "D1:1", "text": "I'm swamped with my kids & work."},
        {"speaker": "Mel", "dia_id": "D1:2", "text": "I'd love to paint with you!"}]}})
    assert [c.content for c in heuristic_extract(transcript)] == [
        "Caroline is swamped with Caroline's kids & work.", "Mel would love to paint with you!"]


def test_heuristic_summary_budget_and_dedup() -> None:
    assert heuristic_summary(["A b. C.", "a b", "D e."], max_chars=100) == "A b. D e."
    assert heuristic_summary(["x" * 50, "y"], max_chars=10) == "x" * 50
    assert heuristic_summary([]) == ""


def test_long_conversations_go_through_salience_selection(server: LLMTestServer,
                                                          make_rig: MakeRig) -> None:
    turns = [{"id": f"t{i}", "role": "user", "content": f"plain statement number {i}"}
             for i in range(60)]
    turns[30]["content"] = "I was devastated when my dog died"
    server.script(Behaviour(content=_answer()))
    rig = make_rig("openai")
    result = Extractor(rig.gateway, rng=DeterministicRNG(2)).extract(
        parse_conversation({"messages": turns}))
    assert len(result.selected_message_ids) < 60
    assert "t30" in result.selected_message_ids


def test_conversation_formats(tmp_path: Path) -> None:
    locomo = {"sample_id": "s1", "conversation": {
        "speaker_a": "Ann", "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Later"}],
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "First"}],
        "session_1_date_time": "x"}}
    conversation = parse_conversation(locomo)
    assert [t.id for t in conversation.turns] == ["D1:1", "D2:1"]
    assert parse_conversation([{"role": "user", "content": "x"}]).turns[0].id == "m1"
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  nope", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"bad.json:2"):
        load_conversation(bad)
    with pytest.raises(InputFormatError, match=r"messages\[0\].content"):
        parse_conversation([{"role": "user"}])
