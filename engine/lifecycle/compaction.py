"""Compaction of episodic memory into semantic summaries (seed 002 §8).

Phases, as the seed lists them:

1. Collection: the agent's live episodic records older than ``episodic_window_ms``, except the
   ``episodic_keep_recent`` most recent (seed 002 §8 safety: keep K recent untouched), taken in
   order from a min-heap keyed by (decayed importance asc, created asc) (seed 002 §12).
2. Grouping: by first tag (else the dominant named entity), then split where consecutive
   records are more than ``group_gap_ms`` apart, then into batches of
   ``summarization_batch_size``. Groups of one record are skipped (nothing to condense).
3. Prompt assembly: a structured template, events list → thematic synthesis + key facts.
4. Synthesis: through an injected :class:`Summarizer`; when none is configured or it fails,
   the local :class:`HeuristicSummarizer` (seed 002 §16 "degraded local heuristic summarizer").
5. Replacement: a semantic summary record whose ``metadata.source_ref_ids`` (and provenance)
   reference its sources is inserted, and the originals are retired (deleted with edit history,
   so the compaction can be undone).

Each group is a :class:`SummarizationTask` moving through ``queued → running → completed`` (or
``failed`` / ``skipped``), persisted in the ledger and announced with seed 002 §10 events.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from engine.records import MAX_CONTENT_CHARS, Layer, MemoryRecord, format_timestamp
from engine.retrieval.compression import first_sentence
from engine.retrieval.lexical import terms
from engine.store.view import ACTIVE_CODE, LAYERS, ViewSnapshot

__all__ = [
    "PROMPT_TEMPLATE",
    "HeuristicSummarizer",
    "SummarizationTask",
    "Summarizer",
    "TaskStatus",
    "assemble_prompt",
    "group_records",
    "select_compaction",
]

DAY_MS = 86_400_000.0

PROMPT_TEMPLATE = """You condense an agent's episodic memories into one semantic memory.
Agent: {agent}
Events ({count}, {start} to {end}):
{events}

Write one paragraph: first a thematic synthesis of what these events have in common, then the
key facts worth remembering (names, dates, decisions, preferences). Do not invent anything.
"""

_ENTITY = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")


class TaskStatus(StrEnum):
    """Seed 002 ``SummarizationTask.status``."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class SummarizationTask:
    """Seed 002 ``SummarizationTask`` (plus the summarizer used)."""

    id: str
    agent_id: str
    target_layer: Layer
    source_ids: tuple[str, ...]
    created_at: float
    status: TaskStatus = TaskStatus.QUEUED
    summary_record_id: str | None = None
    failure_reason: str | None = None
    summarizer: str = ""

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"id": self.id, "agent_id": self.agent_id, "target_layer": self.target_layer.value,
                "source_ids": list(self.source_ids), "created_at": format_timestamp(
                    self.created_at), "status": self.status.value,
                "summary_record_id": self.summary_record_id,
                "failure_reason": self.failure_reason, "summarizer": self.summarizer}


@runtime_checkable
class Summarizer(Protocol):
    """Turns a group of records (and the assembled prompt) into summary text."""

    @property
    def name(self) -> str:
        """Shown in task records and events."""
        ...

    def summarize(self, records: Sequence[MemoryRecord], prompt: str) -> str:
        """Return the summary text (non-empty). Raise to make the task fall back or fail."""
        ...


