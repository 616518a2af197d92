"""Applies lifecycle selections through the engine: expiry, pruning, retention, compaction.

Every removal goes through :meth:`MemoryEngine.delete` (edit history → undoable, audit events),
every summary through :meth:`MemoryEngine.add`; a dry run computes the same selection and
writes nothing. Summarization tasks are persisted in the ledger table ``summarization_tasks``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from engine.errors import SummaryFailed, SummaryLocked
from engine.lifecycle.compaction import (
    HeuristicSummarizer,
    SummarizationTask,
    Summarizer,
    TaskStatus,
    assemble_prompt,
    group_records,
    select_compaction,
)
from engine.lifecycle.pruning import (
    PruneMode,
    Selection,
    decayed,
    select_expired,
    select_prune,
    select_retention,
)
from engine.records import Category, Layer, MemoryRecord, NewMemory, TrustTier
from engine.store.view import ACTIVE_CODE, LAYERS

if TYPE_CHECKING:
    from engine.metrics import MemoryMetrics
    from engine.parts import EngineParts

__all__ = ["CompactionReport", "Lifecycle", "LifecycleRecords", "LifecycleReport"]

EVENT_EXPIRED = "memory:record:expired"
EVENT_DECAY = "memory:decay:applied"
EVENT_QUEUED = "memory:summarization:queued"
EVENT_COMPLETED = "memory:summarization:completed"
EVENT_FAILED = "memory:summarization:failed"
EVENT_COMPACTION = "memory:compaction"
GROUP_GAP_MS = 7 * 86_400_000.0  # records more than a week apart are summarized separately

_TASK_MIGRATIONS = (
    """
    CREATE TABLE summarization_tasks (
        id                TEXT PRIMARY KEY,
        agent_id          TEXT NOT NULL,
        target_layer      TEXT NOT NULL,
        source_ids        TEXT NOT NULL,
        created_at        REAL NOT NULL,
        updated_at        REAL NOT NULL,
        status            TEXT NOT NULL,
        summary_record_id TEXT,
        failure_reason    TEXT,
        summarizer        TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX summarization_tasks_agent ON summarization_tasks(agent_id, created_at);
    """,
)


@dataclass(frozen=True, slots=True)
class LifecycleReport:
    """What an expiry / prune / retention run did (or, dry run, would do)."""

    action: str
    dry_run: bool
    selection: Selection
    remaining: int

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"action": self.action, "dry_run": self.dry_run,
                "count": len(self.selection), "by_reason": self.selection.by_reason(),
                "ids": list(self.selection.ids), "remaining": self.remaining}


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What a compaction run did: tasks, removed and remaining counts."""

    agent_id: str
    dry_run: bool
    tasks: tuple[SummarizationTask, ...] = ()
    removed: int = 0
    remaining: int = 0
    summaries: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"agent_id": self.agent_id, "dry_run": self.dry_run, "removed": self.removed,
                "remaining": self.remaining, "summaries": list(self.summaries),
                "tasks": [t.to_json() for t in self.tasks]}


