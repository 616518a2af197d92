"""Exponential backoff with injected jitter (seed 000 §2, §10).

``delay(attempt) = min(base * multiplier**attempt, max) + jitter`` where the jitter is
``floor(rng.next_float() * (2 * range + 1)) - range``. With ``DeterministicRNG(12345)`` and range
200 the jitters are 62, −78, 70 (DESIGN decision 9; the seed's 42, −137, 189 do not follow from
its own LCG).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.clock import RNG, SystemRNG
from engine.errors import ConfigInvalid

__all__ = ["BackoffConfig", "ExponentialBackoff"]


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    """Seed 000 §2 ``DEFAULT_BACKOFF_CONFIG``.

    Attributes:
        base_delay_ms: Delay before the first retry (attempt 0), before jitter.
        multiplier: Growth factor per attempt.
        max_delay_ms: Cap applied before the jitter is added.
        jitter_range_ms: Jitter is uniform over the integers in ``[-range, +range]``.
    """

    base_delay_ms: float = 500.0
    multiplier: float = 2.0
    max_delay_ms: float = 8000.0
    jitter_range_ms: int = 200

    def __post_init__(self) -> None:
        for name in ("base_delay_ms", "multiplier", "max_delay_ms"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigInvalid(f"backoff.{name}", value, "must be a finite number >= 0")
        if not isinstance(self.jitter_range_ms, int) or self.jitter_range_ms < 0:
            raise ConfigInvalid("backoff.jitter_range_ms", self.jitter_range_ms,
                                "must be an integer >= 0")


class ExponentialBackoff:
    """Retry delays that grow exponentially, are capped, and carry deterministic-able jitter.

    Args:
        config: Delays and jitter range.
        rng: Source of jitter (seed 000 §10 injection point); defaults to :class:`SystemRNG`.
    """

    def __init__(self, config: BackoffConfig | None = None, rng: RNG | None = None) -> None:
        self.config = config if config is not None else BackoffConfig()
        self._rng: RNG = rng if rng is not None else SystemRNG()

    def get_jitter(self, range_ms: int) -> int:
        """Return an integer jitter in ``[-range_ms, +range_ms]`` drawn from the injected RNG."""
        return math.floor(self._rng.next_float() * (range_ms * 2 + 1)) - range_ms

    def base_delay(self, attempt: int) -> float:
        """The capped exponential delay for ``attempt`` (0-based), without jitter."""
        if attempt < 0:
            raise ConfigInvalid("attempt", attempt, "must be >= 0")
        config = self.config
        try:
            raw = config.base_delay_ms * config.multiplier**attempt
        except OverflowError:
            raw = math.inf
        return float(min(raw, config.max_delay_ms))

    def calculate_delay(self, attempt: int) -> float:
        """Delay in ms before retry number ``attempt`` (0-based): capped base plus jitter.

        Never negative: a jitter larger than a tiny base delay is clipped at 0.
        """
        delay = self.base_delay(attempt) + self.get_jitter(self.config.jitter_range_ms)
        return max(0.0, delay)
