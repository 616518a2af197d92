"""Test connection (issue 9 provider dialog): one small real request through the real provider
client against the HTTP test server on 127.0.0.1; every outcome in plain words; the key never
in the result, the ledger or the events."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from engine.errors import ConfigInvalid
from engine.events import Event, EventBus
from engine.ledger import Ledger
from engine.llm import (
    EVENT_CONNECTION_TEST,
    ConnectionCheck,
    DeterministicClock,
    KeyringStore,
    KeyringUnavailable,
    LLMSettings,
    ModelPrice,
    check_connection,
    key_lookup,
    llm_settings_from_json,
    llm_settings_to_json,
)
from engine.llm.persistence import LLMLedger
from engine.llm.settings import PROVIDER_PRESETS, ProviderKind
from tests.engine.llm.conftest import SECRET_KEY, START_MS
from tests.support.fakes import DictSecrets
from tests.support.llm_server import Behaviour, LLMTestServer

WRONG_KEY = "sk-wrong-KEY-9876543210fedcba"


def _settings(server: LLMTestServer, kind: str = "openai", **changes: Any) -> LLMSettings:
    options: dict[str, Any] = {
        "provider": kind, "kind": ProviderKind(kind),
        "base_url": server.base_url + ("/v1" if kind == "openai" else ""),
        "model": "test-model", "api_key_env": None, "use_keyring": False,
        "connect_timeout_s": 2.0, "read_timeout_s": 2.0,
        "prices": {"test-model": ModelPrice(1.0, 2.0)}}
    options.update(changes)
    return LLMSettings(**options)


class Recorder:
    """The ledger and event bus a test writes to, and what they hold."""

    def __init__(self) -> None:
        self.clock = DeterministicClock(START_MS)
        self.ledger = Ledger(None)
        self.bus = EventBus(clock=self.clock, ledger=self.ledger)
        self.events: list[Event] = []
        self.bus.subscribe(self.events.append)

    def check(self, settings: LLMSettings, key: str | None = SECRET_KEY,
              **options: Any) -> ConnectionCheck:
        return check_connection(settings, lambda: key, ledger=self.ledger, events=self.bus,
                                clock=self.clock, **options)

    def rows(self) -> list[dict[str, Any]]:
        if self.ledger.version("llm") == 0:
            return []  # nothing was ever recorded: the llm tables do not exist yet
        return [dict(r) for r in self.ledger.query("SELECT * FROM llm_calls ORDER BY id")]

    def everything(self) -> str:
        """Every ledger row (calls and the event log) and event, as one text."""
        texts = [json.dumps(self.rows(), default=str)]
        texts += [json.dumps(dict(r), default=str)
                  for r in self.ledger.query("SELECT * FROM events")]
        texts += [json.dumps(e.to_json(), default=str) for e in self.events]
        return "\n".join(texts)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def _texts(result: ConnectionCheck) -> str:
    return " ".join((result.summary, result.reply, result.detail))


@pytest.mark.parametrize(("kind", "stream"), [("openai", True), ("openai", False),
                                              ("anthropic", True), ("anthropic", False)])
def test_success_reports_reply_latency_tokens_and_is_recorded(
        server: LLMTestServer, recorder: Recorder, kind: str, stream: bool) -> None:
    server.api_key = SECRET_KEY
    server.default = Behaviour(content="pong", input_tokens=9, output_tokens=1)
    result = recorder.check(_settings(server, kind, stream=stream))
    assert result.ok, result.summary
    assert result.failure is None and result.reply == "pong"
    assert (result.input_tokens, result.output_tokens) == (9, 1)
    assert result.cost_usd == pytest.approx((9 * 1.0 + 1 * 2.0) / 1e6)
    assert result.latency_ms > 0
    assert result.summary.startswith("Connected: test-model replied “pong” in ")
    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["max_tokens"] == 16 and body["stream"] is stream
    [row] = recorder.rows()
    assert (row["purpose"], row["outcome"], row["input_tokens"], row["model"]) == (
        "connection-test", "ok", 9, "test-model")
    assert row["cost_exact"] == "0.000011"
    [event] = [e for e in recorder.events if e.kind == EVENT_CONNECTION_TEST]
    assert event.payload["outcome"] == "ok" and "pong" not in json.dumps(event.payload)
    assert SECRET_KEY not in recorder.everything()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_wrong_key_is_401_in_plain_words_and_never_echoed(
        server: LLMTestServer, recorder: Recorder, kind: str) -> None:
    server.api_key = SECRET_KEY  # the server echoes the wrong key in its error body
    result = recorder.check(_settings(server, kind), key=WRONG_KEY)
    assert not result.ok and result.failure == "auth" and result.status == 401
    assert result.summary.startswith("The server refused the API key (HTTP 401): check the key")
    assert WRONG_KEY in server.requests[0].headers.get(
        "Authorization" if kind == "openai" else "x-api-key", "")
    assert WRONG_KEY not in _texts(result)
    assert WRONG_KEY not in recorder.everything()
    [row] = recorder.rows()
    assert (row["outcome"], row["status"], row["failure"]) == ("test_failed", 401, "auth")


def test_missing_key_says_none_was_sent(server: LLMTestServer, recorder: Recorder) -> None:
    server.api_key = SECRET_KEY
    result = recorder.check(_settings(server), key=None)
    assert result.failure == "auth"
    assert "no key was sent" in result.summary
    assert "Authorization" not in server.requests[0].headers


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there now


def test_refused_port(recorder: Recorder, server: LLMTestServer) -> None:
    port = _free_port()
    settings = _settings(server, base_url=f"http://127.0.0.1:{port}/v1")
    result = recorder.check(settings)
    assert result.failure == "refused" and result.status is None
    assert result.summary == (f"Connection refused: nothing is listening at 127.0.0.1:{port}. "
                              f"Is the server running, and is the port right?")
    assert recorder.rows()[0]["outcome"] == "test_failed"
    # a failed test is not a gateway failure: the breaker's restore does not count it
    assert LLMLedger(recorder.ledger).failures_since(0, "openai") == []


@pytest.mark.parametrize("stream", [True, False])
def test_timeout(server: LLMTestServer, recorder: Recorder, stream: bool) -> None:
    server.default = Behaviour("hang", delay_s=5.0)
    result = recorder.check(_settings(server, read_timeout_s=0.4, stream=stream))
    assert result.failure == "timeout"
    assert result.summary == (f"No answer from 127.0.0.1:{server.base_url.rsplit(':', 1)[1]} "
                              f"within 0.4 s (read timeout).")
    assert 300 < result.latency_ms < 3000


@pytest.mark.parametrize("stream", [True, False])
def test_wrong_protocol(server: LLMTestServer, recorder: Recorder, stream: bool) -> None:
    server.default = Behaviour("invalid_body")
    result = recorder.check(_settings(server, stream=stream))
    assert result.failure == "protocol"
    assert "answered, but not in the OpenAI chat completions protocol" in result.summary
    assert "Check the provider kind and the base URL." in result.summary


def test_wrong_kind_for_the_url_is_a_missing_endpoint(server: LLMTestServer,
                                                      recorder: Recorder) -> None:
    # Anthropic's /v1/messages under an OpenAI-style base that already ends in /v1
    result = recorder.check(_settings(server, "anthropic", base_url=server.base_url + "/v1"))
    assert result.failure == "not_found" and result.status == 404
    assert result.summary.startswith(f"HTTP 404: {server.base_url}/v1/v1/messages does not "
                                     f"exist. Check the base URL")


def test_server_error(server: LLMTestServer, recorder: Recorder) -> None:
    server.default = Behaviour("status", status=503)
    result = recorder.check(_settings(server))
    assert result.failure == "server" and result.status == 503
    assert "failed (HTTP 503): scripted 503." in result.summary
    assert len(server.requests) == 1  # one request: a test never retries


def test_incomplete_settings_are_not_sent(server: LLMTestServer, recorder: Recorder) -> None:
    result = recorder.check(_settings(server, model=""))
    assert result.failure == "not_configured"
    assert "llm.model: is required" in result.summary
    assert server.requests == [] and recorder.rows() == []


def test_cancelled_before_sending(server: LLMTestServer, recorder: Recorder) -> None:
    result = recorder.check(_settings(server), cancelled=lambda: True)
    assert result.failure == "cancelled" and server.requests == []


def test_cancelled_while_streaming_stops_reading(server: LLMTestServer,
                                                 recorder: Recorder) -> None:
    server.default = Behaviour("drip", content="one two three four", delay_s=0.3, chunks=4)
    polls: list[int] = []

    def cancelled() -> bool:
        polls.append(1)
        return len(polls) > 2  # cancelled once the first chunk arrived

    result = recorder.check(_settings(server), cancelled=cancelled)
    assert result.failure == "cancelled"
    assert result.latency_ms < 1000  # did not read the whole 1.2 s drip
    assert recorder.rows()[0]["outcome"] == "test_failed"  # the request was sent: recorded


def test_settings_file_form_round_trips_and_names_bad_fields() -> None:
    preset = PROVIDER_PRESETS["ollama"]
    settings = LLMSettings(provider="ollama", kind=preset.kind, base_url=preset.base_url,
                           model="llama3.2", api_key_env=None, use_keyring=False,
                           daily_budget_usd=1.5, tpm_limit=20_000, read_timeout_s=30.0)
    data = llm_settings_to_json(settings)
    assert json.loads(json.dumps(data)) == data
    again = llm_settings_from_json(data)
    assert llm_settings_to_json(again) == data and again.kind is ProviderKind.OPENAI
    with pytest.raises(ConfigInvalid, match=r"settings.json: llm.read_timeout_s"):
        llm_settings_from_json({"read_timeout_s": "fast"}, where="settings.json: llm")
    with pytest.raises(ConfigInvalid, match=r"llm.provider: unknown provider"):
        llm_settings_from_json({"provider": "skynet"})
    with pytest.raises(ConfigInvalid, match=r"llm.tpm_limit: must be an integer >= 1"):
        llm_settings_from_json({"tpm_limit": 0})
    fields = {p.field for p in LLMSettings(
        provider="openai", kind=ProviderKind.OPENAI, base_url="http://", model=" ",
        api_key_env="1BAD", read_timeout_s=90.0, total_timeout_s=60.0).problems()}
    assert fields == {"llm.base_url", "llm.model", "llm.api_key_env", "llm.total_timeout_s"}
    assert LLMSettings().problems() == ()



def test_key_lookup_env_first_then_the_secret_store() -> None:
    secrets = DictSecrets()
    secrets.set("openai", "from-store")
    settings = LLMSettings(provider="openai", kind=ProviderKind.OPENAI,
                           api_key_env="MY_KEY", use_keyring=True)
    assert key_lookup(settings, secrets, {"MY_KEY": "from-env"})() == "from-env"
    assert key_lookup(settings, secrets, {})() == "from-store"
    env_only = LLMSettings(provider="openai", kind=ProviderKind.OPENAI, api_key_env="MY_KEY",
                           use_keyring=False)
    assert key_lookup(env_only, secrets, {})() is None


def test_os_keyring_without_a_backend_says_so_without_the_key() -> None:
    store = KeyringStore()
    if store.available():
        pytest.fail("this machine has an OS keyring backend; the test expects none")
    assert store.get("openai") is None
    with pytest.raises(KeyringUnavailable) as caught:
        store.set("openai", SECRET_KEY)
    assert SECRET_KEY not in str(caught.value)
    assert "environment variable" in str(caught.value)


def test_a_ledger_closed_while_the_request_was_out_is_said_not_raised(
        server: LLMTestServer, recorder: Recorder) -> None:
    server.default = Behaviour(content="pong")
    recorder.ledger.close()  # the store closed while the request was out
    result = recorder.check(_settings(server))
    assert result.ok and result.reply == "pong"  # the provider's answer still counts
    assert result.summary.startswith("Connected: test-model replied “pong” in ")
    assert "(Not recorded: ledger " in result.summary and "closed database" in result.summary
