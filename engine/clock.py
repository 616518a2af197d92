"""Injectable time and randomness (seed 000 §10).

Every component with time or randomness takes a :class:`Clock` or :class:`RNG`. Production code
uses :class:`SystemClock` / :class:`SystemRNG`; tests use the deterministic ones.

Seed 000's example jitter values (42, −137, 189 for seed 12345) do not follow from its own LCG;
exact integer arithmetic gives 62, −78, 70 (DESIGN decision 9). We implement the definition.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "RNG",
    "Clock",
    "DeterministicClock",
    "DeterministicRNG",
    "SystemClock",
    "SystemRNG",
]

_LCG_MULTIPLIER = 1103515245
_LCG_INCREMENT = 12345
_LCG_MASK = 0x7FFFFFFF


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time in milliseconds since the Unix epoch (UTC)."""

    def now(self) -> float:
        """Return milliseconds since 1970-01-01T00:00:00Z."""
        ...


@runtime_checkable
class RNG(Protocol):
    """A source of uniform floats in [0, 1)."""

    def next_float(self) -> float:
        """Return the next float in [0, 1)."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> float:
        """Return the current time in epoch milliseconds."""
        return time.time() * 1000.0


class SystemRNG:
    """Randomness from Python's ``random`` module (not for secrets)."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def next_float(self) -> float:
        """Return a uniform float in [0, 1)."""
        return self._random.random()


class DeterministicClock:
    """A clock that only moves when told to (seed 000 §10 ``TestClock``).

    Thread-safe, so a test can advance it while a worker reads it.
    """

    def __init__(self, initial_ms: float = 0.0) -> None:
        self._now = float(initial_ms)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the current fake time in epoch milliseconds."""
        with self._lock:
            return self._now

    def reset(self, value_ms: float) -> None:
        """Set the clock to ``value_ms``."""
        with self._lock:
            self._now = float(value_ms)

    def advance(self, ms: float) -> None:
        """Move the clock forward by ``ms`` milliseconds."""
        with self._lock:
            self._now += ms


class DeterministicRNG:
    """The seed's LCG, or a fixed sequence (seed 000 §10 ``TestRNG``).

    ``seed = (seed * 1103515245 + 12345) & 0x7fffffff`` then ``seed / 0x7fffffff``. Python
    integers make the multiplication exact, which is what the definition says.
    """

    def __init__(self, seed: int = 0) -> None:
        self._seed = seed & _LCG_MASK
        self._sequence: list[float] | None = None
        self._index = 0

    def next_float(self) -> float:
        """Return the next value of the sequence or the LCG."""
        if self._sequence is not None:
            value = self._sequence[self._index % len(self._sequence)]
            self._index += 1
            return value
        self._seed = (self._seed * _LCG_MULTIPLIER + _LCG_INCREMENT) & _LCG_MASK
        return self._seed / _LCG_MASK

    def reset(self, seed: int) -> None:
        """Restart the LCG from ``seed`` (and the sequence, if one is set, from its start)."""
        self._seed = seed & _LCG_MASK
        self._index = 0

    def set_sequence(self, values: Sequence[float]) -> None:
        """Return ``values`` cyclically from now on instead of the LCG."""
        if not values:
            raise ValueError("set_sequence needs at least one value")
        self._sequence = [float(v) for v in values]
        self._index = 0
