"""``EventBus.emit_many`` (added for batch ingest): one transaction, same rules as ``emit``."""

from __future__ import annotations

import threading

from engine.clock import DeterministicClock, DeterministicRNG
from engine.events import Event, EventBus, EventFilter
from engine.ledger import Ledger


def _bus(*, rng: DeterministicRNG | None = None, sampling_rate: float = 1.0,
         redaction: bool = False) -> EventBus:
    return EventBus(clock=DeterministicClock(1000.0), ledger=Ledger(None), rng=rng,
                    sampling_rate=sampling_rate, redaction=redaction)


def test_persists_in_order_and_delivers() -> None:
    bus = _bus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    events = bus.emit_many([("ingest-start", {"memory_hash": "h", "payload": {"content": "a"}}),
                            ("merge-applied", {"record_id": "r", "similarity": 0.9,
                                               "thresholds": {"threshold": 0.8}})])
    assert [e.seq for e in events if e is not None] == [1, 2]
    assert [e.kind for e in seen] == ["ingest-start", "merge-applied"]
    stored = bus.query(EventFilter())
    assert [(e.kind, e.record_id, e.similarity) for e in stored] == [
        ("ingest-start", None, None), ("merge-applied", "r", 0.9)]
    assert stored[1].thresholds == {"threshold": 0.8}


def test_sampling_and_redaction_apply() -> None:
    rng = DeterministicRNG()
    rng.set_sequence([0.1, 0.9])
    bus = _bus(rng=rng, sampling_rate=0.5, redaction=True)
    kept, dropped = bus.emit_many([("a", {"payload": {"content": "secret"}}),
                                   ("b", {"payload": {"content": "secret"}})])
    assert dropped is None and kept is not None
    assert kept.payload["content"] == "<redacted>"
    assert [e is not None for e in bus.emit_many([("c", {})], force=True)] == [True]
    bus.sampling_rate = 0.0
    assert bus.emit_many([("d", {})]) == [None]


def test_returned_seqs_are_the_stored_ones_under_concurrent_writers() -> None:
    """``emit_many`` numbers its events from ``last_insert_rowid()`` after one
    ``executemany``: with other threads emitting (singly and in batches) at the same time,
    every returned ``seq`` must still be the one the ledger stored for that event."""
    bus = _bus()
    returned: list[Event] = []
    lock = threading.Lock()

    def work(batch: int) -> None:
        for round_ in range(20):
            if batch:
                got = bus.emit_many([(f"k{batch}", {"payload": {"i": i, "r": round_}})
                                     for i in range(batch)])
                kept = [e for e in got if e is not None]
            else:
                single = bus.emit("single")
                kept = [] if single is None else [single]
            with lock:
                returned.extend(kept)

    threads = [threading.Thread(target=work, args=(size,)) for size in (0, 1, 3, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = {e.event_id: e.seq for e in bus.query(EventFilter(limit=1000))}
    assert len(returned) == 20 * (1 + 1 + 3 + 7) == len(stored)
    assert {e.event_id: e.seq for e in returned} == stored
    assert sorted(stored.values()) == list(range(1, len(stored) + 1))
