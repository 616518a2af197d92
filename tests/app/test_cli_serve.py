"""``mnemoscope serve`` through the real CLI: an agent process writes, ``serve`` follows."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import run_cli
from engine.introspection.client import ApiUnauthorized, IntrospectionClient
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.serve_process import cli_env, read_json_document, reap

TOKEN = "cli-test-token-0123456789"


def test_serve_follows_an_agent_in_another_process(tmp_path: Path) -> None:
    store = tmp_path / "store"
    agent = MemoryEngine.open(StoreSpec(str(store)))  # the agent holds the store's lock
    agent.add(NewMemory("the agent's first memory"))
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(store), "--no-model", "--json", "serve",
         "--port", "0", "--refresh", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path, TOKEN))
    try:
        assert process.stdout is not None
        started = read_json_document(process.stdout, time.monotonic() + 120)
        assert started["mode"] == "read-only" and started["token_from_env"] is True
        assert started["token"] is None  # a token from the environment is never echoed
        url = str(started["url"])
        assert url.startswith("http://127.0.0.1:")
        with IntrospectionClient(url, TOKEN) as client:
            assert client.snapshot()["store"]["records"] == 1
            agent.add(NewMemory("written while serve runs"))
            page = client.records()
            assert page["total"] == 2
            assert {r["content"] for r in page["records"]} >= {"written while serve runs"}
            kinds = [e["kind"] for e in client.events(after=0)["events"]]
            assert kinds.count("memory:record:created") == 2
        with IntrospectionClient(url, "not-the-token-0123456789") as stranger, \
                pytest.raises(ApiUnauthorized):
            stranger.snapshot()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
        agent.close()


@pytest.mark.slow
@pytest.mark.parametrize("command", [("serve",), ("mcp", "--http")])
def test_a_deliberate_public_bind_warns_that_nothing_is_encrypted(
        tmp_path: Path, command: tuple[str, ...]) -> None:
    # The careless operator: `--host 0.0.0.0 --allow-remote` printed the URL and the token and
    # nothing else, redaction off, while the token and every memory crossed the network in
    # clear.
    env = {**cli_env(tmp_path, TOKEN), "MNEMOSCOPE_MCP_TOKEN": TOKEN}
    MemoryEngine.open(StoreSpec(str(tmp_path / "store"))).close()  # serve reads a store
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(tmp_path / "store"), "--no-model",
         "--json", *command, "--host", "0.0.0.0", "--allow-remote", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None and process.stderr is not None
        started = read_json_document(process.stdout, time.monotonic() + 120)
        assert str(started["url"]).startswith("http://0.0.0.0:")
        warning = process.stderr.readline()  # written before the start-up document
        assert warning.startswith("warning: serving on 0.0.0.0 without TLS: the bearer token "
                                  "and every memory in clear cross the network"), warning
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        reap(process)


def test_serve_refuses_a_public_bind_without_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    code = run_cli(["--store", str(tmp_path / "store"), "--no-model", "serve", "--host",
                    "0.0.0.0", "--port", "0"], env)
    assert code == 1
    assert "--allow-remote" in capsys.readouterr().err


def test_serve_refuses_a_per_client_cap_below_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    code = run_cli(["--store", str(tmp_path / "store"), "--no-model", "serve", "--port", "0",
                    "--max-per-client", "0"], env)
    assert code == 1
    assert "--max-per-client: must be at least 1 (got 0)" in capsys.readouterr().err


def test_writable_serve_runs_the_lifecycle_on_its_schedule(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed = MemoryEngine.open(StoreSpec(str(store)))
    seed.add(NewMemory("a note whose time is up", expires_at=time.time() * 1000 + 1_000))
    seed.add(NewMemory("a fact that stays"))
    seed.close()
    env = {**cli_env(tmp_path, TOKEN), "MEMORY_LIFECYCLE_INTERVAL_MS": "1500"}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(store), "--no-model", "--json", "serve",
         "--port", "0", "--writable"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        started = read_json_document(process.stdout, time.monotonic() + 120)
        assert started["lifecycle"] == {"running": True, "interval_ms": 1500.0}
        with IntrospectionClient(str(started["url"]), TOKEN) as client:
            deadline = time.monotonic() + 120  # a guard against a hang, not a measured bound
            runs: list[dict[str, object]] = []
            while not runs and time.monotonic() < deadline:
                runs = [e for e in client.events(after=0)["events"]
                        if e["kind"] == "memory:lifecycle:run"]
                time.sleep(0.2)  # a child process's schedule: nothing to wait on but its API
            assert runs, "serve --writable ran no lifecycle"
            payload = runs[0]["payload"]
            assert isinstance(payload, dict) and payload["expired"] == 1
            assert client.snapshot()["store"]["records"] == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        reap(process)
