"""What the introspection API reads: an engine, live (in-process) or following from outside.

Two ways to run the API (``docs/api.md``):

* **in-process** — the agent calls :func:`engine.introspection.serve_in_thread` on its own
  engine. The view is the agent's live view; new events wake waiting clients at once.
* **beside the agent** — ``mnemoscope serve`` opens the store read-only (an embedded store is
  locked by the agent's process). The ledger is read live (SQLite WAL readers see each commit),
  so events are current; the columnar view, though, is what was on disk at open time. Before
  answering, the source looks for events it has not applied yet and re-reads the records they
  name (``MemoryEngine.reread``: documents and metadata by id, which a second process's Chroma
  reader sees correctly, unlike a full reload with embeddings), at most every
  ``refresh_interval_s`` seconds (stretched to five times the cost of the last re-read), and
  tells the layer service which records changed. Changes whose events were dropped by sampling
  (``sampling_rate`` < 1; edits and deletions are never dropped) show after a restart.

Every read goes through here, so the HTTP layer stays a thin translation of requests. The
source holds the server's exit policy (:mod:`engine.exits`): with redaction on, its filters
match what the response shows (masked text, masked agent and counterpart names), never the raw
text, and events read back stripped of memory text whenever they were recorded.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.events import Event, EventFilter
from engine.exits import ExitPolicy
from engine.query import RecordQuery
from engine.records import Layer, format_timestamp

if TYPE_CHECKING:
    from engine.memory_engine import MemoryEngine

__all__ = ["API_VERSION", "EngineSource"]

API_VERSION = 1
_POLL_S = 0.25
_DIFF_SCAN_MAX = 20_000


def _config_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _config_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _config_json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_config_json(v) for v in value]
    return value


class EngineSource:
    """Reads for the API over one engine.

    Args:
        engine: The engine (writable = in-process and live; read-only = following).
        refresh_interval_s: Read-only mode: shortest time between view reloads.
        monotonic: Time source for the reload throttle and waits (tests may pass their own).
        policy: The exit policy of the responses (default: redaction off).
    """

    def __init__(self, engine: MemoryEngine, *, refresh_interval_s: float = 2.0,
                 monotonic: Callable[[], float] = time.monotonic,
                 policy: ExitPolicy | None = None) -> None:
        self._engine = engine
        self._policy = policy or ExitPolicy(None)
        self._live = not engine.read_only
        self._interval = refresh_interval_s
        self._monotonic = monotonic
        self._wake = threading.Condition()
        self._refresh_lock = threading.Lock()
        self._applied_seq = engine.events.last_seq()
        self._last_reload = monotonic()
        self._reload_cost = 0.0
        self._refreshed_at = engine.clock.now()
        self._started_at = engine.clock.now()
        self._closed = False
        self._unsubscribe = engine.events.subscribe(self._on_event)

    @property
    def engine(self) -> MemoryEngine:
        """The engine read from."""
        return self._engine

    @property
    def mode(self) -> str:
        """``in-process`` or ``read-only``."""
        return "in-process" if self._live else "read-only"

    def close(self) -> None:
        """Unhook from the engine and wake every waiting request."""
        self._unsubscribe()
        with self._wake:
            self._closed = True
            self._wake.notify_all()

    def _on_event(self, _event: Event) -> None:
        with self._wake:
            self._wake.notify_all()

    # -- following a writer in another process ---------------------------------------------

    def refresh(self, *, force: bool = False) -> bool:
        """Read-only mode: reload the view if the ledger moved on. Returns True if it did."""
        if self._live:
            return False
        with self._refresh_lock:
            last = self._engine.events.last_seq()
            wait = max(self._interval, 5.0 * self._reload_cost)
            if last <= self._applied_seq or (
                    not force and self._monotonic() - self._last_reload < wait):
                return False
            changes: dict[str, str | None] = {}
            after = self._applied_seq
            while True:
                batch = self._engine.events.query(EventFilter(after_seq=after, limit=2000))
                for event in batch:
                    if event.record_id:
                        deleted = event.kind == "memory:record:deleted"
                        changes[event.record_id] = (event.decision_reason or "deleted") \
                            if deleted else None
                if len(batch) < 2000:
                    break
                after = batch[-1].seq
            started = time.perf_counter()
            self._engine.reread(list(changes))
            self._reload_cost = time.perf_counter() - started
            self._last_reload = self._monotonic()
            self._applied_seq = last
            self._refreshed_at = self._engine.clock.now()
            self._engine.layers.notify(changes)
            return True

    # -- reads -----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Counts, layers, agents, configuration, model state and the event cursor."""
        self.refresh()
        engine = self._engine
        stats = engine.stats()
        snap = engine.store.view.snapshot()
        live = snap.live_rows
        agents: dict[str, dict[str, int]] = {}
        layers = tuple(Layer)
        pairs, counts = np.unique(np.stack([snap.agent[live].astype(np.int64),
                                            snap.layer[live].astype(np.int64)]),
                                  axis=1, return_counts=True)
        for (agent_code, layer_code), count in zip(pairs.T.tolist(), counts.tolist(),
                                                   strict=True):
            per_layer = agents.setdefault(snap.agents[agent_code], {})
            per_layer[layers[layer_code].value] = int(count)
        status = engine.embedding_status()
        config = engine.config
        return {
            "api_version": API_VERSION,
            "version": engine.events.last_seq(),
            "server": {"mode": self.mode, "started_at": format_timestamp(self._started_at),
                       "view_refreshed_at": format_timestamp(self._refreshed_at),
                       "refresh_interval_s": None if self._live else self._interval},
            "store": stats.to_json(),
            "layers": dict(stats.by_layer),
            "agents": [{"agent_id": name, "records": sum(c.values()), "by_layer": c}
                       for name, c in sorted(agents.items())],
            "config": {"memory": _config_json(config.memory),
                       "dedup": _config_json(config.dedup),
                       "sampling_rate": engine.events.sampling_rate,
                       "redaction": config.redaction},
            "model": {"state": status.state.value, "name": status.model_name,
                      "dimension": status.dimension, "reason": status.reason,
                      "load_seconds": status.load_seconds, "backend": status.backend,
                      "semantic": engine.semantic_ready()},
            "events": {"last_seq": engine.events.last_seq()},
        }

    def records(self, query: RecordQuery) -> dict[str, Any]:
        """One page of records (with decayed importance) and the total."""
        self.refresh()
        version = self._engine.events.last_seq()
        page = self._engine.list_records(query, shown=self._policy.shown)
        rows = []
        for i, record in enumerate(page.records):
            item = record.to_json()
            if i < len(page.decayed_importance):
                item["decayed_importance"] = page.decayed_importance[i]
            rows.append(item)
        return {"total": page.total, "offset": page.offset, "limit": query.limit,
                "version": version, "records": rows}

    def record(self, record_id: str) -> dict[str, Any]:
        """One record. Raises :class:`RecordNotFound`."""
        self.refresh()
        return self._engine.get(record_id).to_json()

    def diff(self, *, since_seq: int | None = None, since_ms: float | None = None,
             limit: int = 500) -> dict[str, Any]:
        """Records changed since a version (event seq) or a time: current state or deletion.

        At most ``limit`` records per answer; ``complete`` is False when more changes follow
        (ask again from ``cursor``).
        """
        self.refresh()
        events = self._engine.events
        if since_seq is None:
            since_seq = 0
            if since_ms is not None:
                first = events.query(EventFilter(since=since_ms, limit=1))
                since_seq = first[0].seq - 1 if first else events.last_seq()
        last = events.last_seq()
        touched: dict[str, int] = {}
        cursor = since_seq
        complete = True
        scanned = 0
        while cursor < last:
            batch = events.query(EventFilter(after_seq=cursor, limit=1000))
            if not batch:
                break
            for event in batch:
                if event.record_id and event.record_id not in touched and len(touched) >= limit:
                    complete = False
                    break
                if event.record_id:
                    touched[event.record_id] = event.seq
                cursor = event.seq
            scanned += len(batch)
            if not complete or scanned >= _DIFF_SCAN_MAX:
                complete = complete and cursor >= last
                break
        view = self._engine.store.view
        present = [i for i in touched if i in view]
        records = self._engine.get_many(present) if present else []
        return {"since": since_seq, "cursor": cursor, "complete": complete,
                "upserted": [r.to_json() for r in records],
                "deleted": [i for i in touched if i not in view]}

    def events(self, *, after: int, limit: int, kinds: Sequence[str] | None = None,
               wait_s: float = 0.0, stop: threading.Event | None = None,
               record_id: str | None = None) -> dict[str, Any]:
        """Events with ``seq > after``, oldest first; waits up to ``wait_s`` for the first one.

        The returned ``cursor`` is the value to pass as ``after`` next time: the last event
        returned, or — when a ``kinds`` or ``record_id`` filter skipped everything — the last
        event looked at, so a filtered follower never re-reads what it skipped and never
        misses a match.
        """
        found, cursor = self.wait_events(after=after, limit=limit, kinds=kinds, wait_s=wait_s,
                                         stop=stop, record_id=record_id)
        # Stripped here, masked with the whole response by the server (one pass).
        return {"events": [self._policy.stripped(e.to_json()) for e in found], "cursor": cursor,
                "last_seq": self._engine.events.last_seq()}

    def wait_events(self, *, after: int, limit: int, kinds: Sequence[str] | None = None,
                    wait_s: float = 0.0, stop: threading.Event | None = None,
                    record_id: str | None = None) -> tuple[list[Event], int]:
        """The events and the next cursor (see :meth:`events`)."""
        deadline = self._monotonic() + max(0.0, wait_s)
        bus = self._engine.events
        filtered = bool(kinds) or record_id is not None
        while True:
            last = bus.last_seq()  # read first: every event <= last is already committed
            found = bus.query(EventFilter(after_seq=after, limit=limit,
                                          kinds=list(kinds) if kinds else None,
                                          record_id=record_id))
            if found:
                cursor = found[-1].seq if len(found) >= limit else max(found[-1].seq, last)
                return found, cursor
            remaining = deadline - self._monotonic()
            if remaining <= 0 or self._closed or (stop is not None and stop.is_set()):
                return [], max(after, last) if filtered else after
            with self._wake:
                self._wake.wait(timeout=min(remaining, _POLL_S))

    # -- layers ----------------------------------------------------------------------------

    def _agent(self, given: str | None) -> tuple[bool, str | None]:
        """(known, raw agent id) for an agent filter as a client wrote it.

        With redaction on, a client sees masked agent ids, so it filters by those
        (:meth:`ExitPolicy.resolve`); a raw id that masking changes matches nothing.
        """
        if given is None or not self._policy.redacting:
            return True, given
        found = self._policy.resolve(given, self._engine.store.view.snapshot().agents)
        return found is not None, found

    def social(self, *, agent_id: str | None, counterpart: str | None,
               series: bool) -> dict[str, Any]:
        """Social summaries (with their sentiment series when asked)."""
        self.refresh()
        found, agent_id = self._agent(agent_id)
        if not found:
            return {"summaries": []}
        service = self._engine.layers
        service.flush()
        summaries = service.social_summaries(
            agent_id, None if self._policy.redacting else counterpart)
        if counterpart is not None and self._policy.redacting:
            summaries = [s for s in summaries if self._policy.matches(counterpart, s.counterpart)]
        return {"summaries": [s.to_json(with_series=series) for s in summaries]}

    def procedural(self, *, agent_id: str | None, history: bool,
                   episodes: bool = False) -> dict[str, Any]:
        """Mined patterns (with their success-rate history and supporting episodes when asked)."""
        self.refresh()
        found, agent_id = self._agent(agent_id)
        if not found:
            return {"patterns": []}
        service = self._engine.layers
        service.flush()
        out = []
        for detail in service.pattern_details(agent_id, history=history, episodes=episodes):
            item = detail.pattern.to_json()
            if history:
                item["history"] = [h.to_json() for h in detail.history]
            if episodes:
                item["episodes"] = [e.to_json() for e in detail.episodes]
            out.append(item)
        return {"patterns": out}

    def spatial(self, *, center: Sequence[float] | None, radius: float | None, k: int | None,
                filters: Mapping[str, Any], limit: int) -> dict[str, Any]:
        """Spatial points: all (oldest first), within a radius, or the k nearest."""
        self.refresh()
        found, agent_id = self._agent(filters.get("agent_id"))
        if not found:
            return {"points": []}
        filters = {**filters, "agent_id": agent_id}
        service = self._engine.layers
        service.flush()
        if center is not None and radius is not None:
            hits = service.spatial_within(center, radius, limit=limit, **filters)
        elif center is not None and k is not None:
            hits = service.spatial_nearest(center, min(k, limit), **filters)
        else:
            hits = service.spatial_points(limit=limit, **filters)
        return {"points": [h.to_json() for h in hits]}

    def metrics(self) -> dict[str, Any]:
        """Seed 002 §20 metrics and seed 000 ``memory_llm_*`` metrics
        (:meth:`MemoryEngine.metrics`; the LLM block as the store's ledger recorded it)."""
        self.refresh()
        return self._engine.metrics()

    def debug(self) -> dict[str, Any]:
        """Seed 002 §20 ``/debug/memory``: the snapshot without paths, plus recent event kinds."""
        snap = self.snapshot()
        store = dict(snap["store"])
        location = str(store.get("location", ""))
        store["location"] = location if location.startswith(("http://", "https://")) \
            else location.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        snap["store"] = store
        recent = self._engine.events.query(EventFilter(limit=1000, newest_first=True))
        kinds: dict[str, int] = {}
        for event in recent:
            kinds[event.kind] = kinds.get(event.kind, 0) + 1
        snap["recent_event_kinds"] = dict(sorted(kinds.items()))
        snap["sanitized"] = True
        return snap

