"""Token projection for proactive rate limiting (seed 000 §3) and a request rate limiter.

:class:`TokenProjector` keeps the token usage of recent calls and projects the window's total if
``queue_depth`` more calls of average size were made; above 80 % of the provider's
tokens-per-minute limit (scaled to the window) the caller should throttle.
:class:`RateLimiter` is a sliding-window requests-per-minute limiter; both take a Clock
(seed 000 §10 injection points).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from engine.clock import Clock, SystemClock
from engine.errors import ConfigInvalid

__all__ = [
    "DEFAULT_TOKENS_PER_MINUTE",
    "THROTTLE_PERCENT",
    "ProjectionResult",
    "RateLimiter",
    "TokenProjector",
    "TokenUsage",
    "token_limit_for_window",
]

# seed 000 §3 getTokenLimitForWindow: TOKENS_PER_MINUTE, keyed by MEMORY_LLM_PRIMARY.
DEFAULT_TOKENS_PER_MINUTE: Mapping[str, int] = MappingProxyType({"claude": 40_000,
                                                                  "openai": 90_000})
THROTTLE_PERCENT = 80.0
"""seed 000 §3 step 5: throttle when projected utilization is strictly above 80 %."""


def token_limit_for_window(tokens_per_minute: int, window_ms: float) -> int:
    """``floor(tpm / 60000 * window_ms)`` (seed 000 §3)."""
    return math.floor(tokens_per_minute / 60_000 * window_ms)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens one call used, stamped with the clock time it finished."""

    timestamp: float
    total_tokens: int


@dataclass(frozen=True, slots=True)
class ProjectionResult:
    """Seed 000 §3 ``ProjectionResult``; fields are zero when the window holds no usage."""

    projected_tokens: float
    projected_total: float
    utilization_percent: float
    should_throttle: bool
    window_tokens_used: int
    window_limit: int
    window_start: float


class TokenProjector:
    """Recent token usage and the seed's projection over it. Thread-safe.

    Args:
        tokens_per_minute: The provider's TPM limit (see :data:`DEFAULT_TOKENS_PER_MINUTE`).
        clock: Time source.
        window_ms: Default projection window (one minute).
    """

    def __init__(self, tokens_per_minute: int, clock: Clock | None = None,
                 window_ms: float = 60_000.0) -> None:
        if not isinstance(tokens_per_minute, int) or tokens_per_minute <= 0:
            raise ConfigInvalid("tokens_per_minute", tokens_per_minute, "must be an integer > 0")
        self.tokens_per_minute = tokens_per_minute
        self.window_ms = window_ms
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._history: deque[TokenUsage] = deque()
        self._lock = threading.Lock()

    def record(self, total_tokens: int, at: float | None = None) -> None:
        """Add one call's usage (stamped now unless ``at`` is given)."""
        stamp = self._clock.now() if at is None else at
        with self._lock:
            self._history.append(TokenUsage(stamp, int(total_tokens)))
            # Keep a bounded history: anything older than ten windows can never count again.
            horizon = stamp - 10 * self.window_ms
            while self._history and self._history[0].timestamp < horizon:
                self._history.popleft()

    def project(self, queue_depth: int, window_ms: float | None = None) -> ProjectionResult:
        """Seed 000 §3 ``projectTokenUsage`` over the recorded history."""
        window = self.window_ms if window_ms is None else window_ms
        now = self._clock.now()
        window_start = now - window
        with self._lock:
            recent = [u for u in self._history if u.timestamp >= window_start]
        limit = token_limit_for_window(self.tokens_per_minute, window)
        if not recent:
            return ProjectionResult(0.0, 0.0, 0.0, False, 0, limit, window_start)
        used = sum(u.total_tokens for u in recent)
        average = used / len(recent)
        projected = average * queue_depth
        total = used + projected
        utilization = (total / limit) * 100 if limit > 0 else math.inf
        return ProjectionResult(projected, total, utilization, utilization > THROTTLE_PERCENT,
                                used, limit, window_start)

    def wait_until_under_ms(self, queue_depth: int) -> float:
        """How long until the oldest usage leaves the window enough to stop throttling.

        Returns 0 when the projection is already under the threshold. Time is simulated by
        dropping the oldest entries one by one; the answer is when the last one that had to go
        leaves the window.
        """
        now = self._clock.now()
        window_start = now - self.window_ms
        with self._lock:
            recent = [u for u in self._history if u.timestamp >= window_start]
        limit = token_limit_for_window(self.tokens_per_minute, self.window_ms)
        wait = 0.0
        while recent:
            used = sum(u.total_tokens for u in recent)
            total = used + used / len(recent) * queue_depth
            if limit > 0 and total / limit * 100 <= THROTTLE_PERCENT:
                return wait
            oldest = recent.pop(0)
            wait = max(wait, oldest.timestamp + self.window_ms - now + 1.0)
        return wait


class RateLimiter:
    """Sliding-window limiter: at most ``requests_per_minute`` calls in any ``window_ms``.

    ``acquire()`` never sleeps: it returns 0 and records the call when one is allowed now, else
    the milliseconds to wait before asking again. The caller sleeps through its injected sleep.
    """

    def __init__(self, requests_per_minute: int, clock: Clock | None = None,
                 window_ms: float = 60_000.0) -> None:
        if not isinstance(requests_per_minute, int) or requests_per_minute <= 0:
            raise ConfigInvalid("requests_per_minute", requests_per_minute,
                                "must be an integer > 0")
        self.requests_per_minute = requests_per_minute
        self.window_ms = window_ms
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._calls: deque[float] = deque()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Record a call and return 0, or return the wait in ms without recording."""
        now = self._clock.now()
        with self._lock:
            while self._calls and self._calls[0] <= now - self.window_ms:
                self._calls.popleft()
            if len(self._calls) < self.requests_per_minute:
                self._calls.append(now)
                return 0.0
            return self._calls[0] + self.window_ms - now

    def in_window(self) -> int:
        """Calls counted in the current window."""
        now = self._clock.now()
        with self._lock:
            return sum(1 for t in self._calls if t > now - self.window_ms)
