"""The engine's one Redactor: built from ``redact_patterns``, used by every exit it owns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.clock import DeterministicClock
from engine.config import MemoryConfig
from engine.introspection.server import IntrospectionServer
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import NewMemory
from engine.redaction import placeholder_for
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

BADGE = "EMP-40417"
PATTERNS = ("EMAIL", "PHONE", r"EMP-\d{5}")


@pytest.fixture
def engine(store_dir: Path, clock: DeterministicClock,
           fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    config = EngineConfig(memory=MemoryConfig(redact_patterns=PATTERNS), redaction=True)
    eng = MemoryEngine.open(StoreSpec(str(store_dir)), embedder=fake_embedder, clock=clock,
                            config=config)
    yield eng
    eng.close()


def test_the_engine_redactor_carries_the_configured_patterns(engine: MemoryEngine) -> None:
    assert engine.redactor.patterns == PATTERNS
    assert engine.redactor is engine.config.memory.redactor()  # one shared instance
    assert engine.redact(f"badge {BADGE}, call 415-555-0199") == (
        f"badge {placeholder_for(BADGE)}, call {placeholder_for('415-555-0199')}")


def test_events_in_redaction_mode_mask_custom_patterns(engine: MemoryEngine) -> None:
    # Before, an engine opened without a redactor function stored event strings raw.
    event = engine.events.emit("memory:test", payload={"note": f"badge {BADGE}",
                                                       "nested": {"who": f"{BADGE} desk"}})
    assert event is not None
    assert BADGE not in json.dumps(event.to_json())
    assert event.payload["note"] == f"badge {placeholder_for(BADGE)}"


def test_scan_and_export_use_the_engine_redactor(engine: MemoryEngine, tmp_path: Path) -> None:
    record = engine.add(NewMemory(content=f"Dana's badge is {BADGE}", agent_id="hr"))
    hits = engine.redaction_scan()
    assert [(hit.id, dict(hit.kinds)) for hit in hits] == [(record.id, {"CUSTOM": 1})]
    target = tmp_path / "export.jsonl"
    assert engine.export_jsonl(target, redact=engine.redact) == 1
    assert BADGE not in target.read_text(encoding="utf-8")


def test_the_server_masks_with_the_engine_redactor(engine: MemoryEngine) -> None:
    # Before, the server's default was redact_text: the default patterns, not the engine's.
    record = engine.add(NewMemory(content=f"Dana's badge is {BADGE}", agent_id="hr"))
    server = IntrospectionServer(engine, token="t" * 32).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10.0,
                          headers={"Authorization": f"Bearer {'t' * 32}"}) as http:
            body = http.get(f"/v1/records/{record.id}").text
    finally:
        server.stop()
    assert BADGE not in body and placeholder_for(BADGE) in body
