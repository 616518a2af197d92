"""Daily LLM budget with a UTC-midnight window (seed 000 §6), injected clock (§10).

Rules kept from the seed:

* rejection uses a strict ``>``: a request that brings spend to exactly the budget is allowed
  (``handle_exact_budget_request`` says so with a warning);
* a budget of zero or less disables enforcement;
* alerts at 70, 90 and 100 % use ``>=`` and fire once per window;
* the window resets when the clock crosses UTC midnight;
* amounts are validated (finite, non-negative, at most ``Number.MAX_SAFE_INTEGER``).

Money is kept as :class:`decimal.Decimal` built from each float's shortest decimal form, so
``0.7 + 0.2 + 0.1`` is exactly ``1.0`` and the exactly-at-budget edge behaves as a person expects.
For concurrent callers :meth:`BudgetTracker.reserve` checks and holds an amount atomically; the
caller later :meth:`~BudgetTracker.settle` s it with the actual cost or releases it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from engine.clock import Clock, SystemClock
from engine.errors import ValidationError

__all__ = [
    "ALERT_THRESHOLDS",
    "MAX_SAFE_INTEGER",
    "BudgetAlert",
    "BudgetDecision",
    "BudgetTracker",
    "Reservation",
    "to_decimal",
    "utc_midnight_ms",
]

ALERT_THRESHOLDS = (70, 90, 100)
"""seed 000 §6 ``checkThresholds``: percentages that raise an alert once per window."""
MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: the seed's overflow limit for an amount."""


def utc_midnight_ms(now_ms: float) -> float:
    """Epoch ms of the UTC midnight that starts the day containing ``now_ms``."""
    moment = datetime.fromtimestamp(now_ms / 1000.0, tz=UTC)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.timestamp() * 1000.0


def validate_amount(amount: float, field: str = "amount") -> None:
    """Seed 000 §6 ``validateAmount``: finite, >= 0 and <= MAX_SAFE_INTEGER.

    Raises:
        ValidationError: naming ``field`` and the bad value.
    """
    if isinstance(amount, bool) or not isinstance(amount, int | float | Decimal):
        raise ValidationError(field, amount, "amount must be a number")
    if not math.isfinite(amount) or amount < 0:
        raise ValidationError(field, amount, "Invalid amount: must be finite and >= 0")
    if amount > MAX_SAFE_INTEGER:
        raise ValidationError(field, amount, "Amount exceeds safe integer")


def to_decimal(amount: float | Decimal) -> Decimal:
    """The decimal a person would write for ``amount`` (shortest round-trip form)."""
    if isinstance(amount, Decimal):
        return amount
    return Decimal(repr(float(amount)))


@dataclass(frozen=True, slots=True)
class BudgetDecision:
    """Seed 000 §6 ``BudgetDecision``."""

    allowed: bool
    reason: str | None = None
    warning: str | None = None
    shortfall: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetAlert:
    """A threshold crossed for the first time in a window."""

    threshold: int
    spent_usd: float
    budget_usd: float
    utilization_percent: float
    window_start_ms: float
    at_ms: float


@dataclass(frozen=True, slots=True)
class Reservation:
    """An amount held against the budget until settled or released."""

    token: int
    amount: Decimal
    window_start_ms: float


