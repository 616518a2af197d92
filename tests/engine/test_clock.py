import math

import pytest

from engine.clock import DeterministicClock, DeterministicRNG, SystemClock, SystemRNG


def jitter(rng: DeterministicRNG, spread: int) -> int:
    # seed 000 §10 getJitter: floor(next * (2r + 1)) - r
    return math.floor(rng.next_float() * (spread * 2 + 1)) - spread


def test_seeded_lcg_jitter_follows_the_definition() -> None:
    # DESIGN decision 9: exact integer arithmetic gives 62, -78, 70 (not the seed's 42, -137, 189).
    rng = DeterministicRNG(12345)
    assert [jitter(rng, 200) for _ in range(3)] == [62, -78, 70]


def test_reset_replays_and_sequence_cycles() -> None:
    rng = DeterministicRNG(7)
    first = [rng.next_float() for _ in range(3)]
    rng.reset(7)
    assert [rng.next_float() for _ in range(3)] == first
    rng.set_sequence([0.25, 0.5])
    assert [rng.next_float() for _ in range(3)] == [0.25, 0.5, 0.25]
    with pytest.raises(ValueError, match="at least one"):
        rng.set_sequence([])


def test_deterministic_clock_moves_only_when_told() -> None:
    clock = DeterministicClock(1000.0)
    assert clock.now() == 1000.0
    clock.advance(500)
    assert clock.now() == 1500.0
    clock.reset(5)
    assert clock.now() == 5.0


def test_system_sources_are_in_range() -> None:
    assert SystemClock().now() > 1.7e12
    values = [SystemRNG(1).next_float() for _ in range(100)]
    assert all(0.0 <= v < 1.0 for v in values)
