"""Seed 000 §2/§10: exponential backoff, cap, and deterministic jitter (DESIGN decision 9)."""

from __future__ import annotations

import pytest

from engine.errors import ConfigInvalid
from engine.llm import DeterministicRNG, ExponentialBackoff
from engine.llm.backoff import BackoffConfig


def test_deterministic_jitter_follows_the_lcg_definition() -> None:
    backoff = ExponentialBackoff(BackoffConfig(), DeterministicRNG(12345))
    # DESIGN decision 9: exact integer LCG arithmetic gives 62, -78, 70 (not the seed's
    # 42, -137, 189, which do not follow from its own definition).
    assert [backoff.get_jitter(200) for _ in range(3)] == [62, -78, 70]


def test_same_seed_same_sequence() -> None:
    a = ExponentialBackoff(rng=DeterministicRNG(7))
    b = ExponentialBackoff(rng=DeterministicRNG(7))
    assert [a.calculate_delay(i) for i in range(6)] == [b.calculate_delay(i) for i in range(6)]


def test_exponential_growth_and_cap() -> None:
    backoff = ExponentialBackoff(rng=DeterministicRNG(1))
    assert [backoff.base_delay(i) for i in range(7)] == [500, 1000, 2000, 4000, 8000, 8000, 8000]
    assert backoff.base_delay(10_000) == 8000  # no overflow on absurd attempts


def test_delay_is_capped_base_plus_jitter() -> None:
    rng = DeterministicRNG(0)
    rng.set_sequence([0.0, 0.999999, 0.5])
    backoff = ExponentialBackoff(BackoffConfig(), rng)
    assert backoff.calculate_delay(0) == 500 - 200
    assert backoff.calculate_delay(5) == 8000 + 200
    assert backoff.calculate_delay(1) == 1000 + 0


def test_jitter_stays_in_range() -> None:
    backoff = ExponentialBackoff(rng=DeterministicRNG(99))
    values = [backoff.get_jitter(200) for _ in range(2000)]
    assert min(values) >= -200
    assert max(values) <= 200
    assert len(set(values)) > 300


def test_config_is_validated() -> None:
    with pytest.raises(ConfigInvalid, match="jitter_range_ms"):
        BackoffConfig(jitter_range_ms=-1)
    with pytest.raises(ConfigInvalid, match="attempt"):
        ExponentialBackoff().base_delay(-1)
