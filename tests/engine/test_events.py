import threading

import pytest

from engine.clock import DeterministicClock, DeterministicRNG
from engine.errors import ConfigInvalid
from engine.events import Event, EventBus, EventFilter
from engine.ledger import Ledger


def make_bus(**kwargs: object) -> EventBus:
    return EventBus(clock=DeterministicClock(1000.0), ledger=Ledger(None),
                    rng=DeterministicRNG(1), **kwargs)  # type: ignore[arg-type]


def test_events_are_persisted_delivered_and_queryable() -> None:
    bus = make_bus()
    seen: list[Event] = []
    unsubscribe = bus.subscribe(seen.append)
    first = bus.emit("ingest-start", record_id="r1", memory_hash="h", stage="ingest-start",
                     source="cli", payload={"content": "Alice likes tea"})
    bus.emit("merge-applied", record_id="r2", similarity=0.91, thresholds={"human": 0.8},
             decision_reason="near_duplicate", latency_ms=1.5)
    unsubscribe()
    bus.emit("error", record_id="r1")
    assert first is not None and first.seq == 1
    assert [e.kind for e in seen] == ["ingest-start", "merge-applied"]
    assert [e.kind for e in bus.query(EventFilter(record_id="r1"))] == ["ingest-start", "error"]
    merged = bus.query(EventFilter(kinds=["merge-applied"]))[0]
    assert merged.thresholds == {"human": 0.8} and merged.similarity == 0.91
    assert [e.seq for e in bus.query(EventFilter(after_seq=1))] == [2, 3]
    assert bus.last_seq() == 3
    assert merged.to_json()["ts_iso"] == "1970-01-01T00:00:01.000Z"


def test_sampling_zero_drops_all_but_forced_events() -> None:
    bus = make_bus(sampling_rate=0.0)
    assert bus.emit("candidate-match") is None
    assert bus.emit("memory:record:deleted", force=True) is not None
    assert [e.kind for e in bus.query()] == ["memory:record:deleted"]


def test_sampling_keeps_about_the_rate() -> None:
    bus = EventBus(clock=DeterministicClock(0), rng=DeterministicRNG(42), sampling_rate=0.25)
    kept = sum(bus.emit("x") is not None for _ in range(2000))
    assert 400 < kept < 600
    with pytest.raises(ConfigInvalid, match="sampling_rate"):
        bus.sampling_rate = 1.5


def test_redaction_strips_content_and_redacts_strings() -> None:
    bus = make_bus(redaction=True, redactor=lambda s: s.replace("alice@example.com", "<R>"))
    payload = {"content": "secret text", "note": "alice@example.com",
               "nested": {"text": "x", "who": ["alice@example.com"]}}
    event = bus.emit("ingest-start", payload=payload)
    assert event is not None
    stored = bus.query()[0]
    for e in (event, stored):
        assert e.payload["content"] == "<redacted>"
        assert e.payload["note"] == "<R>"
        assert e.payload["nested"] == {"text": "<redacted>", "who": ["<R>"]}


def test_a_failing_subscriber_does_not_break_emit() -> None:
    errors: list[BaseException] = []
    bus = EventBus(clock=DeterministicClock(0), on_subscriber_error=errors.append)
    def broken(event: Event) -> None:
        raise ZeroDivisionError(event.kind)

    bus.subscribe(broken)
    got: list[Event] = []
    bus.subscribe(got.append)
    assert bus.emit("x") is not None
    assert len(got) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_concurrent_emitters_get_gap_free_sequence_numbers() -> None:
    bus = make_bus()

    def work() -> None:
        for _ in range(50):
            bus.emit("x")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e.seq for e in bus.query(EventFilter(limit=500))] == list(range(1, 201))
