"""The layer service: keeps the social, procedural and spatial layers current on ingest.

It hooks the engine's event bus (no coupling to the ingest pipeline's internals): every event
that names a record that may have changed — ``memory:record:created|updated|edited|restored|
redacted|deleted`` and ``merge-applied`` — queues that record id. The queue is drained in
batches, by a background worker (:meth:`LayerService.start`) or on the caller's thread
(:meth:`LayerService.flush`). Draining re-reads the records, updates the evidence tables and the
spatial index, recomputes the affected agents' social summaries and patterns, and writes the
derived records that changed in one batch.

Where things live (see ``docs/layers.md``):

* evidence (social observations, episode steps, pattern history): ledger tables of component
  ``layers`` — they outlive compaction and retention of the raw records;
* one social summary per counterpart and one procedural record per pattern: records in the
  store (social / procedural layer, stable ids, ``metadata.derivedBy``), visible in the browser;
* positions: an in-memory :class:`~engine.layers.spatial.SpatialIndex`, rebuilt from the store.

A deletion with reason ``deleted`` (a user's decision that the memory was wrong) removes its
evidence; deletions by compaction, expiry or retention keep it (the interaction happened).

Soft states (issue 20): a paused or archived record is withheld from the layers as it is from
retrieval. Its evidence rows and spatial point are dropped while it is not active (it no longer
counts towards summaries and patterns) and come back when it is resumed (the state-change
events queue it like any other change); a derived summary or pattern record a person paused
or archived is left out of the social and pattern lists and keeps its state when it is
rewritten.

Read-only engines (``mnemoscope serve`` beside a running agent) write nothing: they read the
agent's evidence tables when the agent runs the service, else they derive the evidence from the
records into an in-memory ledger.

Events dropped by sampling (``sampling_rate`` < 1; edits and deletions are never dropped) are
caught by :meth:`LayerService.sync`, which compares the store's ids with the ids seen.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.clock import Clock
from engine.config import RetentionPolicy
from engine.errors import RecordNotFound
from engine.events import Event, EventBus
from engine.layers import procedural, social, wire
from engine.layers.schema import LAYERS_COMPONENT, MIGRATIONS
from engine.layers.spatial import SpatialAdapter, SpatialHit, SpatialIndex
from engine.ledger import Ledger
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    ProvenanceEntry,
    RecordState,
    TrustTier,
)
from engine.store import STATES, MemoryStore

__all__ = [
    "EVENT_PATTERN",
    "EVENT_SOCIAL_SUMMARY",
    "TRACKED_KINDS",
    "LayerContext",
    "LayerService",
    "PatternDetail",
    "PatternHistoryPoint",
]

EVENT_SOCIAL_SUMMARY = "memory:social:summary"
EVENT_PATTERN = "memory:procedural:pattern"
TRACKED_KINDS = frozenset({"memory:record:created", "memory:record:updated",
                           "memory:record:edited", "memory:record:restored",
                           "memory:record:redacted", "memory:record:deleted", "merge-applied",
                           "memory:summarization:completed",
                           # soft states (MemoryEngine.pause / archive / resume)
                           "memory:record:paused", "memory:record:archived",
                           "memory:record:resumed"})
USER_DELETE_REASON = "deleted"

EditPairs = Sequence[tuple[MemoryRecord | None, MemoryRecord | None]]


@dataclass(frozen=True, slots=True)
class LayerContext:
    """What the service needs from the engine (handed over by ``MemoryEngine.layers``).

    Attributes:
        store: The record store.
        ledger: The engine's ledger.
        events: The event bus to hook and to emit on.
        clock: Time source.
        retention: Per-layer caps (``socialMax``, ``proceduralMax``).
        embed: Texts → vectors, or None while the model is not ready.
        model_name: Name of the embedding model ("" while none).
        record_edits: Records derived writes in the edit history (op, pairs, actor).
        write_lock: The engine's write lock.
        add: Stores a new memory as given (the plain insert): evidence helpers use it, because
            the dedup pipeline would merge near-identical episodes and lose their count.
        ingest: Stores a new memory through the ingest pipeline when there is one (the spatial
            adapter: repeated crossings of one boundary may merge).
    """

    store: MemoryStore
    ledger: Ledger
    events: EventBus
    clock: Clock
    retention: RetentionPolicy
    embed: Callable[[Sequence[str]], npt.NDArray[np.float32] | None]
    model_name: Callable[[], str]
    record_edits: Callable[[str, EditPairs, str], object]
    write_lock: threading.RLock
    add: Callable[[NewMemory], Any]
    ingest: Callable[[NewMemory], Any]


@dataclass(frozen=True, slots=True)
class PatternHistoryPoint:
    """A pattern's support and success rate at one moment."""

    ts: float
    support: int
    success_rate: float | None

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"ts": self.ts, "support": self.support, "success_rate": self.success_rate}

    @classmethod
    def from_json(cls, data: object) -> PatternHistoryPoint:
        """Parse :meth:`to_json` output. Raises ValidationError."""
        return wire.parse("pattern history point", data, lambda d: cls(
            wire.number(d["ts"]), int(d["support"]), wire.optional_number(d.get("success_rate"))))


