"""Batch ingest decides exactly as before its speed-ups (issue 24, "Ingest at the encoder's pace").

A fixed synthetic corpus — speakers' turns with exact repeats, reworded near-duplicates, changed
numbers (contradictions), other speakers saying the same, two agents and two layers — is
ingested through ``ingest_batch`` in small chunks (so the chunk overlay and the view both
serve duplicates), then again in part (hash hits, confidence updates, pending reviews). Every
outcome (action, reason, target, similarity, review item, event kinds and targets) and the
final records are reduced to one canonical form whose digest was recorded from the code before
the pipeline's speed-ups; any change of a decision changes the digest.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.clock import DeterministicClock
from engine.embedding import Vectors
from engine.ingest.pipeline import BatchResult
from engine.ingest.policy import IngestPolicy
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery
from engine.records import Category, Layer, NewMemory, TrustTier
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

T0 = 1_767_225_600_000.0

_SPEAKERS = ("Ann", "Bob", "Caro")
_PLACES = ("Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quebec")
_THINGS = ("guitar", "bicycle", "garden", "novel", "kitten", "kayak", "piano", "camera")
_TEMPLATES = (
    "{s}: I bought a new {t} in {p} last week for {n} dollars",
    "{s}: my sister moved to {p} and she loves her {t}",
    "{s}: we meet every {n} days to talk about the {t}",
    "{s}: the {t} I got in {p} cost {n} dollars",
    "{s}: I have been learning to play the {t} for {n} years",
)


def corpus(count: int, seed: int = 24) -> list[NewMemory]:
    """``count`` memories: fresh turns, exact repeats, rewordings, changed numbers, and the same
    words from another speaker, over two agents and two layers."""
    rng = random.Random(seed)
    made: list[NewMemory] = []
    for _ in range(count):
        roll = rng.random()
        if made and roll < 0.15:  # an exact repeat, maybe more confident
            base = rng.choice(made)
            made.append(NewMemory(base.content, agent_id=base.agent_id, layer=base.layer,
                                  category=base.category, source="repeat",
                                  source_tier=TrustTier.AGENT,
                                  confidence=rng.choice((0.7, 0.8, 0.95))))
            continue
        if made and roll < 0.45:  # reworded, a number changed, or another speaker
            base = rng.choice(made)
            words = base.content.split(" ")
            kind = rng.random()
            if kind < 0.4:
                words.insert(rng.randrange(1, len(words)), rng.choice(("really", "also")))
            elif kind < 0.7:
                words = [str(rng.randint(2, 90)) if w.isdigit() else w for w in words]
            else:
                words[0] = rng.choice(_SPEAKERS) + ":"
            made.append(NewMemory(" ".join(words), agent_id=base.agent_id, layer=base.layer,
                                  category=base.category, source="variant",
                                  source_tier=TrustTier.AGENT))
            continue
        text = rng.choice(_TEMPLATES).format(s=rng.choice(_SPEAKERS), p=rng.choice(_PLACES),
                                             t=rng.choice(_THINGS), n=rng.randint(2, 90))
        made.append(NewMemory(text, agent_id=rng.choice(("a1", "a2")),
                              layer=rng.choice((Layer.EPISODIC, Layer.SEMANTIC)),
                              category=rng.choice((Category.EPISODE, Category.FACT)),
                              source="fresh", source_tier=TrustTier.AGENT))
    return made


class JitteredEmbedder(HashingEmbedder):
    """The hashed bag of words plus a small deterministic per-text jitter, so two different
    texts never tie (ties are broken by random record ids, which would make the reference
    digest flaky)."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = super().embed(texts)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            out[row] += np.random.default_rng(seed).normal(0.0, 0.002, out.shape[1])
            out[row] /= np.linalg.norm(out[row])
        return out


_VOLATILE = frozenset({"latency_ms", "over_budget"})  # wall-clock figures of a stage


def canonical(engine: MemoryEngine, results: list[BatchResult]) -> list[Any]:
    """Every outcome and the final store with ids replaced by the order they first appear."""
    names: dict[str, str] = {}

    def name(record_id: str | None) -> str | None:
        if record_id is None:
            return None
        return names.setdefault(record_id, f"r{len(names)}")

    def scrub(value: Any) -> Any:
        """An event payload without timings, ids renamed."""
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k not in _VOLATILE}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        if isinstance(value, str) and value in names:
            return names[value]
        return value

    for batch in results:  # ids in the order they first appear
        for result in batch.results:
            name(result.incoming_id)
            name(result.record_id)
            name(result.review_id)
    out: list[Any] = []
    for batch in results:
        out.append(batch.counts)
        for result in batch.results:
            name(result.incoming_id)
            out.append([
                result.action.value, result.reason.value, name(result.target_id),
                None if result.similarity is None else round(result.similarity, 5),
                name(result.record_id), result.review_id is not None,
                None if result.surprise is None else round(result.surprise.surprise, 5),
                [c.kind for c in result.conflicts],
                [(e.seq, e.kind, name(e.record_id), e.decision_reason, e.stage,
                  None if e.similarity is None else round(e.similarity, 5),
                  scrub(dict(e.thresholds)), scrub(dict(e.payload)))
                 for e in result.events],
            ])
    records = sorted(engine.list_records(RecordQuery(limit=10_000)).records,
                     key=lambda r: name(r.id) or "")
    for record in records:
        out.append([name(record.id), record.content, record.content_hash, record.agent_id,
                    record.layer.value, round(record.confidence, 5),
                    round(record.importance, 5),
                    sorted((name(link.id), round(link.similarity, 5)) for link in record.related),
                    [(p.source, p.content_hash) for p in record.provenance]])
    out.append(sorted((item.reason, name(item.target_id), name(item.incoming_id))
                      for item in engine.review_queue()))
    return out


def test_batch_decisions_match_the_recorded_reference(tmp_path: Any) -> None:
    memories = corpus(700)
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=JitteredEmbedder(),
                               clock=DeterministicClock(T0))
    try:
        engine.set_ingest_policy(IngestPolicy(batch_size=64, overlap_encode=False))
        results = [engine.ingest_batch(memories[:500]), engine.ingest_batch(memories[350:])]
        form = canonical(engine, results)
    finally:
        engine.close()
    counts = [results[0].counts, results[1].counts]
    digest = hashlib.sha256(json.dumps(form, sort_keys=True).encode()).hexdigest()
    assert counts == EXPECTED_COUNTS
    assert digest == EXPECTED_DIGEST


# Recorded from the code before the speed-ups (bb6ac5c).
EXPECTED_COUNTS = [
    {"inserted": 60, "updated": 12, "skipped": 102, "merged": 23, "deferred": 303, "error": 0},
    {"inserted": 0, "updated": 3, "skipped": 190, "merged": 5, "deferred": 152, "error": 0},
]
EXPECTED_DIGEST = "0dad12f088b6cf3fd0a9e1c59b07e17a2494289700d8dda2e7b7468f07facd07"
