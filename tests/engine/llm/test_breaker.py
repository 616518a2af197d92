"""Seed 000 §4: circuit breaker transitions closed → open → half-open → closed / open."""

from __future__ import annotations

from engine.llm import CircuitBreaker, DeterministicClock
from engine.llm.breaker import BreakerState, BreakerTransition, CircuitConfig


def _state(breaker: CircuitBreaker) -> BreakerState:
    return breaker.state


def _breaker() -> tuple[CircuitBreaker, DeterministicClock, list[BreakerTransition]]:
    clock = DeterministicClock(1_000_000.0)
    seen: list[BreakerTransition] = []
    return CircuitBreaker(CircuitConfig(), clock, seen.append), clock, seen


def test_defaults_match_the_seed() -> None:
    config = CircuitConfig()
    assert (config.error_threshold, config.window_size, config.window_ms, config.cooldown_ms,
            config.probes_required) == (0.5, 20, 60_000, 30_000, 3)


def test_opens_at_half_of_window_size_failures() -> None:
    breaker, _clock, seen = _breaker()
    for _ in range(9):
        breaker.record_failure()
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.failure_rate() == 0.45
    breaker.record_failure()  # 10 / 20 = 0.5 >= 0.5
    assert _state(breaker) is BreakerState.OPEN
    assert not breaker.can_execute()
    assert [(t.from_state, t.to_state, t.reason) for t in seen] == [
        (BreakerState.CLOSED, BreakerState.OPEN, "error_threshold_reached")]


def test_failures_outside_the_window_do_not_count() -> None:
    breaker, clock, _ = _breaker()
    for _ in range(9):
        breaker.record_failure()
    clock.advance(60_000)  # cutoff is strict: t > now - windowMs
    breaker.record_failure()
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.failure_rate() == 0.05


def test_cooldown_half_opens_then_probes_close() -> None:
    breaker, clock, seen = _breaker()
    for _ in range(10):
        breaker.record_failure()
    clock.advance(29_999)
    assert not breaker.can_execute()
    assert breaker.retry_in_ms() == 1
    clock.advance(1)
    assert breaker.can_execute()
    assert _state(breaker) is BreakerState.HALF_OPEN
    breaker.record_success()
    breaker.record_success()
    assert _state(breaker) is BreakerState.HALF_OPEN
    breaker.record_success()
    assert _state(breaker) is BreakerState.CLOSED
    assert [t.to_state for t in seen] == [BreakerState.OPEN, BreakerState.HALF_OPEN,
                                          BreakerState.CLOSED]
    assert [t.reason for t in seen][1:] == ["cooldown_elapsed", "probes_succeeded"]


def test_failed_probe_reopens_and_restarts_cooldown() -> None:
    breaker, clock, seen = _breaker()
    for _ in range(10):
        breaker.record_failure()
    clock.advance(30_000)
    assert breaker.can_execute()
    breaker.record_success()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.OPEN
    assert seen[-1].reason == "probe_failed"
    clock.advance(29_000)
    assert not breaker.can_execute()
    clock.advance(1_000)
    assert breaker.can_execute()


def test_metric_values() -> None:
    assert [s.metric_value for s in BreakerState] == [0, 1, 2]


def test_successes_in_closed_state_do_not_transition() -> None:
    breaker, _clock, seen = _breaker()
    for _ in range(50):
        breaker.record_success()
    assert _state(breaker) is BreakerState.CLOSED
    assert seen == []
