"""One small real request to check provider settings: the settings dialog's "Test connection".

The request goes through the real provider client (:func:`build_provider`), streamed or not as
the settings say, with their connect, read and total timeouts. It does not go through the
gateway: a test of settings that are not saved yet must not move the running gateway's breaker,
throttle or budget reservations. It is recorded like any call, so its (tiny) cost is not hidden:
one ``llm_calls`` row with purpose ``connection-test`` (outcome ``ok``, or ``test_failed``,
which the breaker's restore does not count) and one ``llm:connection-test`` event. Neither holds
the key, the prompt or the reply, and every text of the result is scrubbed of the key.

The outcome is said in plain words (:attr:`ConnectionCheck.summary`): the model's reply and the
latency, or what went wrong and what to check: a refused key (401/403), nothing listening, a
timeout, an answer in another protocol, a missing endpoint (404), a server error (5xx).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from engine.clock import Clock, SystemClock
from engine.errors import EngineError
from engine.events import EventBus
from engine.ledger import Ledger
from engine.llm.errors import ProviderError
from engine.llm.persistence import CallRow, LLMLedger
from engine.llm.providers import (
    ChatMessage,
    ChatRequest,
    LLMProvider,
    Usage,
    build_provider,
    endpoint_url,
)
from engine.llm.settings import LLMSettings, ProviderKind
from engine.text import estimate_tokens

__all__ = [
    "EVENT_CONNECTION_TEST",
    "PURPOSE",
    "TEST_PROMPT",
    "ConnectionCheck",
    "check_connection",
]

EVENT_CONNECTION_TEST = "llm:connection-test"
PURPOSE = "connection-test"
TEST_PROMPT = "Reply with the single word: pong"
TEST_MAX_TOKENS = 16
_REPLY_LIMIT = 200
_PROTOCOLS = {ProviderKind.OPENAI: "OpenAI chat completions",
              ProviderKind.ANTHROPIC: "Anthropic Messages"}


@dataclass(frozen=True, slots=True)
class ConnectionCheck:
    """The outcome of one test request.

    Attributes:
        ok: The provider answered.
        summary: One or two plain sentences for the user.
        failure: None when ok, else ``auth``, ``refused``, ``unreachable``, ``timeout``,
            ``protocol``, ``not_found``, ``rate_limited``, ``server``, ``rejected``,
            ``cancelled`` or ``not_configured``.
        latency_ms: From sending the request to the whole answer (or the failure).
        reply: The model's answer, shortened to 200 characters.
        model: The model that answered (or was asked).
        status: HTTP status, when the server sent one.
        detail: The provider's own message (scrubbed of the key).
        input_tokens: Prompt tokens (reported, else estimated).
        output_tokens: Answer tokens (reported, else estimated).
        cost_usd: What the request cost at the settings' price.
    """

    ok: bool
    summary: str
    failure: str | None = None
    latency_ms: float = 0.0
    reply: str = ""
    model: str = ""
    status: int | None = None
    detail: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class _Cancelled(Exception):
    """The caller cancelled while the answer was streaming."""


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    usage: Usage
    model: str
    reported: bool


def check_connection(settings: LLMSettings, api_key: Callable[[], str | None], *,
                     ledger: Ledger | None = None, events: EventBus | None = None,
                     clock: Clock | None = None,
                     cancelled: Callable[[], bool] | None = None) -> ConnectionCheck:
    """Send one tiny chat request with ``settings`` and say what happened (blocking).

    Args:
        settings: The settings to test (need not be saved).
        api_key: Returns the key to send (read once, on this thread).
        ledger: Where the ``llm_calls`` row goes (None: not recorded).
        events: Where the ``llm:connection-test`` event goes (None: none).
        clock: Timestamps of the row and the event.
        cancelled: Polled before sending and between stream chunks; a cancelled test returns
            ``failure="cancelled"`` (a request already sent is still recorded).

    A row or event that cannot be written (the store closed meanwhile) does not fail the
    check: its summary ends with why it was not recorded.

    Returns:
        The outcome; failures are results, not exceptions.
    """
    problems = settings.problems()
    if problems or not settings.configured:
        reason = "; ".join(str(p) for p in problems) or "no provider is chosen"
        return ConnectionCheck(False, f"Not tested: {reason}.", "not_configured",
                               model=settings.model)
    if cancelled is not None and cancelled():
        return ConnectionCheck(False, "Test cancelled before sending.", "cancelled",
                               model=settings.model)
    key = api_key()  # read once: the same key is sent and scrubbed from every text
    provider = build_provider(settings, lambda: key)
    started = time.perf_counter()
    try:
        answer = _ask(provider, settings, cancelled)
        latency = (time.perf_counter() - started) * 1000.0
        result = _success(answer, settings, latency)
        if cancelled is not None and cancelled():
            result = replace(result, ok=False, failure="cancelled",
                             summary="Test cancelled (the answer came anyway).")
    except ProviderError as exc:
        latency = (time.perf_counter() - started) * 1000.0
        result = _failure(exc, settings, sent_key=bool(key), latency_ms=latency)
    except _Cancelled:
        latency = (time.perf_counter() - started) * 1000.0
        result = ConnectionCheck(False, "Test cancelled while the answer was arriving.",
                                 "cancelled", latency, model=settings.model)
    finally:
        provider.close()
    result = _scrubbed(result, key)
    try:
        _record(result, settings, provider.name, ledger, events, clock or SystemClock())
    except EngineError as exc:  # e.g. the store was closed while the request was out
        result = replace(result, summary=f"{result.summary} (Not recorded: {exc}.)")
    return result


def _ask(provider: LLMProvider, settings: LLMSettings,
         cancelled: Callable[[], bool] | None) -> _Answer:
    request = ChatRequest((ChatMessage("user", TEST_PROMPT),), max_tokens=TEST_MAX_TOKENS)
    if not settings.stream:
        response = provider.complete(request, settings.model)
        return _Answer(response.text, response.usage, response.model, response.usage_reported)
    deadline = time.perf_counter() + settings.total_timeout_s
    parts: list[str] = []
    events = provider.stream(request, settings.model)
    try:
        for event in events:
            if cancelled is not None and cancelled():
                raise _Cancelled
            if time.perf_counter() > deadline:
                raise ProviderError(provider.name, "timeout", f"answer not complete after "
                                    f"{settings.total_timeout_s:g} s")
            if event.type == "delta":
                parts.append(event.content)
            elif event.type == "error":
                raise ProviderError(provider.name, "stream_error", event.error or "")
            elif event.type == "stop":
                meta = event.metadata
                usage = Usage(int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0)))
                return _Answer("".join(parts), usage, settings.model,
                               bool(meta.get("usage_reported")))
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    raise ProviderError(provider.name, "truncated", "the stream ended before its final event")


def _success(answer: _Answer, settings: LLMSettings, latency_ms: float) -> ConnectionCheck:
    usage = answer.usage
    if not answer.reported or usage.total_tokens == 0:
        usage = Usage(estimate_tokens(TEST_PROMPT), estimate_tokens(answer.text))
    cost = settings.price_for(answer.model).cost(usage.input_tokens, usage.output_tokens)
    reply = " ".join(answer.text.split())
    if len(reply) > _REPLY_LIMIT:
        reply = reply[:_REPLY_LIMIT - 1] + "…"
    said = f"“{reply}”" if reply else "an empty answer"
    summary = (f"Connected: {answer.model} replied {said} in {latency_ms:.0f} ms "
               f"({usage.input_tokens} tokens in, {usage.output_tokens} out, "
               f"${float(cost):.6f}).")
    return ConnectionCheck(True, summary, None, latency_ms, reply, answer.model,
                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                           cost_usd=float(cost))


def _host(base_url: str) -> str:
    """``host:port`` of a URL, never its user name or password."""
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    return f"{host}:{parts.port}" if parts.port else host


def _server_message(detail: str) -> str:
    """The message inside a JSON error body (OpenAI / Anthropic shapes), else the text."""
    try:
        data = json.loads(detail)
    except ValueError:
        return detail
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])
    return detail


def _failure(exc: ProviderError, settings: LLMSettings, *, sent_key: bool,
             latency_ms: float) -> ConnectionCheck:
    failure, summary = _describe(exc, settings, sent_key)
    return ConnectionCheck(False, summary, failure, latency_ms, model=settings.model,
                           status=exc.status, detail=exc.detail)


def _describe(exc: ProviderError, settings: LLMSettings, sent_key: bool) -> tuple[str, str]:
    """(failure, plain words) for a failed test request."""
    host, status = _host(settings.base_url), exc.status
    message = _server_message(exc.detail).strip() or "no message"
    if status in (401, 403):
        hint = ("check the key" if sent_key else
                "no key was sent: name the variable that holds it or store it in the keyring")
        return "auth", f"The server refused the API key (HTTP {status}): {hint}. It said: " \
                       f"{message}"
    if status == 404:
        return "not_found", (f"HTTP 404: {endpoint_url(settings)} does not exist. Check the "
                             f"base URL (OpenAI-style bases usually end in /v1) and the "
                             f"provider kind.")
    if status == 429:
        return "rate_limited", (f"The server said too many requests (HTTP 429): a rate limit "
                                f"or no quota left. It said: {message}")
    if status is not None and status >= 500:
        return "server", (f"The server at {host} failed (HTTP {status}): {message}. The "
                          f"settings may be right; the service is not working now.")
    if status is not None:
        return "rejected", (f"The server rejected the request (HTTP {status}): {message}. "
                            f"Check the model name.")
    if exc.failure == "connect":
        if "refused" in exc.detail.lower():
            return "refused", (f"Connection refused: nothing is listening at {host}. Is the "
                               f"server running, and is the port right?")
        return "unreachable", f"Cannot reach {host}: {exc.detail}."
    if exc.failure == "timeout":
        if "ConnectTimeout" in exc.detail:
            return "timeout", (f"No connection to {host} within "
                               f"{settings.connect_timeout_s:g} s (connect timeout).")
        if "not complete" in exc.detail:
            return "timeout", (f"The answer did not complete within "
                               f"{settings.total_timeout_s:g} s (total timeout).")
        return "timeout", (f"No answer from {host} within {settings.read_timeout_s:g} s "
                           f"(read timeout).")
    protocol = _PROTOCOLS.get(settings.kind, "expected") if settings.kind else "expected"
    return "protocol", (f"{host} answered, but not in the {protocol} protocol ({exc.detail}). "
                        f"Check the provider kind and the base URL.")


def _scrubbed(result: ConnectionCheck, key: str | None) -> ConnectionCheck:
    if not key:
        return result
    return replace(result, summary=result.summary.replace(key, "<key>"),
                   reply=result.reply.replace(key, "<key>"),
                   detail=result.detail.replace(key, "<key>"))


def _record(result: ConnectionCheck, settings: LLMSettings, provider: str,
            ledger: Ledger | None, events: EventBus | None, clock: Clock) -> None:
    """One ``llm_calls`` row and one event: no key, prompt or reply in either."""
    now = clock.now()
    cost = settings.price_for(result.model or settings.model).cost(result.input_tokens,
                                                                   result.output_tokens)
    outcome = "ok" if result.ok else "test_failed"
    if ledger is not None:
        LLMLedger(ledger).add_call(CallRow(
            now, uuid.uuid4().hex, provider, result.model or settings.model, PURPOSE, 1,
            outcome, result.status, result.failure, result.input_tokens, result.output_tokens,
            cost, result.latency_ms, settings.stream,
            None if result.ok else result.detail or result.failure))
    if events is not None:
        events.emit(EVENT_CONNECTION_TEST, source=f"llm:{provider}",
                    decision_reason=result.failure or "ok", latency_ms=result.latency_ms,
                    payload={"provider": provider, "model": result.model or settings.model,
                             "outcome": outcome, "status": result.status,
                             "failure": result.failure, "input_tokens": result.input_tokens,
                             "output_tokens": result.output_tokens,
                             "cost_usd": result.cost_usd}, force=True)
