"""Words, not codes (ui/shared/format.py): rounding, relative times on a fixed clock, a phrase for
every
code the engine emits, reason sentences, and events / stage data as labelled fields."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from pathlib import Path

import pytest

import engine
from engine.config import Strategy
from engine.embedding import EmbedderState
from engine.events import Event
from engine.ingest.contradiction import CONFLICT_KINDS
from engine.ingest.kinds import Action, EventKind, Reason, Stage
from engine.retrieval.types import DropReason
from ui.shared.format import (
    PHRASES,
    TAGS,
    Field,
    compare,
    diff_value,
    duration,
    event_fields,
    exact_time,
    number,
    percent,
    phrase,
    reason_sentence,
    record_ids_in,
    record_label,
    relative_time,
    similarity_phrase,
    stage_fields,
    tag,
    thresholds_phrase,
)

ENGINE = Path(engine.__file__).resolve().parent
SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
RAW_FLOAT = re.compile(r"\d\.\d{4,}")


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
       tz: timezone = UTC) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=tz).timestamp() * 1000.0


NOW = ms(2026, 11, 25, 18, 30)  # a Wednesday


# -- numbers -----------------------------------------------------------------------------------

def test_numbers_are_rounded_to_their_meaning() -> None:
    assert number(0.7000000000000001) == "0.7"
    assert number(0.1 + 0.2) == "0.3"
    assert number(0.884123, decimals=3) == "0.884"
    assert number(0.8, decimals=2) == "0.80"
    assert number(12.3456) == "12.35"
    assert number(1234.56) == "1,235"
    assert number(1234567) == "1,234,567"
    assert number(-0.0001) == "0"
    assert number(None) == "—"
    assert number(True) == "yes"
    assert percent(0.8412) == "84%"
    assert percent(0.0512) == "5.1%"
    assert percent(1.0) == "100%"
    assert duration(0.004) == "under 0.01 ms"
    assert duration(0.42) == "0.42 ms"
    assert duration(4.25) == "4.2 ms"
    assert duration(29.4) == "29 ms"
    assert duration(1340) == "1.3 s"
    assert duration(125_000) == "2 min 5 s"


def test_comparison_sign_follows_the_numbers() -> None:
    assert compare(0.884, 0.90) == "0.884 < threshold 0.90"
    assert compare(0.92, 0.9) == "0.920 ≥ threshold 0.90"
    assert compare(0.9, 0.9) == "0.900 ≥ threshold 0.90"
    # three decimals would read 0.900 < 0.90: more digits until the side shows
    assert compare(0.8996, 0.90) == "0.8996 < threshold 0.90"
    assert compare(0.79999, 0.8) == "0.79999 < threshold 0.80"
    assert compare(0.8, 0.825, name="review floor") == "0.800 < review floor 0.825"


# -- times -------------------------------------------------------------------------------------

def test_relative_times_on_a_fixed_clock() -> None:
    def rel(at: float) -> str:
        return relative_time(at, now_ms=NOW, tz=UTC)

    assert rel(NOW - 10_000) == "just now"
    assert rel(NOW + 10_000) == "just now"
    assert rel(NOW - 3 * 60_000) == "3 min ago"
    assert rel(NOW - 59 * 60_000) == "59 min ago"
    assert rel(NOW + 5 * 60_000) == "in 5 min"
    assert rel(ms(2026, 11, 25, 14, 2)) == "today 14:02"
    assert rel(ms(2026, 11, 24, 14, 2)) == "yesterday 14:02"
    assert rel(ms(2026, 11, 26, 9, 0)) == "tomorrow 09:00"
    assert rel(ms(2026, 11, 23, 8, 15)) == "Mon 08:15"
    assert rel(ms(2026, 11, 12, 14, 2)) == "12 Nov 14:02"
    assert rel(ms(2025, 11, 12, 14, 2)) == "12 Nov 2025"
    assert relative_time(None) == "—"


def test_relative_times_are_local() -> None:
    """The same instant is "today" in UTC and "yesterday" five hours west of it."""
    west = timezone(timedelta(hours=-5))
    at = ms(2026, 11, 25, 2, 0)
    now = ms(2026, 11, 25, 12, 0)
    assert relative_time(at, now_ms=now, tz=UTC) == "today 02:00"
    assert relative_time(at, now_ms=now, tz=west) == "yesterday 21:00"


def test_exact_time_has_local_and_utc() -> None:
    tip = exact_time(ms(2026, 11, 25, 13, 2, 33) + 250, tz=timezone(timedelta(hours=1)))
    local, utc = tip.split("\n")
    assert local.startswith("Wed 25 Nov 2026, 14:02:33.250")
    assert utc == "2026-11-25T13:02:33.250Z (UTC)"


# -- codes -------------------------------------------------------------------------------------

def _literal_codes() -> set[str]:
    """String literals the engine uses as codes: decision reasons passed to events and
    deletes, fate step kinds and statuses, lifecycle selection reasons."""
    found: set[str] = set()
    for path in ENGINE.rglob("*.py"):
        if "bench" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):  # def delete(..., reason: str = "deleted")
                named = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
                for arg, default in [*zip(named, node.args.defaults, strict=True),
                                     *zip(node.args.kwonlyargs, node.args.kw_defaults,
                                          strict=True)]:
                    if arg.arg == "reason" and isinstance(default, ast.Constant) and \
                            isinstance(default.value, str):
                        found.add(default.value)
                if path.name == "fate.py" and node.name == "_delete_kind":
                    found.update(r.value.value for r in ast.walk(node)
                                 if isinstance(r, ast.Return) and isinstance(r.value, ast.Constant)
                                 and isinstance(r.value.value, str))
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "_apply" and len(node.args) > 3 and isinstance(
                        node.args[3], ast.Constant) and isinstance(node.args[3].value, str):
                    found.add(node.args[3].value)  # Lifecycle._apply(action, sel, dry, reason)
                if name == "emit" and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    found.add(node.args[0].value)  # an event kind written in place
                for keyword in node.keywords:
                    if keyword.arg in ("decision_reason", "reason") and isinstance(
                            keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                        found.add(keyword.value.value)
                if name == "FateStep" and len(node.args) > 1 and isinstance(
                        node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    found.add(node.args[1].value)
            if path.name == "fate.py" and isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name | ast.Tuple) and "status" in ast.dump(t)
                    for t in node.targets):
                for value in ast.walk(node.value):
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.add(value.value)
            if path.name == "fate.py" and isinstance(node, ast.Dict):
                found.update(v.value for v in node.values
                             if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if path.name == "pruning.py" and isinstance(node, ast.Tuple) and len(
                    node.elts) == 2 and isinstance(node.elts[1], ast.Constant) and isinstance(
                    node.elts[1].value, str):
                found.add(node.elts[1].value)
    return found


def _event_kinds() -> set[str]:
    kinds: set[str] = {str(k) for k in EventKind}
    for path in ENGINE.rglob("*.py"):
        for match in re.finditer(r'^EVENT_[A-Z_]+ = "([^"]+)"', path.read_text(encoding="utf-8"),
                                 re.MULTILINE):
            kinds.add(match.group(1))
    return kinds


def test_every_engine_code_has_a_phrase() -> None:
    enums: list[type[StrEnum]] = [Reason, Action, Stage, EmbedderState, DropReason]
    codes = {str(v) for enum in enums for v in enum} | set(CONFLICT_KINDS)
    codes |= _event_kinds() | _literal_codes()
    codes.discard("")
    assert {"gray_zone", "merged_into", "not_novel", "equal_confidence", "lower_confidence",
            "possible_contradiction", "low_importance", "compacted", "memory:record:deleted",
            "llm:call", "layer-cap", "pruned", "deleted", "memory:retrieval"} <= codes
    missing = sorted(code for code in codes if code not in PHRASES)
    assert not missing, f"engine codes without a phrase in ui/shared/format.py PHRASES: {missing}"
    for code in codes:
        assert not SNAKE.search(phrase(code)), (code, phrase(code))


def test_unknown_codes_are_humanized_never_raw() -> None:
    assert phrase("some_new_reason") == "some new reason"
    assert phrase("memory:thing:happened") == "thing happened"
    assert phrase("retention:episodic") == "removed by the retention cap of the episodic layer"
    assert phrase("prune:aggressive") == "pruned (aggressive mode)"
    assert phrase(None) == ""
    # a retrieval's decision_reason is its strategy, not a decision code
    for strategy in Strategy:
        event = Event(event_id="e", kind="memory:retrieval", ts=NOW,
                      decision_reason=strategy.value)
        why = dict((f.label, f.value) for f in event_fields(event, {}, now_ms=NOW, tz=UTC))
        assert why["Why"].endswith("retrieval strategy")


def test_reason_sentences_name_the_other_record_by_text() -> None:
    texts = {"r1": "standup at 9:30"}
    conflict = {"kind": "time", "existing": ["9:30"], "incoming": ["10:30"]}
    assert reason_sentence("possible_contradiction", target="r1", conflicts=[conflict],
                           texts=texts) == \
        "held for review: may contradict ‘standup at 9:30’ — 9:30 vs 10:30"
    assert reason_sentence("gray_zone") == "in the gray zone: held for review"
    assert reason_sentence("near_duplicate", target="r1", texts=texts) == \
        "near duplicate: merged into ‘standup at 9:30’"
    assert reason_sentence("near_duplicate", target="gone", texts=texts) == \
        "near duplicate: merged into a record no longer stored"
    assert reason_sentence("equal_confidence") == \
        "exact duplicate with the same confidence: not stored again"


def test_record_labels_show_text_first_id_second() -> None:
    record_id = "3f2a9c1e-0000-4000-8000-000000000000"
    label, tip = record_label(record_id, {record_id: "Alice likes green tea " * 10})
    assert label.startswith("‘Alice likes green tea") and label.endswith("…’ · 3f2a9c1e")
    assert record_id in tip and tip.startswith("Alice likes")
    assert record_label(record_id, {})[0] == "a record no longer stored · 3f2a9c1e"
    assert record_label(record_id, {}, loading={record_id})[0] == \
        "reading its text… · 3f2a9c1e"
    assert record_ids_in({"record_id": "a", "payload": {"merged_from": ["b", "c"],
                                                         "candidates": [{"id": "d"}]}}) == \
        ["a", "b", "c", "d"]


# -- fields ------------------------------------------------------------------------------------

def _flat(fields: Sequence[Field]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for f in fields:
        out.append((f.label, f.value))
        out.extend(_flat(list(f.children)))
    return out


def test_event_fields_are_labelled_words() -> None:
    event = Event(
        event_id="e1", kind="merge-deferred", ts=NOW - 120_000, record_id="r1",
        similarity=0.7000000000000001, source="import:demo.jsonl", decision_reason="gray_zone",
        latency_ms=1.23456, thresholds={"threshold": 0.8, "review_floor": 0.7,
                                        "effective": 0.8},
        payload={"action": "deferred", "incoming_id": "n1", "content": "standup at 10:30",
                 "target_id": "r1", "surprise": 0.123456789, "conflicts": []})
    fields = event_fields(event, {"r1": "standup at 9:30"}, now_ms=NOW, tz=UTC)
    rows = dict(_flat(fields))
    assert rows["What happened"] == "Held for review"
    assert rows["When"] == "2 min ago"
    assert rows["Why"] == "In the gray zone of ‘standup at 9:30’: held for review"
    assert rows["Similarity"] == "0.700 < threshold 0.80"
    assert rows["Merge threshold"] == "0.80"
    assert rows["Gray zone from"] == "0.70"
    assert rows["Took"] == "1.2 ms"
    assert rows["Surprise"] == "0.123"
    assert rows["Incoming memory"] == "‘standup at 10:30’ · n1"
    assert rows["Stored record"] == "‘standup at 9:30’ · r1"
    assert rows["Contradiction check"] == "none found"
    record_rows = [f for f in fields if f.record_id == "r1"]
    assert record_rows and record_rows[0].label == "Record"
    for label, value in _flat(fields):
        assert not SNAKE.search(label) and not SNAKE.search(value), (label, value)
        assert not RAW_FLOAT.search(value), (label, value)


def test_stage_fields_of_a_decision() -> None:
    data = {"decision": {"action": "deferred", "reason": "possible_contradiction",
                         "target_id": "r1", "similarity": 0.8842,
                         "thresholds": {"threshold": 0.9, "review_floor": 0.85,
                                        "effective": 0.9},
                         "conflicts": [{"kind": "time", "existing": ["9:30"],
                                        "incoming": ["10:30"]}],
                         "new_confidence": None},
            "surprise": {"surprise": 0.3441, "semantic_novelty": None, "keyword_novelty": 0.27,
                         "category_rarity": 0.631, "exact_duplicate": False,
                         "importance": 0.2753}}
    rows = dict(_flat(stage_fields("decision", data, {"r1": "standup at 9:30"},
                                   tier="auto")))
    assert rows["Outcome"] == "Held for review"
    assert rows["Why"] == "Held for review: may contradict ‘standup at 9:30’ — 9:30 vs 10:30"
    assert rows["Similarity"] == "0.884 < threshold 0.90"
    assert rows["Merge threshold"] == "0.90 (auto tier)"
    assert rows["Contradiction check"] == "1 detail differs"
    assert rows["Times differ"] == "9:30 vs 10:30"
    assert rows["Surprise"] == "0.344"
    assert rows["Importance"] == "0.28"


@pytest.mark.parametrize("stage", [s.value for s in Stage])
def test_stage_fields_never_show_codes(stage: str) -> None:
    data = {"incoming_id": "n1", "content": "standup at 10:30", "agent_id": "default",
            "layer": "semantic", "privacy": "PRIVATE", "category": "fact", "source": "user",
            "tier": "human", "confidence": 0.8, "importance": None, "path": "jaccard",
            "method": "linear", "hash_hit": False, "partition_size": 12,
            "candidates": [{"id": "r1", "similarity": 0.7000000000000001, "category": "fact",
                            "found_by": "linear"}],
            "merge_weight": 0.30000000000000004, "written": ["r1"], "events": [
                "ingest-start", "merge-deferred"], "latency_ms": 0.5}
    rows = _flat(stage_fields(stage, data, {"r1": "standup at 9:30"}))
    for label, value in rows:
        assert not SNAKE.search(label) and not SNAKE.search(value), (label, value)
        assert not RAW_FLOAT.search(value), (label, value)
    assert ("Incoming memory", "‘standup at 10:30’ · n1") in rows


def test_bare_codes_in_any_field_are_words() -> None:
    event = Event(event_id="e2", kind="llm:connection-test", ts=NOW, source="llm:ollama",
                  decision_reason="refused", latency_ms=8.3,
                  payload={"outcome": "test_failed", "cost_usd": 0.0012, "input_tokens": 1200})
    rows = dict(_flat(event_fields(event, {}, now_ms=NOW, tz=UTC)))
    assert rows["What happened"] == "LLM connection test"
    assert rows["Outcome"] == "test failed"
    assert rows["Cost"] == "$0.0012"
    assert rows["Input tokens"] == "1,200"
    assert rows["Source"] == "llm:ollama"  # a name, not a code: kept


def test_short_tags_are_for_real_reasons() -> None:
    assert set(TAGS) <= {str(r) for r in Reason} | {str(r) for r in DropReason}
    assert tag("gray_zone") == "gray zone"
    assert tag("review_rejected") == "rejected in review: kept as its own record"  # no tag


def test_record_json_fields_in_words() -> None:
    texts = {"r1": "standup at 9:30"}
    assert diff_value("created_at", "2026-11-25T13:02:33.250Z", texts, tz=UTC) == \
        "2026-11-25 13:02:33"
    assert diff_value("expires_at", None, texts) == "—"
    assert diff_value("importance", 0.30000000000000004, texts) == "0.30"
    assert diff_value("layer", "semantic", texts) == "semantic"
    assert diff_value("privacy", "PRIVATE", texts) == "private"
    assert diff_value("merged_from", ["r1", "gone"], texts) == \
        "‘standup at 9:30’ · r1; a record no longer stored · gone"
    assert diff_value("related", [{"id": "r1", "similarity": 0.9}], texts) == \
        "‘standup at 9:30’ · r1"
    assert diff_value("provenance", [{}, {}], texts) == "2 sources"
    assert diff_value("tags", [], texts) == "none"
    assert similarity_phrase(0.8842, {"threshold": 0.9, "effective": 0.95}) == \
        "0.884 < threshold 0.95"
    assert similarity_phrase(0.8842, {}) == "0.884"
    assert similarity_phrase(None, {}) == "—"
    assert thresholds_phrase({"threshold": 0.8, "review_floor": 0.7}) == \
        "merge threshold 0.80 · gray zone from 0.70"


def test_lifecycle_events_and_the_ring_are_words() -> None:
    event = Event(event_id="e3", kind="memory:lifecycle:run", ts=NOW, source="lifecycle",
                  decision_reason="3 expired, 1 compacted",
                  payload={"expired": 3, "compacted": 1, "trigger": "schedule"})
    rows = dict(_flat(event_fields(event, {}, now_ms=NOW, tz=UTC)))
    assert rows["What happened"].startswith("Scheduled lifecycle run")
    rolled = Event(event_id="e4", kind="memory:episodic:rolled_off", ts=NOW,
                   source="episodic-ring", decision_reason="episodic-ring")
    rows = dict(_flat(event_fields(rolled, {}, now_ms=NOW, tz=UTC)))
    assert rows["What happened"].startswith("Rolled off the episodic ring")
    assert "memory:" not in " ".join(str(v) for v in rows.values())


def test_every_redaction_finding_has_words() -> None:
    """Polish: the Secrets view says what a record holds ("2 e-mail addresses, 1 GitHub
    token"), not ``EMAIL×2, GITHUB_TOKEN×1``; every kind engine/redaction.py finds has words."""
    import engine.redaction
    from ui.shared.format import FINDINGS, findings

    source = Path(engine.redaction.__file__).read_text(encoding="utf-8")
    kinds = set(re.findall(r'_rule\("([A-Z0-9_]+)"', source))
    kinds |= set(engine.redaction.DEFAULT_PATTERNS) - {"SECRETS"}
    assert {"EMAIL", "GITHUB_TOKEN", "PRIVATE_KEY", "PASSWORD"} <= kinds
    assert sorted(kinds - set(FINDINGS)) == []
    assert findings({"GITHUB_TOKEN": 1, "EMAIL": 2}) == "2 e-mail addresses, 1 GitHub token"
    assert findings({"PASSWORD": 3}) == "3 passwords or PINs"
    assert findings({"TICKET_NUMBER": 1}) == "1 ticket number"  # a custom pattern's own kind
