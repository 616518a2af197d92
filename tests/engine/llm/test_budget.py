"""Seed 000 §6: budget edges, exactly-at-budget, alerts once per window, UTC-midnight reset."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ValidationError
from engine.llm import BudgetTracker, DeterministicClock
from engine.llm.budget import BudgetAlert


def _ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0,
        second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp() * 1000


def test_strict_greater_than_allows_exactly_the_budget() -> None:
    tracker = BudgetTracker(10.0, DeterministicClock(_ms(2025, 1, 1, 12)))
    assert tracker.can_spend(10.0)
    assert not tracker.can_spend(10.000001)
    tracker.record_spend(7.5)
    assert tracker.can_spend(2.5)
    assert not tracker.can_spend(2.51)


def test_decimal_exactness_at_the_edge() -> None:
    tracker = BudgetTracker(1.0, DeterministicClock(_ms(2025, 1, 1)))
    for amount in (0.7, 0.2):
        tracker.record_spend(amount)
    # In binary floating point 0.7 + 0.2 + 0.1 > 1.0; the tracker keeps decimal amounts.
    assert tracker.can_spend(0.1)
    decision = tracker.handle_exact_budget_request(0.1)
    assert decision.allowed
    assert decision.warning == "This request will exactly exhaust the budget"


def test_handle_exact_budget_request_cases() -> None:
    tracker = BudgetTracker(5.0, DeterministicClock(_ms(2025, 1, 1)))
    tracker.record_spend(3.0)
    assert tracker.handle_exact_budget_request(1.0).allowed
    assert tracker.handle_exact_budget_request(1.0).warning is None
    over = tracker.handle_exact_budget_request(2.5)
    assert (over.allowed, over.reason, over.shortfall) == (False, "budget_exceeded", 0.5)


def test_zero_or_negative_budget_disables_enforcement() -> None:
    for budget in (0.0, -3.0):
        tracker = BudgetTracker(budget, DeterministicClock(0))
        assert tracker.can_spend(1e9)
        assert tracker.record_spend(1e6) == ()
        assert tracker.utilization_percent() == 0.0


def test_alerts_fire_once_per_threshold_with_greater_or_equal() -> None:
    fired: list[BudgetAlert] = []
    tracker = BudgetTracker(10.0, DeterministicClock(_ms(2025, 1, 1)), on_alert=fired.append)
    tracker.record_spend(6.9)
    assert fired == []
    tracker.record_spend(0.1)  # exactly 70 %
    assert [a.threshold for a in fired] == [70]
    tracker.record_spend(0.1)
    assert [a.threshold for a in fired] == [70]
    tracker.record_spend(3.0)  # 100 % jumps over 90 too
    assert [a.threshold for a in fired] == [70, 90, 100]
    assert tracker.alerts == (70, 90, 100)
    assert fired[-1].window_start_ms == _ms(2025, 1, 1)


def test_utc_midnight_reset_with_deterministic_clock() -> None:
    clock = DeterministicClock(_ms(2025, 1, 1, 23, 59, 59))
    tracker = BudgetTracker(10.0, clock)
    tracker.record_spend(9.5)
    assert list(tracker.alerts) == [70, 90]
    assert not tracker.can_spend(1.0)
    clock.advance(1000)  # seed 000 §10 test: advance to midnight
    assert tracker.get_current_window() == _ms(2025, 1, 2)
    assert tracker.can_spend(10.0)
    assert tracker.spent_usd == 0.0
    assert list(tracker.alerts) == []
    assert tracker.window_start_ms == _ms(2025, 1, 2)


def test_amount_validation() -> None:
    tracker = BudgetTracker(10.0, DeterministicClock(0))
    for bad in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="estimated_cost"):
            tracker.can_spend(bad)
    with pytest.raises(ValidationError, match="safe integer"):
        tracker.record_spend(2.0**53)
    with pytest.raises(ValidationError, match="budget_usd"):
        BudgetTracker(float("nan"))


def test_reservations_hold_budget_for_concurrent_calls() -> None:
    tracker = BudgetTracker(1.0, DeterministicClock(0))
    first = tracker.reserve(0.6)
    assert first is not None
    assert tracker.reserve(0.6) is None
    assert tracker.reserved_usd == 0.6
    tracker.settle(first, 0.25)
    assert tracker.spent_usd == 0.25
    second = tracker.reserve(0.75)
    assert second is not None
    tracker.release(second)
    assert tracker.reserved_usd == 0.0


def test_restore_only_applies_to_the_current_window() -> None:
    clock = DeterministicClock(_ms(2025, 3, 1, 8))
    tracker = BudgetTracker(2.0, clock)
    tracker.restore(_ms(2025, 2, 28), [1.5], [70])
    assert tracker.spent_usd == 0.0
    tracker.restore(_ms(2025, 3, 1), [1.0, 0.5], [70])
    assert tracker.spent_usd == 1.5
    assert tracker.alerts == (70,)


@settings(max_examples=200, deadline=None)
@given(
    budget=st.decimals(min_value="0.01", max_value="5", places=2).map(float),
    calls=st.lists(
        st.tuples(st.decimals(min_value="0", max_value="2", places=4).map(float),
                  st.floats(0, 1), st.integers(0, 3 * 3600_000)),
        max_size=60,
    ),
)
def test_property_budget_is_never_exceeded(
    budget: float, calls: list[tuple[float, float, int]]
) -> None:
    clock = DeterministicClock(_ms(2025, 6, 1, 22))
    tracker = BudgetTracker(budget, clock)
    window_spend = 0.0
    window = tracker.window_start_ms
    for estimate, fraction, advance in calls:
        clock.advance(advance)
        if tracker.window_start_ms != window:
            window, window_spend = tracker.window_start_ms, 0.0
        reservation = tracker.reserve(estimate)
        if reservation is None:
            assert tracker.spent_usd + estimate > budget - 1e-12
            continue
        actual = round(estimate * fraction, 6)  # a call never costs more than reserved
        tracker.settle(reservation, actual)
        window_spend += actual
        assert tracker.spent_usd <= budget + 1e-12
        assert tracker.spent_usd == pytest.approx(window_spend)
