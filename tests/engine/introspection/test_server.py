"""The introspection API against the real server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from engine.clock import DeterministicClock
from engine.errors import ConfigInvalid
from engine.introspection import IntrospectionServer, ServerLimits, is_loopback
from engine.llm import ChatMessage, ChatRequest, LLMGateway, LLMSettings
from engine.llm.settings import ProviderKind
from engine.memory_engine import MemoryEngine
from engine.records import Layer, NewMemory
from engine.store import StoreSpec
from tests.engine.introspection.conftest import TOKEN
from tests.support.llm_server import LLMTestServer

SECRET_KEY = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
EMAIL = "jane.doe@example.com"


def _populate(engine: MemoryEngine, clock: DeterministicClock) -> list[str]:
    ids = []
    for i, sentiment in enumerate((-0.4, 0.0, 0.5)):
        clock.advance(60_000)
        ids.append(engine.add(NewMemory(
            f"chat {i} with bob", agent_id="scout", layer=Layer.SOCIAL,
            metadata={"social": {"otherAgentId": "bob", "sentiment": sentiment},
                      "spatial": {"x": i, "y": 0, "z": 0}})).id)
    for i, ok in enumerate((True, True, False, True)):
        clock.advance(60_000)
        engine.layers.record_episode("scout", ["fetch key", "open door"], outcome=ok,
                                     episode_id=f"ep{i}")
    clock.advance(60_000)
    ids.append(engine.add(NewMemory("plain fact", agent_id="other")).id)
    return ids


def test_every_endpoint(engine: MemoryEngine, clock: DeterministicClock,
                        http: httpx.Client) -> None:
    ids = _populate(engine, clock)
    snap = http.get("/v1/snapshot").json()
    assert snap["store"]["records"] == 8 and snap["layers"]["social"] == 3
    assert {a["agent_id"] for a in snap["agents"]} == {"scout", "other"}
    assert snap["config"]["memory"]["retention_policy"]["social_max"] == 300
    assert snap["model"]["name"] == "hashing-test" and snap["server"]["mode"] == "in-process"
    assert snap["version"] == engine.events.last_seq()
    page = http.get("/v1/records", params={"agent": "scout", "layer": "social", "limit": 2,
                                           "sort": "created_at", "order": "asc"}).json()
    assert page["total"] == 3 and [r["id"] for r in page["records"]] == ids[:2]
    assert "decayed_importance" in page["records"][0]
    assert http.get(f"/v1/records/{ids[0]}").json()["content"] == "chat 0 with bob"
    missing = http.get("/v1/records/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "MEMORY_RECORD_NOT_FOUND"
    version = snap["version"]
    engine.update(ids[-1], {"importance": 0.9})
    engine.delete([ids[0]])
    diff = http.get("/v1/diff", params={"since": version}).json()
    assert diff["complete"] and diff["deleted"] == [ids[0]]
    assert [r["id"] for r in diff["upserted"]] == [ids[-1]]
    assert http.get("/v1/diff", params={"since_time": "2020-01-01T00:00:00Z"}).json()[
        "since"] == 0
    events = http.get("/v1/events", params={"after": version}).json()
    assert [e["kind"] for e in events["events"]] == ["memory:record:edited",
                                                     "memory:record:deleted"]
    assert events["cursor"] == engine.events.last_seq()
    social = http.get("/v1/layers/social", params={"agent": "scout"}).json()["summaries"]
    # The user deleted one chat: its evidence went with it.
    assert social[0]["counterpart"] == "bob" and social[0]["interactions"] == 2
    assert [p["sentiment"] for p in social[0]["series"]] == [0.0, 0.5]
    patterns = http.get("/v1/layers/procedural").json()["patterns"]
    assert patterns[0]["success_rate"] == 0.75 and patterns[0]["history"]
    assert "episodes" not in patterns[0]  # only when asked: they can be many
    episodes = http.get("/v1/layers/procedural", params={"episodes": "true"}).json()[
        "patterns"][0]["episodes"]
    assert [e["episode_id"] for e in episodes] == ["ep0", "ep1", "ep2", "ep3"]
    assert [e["outcome"] for e in episodes] == [True, True, False, True]
    assert all(len(e["record_ids"]) == 1 for e in episodes)
    about = http.get("/v1/events", params={"record": ids[-1]}).json()
    assert [e["kind"] for e in about["events"]] == ["memory:record:created",
                                                    "memory:record:edited"]
    assert {e["record_id"] for e in about["events"]} == {ids[-1]}
    spatial = http.get("/v1/layers/spatial", params={"x": 0, "y": 0, "z": 0,
                                                     "radius": 1.5}).json()["points"]
    assert [p["x"] for p in spatial] == [1.0]  # the point at 0 was deleted
    nearest = http.get("/v1/layers/spatial", params={"x": 5, "y": 0, "z": 0, "k": 1}).json()
    assert nearest["points"][0]["x"] == 2.0
    assert len(http.get("/v1/layers/spatial").json()["points"]) == 2
    debug = http.get("/debug/memory").json()
    assert debug["sanitized"] is True and "/" not in debug["store"]["location"]
    assert debug["recent_event_kinds"]["memory:record:created"] >= 8


def test_token_is_required(server: IntrospectionServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"}):
        response = httpx.get(f"{server.url}/v1/snapshot", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert response.json()["error"]["code"] == "UNAUTHORIZED"
    stream = httpx.get(f"{server.url}/v1/events/stream")
    assert stream.status_code == 401


@pytest.mark.parametrize("host", ["127.0.0.1", "LOCALHOST"])
def test_a_loopback_server_refuses_a_foreign_host_or_origin(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer], host: str) -> None:
    # DNS rebinding: a page at evil.example re-points its name at 127.0.0.1 and reads the API
    # from the user's browser; the API answered any Host and Origin (the token was the only
    # guard).
    server = make_server(engine, host=host)
    port = server.url.rsplit(":", 1)[1]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    refused = [
        ({"Host": f"evil.example:{port}"}, 421, "HOST_NOT_ALLOWED"),
        ({"Host": f"127.0.0.1.evil.example:{port}"}, 421, "HOST_NOT_ALLOWED"),
        ({"Origin": "http://evil.example"}, 403, "ORIGIN_NOT_ALLOWED"),
        ({"Origin": "null"}, 403, "ORIGIN_NOT_ALLOWED"),
    ]
    for headers, status, code in refused:
        response = httpx.get(f"{server.url}/v1/snapshot", headers={**auth, **headers})
        assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    for headers in ({}, {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
                    {"Origin": f"http://127.0.0.1:{port}"}):
        assert httpx.get(f"{server.url}/v1/snapshot",
                         headers={**auth, **headers}).status_code == 200, headers


def test_a_remote_bind_does_not_check_names(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, host="0.0.0.0", allow_remote=True)
    port = server.url.rsplit(":", 1)[1]
    response = httpx.get(f"http://127.0.0.1:{port}/v1/snapshot",
                         headers={"Authorization": f"Bearer {TOKEN}",
                                  "Host": f"memory.example:{port}"})
    assert response.status_code == 200


def test_generated_token_and_bind_rules(engine: MemoryEngine) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    with pytest.raises(ConfigInvalid, match="allow_remote"):
        IntrospectionServer(engine, host="0.0.0.0")
    with pytest.raises(ConfigInvalid, match="16 characters"):
        IntrospectionServer(engine, token="short")
    remote = IntrospectionServer(engine, host="0.0.0.0", allow_remote=True)
    try:
        assert len(remote.token) >= 40 and remote.url.startswith("http://0.0.0.0:")
    finally:
        remote.stop()


def test_redaction_leaves_no_secret_in_any_response(
        engine: MemoryEngine, clock: DeterministicClock,
        make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, redaction=True)
    secret_text = f"deploy key {SECRET_KEY}, mail {EMAIL}"
    record = engine.add(NewMemory(secret_text, agent_id="scout", tags=("ops",),
                                  metadata={"note": f"password={SECRET_KEY}", EMAIL: 1,
                                            "social": {"otherAgentId": EMAIL, "sentiment": 0.1},
                                            "spatial": {"x": 0, "y": 0, "z": 0}}))
    engine.events.emit("custom", payload={"detail": f"leaked {SECRET_KEY}", "query": EMAIL})
    headers = {"Authorization": f"Bearer {TOKEN}"}
    bodies = []
    with httpx.Client(base_url=server.url, headers=headers, timeout=10.0) as http:
        for path, params in (("/v1/snapshot", {}), ("/v1/records", {}),
                             (f"/v1/records/{record.id}", {}), ("/v1/diff", {"since": 0}),
                             ("/v1/events", {"after": 0}), ("/v1/layers/social", {}),
                             ("/v1/layers/procedural", {}), ("/v1/layers/spatial", {}),
                             ("/debug/memory", {}), ("/v1/records", {"text": SECRET_KEY}),
                             (f"/v1/records/{SECRET_KEY}", {})):
            response = http.get(path, params=params)
            assert response.status_code in (200, 404), (path, response.text)
            bodies.append(response.text)
        with http.stream("GET", "/v1/events/stream") as stream:
            lines = []
            for line in stream.iter_lines():
                lines.append(line)
                if line.startswith("data:") and '"custom"' in line:
                    break
        bodies.append("\n".join(lines))
    everything = "\n".join(bodies)
    assert record.id in everything  # ids stay usable
    assert "<REDACT:sha256-" in everything
    assert SECRET_KEY not in everything and EMAIL not in everything
    assert SECRET_KEY[8:30] not in everything


def test_debug_memory_is_redacted_even_when_redaction_is_off(
        engine: MemoryEngine, http: httpx.Client) -> None:
    engine.add(NewMemory(f"token {SECRET_KEY}"))
    engine.events.emit("custom", payload={"detail": SECRET_KEY})
    assert SECRET_KEY in http.get("/v1/records").text  # redaction off: raw content
    assert SECRET_KEY not in http.get("/debug/memory").text


def test_large_and_malformed_requests_are_refused(server: IntrospectionServer,
                                                  http: httpx.Client) -> None:
    cases = [
        (http.get("/v1/records", params={"text": "x" * 3000}), 414, "URI_TOO_LONG"),
        (http.get("/v1/records", params={"limit": "many"}), 400, "BAD_PARAMETER"),
        (http.get("/v1/records", params={"limit": 100000}), 400, "BAD_PARAMETER"),
        (http.get("/v1/records", params={"sort": "evil"}), 400, "BAD_PARAMETER"),
        (http.get("/v1/records", params={"colour": "red"}), 400, "BAD_QUERY"),
        (http.get("/v1/records?limit=1&limit=2"), 400, "BAD_QUERY"),
        (http.get("/v1/records?a=1&&=&"), 400, "BAD_QUERY"),
        (http.get("/v1/records", params={"created_from": "yesterday"}), 400, "BAD_PARAMETER"),
        (http.get("/v1/layers/spatial", params={"x": 1, "radius": 2}), 400, "BAD_QUERY"),
        (http.get("/v1/layers/spatial", params={"x": 1, "y": 1, "z": "nan", "k": 2}), 400,
         "BAD_PARAMETER"),
        (http.get("/v1/events", params={"wait": 99}), 400, "BAD_PARAMETER"),
        (http.get("/v1/nothing"), 404, "NOT_FOUND"),
        (http.post("/v1/records", json={"content": "x"}), 405, "METHOD_NOT_ALLOWED"),
        (http.delete("/v1/records/abc"), 405, "METHOD_NOT_ALLOWED"),
        (http.put("/v1/snapshot", content=b"x"), 405, "METHOD_NOT_ALLOWED"),
        (http.request("GET", "/v1/snapshot", content=b"{}" * 100), 413, "BODY_NOT_ALLOWED"),
        (http.get("/v1/snapshot", headers={"X-Pad": "p" * 9000}), 431, "HEADERS_TOO_LARGE"),
    ]
    for response, status, code in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert response.json()["error"]["code"] == code
    assert http.post("/v1/snapshot").headers["Allow"] == "GET"
    # A raw request line far beyond any limit is cut off by the server, not served.
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as raw:
        raw.sendall(b"GET /" + b"a" * 70000 + b" HTTP/1.0\r\n\r\n")
        assert raw.recv(64).startswith(b"HTTP/1.0 414")
    assert server.errors == []


def test_rate_limit_answers_429_with_retry_after(
        engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, limits=ServerLimits(rate_per_s=0.5, burst=3))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    statuses = [httpx.get(f"{server.url}/v1/snapshot", headers=headers) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert int(statuses[-1].headers["Retry-After"]) >= 1


def test_long_poll_waits_for_the_next_event(engine: MemoryEngine,
                                            http: httpx.Client) -> None:
    after = engine.events.last_seq()
    timer = threading.Timer(0.3, lambda: engine.add(NewMemory("late arrival")))
    timer.start()
    try:
        page = http.get("/v1/events", params={"after": after, "wait": 10}).json()
    finally:
        timer.join()
    assert [e["kind"] for e in page["events"]] == ["memory:record:created"]
    assert page["events"][0]["seq"] == after + 1
    empty = http.get("/v1/events", params={"after": page["cursor"], "wait": 0.2,
                                           "kind": "nothing"}).json()
    assert empty["events"] == [] and empty["cursor"] == engine.events.last_seq()


def test_stream_cap(engine: MemoryEngine,
                    make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, limits=ServerLimits(max_streams=1, keepalive_s=0.2))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{server.url}/v1/events/stream", headers=headers) as first:
        assert first.status_code == 200
        next(first.iter_lines())
        second = httpx.get(f"{server.url}/v1/events/stream", headers=headers)
        assert second.status_code == 503 and second.json()["error"]["code"] == "TOO_MANY_STREAMS"


def test_read_only_server_follows_the_agent(engine: MemoryEngine, clock: DeterministicClock,
                                            store_dir: Path,
                                            make_server: Callable[..., IntrospectionServer]
                                            ) -> None:
    engine.add(NewMemory("before the reader", layer=Layer.SPATIAL,
                         metadata={"spatial": {"x": 0, "y": 0, "z": 0}}))
    reader = MemoryEngine.open(StoreSpec(str(store_dir), read_only=True), clock=clock)
    try:
        server = make_server(reader, refresh_interval_s=0.0)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=10.0) as http:
            snap = http.get("/v1/snapshot").json()
            assert snap["server"]["mode"] == "read-only" and snap["store"]["records"] == 1
            assert len(http.get("/v1/layers/spatial").json()["points"]) == 1
            clock.advance(1000)
            added = engine.add(NewMemory("after the reader", layer=Layer.SPATIAL,
                                         metadata={"spatial": {"x": 1, "y": 0, "z": 0}}))
            page = http.get("/v1/records").json()
            assert page["total"] == 2 and page["records"][0]["id"] == added.id
            points = http.get("/v1/layers/spatial", params={"x": 1, "y": 0, "z": 0, "k": 1})
            assert points.json()["points"][0]["record_id"] == added.id
            events = http.get("/v1/events", params={"after": 0}).json()["events"]
            assert events[-1]["record_id"] == added.id
    finally:
        reader.close_layers()
        reader.close()


def test_sse_format(engine: MemoryEngine, server: IntrospectionServer) -> None:
    engine.add(NewMemory("one"))
    headers = {"Authorization": f"Bearer {TOKEN}", "Last-Event-ID": "0"}
    with httpx.stream("GET", f"{server.url}/v1/events/stream", headers=headers) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        lines = []
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "retry: 1000" in lines
    assert "id: 1" in lines and "event: memory:record:created" in lines
    assert json.loads(lines[-1][len("data: "):])["seq"] == 1


def test_snapshot_of_an_empty_store(http: httpx.Client) -> None:
    snap = http.get("/v1/snapshot").json()
    assert snap["store"]["records"] == 0 and snap["agents"] == [] and snap["version"] == 0


def test_diff_pages_through_many_changes(engine: MemoryEngine, clock: DeterministicClock,
                                         http: httpx.Client) -> None:
    ids = []
    for i in range(5):
        clock.advance(1000)
        ids.append(engine.add(NewMemory(f"change {i}")).id)
    first = http.get("/v1/diff", params={"since": 0, "limit": 2}).json()
    assert not first["complete"] and [r["id"] for r in first["upserted"]] == ids[:2]
    rest = http.get("/v1/diff", params={"since": first["cursor"], "limit": 10}).json()
    assert rest["complete"] and [r["id"] for r in rest["upserted"]] == ids[2:]
    assert rest["cursor"] == engine.events.last_seq()
    by_time = http.get("/v1/diff", params={"since_time": clock.now() - 500}).json()
    assert [r["id"] for r in by_time["upserted"]] == ids[-1:]


def test_connection_cap_answers_503(engine: MemoryEngine,
                                    make_server: Callable[..., IntrospectionServer]) -> None:
    server = make_server(engine, limits=ServerLimits(max_connections=1, keepalive_s=0.2))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{server.url}/v1/events/stream", headers=headers) as held:
        next(held.iter_lines())
        refused = httpx.get(f"{server.url}/v1/snapshot", headers=headers)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    # The slot is free again once the stream is gone.
    for _ in range(50):
        answer = httpx.get(f"{server.url}/v1/snapshot", headers=headers)
        if answer.status_code == 200:
            break
        threading.Event().wait(0.1)
    assert answer.status_code == 200


def test_metrics_endpoint_carries_the_seed_llm_metrics(engine: MemoryEngine,
                                                       clock: DeterministicClock,
                                                       http: httpx.Client) -> None:
    _populate(engine, clock)
    with LLMTestServer() as llm:
        settings = LLMSettings(provider="openai", kind=ProviderKind.OPENAI,
                               base_url=llm.base_url + "/v1", model="test-model",
                               api_key_env=None, use_keyring=False)
        gateway = LLMGateway(settings, ledger=engine.ledger, clock=clock,
                             api_key=lambda: "sk-test")
        try:
            gateway.complete(ChatRequest((ChatMessage("user", "hi"),)), purpose="extract")
        finally:
            gateway.close()
    metrics = http.get("/v1/metrics").json()
    assert metrics["aggregate"]["memory_records_total"] == 8
    llm_block = metrics["llm"]
    assert llm_block["memory_llm_circuit_state"] == 0
    [row] = llm_block["memory_llm_latency_ms_summary"]["by_operation"]
    assert (row["provider"], row["operation"], row["count"]) == ("openai", "extract", 1)
