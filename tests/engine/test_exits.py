"""The exit policy: documents, hashes, events and log records as a reader may see them."""

from __future__ import annotations

import io
import logging
import math
from typing import Any

from engine.clock import DeterministicClock
from engine.events import EventBus
from engine.exits import ExitPolicy, RedactingLogFilter, document_strings, prepare
from engine.redaction import redact_text
from engine.text import content_hash

UUID = "0b8ac2e9-500d-4db6-b8fc-474a341a01c9"
KEY = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"


def test_identifiers_of_our_shape_survive_everything_else_is_redacted() -> None:
    """Ids of the engine's shapes under id keys stay; the rest, metadata included, is masked."""
    document = {
        "id": UUID, "record_id": "social-summary-" + "a" * 32, "event_id": "f" * 32,
        "related": [{"id": UUID, "similarity": 0.9}],
        "content": f"mail jane@example.com, ref {UUID}, key {KEY}",
        "metadata": {"id": KEY, "jane@example.com": 1, "nested": [KEY, 3, None],
                     "record_id": UUID},
        "score": math.inf, "ok": True,
    }
    out = prepare(document, redact_text)
    assert out["id"] == UUID and out["related"][0]["id"] == UUID
    assert out["record_id"] == document["record_id"] and out["event_id"] == "f" * 32
    text = repr(out)
    assert KEY not in text and "jane@example.com" not in text
    assert UUID not in out["content"]  # a UUID in free text is personal data (seed 002 §14)
    assert out["metadata"]["id"].startswith("<REDACT:sha256-")  # not id-shaped: redacted
    assert out["metadata"]["record_id"] == redact_text(UUID)  # metadata is the user's text
    assert out["score"] is None and out["ok"] is True


def test_without_a_redactor_only_numbers_are_cleaned() -> None:
    assert prepare({"a": [float("nan"), "x", (1, 2)]}, None) == {"a": [None, "x", [1, 2]]}


def _policy() -> ExitPolicy:
    return ExitPolicy(redact_text)


def test_hashes_travel_only_beside_the_text_they_hash() -> None:
    secret = f"Pat's key is {KEY}"
    clean = "Pat likes figs"
    policy = _policy()
    document = {
        "records": [{"content": secret, "content_hash": content_hash(secret)},
                    {"content": clean, "content_hash": content_hash(clean)}],
        "content_hash": content_hash(secret),  # a review item's hash: no content beside it
    }
    out = policy.document(document)
    masked, kept = out["records"]
    assert KEY not in masked["content"]
    assert masked["content_hash"] == content_hash(masked["content"]) != content_hash(secret)
    assert kept == {"content": clean, "content_hash": content_hash(clean)}
    # Keyed: the same digest for as long as the policy lives, nothing a guess can be hashed to.
    keyed = out["content_hash"]
    assert len(keyed) == 64 and keyed != content_hash(secret)
    assert policy.document(document)["content_hash"] == keyed
    assert _policy().document(document)["content_hash"] != keyed
    off = ExitPolicy(None).document({"content": secret, "content_hash": "h"})
    assert off == {"content": secret, "content_hash": "h"}


def test_an_event_recorded_raw_reads_back_like_one_recorded_redacted() -> None:
    clock = DeterministicClock()
    raw_bus = EventBus(clock=clock)
    redacting_bus = EventBus(clock=clock, redaction=True, redactor=redact_text)
    fields: dict[str, Any] = {
        "record_id": UUID, "memory_hash": "a" * 64, "source": "jane@example.com",
        "payload": {"content": f"key {KEY}", "nested": {"text": "hi", "note": KEY}}}
    raw = raw_bus.emit("memory:record:created", **fields)
    redacted = redacting_bus.emit("memory:record:created", **fields)
    assert raw is not None and redacted is not None
    policy = _policy()
    shown_raw, shown_redacted = policy.event(raw), policy.event(redacted)
    for shown in (shown_raw, shown_redacted):
        assert KEY not in repr(shown) and "jane@example.com" not in repr(shown)
        assert shown["record_id"] == UUID and shown["memory_hash"] != "a" * 64
    assert shown_raw["memory_hash"] == shown_redacted["memory_hash"]  # events still group
    assert shown_raw["payload"] == shown_redacted["payload"] == {
        "content": "<redacted>", "nested": {"text": "<redacted>", "note": redact_text(KEY)}}


def test_log_records_and_their_tracebacks_are_masked() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingLogFilter(_policy()))
    log = logging.getLogger("tests.exits")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("request with %s failed", KEY)
        try:
            raise ValueError(f"bad value {KEY}")
        except ValueError:
            log.exception("crash while handling jane@example.com")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    text = stream.getvalue()
    assert KEY not in text and "jane@example.com" not in text
    assert "request with <REDACT:sha256-" in text and "ValueError: bad value <REDACT:" in text


def test_batch_masking_equals_one_by_one() -> None:
    from engine.memory_engine import EngineConfig
    from tests.support.secrets_corpus import SECRETS

    texts = [f"note {i}: {s.text} and jane@example.com" for i, s in enumerate(SECRETS)]
    texts += ["plain text", "", texts[0]]
    batch = ExitPolicy.for_config(EngineConfig(redaction=True)).shown
    single = ExitPolicy.for_config(EngineConfig(redaction=True))
    assert batch is not None
    assert batch.many(texts) == [single.text(t) for t in texts]
    assert all(s.needle not in masked for s, masked in zip(SECRETS, batch.many(texts),
                                                             strict=False))


def test_redact_scan_looks_at_exactly_what_the_exits_mask() -> None:
    document = {"id": UUID, "content": "hi", "tags": ["jane@example.com"],
                "related": [{"id": UUID}], "metadata": {"record_id": UUID, KEY: 1}}
    strings = list(document_strings(document))
    assert ("metadata", UUID) in strings and ("metadata", KEY) in strings
    assert ("tags", "jane@example.com") in strings
    assert ("id", UUID) not in strings and ("related", UUID) not in strings
