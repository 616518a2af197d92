import math

import pytest

from engine.errors import ValidationError
from engine.records import (
    MAX_CONTENT_CHARS,
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    TrustTier,
    format_timestamp,
    parse_timestamp,
)

NOW = 1_767_225_600_000.0


def make(**changes: object) -> MemoryRecord:
    return MemoryRecord.create(NewMemory(content="Alice likes tea", agent_id="alice",
                                         **changes), now_ms=NOW)  # type: ignore[arg-type]


def test_create_fills_derived_fields() -> None:
    record = make(tags=("drinks", "drinks", " tea "))
    assert record.tags == ("drinks", "tea")
    assert record.content_hash and record.token_estimate >= 1
    assert record.created_at == record.last_accessed == record.recency_anchor == NOW
    assert record.provenance[0].source == "user"
    assert record.unique_sources == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("layer", "dreams", "layer: must be one of episodic"),
        ("importance", 1.5, "importance: must be a number in 0..1"),
        ("importance", math.nan, "importance"),
        ("confidence", -0.1, "confidence"),
        ("privacy", "SECRET", "privacy: must be one of PUBLIC, PRIVATE"),
        ("category", "gossip", "category"),
        ("source_tier", "god", "source_tier"),
        ("agent_id", "", "agent_id"),
        ("metadata", {"x": math.inf}, "metadata: must be JSON-serializable"),
        ("metadata", {"spatial": {"x": 1, "y": "north", "z": 0}}, "metadata.spatial.y"),
        ("metadata", {"social": {"sentiment": 3}}, "metadata.social.sentiment"),
    ],
)
def test_bad_values_name_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace(".", r"\.")):
        NewMemory(content="x", **{field: value})  # type: ignore[arg-type]


def test_content_limits() -> None:
    with pytest.raises(ValidationError, match="content: must not be empty"):
        NewMemory(content="   ")
    with pytest.raises(ValidationError, match=f"longer than {MAX_CONTENT_CHARS}"):
        NewMemory(content="x" * (MAX_CONTENT_CHARS + 1))
    assert NewMemory(content="x" * MAX_CONTENT_CHARS).content


def test_enums_accept_any_case() -> None:
    memory = NewMemory(content="x", layer="EPISODIC", privacy="public",  # type: ignore[arg-type]
                       source_tier="Auto", category="Skill")  # type: ignore[arg-type]
    assert (memory.layer, memory.privacy, memory.source_tier, memory.category) == (
        Layer.EPISODIC, Privacy.PUBLIC, TrustTier.AUTO, Category.SKILL)


def test_json_round_trip_is_exact() -> None:
    record = make(tags=("a", "b"), metadata={"spatial": {"x": 1, "y": 2, "z": 3}},
                  expires_at=NOW + 60_000, importance=0.3)
    again = MemoryRecord.from_json(record.to_json())
    assert again == record
    assert record.to_json()["created_at"] == "2026-01-01T00:00:00.000Z"
    assert record.ttl_ms == 60_000


def test_from_json_rejects_unknown_and_missing_fields() -> None:
    data = make().to_json()
    with pytest.raises(ValidationError, match="colour: unknown field"):
        MemoryRecord.from_json({**data, "colour": "blue"})
    del data["content"]
    with pytest.raises(ValidationError, match="content: is required"):
        MemoryRecord.from_json(data)


def test_replace_revalidates_and_rehashes() -> None:
    record = make()
    changed = record.replace(content="Alice loves tea")
    assert changed.content_hash != record.content_hash
    assert changed.embedding_model == ""
    with pytest.raises(ValidationError, match="importance"):
        record.replace(importance=2.0)


def test_expiry_and_timestamps() -> None:
    with pytest.raises(ValidationError, match="expires_at"):
        NewMemory(content="x", created_at=NOW, expires_at=NOW - 1)
    record = make(expires_at=NOW + 10)
    assert record.is_expired(NOW + 11) and not record.is_expired(NOW + 5)
    assert parse_timestamp("2026-01-01T00:00:00Z", "t") == NOW
    assert parse_timestamp("2026-01-01T01:00:00+01:00", "t") == NOW
    assert parse_timestamp(NOW, "t") == NOW
    assert format_timestamp(None) is None
    with pytest.raises(ValidationError, match="when: expected an ISO-8601"):
        parse_timestamp("yesterday", "when")
    with pytest.raises(ValidationError, match="when"):
        parse_timestamp(True, "when")
