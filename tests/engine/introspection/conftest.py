"""A real introspection server on 127.0.0.1 over a real embedded store, always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.clock import DeterministicClock
from engine.introspection import IntrospectionServer, ServerLimits
from engine.memory_engine import MemoryEngine
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock)
    yield eng
    eng.close_layers()
    eng.close()


@pytest.fixture
def make_server() -> Iterator[Callable[..., IntrospectionServer]]:
    started: list[IntrospectionServer] = []

    def make(engine: MemoryEngine, **options: Any) -> IntrospectionServer:
        options.setdefault("token", TOKEN)
        server = IntrospectionServer(engine, **options).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def server(engine: MemoryEngine,
           make_server: Callable[..., IntrospectionServer]) -> IntrospectionServer:
    return make_server(engine, limits=ServerLimits(rate_per_s=1000.0, burst=1000))


@pytest.fixture
def http(server: IntrospectionServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client
