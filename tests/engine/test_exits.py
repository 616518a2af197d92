"""Response shaping: finite numbers and redaction with the identifier exemption."""

from __future__ import annotations

import math

from engine.exits import prepare
from engine.redaction import redact_text

UUID = "0b8ac2e9-500d-4db6-b8fc-474a341a01c9"
KEY = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"


def test_identifiers_of_our_shape_survive_everything_else_is_redacted() -> None:
    document = {
        "id": UUID, "record_id": "social-summary-" + "a" * 32, "event_id": "f" * 32,
        "related": [{"id": UUID, "similarity": 0.9}],
        "content": f"mail jane@example.com, ref {UUID}, key {KEY}",
        "metadata": {"id": KEY, "jane@example.com": 1, "nested": [KEY, 3, None]},
        "score": math.inf, "ok": True,
    }
    out = prepare(document, redact_text)
    assert out["id"] == UUID and out["related"][0]["id"] == UUID
    assert out["record_id"] == document["record_id"] and out["event_id"] == "f" * 32
    text = repr(out)
    assert KEY not in text and "jane@example.com" not in text
    assert UUID not in out["content"]  # a UUID in free text is personal data (seed 002 §14)
    assert out["metadata"]["id"].startswith("<REDACT:sha256-")  # not id-shaped: redacted
    assert out["score"] is None and out["ok"] is True


def test_without_a_redactor_only_numbers_are_cleaned() -> None:
    assert prepare({"a": [float("nan"), "x", (1, 2)]}, None) == {"a": [None, "x", [1, 2]]}
