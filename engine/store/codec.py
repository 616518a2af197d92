"""How a :class:`~engine.records.MemoryRecord` is laid out in Chroma (schema versions 1 and 2).

Chroma keeps the id, the document (``content``), the embedding and a flat metadata dict of
scalars. Scalars map one to one; non-scalar fields (tags, provenance, merged_from, related,
metadata) are JSON strings, because Chroma rejects ``None`` and empty lists as metadata values.
``expires_at`` of None is stored as -1. Every record carries ``mnemo_schema`` so records written
by other tools are recognised and read leniently (:func:`record_from_chroma` with
``lenient=True``): their document becomes the content and their metadata is kept as metadata.

``state`` (issue 20, soft states) is what schema version 2 adds. A record written before it has
no ``state`` key and reads as active, which is what it was, so no migration rewrites a store.
The collection's ``schema_version`` says which build may read it safely: a store stays at
version 1 (:data:`SCHEMA_VERSION_BASE`) until the first record with a state other than active
is written to it (a pause, an archive, an import of a paused record), and is then marked 2
(:data:`SCHEMA_VERSION`) before that record is written. An older build, which would ignore the
key and retrieve paused records, refuses a version-2 store (``SchemaMismatch``, "upgrade
Mnemoscope"); stores that never held a soft state keep opening in older builds. The mark is
never lowered (resuming every record leaves it at 2). A version-1 store that already holds
paused or archived records (written by a build that kept states within version 1) is marked 2
when this build opens it for writing. An unknown value (a newer build's state)
reads as paused: the record is kept and shown, and is not retrieved until someone resumes it.

Schema (collection metadata ``schema_version`` = :data:`SCHEMA_VERSION`)::

    layer, agent_id, category, privacy, source, source_tier, content_hash, embedding_model: str
    state: str (active / paused / archived; absent = active)
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

__all__ = ["SCHEMA_VERSION", "SCHEMA_VERSION_BASE", "record_from_chroma", "record_to_chroma"]

SCHEMA_VERSION = 2
"""The newest layout this build reads and writes: records may carry a soft state."""
SCHEMA_VERSION_BASE = 1
"""The layout of a store none of whose records was ever paused or archived (older builds
read it correctly, so a store is only marked :data:`SCHEMA_VERSION` when it needs to be)."""
_NO_EXPIRY = -1.0


def record_to_chroma(record: MemoryRecord) -> dict[str, str | int | float | bool]:
    """The flat Chroma metadata for ``record`` (the document is ``record.content``)."""
    return {
        "mnemo_schema": SCHEMA_VERSION,
        "layer": record.layer.value,
        "agent_id": record.agent_id,
        "importance": float(record.importance),
        "confidence": float(record.confidence),
        "category": record.category.value,
        "privacy": record.privacy.value,
        "source": record.source,
        "source_tier": record.source_tier.value,
        "created_at": float(record.created_at),
        "last_accessed": float(record.last_accessed),
        "access_count": int(record.access_count),
        "expires_at": _NO_EXPIRY if record.expires_at is None else float(record.expires_at),
        "recency_anchor": float(record.recency_anchor or record.created_at),
        "content_hash": record.content_hash,
        "token_estimate": int(record.token_estimate),
        "redacted": bool(record.redacted),
        "embedding_model": record.embedding_model,
        "version": int(record.version),
        "state": record.state.value,
        "tags": json.dumps(list(record.tags)),
        "provenance": json.dumps([p.to_json() for p in record.provenance]),
        "merged_from": json.dumps(list(record.merged_from)),
        "related": json.dumps([r.to_json() for r in record.related]),
        "metadata": json.dumps(dict(record.metadata)),
    }


def _json_field(meta: Mapping[str, Any], key: str, default: Any) -> Any:
    raw = meta.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return default


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
    meta = dict(metadata or {})
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
