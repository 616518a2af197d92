"""Stores in the flat layout (schema versions 1 and 2), as every build before issue 24 wrote
them: what the migration to the lean layout starts from (``engine.store.codec``).

:func:`flat_metadata` is ``record_to_chroma`` of the last flat build, kept verbatim (a test of
this module pins it to that build's output); :func:`write_flat_store` writes records the way
that build's ``MemoryStore`` did (collection metadata, batches, documents, vectors).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.records import MemoryRecord


def flat_metadata(record: MemoryRecord, *, mnemo_schema: int = 2) -> dict[str, Any]:
    """The flat Chroma metadata the last flat build wrote for ``record`` (``mnemo_schema`` 1:
    a build before soft states, which wrote no ``state`` key)."""
    meta: dict[str, Any] = {
        "mnemo_schema": mnemo_schema,
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
        "expires_at": -1.0 if record.expires_at is None else float(record.expires_at),
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
    if mnemo_schema < 2:
        del meta["state"]
    return meta


def write_flat_store(client: Any, records: Sequence[MemoryRecord],
                     vectors: npt.NDArray[np.float32], *, schema_version: int = 1,
                     collection: str = "mnemoscope_memories", dimension: int = 384,
                     mnemo_schema: int = 2) -> Any:
    """Create ``collection`` as a flat build did (``schema_version`` 1 until a soft state was
    written, then 2) on a Chroma ``client`` and write ``records`` with ``vectors`` in it."""
    created = client.create_collection(
        collection, metadata={"schema_version": schema_version, "dimension": dimension,
                              "created_by": "mnemoscope"},
        configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    for start in range(0, len(records), 500):
        chunk = records[start:start + 500]
        created.add(ids=[r.id for r in chunk], documents=[r.content for r in chunk],
                    metadatas=[flat_metadata(r, mnemo_schema=mnemo_schema) for r in chunk],
                    embeddings=vectors[start:start + len(chunk)])
    return created
