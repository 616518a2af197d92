"""The LLM gateway: one provider behind the whole resilience stack of seed 000.

Order of the stack for every call (each step is an event and a ledger row when it decides
something)::

    redact prompt (DESIGN 8) ─► per attempt:
        circuit breaker (§4) ─► token projection throttle (§3) ─► request rate limiter ─►
        budget reservation (§6, strict >) ─► provider call (stream → assembler §8) ─►
        success: breaker success, usage → projector, cost → budget (alerts 70/90/100)
        failure: breaker failure, retry after backoff (§2, max with Retry-After)

The budget reservation is an upper bound of the attempt's cost (prompt bytes + 8 tokens per
message as input tokens — no tokenizer produces more tokens than UTF-8 bytes — and the output
cap), so a call that is allowed can never push spend over the budget. A stream that ends
without its terminal event is a failed attempt (``truncated``), never a half answer.

Events (kinds below) carry provider, model, purpose, attempt, token counts, cost, status and
reasons — never prompt or completion text, never a key.

:meth:`LLMGateway.metrics` reports seed 000's ``memory_llm_*`` metrics: the circuit state gauge
(§4), budget utilization and alert counts (§6), and the latency summary per provider and
operation (§11 ``PerformanceTracker``; the operation is the call's ``purpose``). Latency samples
and alert counts are restored from the ledger, so a fresh process (``mnemoscope metrics``)
reports what earlier ones measured.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from engine.clock import RNG, Clock, SystemClock, SystemRNG
from engine.events import EventBus
from engine.ledger import Ledger
from engine.llm.backoff import ExponentialBackoff
from engine.llm.breaker import BreakerState, BreakerTransition, CircuitBreaker
from engine.llm.budget import BudgetAlert, BudgetTracker, Reservation
from engine.llm.errors import (
    BudgetExceeded,
    CircuitOpen,
    LLMError,
    ProviderError,
    ProviderNotConfigured,
    RateLimited,
)
from engine.llm.latency import LatencySummary
from engine.llm.persistence import CallRow, LLMLedger
from engine.llm.projection import RateLimiter, TokenProjector
from engine.llm.providers import (
    ChatMessage,
    ChatRequest,
    ChatResponse,
    LLMProvider,
    Usage,
    build_provider,
)
from engine.llm.settings import LLMSettings, resolve_api_key
from engine.llm.streaming import StreamingAssembler
from engine.metrics import MAX_SAMPLES
from engine.records import format_timestamp
from engine.text import estimate_tokens

__all__ = [
    "EVENT_BREAKER",
    "EVENT_BUDGET_ALERT",
    "EVENT_CALL",
    "EVENT_FALLBACK",
    "EVENT_RETRY",
    "EVENT_THROTTLE",
    "GatewayStatus",
    "LLMGateway",
]

EVENT_CALL = "llm:call"
EVENT_RETRY = "llm:retry"
EVENT_BREAKER = "llm:breaker"
EVENT_THROTTLE = "llm:throttle"
EVENT_BUDGET_ALERT = "llm:budget-alert"
EVENT_FALLBACK = "llm:fallback"

log = logging.getLogger("engine.llm.gateway")

Sleep = Callable[[float], None]
"""Sleeps for the given milliseconds (injected so tests advance a clock instead)."""


def _real_sleep(ms: float) -> None:
    time.sleep(ms / 1000.0)


@dataclass(frozen=True, slots=True)
class GatewayStatus:
    """What ``llm status`` shows and the GUI gauges draw."""

    configured: bool
    provider: str
    model: str
    breaker: str
    window_utilization_percent: float
    projected_total: float
    should_throttle: bool
    budget_usd: float
    spent_usd: float
    alerts: tuple[int, ...]
    window_start_ms: float
    latency_p50_ms: float
    latency_p95_ms: float

    def to_json(self) -> dict[str, Any]:
        """The issue's ``llm status --json`` document (plus provider, model, latency)."""
        return {
            "breaker": self.breaker,
            "window_utilization_percent": round(self.window_utilization_percent, 6),
            "projected_total": self.projected_total,
            "should_throttle": self.should_throttle,
            "budget_usd": self.budget_usd,
            "spent_usd": self.spent_usd,
            "alerts": list(self.alerts),
            "window_start": format_timestamp(self.window_start_ms),
            "configured": self.configured,
            "provider": self.provider,
            "model": self.model,
            "latency_ms": {"p50": self.latency_p50_ms, "p95": self.latency_p95_ms},
        }