class HeuristicSummarizer:
    """The local, deterministic fallback (no LLM): theme words + first sentences as key facts.

    Output: ``"Summary of N episodes (start – end) about w1, w2, w3: fact; fact; …"`` with the
    facts in time order, duplicates removed, at most ``max_facts`` (the most important first
    when cut).
    """

    def __init__(self, max_facts: int = 12) -> None:
        self.max_facts = max_facts

    @property
    def name(self) -> str:
        """``heuristic``."""
        return "heuristic"

    def summarize(self, records: Sequence[MemoryRecord], prompt: str) -> str:
        """Extractive summary of ``records`` (the prompt is not needed locally)."""
        if not records:
            raise ValueError("nothing to summarize")
        ordered = sorted(records, key=lambda r: (r.created_at, r.id))
        counts: Counter[str] = Counter()
        for record in ordered:
            counts.update(set(terms(record.content)))
        theme = [word for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        keep = ordered
        if len(ordered) > self.max_facts:
            chosen = sorted(ordered, key=lambda r: (-r.importance, r.created_at, r.id))
            allowed = {r.id for r in chosen[: self.max_facts]}
            keep = [r for r in ordered if r.id in allowed]
        facts: list[str] = []
        for record in keep:
            fact = first_sentence(record.content).rstrip(" .;")
            if fact and fact not in facts:
                facts.append(fact)
        start = format_timestamp(ordered[0].created_at) or ""
        end = format_timestamp(ordered[-1].created_at) or ""
        head = f"Summary of {len(records)} episodes ({start[:10]} – {end[:10]})"
        if theme:
            head += f" about {', '.join(theme)}"
        text = f"{head}: {'; '.join(facts)}."
        return text[: MAX_CONTENT_CHARS - 1]


def select_compaction(snapshot: ViewSnapshot, agent_id: str, now_ms: float, *,
                      decayed: np.ndarray[Any, np.dtype[np.float64]], window_ms: float,
                      keep_recent: int, limit: int | None = None) -> list[int]:
    """Rows to compact for ``agent_id``, lowest (decayed importance, created) first.

    Excludes expired records, records younger than ``window_ms``, the ``keep_recent`` most
    recent episodic records (seed 002 §8 safety) and paused or archived records (kept as they
    are by the user's choice; they do not count toward ``keep_recent`` either).
    """
    n = snapshot.n
    code = snapshot.agent_code(agent_id)
    episodic = snapshot.alive[:n] & (snapshot.agent[:n] == code) & \
        (snapshot.layer[:n] == LAYERS.index(Layer.EPISODIC)) & \
        (snapshot.expires_at[:n] >= now_ms) & (snapshot.state[:n] == ACTIVE_CODE)
    rows = np.flatnonzero(episodic)
    if len(rows) <= keep_recent:
        return []
    by_recent = sorted(rows.tolist(), key=lambda r: (-float(snapshot.created_at[r]),
                                                     snapshot.ids[r]))
    protected = set(by_recent[:keep_recent])
    heap = [(float(decayed[r]), float(snapshot.created_at[r]), snapshot.ids[r], r)
            for r in rows.tolist()
            if r not in protected and float(snapshot.created_at[r]) <= now_ms - window_ms]
    heapq.heapify(heap)  # seed 002 §12: min-heap, importance asc then recency asc
    out: list[int] = []
    while heap and (limit is None or len(out) < limit):
        out.append(heapq.heappop(heap)[3])
    return out


def _entity(record: MemoryRecord) -> str:
    found = _ENTITY.findall(record.content)
    return Counter(found).most_common(1)[0][0].lower() if found else ""


@dataclass(slots=True)
class _Group:
    key: str
    records: list[MemoryRecord] = field(default_factory=list)


def group_records(records: Sequence[MemoryRecord], *, gap_ms: float,
                  batch_size: int) -> list[list[MemoryRecord]]:
    """Group by first tag (else dominant entity), split at time gaps, cap at ``batch_size``.

    Deterministic: groups come out ordered by key, then time; records in time order.
    """
    by_key: dict[str, list[MemoryRecord]] = {}
    for record in sorted(records, key=lambda r: (r.created_at, r.id)):
        key = record.tags[0].lower() if record.tags else _entity(record)
        by_key.setdefault(key, []).append(record)
    groups: list[list[MemoryRecord]] = []
    for key in sorted(by_key):
        current: list[MemoryRecord] = []
        for record in by_key[key]:
            if current and (record.created_at - current[-1].created_at > gap_ms
                            or len(current) >= batch_size):
                groups.append(current)
                current = []
            current.append(record)
        if current:
            groups.append(current)
    return groups


def assemble_prompt(records: Sequence[MemoryRecord], agent_id: str) -> str:
    """The seed 002 §8 structured prompt: events list → synthesis + key facts."""
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    events = "\n".join(
        f"- [{(format_timestamp(r.created_at) or '')[:16]}]"
        f"{' [' + ', '.join(r.tags) + ']' if r.tags else ''} {r.content}" for r in ordered)
    return PROMPT_TEMPLATE.format(
        agent=agent_id, count=len(ordered),
        start=(format_timestamp(ordered[0].created_at) or "")[:10],
        end=(format_timestamp(ordered[-1].created_at) or "")[:10], events=events)
