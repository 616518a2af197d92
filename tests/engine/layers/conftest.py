"""Engines with a real embedded Chroma store and a fake embedder, for the layer tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.config import MemoryConfig, RetentionPolicy
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock)
    yield eng
    eng.close_layers()
    eng.close()


@pytest.fixture
def capped_engine(tmp_path: Path, clock: DeterministicClock,
                  fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    config = EngineConfig(memory=MemoryConfig(retention_policy=RetentionPolicy(
        social_max=2, procedural_max=1)))
    eng = MemoryEngine.open(StoreSpec(str(tmp_path / "capped")), embedder=fake_embedder,
                            clock=clock, config=config)
    yield eng
    eng.close_layers()
    eng.close()
