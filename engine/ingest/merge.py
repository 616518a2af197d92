"""Merge rules: how an incoming memory is folded into the stored record it duplicates.

seed 001 "Merge Rules (deterministic)" + seed 004 "Merge Algorithm", as settled by DESIGN 4:

* confidence: ``lerp(old, incoming, w)``, ``w = tier_weight × recency × cap`` where
  ``tier_weight`` is the incoming source's trust-tier weight (human 1.0, agent 0.6, auto 0.3),
  ``recency = 1 - 0.5·exp(-Δt/τ)`` with Δt from the stored record's last access to the incoming
  memory's time (τ = 30 days), and ``cap`` enforces the per-source contribution cap: if the
  incoming source would then account for more than ``source_contribution_cap`` of the record's
  provenance entries, ``w`` is scaled by ``cap / share`` so no single source dominates;
* importance = max; tags union (stored first); metadata union (stored values win);
* created = earliest; last_accessed = now; access_count = sum;
* provenance appended (+ count of unique sources); ``merged_from`` gets the incoming id;
* the text of the more important version is kept (seed 004 "Merge Algorithm": "Keep higher
  importance version"; its example keeps "User prefers TypeScript" at 0.8 over "User likes
  TypeScript" at 0.7). The stored record's id survives either way — other records link to it —
  but when the incoming memory's importance is strictly higher, its content (and so its hash,
  token estimate and embedding model) replaces the stored content; on a tie the stored text
  stays, and so does the text of a record the user redacted in place. The caller writes the
  incoming embedding with it (:func:`takes_incoming_text`);
* symmetric ``related`` links, top-k by similarity (:func:`add_related`).

The exact-duplicate update (seed 000 §9) is :func:`apply_exact_update`: confidence =
``merge_confidence(old, new)``, and a source not yet in provenance is appended.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from engine.ingest.policy import IngestPolicy
from engine.records import MemoryRecord, ProvenanceEntry, RelatedLink

__all__ = [
    "add_provenance",
    "add_related",
    "apply_exact_update",
    "merge_records",
    "merge_weight",
    "takes_incoming_text",
]

_DAY_MS = 86_400_000.0


def _round6(value: float) -> float:
    return math.floor(value * 1_000_000 + 0.5) / 1_000_000


def merge_weight(existing: MemoryRecord, incoming: MemoryRecord, policy: IngestPolicy) -> float:
    """The ``w`` of ``lerp(old, incoming, w)``: tier weight × recency × per-source cap."""
    tier_weight = policy.tier_weights[incoming.source_tier]
    delta_ms = max(0.0, incoming.created_at - existing.last_accessed)
    recency = 1.0 - 0.5 * math.exp(-delta_ms / (policy.recency_half_life_days * _DAY_MS))
    entries = [*existing.provenance, *incoming.provenance]
    share = sum(1 for e in entries if e.source == incoming.source) / max(1, len(entries))
    cap = policy.dedup.source_contribution_cap
    cap_factor = 1.0 if share <= cap or share == 0.0 else cap / share
    return max(0.0, min(1.0, tier_weight * recency * cap_factor))


def _union_metadata(stored: Mapping[str, Any], incoming: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(incoming)
    merged.update(stored)  # stored values win on a conflicting key
    return merged


def takes_incoming_text(existing: MemoryRecord, incoming: MemoryRecord) -> bool:
    """True when a merge keeps ``incoming``'s text: its importance is strictly higher (seed 004
    keeps the higher-importance version; a tie keeps what is stored) and the text differs.

    A record the user redacted in place keeps its text: a merge must not bring back what the
    user took out.
    """
    return incoming.importance > existing.importance and not existing.redacted \
        and incoming.content_hash != existing.content_hash


def merge_records(existing: MemoryRecord, incoming: MemoryRecord, *, now_ms: float,
                  policy: IngestPolicy) -> MemoryRecord:
    """Fold ``incoming`` into ``existing`` (see the module docstring); returns the new version.

    The result keeps ``existing.id``. When :func:`takes_incoming_text`, it carries
    ``incoming``'s content, hash, token estimate and embedding model, so the caller must write
    the incoming memory's vector with it (or none, on the Jaccard path: the record is then
    re-embedded like any record stored while the model was loading).
    """
    text: dict[str, Any] = {}
    if takes_incoming_text(existing, incoming):
        text = {"content": incoming.content, "content_hash": incoming.content_hash,
                "token_estimate": incoming.token_estimate,
                "embedding_model": incoming.embedding_model}
    weight = merge_weight(existing, incoming, policy)
    confidence = _round6(existing.confidence + weight * (incoming.confidence -
                                                          existing.confidence))
    merged_from = tuple(dict.fromkeys([*existing.merged_from, incoming.id, *incoming.merged_from]))
    return existing.replace(
        confidence=max(0.0, min(1.0, confidence)),
        importance=max(existing.importance, incoming.importance),
        tags=tuple(dict.fromkeys([*existing.tags, *incoming.tags])),
        metadata=_union_metadata(existing.metadata, incoming.metadata),
        created_at=min(existing.created_at, incoming.created_at),
        last_accessed=max(now_ms, existing.last_accessed),
        access_count=existing.access_count + incoming.access_count,
        expires_at=_later_expiry(existing.expires_at, incoming.expires_at,
                                 min(existing.created_at, incoming.created_at)),
        provenance=(*existing.provenance, *incoming.provenance),
        merged_from=merged_from,
        version=existing.version + 1,
        **text,
    )


def _later_expiry(a: float | None, b: float | None, created: float) -> float | None:
    # The merged fact lives as long as the longer-lived copy; "never expires" wins.
    if a is None or b is None:
        return None
    return max(a, b, created)


def add_provenance(record: MemoryRecord, entry: ProvenanceEntry) -> MemoryRecord:
    """DESIGN 2: a source not yet in the provenance is appended (even when skipping)."""
    if any(e.source == entry.source for e in record.provenance):
        return record
    return record.replace(provenance=(*record.provenance, entry), version=record.version + 1)


def apply_exact_update(record: MemoryRecord, new_confidence: float, entry: ProvenanceEntry, *,
                       now_ms: float) -> MemoryRecord:
    """seed 000 §9 exact-duplicate update: new confidence, provenance append if new source."""
    provenance = record.provenance
    if not any(e.source == entry.source and e.content_hash == entry.content_hash
               for e in provenance):
        provenance = (*provenance, entry)
    return record.replace(confidence=new_confidence, provenance=provenance,
                          last_accessed=max(now_ms, record.last_accessed),
                          version=record.version + 1)


def add_related(record: MemoryRecord, links: Iterable[RelatedLink], top_k: int) -> MemoryRecord:
    """Add ``links`` to ``record.related``, keeping the ``top_k`` most similar (one per id).

    Returns ``record`` itself when nothing changes (so callers can skip a write).
    """
    best: dict[str, float] = {link.id: link.similarity for link in record.related}
    for link in links:
        if link.id == record.id:
            continue
        if link.similarity > best.get(link.id, -math.inf):
            best[link.id] = link.similarity
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    related = tuple(RelatedLink(i, s) for i, s in ranked)
    if related == record.related:
        return record
    return record.replace(related=related)
