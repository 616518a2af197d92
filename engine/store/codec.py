"""How a :class:`~engine.records.MemoryRecord` is laid out in Chroma (schema versions 1 to 3).

Chroma keeps the id, the document (``content``), the embedding and a flat metadata dict of
scalars. Records written by other tools are recognised by the missing ``mnemo_schema`` key and
read leniently (:func:`record_from_chroma` with ``lenient=True``): their document becomes the
content and their metadata is kept as metadata.

**The lean layout** (schema version 3, :data:`SCHEMA_VERSION`; issue 24). Chroma does work per
metadata key of every row it writes (a row per key in its metadata index, plus the log), and
the engine filters in its own columnar view, so only the keys a Chroma ``where`` filter reads
are separate keys (:data:`FILTER_KEYS`: the server store's pages and filters,
``engine.query.server_filter``, and the archived count of ``MemoryStore.preview``), plus
``mnemo_schema``. Every other field is one JSON object in ``fields``: ten keys per row
instead of 25 (what that saves: docs/ingest.md, "Ingest at the encoder's pace").

**The flat layout** (schema versions 1 and 2, written by earlier builds): every field its own
key; non-scalar fields (tags, provenance, merged_from, related, metadata) JSON strings, because
Chroma rejects ``None`` and empty lists as metadata values. ``state`` (issue 20, soft states) is
what version 2 added; a record without it reads as active. :func:`record_from_chroma` reads
both layouts, record by record (a store part-way through its migration holds both), and
:func:`lean_metadata` turns a flat record's metadata into the lean one (the migration,
``MemoryStore._migrate``). ``expires_at`` of None is stored as -1 in
both. An unknown ``state`` value (a newer build's state) reads as paused: the record is kept
and shown, and is not retrieved until someone resumes it.

The collection's ``schema_version`` says which build may read it safely: 3 once a store holds
(or is being migrated to) lean records, which an older build would misread, so it refuses
them (``SchemaMismatch``, "upgrade Mnemoscope").

Schema 3 (collection metadata ``schema_version`` = :data:`SCHEMA_VERSION`)::

    mnemo_schema: int (3)
    layer, agent_id, category, privacy, state: str
    importance, created_at, expires_at: float
    fields: JSON object of
        confidence, last_accessed, recency_anchor: float
        source, source_tier, content_hash, embedding_model: str
        access_count, token_estimate, version: int
        redacted: bool
        tags, merged_from: [str]; provenance, related: [object]; metadata: object

Schemas 1 and 2 (flat)::

    layer, agent_id, category, privacy, source, source_tier, content_hash, embedding_model: str
    state: str (active / paused / archived; absent = active; version 2)
    importance, confidence, created_at, last_accessed, expires_at, recency_anchor: float
    access_count, token_estimate, version, mnemo_schema: int
    redacted: bool
    tags, provenance, merged_from, related, metadata: JSON text
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from engine.errors import ValidationError
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    Privacy,
    ProvenanceEntry,
    RecordState,
    RelatedLink,
    TrustTier,
)

__all__ = [
    "FILTER_KEYS",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_BASE",
    "SCHEMA_VERSION_STATES",
    "is_lean",
    "lean_metadata",
    "record_from_chroma",
    "record_to_chroma",
    "stored_version",
]

SCHEMA_VERSION = 3
"""The newest layout this build reads and writes: the lean one (few keys, the rest packed)."""
SCHEMA_VERSION_STATES = 2
"""The flat layout whose records may carry a soft state (paused, archived)."""
SCHEMA_VERSION_BASE = 1
"""The flat layout of a store none of whose records was ever paused or archived."""
FILTER_KEYS = ("layer", "agent_id", "category", "privacy", "state", "importance",
               "created_at", "expires_at")
"""The fields Chroma ``where`` filters read: kept as their own metadata keys in every layout."""
PACKED = "fields"
"""The lean layout's one JSON field holding every record field not in :data:`FILTER_KEYS`."""
_JSON_TEXT = ("tags", "provenance", "merged_from", "related", "metadata")
"""The flat layout's fields stored as JSON text (in the lean layout: plain JSON values)."""
_PACKED_FIELDS = ("confidence", "source", "source_tier", "last_accessed", "access_count",
                  "recency_anchor", "content_hash", "token_estimate", "redacted",
                  "embedding_model", "version", *_JSON_TEXT)
