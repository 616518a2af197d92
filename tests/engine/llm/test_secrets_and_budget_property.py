"""No key or unredacted content in logs, events, ledger or prompts; the budget is never exceeded
over random call sequences; settings and key lookup."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.clock import DeterministicClock, DeterministicRNG
from engine.errors import ConfigInvalid
from engine.ledger import Ledger
from engine.llm import (
    BudgetExceeded,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    CircuitOpen,
    Extractor,
    LLMGateway,
    LLMSettings,
    ModelPrice,
    ProviderError,
    Usage,
    llm_settings_from_env,
    parse_conversation,
)
from engine.llm.settings import ProviderKind, resolve_api_key
from engine.llm.streaming import StreamEvent
from tests.engine.llm.conftest import SECRET_KEY, MakeRig, Rig
from tests.support.llm_server import Behaviour, LLMTestServer

EMAIL = "alice.secret@example.com"


def _redact(text: str) -> str:
    return re.sub(r"[\w.]+@[\w.]+", "<REDACT:sha256-e1>", text)


def _everything_recorded(rig: Rig, caplog: pytest.LogCaptureFixture) -> str:
    dump = [json.dumps(e.to_json()) for e in rig.events]
    for table in ("llm_calls", "llm_breaker_transitions", "llm_budget_alerts", "llm_throttle",
                  "events"):
        dump += [json.dumps(dict(r)) for r in rig.ledger.query(f"SELECT * FROM {table}")]
    dump += [r.getMessage() for r in caplog.records]
    return "\n".join(dump)


def test_no_secret_or_unredacted_content_anywhere(server: LLMTestServer, make_rig: MakeRig,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    # The server echoes the key in a 401 body (as real APIs do, partially) and also fails.
    server.script(Behaviour("status", status=500),
                  Behaviour(content=json.dumps({"schemaVersion": "v1", "memories": [
                      {"content": "User's email is <REDACT:sha256-e1>", "category": "fact",
                       "importance": 0.5, "confidence": 0.9}]})))
    rig = make_rig("openai", redactor=_redact)
    conversation = parse_conversation([
        {"role": "user", "content": f"My email is {EMAIL}, please remember it."}])
    result = Extractor(rig.gateway, rig.bus).extract(conversation)
    assert [c.content for c in result.candidates] == ["User's email is <REDACT:sha256-e1>"]
    for request in server.requests:
        assert EMAIL not in request.raw  # the prompt went out redacted
        assert "<REDACT:sha256-e1>" in request.raw
    recorded = _everything_recorded(rig, caplog)
    assert SECRET_KEY not in recorded
    assert EMAIL not in recorded
    assert "please remember it" not in recorded  # no prompt text at all
    assert SECRET_KEY not in repr(rig.gateway.settings)


def test_key_echoed_in_an_error_body_is_scrubbed(server: LLMTestServer,
                                                 make_rig: MakeRig) -> None:
    rig = make_rig("openai")
    server.script(Behaviour("status", status=401))
    server._error_body = lambda path, status: {  # type: ignore[method-assign]
        "error": {"message": f"Incorrect API key provided: {SECRET_KEY}"}}
    with pytest.raises(ProviderError) as info:
        rig.gateway.complete(ChatRequest((ChatMessage("user", "hi"),)))
    assert SECRET_KEY not in str(info.value)
    assert "<key>" in str(info.value)
    assert SECRET_KEY not in json.dumps([dict(r) for r in rig.ledger.query(
        "SELECT * FROM llm_calls")])


def test_redaction_off_sends_the_original(server: LLMTestServer, make_rig: MakeRig) -> None:
    rig = make_rig("anthropic", redactor=_redact)
    rig.gateway.redact = False
    rig.gateway.complete(ChatRequest((ChatMessage("user", f"mail {EMAIL}"),)))
    assert EMAIL in server.requests[-1].raw


class _RandomUsageProvider:
    """A provider whose usage is random but within what a real API can bill for a request."""

    name = "fake"
    kind = ProviderKind.OPENAI

    def __init__(self, rng: DeterministicRNG) -> None:
        self._rng = rng

    def complete(self, request: ChatRequest, model: str) -> ChatResponse:
        prompt_bytes = sum(len(m.content.encode()) for m in request.messages)
        usage = Usage(int(self._rng.next_float() * prompt_bytes),
                      int(self._rng.next_float() * (request.max_tokens or 1)))
        if self._rng.next_float() < 0.2:
            raise ProviderError(self.name, "http", "flaky", status=500, retryable=True)
        return ChatResponse("ok", usage, model)

    def stream(self, request: ChatRequest, model: str) -> Iterator[StreamEvent]:
        raise AssertionError("not streamed in this test")

    def close(self) -> None:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.floats(0.001, 0.05),
    seed=st.integers(0, 2**31 - 1),
    calls=st.lists(st.tuples(st.integers(1, 4000), st.integers(1, 800),
                             st.integers(0, 6 * 3600_000)), min_size=1, max_size=25),
)
def test_property_gateway_never_exceeds_budget(budget: float, seed: int,
                                               calls: list[tuple[int, int, int]]) -> None:
    clock = DeterministicClock(1_735_689_600_000.0)  # 2025-01-01T00:00Z
    ledger = Ledger(None)
    gateway = LLMGateway(
        LLMSettings(provider="fake", kind=ProviderKind.OPENAI, base_url="http://x", model="m",
                    stream=False, prices={"m": ModelPrice(3.0, 15.0)}, daily_budget_usd=budget,
                    requests_per_minute=10_000, tpm_limit=10**9),
        provider=_RandomUsageProvider(DeterministicRNG(seed)), ledger=ledger, clock=clock,
        rng=DeterministicRNG(seed), sleep=clock.advance)
    for prompt_chars, max_tokens, advance in calls:
        clock.advance(advance)
        request = ChatRequest((ChatMessage("user", "x" * prompt_chars),), max_tokens=max_tokens)
        # Refusals and failures are fine; overspending is not.
        with contextlib.suppress(BudgetExceeded, ProviderError, CircuitOpen):
            gateway.complete(request)
        window = gateway.budget.window_start_ms
        rows = ledger.query("SELECT SUM(cost_usd) AS s FROM llm_calls WHERE ts_ms >= ?",
                            (window,))
        assert (rows[0]["s"] or 0.0) <= budget + 1e-12
        assert gateway.budget.spent_usd <= budget


def test_settings_from_env_and_key_lookup() -> None:
    env = {"MNEMOSCOPE_LLM_PROVIDER": "ollama", "MNEMOSCOPE_LLM_MODEL": "llama3.2",
           "MNEMOSCOPE_LLM_DAILY_BUDGET_USD": "2.5",
           "MNEMOSCOPE_LLM_PRICES": '{"llama": [0.1, 0.2]}'}
    settings = llm_settings_from_env(env)
    assert (settings.kind, settings.base_url, settings.model) == (
        ProviderKind.OPENAI, "http://127.0.0.1:11434/v1", "llama3.2")
    assert settings.configured
    assert settings.api_key_env is None
    assert settings.price_for("llama3.2") == ModelPrice(0.1, 0.2)
    assert settings.tpm == 90_000
    claude = llm_settings_from_env({"MEMORY_LLM_PRIMARY": "claude", "MNEMOSCOPE_LLM_MODEL": "c"})
    assert claude.kind is ProviderKind.ANTHROPIC
    assert claude.tpm == 40_000  # seed 000 §3 table
    assert resolve_api_key(claude, {"ANTHROPIC_API_KEY": "k1"}) == "k1"
    assert resolve_api_key(claude, {}, keyring_get=lambda s, u: f"{s}/{u}") == "mnemoscope/claude"

    def broken(service: str, user: str) -> str | None:
        raise RuntimeError("no keyring backend")

    assert resolve_api_key(claude, {}, keyring_get=broken) is None
    with pytest.raises(ConfigInvalid, match="MNEMOSCOPE_LLM_MAX_TOKENS"):
        llm_settings_from_env({"MNEMOSCOPE_LLM_MAX_TOKENS": "0"})
    with pytest.raises(ConfigInvalid, match="MNEMOSCOPE_LLM_PROVIDER"):
        llm_settings_from_env({"MNEMOSCOPE_LLM_PROVIDER": "skynet"})
    other = settings.with_overrides(provider="anthropic", model="claude-3-5-haiku-latest")
    assert other.base_url == "https://api.anthropic.com"
    assert other.price_for(other.model) == ModelPrice(0.80, 4.00)
