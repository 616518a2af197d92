"""Issue 22: ``mnemoscope mcp``, the MCP memory server, through the official SDK's own client.

In-process tests drive the real ``MCPServer`` with the SDK's ``Client`` (schemas, review queue,
filters, bad arguments, redaction) on an engine with the fake embedder (the ``Embedder``
Protocol; cosine of hashed bags of words). The slow ones spawn ``python -m app mcp`` and talk to
it over stdio and over streamable HTTP on 127.0.0.1 with and without the bearer token; a child
process cannot be handed a fake, so they run ``--no-model``, the engine's token-Jaccard path
(PARAPHRASE: Jaccard 0.67, merged at the agent tier's 0.65). One test loads the real model to
check the server waits for it before its first write.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult

from app.mcp_server import BearerAuth, MemoryTools, build_server
from engine.exits import ExitPolicy
from engine.memory_engine import MemoryEngine
from engine.records import MAX_CONTENT_CHARS
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.support.secrets_corpus import SECRETS, leaks
from tests.support.serve_process import ROOT, cli_env, read_json_document, reap

TOOLS = {"add_memory", "search_memories", "get_memory", "list_memories", "update_memory",
         "delete_memory", "pause_memory", "archive_memory", "resume_memory", "list_review",
         "approve_review", "reject_review"}
FIRST = "Mia walks the dog every morning at seven before school"
PARAPHRASE = "Mia walks the dog each morning around seven before school"  # Jaccard 0.67: merged
CLOSE = "Mia walks her dog every morning at seven"  # cosine 0.82 (fake): deferred to review
SECRET = "AKIAQ3EGRZ5TPLM2WXYB"  # an AWS access key id (tests/support/secrets_corpus.py)
TOKEN = "mcp-test-token-0123456789abcdef"


def _result(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    document: dict[str, Any] | None = result.structured_content
    assert document is not None
    return document


def _error(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(part, "text", "") for part in result.content)


@pytest.fixture
def engine(tmp_path: Path, fake_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=fake_embedder)
    try:
        yield engine
    finally:
        engine.close()


def _in_process(engine: MemoryEngine, scenario: Callable[[Client], Awaitable[None]], *,
                redaction: bool = False) -> None:
    policy = ExitPolicy.for_config(engine.config, redaction=redaction)
    server = build_server(MemoryTools(engine, policy))

    async def run() -> None:
        async with Client(server) as client:
            await scenario(client)

    asyncio.run(run())


# -- in process -------------------------------------------------------------------------------

def test_tools_publish_schemas_a_model_can_follow(engine: MemoryEngine) -> None:
    async def scenario(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description and len(tool.description) > 40, tool.name
        add = listed["add_memory"].input_schema
        assert add["required"] == ["content"]
        importance = add["properties"]["importance"]["anyOf"][0]
        assert (importance["minimum"], importance["maximum"]) == (0.0, 1.0)
        assert add["$defs"]["Layer"]["enum"] == ["episodic", "semantic", "procedural", "social",
                                                 "spatial", "system"]
        assert "description" in add["properties"]["content"]
        listing = listed["list_memories"].input_schema["properties"]
        assert listing["limit"]["maximum"] == 200 and listing["offset"]["minimum"] == 0
        reading, deleting = (listed["search_memories"].annotations,
                             listed["delete_memory"].annotations)
        assert reading is not None and reading.read_only_hint
        assert deleting is not None and deleting.destructive_hint

    _in_process(engine, scenario)


def test_a_bad_argument_names_the_field_and_writes_nothing(engine: MemoryEngine) -> None:
    async def scenario(client: Client) -> None:
        stored = _result(await client.call_tool("add_memory", {"content": FIRST}))["record"]
        bad_calls: list[tuple[str, dict[str, Any], str]] = [
            ("add_memory", {"content": "The kettle is descaled monthly", "importance": 3},
             "importance"),
            ("add_memory", {"content": "The kettle is descaled monthly", "layer": "dreams"},
             "layer"),
            ("add_memory", {"content": ""}, "content"),
            ("add_memory", {"content": "The kettle is descaled monthly",
                            "metadata": {"note": "\ud800"}}, "metadata"),
            ("update_memory", {"record_id": stored["id"], "confidence": -1}, "confidence"),
            ("update_memory", {"record_id": stored["id"]}, "changes"),
            ("list_memories", {"limit": 0}, "limit"),
            ("search_memories", {"query": "dog", "max_tokens": 0}, "max_tokens"),
            ("delete_memory", {"record_ids": []}, "record_ids"),
        ]
        for tool, arguments, field in bad_calls:
            message = _error(await client.call_tool(tool, arguments))
            assert field in message, (tool, message)
        missing = _error(await client.call_tool("delete_memory", {"record_ids": [
            stored["id"], "00000000-0000-4000-8000-000000000000"]}))
        assert "MEMORY_RECORD_NOT_FOUND" in missing and "00000000-0000-4000" in missing
        # Nothing was written by any refused call: one record, unchanged, no second version.
        page = _result(await client.call_tool("list_memories", {"state": ["active", "paused",
                                                                          "archived"]}))
        assert page["total"] == 1
        assert page["records"][0]["version"] == 1 and page["records"][0]["content"] == FIRST

    _in_process(engine, scenario)
    assert engine.count() == 1


def test_review_queue_and_filters(engine: MemoryEngine) -> None:
    async def scenario(client: Client) -> None:
        first = _result(await client.call_tool("add_memory", {"content": FIRST,
                                                              "agent_id": "home"}))
        deferred = _result(await client.call_tool("add_memory", {"content": CLOSE,
                                                                 "agent_id": "home"}))
        assert deferred["decision"] == "deferred" and deferred["review_id"]
        assert deferred["matched"] == {"id": first["record"]["id"], "content": FIRST}
        queue = _result(await client.call_tool("list_review", {}))
        assert queue["pending"] == 1
        item = queue["items"][0]
        assert (item["incoming"], item["target"]) == (CLOSE, FIRST)
        kept = _result(await client.call_tool("reject_review",
                                              {"review_id": item["review_id"]}))
        assert kept["decision"] == "inserted" and kept["record"]["content"] == CLOSE
        assert _result(await client.call_tool("list_review", {}))["pending"] == 0

        await client.call_tool("add_memory", {"content": "Prefers tea over coffee",
                                              "agent_id": "home", "category": "preference",
                                              "layer": "social"})
        await client.call_tool("add_memory", {"content": "Deploys go out on Tuesdays",
                                              "agent_id": "work"})

        async def listed(**filters: Any) -> list[str]:
            page = _result(await client.call_tool("list_memories", filters))
            return sorted(record["content"] for record in page["records"])

        assert await listed(agent_id="work") == ["Deploys go out on Tuesdays"]
        assert await listed(category="preference") == ["Prefers tea over coffee"]
        assert await listed(layer="social") == ["Prefers tea over coffee"]
        assert await listed(text="MORNING") == sorted([FIRST, CLOSE])
        paged = _result(await client.call_tool("list_memories", {"limit": 2, "offset": 2}))
        assert paged["total"] == 4 and len(paged["records"]) == 2

        _result(await client.call_tool("archive_memory", {"record_ids": [kept["record"]["id"]]}))
        _result(await client.call_tool("pause_memory", {"record_ids": [first["record"]["id"]]}))
        assert await listed(text="morning") == [FIRST]  # archived hidden by default
        assert await listed(state=["archived"]) == [CLOSE]
        found = _result(await client.call_tool("search_memories", {"query": "dog morning"}))
        assert not {FIRST, CLOSE} & {record["content"] for record in found["records"]}
        _result(await client.call_tool("resume_memory", {"record_ids": [first["record"]["id"]]}))
        found = _result(await client.call_tool("search_memories", {"query": "dog morning",
                                                                   "agent_id": "home"}))
        assert found["records"][0]["content"] == FIRST
        assert found["records"][0]["why"].startswith("score ")
        assert "semantic +" in found["records"][0]["why"] and "(cosine " in \
            found["records"][0]["why"]

    _in_process(engine, scenario)


def test_redaction_masks_search_get_and_list_output(engine: MemoryEngine) -> None:
    text = f"The deploy key for staging is {SECRET}"

    async def scenario(client: Client) -> None:
        added = await client.call_tool("add_memory", {"content": text, "agent_id": "ops"})
        record_id = _result(added)["record"]["id"]
        outputs = [added,
                   await client.call_tool("search_memories", {"query": "deploy key staging"}),
                   await client.call_tool("get_memory", {"record_id": record_id}),
                   await client.call_tool("list_memories", {}),
                   # a filter cannot confirm the raw text the response masks
                   await client.call_tool("list_memories", {"text": SECRET[:10]}),
                   # error messages quote the input: masked as well
                   await client.call_tool("get_memory", {"record_id": SECRET})]
        for result in outputs:
            wire = json.dumps(result.model_dump(mode="json"))
            assert SECRET[4:] not in wire
        assert "<REDACT:" in json.dumps(_result(outputs[2]))
        assert _result(outputs[1])["records"][0]["id"] == record_id  # ids stay usable
        assert _result(outputs[4])["total"] == 0
        assert "MEMORY_RECORD_NOT_FOUND" in _error(outputs[5])

    _in_process(engine, scenario, redaction=True)
    assert engine.get_many([r.id for r in engine.list_records().records])[0].content == text


# Arguments the published schema refuses, each quoting a planted value, and the field it names.
_REFUSED: tuple[Callable[[str], tuple[str, dict[str, Any], str]], ...] = (
    lambda secret: ("add_memory", {"content": "The kettle", "tags": [f"{secret},x"]}, "tags.0"),
    lambda secret: ("add_memory", {"content": "The kettle", "importance": secret}, "importance"),
    lambda secret: ("add_memory", {"content": "The kettle", "layer": secret}, "layer"),
    lambda secret: ("add_memory", {"content": "The kettle", "metadata": secret}, "metadata"),
    lambda secret: ("add_memory", {"content": "The kettle", "agent_id": secret * 40},
                    "agent_id"),
    # too long: pydantic quoted the start and the end, cut in the middle of the text
    lambda secret: ("add_memory", {"content": secret + " " * MAX_CONTENT_CHARS + secret},
                    "content"),
    lambda secret: ("list_memories", {"state": [secret]}, "state.0"),
    lambda secret: ("search_memories", {"query": "kettle", "purpose": secret}, "purpose"),
    lambda secret: ("update_memory", {"record_id": "r", "category": secret}, "category"),
)


def test_a_refused_argument_is_never_echoed_with_redaction_on(engine: MemoryEngine) -> None:
    # The SDK wrote pydantic's message, quoting the value given (``input_value='sk-…'``), and
    # an unknown tool's name, past the exit policy: 72 of these 75 came back before the fix.
    async def scenario(client: Client) -> None:
        leaked, unnamed = [], []
        for number, secret in enumerate(SECRETS):
            tool, arguments, field = _REFUSED[number % len(_REFUSED)](secret.text)
            message = _error(await client.call_tool(tool, arguments))
            if leaks(message, [secret]):
                leaked.append((tool, field, secret.kind, message))
            if f"invalid arguments: {field}: " not in message:
                unnamed.append((tool, field, message))
        for secret in SECRETS[:5]:
            unknown = _error(await client.call_tool(secret.text, {}))
            assert unknown.startswith("Unknown tool: ")
            if leaks(unknown, [secret]):
                leaked.append(("unknown tool", "name", secret.kind, unknown))
        assert not leaked, f"{len(leaked)} of {len(SECRETS) + 5} echoed: {leaked[:3]}"
        assert not unnamed, unnamed[:3]

    _in_process(engine, scenario, redaction=True)
    assert engine.count() == 0


def test_a_bug_in_a_tool_writes_a_crash_report_and_says_where(
        engine: MemoryEngine, tmp_path: Path) -> None:
    def broken() -> None:
        raise RuntimeError("a bug in the tool body")

    server = build_server(MemoryTools(engine, ExitPolicy(None), before_embedding=broken),
                          crash_dir=tmp_path / "crash")

    async def run() -> str:
        async with Client(server) as client:
            return _error(await client.call_tool("add_memory", {"content": FIRST}))

    message = asyncio.run(run())
    (report,) = (tmp_path / "crash").iterdir()
    assert "INTERNAL_ERROR: unexpected RuntimeError" in message and str(report) in message
    assert "a bug in the tool body" in report.read_text(encoding="utf-8")
    assert engine.count() == 0


# -- over stdio, spawned as a client would ----------------------------------------------------

async def _session(client: Client) -> None:
    """The issue's session: add, paraphrase (said merged), search finds it, update, delete."""
    assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
    first = _result(await client.call_tool("add_memory", {"content": FIRST,
                                                          "agent_id": "home"}))
    assert first["decision"] == "inserted"
    record_id = first["record"]["id"]
    merged = _result(await client.call_tool("add_memory", {"content": PARAPHRASE,
                                                           "agent_id": "home"}))
    assert merged["decision"] == "merged", merged
    assert merged["matched"]["id"] == record_id and "morning" in merged["matched"]["content"]
    assert "merged" in merged["summary"]
    found = _result(await client.call_tool("search_memories", {"query": "who walks the dog"}))
    assert [r["id"] for r in found["records"]] == [record_id]
    assert found["records"][0]["why"].startswith("score ")
    updated = _result(await client.call_tool("update_memory", {
        "record_id": record_id, "content": "Mia walks the dog at eight since the summer",
        "importance": 0.9}))
    assert updated["updated"]["version"] == 3 and updated["updated"]["importance"] == 0.9
    got = _result(await client.call_tool("get_memory", {"record_id": record_id}))
    assert got["content"] == "Mia walks the dog at eight since the summer"
    assert _result(await client.call_tool("delete_memory",
                                          {"record_ids": [record_id]}))["deleted"] == [record_id]
    assert _result(await client.call_tool("list_memories", {}))["total"] == 0
    gone = _error(await client.call_tool("get_memory", {"record_id": record_id}))
    assert record_id in gone