class BudgetTracker:
    """Seed 000 §6 ``BudgetTracker``; thread-safe.

    Args:
        budget_usd: Daily budget; zero or negative disables enforcement.
        clock: Time source for the UTC-midnight window.
        on_alert: Called (outside the lock) with each :class:`BudgetAlert` as it fires.
    """

    def __init__(self, budget_usd: float, clock: Clock | None = None,
                 on_alert: Callable[[BudgetAlert], None] | None = None) -> None:
        if isinstance(budget_usd, bool) or not isinstance(budget_usd, int | float) or \
                not math.isfinite(budget_usd):
            raise ValidationError("budget_usd", budget_usd, "must be a finite number")
        self._budget = to_decimal(budget_usd)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._on_alert = on_alert
        self._lock = threading.Lock()
        self._window_start = utc_midnight_ms(self._clock.now())
        self._spent = Decimal(0)
        self._reserved: dict[int, Reservation] = {}
        self._next_token = 1
        self._warned: set[int] = set()

    # -- read side ---------------------------------------------------------------------------
    @property
    def budget_usd(self) -> float:
        """The configured daily budget."""
        return float(self._budget)

    @property
    def enabled(self) -> bool:
        """False when the budget is zero or negative (seed 000 §6: enforcement disabled)."""
        return self._budget > 0

    def get_current_window(self) -> float:
        """Epoch ms of the current window's start (UTC midnight of the clock's day)."""
        return utc_midnight_ms(self._clock.now())

    @property
    def window_start_ms(self) -> float:
        """Start of the window the tracker is in (after applying a pending reset)."""
        with self._lock:
            self._check_window_reset()
            return self._window_start

    @property
    def spent_usd(self) -> float:
        """Spend recorded in the current window."""
        with self._lock:
            self._check_window_reset()
            return float(self._spent)

    @property
    def reserved_usd(self) -> float:
        """Amount currently held by open reservations."""
        with self._lock:
            self._check_window_reset()
            return float(sum((r.amount for r in self._reserved.values()), Decimal(0)))

    @property
    def alerts(self) -> tuple[int, ...]:
        """Thresholds already alerted in the current window, ascending."""
        with self._lock:
            self._check_window_reset()
            return tuple(sorted(self._warned))

    def utilization_percent(self) -> float:
        """Spend as a percentage of the budget (0 when disabled)."""
        with self._lock:
            self._check_window_reset()
            if self._budget <= 0:
                return 0.0
            return float(self._spent / self._budget * 100)

    # -- decisions ---------------------------------------------------------------------------
    def can_spend(self, estimated_cost: float) -> bool:
        """True unless ``spent + reserved + estimated > budget`` (strict ``>``, seed 000 §6)."""
        validate_amount(estimated_cost, "estimated_cost")
        with self._lock:
            self._check_window_reset()
            return self._allows(to_decimal(estimated_cost))

    def handle_exact_budget_request(self, request_cost: float) -> BudgetDecision:
        """Seed 000 §6 edge case: a request equal to what remains is allowed, with a warning."""
        validate_amount(request_cost, "request_cost")
        cost = to_decimal(request_cost)
        with self._lock:
            self._check_window_reset()
            if self._budget <= 0:
                return BudgetDecision(allowed=True)
            remaining = self._budget - self._spent - self._held()
        if cost == remaining:
            return BudgetDecision(allowed=True,
                                  warning="This request will exactly exhaust the budget")
        if cost > remaining:
            return BudgetDecision(allowed=False, reason="budget_exceeded",
                                  shortfall=float(cost - remaining))
        return BudgetDecision(allowed=True)

    def reserve(self, estimated_cost: float) -> Reservation | None:
        """Hold ``estimated_cost`` if :meth:`can_spend` allows it; None when it would exceed."""
        validate_amount(estimated_cost, "estimated_cost")
        amount = to_decimal(estimated_cost)
        with self._lock:
            self._check_window_reset()
            if not self._allows(amount):
                return None
            reservation = Reservation(self._next_token, amount, self._window_start)
            self._next_token += 1
            self._reserved[reservation.token] = reservation
            return reservation

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation without spending (the call did not happen or cost nothing)."""
        with self._lock:
            self._reserved.pop(reservation.token, None)

    def settle(self, reservation: Reservation, actual_cost: float) -> tuple[BudgetAlert, ...]:
        """Replace a reservation by the actual cost; returns the alerts that fired."""
        validate_amount(actual_cost, "actual_cost")
        with self._lock:
            self._reserved.pop(reservation.token, None)
        return self.record_spend(actual_cost)

    def record_spend(self, actual_cost: float) -> tuple[BudgetAlert, ...]:
        """Add ``actual_cost`` to the window's spend; returns the alerts that fired."""
        validate_amount(actual_cost, "actual_cost")
        with self._lock:
            self._check_window_reset()
            self._spent += to_decimal(actual_cost)
            fired = self._check_thresholds()
        if self._on_alert is not None:
            for alert in fired:
                self._on_alert(alert)
        return fired

    def restore(self, window_start_ms: float, spent: Iterable[float | Decimal],
                alerts: Iterable[int]) -> None:
        """Load persisted spend and alerts (e.g. from the ledger) after a restart.

        Ignored when ``window_start_ms`` is not the current window: yesterday's spend does not
        count today.
        """
        with self._lock:
            self._check_window_reset()
            if window_start_ms != self._window_start:
                return
            self._spent = sum((to_decimal(s) for s in spent), Decimal(0))
            self._warned = {int(a) for a in alerts if int(a) in ALERT_THRESHOLDS}

    # -- internals (lock held) ---------------------------------------------------------------
    def _held(self) -> Decimal:
        return sum((r.amount for r in self._reserved.values()), Decimal(0))

    def _allows(self, amount: Decimal) -> bool:
        if self._budget <= 0:  # seed 000 §6: zero or negative disables enforcement
            return True
        # seed 000 §6 CRITICAL OPERATOR: reject only if (spent + estimated) > budget.
        return not (self._spent + self._held() + amount > self._budget)

    def _check_window_reset(self) -> None:
        current = utc_midnight_ms(self._clock.now())
        if current > self._window_start:
            self._window_start = current
            self._spent = Decimal(0)
            self._warned.clear()
            # Reservations taken yesterday no longer hold today's budget.
            self._reserved.clear()

    def _check_thresholds(self) -> tuple[BudgetAlert, ...]:
        if self._budget <= 0:
            return ()
        fired: list[BudgetAlert] = []
        utilization = self._spent / self._budget * 100
        for threshold in ALERT_THRESHOLDS:
            # seed 000 §6: >= so that exactly 70 / 90 / 100 % alert.
            if utilization >= threshold and threshold not in self._warned:
                self._warned.add(threshold)
                fired.append(BudgetAlert(threshold, float(self._spent), float(self._budget),
                                         float(utilization), self._window_start,
                                         self._clock.now()))
        return tuple(fired)