class LifecycleRecords(Protocol):
    """The record operations lifecycle runs through: :class:`~engine.memory_engine.MemoryEngine`
    provides them, so every removal is in the edit history (undoable) and audited."""

    def add(self, new: NewMemory) -> MemoryRecord:
        """Store a new record as given."""
        ...

    def delete(self, record_ids: Sequence[str], *, actor: str = ...,
               reason: str = ...) -> list[MemoryRecord]:
        """Delete records (undoably); returns them as they were."""
        ...

    def get_many(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records of ``record_ids``."""
        ...


class Lifecycle:
    """Lifecycle operations on one store; holds the compaction lock.

    Args:
        parts: The store's parts (store, ledger, events, clock, configuration).
        records: The record operations removals and summaries go through (the engine's).
        metrics: Where counters go.
        redact: Applied to prompts before a summarizer sees them (DESIGN decision 8).
    """

    def __init__(self, parts: EngineParts, records: LifecycleRecords, metrics: MemoryMetrics,
                 redact: Callable[[str], str] | None = None) -> None:
        self._parts = parts
        self._records = records
        self._metrics = metrics
        self._redact = redact
        self._compacting = threading.Lock()
        self._migrated = False
        self._last_run: dict[str, float] = {}

    # -- expiry, pruning, retention ------------------------------------------------------------

    def _apply(self, action: str, selection: Selection, dry_run: bool, reason: str,
               counter: str) -> LifecycleReport:
        if not dry_run and selection.ids:
            removed = self._records.delete(list(selection.ids), actor=action, reason=reason)
            self._metrics.count(counter, len(removed))
            for record in removed:
                if selection.reasons.get(record.id) == "expired":
                    self._parts.events.emit(EVENT_EXPIRED, record_id=record.id,
                                            agent_id=record.agent_id, force=True,
                                            payload={"id": record.id, "layer": record.layer.value})
        remaining = self._parts.store.count()
        return LifecycleReport(action, dry_run, selection, remaining)

    def expire(self, *, dry_run: bool = False, agent_id: str | None = None) -> LifecycleReport:
        """Delete records whose TTL has passed (``memory:record:expired`` each)."""
        snapshot = self._parts.store.view.snapshot()
        selection = select_expired(snapshot, self._parts.clock.now(), agent_id)
        return self._apply("expire", selection, dry_run, "expired", "expired")

    def prune(self, mode: PruneMode | str, *, dry_run: bool = False,
              agent_id: str | None = None) -> LifecycleReport:
        """Seed 004 pruning (gentle / normal / aggressive)."""
        now = self._parts.clock.now()
        half_life = self._parts.config.memory.importance_decay_half_life_days
        snapshot = self._parts.store.view.snapshot()
        selection = select_prune(snapshot, PruneMode(mode), now, half_life_days=half_life,
                                 agent_id=agent_id)
        if not dry_run and PruneMode(mode) is not PruneMode.GENTLE:
            value = decayed(snapshot, now, half_life)
            affected = int(((value < snapshot.importance[:snapshot.n])
                            & snapshot.alive[:snapshot.n]).sum())
            self._parts.events.emit(EVENT_DECAY, agent_id=agent_id, force=True,
                                    payload={"agentId": agent_id, "affected": affected})
        return self._apply(f"prune:{PruneMode(mode).value}", selection, dry_run, "pruned",
                           "pruned")

    def enforce_retention(self, *, dry_run: bool = False,
                          agent_id: str | None = None) -> LifecycleReport:
        """Retire records over the per-layer retention caps (lowest decayed importance first)."""
        snapshot = self._parts.store.view.snapshot()
        selection = select_retention(
            snapshot, self._parts.config.memory.retention_policy, self._parts.clock.now(),
            half_life_days=self._parts.config.memory.importance_decay_half_life_days,
            agent_id=agent_id)
        return self._apply("retention", selection, dry_run, "retention", "retention_pruned")

    # -- compaction --------------------------------------------------------------------------

    def _ensure_tables(self) -> None:
        ledger = self._parts.ledger
        if not self._migrated and not ledger.read_only:
            ledger.migrate("lifecycle", _TASK_MIGRATIONS)
            self._migrated = True

    def _save(self, task: SummarizationTask) -> None:
        if self._parts.ledger.read_only:
            return
        self._ensure_tables()
        with self._parts.ledger.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO summarization_tasks(id, agent_id, target_layer,"
                " source_ids, created_at, updated_at, status, summary_record_id,"
                " failure_reason, summarizer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (task.id, task.agent_id, task.target_layer.value, json.dumps(task.source_ids),
                 task.created_at, self._parts.clock.now(), task.status.value,
                 task.summary_record_id, task.failure_reason, task.summarizer))

    def tasks(self, agent_id: str | None = None, *, limit: int = 100) -> list[SummarizationTask]:
        """Summarization tasks, newest first."""
        ledger = self._parts.ledger
        if ledger.version("lifecycle") == 0:
            return []
        where, params = ("WHERE agent_id = ?", [agent_id]) if agent_id else ("", [])
        rows = ledger.query(f"SELECT * FROM summarization_tasks {where} "
                            "ORDER BY created_at DESC, id LIMIT ?", [*params, limit])
        return [SummarizationTask(
            id=row["id"], agent_id=row["agent_id"], target_layer=Layer(row["target_layer"]),
            source_ids=tuple(json.loads(row["source_ids"])), created_at=row["created_at"],
            status=TaskStatus(row["status"]), summary_record_id=row["summary_record_id"],
            failure_reason=row["failure_reason"], summarizer=row["summarizer"])
            for row in rows]

    def compact(self, agent_id: str | None = None, *, dry_run: bool = False,
                summarizer: Summarizer | None = None, limit: int | None = None,
                stop: Callable[[], bool] | None = None) -> list[CompactionReport]:
        """Compact episodic memory of ``agent_id`` (every agent when None).

        ``stop`` is polled before each summarization task; when it turns true the tasks not
        begun are left for a later run (the scheduler's prompt stop).

        Raises:
            SummaryLocked: another compaction is running (``MEMORY_SUMMARY_LOCKED``).
        """
        if not self._compacting.acquire(blocking=False):
            raise SummaryLocked("a compaction is already running on this store; "
                                "wait for it to finish")
        try:
            snapshot = self._parts.store.view.snapshot()
            if agent_id is not None:
                agents = [agent_id]
            else:
                live = snapshot.agent[:snapshot.n][snapshot.alive[:snapshot.n]]
                agents = sorted({snapshot.agents[c] for c in set(live.tolist())})
            return [self._compact_agent(a, dry_run, summarizer, limit, stop) for a in agents]
        finally:
            self._compacting.release()

    def compact_if_due(self, agent_id: str | None = None, *,
                       summarizer: Summarizer | None = None,
                       stop: Callable[[], bool] | None = None) -> list[CompactionReport]:
        """Compact the agents whose episodic count exceeds ``episodic_max`` (seed 002 §21).

        An agent is compacted at most once per ``summarization_min_interval_ms``; enough of its
        oldest low-importance episodes are taken to come back under ``episodic_max`` (each
        group of sources becomes one summary, so a batch more than the excess).

        Raises:
            SummaryLocked: another compaction is running.
        """
        memory = self._parts.config.memory
        now = self._parts.clock.now()
        snapshot = self._parts.store.view.snapshot()
        n = snapshot.n
        # paused and archived records are kept outside the cap (pruning.py module doc)
        episodic = snapshot.alive[:n] & (snapshot.layer[:n] == LAYERS.index(Layer.EPISODIC)) \
            & (snapshot.state[:n] == ACTIVE_CODE)
        counts: dict[str, int] = {}
        for code in snapshot.agent[:n][episodic].tolist():
            name = snapshot.agents[code]
            counts[name] = counts.get(name, 0) + 1
        reports: list[CompactionReport] = []
        for agent, count in sorted(counts.items()):
            if agent_id is not None and agent != agent_id:
                continue
            if count <= memory.episodic_max:
                continue
            if now - self._last_run.get(agent, -float("inf")) < \
                    memory.summarization_min_interval_ms:
                continue
            excess = count - memory.episodic_max
            reports.extend(self.compact(agent, summarizer=summarizer,
                                        limit=excess + memory.summarization_batch_size,
                                        stop=stop))
        return reports

    def _compact_agent(self, agent_id: str, dry_run: bool, summarizer: Summarizer | None,
                       limit: int | None,
                       stop: Callable[[], bool] | None = None) -> CompactionReport:
        memory = self._parts.config.memory
        now = self._parts.clock.now()
        snapshot = self._parts.store.view.snapshot()
        value = decayed(snapshot, now, memory.importance_decay_half_life_days)
        rows = select_compaction(snapshot, agent_id, now, decayed=value,
                                 window_ms=memory.episodic_window_ms,
                                 keep_recent=memory.episodic_keep_recent, limit=limit)
        records = self._records.get_many([snapshot.ids[r] for r in rows])
        groups = group_records(records, gap_ms=GROUP_GAP_MS,
                               batch_size=memory.summarization_batch_size)
        fallback = HeuristicSummarizer()
        chosen: Summarizer = summarizer or fallback
        tasks: list[SummarizationTask] = []
        summaries: list[str] = []
        removed = 0
        for group in groups:
            if stop is not None and stop():
                break
            task = SummarizationTask(id=uuid.uuid4().hex, agent_id=agent_id,
                                     target_layer=Layer.SEMANTIC,
                                     source_ids=tuple(r.id for r in group), created_at=now,
                                     summarizer=chosen.name)
            if len(group) < 2:
                tasks.append(replace(task, status=TaskStatus.SKIPPED,
                                     failure_reason="a group of one record has nothing to "
                                                    "condense"))
                continue
            if dry_run:
                tasks.append(task)
                continue
            self._save(task)
            self._metrics.count("summarization_tasks_queued", agent_id=agent_id)
            self._parts.events.emit(EVENT_QUEUED, agent_id=agent_id, force=True,
                                    payload={"taskId": task.id, "agentId": agent_id,
                                             "sourceCount": len(group)})
            task = replace(task, status=TaskStatus.RUNNING)
            self._save(task)
            try:
                text, used = self._synthesize(group, agent_id, chosen, fallback)
                summary = self._replace(group, text, used, agent_id)
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                task = replace(task, status=TaskStatus.FAILED, failure_reason=reason)
                self._save(task)
                self._metrics.count("summarization_tasks_failed", agent_id=agent_id)
                self._parts.events.emit(EVENT_FAILED, agent_id=agent_id, force=True,
                                        payload={"taskId": task.id, "reason": reason})
                tasks.append(task)
                continue
            removed += len(group)
            summaries.append(summary.id)
            task = replace(task, status=TaskStatus.COMPLETED, summary_record_id=summary.id,
                           summarizer=used)
            self._save(task)
            self._metrics.count("summarization_tasks_completed", agent_id=agent_id)
            self._metrics.count("compacted", len(group), agent_id=agent_id)
            self._parts.events.emit(EVENT_COMPLETED, agent_id=agent_id, record_id=summary.id,
                                    force=True, payload={
                                        "taskId": task.id, "summaryRecordId": summary.id,
                                        "reductionRatio": round(1.0 - 1.0 / len(group), 6)})
            tasks.append(task)
        remaining = self._episodic_count(agent_id)
        if not dry_run:
            self._last_run[agent_id] = now
            self._parts.events.emit(EVENT_COMPACTION, agent_id=agent_id, force=True,
                                    payload={"agentId": agent_id, "removed": removed,
                                             "remaining": remaining})
        return CompactionReport(agent_id, dry_run, tuple(tasks), removed, remaining,
                                tuple(summaries))

    def _replace(self, group: Sequence[MemoryRecord], text: str, used: str,
                 agent_id: str) -> MemoryRecord:
        """Insert the summary of ``group`` and retire its sources, as one writer.

        The summary was written without the write lock (an LLM call may take seconds and must
        not hold ingest off); if a source changed meanwhile (a merge into it, an edit, a
        deletion), the summary would drop that change, so the task fails and the next run
        takes the sources as they are then.

        Raises:
            SummaryFailed: a source changed while the summary was written.
        """
        with self._parts.write_lock:
            stored = self._parts.store.versions([r.id for r in group])
            changed = [r.id for r in group if stored.get(r.id) != r.version]
            if changed:
                raise SummaryFailed(f"{len(changed)} source record(s) changed while the summary "
                                    f"was written (e.g. {changed[0]}); compacted next time")
            summary = self._records.add(NewMemory(
                content=text, agent_id=agent_id, layer=Layer.SEMANTIC,
                importance=max(r.importance for r in group),
                confidence=min(r.confidence for r in group), category=Category.EPISODE,
                tags=tuple(dict.fromkeys(t for r in group for t in r.tags))[:64],
                privacy=group[0].privacy, source=f"compaction:{used}",
                source_tier=TrustTier.AUTO, created_at=min(r.created_at for r in group),
                metadata={"source_ref_ids": [r.id for r in group],
                          "source_event": "compaction", "summarizer": used}))
            self._records.delete([r.id for r in group], actor="compaction", reason="compacted")
        return summary

    def _synthesize(self, group: Sequence[MemoryRecord], agent_id: str, chosen: Summarizer,
                    fallback: Summarizer) -> tuple[str, str]:
        prompt = assemble_prompt(group, agent_id)
        if self._redact is not None:
            prompt = self._redact(prompt)
        try:
            text = chosen.summarize(group, prompt).strip()
            if not text:
                raise SummaryFailed(f"summarizer {chosen.name!r} returned empty text")
            return text, chosen.name
        except Exception as exc:
            if chosen is fallback:
                raise SummaryFailed(f"heuristic summarizer failed: {exc}") from exc
            # seed 002 §8 step 4 / §16: degrade to the local heuristic summarizer
            self._parts.events.emit("memory:summarization:fallback", agent_id=agent_id,
                                          decision_reason=f"{type(exc).__name__}: {exc}")
            text = fallback.summarize(group, prompt).strip()
            return text, fallback.name

    def _episodic_count(self, agent_id: str) -> int:
        snapshot = self._parts.store.view.snapshot()
        n = snapshot.n
        mask = snapshot.alive[:n] & (snapshot.agent[:n] == snapshot.agent_code(agent_id)) & \
            (snapshot.layer[:n] == LAYERS.index(Layer.EPISODIC)) & \
            (snapshot.state[:n] == ACTIVE_CODE)
        return int(mask.sum())
