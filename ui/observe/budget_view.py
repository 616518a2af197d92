"""The Budget view: LLM spend, token window, circuit breaker and recent calls (issue 9).

State comes from ``LLMGateway.status()`` and the ledger's LLM activity
(:func:`engine.llm.llm_activity`), read on a worker.
Live updates: the view subscribes to the event bus; ``llm:*`` events arrive on whichever thread
emitted them and are bridged to the GUI by a queued Qt signal, which schedules one refresh
(coalesced while a refresh runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QAction, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QPushButton,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import Clock, Event, EventBus, Ledger
from engine.llm import (
    BreakerTransition,
    GatewayStatus,
    LLMCall,
    LLMGateway,
    llm_activity,
    token_limit_for_window,
)
from ui.shared.empty_state import EmptyState
from ui.shared.format import exact_time, local_time, phrase, relative_time
from ui.shared.tasks import TaskRunner, spawn

__all__ = ["BudgetSnapshot", "BudgetView", "Gauge", "call_outcome", "read_snapshot"]

DAY_MS = 86_400_000.0
SPEND_MARKS = (70.0, 90.0, 100.0)  # seed 000 §6 alert thresholds
THROTTLE_PERCENT = 80.0  # seed 000 §3: throttle when the projection crosses 80 % of the window
BREAKER_COLOURS = {"closed": "#1a7f37", "open": "#cf222e", "half_open": "#9a6700"}
PURPOSES = {"connection-test": "connection test", "chat": "chat", "extract": "extraction",
            "summarize": "summary"}
"""What each ``llm_calls`` purpose is called (an unknown one is humanized)."""
OUTCOMES = {"ok": "succeeded", "retry": "failed, retried", "failed": "failed",
            "rejected": "not sent", "test_failed": "test failed"}
"""What each call outcome is called."""
FAILURES = {"circuit_open": "circuit breaker open", "budget_exceeded": "over the daily budget",
            "rate_limited": "rate limited", "http": "HTTP error", "refused": "connection refused",
            "connect": "could not connect", "timeout": "timed out", "auth": "key refused",
            "cancelled": "cancelled", "stream_error": "stream broke off",
            "invalid_stream": "unreadable stream"}
"""Why a call failed, in words (the codes of ``engine.llm.errors``)."""


def call_outcome(outcome: str, failure: str | None) -> str:
    """A call's outcome in words: "failed, retried: HTTP error"."""
    words = OUTCOMES.get(outcome) or phrase(outcome)
    if failure:
        words += f": {FAILURES.get(failure) or phrase(failure)}"
    return words


@dataclass(frozen=True, slots=True)
class BudgetSnapshot:
    """What one refresh shows (read on a worker)."""

    status: GatewayStatus
    now_ms: float
    tpm: int  # the token limit of the projection window (seed 000 §3)
    calls: tuple[LLMCall, ...]
    transitions: tuple[BreakerTransition, ...]

    @property
    def spend_percent(self) -> float:
        """Spend as a percentage of the daily budget (0 when no budget)."""
        budget = self.status.budget_usd
        return 100.0 * self.status.spent_usd / budget if budget > 0 else 0.0

    @property
    def projected_percent(self) -> float:
        """The next call's projected window use, in percent of the TPM limit."""
        return 100.0 * self.status.projected_total / self.tpm if self.tpm > 0 else 0.0

    @property
    def reset_in_ms(self) -> float:
        """Time to the UTC-midnight budget reset."""
        return max(0.0, self.status.window_start_ms + DAY_MS - self.now_ms)


def read_snapshot(gateway: LLMGateway, ledger: Ledger | None, clock: Clock,
                  limit: int = 50) -> BudgetSnapshot:
    """Worker: the gateway's status plus the ledger's recent calls and breaker history."""
    status = gateway.status()
    activity = llm_activity(ledger, limit) if ledger is not None else None
    projector = gateway.projector
    tpm = token_limit_for_window(projector.tokens_per_minute, projector.window_ms)
    return BudgetSnapshot(status, clock.now(), tpm, activity.calls if activity else (),
                          activity.transitions if activity else ())


