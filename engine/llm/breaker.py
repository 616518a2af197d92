"""The circuit breaker state machine of seed 000 §4, with an injected clock.

States: ``closed`` (calls flow; failures are counted), ``open`` (calls are refused until the
cooldown has passed), ``half_open`` (calls flow as probes; ``probes_required`` successes close the
circuit, one failure re-opens it).

The failure rate is ``failures within window_ms / window_size`` exactly as the seed defines it,
so with the defaults ten failures inside one minute open the circuit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from engine.clock import Clock, SystemClock
from engine.errors import ConfigInvalid

__all__ = ["BreakerState", "BreakerTransition", "CircuitBreaker", "CircuitConfig"]


class BreakerState(StrEnum):
    """Seed 000 §4 states; ``metric_value`` is the ``memory_llm_circuit_state`` gauge value."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    @property
    def metric_value(self) -> int:
        """0 closed, 1 open, 2 half-open (seed 000 §4 ``getStateValue``)."""
        return {"closed": 0, "open": 1, "half_open": 2}[self.value]


@dataclass(frozen=True, slots=True)
class CircuitConfig:
    """Seed 000 §4 ``DEFAULT_CIRCUIT_CONFIG``."""

    error_threshold: float = 0.5
    window_size: int = 20
    window_ms: float = 60_000.0
    cooldown_ms: float = 30_000.0
    probes_required: int = 3

    def __post_init__(self) -> None:
        if not 0.0 < self.error_threshold <= 1.0:
            raise ConfigInvalid("circuit.error_threshold", self.error_threshold,
                                "must be in (0, 1]")
        for name in ("window_size", "probes_required"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigInvalid(f"circuit.{name}", value, "must be an integer >= 1")
        for name in ("window_ms", "cooldown_ms"):
            if getattr(self, name) < 0:
                raise ConfigInvalid(f"circuit.{name}", getattr(self, name), "must be >= 0")


@dataclass(frozen=True, slots=True)
class BreakerTransition:
    """One state change, handed to the transition listener (event + ledger row)."""

    at_ms: float
    from_state: BreakerState
    to_state: BreakerState
    reason: str
    failures_in_window: int


class CircuitBreaker:
    """Seed 000 §4 ``CircuitBreaker``; thread-safe.

    Args:
        config: Thresholds and timings.
        clock: Time source (seed 000 §10 injection point).
        on_transition: Called (outside the lock) with every :class:`BreakerTransition`.
    """

    def __init__(
        self,
        config: CircuitConfig | None = None,
        clock: Clock | None = None,
        on_transition: Callable[[BreakerTransition], None] | None = None,
    ) -> None:
        self.config = config if config is not None else CircuitConfig()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._on_transition = on_transition
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failures: list[float] = []
        self._last_state_change = self._clock.now()
        self._successful_probes = 0

    @property
    def state(self) -> BreakerState:
        """The current state, after applying an elapsed cooldown (open -> half_open)."""
        pending: list[BreakerTransition] = []
        with self._lock:
            self._update_state(pending)
            state = self._state
        self._notify(pending)
        return state

    def can_execute(self) -> bool:
        """True unless the circuit is open (an elapsed cooldown half-opens it first)."""
        return self.state is not BreakerState.OPEN

    def record_success(self) -> None:
        """Count a success; in half-open, ``probes_required`` of them close the circuit."""
        pending: list[BreakerTransition] = []
        with self._lock:
            if self._state is BreakerState.HALF_OPEN:
                self._successful_probes += 1
                if self._successful_probes >= self.config.probes_required:
                    self._transition(BreakerState.CLOSED, "probes_succeeded", pending)
            self._clean_failures()
        self._notify(pending)

    def record_failure(self) -> None:
        """Count a failure; a half-open circuit re-opens, a closed one opens at the threshold."""
        pending: list[BreakerTransition] = []
        with self._lock:
            self._failures.append(self._clock.now())
            self._clean_failures()
            if self._state is BreakerState.HALF_OPEN:
                self._transition(BreakerState.OPEN, "probe_failed", pending)
            elif (self._state is BreakerState.CLOSED
                  and self._failure_rate() >= self.config.error_threshold):
                self._transition(BreakerState.OPEN, "error_threshold_reached", pending)
        self._notify(pending)

    def failure_rate(self) -> float:
        """Failures inside ``window_ms`` divided by ``window_size`` (seed 000 §4)."""
        with self._lock:
            self._clean_failures()
            return self._failure_rate()

    def retry_in_ms(self) -> float:
        """Milliseconds until an open circuit half-opens; 0 when it is not open."""
        with self._lock:
            if self._state is not BreakerState.OPEN:
                return 0.0
            elapsed = self._clock.now() - self._last_state_change
            return max(0.0, self.config.cooldown_ms - elapsed)

    def restore(self, state: BreakerState, last_change_ms: float,
                failures: list[float]) -> None:
        """Load persisted state (e.g. from the ledger after a restart); no transition is emitted.

        Args:
            state: The state of the last recorded transition.
            last_change_ms: When that transition happened (the cooldown counts from it).
            failures: Timestamps of recent failures (those outside ``window_ms`` are dropped).
        """
        with self._lock:
            self._state = state
            self._last_state_change = last_change_ms
            self._failures = sorted(failures)
            self._successful_probes = 0
            self._clean_failures()

    # -- internals (called with the lock held) ---------------------------------------------
    def _update_state(self, pending: list[BreakerTransition]) -> None:
        if self._state is BreakerState.OPEN:
            elapsed = self._clock.now() - self._last_state_change
            if elapsed >= self.config.cooldown_ms:
                self._transition(BreakerState.HALF_OPEN, "cooldown_elapsed", pending)

    def _transition(self, new: BreakerState, reason: str,
                    pending: list[BreakerTransition]) -> None:
        old = self._state
        self._state = new
        self._last_state_change = self._clock.now()
        self._successful_probes = 0
        pending.append(BreakerTransition(self._last_state_change, old, new, reason,
                                         len(self._failures)))

    def _failure_rate(self) -> float:
        return len(self._failures) / self.config.window_size

    def _clean_failures(self) -> None:
        cutoff = self._clock.now() - self.config.window_ms
        self._failures = [t for t in self._failures if t > cutoff]

    def _notify(self, pending: list[BreakerTransition]) -> None:
        if self._on_transition is not None:
            for transition in pending:
                self._on_transition(transition)
