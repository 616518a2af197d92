"""Adopt a collection written by another tool into a Mnemoscope store (issue 22).

The foreign collection is read through its layout's field mapping (:mod:`engine.store.foreign`)
and every record goes through the ingest pipeline like an imported line: exact and near
duplicates are merged or skipped, gray-zone pairs wait for review, and the report says so per
record (line *n* is the *n*-th record, oldest first). Each adopted memory's provenance source is
``<collection>/<original id>`` and its metadata keeps ``adopted_from`` (store, collection, id,
layout) and the original metadata under ``foreign``, so any record can be traced back.

Texts are embedded by our model: the other tool's vectors are not copied (they come from
another model, often of another length, and would not compare with ours).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from engine.errors import EngineError, ValidationError
from engine.ingest.importer import LineFn, _ingest_lines
from engine.records import JSONValue, MemoryRecord, NewMemory, TrustTier
from engine.store.foreign import NO_DOCUMENT

if TYPE_CHECKING:
    from engine.ingest.importer import ImportReport
    from engine.ingest.pipeline import IngestPipeline
    from engine.store import MemoryStore
    from engine.store.chroma_store import CancelFn, ProgressFn

__all__ = ["adopt_store", "adopted_memory", "foreign_records"]

# What the original metadata may bring along: its large serialized copies (LlamaIndex's node
# JSON) stay in the source collection, which provenance points to.
_DROPPED_KEYS = frozenset({"_node_content"})


def foreign_records(store: MemoryStore) -> list[MemoryRecord]:
    """Every live record of ``store`` as its layout maps it, oldest first (id breaks ties)."""
    snapshot = store.view.snapshot()
    ids = [snapshot.ids[int(row)] for row in snapshot.live_rows]
    records: list[MemoryRecord] = []
    for start in range(0, len(ids), store.max_batch_size):
        records.extend(store.get_many(ids[start:start + store.max_batch_size]))
    return sorted(records, key=lambda r: (r.created_at, r.id))


def adopted_memory(record: MemoryRecord, store: MemoryStore) -> NewMemory:
    """The :class:`NewMemory` a foreign ``record`` is ingested as.

    Raises:
        ValidationError: the record has no text, or a field the pipeline refuses.
    """
    if record.content == NO_DOCUMENT:
        raise ValidationError("content", record.id, "the record has no text in its document "
                              "or mapped metadata key (see map-collection)")
    info = store.foreign_info
    original = record.metadata.get("foreign")
    kept: dict[str, JSONValue] = {}
    if isinstance(original, Mapping):
        kept = {str(k): v for k, v in original.items() if k not in _DROPPED_KEYS}
    origin: dict[str, JSONValue] = {
        "store": store.location, "collection": store.spec.collection, "id": record.id,
        "layout": info.layout.value if info is not None else None,
    }
    return NewMemory(
        content=record.content, agent_id=record.agent_id, importance=None,
        tags=record.tags, privacy=record.privacy,
        source=f"{store.spec.collection}/{record.id}"[:256], source_tier=TrustTier.AGENT,
        created_at=record.created_at, metadata={"adopted_from": origin, "foreign": kept},
    )


def _parsed(records: list[MemoryRecord], store: MemoryStore
            ) -> Iterator[tuple[int, NewMemory | None, str | None]]:
    for line, record in enumerate(records, start=1):
        try:
            yield line, adopted_memory(record, store), None
        except EngineError as exc:
            yield line, None, f"record {record.id}: {exc}"


def adopt_store(pipeline: IngestPipeline, store: MemoryStore, *, progress: ProgressFn | None,
                cancelled: CancelFn | None, import_id: str | None,
                on_lines: LineFn | None) -> ImportReport:
    """Ingest every record of the (foreign, read-only) ``store`` through ``pipeline``.

    Returns:
        The report: per record (line = position, oldest first) its decision or why it was
        refused; raises :class:`~engine.ingest.importer.ImportStopped` when a write fails
        part way, as imports do.
    """
    records = foreign_records(store)
    label = f"{store.location}#{store.spec.collection}"
    return _ingest_lines(pipeline, label, _parsed(records, store), progress, cancelled,
                         import_id=import_id, on_lines=on_lines)