class Gauge(QWidget):
    """A horizontal bar with threshold marks (painted; theme colours from the palette)."""

    def __init__(self, marks: tuple[float, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.marks = marks
        self.value = 0.0
        self.projection: float | None = None
        self.text = ""
        self.setMinimumHeight(34)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_value(self, percent: float, text: str, projection: float | None = None) -> None:
        """Show ``percent`` (0–100+, drawn up to 120 %), a caption and an optional projection."""
        self.value, self.text, self.projection = percent, text, projection
        self.setToolTip(text)
        self.update()

    def colour(self) -> QColor:
        """Green below the first mark, amber from it, red from the last."""
        if self.marks and self.value >= self.marks[-1]:
            return QColor("#cf222e")
        if self.marks and self.value >= self.marks[0]:
            return QColor("#bf8700")
        return QColor("#2da44e")

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        bar = QRectF(1.0, 16.0, self.width() - 2.0, self.height() - 18.0)
        scale = bar.width() / 120.0
        painter.setPen(QPen(palette.mid().color()))
        painter.setBrush(palette.base())
        painter.drawRect(bar)
        painter.setBrush(self.colour())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.drawRect(QRectF(bar.left(), bar.top(), min(self.value, 120.0) * scale,
                                bar.height()))
        if self.projection is not None:
            painter.setPen(QPen(palette.text().color(), 2, Qt.PenStyle.DashLine))
            x = bar.left() + min(self.projection, 120.0) * scale
            painter.drawLine(int(x), int(bar.top()), int(x), int(bar.bottom()))
        painter.setPen(QPen(palette.text().color(), 1))
        for mark in self.marks:
            x = bar.left() + mark * scale
            painter.drawLine(int(x), int(bar.top()) - 3, int(x), int(bar.bottom()))
            painter.drawText(QRectF(x - 20, 0, 40, 14), Qt.AlignmentFlag.AlignCenter,
                             f"{mark:g}%")
        painter.drawText(bar.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignVCenter, self.text)
        painter.end()


def _duration(ms: float) -> str:
    minutes = int(ms // 60_000)
    return f"{minutes // 60} h {minutes % 60:02d} min"


class BudgetView(QWidget):
    """Gauges, breaker state and history, recent calls.

    Signals:
        refreshed(object): A :class:`BudgetSnapshot` was shown.
        settings_requested(): The user asked for the provider settings dialog.
    """

    refreshed = Signal(object)
    settings_requested = Signal()
    _event_arrived = Signal(object)  # emitted on the emitting thread → queued to the GUI

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._gateway: LLMGateway | None = None
        self._ledger: Ledger | None = None
        self._clock: Clock | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._running = False
        self._dirty = False
        self.snapshot: BudgetSnapshot | None = None
        self.provider_label = QLabel("No LLM provider configured.", self)
        self.provider_label.setWordWrap(True)
        self.settings_button = QPushButton("Provider settings…", self)
        self.settings_button.setToolTip("Provider, model, key, daily budget, token window, "
                                        "timeouts; test the connection")
        self.settings_button.clicked.connect(self.settings_requested)
        self.problem_label = QLabel("", self)
        self.problem_label.setWordWrap(True)
        self.problem_label.setStyleSheet("color: #cf222e;")
        self.problem_label.hide()
        self.spend = Gauge(SPEND_MARKS, self)
        self.spend_label = QLabel("", self)
        self.tokens_gauge = Gauge((THROTTLE_PERCENT,), self)
        self.window_label = QLabel("", self)
        self.breaker_label = QLabel("breaker: —", self)
        self.breaker_history = QListWidget(self)
        self.calls = QTreeWidget(self)
        self.calls.setHeaderLabels(["Time", "Purpose", "Model", "Latency", "Tokens in/out",
                                    "Cost", "Attempt", "Outcome"])
        self.calls.setRootIsDecorated(False)
        self.calls.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        gauges = QGroupBox("Daily spend and token window", self)
        grid = QGridLayout(gauges)
        grid.addWidget(QLabel("Spend", gauges), 0, 0)
        grid.addWidget(self.spend, 0, 1)
        grid.addWidget(self.spend_label, 1, 1)
        grid.addWidget(QLabel("Tokens/min", gauges), 2, 0)
        grid.addWidget(self.tokens_gauge, 2, 1)
        grid.addWidget(self.window_label, 3, 1)
        breaker = QGroupBox("Circuit breaker", self)
        breaker_layout = QVBoxLayout(breaker)
        breaker_layout.addWidget(self.breaker_label)
        breaker_layout.addWidget(self.breaker_history)
        calls = QGroupBox("Recent LLM calls", self)
        calls_layout = QVBoxLayout(calls)
        calls_layout.addWidget(self.calls)
        top = QHBoxLayout()
        top.addWidget(self.provider_label, 1)
        top.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.problem_label)
        layout.addWidget(gauges)
        layout.addWidget(breaker, 1)
        layout.addWidget(calls, 2)
        self.settings_action = QAction("Provider settings…", self)
        self.settings_action.setToolTip(self.settings_button.toolTip())
        self.settings_action.triggered.connect(self.settings_requested)
        self.calls_empty = EmptyState(self.calls, "budget")
        self._event_arrived.connect(self._on_event_arrived)

    def set_gateway(self, gateway: LLMGateway | None, ledger: Ledger | None,
                    bus: EventBus | None, clock: Clock | None) -> None:
        """Follow ``gateway`` (None: no provider) and its ``llm:*`` events on ``bus``."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._gateway, self._ledger, self._clock = gateway, ledger, clock
        if bus is not None:
            self._unsubscribe = bus.subscribe(self._on_bus_event)
        spawn(self.refresh())

    def set_problem(self, text: str) -> None:
        """Show why the saved provider settings could not be used ("" hides it)."""
        self.problem_label.setText(text)
        self.problem_label.setVisible(bool(text))

    def _on_bus_event(self, event: Event) -> None:  # any thread
        if event.kind.startswith("llm:"):
            self._event_arrived.emit(event)

    def _on_event_arrived(self, _event: Event) -> None:
        spawn(self.refresh())

    async def refresh(self) -> BudgetSnapshot | None:
        """Read the status and history on a worker and show them (coalesces bursts).

        Spawned refreshes may run after the window closed: a deleted view does nothing.
        """
        if not shiboken6.isValid(self.provider_label):
            return None
        gateway, clock = self._gateway, self._clock
        if gateway is None or clock is None:
            self.provider_label.setText("No LLM provider configured.")
            return None
        if self._running:
            self._dirty = True
            return None
        self._running = True
        try:
            snapshot = await self._runner.run(read_snapshot, gateway, self._ledger, clock)
            while self._dirty and gateway is self._gateway:
                self._dirty = False
                snapshot = await self._runner.run(read_snapshot, gateway, self._ledger, clock)
        finally:
            self._running = False
        if gateway is not self._gateway or not shiboken6.isValid(self.provider_label):
            return None
        self._show(snapshot)
        return snapshot

    def _show(self, snapshot: BudgetSnapshot) -> None:
        self.snapshot = snapshot
        status = snapshot.status
        self.provider_label.setText(
            f"{status.provider} · {status.model} · latency p50 {status.latency_p50_ms:.0f} ms, "
            f"p95 {status.latency_p95_ms:.0f} ms" if status.configured else
            "No LLM provider configured (Provider settings…, or the MNEMOSCOPE_LLM_* "
            "environment); history from this store's ledger is shown.")
        spend = snapshot.spend_percent
        self.spend.marks = SPEND_MARKS if status.budget_usd > 0 else ()  # no budget: no marks
        self.spend.set_value(spend, f"${status.spent_usd:.4f} of ${status.budget_usd:.2f} "
                                    f"({spend:.0f} %)" if status.budget_usd > 0 else
                             f"${status.spent_usd:.4f} spent today · no daily budget set")
        alerts = ", ".join(f"{a} %" for a in status.alerts) or "none"
        self.spend_label.setText(f"alerts today: {alerts} · resets at 00:00 UTC in "
                                 f"{_duration(snapshot.reset_in_ms)}")
        projected = snapshot.projected_percent
        self.tokens_gauge.set_value(status.window_utilization_percent,
                              f"{status.window_utilization_percent:.0f} % of {snapshot.tpm:,} "
                              f"tokens in the window · next call → {projected:.0f} %", projected)
        self.window_label.setText(
            "throttling: the projection is over the 80 % line" if status.should_throttle
            else "under the 80 % throttle line")
        state = status.breaker
        self.breaker_label.setText(f"breaker: {state.replace('_', '-')}")
        self.breaker_label.setStyleSheet(
            f"color: {BREAKER_COLOURS.get(state, '')}; font-weight: 600;")
        self.breaker_history.clear()
        for change in snapshot.transitions:
            self.breaker_history.addItem(
                f"{local_time(change.ts_ms)}  {change.from_state.replace('_', '-')} → "
                f"{change.to_state.replace('_', '-')}  ({phrase(change.reason)})")
        if not snapshot.transitions:
            self.breaker_history.addItem("No breaker transitions recorded: the provider has "
                                         "not been failing.")
        self.calls.clear()
        if snapshot.calls:
            self.calls_empty.clear()
        elif status.configured:
            self.calls_empty.show_message(
                "No LLM calls yet", "Summaries and memory extraction call the provider; each "
                "call shows here with its tokens, cost, latency and outcome.")
        else:
            self.calls_empty.show_message(
                "No LLM provider configured", "Mnemoscope calls an LLM only to summarize and "
                "to extract memories. Choose a provider, model and daily budget to see its "
                "calls, spend and rate limits here.", [self.settings_action])
        for call in snapshot.calls:
            latency = call.latency_ms
            item = QTreeWidgetItem([
                relative_time(call.ts_ms, now_ms=snapshot.now_ms),
                PURPOSES.get(call.purpose) or phrase(call.purpose), call.model,
                "—" if latency is None else f"{latency:.0f} ms",
                f"{call.input_tokens:,} / {call.output_tokens:,}", f"${call.cost_usd:.5f}",
                str(call.attempt), call_outcome(call.outcome, call.failure)])
            item.setToolTip(0, exact_time(call.ts_ms))
            self.calls.addTopLevelItem(item)
        self.refreshed.emit(snapshot)
