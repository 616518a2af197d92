"""Seed 000 §3: token projection, the 80 % throttle rule, and the request rate limiter."""

from __future__ import annotations

import pytest

from engine.llm import DeterministicClock, TokenProjector
from engine.llm.projection import RateLimiter, token_limit_for_window


def test_limit_for_window() -> None:
    assert token_limit_for_window(40_000, 60_000) == 40_000
    assert token_limit_for_window(90_000, 30_000) == 45_000
    assert token_limit_for_window(40_000, 1_000) == 666  # floor


def test_empty_history_never_throttles() -> None:
    projector = TokenProjector(40_000, DeterministicClock(0))
    result = projector.project(queue_depth=100)
    assert result.projected_tokens == 0
    assert not result.should_throttle


def test_projection_and_strict_80_percent() -> None:
    clock = DeterministicClock(100_000)
    projector = TokenProjector(40_000, clock)
    projector.record(10_000)
    projector.record(6_000)
    # used 16_000, average 8_000; queue 2 -> projected 16_000, total 32_000 = exactly 80 %.
    result = projector.project(queue_depth=2)
    assert result.window_tokens_used == 16_000
    assert result.projected_tokens == 16_000
    assert result.projected_total == 32_000
    assert result.utilization_percent == pytest.approx(80.0)
    assert not result.should_throttle  # seed: > 80, not >=
    assert projector.project(queue_depth=3).should_throttle


def test_old_usage_leaves_the_window() -> None:
    clock = DeterministicClock(0)
    projector = TokenProjector(40_000, clock)
    projector.record(39_000)
    clock.advance(30_000)
    projector.record(1_000)
    assert projector.project(1).should_throttle
    wait = projector.wait_until_under_ms(1)
    assert wait == pytest.approx(30_001)
    clock.advance(wait)
    result = projector.project(1)
    assert result.window_tokens_used == 1_000
    assert not result.should_throttle
    assert projector.wait_until_under_ms(1) == 0


def test_rate_limiter_sliding_window() -> None:
    clock = DeterministicClock(0)
    limiter = RateLimiter(2, clock)
    assert limiter.acquire() == 0
    clock.advance(10_000)
    assert limiter.acquire() == 0
    assert limiter.acquire() == 50_000
    assert limiter.in_window() == 2
    clock.advance(50_000)
    assert limiter.acquire() == 0
