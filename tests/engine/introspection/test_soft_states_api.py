"""Soft states over the introspection API (issue 20): the records route shows each record's
state, hides archived records by default and filters by ``state``; the attach reader asks for
the same states as a local one."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from engine.introspection import IntrospectionServer
from engine.introspection.remote import RemoteReader
from engine.memory_engine import MemoryEngine
from engine.query import ALL_STATES, RecordQuery, parse_states
from engine.reader import LocalReader
from engine.records import NewMemory
from tests.engine.introspection.conftest import TOKEN

SECRET_KEY = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"


def _three(engine: MemoryEngine) -> tuple[str, str, str]:
    active, paused, archived = (engine.add(NewMemory(f"note {word}", agent_id="scout")).id
                                for word in ("one", "two", "three"))
    engine.pause([paused])
    engine.archive([archived])
    return active, paused, archived


def test_records_route_shows_and_filters_states(engine: MemoryEngine,
                                                http: httpx.Client) -> None:
    active, paused, archived = _three(engine)
    page = http.get("/v1/records").json()
    assert page["total"] == 2
    assert {r["id"]: r["state"] for r in page["records"]} == {active: "active",
                                                              paused: "paused"}
    every = http.get("/v1/records", params={"state": "all"}).json()
    assert {r["id"]: r["state"] for r in every["records"]} == {
        active: "active", paused: "paused", archived: "archived"}
    only = http.get("/v1/records", params={"state": "archived,paused"}).json()
    assert {r["id"] for r in only["records"]} == {paused, archived}
    assert http.get(f"/v1/records/{archived}").json()["state"] == "archived"
    bad = http.get("/v1/records", params={"state": "sleeping"})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "BAD_PARAMETER"
    assert "state: unknown state 'sleeping'" in bad.json()["error"]["message"]


def test_state_filter_goes_through_the_exit_policy(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]) -> None:
    record = engine.add(NewMemory(f"deploy key {SECRET_KEY}", agent_id="scout"))
    engine.archive([record.id])
    server = make_server(engine, redaction=True)
    with httpx.Client(base_url=server.url, timeout=10.0,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        response = client.get("/v1/records", params={"state": "archived"})
    assert response.status_code == 200 and response.json()["total"] == 1
    assert SECRET_KEY not in response.text
    assert response.json()["records"][0]["state"] == "archived"


def test_remote_reader_lists_the_states_a_local_reader_lists(
        engine: MemoryEngine, server: IntrospectionServer) -> None:
    _three(engine)
    local = LocalReader(engine)
    remote = RemoteReader.connect(server.url, TOKEN)
    try:
        for states in (None, ALL_STATES, parse_states("archived")):
            query = RecordQuery() if states is None else RecordQuery(states=states)
            here, there = local.list_records(query), remote.list_records(query)
            assert there.total == here.total
            assert there.records == here.records  # the state survives the wire
        rows = remote.list_rows(RecordQuery(states=ALL_STATES)).rows
        assert sorted(row.state.value for row in rows) == ["active", "archived", "paused"]
    finally:
        remote.close()
