"""Shared fixtures: an engine on a temporary embedded store with a deterministic clock."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.clock import DeterministicClock
from engine.embedding import EmbedderState, EmbedderStatus
from engine.memory_engine import MemoryEngine
from engine.records import Layer, MemoryRecord, NewMemory, Privacy
from engine.store import StoreSpec
from engine.text import tokenize

NOW = 1_750_000_000_000.0
DAY = 86_400_000.0


class HashEmbedder:
    """A deterministic bag-of-words embedder (hashing trick): similar words → cosine > 0."""

    model_name = "hash-bow"
    dimension = 384

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(EmbedderState.READY, self.model_name, self.dimension)

    def is_ready(self) -> bool:
        return True

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for token in tokenize(text):
                out[i, sum(map(ord, token)) % self.dimension] += 1.0
            norm = float(np.linalg.norm(out[i]))
            if norm:
                out[i] /= norm
        return out


def make_record(i: int, content: str, *, agent: str = "a", layer: Layer = Layer.SEMANTIC,
                importance: float = 0.5, age_days: float = 1.0, tags: tuple[str, ...] = (),
                privacy: Privacy = Privacy.PRIVATE, expires_in_days: float | None = None
                ) -> MemoryRecord:
    created = NOW - age_days * DAY
    expires = None if expires_in_days is None else NOW + expires_in_days * DAY
    new = NewMemory(content, agent_id=agent, layer=layer, importance=importance, tags=tags,
                    privacy=privacy, created_at=created,
                    expires_at=expires if expires is None or expires >= created else created)
    record = MemoryRecord.create(new, now_ms=created, record_id=f"r{i:03d}")
    if expires_in_days is not None and expires_in_days < 0:
        record = record.replace(expires_at=NOW + expires_in_days * DAY)
    return record


def open_engine(path: Path, *, embedder: HashEmbedder | None = None) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(NOW),
                             embedder=embedder)


def write(engine: MemoryEngine, records: Sequence[MemoryRecord]) -> None:
    vectors = engine.embed_texts([r.content for r in records])
    engine.store.write(list(records), vectors)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = open_engine(tmp_path / "store", embedder=HashEmbedder())
    yield eng
    eng.close()