@pytest.mark.slow
def test_stdio_session_with_the_sdk_client(tmp_path: Path) -> None:
    store = tmp_path / "store"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "--store", str(store), "--no-model", "mcp"],
        env=cli_env(tmp_path), cwd=str(ROOT))

    async def run() -> None:
        async with Client(params) as client:
            await _session(client)

    asyncio.run(run())
    # The server let go of the store when the client closed: another writer can open it.
    engine = MemoryEngine.open(StoreSpec(str(store)))
    try:
        assert engine.count() == 0
        ops = {(entry.op, entry.actor) for entry in engine.edit_history(limit=10)}
        assert {("update", "mcp"), ("delete", "mcp")} <= ops  # the edits say who made them
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.model
def test_with_the_model_the_first_add_waits_for_it_and_stores_a_real_vector(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "app", "--store", str(store), "mcp"],
                                   env=cli_env(tmp_path), cwd=str(ROOT))

    async def run() -> dict[str, Any]:
        async with Client(params) as client:
            # asked at once: the handshake does not wait for the model to load
            await client.list_tools()
            return _result(await client.call_tool("add_memory", {"content": FIRST}))

    added = asyncio.run(run())
    engine = MemoryEngine.open(StoreSpec(str(store)))
    try:
        record = engine.get(added["record"]["id"])
        assert record.embedding_model == "all-MiniLM-L6-v2"  # not "" (pending)
        assert engine.stats().pending_embeddings == 0
    finally:
        engine.close()