class LLMGateway:
    """Calls one provider through breaker, throttle, rate limit, budget and retries.

    Args:
        settings: Provider and resilience settings.
        provider: A ready provider (tests, custom clients); default: built from ``settings``.
        ledger: Where calls, transitions, alerts and throttles are written and spend restored.
        events: The voyeur event bus.
        clock: Time (breaker, budget window, projection, latency).
        rng: Backoff jitter.
        sleep: Waits a number of milliseconds (backoff, throttle); tests advance a clock.
        redactor: Applied to every prompt text before sending when ``redact`` is on.
        redact: Redaction toggle (DESIGN decision 8).
        api_key: Returns the key at call time; default reads env/keyring per ``settings``.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        provider: LLMProvider | None = None,
        ledger: Ledger | None = None,
        events: EventBus | None = None,
        clock: Clock | None = None,
        rng: RNG | None = None,
        sleep: Sleep | None = None,
        redactor: Callable[[str], str] | None = None,
        redact: bool = True,
        api_key: Callable[[], str | None] | None = None,
    ) -> None:
        self.settings = settings
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._sleep: Sleep = sleep if sleep is not None else _real_sleep
        self._events = events
        self._redactor = redactor
        self.redact = redact
        key_lookup = api_key if api_key is not None else (lambda: resolve_api_key(settings))
        if provider is None and settings.configured:
            provider = build_provider(settings, key_lookup)
        self._provider = provider
        self.provider_name = provider.name if provider is not None else (settings.provider or "")
        self._store = LLMLedger(ledger) if ledger is not None else None
        self.backoff = ExponentialBackoff(settings.backoff,
                                          rng if rng is not None else SystemRNG())
        self.breaker = CircuitBreaker(settings.circuit, self._clock, self._on_transition)
        self.budget = BudgetTracker(settings.daily_budget_usd, self._clock, self._on_alert)
        self.projector = TokenProjector(settings.tpm, self._clock)
        self.limiter = RateLimiter(settings.requests_per_minute, self._clock)
        self.latency = LatencySummary()
        # Calls may come from several worker threads at once (extraction beside compaction).
        self._metrics_lock = threading.Lock()
        self._latency_by_operation: dict[tuple[str, str], LatencySummary] = {}
        self._alerts_total: Counter[int] = Counter()
        self._restore()

    @property
    def configured(self) -> bool:
        """A provider is available."""
        return self._provider is not None

    def close(self) -> None:
        """Close the provider's connections."""
        if self._provider is not None:
            self._provider.close()

    # -- state -------------------------------------------------------------------------------
    def _restore(self) -> None:
        if self._store is None:
            return
        for provider, purpose, latency in self._store.recent_latencies(MAX_SAMPLES):
            self._record_latency(latency, purpose, provider)
        with self._metrics_lock:
            self._alerts_total.update(self._store.alert_counts())
        now = self._clock.now()
        window = self.budget.window_start_ms
        self.budget.restore(window, self._store.spend_since(window),
                            self._store.alerts_for(window))
        for ts, total in self._store.usage_since(now - self.projector.window_ms,
                                                 self.provider_name):
            self.projector.record(total, at=ts)
        last = self._store.last_transition(self.provider_name)
        failures = self._store.failures_since(now - self.settings.circuit.window_ms,
                                              self.provider_name)
        if last is not None or failures:
            state = BreakerState(last[1]) if last is not None else BreakerState.CLOSED
            self.breaker.restore(state, last[0] if last is not None else now, failures)

    def status(self) -> GatewayStatus:
        """Breaker, projection (next call), budget and latency in one snapshot."""
        projection = self.projector.project(queue_depth=1)
        latency = self.latency.get_summary()
        return GatewayStatus(
            configured=self.configured,
            provider=self.provider_name,
            model=self.settings.model,
            breaker=self.breaker.state.value,
            window_utilization_percent=projection.utilization_percent,
            projected_total=projection.projected_total,
            should_throttle=projection.should_throttle,
            budget_usd=self.budget.budget_usd,
            spent_usd=self.budget.spent_usd,
            alerts=self.budget.alerts,
            window_start_ms=self.budget.window_start_ms,
            latency_p50_ms=latency.p50,
            latency_p95_ms=latency.p95,
        )

    def metrics(self) -> dict[str, Any]:
        """Seed 000's ``memory_llm_*`` metrics as one JSON-able document.

        Keys: ``memory_llm_circuit_state`` (0 closed, 1 open, 2 half-open; §4),
        ``memory_llm_budget_utilization_percent`` (of the daily budget, 0 when disabled; §6),
        ``memory_llm_budget_alerts_total`` (per threshold, ``"70"``/``"90"``/``"100"``; §6) and
        ``memory_llm_latency_ms_summary`` (one §11 summary per provider and operation, plus
        ``"all"`` over every attempt), beside ``configured``, ``provider`` and ``model``.
        """
        budget = self.budget.budget_usd
        with self._metrics_lock:
            labelled = sorted(self._latency_by_operation.items())
            alerts = {str(threshold): self._alerts_total[threshold]
                      for threshold in (70, 90, 100)}
        with_labels = [{"provider": provider, "operation": operation,
                        **summary.get_summary().to_json()}
                       for (provider, operation), summary in labelled]
        return {
            "configured": self.configured,
            "provider": self.provider_name,
            "model": self.settings.model,
            "memory_llm_circuit_state": self.breaker.state.metric_value,
            "circuit_state": self.breaker.state.value,
            "memory_llm_budget_utilization_percent":
                round(self.budget.spent_usd / budget * 100.0, 6) if budget > 0 else 0.0,
            "memory_llm_budget_alerts_total": alerts,
            "memory_llm_latency_ms_summary": {
                "all": self.latency.get_summary().to_json(), "by_operation": with_labels},
        }

    def _record_latency(self, latency_ms: float, purpose: str,
                        provider: str | None = None) -> None:
        """One attempt's latency, overall and under its (provider, operation) labels."""
        self.latency.record(latency_ms)
        key = (provider if provider is not None else self.provider_name, purpose)
        with self._metrics_lock:
            summary = self._latency_by_operation.setdefault(key, LatencySummary())
        summary.record(latency_ms)

    # -- listeners ---------------------------------------------------------------------------
    def _emit(self, kind: str, *, reason: str | None = None, latency_ms: float | None = None,
              payload: dict[str, Any] | None = None) -> None:
        if self._events is None:
            return
        body = {"provider": self.provider_name, "model": self.settings.model, **(payload or {})}
        self._events.emit(kind, source=f"llm:{self.provider_name}", decision_reason=reason,
                          latency_ms=latency_ms, payload=body, force=True)

    def _on_transition(self, transition: BreakerTransition) -> None:
        log.warning("llm breaker %s: %s -> %s (%s)", self.provider_name,
                    transition.from_state.value, transition.to_state.value, transition.reason)
        if self._store is not None:
            self._store.add_transition(transition.at_ms, self.provider_name,
                                       transition.from_state.value, transition.to_state.value,
                                       transition.reason, transition.failures_in_window)
        self._emit(EVENT_BREAKER, reason=transition.reason, payload={
            "from": transition.from_state.value, "to": transition.to_state.value,
            "state_value": transition.to_state.metric_value,
            "failures_in_window": transition.failures_in_window})

    def _on_alert(self, alert: BudgetAlert) -> None:
        log.warning("LLM budget utilization reached %d%% (spent %.6f of %g USD)",
                    alert.threshold, alert.spent_usd, alert.budget_usd)
        with self._metrics_lock:
            self._alerts_total[alert.threshold] += 1
        if self._store is not None:
            self._store.add_alert(alert.at_ms, alert.window_start_ms, alert.threshold,
                                  alert.spent_usd, alert.budget_usd)
        self._emit(EVENT_BUDGET_ALERT, reason=f"threshold_{alert.threshold}", payload={
            "threshold": alert.threshold, "spent_usd": alert.spent_usd,
            "budget_usd": alert.budget_usd, "utilization_percent": alert.utilization_percent,
            "window": format_timestamp(alert.window_start_ms)})

    def _throttle_record(self, decision: str, utilization: float | None,
                         projected: float | None, wait_ms: float) -> None:
        if self._store is not None:
            self._store.add_throttle(self._clock.now(), self.provider_name, decision,
                                     utilization, projected, wait_ms)
        self._emit(EVENT_THROTTLE, reason=decision, payload={
            "utilization_percent": utilization, "projected_total": projected,
            "wait_ms": wait_ms})

    # -- the call ----------------------------------------------------------------------------
    def _prepared(self, request: ChatRequest) -> ChatRequest:
        if not self.redact or self._redactor is None:
            return request
        redact = self._redactor
        return replace(
            request,
            system=redact(request.system) if request.system else request.system,
            messages=tuple(ChatMessage(m.role, redact(m.content)) for m in request.messages),
        )

    def _reservation_cost(self, request: ChatRequest, model: str) -> Decimal:
        texts = [m.content for m in request.messages] + ([request.system or ""])
        input_bound = sum(len(t.encode("utf-8")) for t in texts) + 8 * len(texts) + 16
        output_bound = request.max_tokens or self.settings.max_tokens
        return self.settings.price_for(model).cost(input_bound, output_bound)

    def _estimate_usage(self, request: ChatRequest, text: str) -> Usage:
        prompt = sum(estimate_tokens(m.content) for m in request.messages)
        return Usage(prompt + estimate_tokens(request.system or ""), estimate_tokens(text))

    def _wait_for_capacity(self) -> None:
        """Token projection (seed 000 §3) then the request limiter; sleeps through ``sleep``."""
        waited = 0.0
        projection = self.projector.project(queue_depth=1)
        if projection.should_throttle:
            wait = self.projector.wait_until_under_ms(1)
            if waited + wait > self.settings.max_throttle_wait_ms:
                self._throttle_record("reject", projection.utilization_percent,
                                      projection.projected_total, wait)
                raise RateLimited(
                    f"{self.provider_name}: token projection at "
                    f"{projection.utilization_percent:.1f}% of the window; would wait "
                    f"{wait:.0f} ms (> {self.settings.max_throttle_wait_ms:.0f} ms allowed)")
            self._throttle_record("wait_tokens", projection.utilization_percent,
                                  projection.projected_total, wait)
            self._sleep(wait)
            waited += wait
        while (wait := self.limiter.acquire()) > 0:
            if waited + wait > self.settings.max_throttle_wait_ms:
                self._throttle_record("reject", None, None, wait)
                raise RateLimited(f"{self.provider_name}: request rate limit "
                                  f"({self.settings.requests_per_minute}/min) would wait "
                                  f"{wait:.0f} ms")
            self._throttle_record("wait_requests", None, None, wait)
            self._sleep(wait)
            waited += wait

    def complete(self, request: ChatRequest, *, purpose: str = "chat",
                 expect_json: bool = False, model: str | None = None) -> ChatResponse:
        """Send ``request`` through the resilience stack and return the answer.

        Args:
            request: Messages and limits (redacted here when redaction is on).
            purpose: Label for events and ledger rows (``extract``, ``summarize`` ...).
            expect_json: Streams are validated (and repaired) as JSON on completion.
            model: Model override for this call.

        Raises:
            ProviderNotConfigured: no provider.
            CircuitOpen: the breaker refused the call.
            BudgetExceeded: the call could push spend over the daily budget.
            RateLimited: throttling would wait longer than ``max_throttle_wait_ms``.
            ProviderError: the last attempt failed (or a non-retryable failure).
        """
        if self._provider is None:
            raise ProviderNotConfigured(
                "no LLM provider configured (set MNEMOSCOPE_LLM_PROVIDER, "
                "MNEMOSCOPE_LLM_BASE_URL and MNEMOSCOPE_LLM_MODEL)")
        provider = self._provider
        model_name = model or self.settings.model
        prepared = self._prepared(request)
        call_id = uuid.uuid4().hex
        attempts = self.settings.max_attempts
        for attempt in range(attempts):
            row = CallRow(self._clock.now(), call_id, self.provider_name, model_name, purpose,
                          attempt + 1, "rejected")
            if not self.breaker.can_execute():
                retry_in = self.breaker.retry_in_ms()
                self._reject(row, "circuit_open", f"retry in {retry_in:.0f} ms")
                raise CircuitOpen(f"{self.provider_name}: circuit breaker is open; "
                                  f"next probe in {retry_in / 1000:.1f} s")
            try:
                self._wait_for_capacity()
            except RateLimited as exc:
                self._reject(row, "rate_limited", str(exc))
                raise
            reservation = self._reserve(prepared, model_name, row)
            started = self._clock.now()
            try:
                response = self._attempt(provider, prepared, model_name, expect_json)
            except ProviderError as exc:
                latency = self._clock.now() - started
                self._failed_attempt(exc, reservation, prepared, model_name, row, latency,
                                     attempt, attempts)
                if not exc.retryable or attempt + 1 >= attempts:
                    raise
                delay = self.backoff.calculate_delay(attempt)
                if exc.retry_after_ms is not None:
                    delay = max(delay, exc.retry_after_ms)
                self._emit(EVENT_RETRY, reason=exc.failure, payload={
                    "attempt": attempt + 1, "next_attempt": attempt + 2, "delay_ms": delay,
                    "status": exc.status, "retry_after_ms": exc.retry_after_ms,
                    "call_id": call_id, "purpose": purpose})
                log.info("llm %s attempt %d failed (%s); retrying in %.0f ms",
                         self.provider_name, attempt + 1, exc.failure, delay)
                self._sleep(delay)
                continue
            return self._succeeded(response, reservation, prepared, model_name, row,
                                   self._clock.now() - started, attempt)
        raise LLMError(f"{self.provider_name}: no attempt made")  # pragma: no cover

    def _reject(self, row: CallRow, reason: str, detail: str) -> None:
        if self._store is not None:
            self._store.add_call(replace(row, failure=reason, error=detail))
        self._emit(EVENT_CALL, reason=reason, payload={
            "outcome": "rejected", "attempt": row.attempt, "purpose": row.purpose,
            "call_id": row.call_id, "detail": detail})

    def _reserve(self, request: ChatRequest, model: str, row: CallRow) -> Reservation:
        estimate = self._reservation_cost(request, model)
        reservation = self.budget.reserve(float(estimate))
        if reservation is None:
            decision = self.budget.handle_exact_budget_request(float(estimate))
            detail = (f"needs up to {estimate:.6f} USD; spent {self.budget.spent_usd:.6f} of "
                      f"{self.budget.budget_usd:.2f}")
            self._reject(row, "budget_exceeded", detail)
            raise BudgetExceeded(f"daily LLM budget: this call {detail} "
                                 f"(shortfall {decision.shortfall or 0:.6f} USD)")
        return reservation

    def _attempt(self, provider: LLMProvider, request: ChatRequest, model: str,
                 expect_json: bool) -> ChatResponse:
        if not self.settings.stream:
            return provider.complete(request, model)
        assembler = StreamingAssembler(self._clock, expect_json=expect_json,
                                       idle_timeout_ms=self.settings.read_timeout_s * 1000)
        deadline = self._clock.now() + self.settings.total_timeout_s * 1000
        events = provider.stream(request, model)
        try:
            for event in events:
                result = assembler.process_chunk(event)
                if self._clock.now() > deadline:
                    raise ProviderError(
                        provider.name, "timeout",
                        f"answer not complete after {self.settings.total_timeout_s:g} s",
                        retryable=True, partial_output_tokens=estimate_tokens(assembler.buffer))
                if result.type == "error":
                    failure = "stream_error" if event.type == "error" else "invalid_stream"
                    raise ProviderError(provider.name, failure, result.error, retryable=True,
                                        partial_output_tokens=estimate_tokens(assembler.buffer))
                if result.type == "complete":
                    meta = event.metadata
                    reported = bool(meta.get("usage_reported"))
                    usage = Usage(int(meta.get("input_tokens", 0)),
                                  int(meta.get("output_tokens", 0)))
                    return ChatResponse(result.buffer, usage, model,
                                        str(meta.get("finish_reason", "")), streamed=True,
                                        was_repaired=result.was_repaired,
                                        chunk_count=result.chunk_count, usage_reported=reported,
                                        raw_text=assembler.buffer if result.was_repaired
                                        else None)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        raise ProviderError(provider.name, "truncated",
                            "stream ended before its terminal event", retryable=True,
                            partial_output_tokens=estimate_tokens(assembler.buffer))

    def _failed_attempt(self, exc: ProviderError, reservation: Reservation,
                        request: ChatRequest, model: str, row: CallRow, latency: float,
                        attempt: int, attempts: int) -> None:
        if exc.status is None or exc.status in (408, 429) or exc.status >= 500:
            self.breaker.record_failure()  # 4xx config errors say nothing of provider health
        cost = Decimal(0)
        usage = Usage()
        if exc.partial_output_tokens:
            # A cut stream was generated and is billed: charge prompt + what arrived.
            usage = Usage(self._estimate_usage(request, "").input_tokens,
                          exc.partial_output_tokens)
            cost = self.settings.price_for(model).cost(usage.input_tokens, usage.output_tokens)
        self.budget.settle(reservation, float(cost))
        retrying = exc.retryable and attempt + 1 < attempts
        outcome = "retry" if retrying else "failed"
        self._record_latency(latency, row.purpose)
        if self._store is not None:
            self._store.add_call(replace(row, ts_ms=self._clock.now(), outcome=outcome,
                                         status=exc.status, failure=exc.failure,
                                         input_tokens=usage.input_tokens,
                                         output_tokens=usage.output_tokens, cost=cost,
                                         latency_ms=latency, streamed=self.settings.stream,
                                         error=str(exc)))
        self._emit(EVENT_CALL, reason=exc.failure, latency_ms=latency, payload={
            "outcome": outcome, "attempt": row.attempt, "purpose": row.purpose,
            "call_id": row.call_id, "status": exc.status, "cost_usd": float(cost)})
        log.info("llm %s attempt %d %s: %s", self.provider_name, row.attempt, outcome,
                 exc.failure)

    def _succeeded(self, response: ChatResponse, reservation: Reservation,
                   request: ChatRequest, model: str, row: CallRow, latency: float,
                   attempt: int) -> ChatResponse:
        self.breaker.record_success()
        usage = response.usage
        if not response.usage_reported or usage.total_tokens == 0:
            usage = self._estimate_usage(request, response.text)
        cost = self.settings.price_for(model).cost(usage.input_tokens, usage.output_tokens)
        self.projector.record(usage.total_tokens)
        self._record_latency(latency, row.purpose)
        if self._store is not None:
            self._store.add_call(replace(row, ts_ms=self._clock.now(), outcome="ok",
                                         input_tokens=usage.input_tokens,
                                         output_tokens=usage.output_tokens, cost=cost,
                                         latency_ms=latency, streamed=response.streamed))
        # Settle after the ledger row so a restart mid-way never forgets spend it alerted on.
        self.budget.settle(reservation, float(cost))
        self._emit(EVENT_CALL, reason="ok", latency_ms=latency, payload={
            "outcome": "ok", "attempt": row.attempt, "purpose": row.purpose,
            "call_id": row.call_id, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cost_usd": float(cost),
            "streamed": response.streamed, "was_repaired": response.was_repaired,
            "finish_reason": response.finish_reason})
        log.info("llm %s ok: %d+%d tokens, %.6f USD, %.0f ms", self.provider_name,
                 usage.input_tokens, usage.output_tokens, float(cost), latency)
        return replace(response, usage=usage, attempts=attempt + 1, cost_usd=float(cost))