_NO_EXPIRY = -1.0


def record_to_chroma(record: MemoryRecord) -> dict[str, str | int | float | bool]:
    """The lean Chroma metadata for ``record`` (the document is ``record.content``)."""
    packed = {
        "confidence": float(record.confidence),
        "source": record.source,
        "source_tier": record.source_tier.value,
        "last_accessed": float(record.last_accessed),
        "access_count": int(record.access_count),
        "recency_anchor": float(record.recency_anchor or record.created_at),
        "content_hash": record.content_hash,
        "token_estimate": int(record.token_estimate),
        "redacted": bool(record.redacted),
        "embedding_model": record.embedding_model,
        "version": int(record.version),
        "tags": list(record.tags),
        "provenance": [p.to_json() for p in record.provenance],
        "merged_from": list(record.merged_from),
        "related": [r.to_json() for r in record.related],
        "metadata": dict(record.metadata),
    }
    return {
        "mnemo_schema": SCHEMA_VERSION,
        "layer": record.layer.value,
        "agent_id": record.agent_id,
        "category": record.category.value,
        "privacy": record.privacy.value,
        "state": record.state.value,
        "importance": float(record.importance),
        "created_at": float(record.created_at),
        "expires_at": _NO_EXPIRY if record.expires_at is None else float(record.expires_at),
        PACKED: json.dumps(packed, separators=(",", ":")),
    }


def is_lean(metadata: Mapping[str, Any] | None) -> bool:
    """True when ``metadata`` is one of our records in the lean layout (schema 3)."""
    schema = (metadata or {}).get("mnemo_schema")
    return isinstance(schema, int) and schema >= SCHEMA_VERSION


def lean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A flat-layout record's metadata in the lean layout, for Chroma's ``update``.

    A pure rewrite of what is stored, not a decode and encode: a field the flat record lacks
    stays absent and a JSON text that does not parse is left out, so
    :func:`record_from_chroma` reads the result exactly as it read the flat record (defaults
    included). Keys of the flat layout that moved into ``fields`` map to None, which Chroma's
    ``update`` deletes (it merges metadata key by key); keys the flat layout never had (added
    by hand) are kept.
    """
    packed: dict[str, Any] = {}
    for key in _PACKED_FIELDS:
        if key not in metadata:
            continue
        value = metadata[key]
        if key in _JSON_TEXT and isinstance(value, str):
            try:
                value = _parsed(value)
            except ValueError:
                continue  # read as the default before, and after
            if isinstance(value, str):
                continue  # text in text: read as the default before (not a list or object)
        packed[key] = value
    lean: dict[str, Any] = {key: None for key in _PACKED_FIELDS if key in metadata}
    lean.update({key: metadata[key] for key in FILTER_KEYS if key in metadata})
    lean["mnemo_schema"] = SCHEMA_VERSION
    lean[PACKED] = json.dumps(packed, separators=(",", ":"))
    return lean


def _fields(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every stored field as one flat dict, whichever layout wrote ``metadata``: the lean
    layout's ``fields`` unpacked over its keys (an unreadable ``fields`` reads as empty, so
    its fields get their defaults, as an unreadable JSON field of the flat layout does)."""
    meta = dict(metadata or {})
    if not is_lean(meta):
        return meta  # the flat layout, or another tool's keys (a "fields" key of theirs stays)
    raw = meta.pop(PACKED, None)
    try:
        packed = _parsed(raw) if isinstance(raw, str) else None
    except ValueError:
        packed = None
    if isinstance(packed, dict):
        meta.update(packed)
    return meta


def stored_version(metadata: Mapping[str, Any] | None) -> int:
    """The record ``version`` stored in ``metadata`` (either layout; 1 when absent)."""
    version = _fields(metadata).get("version", 1)
    return int(version) if isinstance(version, int | float) and math.isfinite(version) else 1


def _json_field(meta: Mapping[str, Any], key: str, default: Any) -> Any:
    raw = meta.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        return raw
    try:
        return _parsed(raw)
    except ValueError:
        return default