@pytest.mark.slow
def test_stdio_with_redact_masks_what_the_tools_return(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "--store", str(tmp_path / "store"), "--no-model", "--redact", "mcp"],
        env=cli_env(tmp_path), cwd=str(ROOT))

    async def run() -> list[CallToolResult]:
        async with Client(params) as client:
            added = await client.call_tool("add_memory", {
                "content": f"The deploy key for staging is {SECRET}", "tags": ["ops"]})
            record_id = _result(added)["record"]["id"]
            return [added, await client.call_tool("search_memories", {"query": "deploy key"}),
                    await client.call_tool("get_memory", {"record_id": record_id})]

    results = asyncio.run(run())
    for result in results:
        assert SECRET[4:] not in json.dumps(result.model_dump(mode="json"))
    assert _result(results[1])["records"][0]["content"].startswith(
        "The deploy key for staging is <REDACT:")


@pytest.mark.slow
def test_stdio_server_refuses_a_store_another_writer_holds(tmp_path: Path) -> None:
    store = tmp_path / "store"
    holder = MemoryEngine.open(StoreSpec(str(store)))
    try:
        process = subprocess.run(
            [sys.executable, "-m", "app", "--store", str(store), "--no-model", "mcp"],
            input="", capture_output=True, text=True, env=cli_env(tmp_path), cwd=str(ROOT),
            timeout=120)
    finally:
        holder.close()
    assert process.returncode == 1
    assert "in use by PID" in process.stderr and process.stdout == ""


