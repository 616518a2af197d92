"""The voyeur event stream: one envelope for every observable decision (DESIGN decision 7).

Seed 001's kinds (``ingest-start``, ``embed-request``, ``candidate-match``, ``merge-applied``,
``merge-deferred``, ``error``) and seed 002's ``memory:*`` kinds share one :class:`Event`
envelope. Subsystems define their own kind constants next to the code that emits them; the
envelope is the same.

:class:`EventBus` delivers events to in-process subscribers (thread-safe; a failing subscriber is
isolated) and persists them to the ledger, where they are queryable by time, kind, record and
sequence number (a gap-free cursor for live tails and the introspection API). Controls from seed
001: a sampling rate (0.0 drops everything), redaction mode (strips ``content``-like payload
fields and redacts every remaining string), and a slow-mo delay the stepped pipeline applies
between stages.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.clock import RNG, Clock, SystemRNG
from engine.errors import ValidationError
from engine.ledger import Ledger

__all__ = [
    "CONTENT_FIELDS",
    "Event",
    "EventBus",
    "EventFilter",
    "Subscriber",
]

# Payload keys that carry memory text; redaction mode removes them (seed 001: "strip content").
CONTENT_FIELDS = frozenset({"content", "text", "normalized", "before_content", "after_content",
                            "prompt", "completion", "query", "summary"})

_MIGRATIONS = (
    """
    CREATE TABLE events (
        seq            INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id       TEXT NOT NULL UNIQUE,
        kind           TEXT NOT NULL,
        ts             REAL NOT NULL,
        record_id      TEXT,
        memory_hash    TEXT,
        stage          TEXT,
        similarity     REAL,
        thresholds     TEXT,
        source         TEXT,
        latency_ms     REAL,
        decision_reason TEXT,
        agent_id       TEXT,
        payload        TEXT NOT NULL
    );
    CREATE INDEX events_ts ON events(ts);
    CREATE INDEX events_kind_ts ON events(kind, ts);
    CREATE INDEX events_record ON events(record_id);
    """,
)


@dataclass(frozen=True, slots=True)
class Event:
    """One observable step or decision.

    Attributes:
        event_id: Unique id.
        kind: e.g. ``merge-applied`` or ``memory:record:created``.
        ts: Epoch ms.
        seq: Ledger sequence number (0 when not persisted); strictly increasing, gap-free.
        record_id: The record the event is about, if any.
        memory_hash: Content hash of the memory concerned (seed 001 ``memory_hash``).
        stage: Pipeline stage name, if emitted by a stage.
        similarity: Best similarity involved, if any.
        thresholds: Thresholds applied (name → value).
        source: Source instance (seed 001 ``source_instance``).
        latency_ms: Time the step took.
        decision_reason: Why the decision was taken.
        agent_id: Agent concerned.
        payload: Anything else, JSON-compatible.
    """

    event_id: str
    kind: str
    ts: float
    seq: int = 0
    record_id: str | None = None
    memory_hash: str | None = None
    stage: str | None = None
    similarity: float | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    source: str | None = None
    latency_ms: float | None = None
    decision_reason: str | None = None
    agent_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the wire form (timestamps stay epoch ms; ``ts_iso`` is added for people)."""
        from engine.records import format_timestamp

        return {
            "event_id": self.event_id,
            "seq": self.seq,
            "kind": self.kind,
            "ts": self.ts,
            "ts_iso": format_timestamp(self.ts),
            "record_id": self.record_id,
            "memory_hash": self.memory_hash,
            "stage": self.stage,
            "similarity": self.similarity,
            "thresholds": dict(self.thresholds),
            "source": self.source,
            "latency_ms": self.latency_ms,
            "decision_reason": self.decision_reason,
            "agent_id": self.agent_id,
            "payload": dict(self.payload),
        }

    @classmethod
    def from_json(cls, data: object) -> Event:
        """Parse :meth:`to_json` output (an event read from the introspection API).

        Raises:
            ValidationError: a required field is missing or has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise ValidationError("event", data, "must be a JSON object")
        for name, kind in (("event_id", str), ("kind", str)):
            if not isinstance(data.get(name), kind):
                raise ValidationError(name, data.get(name), "must be a string")
        ts, seq = data.get("ts"), data.get("seq", 0)
        if not isinstance(ts, int | float) or isinstance(ts, bool):
            raise ValidationError("ts", ts, "must be epoch milliseconds")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise ValidationError("seq", seq, "must be an integer")
        thresholds = data.get("thresholds") or {}
        payload = data.get("payload") or {}
        if not isinstance(thresholds, Mapping) or not isinstance(payload, Mapping):
            raise ValidationError("payload", payload, "thresholds and payload must be objects")
        return cls(
            event_id=data["event_id"], kind=data["kind"], ts=float(ts), seq=seq,
            record_id=data.get("record_id"), memory_hash=data.get("memory_hash"),
            stage=data.get("stage"), similarity=data.get("similarity"),
            thresholds=dict(thresholds), source=data.get("source"),
            latency_ms=data.get("latency_ms"), decision_reason=data.get("decision_reason"),
            agent_id=data.get("agent_id"), payload=dict(payload))


@dataclass(frozen=True, slots=True)
class EventFilter:
    """A ledger query over events; every field narrows the result."""

    since: float | None = None
    until: float | None = None
    kinds: Sequence[str] | None = None
    record_id: str | None = None
    source: str | None = None
    decision_reason: str | None = None
    after_seq: int | None = None
    limit: int = 1000
    newest_first: bool = False


Subscriber = Callable[[Event], None]


class EventBus:
    """Fan-out of events to subscribers and the ledger.

    Args:
        clock: Time source for ``ts``.
        ledger: Where events are persisted (None: in-process only).
        rng: Randomness for sampling.
        sampling_rate: Fraction of events kept (seed 001), 0.0..1.0.
        redaction: When True, content fields are stripped and strings redacted.
        redactor: The one redaction function (DESIGN decision 8) used in redaction mode.
        on_subscriber_error: Told about exceptions raised by subscribers (they never propagate).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        ledger: Ledger | None = None,
        rng: RNG | None = None,
        sampling_rate: float = 1.0,
        redaction: bool = False,
        redactor: Callable[[str], str] | None = None,
        on_subscriber_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._clock = clock
        self._ledger = ledger
        self._rng = rng or SystemRNG()
        self._lock = threading.RLock()
        self._subscribers: list[Subscriber] = []
        self._redactor = redactor
        self._on_subscriber_error = on_subscriber_error
        self.sampling_rate = sampling_rate
        self.redaction = redaction
        # seed 001 slow-mo: the pause between stages of a headless ingest (EngineConfig)
        self.slow_mo_ms = 0.0
        if ledger is not None and not ledger.read_only:
            ledger.migrate("events", _MIGRATIONS)

    @property
    def sampling_rate(self) -> float:
        """Fraction of events kept."""
        return self._sampling_rate

    @sampling_rate.setter
    def sampling_rate(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            from engine.errors import ConfigInvalid

            raise ConfigInvalid("sampling_rate", value, "must be in 0..1")
        self._sampling_rate = value

    def set_redactor(self, redactor: Callable[[str], str] | None) -> None:
        """Install the redaction function used in redaction mode."""
        self._redactor = redactor

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Deliver every emitted event to ``callback`` (on the emitting thread).

        Returns:
            A function that unsubscribes.
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def emit(
        self,
        kind: str,
        *,
        record_id: str | None = None,
        memory_hash: str | None = None,
        stage: str | None = None,
        similarity: float | None = None,
        thresholds: Mapping[str, float] | None = None,
        source: str | None = None,
        latency_ms: float | None = None,
        decision_reason: str | None = None,
        agent_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        force: bool = False,
    ) -> Event | None:
        """Build, persist and deliver an event.

        Args:
            force: Bypass sampling (for audit events such as edits and deletions that the
                record-fate view depends on).

        Returns:
            The event, or None when sampling dropped it.
        """
        if not force and self._sampling_rate < 1.0 and (
            self._sampling_rate == 0.0 or self._rng.next_float() >= self._sampling_rate
        ):
            return None
        body = dict(payload or {})
        if self.redaction:
            body = self._redact_payload(body)
        event = Event(
            event_id=uuid.uuid4().hex,
            kind=kind,
            ts=self._clock.now(),
            record_id=record_id,
            memory_hash=memory_hash,
            stage=stage,
            similarity=similarity,
            thresholds=dict(thresholds or {}),
            source=source,
            latency_ms=latency_ms,
            decision_reason=decision_reason,
            agent_id=agent_id,
            payload=body,
        )
        with self._lock:
            if self._ledger is not None and not self._ledger.read_only:
                event = self._persist(event)
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception as exc:  # a broken view must not break ingest
                if self._on_subscriber_error is not None:
                    self._on_subscriber_error(exc)
        return event

    def _redact_payload(self, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in body.items():
            if key in CONTENT_FIELDS:
                out[key] = "<redacted>"
            else:
                out[key] = self._redact_value(value)
        return out

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redactor(value) if self._redactor is not None else value
        if isinstance(value, Mapping):
            return self._redact_payload(dict(value))
        if isinstance(value, list | tuple):
            return [self._redact_value(v) for v in value]
        return value

    # batched emission, added for engine/ingest (helpers at the end of this module)
    def emit_many(self, items: Sequence[tuple[str, Mapping[str, Any]]], *,
                  force: bool = False) -> list[Event | None]:
        """Emit several events like :meth:`emit`, persisted in one ledger transaction.

        Args:
            items: ``(kind, fields)`` pairs; ``fields`` are :meth:`emit`'s keyword arguments
                (``record_id``, ``memory_hash``, ``stage``, ``similarity``, ``thresholds``,
                ``source``, ``latency_ms``, ``decision_reason``, ``agent_id``, ``payload``).
            force: Bypass sampling for all of them.

        Returns:
            One entry per item: the event, or None when sampling dropped it. Subscribers receive
            the kept events in order, after the transaction committed.
        """
        return _emit_many(self, items, force=force)

    def _persist(self, event: Event) -> Event:
        assert self._ledger is not None
        return _persist_many(self._ledger, [event])[0]

    def query(self, flt: EventFilter | None = None) -> list[Event]:
        """Events from the ledger matching ``flt``, oldest first (or newest first if asked)."""
        if self._ledger is None:
            return []
        flt = flt or EventFilter()
        clauses: list[str] = []
        params: list[object] = []
        for column, op, value in (("ts", ">=", flt.since), ("ts", "<=", flt.until),
                                  ("record_id", "=", flt.record_id),
                                  ("source", "=", flt.source),
                                  ("decision_reason", "=", flt.decision_reason),
                                  ("seq", ">", flt.after_seq)):
            if value is not None:
                clauses.append(f"{column} {op} ?")
                params.append(value)
        if flt.kinds:
            clauses.append(f"kind IN ({', '.join('?' for _ in flt.kinds)})")
            params.extend(flt.kinds)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        order = "DESC" if flt.newest_first else "ASC"
        params.append(max(0, flt.limit))
        try:
            rows = self._ledger.query(
                f"SELECT * FROM events {where} ORDER BY seq {order} LIMIT ?", params
            )
        except Exception:  # a foreign or empty ledger without our table has no events
            if self._ledger.version("events") == 0:
                return []
            raise
        return [_row_to_event(row, self._ledger) for row in rows]

    def last_seq(self) -> int:
        """The highest persisted sequence number (0 when none)."""
        if self._ledger is None or self._ledger.version("events") == 0:
            return 0
        rows = self._ledger.query("SELECT MAX(seq) AS m FROM events")
        return int(rows[0]["m"] or 0)


def _row_to_event(row: Any, ledger: Ledger) -> Event:
    try:
        return _event(row)
    except (ValueError, TypeError, RecursionError) as exc:  # not JSON, or nested past reading
        raise ledger.damaged("events", row["seq"], exc) from exc


def _event(row: Any) -> Event:
    return Event(
        event_id=row["event_id"],
        kind=row["kind"],
        ts=row["ts"],
        seq=row["seq"],
        record_id=row["record_id"],
        memory_hash=row["memory_hash"],
        stage=row["stage"],
        similarity=row["similarity"],
        thresholds=json.loads(row["thresholds"] or "{}"),
        source=row["source"],
        latency_ms=row["latency_ms"],
        decision_reason=row["decision_reason"],
        agent_id=row["agent_id"],
        payload=json.loads(row["payload"] or "{}"),
    )


# -- batched emission (added for engine/ingest) ---------------------------------------------------
# Batch ingest emits ~5 events per memory; one ledger transaction each cost ~0.5 ms per event,
# a quarter of the model's encode time per memory (measured). ``emit_many`` keeps the envelope,
# sampling, redaction and delivery of :meth:`EventBus.emit` and persists a batch in one
# transaction.

_ENVELOPE_FIELDS = ("record_id", "memory_hash", "stage", "similarity", "thresholds", "source",
                    "latency_ms", "decision_reason", "agent_id", "payload")
_ENVELOPE_SET = frozenset(_ENVELOPE_FIELDS)


def _emit_many(bus: EventBus, items: Sequence[tuple[str, Mapping[str, Any]]], *,
               force: bool = False) -> list[Event | None]:
    built: list[Event | None] = []
    for kind, fields in items:
        unknown = fields.keys() - _ENVELOPE_SET
        if unknown:
            raise TypeError(f"emit_many: unknown envelope field(s) {sorted(unknown)}")
        if not force and bus.sampling_rate < 1.0 and (
            bus.sampling_rate == 0.0 or bus._rng.next_float() >= bus.sampling_rate
        ):
            built.append(None)
            continue
        body = dict(fields.get("payload") or {})
        if bus.redaction:
            body = bus._redact_payload(body)
        built.append(Event(
            event_id=uuid.uuid4().hex, kind=kind, ts=bus._clock.now(),
            record_id=fields.get("record_id"), memory_hash=fields.get("memory_hash"),
            stage=fields.get("stage"), similarity=fields.get("similarity"),
            thresholds=dict(fields.get("thresholds") or {}), source=fields.get("source"),
            latency_ms=fields.get("latency_ms"), decision_reason=fields.get("decision_reason"),
            agent_id=fields.get("agent_id"), payload=body,
        ))
    kept = [e for e in built if e is not None]
    with bus._lock:
        if kept and bus._ledger is not None and not bus._ledger.read_only:
            persisted = iter(_persist_many(bus._ledger, kept))
            built = [None if e is None else next(persisted) for e in built]
        subscribers = list(bus._subscribers)
    for event in built:
        if event is None:
            continue
        for callback in subscribers:
            try:
                callback(event)
            except Exception as exc:  # a broken view must not break ingest
                if bus._on_subscriber_error is not None:
                    bus._on_subscriber_error(exc)
    return built


_PAYLOAD_JSON = json.JSONEncoder(default=str).encode  # json.dumps(..., default=str), built once
_INSERT_EVENT = (
    "INSERT INTO events(event_id, kind, ts, record_id, memory_hash, stage, similarity,"
    " thresholds, source, latency_ms, decision_reason, agent_id, payload)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _persist_many(ledger: Ledger, events: Sequence[Event]) -> list[Event]:
    """Insert ``events`` in one transaction with one ``executemany``; the events with their
    ``seq``.

    ``seq`` is ``INTEGER PRIMARY KEY AUTOINCREMENT`` and the transaction is ``BEGIN
    IMMEDIATE`` (no other writer between the rows), so the rows get consecutive numbers ending
    at ``last_insert_rowid()``: one statement for the chunk instead of one per event.
    """
    if not events:
        return []
    rows = [(event.event_id, event.kind, event.ts, event.record_id, event.memory_hash,
             event.stage, event.similarity, json.dumps(dict(event.thresholds)), event.source,
             event.latency_ms, event.decision_reason, event.agent_id,
             _PAYLOAD_JSON(dict(event.payload))) for event in events]
    with ledger.transaction() as conn:
        conn.executemany(_INSERT_EVENT, rows)
        last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
    first = last - len(events) + 1
    return [Event(e.event_id, e.kind, e.ts, first + i, e.record_id, e.memory_hash, e.stage,
                  e.similarity, e.thresholds, e.source, e.latency_ms, e.decision_reason,
                  e.agent_id, e.payload) for i, e in enumerate(events)]
