"""The attach client against the real server: plain reads and gap-free event following."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine.clock import DeterministicClock
from engine.introspection import IntrospectionServer, ServerLimits
from engine.introspection.client import ApiError, ApiUnauthorized, IntrospectionClient
from engine.memory_engine import MemoryEngine
from engine.records import Layer, NewMemory
from tests.engine.introspection.conftest import TOKEN


@pytest.fixture
def client(server: IntrospectionServer) -> Iterator[IntrospectionClient]:
    with IntrospectionClient(server.url, TOKEN, sleep=lambda _s: None) as c:
        yield c


def test_reads(engine: MemoryEngine, clock: DeterministicClock,
               client: IntrospectionClient) -> None:
    first = engine.add(NewMemory("met bob", agent_id="a", layer=Layer.SOCIAL,
                                 metadata={"social": {"otherAgentId": "bob", "sentiment": 0.2},
                                           "spatial": {"x": 1, "y": 1, "z": 1}}))
    version = client.snapshot()["version"]
    clock.advance(1000)
    engine.add(NewMemory("odd id/with slash?", agent_id="a"))
    assert client.record(first.id)["id"] == first.id
    assert client.records(agent="a", limit=1)["total"] == 2
    assert len(client.diff(since=version)["upserted"]) == 1
    assert client.events(after=version)["events"][0]["kind"] == "memory:record:created"
    assert client.social(agent="a")[0]["counterpart"] == "bob"
    assert client.patterns() == []
    assert client.spatial(x=1, y=1, z=1, radius=0.5)[0]["record_id"] == first.id
    assert client.debug_memory()["sanitized"] is True
    metrics = client.metrics()
    assert metrics["aggregate"]["memory_records_total"] == client.snapshot()["store"]["records"]
    assert metrics["llm"]["memory_llm_budget_alerts_total"] == {"70": 0, "90": 0, "100": 0}
    with pytest.raises(ApiError) as missing:
        client.record("no/such id")
    assert missing.value.status == 404


def test_wrong_token_is_not_retried(server: IntrospectionServer) -> None:
    with IntrospectionClient(server.url, "wrong-token-0123456789") as bad:
        with pytest.raises(ApiUnauthorized):
            bad.snapshot()
        with pytest.raises(ApiUnauthorized):
            next(bad.stream_events())
        with pytest.raises(ApiUnauthorized):
            next(bad.poll_events(wait=0))


def _writer(engine: MemoryEngine, count: int, gate: threading.Event | None = None
            ) -> threading.Thread:
    def run() -> None:
        for i in range(count):
            if gate is not None and i == count // 2:
                gate.wait(timeout=20)
            engine.add(NewMemory(f"record number {i}"))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _collect(events: Iterator[dict[str, Any]], until: int, stop: threading.Event,
             out: list[int]) -> threading.Thread:
    def run() -> None:
        for event in events:
            out.append(event["seq"])
            if event["seq"] >= until:
                stop.set()
                return

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_stream_has_no_gaps_across_server_side_reconnects(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, limits=ServerLimits(stream_max_s=0.3, keepalive_s=0.1,
                                                     rate_per_s=1000, burst=1000))
    engine.add(NewMemory("already there"))
    start = engine.events.last_seq()
    count = 40
    stop = threading.Event()
    seqs: list[int] = []
    halfway = threading.Event()
    with IntrospectionClient(server.url, TOKEN, sleep=lambda _s: None) as client:
        reader = _collect(client.stream_events(after=start - 1, stop=stop), start + count,
                          stop, seqs)
        writer = _writer(engine, count, gate=halfway)
        # the second half is written only after the server has ended a stream and the
        # client has come back (stream_max_s=0.3), so a reconnect falls inside the run
        deadline = time.monotonic() + 30
        while client.reconnects < 1 and time.monotonic() < deadline:
            stop.wait(0.02)
        halfway.set()
        writer.join(timeout=60)
        reader.join(timeout=60)
        assert not reader.is_alive()
        assert client.reconnects >= 1
    assert seqs == list(range(start, start + count + 1))


def test_stream_resumes_after_a_server_restart(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]) -> None:
    limits = ServerLimits(keepalive_s=0.1, rate_per_s=1000, burst=1000)
    first = make_server(engine, limits=limits)
    port = int(first.url.rsplit(":", 1)[1])
    count = 30
    stop = threading.Event()
    halfway = threading.Event()
    seqs: list[int] = []
    def nap(seconds: float) -> None:
        stop.wait(min(seconds, 0.05))

    with IntrospectionClient(first.url, TOKEN, sleep=nap) as client:
        reader = _collect(client.stream_events(after=0, stop=stop), count, stop, seqs)
        writer = _writer(engine, count, gate=halfway)
        while len(seqs) < count // 2 and reader.is_alive():
            stop.wait(0.02)
        first.stop()  # the server goes away; the writer keeps writing meanwhile
        halfway.set()
        writer.join(timeout=60)
        make_server(engine, port=port, limits=limits)
        reader.join(timeout=60)
        assert not reader.is_alive()
        assert client.reconnects >= 1
    assert seqs == list(range(1, count + 1))


def test_poll_events_follows_in_order(engine: MemoryEngine,
                                      client: IntrospectionClient) -> None:
    stop = threading.Event()
    seqs: list[int] = []
    reader = _collect(client.poll_events(after=0, wait=0.5, stop=stop), 12, stop, seqs)
    _writer(engine, 12).join(timeout=60)
    reader.join(timeout=60)
    assert seqs == list(range(1, 13))
