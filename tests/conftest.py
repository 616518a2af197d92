"""Test-wide settings and shared fixtures. Must not import Qt (engine tests run without it)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.embedding import SentenceTransformerEmbedder
from tests.support.fakes import HashingEmbedder

T0 = 1_767_225_600_000.0  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="session")
def real_embedder() -> SentenceTransformerEmbedder:
    """The real all-MiniLM-L6-v2, loaded once per session from the packaged weights."""
    embedder = SentenceTransformerEmbedder()
    assert embedder.wait_ready(300), embedder.status().reason
    return embedder


@pytest.fixture
def fake_embedder() -> HashingEmbedder:
    """A fast deterministic embedder (hashed bag of words)."""
    return HashingEmbedder()


@pytest.fixture
def clock() -> DeterministicClock:
    """A clock at 2026-01-01T00:00:00Z that moves only when told."""
    return DeterministicClock(T0)


@pytest.fixture(scope="session")
def chroma_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `chroma run` on 127.0.0.1 for the whole session."""
    from tests.support.chroma_server import chroma_server

    with chroma_server(tmp_path_factory.mktemp("chroma-server") / "data") as url:
        yield url


@pytest.fixture
def unique_collection() -> str:
    """A fresh collection name, so server tests do not see each other's records."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh embedded store directory."""
    return tmp_path / "store"
