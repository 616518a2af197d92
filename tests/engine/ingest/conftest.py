"""Fixtures for the ingest tests: an engine on a fresh store with a controllable embedder."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.clock import DeterministicClock
from engine.embedding import Embedder, EmbedderState, EmbedderStatus, Vectors
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

T0 = 1_767_225_600_000.0  # 2026-01-01T00:00:00Z


def unit_rows(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row scaled to unit length (float32)."""
    normalized: npt.NDArray[np.float32] = (
        vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)).astype(np.float32)
    return normalized


def at_cosine(base: npt.NDArray[np.float32], cosine: float,
              rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """A unit vector at exactly ``cosine`` to the unit vector ``base``."""
    other = rng.standard_normal((len(base),)).astype(np.float32)
    other -= (other @ base) * base
    other /= np.linalg.norm(other)
    mixed: npt.NDArray[np.float32] = (
        cosine * base + np.float32(math.sqrt(1.0 - cosine * cosine)) * other).astype(np.float32)
    return mixed


class TableEmbedder:
    """An :class:`~engine.embedding.Embedder` whose cosines the test chooses.

    ``pair(a, b, cos)`` makes the vectors of texts ``a`` and ``b`` have exactly that cosine and
    be orthogonal to every other pair; other texts fall back to a hashed bag of words.
    """

    def __init__(self, dimension: int = 384) -> None:
        self._dimension = dimension
        self._table: dict[str, np.ndarray] = {}
        self._axis = 0
        self._fallback = HashingEmbedder(dimension)
        self.calls = 0

    @property
    def model_name(self) -> str:
        return "table-test"

    @property
    def dimension(self) -> int:
        return self._dimension

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(EmbedderState.READY, self.model_name, self._dimension)

    def is_ready(self) -> bool:
        return True

    def pair(self, first: str, second: str, cosine: float) -> None:
        """Give ``first`` and ``second`` vectors with ``cosine`` between them."""
        base = np.zeros(self._dimension, dtype=np.float32)
        other = np.zeros(self._dimension, dtype=np.float32)
        base[self._axis] = 1.0
        other[self._axis] = cosine
        other[self._axis + 1] = math.sqrt(max(0.0, 1.0 - cosine * cosine))
        self._axis += 2
        self._table.setdefault(first, base)
        self._table[second] = other

    def put(self, text: str, vector: np.ndarray) -> None:
        """Make ``text`` embed to ``vector`` (normalized)."""
        self._table[text] = (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        out = self._fallback.embed(texts)
        for row, text in enumerate(texts):
            if text in self._table:
                out[row] = self._table[text]
        return out


@pytest.fixture
def clock() -> DeterministicClock:
    """A clock at 2026-01-01T00:00:00Z."""
    return DeterministicClock(T0)


@pytest.fixture
def table() -> TableEmbedder:
    """The controllable embedder."""
    return TableEmbedder()


EngineFactory = Callable[..., MemoryEngine]


@pytest.fixture
def make_engine(tmp_path: Path, clock: DeterministicClock,
                table: TableEmbedder) -> Iterator[EngineFactory]:
    """Open engines on fresh stores (closed after the test)."""
    opened: list[MemoryEngine] = []

    def factory(*, embedder: Embedder | None = table, name: str = "store",
                config: EngineConfig | None = None) -> MemoryEngine:
        engine = MemoryEngine.open(StoreSpec(str(tmp_path / name)),
                                   embedder=embedder,
                                   clock=clock, config=config)
        opened.append(engine)
        return engine

    yield factory
    for engine in opened:
        engine.close()


@pytest.fixture
def engine(make_engine: EngineFactory) -> MemoryEngine:
    """An engine with the table embedder on a fresh store."""
    return make_engine()
