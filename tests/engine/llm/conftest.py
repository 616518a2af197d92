"""Fixtures: the real LLM test server, a deterministic clock and a gateway wired to both."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.config import MemoryConfig
from engine.events import Event, EventBus
from engine.ledger import Ledger
from engine.llm import DeterministicClock, DeterministicRNG, LLMGateway, LLMSettings, ModelPrice
from engine.llm.settings import ProviderKind
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Layer, MemoryRecord
from engine.store import StoreSpec
from tests.engine.retrieval.conftest import NOW, HashEmbedder, make_record
from tests.support.llm_server import LLMTestServer

SECRET_KEY = "sk-test-SUPERSECRET-0123456789abcdef"
START_MS = datetime(2025, 1, 1, 12, tzinfo=UTC).timestamp() * 1000


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as running:
        yield running


@dataclass
class Rig:
    """A gateway on the test server with everything it touched, for assertions."""

    gateway: LLMGateway
    clock: DeterministicClock
    ledger: Ledger
    bus: EventBus
    events: list[Event]
    sleeps: list[float] = field(default_factory=list)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def rows(self, table: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self.ledger.query(f"SELECT * FROM {table} ORDER BY id")]


MakeRig = Callable[..., Rig]


@pytest.fixture
def make_rig(server: LLMTestServer) -> Iterator[MakeRig]:
    made: list[Rig] = []

    def make(kind: str = "openai", *, ledger: Ledger | None = None,
             clock: DeterministicClock | None = None,
             redactor: Callable[[str], str] | None = None, **overrides: Any) -> Rig:
        clock = clock or DeterministicClock(START_MS)
        base = server.base_url + "/v1" if kind == "openai" else server.base_url
        options: dict[str, Any] = {
            "provider": kind, "kind": ProviderKind(kind), "base_url": base,
            "model": "test-model", "api_key_env": None, "use_keyring": False,
            "read_timeout_s": 2.0, "connect_timeout_s": 2.0,
            "prices": {"test-model": ModelPrice(1.0, 2.0)},
        }
        options.update(overrides)
        settings = LLMSettings(**options)
        ledger = ledger or Ledger(None)
        bus = EventBus(clock=clock, ledger=ledger)
        events: list[Event] = []
        bus.subscribe(events.append)
        sleeps: list[float] = []

        def sleep(ms: float) -> None:
            sleeps.append(ms)
            clock.advance(ms)

        gateway = LLMGateway(settings, ledger=ledger, events=bus, clock=clock,
                             rng=DeterministicRNG(12345), sleep=sleep, redactor=redactor,
                             api_key=lambda: SECRET_KEY)
        rig = Rig(gateway, clock, ledger, bus, events, sleeps)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.gateway.close()


def open_engine(path: Path, **memory: Any) -> MemoryEngine:
    """An embedded engine at ``path`` (hash embedder, clock at the retrieval tests' NOW)."""
    config = EngineConfig(memory=dataclasses.replace(MemoryConfig(), **memory))
    return MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(NOW),
                             embedder=HashEmbedder(), config=config)


def episodes(count: int) -> list[MemoryRecord]:
    """``count`` old episodic records of agent ``a`` about one theme (one compaction group)."""
    return [make_record(i, f"Alice met Bob at the cafe on day {i}. They talked about jazz.",
                        layer=Layer.EPISODIC, importance=0.3, age_days=count - i + 1,
                        tags=("cafe",)) for i in range(count)]