def _parsed(text: str) -> Any:
    """``json.loads`` of a stored JSON field. Nesting deeper than the parser's recursion
    limit (a store folder from someone else) is unreadable JSON like any other, a
    ``ValueError``: the field reads as its default instead of every read of the store failing
    with ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply to read") from exc


def _number(meta: Mapping[str, Any], key: str, default: float) -> float:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    return float(value)


def _choice(kind: Any, value: Any, default: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        try:
            return kind(str(value).lower())
        except ValueError:
            return default


def _state(value: Any) -> RecordState:
    """The stored state: absent reads as active (written before soft states), unknown as
    paused (kept, not retrieved: the side that cannot surface what a user withheld)."""
    if value is None:
        return RecordState.ACTIVE
    state: RecordState = _choice(RecordState, value, RecordState.PAUSED)
    return state


def record_from_chroma(
    record_id: str,
    document: str | None,
    metadata: Mapping[str, Any] | None,
    *,
    lenient: bool = False,
    now_ms: float = 0.0,
) -> MemoryRecord:
    """Rebuild a record from what Chroma returned.

    Args:
        lenient: Accept records written by other tools: missing fields get defaults, unknown
            metadata keys are kept in ``metadata``, an empty document is shown as such.
        now_ms: Time used as created_at for foreign records without one.

    Raises:
        ValidationError: (strict mode) the stored record does not validate.
    """
    meta = _fields(metadata)
    ours = meta.get("mnemo_schema") is not None
    if not ours and not lenient:
        raise ValidationError("mnemo_schema", None,
                              f"record {record_id} was not written by Mnemoscope")
    if not ours:
        extra = {k: v for k, v in meta.items()}
        content = document if document and document.strip() else "(no document)"
        created = _number(meta, "created_at", now_ms)
        return MemoryRecord(
            id=record_id, content=content[:32_000], layer=Layer.SEMANTIC, agent_id="default",
            importance=0.5, confidence=0.5, category=Category.FACT, tags=(),
            privacy=Privacy.PRIVATE, source="foreign", source_tier=TrustTier.AUTO,
            created_at=created, last_accessed=created, metadata={"foreign": extra},
        )
    created = _number(meta, "created_at", now_ms)
    expires = _number(meta, "expires_at", _NO_EXPIRY)
    tags = _json_field(meta, "tags", [])
    provenance = _json_field(meta, "provenance", [])
    merged = _json_field(meta, "merged_from", [])
    related = _json_field(meta, "related", [])
    user_meta = _json_field(meta, "metadata", {})
    try:
        return _stored_record(record_id, document, meta, created, expires, tags, provenance,
                              merged, related, user_meta)
    except ValidationError as exc:  # say which record: the store may come from someone else
        raise ValidationError(f"stored record {record_id}: {exc.field}", exc.value,
                              exc.reason) from exc


def _stored_record(record_id: str, document: str | None, meta: Mapping[str, Any],
                   created: float, expires: float, tags: Any, provenance: Any, merged: Any,
                   related: Any, user_meta: Any) -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        content=document or "(no document)",
        layer=_choice(Layer, meta.get("layer"), Layer.SEMANTIC),
        agent_id=str(meta.get("agent_id") or "default"),
        importance=min(1.0, max(0.0, _number(meta, "importance", 0.5))),
        confidence=min(1.0, max(0.0, _number(meta, "confidence", 0.5))),
        category=_choice(Category, meta.get("category"), Category.FACT),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        privacy=_choice(Privacy, meta.get("privacy"), Privacy.PRIVATE),
        source=str(meta.get("source") or "unknown"),
        source_tier=_choice(TrustTier, meta.get("source_tier"), TrustTier.AUTO),
        created_at=created,
        last_accessed=_number(meta, "last_accessed", created),
        access_count=int(_number(meta, "access_count", 0)),
        expires_at=None if expires < 0 else expires,
        recency_anchor=_number(meta, "recency_anchor", created),
        content_hash=str(meta.get("content_hash") or ""),
        token_estimate=int(_number(meta, "token_estimate", 0)),
        provenance=tuple(ProvenanceEntry.from_json(p) for p in provenance)
        if isinstance(provenance, list) else (),
        merged_from=tuple(str(m) for m in merged) if isinstance(merged, list) else (),
        related=tuple(RelatedLink.from_json(r) for r in related)
        if isinstance(related, list) else (),
        redacted=bool(meta.get("redacted", False)),
        embedding_model=str(meta.get("embedding_model") or ""),
        metadata=user_meta if isinstance(user_meta, dict) else {},
        version=int(_number(meta, "version", 1)),
        state=_state(meta.get("state")),
    )
