"""Record fate: "why did this memory disappear?" (issue 9), told from the ledger.

For any record id — alive, merged, deleted, pruned or compacted — :func:`record_fate` collects
its story from the ``events`` table (events about the id, and ingest events naming it as the
incoming memory or a merged-from id) and the ``edits`` table (create / update / redact / delete /
restore with their actor and batch), and adds:

* for a live record, a forecast of when its decayed importance (seed 004) falls below the
  pruning floor (``engine.lifecycle.pruning.LOW_IMPORTANCE``) at the current decay;
* a warning when the batch that retired it (one ``engine.delete`` call: one ingest, prune,
  retention run or one compaction group; or one compaction run) retired more than ``mass_limit``
  records at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.decay import MS_PER_DAY, decayed_importance
from engine.errors import RecordNotFound
from engine.events import Event, EventFilter
from engine.lifecycle.pruning import LOW_IMPORTANCE
from engine.memory_engine import MemoryEngine

__all__ = ["DecayForecast", "FateStep", "MassRetirement", "RecordFate", "mass_retirements",
           "record_fate"]

DEFAULT_MASS_LIMIT = 20
"""More records than this retired by one batch is flagged (issue 9: "more than N at once")."""

_MENTION_LIMIT = 200
_COMPLETED = "memory:summarization:completed"
_COMPACTION = "memory:compaction"


@dataclass(frozen=True, slots=True)
class FateStep:
    """One thing that happened to the record.

    Attributes:
        ts: Epoch ms.
        kind: created, merged_into, absorbed, skipped_duplicate, deferred, reviewed, edited,
            redacted, deleted, pruned, expired, retention, compacted, restored.
        text: One human sentence.
        related_id: The other record (survivor, absorbed memory, summary), if any.
        similarity: The decision's similarity, if any.
        threshold: The threshold it was compared with, if any.
        actor: Who did it (user, ingest, compaction, prune:normal, …), if known.
    """

    ts: float
    kind: str
    text: str
    related_id: str | None = None
    similarity: float | None = None
    threshold: float | None = None
    actor: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"ts": self.ts, "kind": self.kind, "text": self.text,
                "related_id": self.related_id, "similarity": self.similarity,
                "threshold": self.threshold, "actor": self.actor}


@dataclass(frozen=True, slots=True)
class DecayForecast:
    """When a live record's decayed importance crosses the pruning floor (seed 004).

    Attributes:
        importance: Stored importance.
        decayed_now: Decayed importance now.
        floor: The retrieval/pruning floor (normal pruning drops records below it).
        below_at: Epoch ms when it falls below the floor at the current decay (None: never,
            e.g. zero importance is already below).
        already_below: It is below the floor now (the next normal prune retires it).
    """

    importance: float
    decayed_now: float
    floor: float
    below_at: float | None
    already_below: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"importance": self.importance, "decayed_now": self.decayed_now,
                "floor": self.floor, "below_at": self.below_at,
                "already_below": self.already_below}


@dataclass(frozen=True, slots=True)
class MassRetirement:
    """One batch that retired many records at once.

    Attributes:
        batch: The edit batch id (or ``compaction@<ts>`` for a compaction run).
        actor: Who retired them.
        count: How many.
        ts: When.
    """

    batch: str
    actor: str
    count: int
    ts: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"batch": self.batch, "actor": self.actor, "count": self.count, "ts": self.ts}


@dataclass(frozen=True, slots=True)
class RecordFate:
    """The story of one record id.

    Attributes:
        record_id: The id asked about.
        status: alive, merged, skipped, deferred, deleted, pruned, expired, retention,
            compacted or unknown (the ledger never saw it).
        survivor_id: The record it was merged into or compacted into, if any.
        steps: What happened, oldest first.
        forecast: Decay forecast while alive.
        warnings: Batches that retired it with more than the mass limit.
        content: Its last known content (the record, its edit history, or the ingest event
            of a memory that was merged before being stored); "" when unknown.
    """

    record_id: str
    status: str
    survivor_id: str | None
    steps: tuple[FateStep, ...]
    forecast: DecayForecast | None
    warnings: tuple[MassRetirement, ...]
    content: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"record_id": self.record_id, "status": self.status,
                "survivor_id": self.survivor_id, "steps": [s.to_json() for s in self.steps],
                "forecast": None if self.forecast is None else self.forecast.to_json(),
                "warnings": [w.to_json() for w in self.warnings], "content": self.content}


def _threshold(event: Event) -> float | None:
    """The threshold the decision compared the similarity with (seed 001: ``effective``)."""
    thresholds = event.thresholds or {}
    for key in ("effective", "threshold", "tier"):
        value = thresholds.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def _fmt_sim(event: Event) -> str:
    """" (similarity 0.884 < threshold 0.900)": the sign is the one the two numbers satisfy."""
    if event.similarity is None:
        return ""
    similarity = event.similarity
    limit = _threshold(event)
    if limit is None:
        return f" (similarity {similarity:.3f})"
    sign = "≥" if similarity >= limit else "<"
    digits = 3  # enough digits that the printed numbers show the comparison too
    while digits < 6 and similarity != limit and \
            f"{similarity:.{digits}f}" == f"{limit:.{digits}f}":
        digits += 1
    return f" (similarity {similarity:.{digits}f} {sign} threshold {limit:.{digits}f})"


def _mentions(engine: MemoryEngine, record_id: str) -> list[Event]:
    """Ledger events that name ``record_id`` in their payload but are about another record."""
    if engine.ledger.version("events") == 0:
        return []
    rows = engine.ledger.query(
        "SELECT seq FROM events WHERE instr(payload, ?) > 0 AND "
        "(record_id IS NULL OR record_id != ?) ORDER BY seq LIMIT ?",
        [record_id, record_id, _MENTION_LIMIT])
    found: list[Event] = []
    for row in rows:
        found.extend(engine.events.query(EventFilter(after_seq=int(row["seq"]) - 1, limit=1)))
    return found


def _event_steps(record_id: str, own: list[Event], mentions: list[Event]) -> list[
        tuple[float, int, FateStep]]:
    steps: list[tuple[float, int, FateStep]] = []
    for event in mentions:
        payload: Mapping[str, Any] = event.payload or {}
        incoming = payload.get("incoming_id") == record_id
        merged_from = record_id in (payload.get("merged_from") or [])
        target = event.record_id
        if event.kind == "merge-applied" and (incoming or merged_from):
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "merged_into", f"merged into {target}{_fmt_sim(event)}",
                target, event.similarity, _threshold(event), event.source)))
        elif event.kind == "ingest-skipped" and incoming:
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "skipped_duplicate",
                f"not stored: {event.decision_reason or 'skipped'} of {target}{_fmt_sim(event)}",
                target, event.similarity, _threshold(event), event.source)))
        elif event.kind == "merge-deferred" and incoming:
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "deferred",
                f"deferred for review against {target}{_fmt_sim(event)}",
                target, event.similarity, _threshold(event), event.source)))
    for event in own:
        payload = event.payload or {}
        if event.kind == "merge-applied":
            absorbed = payload.get("incoming_id")
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "absorbed", f"absorbed incoming memory {absorbed}{_fmt_sim(event)}",
                absorbed if isinstance(absorbed, str) else None, event.similarity,
                _threshold(event), event.source)))
        elif event.kind == "merge-deferred":
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "deferred",
                f"an incoming memory was deferred for review against it{_fmt_sim(event)}",
                None, event.similarity, _threshold(event), event.source)))
        elif event.kind in ("review-approved", "review-rejected"):
            steps.append((event.ts, event.seq, FateStep(
                event.ts, "reviewed", f"review {event.kind.split('-')[1]}", None,
                event.similarity, _threshold(event), event.source)))
    return steps


_DELETE_KINDS = {"compaction": "compacted", "expire": "expired", "retention": "retention"}


def _delete_kind(actor: str) -> str:
    if actor.startswith("prune"):
        return "pruned"
    return _DELETE_KINDS.get(actor, "deleted")


def _compaction_summary(engine: MemoryEngine, ts: float, record_id: str
                        ) -> tuple[str | None, int | None]:
    """The summary a compacted record went into, and how many the compaction run removed."""
    summary: str | None = None
    for event in engine.events.query(EventFilter(since=ts, kinds=[_COMPLETED], limit=20)):
        candidate = (event.payload or {}).get("summaryRecordId") or event.record_id
        if not isinstance(candidate, str):
            continue
        try:
            refs = engine.get(candidate).metadata.get("source_ref_ids") or []
        except RecordNotFound:
            refs = []
        if record_id in refs or summary is None:
            summary = candidate
            if record_id in refs:
                break
    removed: int | None = None
    runs = engine.events.query(EventFilter(since=ts, kinds=[_COMPACTION], limit=1))
    if runs:
        value = (runs[0].payload or {}).get("removed")
        removed = int(value) if isinstance(value, int | float) else None
    return summary, removed


def _batch_size(engine: MemoryEngine, batch_id: str) -> int:
    rows = engine.ledger.query(
        "SELECT COUNT(*) AS n FROM edits WHERE batch_id = ? AND op = 'delete'", [batch_id])
    return int(rows[0]["n"] or 0)


def forecast_decay(engine: MemoryEngine, record_id: str) -> DecayForecast | None:
    """Seed 004 decay forecast for a live record (None when it does not exist)."""
    try:
        record = engine.get(record_id)
    except RecordNotFound:
        return None
    now = engine.clock.now()
    half_life = engine.config.memory.importance_decay_half_life_days
    decayed_now = float(decayed_importance(record.importance, record.created_at,
                                           record.access_count, now, half_life))
    floor = LOW_IMPORTANCE
    below_at: float | None = None
    at_creation = float(decayed_importance(record.importance, record.created_at,
                                           record.access_count, record.created_at, half_life))
    if at_creation > 0.0:
        # seed 004: importance × exp(-ln2/h × days) × boost < floor ⇔ days > h/ln2 × ln(v0/floor)
        days = half_life / math.log(2.0) * math.log(at_creation / floor)
        below_at = record.created_at + max(days, 0.0) * MS_PER_DAY
    return DecayForecast(record.importance, decayed_now, floor, below_at, decayed_now < floor)


def mass_retirements(engine: MemoryEngine, limit: int = DEFAULT_MASS_LIMIT
                     ) -> list[MassRetirement]:
    """Batches (one delete call, or one compaction run) that retired more than ``limit``."""
    found: list[MassRetirement] = []
    if engine.ledger.version("records") > 0:
        rows = engine.ledger.query(
            "SELECT batch_id, MIN(actor) AS actor, COUNT(*) AS n, MIN(ts) AS ts FROM edits "
            "WHERE op = 'delete' GROUP BY batch_id HAVING COUNT(*) > ? ORDER BY ts", [limit])
        found.extend(MassRetirement(str(r["batch_id"]), str(r["actor"]), int(r["n"]),
                                    float(r["ts"])) for r in rows)
    for event in engine.events.query(EventFilter(kinds=[_COMPACTION], limit=10_000)):
        removed = (event.payload or {}).get("removed")
        if isinstance(removed, int) and removed > limit:
            found.append(MassRetirement(f"compaction@{event.ts:.0f}", "compaction", removed,
                                        event.ts))
    return sorted(found, key=lambda m: m.ts)


def _state_sentence(op: str, actor: str) -> str | None:
    """The sentence of a soft-state edit (MemoryEngine.pause / archive / resume), else None."""
    if op == "pause":
        return f"paused by {actor}: kept, not retrieved"
    if op == "archive":
        return f"archived by {actor}: kept and hidden, not retrieved"
    if op == "resume":
        return f"resumed by {actor}: retrieved again"
    return None


def record_fate(engine: MemoryEngine, record_id: str, *,
                mass_limit: int = DEFAULT_MASS_LIMIT) -> RecordFate:
    """The story of ``record_id`` from the ledger (see the module docstring).

    Args:
        engine: An open engine (its ledger holds the events and edits).
        record_id: Any id ever seen: alive, merged, deleted, pruned or compacted.
        mass_limit: Flag a retiring batch of more than this many records.

    Returns:
        The fate; status ``unknown`` with no steps when the ledger never saw the id.
    """
    own = engine.events.query(EventFilter(record_id=record_id, limit=1000))
    mentions = _mentions(engine, record_id)
    timeline = _event_steps(record_id, own, mentions)
    warnings: list[MassRetirement] = []
    status = "unknown"
    survivor: str | None = None
    for entry in reversed(engine.edit_history(record_id, limit=1000)):
        actor = entry.actor
        if entry.op == "create":
            step = FateStep(entry.ts, "created", f"created by {actor}", actor=actor)
        elif entry.op == "update":
            changed = ""
            if entry.before is not None and entry.after is not None:
                names = [name for name in ("content", "layer", "importance", "confidence",
                                           "tags", "privacy", "category")
                         if getattr(entry.before, name) != getattr(entry.after, name)]
                changed = f" ({', '.join(names)})" if names else ""
            step = FateStep(entry.ts, "edited", f"edited by {actor}{changed}", actor=actor)
        elif entry.op == "redact":
            step = FateStep(entry.ts, "redacted", f"redacted in place by {actor}", actor=actor)
        elif (sentence := _state_sentence(entry.op, actor)) is not None:
            step = FateStep(entry.ts, entry.op, sentence, actor=actor)  # the record stays alive
        elif entry.op == "restore":
            step = FateStep(entry.ts, "restored", f"restored by {actor} (undo)", actor=actor)
        elif entry.op == "delete":
            kind = _delete_kind(actor)
            size = _batch_size(engine, entry.batch_id)
            related: str | None = None
            if kind == "compacted":
                related, run = _compaction_summary(engine, entry.ts, record_id)
                text = f"compacted into summary {related}" if related else "compacted"
                size = max(size, run or 0)
            elif kind == "pruned":
                text = f"pruned ({actor}): decayed importance below the floor {LOW_IMPORTANCE}"
            else:
                text = f"{kind} by {actor}"
            if size > 1:
                text += f" — one of {size} retired together"
            if size > mass_limit:
                warnings.append(MassRetirement(entry.batch_id, actor, size, entry.ts))
            step = FateStep(entry.ts, kind, text, related, actor=actor)
        else:
            step = FateStep(entry.ts, entry.op, f"{entry.op} by {actor}", actor=actor)
        timeline.append((entry.ts, 10**12 + entry.seq, step))
    foreign = _foreign_creation(engine, record_id)
    if foreign is not None:
        timeline.append((foreign.ts, -1, foreign))
    timeline.sort(key=lambda item: (item[0], item[1]))
    steps = tuple(step for _ts, _seq, step in timeline)
    for step in steps:  # the last decisive step sets the status
        if step.kind in ("created", "restored", "edited", "redacted", "absorbed"):
            status, survivor = "alive", None
        elif step.kind == "merged_into":
            status, survivor = "merged", step.related_id
        elif step.kind == "skipped_duplicate":
            status, survivor = "skipped", step.related_id
        elif step.kind == "deferred" and status == "unknown":
            status = "deferred"
        elif step.kind in ("deleted", "pruned", "expired", "retention", "compacted"):
            status = step.kind
            survivor = step.related_id if step.kind == "compacted" else None
    forecast = forecast_decay(engine, record_id)
    if forecast is not None:
        status = "alive"
    return RecordFate(record_id, status, survivor, steps, forecast, tuple(warnings),
                      _last_content(engine, record_id, mentions))


def _foreign_creation(engine: MemoryEngine, record_id: str) -> FateStep | None:
    """For a collection written by another tool (no ledger of ours saw its records): its
    creation as that tool recorded it, so the story starts at the real time."""
    info = engine.store.foreign_info
    if info is None:
        return None
    try:
        record = engine.get(record_id)
    except RecordNotFound:
        return None
    actor = info.layout.value
    return FateStep(record.created_at, "created",
                    f"created by {actor} in collection {engine.store.spec.collection}",
                    actor=actor)


def _last_content(engine: MemoryEngine, record_id: str, mentions: list[Event]) -> str:
    try:
        return engine.get(record_id).content
    except RecordNotFound:
        pass
    for entry in engine.edit_history(record_id, limit=50):  # newest first
        record = entry.after or entry.before
        if record is not None:
            return record.content
    for event in reversed(mentions):
        payload = event.payload or {}
        content = payload.get("content")
        if payload.get("incoming_id") == record_id and isinstance(content, str):
            return content
    return ""

