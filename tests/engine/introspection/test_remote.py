"""The attach reader: the same answers over the real API as from the engine, and clear errors."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from engine.clock import DeterministicClock
from engine.errors import RecordNotFound, ValidationError
from engine.events import Event
from engine.introspection import IntrospectionServer
from engine.introspection.client import ApiError, ApiUnauthorized
from engine.introspection.remote import RemoteReader, check_url
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.reader import LocalReader
from engine.records import Layer, NewMemory
from tests.engine.introspection.conftest import TOKEN

DAY = 86_400_000.0


def _fill(engine: MemoryEngine, clock: DeterministicClock) -> None:
    """Interactions, a 3-success 1-failure procedure, positions, a merge link."""
    for sentiment in (-0.4, 0.0, 0.5):
        engine.layers.record_interaction("robot", "mia", f"mia and the robot, mood {sentiment}",
                                         sentiment=sentiment, created_at=clock.now())
        clock.advance(DAY)
    for number, outcome in enumerate((True, True, False, True)):
        engine.layers.record_episode("bot", ["verify identity", "send link", "confirm"],
                                     outcome=outcome, episode_id=f"reset-{number}",
                                     created_at=clock.now())
        clock.advance(DAY)
    for i in range(5):
        engine.add(NewMemory(f"landmark number {i} of the flat", agent_id="robot",
                             layer=Layer.SPATIAL,
                             metadata={"spatial": {"x": float(i), "y": 0.0, "z": 0.0}}))
        clock.advance(1000)


@pytest.fixture
def filled(engine: MemoryEngine, clock: DeterministicClock) -> MemoryEngine:
    _fill(engine, clock)
    engine.layers.flush()  # the summary and pattern records exist before anyone reads
    return engine


def test_remote_reader_answers_like_the_local_reader(filled: MemoryEngine,
                                                     server: IntrospectionServer) -> None:
    local = LocalReader(filled)
    remote = RemoteReader.connect(server.url, TOKEN)
    try:
        assert remote.read_only and remote.location == server.url
        query = RecordQuery(layer=Layer.EPISODIC, sort_by=SortKey.CREATED, descending=False,
                            limit=50)
        here, there = local.list_records(query), remote.list_records(query)
        assert there.total == here.total == 7
        assert [r.id for r in there.records] == [r.id for r in here.records]
        assert there.records == here.records  # every field survives the wire
        assert list(there.decayed_importance) == pytest.approx(list(here.decayed_importance))
        assert remote.count() == local.count()
        assert list(remote.facets().agents) == list(local.facets().agents)

        assert remote.social_summaries() == local.social_summaries()
        patterns = remote.pattern_details()
        assert patterns == local.pattern_details()
        reset = next(p for p in patterns if p.pattern.agent_id == "bot")
        assert (reset.pattern.successes, reset.pattern.failures) == (3, 1)
        assert [round(p.success_rate or 0, 3) for p in reset.success_series()] == \
            [1.0, 1.0, 0.667, 0.75]
        assert all(len(e.record_ids) == 1 for e in reset.episodes)
        assert remote.spatial_points() == local.spatial_points()
        assert remote.spatial_within((1.0, 0.0, 0.0), 1.0) == \
            local.spatial_within((1.0, 0.0, 0.0), 1.0)
        ids = [r.id for r in here.records[:3]]
        assert [r.id for r in remote.get_records([*ids, "gone"])] == ids

        detail = remote.record_detail(ids[0])
        assert detail.record == here.records[0]
        assert [e.event_id for e in detail.events] == \
            [e.event_id for e in local.record_detail(ids[0]).events]
        assert detail.edits == () and detail.edits_known is False
        with pytest.raises(RecordNotFound):
            remote.record_detail("no-such-record")
        assert [e.event_id for e in remote.recent_events(5)] == \
            [e.event_id for e in local.recent_events(5)]
    finally:
        remote.close()


def test_follower_delivers_new_events_in_order_and_stops_promptly(
        engine: MemoryEngine, server: IntrospectionServer) -> None:
    engine.add(NewMemory("before attaching"))
    remote = RemoteReader.connect(server.url, TOKEN)
    seen: list[Event] = []
    done = threading.Event()

    def collect(event: Event) -> None:
        seen.append(event)
        if len([e for e in seen if e.kind == "memory:record:created"]) == 3:
            done.set()

    unsubscribe = remote.event_feed.subscribe(collect)
    for i in range(3):
        engine.add(NewMemory(f"written while attached {i}"))
    assert done.wait(10)
    unsubscribe()
    started = time.monotonic()
    remote.close()
    assert time.monotonic() - started < 5.0  # one long-poll (2 s), not a stream keep-alive
    seqs = [e.seq for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert seqs[0] == remote.version + 1  # nothing before the attach, nothing skipped
    assert not any(t.name == "mnemoscope-follow" and t.is_alive()
                   for t in threading.enumerate())


def test_connect_errors_say_what_to_do(server: IntrospectionServer) -> None:
    with pytest.raises(ApiUnauthorized, match=r"refused the token \(HTTP 401\)"):
        RemoteReader.connect(server.url, "not-the-token-0123456789")
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(ApiError) as refused:
        RemoteReader.connect(f"http://127.0.0.1:{closed}", TOKEN, timeout=2.0)
    assert str(refused.value) == (
        f"Could not connect to the agent's Mnemoscope API at 127.0.0.1:{closed} — connection "
        "refused. Is `mnemoscope serve` running there, on this host and port?")
    with pytest.raises(ApiError, match="does not look like a Mnemoscope introspection API"):
        RemoteReader.connect(server.url + "/v1/records", TOKEN)  # answers 404 JSON for /v1/..
    with pytest.raises(ValidationError, match="url"):
        RemoteReader.connect("127.0.0.1:8765", TOKEN)
    with pytest.raises(ValidationError, match="token"):
        RemoteReader.connect(server.url, "  ")
    assert check_url(" http://localhost:8765/ ") == "http://localhost:8765"