# -- over streamable HTTP on loopback ---------------------------------------------------------

@contextmanager
def _http_server(tmp_path: Path, *extra: str) -> Iterator[tuple[dict[str, Any],
                                                                 subprocess.Popen[str]]]:
    env = cli_env(tmp_path)
    env["MNEMOSCOPE_MCP_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(tmp_path / "store"), "--no-model", "--json",
         "mcp", "--http", "--port", "0", *extra], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    try:
        assert process.stdout is not None
        yield read_json_document(process.stdout, time.monotonic() + 120), process
        process.terminate()  # uvicorn shuts down on SIGTERM
        process.wait(timeout=30)
        assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    finally:
        reap(process)


def _initialize() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}


@pytest.mark.slow
def test_http_session_needs_the_token(tmp_path: Path) -> None:
    with _http_server(tmp_path) as (started, _process):
        url = str(started["url"])
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert started["token"] is None and started["token_from_env"] is True
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"},
                     {"Authorization": TOKEN}):
            refused = httpx.post(url, json=_initialize(), headers={**headers, **auth},
                                 timeout=30)
            assert refused.status_code == 401, auth
            assert refused.headers["www-authenticate"].startswith("Bearer")
        accepted = httpx.post(url, json=_initialize(), timeout=30,
                              headers={**headers, "Authorization": f"Bearer {TOKEN}"})
        assert accepted.status_code == 200

        async def run() -> None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                await _session(client)

        asyncio.run(run())