@dataclass(frozen=True, slots=True)
class PatternDetail:
    """A pattern with what the pattern-list view shows beside it.

    Attributes:
        pattern: The mined pattern.
        history: Its support / success-rate changes as the miner recorded them, oldest first.
        episodes: Its supporting episodes (with their records), oldest first.
    """

    pattern: procedural.Pattern
    history: tuple[PatternHistoryPoint, ...] = ()
    episodes: tuple[procedural.Episode, ...] = ()

    def success_series(self) -> list[procedural.SuccessPoint]:
        """The running success rate over the supporting episodes, in episode time."""
        return procedural.success_series(self.episodes)


class LayerService:
    """Social summaries, mined patterns and the spatial index of one engine.

    Args:
        context: The engine parts it uses.
        min_support: Episodes a pattern must recur in.
        min_steps: Shortest step run that counts as a pattern.
        max_steps: Longest step run considered.
        debounce_s: The background worker waits this long after a change before draining, so
            a burst of ingests is handled as one batch.
    """

    def __init__(self, context: LayerContext, *, min_support: int = 2, min_steps: int = 2,
                 max_steps: int = 12, debounce_s: float = 0.25) -> None:
        self._ctx = context
        self._min_support = min_support
        self._min_steps = min_steps
        self._max_steps = max_steps
        self._debounce_s = debounce_s
        self._lock = threading.RLock()
        self._pending: dict[str, str | None] = {}  # record id → delete reason (None: changed)
        self._seen: set[str] = set()
        self._loaded = False
        self._wake = threading.Condition()
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._errors: list[BaseException] = []
        self.spatial = SpatialIndex()
        self._writes_store = not context.store.read_only
        ledger = context.ledger
        if not ledger.read_only:
            ledger.migrate(LAYERS_COMPONENT, MIGRATIONS)
            self._evidence, self._owns_evidence = ledger, True
        elif ledger.version(LAYERS_COMPONENT) >= 1:
            # The agent runs the service and keeps the evidence; read it, write nothing.
            self._evidence, self._owns_evidence = ledger, False
        else:
            memory = Ledger(None)
            memory.migrate(LAYERS_COMPONENT, MIGRATIONS)
            self._evidence, self._owns_evidence = memory, True
        self._unsubscribe = context.events.subscribe(self.on_event)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def evidence(self) -> Ledger:
        """The ledger the evidence tables are read from."""
        return self._evidence

    @property
    def errors(self) -> list[BaseException]:
        """Errors the background worker met (it keeps going; the newest 20 are kept)."""
        return list(self._errors)

    def start(self) -> None:
        """Load (in the background) and keep the layers current as events arrive."""
        with self._wake:
            if self._worker is not None:
                return
            self._stopping = False
            self._worker = threading.Thread(target=self._run, name="mnemoscope-layers",
                                            daemon=True)
            self._worker.start()

    def close(self) -> None:
        """Stop the worker (draining what is queued) and unhook from the event bus."""
        self._unsubscribe()
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.join(timeout=30.0)
        if self._evidence is not self._ctx.ledger:
            self._evidence.close()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopping and self._loaded:
                    self._wake.wait()
                stopping = self._stopping
            if not stopping and self._debounce_s > 0:
                with self._wake:
                    self._wake.wait(timeout=self._debounce_s)
            try:
                self.flush()
            except Exception as exc:  # keep following: the queue is kept, .errors reports it
                self._errors = [*self._errors[-19:], exc]
                with self._wake:
                    self._wake.wait(timeout=1.0)
            if stopping:
                return

    # -- the event hook ------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """Queue the record an event names (the EventBus subscriber)."""
        if event.kind not in TRACKED_KINDS or not event.record_id:
            return
        reason = (event.decision_reason or USER_DELETE_REASON) \
            if event.kind == "memory:record:deleted" else None
        self.notify({event.record_id: reason})

    def notify(self, changes: Mapping[str, str | None]) -> None:
        """Queue record ids that changed (None) or were deleted (the deletion reason)."""
        with self._wake:
            for record_id, reason in changes.items():
                self._pending[record_id] = reason
            self._wake.notify_all()

    def flush(self) -> int:
        """Process everything queued now, on this thread. Returns how many ids were handled."""
        with self._lock:
            if not self._loaded:
                self.sync()
            with self._wake:
                pending, self._pending = self._pending, {}
            if pending:
                try:
                    self._process(pending)
                except BaseException:
                    with self._wake:  # put them back; newer news about an id wins
                        self._pending = {**pending, **self._pending}
                    raise
            return len(pending)

    def sync(self) -> None:
        """Re-read every record the service has not seen and forget those that are gone."""
        with self._lock:
            snapshot = self._ctx.store.view.snapshot()
            live = {snapshot.ids[r] for r in snapshot.live_rows.tolist()}
            changes: dict[str, str | None] = {i: None for i in live - self._seen}
            changes.update({i: "vanished" for i in self._seen - live})
            self._loaded = True
            if changes:
                self._process(changes, full=not self._seen)

    # -- processing ----------------------------------------------------------------------------

    def _fetch(self, ids: Sequence[str]) -> list[MemoryRecord]:
        view = self._ctx.store.view
        present = [i for i in ids if i in view]
        records: list[MemoryRecord] = []
        page = max(1, self._ctx.store.max_batch_size)
        for start in range(0, len(present), page):
            chunk = present[start:start + page]
            try:
                records.extend(self._ctx.store.get_many(chunk))
            except RecordNotFound:  # deleted meanwhile: take the survivors one by one
                for record_id in chunk:
                    try:
                        records.append(self._ctx.store.get(record_id))
                    except RecordNotFound:
                        continue
        return records

    def _process(self, changes: Mapping[str, str | None], *, full: bool = False) -> None:
        changed = [i for i, reason in changes.items() if reason is None]
        deleted = {i: reason for i, reason in changes.items() if reason is not None}
        fetched = self._fetch(changed)
        found = {r.id for r in fetched}
        gone = [i for i in changed if i not in found]
        deleted.update({i: "vanished" for i in gone})
        # paused and archived records are stored (seen) but withheld from the layers
        records = [r for r in fetched if r.state is RecordState.ACTIVE]
        withheld = [r.id for r in fetched if r.state is not RecordState.ACTIVE]
        self.spatial.update(records)
        self.spatial.remove([*deleted, *withheld])
        self._seen.update(found)
        self._seen.difference_update(deleted)
        social_agents: set[str] = set()
        pattern_agents: set[str] = set()
        if self._owns_evidence:
            social_agents, pattern_agents = self._update_evidence(records, deleted, withheld)
        if full:
            social_agents = set(self._agents("layer_social_obs"))
            pattern_agents = set(self._agents("layer_episode_obs"))
        if self._writes_store and (social_agents or pattern_agents):
            self._refresh_derived(social_agents, pattern_agents)

    def _agents(self, table: str) -> list[str]:
        return [row["agent_id"] for row in
                self._evidence.query(f"SELECT DISTINCT agent_id FROM {table}")]

    def _update_evidence(self, records: Sequence[MemoryRecord], deleted: Mapping[str, str],
                         withheld: Sequence[str] = ()) -> tuple[set[str], set[str]]:
        social_agents: set[str] = set()
        pattern_agents: set[str] = set()
        ids = [r.id for r in records]
        forget = [i for i, reason in deleted.items() if reason == USER_DELETE_REASON]
        touched = ids + forget + list(withheld)
        for table, agents in (("layer_social_obs", social_agents),
                              ("layer_episode_obs", pattern_agents)):
            for start in range(0, len(touched), 500):
                chunk = touched[start:start + 500]
                marks = ", ".join("?" for _ in chunk)
                agents.update(row["agent_id"] for row in self._evidence.query(
                    f"SELECT agent_id FROM {table} WHERE record_id IN ({marks})", chunk))
        social_rows = []
        episode_rows = []
        for record in records:
            obs = social.observation_from_record(record)
            if obs is not None:
                social_rows.append((obs.record_id, obs.agent_id, obs.counterpart, obs.sentiment,
                                    obs.ts, obs.privacy))
                social_agents.add(obs.agent_id)
            evidence = procedural.evidence_from_record(record)
            if evidence is not None:
                episode_rows.append((evidence.record_id, evidence.agent_id, evidence.episode_id,
                                     evidence.ts, evidence.step_index,
                                     json.dumps(list(evidence.steps)),
                                     None if evidence.outcome is None else int(evidence.outcome)))
                pattern_agents.add(evidence.agent_id)
        with self._evidence.transaction() as conn:
            for start in range(0, len(touched), 500):
                chunk = touched[start:start + 500]
                marks = ", ".join("?" for _ in chunk)
                conn.execute(f"DELETE FROM layer_social_obs WHERE record_id IN ({marks})", chunk)
                conn.execute(f"DELETE FROM layer_episode_obs WHERE record_id IN ({marks})", chunk)
            conn.executemany("INSERT INTO layer_social_obs VALUES (?, ?, ?, ?, ?, ?)",
                             social_rows)
            conn.executemany("INSERT INTO layer_episode_obs VALUES (?, ?, ?, ?, ?, ?, ?)",
                             episode_rows)
        return social_agents, pattern_agents

    # -- reading the layers --------------------------------------------------------------------

    def observations(self, agent_id: str | None = None, counterpart: str | None = None
                     ) -> list[social.SocialObservation]:
        """Social observations (evidence), oldest first."""
        self._ensure_loaded()
        where, params = _where(("agent_id", agent_id), ("counterpart", counterpart))
        rows = self._evidence.query(
            f"SELECT * FROM layer_social_obs {where} ORDER BY ts, record_id", params)
        return [social.SocialObservation(r["record_id"], r["agent_id"], r["counterpart"],
                                         r["sentiment"], r["ts"], r["privacy"]) for r in rows]

    def social_summaries(self, agent_id: str | None = None, counterpart: str | None = None
                         ) -> list[social.SocialSummary]:
        """Summaries per counterpart (with trend series), capped at ``socialMax`` per agent."""
        summaries = social.capped(social.summarize(self.observations(agent_id)),
                                  self._ctx.retention.social_max)
        if counterpart is not None:
            summaries = [s for s in summaries if s.counterpart == counterpart]
        withheld = self._withheld([s.record_id for s in summaries])
        return [s for s in summaries if s.record_id not in withheld]

    def episodes(self, agent_id: str | None = None) -> list[procedural.Episode]:
        """Assembled episodes (evidence of the miner)."""
        self._ensure_loaded()
        where, params = _where(("agent_id", agent_id))
        rows = self._evidence.query(f"SELECT * FROM layer_episode_obs {where}", params)
        return procedural.assemble_episodes(
            procedural.EpisodeEvidence(r["record_id"], r["agent_id"], r["episode_id"], r["ts"],
                                       r["step_index"], tuple(json.loads(r["steps"])),
                                       None if r["outcome"] is None else bool(r["outcome"]))
            for r in rows)

    def patterns(self, agent_id: str | None = None) -> list[procedural.Pattern]:
        """Mined patterns, ranked, capped at ``proceduralMax`` per agent."""
        return self._shown(self._mine(self.episodes(agent_id)))

    def _mine(self, episodes: Sequence[procedural.Episode]) -> list[procedural.Pattern]:
        return procedural.mine_patterns(episodes, min_support=self._min_support,
                                        min_steps=self._min_steps, max_steps=self._max_steps,
                                        cap=self._ctx.retention.procedural_max)

    def _shown(self, patterns: Sequence[procedural.Pattern]) -> list[procedural.Pattern]:
        """``patterns`` without those whose derived record a person paused or archived."""
        withheld = self._withheld([p.record_id for p in patterns])
        return [p for p in patterns if p.record_id not in withheld]

    def _withheld(self, record_ids: Sequence[str]) -> set[str]:
        """Which of ``record_ids`` are stored paused or archived (read from the view)."""
        view = self._ctx.store.view
        snapshot = view.snapshot()
        active = STATES.index(RecordState.ACTIVE)
        out: set[str] = set()
        for record_id in record_ids:
            row = view.row_of(record_id)
            if row is not None and row < snapshot.n and int(snapshot.state[row]) != active:
                out.add(record_id)
        return out

    def pattern_history(self, agent_id: str, pattern_id: str) -> list[PatternHistoryPoint]:
        """How a pattern's support and success rate changed, oldest first."""
        self._ensure_loaded()
        rows = self._evidence.query(
            "SELECT ts, support, success_rate FROM layer_pattern_history"
            " WHERE agent_id = ? AND pattern_id = ? ORDER BY seq", (agent_id, pattern_id))
        return [PatternHistoryPoint(r["ts"], r["support"], r["success_rate"]) for r in rows]

    def pattern_details(self, agent_id: str | None = None, *, history: bool = True,
                        episodes: bool = True) -> list[PatternDetail]:
        """Every mined pattern (as :meth:`patterns`) with its history and supporting episodes."""
        assembled = self.episodes(agent_id)
        mined = self._shown(self._mine(assembled))
        by_id = {(e.agent_id, e.episode_id): e for e in assembled}
        return [PatternDetail(
            pattern,
            tuple(self.pattern_history(pattern.agent_id, pattern.pattern_id)) if history else (),
            tuple(sorted((by_id[(pattern.agent_id, i)] for i in pattern.episode_ids
                          if (pattern.agent_id, i) in by_id),
                         key=lambda e: (e.first_ts, e.episode_id))) if episodes else ())
            for pattern in mined]

    def spatial_within(self, center: Sequence[float], radius: float, **filters: Any
                       ) -> list[SpatialHit]:
        """Spatial points within ``radius`` of ``center`` (see :meth:`SpatialIndex.within`)."""
        self._ensure_loaded()
        return self.spatial.within(center, radius, **filters)

    def spatial_nearest(self, center: Sequence[float], k: int, **filters: Any
                        ) -> list[SpatialHit]:
        """The ``k`` spatial points nearest ``center`` (see :meth:`SpatialIndex.nearest`)."""
        self._ensure_loaded()
        return self.spatial.nearest(center, k, **filters)

    def spatial_points(self, **filters: Any) -> list[SpatialHit]:
        """Every spatial point with its time (the scatter view)."""
        self._ensure_loaded()
        return self.spatial.points(**filters)

    def _ensure_loaded(self) -> None:
        # Under the lock: ``sync`` marks the service loaded before it has processed the
        # store, so a reader on another thread must wait for that first drain to finish.
        with self._lock:
            if not self._loaded:
                self.flush()

    # -- writing derived records ---------------------------------------------------------------

    def _refresh_derived(self, social_agents: set[str], pattern_agents: set[str]) -> None:
        now = self._ctx.clock.now()
        wanted: list[MemoryRecord] = []
        drop: list[str] = []
        notices: list[tuple[str, str, str, dict[str, Any]]] = []
        for agent_id in sorted(social_agents):
            every = social.summarize(self.observations(agent_id))
            kept = social.capped(every, self._ctx.retention.social_max)
            kept_ids = {s.record_id for s in kept}
            drop.extend(s.record_id for s in every if s.record_id not in kept_ids)
            for summary in kept:
                wanted.append(self._derived(
                    summary.record_id, agent_id, Layer.SOCIAL, social.summary_content(summary),
                    social.summary_metadata(summary), ("social-summary", summary.counterpart),
                    _importance(summary.interactions), Privacy(summary.privacy),
                    summary.first_contact, "layers:social", now))
                notices.append((EVENT_SOCIAL_SUMMARY, summary.record_id, agent_id,
                                summary.to_json(with_series=False)))
        for agent_id in sorted(pattern_agents):
            patterns = self._mine(self.episodes(agent_id))
            drop.extend(self._update_pattern_tables(agent_id, patterns, now))
            for pattern in patterns:
                wanted.append(self._derived(
                    pattern.record_id, agent_id, Layer.PROCEDURAL,
                    procedural.pattern_content(pattern), procedural.pattern_metadata(pattern),
                    ("procedural-pattern",), _importance(pattern.support), Privacy.PRIVATE,
                    pattern.first_seen, "layers:procedural", now))
                notices.append((EVENT_PATTERN, pattern.record_id, agent_id, {
                    "pattern_id": pattern.pattern_id, "steps": list(pattern.steps),
                    "support": pattern.support, "success_rate": pattern.success_rate}))
        self._write(wanted, drop, notices)

    def _derived(self, record_id: str, agent_id: str, layer: Layer, content: str,
                 metadata: dict[str, Any], tags: tuple[str, ...], importance: float,
                 privacy: Privacy, created_at: float, source: str, now: float) -> MemoryRecord:
        return MemoryRecord(
            id=record_id, content=content, layer=layer, agent_id=agent_id,
            importance=importance, confidence=1.0, category=Category.CONTEXT
            if layer is Layer.SOCIAL else Category.SKILL,
            tags=tuple(t[:64].replace(",", " ") for t in tags if t.strip()), privacy=privacy,
            source=source, source_tier=TrustTier.AUTO, created_at=min(created_at, now),
            last_accessed=now, metadata=metadata,
            provenance=(ProvenanceEntry(source, "", now, TrustTier.AUTO, 1.0),))

    def _update_pattern_tables(self, agent_id: str, patterns: Sequence[procedural.Pattern],
                               now: float) -> list[str]:
        """Upsert the agent's patterns, append history on change; returns dropped record ids."""
        if not self._owns_evidence:
            return []
        old = {row["pattern_id"]: row for row in self._evidence.query(
            "SELECT * FROM layer_patterns WHERE agent_id = ?", (agent_id,))}
        current = {p.pattern_id for p in patterns}
        dropped = [row["record_id"] for pid, row in old.items() if pid not in current]
        with self._evidence.transaction() as conn:
            conn.execute(f"DELETE FROM layer_patterns WHERE agent_id = ? AND pattern_id NOT IN "
                         f"({', '.join('?' for _ in current) or 'NULL'})",
                         (agent_id, *sorted(current)))
            for p in patterns:
                before = old.get(p.pattern_id)
                if before is None or before["support"] != p.support or \
                        before["success_rate"] != p.success_rate:
                    conn.execute("INSERT INTO layer_pattern_history(agent_id, pattern_id, ts,"
                                 " support, success_rate) VALUES (?, ?, ?, ?, ?)",
                                 (agent_id, p.pattern_id, now, p.support, p.success_rate))
                conn.execute(
                    "INSERT INTO layer_patterns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT(agent_id, pattern_id) DO UPDATE SET support = excluded.support,"
                    " successes = excluded.successes, failures = excluded.failures,"
                    " success_rate = excluded.success_rate, first_seen = excluded.first_seen,"
                    " last_seen = excluded.last_seen, updated_at = excluded.updated_at",
                    (agent_id, p.pattern_id, json.dumps(list(p.steps)), p.support, p.successes,
                     p.failures, p.success_rate, p.first_seen, p.last_seen, now, p.record_id))
        return dropped

    def _write(self, wanted: Sequence[MemoryRecord], drop: Sequence[str],
               notices: Sequence[tuple[str, str, str, dict[str, Any]]]) -> None:
        store = self._ctx.store
        with self._ctx.write_lock:
            existing = {r.id: r for r in self._fetch([r.id for r in wanted])}
            changed: list[tuple[MemoryRecord | None, MemoryRecord]] = []
            for record in wanted:
                before = existing.get(record.id)
                if before is not None:
                    if before.content == record.content and \
                            dict(before.metadata) == dict(record.metadata) and \
                            before.privacy == record.privacy:
                        continue
                    # a person's pause or archive of the derived record stays
                    record = record.replace(created_at=before.created_at,
                                            access_count=before.access_count,
                                            state=before.state, version=before.version + 1)
                changed.append((before, record))
            if changed:
                vectors = self._ctx.embed([after.content for _, after in changed])
                name = self._ctx.model_name() if vectors is not None else ""
                writes = [after.replace(embedding_model=name) for _, after in changed]
                store.write(writes, vectors)
                pairs = list(zip([b for b, _ in changed], writes, strict=True))
                for op, want_new in (("create", True), ("update", False)):
                    group = [(b, a) for b, a in pairs if (b is None) is want_new]
                    if group:
                        self._ctx.record_edits(op, group, "layers")
            doomed = [i for i in dict.fromkeys(drop) if i in store.view]
            removed = store.get_many(doomed) if doomed else []
            if doomed:
                store.delete(doomed)
                self._ctx.record_edits("delete", [(r, None) for r in removed], "layers")
        written = {after.id for _, after in changed}
        for kind, record_id, agent_id, payload in notices:
            if record_id in written:
                self._ctx.events.emit(kind, record_id=record_id, agent_id=agent_id,
                                      source="layers", payload=payload)
        for record in removed:
            self._ctx.events.emit("memory:record:deleted", record_id=record.id,
                                  agent_id=record.agent_id, source="layers",
                                  decision_reason="layer-cap", force=True)

    # -- evidence helpers for agents -----------------------------------------------------------

    def record_interaction(self, agent_id: str, counterpart: str, content: str, *,
                           sentiment: float | None = None, created_at: float | None = None,
                           privacy: Privacy = Privacy.PRIVATE) -> Any:
        """Store an episodic memory of an interaction with ``counterpart`` (social evidence)."""
        social_meta: dict[str, Any] = {"otherAgentId": counterpart}
        if sentiment is not None:
            social_meta["sentiment"] = sentiment
        return self._ctx.add(NewMemory(content=content, agent_id=agent_id,
                                       layer=Layer.EPISODIC, category=Category.EPISODE,
                                       privacy=privacy, source=f"agent:{agent_id}",
                                       source_tier=TrustTier.AGENT, created_at=created_at,
                                       metadata={"social": social_meta}))

    def record_episode(self, agent_id: str, steps: Sequence[str], *, outcome: bool | None,
                       episode_id: str | None = None, content: str | None = None,
                       created_at: float | None = None) -> Any:
        """Store an episodic memory of a whole episode (procedural evidence)."""
        episode: dict[str, Any] = {"steps": list(steps)}
        if episode_id is not None:
            episode["id"] = episode_id
        if outcome is not None:
            episode["outcome"] = "success" if outcome else "failure"
        verdict = "" if outcome is None else (" — succeeded" if outcome else " — failed")
        text = content or ("Episode" + (f" {episode_id}" if episode_id else "") + ": "
                           + " → ".join(steps) + verdict)
        return self._ctx.add(NewMemory(content=text, agent_id=agent_id, layer=Layer.EPISODIC,
                                       category=Category.EPISODE, source=f"agent:{agent_id}",
                                       source_tier=TrustTier.AGENT, created_at=created_at,
                                       metadata={"episode": episode}))

    def spatial_adapter(self, *, source: str = "physics") -> SpatialAdapter:
        """An adapter for physics events, primed with the agents' known contacts and regions."""
        self._ensure_loaded()
        ids = [h.record_id for h in self.spatial.points(layers=[Layer.SPATIAL])]
        contacts, regions = SpatialAdapter.state_from_records(self._fetch(ids))
        return SpatialAdapter(self._ctx.ingest, known_contacts=contacts, last_regions=regions,
                              source=source)


def _importance(count: int) -> float:
    """Derived records matter more the more evidence they rest on (0.4 → 1.0)."""
    return round(min(1.0, 0.4 + 0.1 * math.log2(1 + max(0, count))), 6)


def _where(*pairs: tuple[str, str | None]) -> tuple[str, list[object]]:
    clauses = [f"{column} = ?" for column, value in pairs if value is not None]
    params: list[object] = [value for _, value in pairs if value is not None]
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

