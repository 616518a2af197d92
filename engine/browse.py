"""Read-only helpers for the records browser: filter choices and one record's full picture.

Everything here reads the columnar view, the store and the ledger; nothing writes. The GUI calls
these on a worker thread (DESIGN: Threading) and shows the frozen results.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.decay import decayed_importance
from engine.events import Event, EventFilter
from engine.history import EditEntry
from engine.memory_engine import MemoryEngine
from engine.query import RecordRow, masked_rows
from engine.records import MemoryRecord, RelatedLink

if TYPE_CHECKING:
    from engine.exits import Masking

__all__ = ["SIMILAR_K", "Facets", "LinkedRecord", "RecordDetail", "SimilarRecords", "facets",
           "link_preview", "record_detail", "similar_records"]

SIMILAR_K = 20
"""How many neighbours Find similar shows."""


@dataclass(frozen=True, slots=True)
class Facets:
    """The values the browser's filter choices offer, with record counts.

    Attributes:
        agents: ``(agent_id, count)``, most records first.
        tags: ``(tag, count)``, most records first, at most ``tag_limit`` of them.
        sources: ``(source, count)``, most records first.
        total: Number of live records.
    """

    agents: Sequence[tuple[str, int]]
    tags: Sequence[tuple[str, int]]
    sources: Sequence[tuple[str, int]]
    total: int


@dataclass(frozen=True, slots=True)
class LinkedRecord:
    """A record id a record points at (merged-from or related), with what is known of it.

    Attributes:
        id: The linked record id.
        similarity: The similarity of a related link (None for merged-from ids).
        preview: The start of the linked record's content, or None when it no longer exists
            (merged-from ids usually point at records absorbed by the merge).
    """

    id: str
    similarity: float | None
    preview: str | None


@dataclass(frozen=True, slots=True)
class RecordDetail:
    """Everything the detail panel shows about one record.

    Attributes:
        record: The record as stored.
        decayed_importance: Importance after seed 004 decay, now.
        merged_from: Ids merged into this record (seed 001), with previews where they exist.
        related: Symmetric related links (seed 001), with previews.
        events: The record's events from the ledger, oldest first.
        edits: The record's edit history, newest first.
        edits_known: False when the source does not serve edit history (an attached agent's
            introspection API), so an empty ``edits`` means "unknown", not "never edited".
    """

    record: MemoryRecord
    decayed_importance: float
    merged_from: Sequence[LinkedRecord]
    related: Sequence[LinkedRecord]
    events: Sequence[Event]
    edits: Sequence[EditEntry]
    edits_known: bool = True


_PREVIEW_CHARS = 120
_WHOLE_WORDS = re.compile(r"(.*\s)\S*\Z", re.DOTALL)


def facets(engine: MemoryEngine, *, tag_limit: int = 200) -> Facets:
    """Agents, tags and sources present in the store, for the filter choices."""
    snapshot = engine.store.view.snapshot()
    live = snapshot.live_rows
    agents = Counter(snapshot.agents[c] for c in snapshot.agent[live].tolist())
    sources = Counter(snapshot.sources[c] for c in snapshot.source[live].tolist())
    tags: Counter[str] = Counter()
    for row in live.tolist():
        tags.update(snapshot.tags[row])
    return Facets(agents=agents.most_common(), tags=tags.most_common(tag_limit),
                  sources=sources.most_common(), total=len(live))


def link_preview(content: str, limit: int = _PREVIEW_CHARS) -> str:
    """The start of ``content`` (at most ``limit`` characters), cut at whitespace.

    A key, token or e-mail address is then whole or absent: half of one no longer matches the
    redaction patterns and would be shown unmasked while redaction is on.
    """
    if len(content) <= limit:
        return content
    head = content[:limit]
    if content[limit].isspace():
        return head.rstrip()
    whole = _WHOLE_WORDS.match(head)  # drop the word the limit cuts through
    return whole.group(1).rstrip() if whole else ""


def _linked(engine: MemoryEngine, ids: Sequence[str],
            similarity: Sequence[float | None]) -> list[LinkedRecord]:
    # Read by id from the store, not through the view: the detail panel works while a store's
    # view is still being read (the records browser's preview).
    previews = {r.id: link_preview(r.content) for r in engine.store.read_by_id(ids)}
    return [LinkedRecord(i, s, previews.get(i)) for i, s in zip(ids, similarity, strict=True)]


def record_detail(engine: MemoryEngine, record_id: str, *, event_limit: int = 200) -> RecordDetail:
    """The full picture of ``record_id``: record, decayed importance, links, events, edits.

    Raises:
        RecordNotFound: no such record.
    """
    record = engine.get(record_id)
    decayed = decayed_importance(
        record.importance, record.created_at, record.access_count, engine.clock.now(),
        engine.config.memory.importance_decay_half_life_days)
    related: Sequence[RelatedLink] = record.related
    events = engine.events.query(EventFilter(record_id=record_id, limit=event_limit))
    return RecordDetail(
        record=record,
        decayed_importance=float(decayed),
        merged_from=_linked(engine, record.merged_from, [None] * len(record.merged_from)),
        related=_linked(engine, [link.id for link in related],
                        [link.similarity for link in related]),
        events=events,
        edits=engine.edit_history(record_id, limit=event_limit),
    )


@dataclass(frozen=True, slots=True)
class SimilarRecords:
    """The records nearest to one record by cosine of the stored vectors (Find similar).

    Attributes:
        record: The record asked about, as a table row.
        rows: Its neighbours as table rows, nearest first (the record itself left out).
        cosines: Each neighbour's cosine similarity to the record, in the order of ``rows``.
        masked: True when redaction was on: every row's text (the record's too) was masked
            here, before it left the engine.
    """

    record: RecordRow
    rows: Sequence[RecordRow]
    cosines: Sequence[float]
    masked: bool = False


def similar_records(engine: MemoryEngine, record_id: str, *, k: int = SIMILAR_K,
                    shown: Masking | None = None) -> SimilarRecords:
    """The ``k`` records nearest to ``record_id``, found by Chroma's HNSW index on the store
    (the record's stored vector as the query), so no record but these is read: it works on a
    Chroma server store before its full view is read (issue 24).

    Args:
        shown: The exit's masking function while redaction is on
            (:attr:`engine.exits.ExitPolicy.shown`): the texts are masked here.

    Raises:
        RecordNotFound: no such record.
        ValidationError: the record has no vector yet (stored while the model loaded).
        StoreUnavailable: Chroma failed.
    """
    record, found = engine.store.similar_by_id(record_id, k, now_ms=engine.clock.now())
    head, rows = [RecordRow.of(record)], [RecordRow.of(r) for r, _ in found]
    if shown is not None:
        head, rows = masked_rows(head, shown), masked_rows(rows, shown)
    return SimilarRecords(head[0], rows, [cosine for _, cosine in found],
                          masked=shown is not None)
