"""The gateway against a real HTTP server on 127.0.0.1 speaking both protocols."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clock import SystemClock
from engine.ledger import Ledger
from engine.llm import (
    EVENT_BREAKER,
    EVENT_CALL,
    EVENT_RETRY,
    EVENT_THROTTLE,
    BudgetExceeded,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    CircuitConfig,
    CircuitOpen,
    DeterministicClock,
    DeterministicRNG,
    LLMGateway,
    LLMSettings,
    ModelPrice,
    ProviderError,
    ProviderNotConfigured,
    RateLimited,
    StreamEvent,
    Usage,
)
from engine.llm.settings import ProviderKind
from tests.engine.llm.conftest import SECRET_KEY, START_MS, MakeRig
from tests.support.llm_server import Behaviour, LLMTestServer

REQUEST = ChatRequest((ChatMessage("user", "Remember that I like green tea"),), system="Be brief")
BOTH = pytest.mark.parametrize("kind", ["openai", "anthropic"])
STREAMING = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


@BOTH
@STREAMING
def test_success_usage_cost_ledger_and_event(server: LLMTestServer, make_rig: MakeRig,
                                             kind: str, stream: bool) -> None:
    server.script(Behaviour(content='{"answer": "green tea"}', input_tokens=100,
                            output_tokens=20))
    rig = make_rig(kind, stream=stream)
    response = rig.gateway.complete(REQUEST, purpose="test", expect_json=True)
    assert json.loads(response.text) == {"answer": "green tea"}
    assert (response.usage.input_tokens, response.usage.output_tokens) == (100, 20)
    assert response.streamed is stream
    assert response.cost_usd == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    sent = server.requests[-1]
    assert sent.body["model"] == "test-model"
    assert sent.body["stream"] is stream
    if kind == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["Authorization"] == f"Bearer {SECRET_KEY}"
        assert sent.body["messages"][0] == {"role": "system", "content": "Be brief"}
    else:
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == SECRET_KEY
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.body["system"] == "Be brief"
    [row] = rig.rows("llm_calls")
    assert (row["outcome"], row["input_tokens"], row["output_tokens"]) == ("ok", 100, 20)
    assert row["cost_exact"] == "0.00014"
    assert rig.kinds() == [EVENT_CALL]
    assert rig.gateway.budget.spent_usd == pytest.approx(0.00014)


@BOTH
def test_429_with_retry_after_is_honoured(server: LLMTestServer, make_rig: MakeRig,
                                          kind: str) -> None:
    server.script(Behaviour("status", status=429, retry_after="3"), Behaviour())
    rig = make_rig(kind)
    response = rig.gateway.complete(REQUEST)
    assert response.attempts == 2
    assert rig.sleeps == [3000.0]  # Retry-After (3 s) beats backoff (500 + 62 ms)
    retry = next(e for e in rig.events if e.kind == EVENT_RETRY)
    assert retry.payload["retry_after_ms"] == 3000.0
    assert retry.payload["status"] == 429
    assert [r["outcome"] for r in rig.rows("llm_calls")] == ["retry", "ok"]


def test_500s_back_off_deterministically_then_give_up(server: LLMTestServer,
                                                      make_rig: MakeRig) -> None:
    server.script(*[Behaviour("status", status=500)] * 4)
    rig = make_rig("openai", circuit=CircuitConfig(window_size=20))
    with pytest.raises(ProviderError, match="HTTP 500") as info:
        rig.gateway.complete(REQUEST)
    assert info.value.status == 500
    # DESIGN decision 9: jitter 62, -78, 70 for seed 12345.
    assert rig.sleeps == [500 + 62, 1000 - 78, 2000 + 70]
    assert [r["outcome"] for r in rig.rows("llm_calls")] == ["retry"] * 3 + ["failed"]
    assert len(server.requests) == 4


def test_non_retryable_4xx_fails_fast_without_tripping_the_breaker(
        server: LLMTestServer, make_rig: MakeRig) -> None:
    server.script(Behaviour("status", status=400))
    rig = make_rig("openai")
    with pytest.raises(ProviderError, match="HTTP 400"):
        rig.gateway.complete(REQUEST)
    assert len(server.requests) == 1
    assert rig.gateway.breaker.failure_rate() == 0


@BOTH
def test_breaker_opens_half_opens_and_closes(server: LLMTestServer, make_rig: MakeRig,
                                             kind: str) -> None:
    server.script(*[Behaviour("status", status=503)] * 3)
    rig = make_rig(kind, circuit=CircuitConfig(window_size=4, cooldown_ms=30_000,
                                               probes_required=2))
    with pytest.raises(CircuitOpen):
        rig.gateway.complete(REQUEST)  # 2 failures of 4 = 0.5 -> open; 3rd attempt refused
    assert len(server.requests) == 2
    assert rig.gateway.status().breaker == "open"
    with pytest.raises(CircuitOpen):
        rig.gateway.complete(REQUEST)
    assert len(server.requests) == 2  # refused without touching the network
    rig.clock.advance(30_000)
    assert rig.gateway.status().breaker == "half_open"
    # A failed probe re-opens.
    with pytest.raises(CircuitOpen):
        rig.gateway.complete(REQUEST)
    rig.clock.advance(30_000)
    server.script(Behaviour(), Behaviour())
    rig.gateway.complete(REQUEST)
    assert rig.gateway.status().breaker == "half_open"
    rig.gateway.complete(REQUEST)
    assert rig.gateway.status().breaker == "closed"
    transitions = [(r["from_state"], r["to_state"]) for r in rig.rows("llm_breaker_transitions")]
    assert transitions == [("closed", "open"), ("open", "half_open"), ("half_open", "open"),
                           ("open", "half_open"), ("half_open", "closed")]
    assert [e.payload["to"] for e in rig.events if e.kind == EVENT_BREAKER] == \
        ["open", "half_open", "open", "half_open", "closed"]


@STREAMING
def test_timeout_is_retried(server: LLMTestServer, make_rig: MakeRig, stream: bool) -> None:
    server.script(Behaviour("hang", delay_s=5.0), Behaviour(content='{"ok": true}'))
    rig = make_rig("openai", read_timeout_s=0.3, stream=stream)
    started = time.monotonic()
    response = rig.gateway.complete(REQUEST, expect_json=True)
    assert time.monotonic() - started < 3.0
    assert json.loads(response.text) == {"ok": True}
    assert rig.rows("llm_calls")[0]["failure"] == "timeout"


@BOTH
def test_truncated_stream_is_retried_never_returned(server: LLMTestServer, make_rig: MakeRig,
                                                    kind: str) -> None:
    full = '{"memories": [{"content": "User likes green tea"}]}'
    server.script(Behaviour("truncate", content=full, chunks=6, cut_after=2),
                  Behaviour(content=full, chunks=6))
    rig = make_rig(kind)
    response = rig.gateway.complete(REQUEST, expect_json=True)
    assert response.text == full
    assert response.attempts == 2
    first = rig.rows("llm_calls")[0]
    assert (first["outcome"], first["failure"]) == ("retry", "truncated")
    assert first["output_tokens"] > 0  # the cut stream was billed
    assert rig.gateway.budget.spent_usd == pytest.approx(
        sum(r["cost_usd"] for r in rig.rows("llm_calls")))


@BOTH
@STREAMING
def test_invalid_json_body_is_retried(server: LLMTestServer, make_rig: MakeRig, kind: str,
                                      stream: bool) -> None:
    server.script(Behaviour("invalid_body"), Behaviour(content="fine"))
    rig = make_rig(kind, stream=stream)
    assert rig.gateway.complete(REQUEST).text == "fine"
    assert rig.rows("llm_calls")[0]["failure"] == "protocol"


@BOTH
def test_slow_drip_hits_the_total_deadline_then_succeeds(server: LLMTestServer,
                                                         make_rig: MakeRig, kind: str) -> None:
    drip = Behaviour("drip", content='{"a": "slow answer"}', chunks=8, delay_s=0.15)
    server.script(drip, Behaviour("drip", content='{"a": "slow answer"}', chunks=3,
                                  delay_s=0.01))
    rig = make_rig(kind, total_timeout_s=0.5, max_attempts=2)
    rig.gateway = LLMGateway(rig.gateway.settings, ledger=rig.ledger, events=rig.bus,
                             clock=SystemClock(), sleep=lambda ms: None,
                             api_key=lambda: SECRET_KEY)
    response = rig.gateway.complete(REQUEST, expect_json=True)
    assert json.loads(response.text) == {"a": "slow answer"}
    assert rig.rows("llm_calls")[0]["failure"] == "timeout"


def test_breaker_state_survives_a_restart(server: LLMTestServer, make_rig: MakeRig,
                                          tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    server.script(*[Behaviour("status", status=502)] * 2)
    circuit = CircuitConfig(window_size=4)
    first = make_rig("openai", ledger=Ledger(path), circuit=circuit, max_attempts=2)
    with pytest.raises(ProviderError):
        first.gateway.complete(REQUEST)
    assert first.gateway.status().breaker == "open"
    first.ledger.close()
    again = make_rig("openai", ledger=Ledger(path), circuit=circuit, clock=first.clock)
    assert again.gateway.status().breaker == "open"
    with pytest.raises(CircuitOpen):
        again.gateway.complete(REQUEST)
    assert len(server.requests) == 2
    again.clock.advance(30_000)
    assert again.gateway.status().breaker == "half_open"
    again.ledger.close()


def test_stream_repair_on_stop_is_reported(server: LLMTestServer, make_rig: MakeRig) -> None:
    server.script(Behaviour(content='{"memories":[{"content":"test"'))
    rig = make_rig("anthropic")
    response = rig.gateway.complete(REQUEST, expect_json=True)
    assert response.was_repaired
    assert response.text.endswith("}]}")


def test_budget_rejects_before_any_request(server: LLMTestServer, make_rig: MakeRig) -> None:
    rig = make_rig("openai", daily_budget_usd=0.0001, max_tokens=1000)
    with pytest.raises(BudgetExceeded, match="daily LLM budget"):
        rig.gateway.complete(REQUEST)
    assert server.requests == []
    [row] = rig.rows("llm_calls")
    assert (row["outcome"], row["failure"]) == ("rejected", "budget_exceeded")


def test_budget_alerts_are_events_and_rows_once(server: LLMTestServer,
                                                make_rig: MakeRig) -> None:
    server.default = Behaviour(input_tokens=1000, output_tokens=0)  # 0.001 USD per call
    rig = make_rig("openai", daily_budget_usd=0.01, max_tokens=1)
    for _ in range(9):
        rig.gateway.complete(ChatRequest((ChatMessage("user", "hi"),), max_tokens=1))
    assert [r["threshold"] for r in rig.rows("llm_budget_alerts")] == [70, 90]
    assert [e.payload["threshold"] for e in rig.events if e.kind == "llm:budget-alert"] == \
        [70, 90]


def test_spend_and_alerts_survive_a_restart(server: LLMTestServer, make_rig: MakeRig,
                                            tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    server.default = Behaviour(input_tokens=4000, output_tokens=0)  # 0.004 USD
    first = make_rig("openai", ledger=Ledger(path), daily_budget_usd=0.005, max_tokens=1)
    first.gateway.complete(ChatRequest((ChatMessage("user", "hi"),), max_tokens=1))
    assert first.gateway.budget.alerts == (70,)
    first.ledger.close()
    again = make_rig("openai", ledger=Ledger(path), daily_budget_usd=0.005, max_tokens=1,
                     clock=first.clock)
    assert again.gateway.status().spent_usd == pytest.approx(0.004)
    assert again.gateway.status().alerts == (70,)
    with pytest.raises(BudgetExceeded):
        again.gateway.complete(ChatRequest((ChatMessage("user", "hello " * 300),),
                                           max_tokens=1))
    again.clock.advance(24 * 3600_000)  # next UTC day: the window resets
    assert again.gateway.status().spent_usd == 0.0
    again.ledger.close()


def test_token_projection_throttles_and_waits(server: LLMTestServer, make_rig: MakeRig) -> None:
    server.default = Behaviour(input_tokens=900, output_tokens=0)
    rig = make_rig("openai", tpm_limit=1000)
    rig.gateway.complete(REQUEST)
    rig.gateway.complete(REQUEST)  # 900 used + 900 projected > 80 % of 1000: wait
    assert rig.sleeps and rig.sleeps[0] == pytest.approx(60_001)
    [row] = rig.rows("llm_throttle")
    assert row["decision"] == "wait_tokens"
    assert row["utilization_percent"] == pytest.approx(180.0)
    assert EVENT_THROTTLE in rig.kinds()


def test_throttle_rejects_when_the_wait_is_too_long(server: LLMTestServer,
                                                    make_rig: MakeRig) -> None:
    server.default = Behaviour(input_tokens=900, output_tokens=0)
    rig = make_rig("openai", tpm_limit=1000, max_throttle_wait_ms=1000)
    rig.gateway.complete(REQUEST)
    with pytest.raises(RateLimited):
        rig.gateway.complete(REQUEST)
    assert len(server.requests) == 1


def test_request_rate_limiter_waits(server: LLMTestServer, make_rig: MakeRig) -> None:
    rig = make_rig("openai", requests_per_minute=1)
    rig.gateway.complete(REQUEST)
    rig.gateway.complete(REQUEST)
    assert rig.sleeps == [60_000.0]
    assert rig.rows("llm_throttle")[0]["decision"] == "wait_requests"


def test_not_configured() -> None:
    gateway = LLMGateway(LLMSettings())
    assert not gateway.configured
    with pytest.raises(ProviderNotConfigured):
        gateway.complete(REQUEST)
    assert gateway.status().to_json()["breaker"] == "closed"


def test_status_document_shape(server: LLMTestServer, make_rig: MakeRig) -> None:
    rig = make_rig("openai", daily_budget_usd=5.0)
    rig.gateway.complete(REQUEST)
    doc = rig.gateway.status().to_json()
    assert set(doc) >= {"breaker", "window_utilization_percent", "projected_total",
                        "should_throttle", "budget_usd", "spent_usd", "alerts", "window_start"}
    assert doc["window_start"] == "2025-01-01T00:00:00.000Z"
    assert doc["budget_usd"] == 5.0
    assert doc["breaker"] == "closed"
    assert doc["should_throttle"] is False
    assert START_MS  # the rig's clock starts at noon UTC of that day


class _ScriptedStreamProvider:
    """A provider yielding scripted stream events (for cases a server cannot easily produce)."""

    name = "scripted"
    kind = ProviderKind.OPENAI

    def __init__(self, scripts: list[list[StreamEvent]], usage: Usage | None = None) -> None:
        self._scripts = scripts
        self._usage = usage or Usage(10, 10)
        self._lock = threading.Lock()

    def complete(self, request: ChatRequest, model: str) -> ChatResponse:
        return ChatResponse("ok", self._usage, model)

    def stream(self, request: ChatRequest, model: str) -> Iterator[StreamEvent]:
        with self._lock:
            script = self._scripts.pop(0) if len(self._scripts) > 1 else self._scripts[0]
        yield from script

    def close(self) -> None:
        return None


def _settings(**overrides: object) -> LLMSettings:
    options: dict[str, object] = {"provider": "scripted", "kind": ProviderKind.OPENAI,
                                  "base_url": "http://unused", "model": "m",
                                  "prices": {"m": ModelPrice(1.0, 1.0)}}
    options.update(overrides)
    return LLMSettings(**options)  # type: ignore[arg-type]


def test_error_event_mid_stream_is_retried() -> None:
    clock = DeterministicClock(START_MS)
    ok = [StreamEvent("start"), StreamEvent("delta", "done"),
          StreamEvent("stop", metadata={"input_tokens": 3, "output_tokens": 1,
                                        "usage_reported": True})]
    broken = [StreamEvent("start"), StreamEvent("delta", "par"),
              StreamEvent("error", error="overloaded")]
    gateway = LLMGateway(_settings(), provider=_ScriptedStreamProvider([broken, ok]),
                         clock=clock, rng=DeterministicRNG(1), sleep=clock.advance)
    response = gateway.complete(REQUEST)
    assert (response.text, response.attempts) == ("done", 2)
    assert response.usage == Usage(3, 1)


def test_concurrent_callers_never_overspend() -> None:
    clock = DeterministicClock(START_MS)
    # Each call reserves an upper bound (0.000044 USD) and costs 0.00002 USD.
    gateway = LLMGateway(_settings(stream=False, daily_budget_usd=0.0005, max_tokens=10,
                                   requests_per_minute=10_000),
                         provider=_ScriptedStreamProvider([[]], Usage(10, 10)), clock=clock,
                         rng=DeterministicRNG(1), sleep=clock.advance)
    outcomes: list[str] = []

    def worker() -> None:
        for _ in range(20):
            try:
                gateway.complete(ChatRequest((ChatMessage("user", "hi"),), max_tokens=10))
                outcomes.append("ok")
            except BudgetExceeded:
                outcomes.append("refused")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 80
    assert gateway.budget.spent_usd <= 0.0005
    # Sequentially 23 calls fit (the 24th's upper-bound reservation would pass the budget);
    # concurrent reservations can only make a caller wait its turn or be refused, not overspend.
    assert 20 <= outcomes.count("ok") <= 23
    assert gateway.budget.spent_usd == pytest.approx(outcomes.count("ok") * 0.00002)