@pytest.mark.slow
def test_http_on_another_spelling_of_loopback_refuses_a_foreign_host_or_origin(
        tmp_path: Path) -> None:
    # DNS rebinding: a page at evil.example re-points its name at 127.0.0.1 and posts from the
    # user's browser. The SDK's Host/Origin check was on only for the exact host strings
    # "127.0.0.1", "localhost" and "::1"; --host LOCALHOST (loopback, so allowed) served both.
    with _http_server(tmp_path, "--host", "LOCALHOST") as (started, _process):
        url = str(started["url"])
        port = url.rsplit(":", 1)[1].removesuffix("/mcp")
        headers = {"Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {TOKEN}"}
        foreign_host = httpx.post(url, json=_initialize(), timeout=30,
                                  headers={**headers, "Host": f"evil.example:{port}"})
        assert foreign_host.status_code == 421
        foreign_origin = httpx.post(url, json=_initialize(), timeout=30,
                                    headers={**headers, "Origin": "http://evil.example"})
        assert foreign_origin.status_code == 403
        own = httpx.post(url, json=_initialize(), timeout=30,
                         headers={**headers, "Origin": f"http://localhost:{port}"})
        assert own.status_code == 200


@pytest.mark.slow
def test_a_stop_sent_as_soon_as_the_address_is_printed_stops_the_server(tmp_path: Path) -> None:
    # The start-up lines came before uvicorn had put in its signal handlers, and the handler
    # installed for its re-raise did nothing: a SIGTERM in that window was swallowed and the
    # server ran on (the store stayed locked) until killed.
    with _http_server(tmp_path) as (started, process):
        assert str(started["url"]).endswith("/mcp")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


@pytest.mark.slow
@pytest.mark.parametrize(("options", "named"), [
    (("--http", "--host", "0.0.0.0"), "--host"),
    (("--http", "--token", "short"), "--token"),
    (("--http", "--port", "70000"), "--port"),
    (("--api-port", "-1"), "--api-port"),
])
def test_bad_options_are_refused_before_the_store_is_opened(
        tmp_path: Path, options: tuple[str, ...], named: str) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "app", "--store", str(tmp_path / "store"), "--no-model", "mcp",
         *options], capture_output=True, text=True, env=cli_env(tmp_path), cwd=str(ROOT),
        timeout=120)
    assert process.returncode == 1
    assert f"error: {named}" in process.stderr, process.stderr
    assert "short" not in process.stderr  # a token is never echoed
    assert not (tmp_path / "store").exists()


def test_bearer_auth_compares_the_whole_token() -> None:
    auth = BearerAuth(lambda scope, receive, send: asyncio.sleep(0), TOKEN)
    assert auth.authorized(f"Bearer {TOKEN}".encode())
    assert auth.authorized(f"bearer {TOKEN}".encode())
    for header in (b"", TOKEN.encode(), f"Bearer {TOKEN[:-1]}".encode(),
                   f"Bearer {TOKEN}x".encode(), f"Basic {TOKEN}".encode()):
        assert not auth.authorized(header), header
