"""Budget view (issue 9): gauges through 70/90/100 % and the breaker open / half-open, driven
by the real HTTP test server on 127.0.0.1 (calls on the task runner, events from the worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytestqt.qtbot import QtBot

from engine.events import EventBus
from engine.ledger import Ledger
from engine.llm import (
    ChatMessage,
    ChatRequest,
    CircuitConfig,
    DeterministicClock,
    DeterministicRNG,
    LLMGateway,
    LLMSettings,
    ModelPrice,
)
from engine.llm.errors import LLMError
from engine.llm.settings import ProviderKind
from tests.engine.llm.conftest import START_MS
from tests.support.llm_server import Behaviour, LLMTestServer
from tests.ui.conftest import run
from ui.observe.budget_view import BudgetSnapshot, BudgetView
from ui.shared.tasks import TaskRunner

REQUEST = ChatRequest((ChatMessage("user", "hi"),), max_tokens=1)


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as running:
        yield running


def _gateway(server: LLMTestServer, clock: DeterministicClock, ledger: Ledger,
             bus: EventBus, **overrides: object) -> LLMGateway:
    options: dict[str, object] = {
        "provider": "openai", "kind": ProviderKind.OPENAI, "base_url": server.base_url + "/v1",
        "model": "test-model", "api_key_env": None, "use_keyring": False,
        "read_timeout_s": 2.0, "connect_timeout_s": 2.0,
        "prices": {"test-model": ModelPrice(1.0, 2.0)}, "max_tokens": 1}
    options.update(overrides)
    return LLMGateway(LLMSettings(**options), ledger=ledger, events=bus, clock=clock,  # type: ignore[arg-type]
                      rng=DeterministicRNG(7), sleep=clock.advance, api_key=lambda: "k")


def _call(gateway: LLMGateway) -> str:
    try:
        gateway.complete(REQUEST)
    except LLMError as exc:
        return type(exc).__name__
    return "ok"


def test_spend_gauge_crosses_70_90_100(qtbot: QtBot, qloop: object, runner: TaskRunner,
                                       server: LLMTestServer) -> None:
    server.default = Behaviour(input_tokens=1000, output_tokens=0)  # 0.001 USD a call
    clock, ledger = DeterministicClock(START_MS), Ledger(None)
    bus = EventBus(clock=clock, ledger=ledger)
    gateway = _gateway(server, clock, ledger, bus, daily_budget_usd=0.01)
    view = BudgetView(runner)
    qtbot.addWidget(view)
    view.set_gateway(gateway, ledger, bus, clock)
    seen: list[BudgetSnapshot] = []
    view.refreshed.connect(seen.append)
    colours = []
    try:
        for calls, percent in ((7, 70), (9, 90), (10, 100)):
            while len(ledger.query("SELECT id FROM llm_calls WHERE outcome = 'ok'")) < calls:
                assert run(qtbot, runner.run(_call, gateway)) == "ok"
            # the llm:* events came from a worker thread; the view refreshes by itself
            def reached(target: float = percent) -> bool:
                return bool(seen) and seen[-1].spend_percent >= target - 1e-6

            qtbot.waitUntil(reached, timeout=10_000)
            assert view.spend.value == pytest.approx(percent)
            colours.append(view.spend.colour().name())
        assert colours == ["#bf8700", "#bf8700", "#cf222e"]
        assert view.snapshot is not None and view.snapshot.status.alerts == (70, 90, 100)
        assert "$0.0100 of $0.01" in view.spend.text
        assert "resets at 00:00 UTC in 12 h 00 min" in view.spend_label.text()
        assert view.calls.topLevelItemCount() == 10
        assert view.calls.topLevelItem(0) is not None
        assert run(qtbot, runner.run(_call, gateway)) == "BudgetExceeded"
    finally:
        gateway.close()


def test_breaker_open_and_half_open_are_shown(qtbot: QtBot, qloop: object, runner: TaskRunner,
                                              server: LLMTestServer) -> None:
    server.script(*[Behaviour("status", status=503)] * 3)
    clock, ledger = DeterministicClock(START_MS), Ledger(None)
    bus = EventBus(clock=clock, ledger=ledger)
    gateway = _gateway(server, clock, ledger, bus,
                       circuit=CircuitConfig(window_size=4, cooldown_ms=30_000,
                                             probes_required=2))
    view = BudgetView(runner)
    qtbot.addWidget(view)
    view.set_gateway(gateway, ledger, bus, clock)
    try:
        assert run(qtbot, runner.run(_call, gateway)) == "CircuitOpen"
        qtbot.waitUntil(lambda: view.breaker_label.text() == "breaker: open", timeout=10_000)
        assert "closed → open" in view.breaker_history.item(0).text()
        clock.advance(30_000)
        run(qtbot, view.refresh())  # None when a refresh the bus asked for runs: it reads again
        qtbot.waitUntil(lambda: view.snapshot is not None
                        and view.snapshot.status.breaker == "half_open", timeout=10_000)
        assert view.breaker_label.text() == "breaker: half-open"
        outcomes = [view.calls.topLevelItem(i).text(7)  # type: ignore[union-attr]
                    for i in range(view.calls.topLevelItemCount())]
        # words, not the ledger's codes ("rejected (circuit_open)", "retry (http)")
        assert outcomes == ["not sent: circuit breaker open", "failed, retried: HTTP error",
                            "failed, retried: HTTP error"]
        first = view.calls.topLevelItem(2)
        assert first is not None and first.text(1) == "chat"
        # the time in local words (no ISO string), the exact time on hover
        assert first.text(0) == "just now" and "(UTC)" in first.toolTip(0)
        assert "_" not in view.breaker_history.item(0).text()
        assert [view.calls.topLevelItem(i).text(6)  # type: ignore[union-attr]
                for i in range(3)] == ["3", "2", "1"]  # attempts: the retries are visible
    finally:
        gateway.close()
