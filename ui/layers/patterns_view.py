"""The procedural pattern list: recurring step sequences, how often they worked, and since when.

The list shows every mined pattern (docs/layers.md: a run of steps recurring in at least two
episodes) with its agent, steps, support and success rate, ranked as the miner ranks them.
Selecting one shows its steps, a plot of its success rate over time — the running rate after
each supporting episode, in episode time (markers green for a success, red for a failure), and
the rate as the miner recorded it when it noticed a change (diamonds) — and its source
episodes. Clicking an episode, double-clicking the pattern or "Open procedural record" selects
the record in the records view.
"""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import MemoryReader, PatternDetail, PatternHistoryPoint
from engine.errors import EngineError
from engine.records import MemoryRecord, format_timestamp
from ui.layers.layer_tab import LayerTab
from ui.observe.timeline_view import current_theme
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.theme import apply_plot_theme
from ui.shared.wording import count_of

__all__ = ["OUTCOME_COLORS", "PatternsView"]

_ALL = "All agents"
_EMPTY_TEXT = ("Episodes an agent records step by step (metadata.episode) are mined for sequences "
               "of steps that recur; each shows here with how often it worked. The demo data "
               "set has a few.")
_ROLE_INDEX = Qt.ItemDataRole.UserRole + 1
OUTCOME_COLORS = {True: "#1a7f37", False: "#cf222e", None: "#8c959f"}
_OUTCOME_TEXT = {True: "✓ success", False: "✗ failure", None: "? unknown"}


def _rate(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.0%}"


def _day(ms: float) -> str:
    return (format_timestamp(ms) or "")[:16].replace("T", " ")


class PatternsView(LayerTab[list[PatternDetail]]):
    """Patterns with their steps, success rate over time and source episodes.

    Signals: see :class:`~ui.layers.layer_tab.LayerTab`.
    """

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(runner, parent)
        self.details: list[PatternDetail] = []
        self.selected: PatternDetail | None = None
        self._record_tokens = RequestTokens()

        self.agent_box = QComboBox(self)
        self.agent_box.addItem(_ALL)
        self.agent_box.setMinimumContentsLength(12)
        self.agent_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.refresh_button = QPushButton("Refresh", self)
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Agent", self))
        bar.addWidget(self.agent_box)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.status, 1)

        self.table = QTreeWidget(self)
        self.table.setHeaderLabels(["Agent", "Steps", "Episodes", "Success"])
        self.table.setRootIsDecorated(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in (0, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.currentItemChanged.connect(self._on_current_changed)
        self.table.itemDoubleClicked.connect(self._on_pattern_double_clicked)

        self.title = QLabel("Select a pattern.", self)
        self.title.setWordWrap(True)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.steps_label = QLabel("", self)
        self.steps_label.setWordWrap(True)
        self.steps_label.setTextFormat(Qt.TextFormat.RichText)
        self.plot = pg.PlotWidget(parent=self, axisItems={
            "bottom": pg.DateAxisItem(orientation="bottom")})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.setYRange(-0.08, 1.08, padding=0)
        self.plot.getViewBox().setLimits(yMin=-0.08, yMax=1.08)  # a rate: always 0-100 %
        self.plot.getAxis("bottom").setTickDensity(0.6)  # day and month labels never collide
        self.plot.setMinimumHeight(130)
        self.plot.getAxis("left").setTicks([[(0, "0%"), (0.5, "50%"), (1, "100%")]])
        self.plot.showGrid(x=False, y=True, alpha=0.2)
        self.rate_curve = pg.PlotDataItem(pen=pg.mkPen("#2f6feb", width=2), stepMode=None)
        self.plot.addItem(self.rate_curve)
        self.outcome_dots = pg.ScatterPlotItem(size=10, pen=pg.mkPen("#57606a", width=1))
        self.plot.addItem(self.outcome_dots)
        self.history_dots = pg.ScatterPlotItem(size=11, symbol="d", brush=None,
                                               pen=pg.mkPen("#bf8700", width=2))
        self.plot.addItem(self.history_dots)
        self.plot_legend = QLabel("", self)
        self.plot_legend.setWordWrap(True)
        self.episodes = self.record_tree(["When", "Outcome", "Episode"], (120, 84))
        self.open_button = QPushButton("Open procedural record", self)
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._on_open_pattern)

        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 0, 0, 0)
        side_layout.addWidget(self.title)
        side_layout.addWidget(self.steps_label)
        side_layout.addWidget(self.plot, 1)
        side_layout.addWidget(self.plot_legend)
        side_layout.addWidget(QLabel("Source episodes (click to open)", side))
        side_layout.addWidget(self.episodes, 1)
        side_layout.addWidget(self.open_button)
        self.lay_out(bar, self.table, side, stretch=(1, 1), sizes=(560, 500))
        self.agent_box.currentIndexChanged.connect(self._fill_table)
        self.refresh_button.clicked.connect(self.refresh)
        self.apply_theme(current_theme())

    # -- loading -------------------------------------------------------------------------------

    @staticmethod
    def fetch(reader: MemoryReader) -> list[PatternDetail]:
        """Every pattern with its history and episodes (worker)."""
        return reader.pattern_details()

    def clear(self) -> None:
        """No session: no patterns."""
        self.details = []
        self.table.blockSignals(True)
        self.table.clear()
        self.table.blockSignals(False)
        self._select(None)
        self.status.setText("")
        self.show_empty(False, "", "")

    def show_error(self, text: str) -> None:
        """Loading failed."""
        self.status.setText(f"Procedural layer unavailable: {text}")

    def show_data(self, data: list[PatternDetail]) -> None:
        """List the patterns, keeping the agent filter and the selection where they still are."""
        previous = self.selected
        self.details = list(data)
        agents = sorted({d.pattern.agent_id for d in data})
        current = self.agent_box.currentText()
        self.agent_box.blockSignals(True)
        self.agent_box.clear()
        self.agent_box.addItems([_ALL, *agents])
        self.agent_box.setCurrentText(current if current in agents else _ALL)
        self.agent_box.blockSignals(False)
        self.show_empty(not data, "No recurring procedures yet", _EMPTY_TEXT)
        if data:
            episodes = {e for d in data for e in d.pattern.episode_ids}
            self.status.setText(f"{count_of(len(data), 'pattern')} in "
                                f"{count_of(len(episodes), 'episode')} of "
                                f"{count_of(len(agents), 'agent')}")
        else:
            self.status.setText("")
        self._fill_table()
        if previous is not None:
            self.select_pattern(previous.pattern.agent_id, previous.pattern.pattern_id)

    def _fill_table(self, *_args: object) -> None:
        agent = self.agent_box.currentText()
        self.table.blockSignals(True)
        self.table.clear()
        for index, detail in enumerate(self.details):
            pattern = detail.pattern
            if agent != _ALL and pattern.agent_id != agent:
                continue
            item = QTreeWidgetItem([pattern.agent_id, " → ".join(pattern.steps),
                                    str(pattern.support), _rate(pattern.success_rate)])
            item.setData(0, _ROLE_INDEX, index)
            item.setToolTip(1, "\n".join(f"{n}. {s}" for n, s in enumerate(pattern.steps, 1)))
            for column in (2, 3):
                item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight
                                      | Qt.AlignmentFlag.AlignVCenter)
            self.table.addTopLevelItem(item)
        self.table.blockSignals(False)
        if self.selected is not None and self._item_of(self.selected) is None:
            self._select(None)

    def _item_of(self, detail: PatternDetail) -> QTreeWidgetItem | None:
        for row in range(self.table.topLevelItemCount()):
            item = self.table.topLevelItem(row)
            if item is not None and self.details[int(item.data(0, _ROLE_INDEX))] is detail:
                return item
        return None

    # -- selection -----------------------------------------------------------------------------

    def select_pattern(self, agent: str, pattern_id: str) -> PatternDetail | None:
        """Select a pattern by agent and id (None when it is not listed)."""
        found = next((d for d in self.details if d.pattern.agent_id == agent
                      and d.pattern.pattern_id == pattern_id), None)
        item = self._item_of(found) if found is not None else None
        if item is None:
            self._select(None)
            return None
        self.table.setCurrentItem(item)  # → _on_current_changed → _select
        return found

    def _on_current_changed(self, current: QTreeWidgetItem | None,
                            _previous: QTreeWidgetItem | None) -> None:
        index = current.data(0, _ROLE_INDEX) if current is not None else None
        if isinstance(index, int) and 0 <= index < len(self.details):
            self._select(self.details[index])
        else:
            self._select(None)

    def _select(self, detail: PatternDetail | None) -> None:
        self.selected = detail
        self.open_button.setEnabled(detail is not None)
        self.episodes.clear()
        if detail is None:
            self.title.setText("Select a pattern.")
            self.steps_label.setText("")
            for item in (self.rate_curve, self.outcome_dots, self.history_dots):
                item.setData(x=[], y=[])
            self.plot_legend.setText("")
            return
        pattern = detail.pattern
        self.title.setText(
            f"{pattern.agent_id}: {count_of(pattern.support, 'episode')}, {pattern.successes} "
            "succeeded, "
            f"{pattern.failures} failed — success rate {_rate(pattern.success_rate)}")
        self.steps_label.setText("<ol style='margin-left:-20px'>" + "".join(
            f"<li>{html.escape(self._shown(step))}</li>" for step in pattern.steps) + "</ol>")
        series = detail.success_series()
        known = [p for p in series if p.success_rate is not None]
        self.rate_curve.setData(x=[p.ts / 1000.0 for p in known],
                                y=[p.success_rate for p in known])
        self.outcome_dots.setData(
            x=[p.ts / 1000.0 for p in known], y=[p.success_rate for p in known],
            brush=[pg.mkBrush(OUTCOME_COLORS[p.outcome]) for p in known])
        recorded = [h for h in detail.history if h.success_rate is not None]
        self.history_dots.setData(x=[h.ts / 1000.0 for h in recorded],
                                  y=[h.success_rate for h in recorded])
        # Episode time sets the range: the miner may have recorded its figures long after the
        # episodes (an import), which would squash them into one corner; the legend says when.
        times = [p.ts / 1000.0 for p in known] or [h.ts / 1000.0 for h in recorded]
        if times:
            t0, t1 = min(times), max(times)
            pad = max((t1 - t0) * 0.06, 3600.0)
            self.plot.setXRange(t0 - pad, t1 + pad, padding=0)
        self.plot_legend.setText(self._legend(len(known), recorded))
        for episode in reversed(detail.episodes):
            item = self.episodes.add_record(
                [_day(episode.last_ts), _OUTCOME_TEXT[episode.outcome]],
                episode.record_ids[0] if episode.record_ids else None)
            item.setForeground(1, pg.mkColor(OUTCOME_COLORS[episode.outcome]))
        if self.session is not None and detail.episodes:
            spawn(self._load_contents(detail))

    @staticmethod
    def _legend(episodes: int, recorded: list[PatternHistoryPoint]) -> str:
        mined = "" if not recorded else (
            f' · <span style="color:#bf8700">◆</span> recorded by the miner '
            f"({len(recorded)}×, last {_day(recorded[-1].ts)[:10]})")
        if not episodes:
            return "No supporting episode has a known outcome." + mined
        return (f'<span style="color:#2f6feb">—</span> rate after each episode '
                f'(<span style="color:{OUTCOME_COLORS[True]}">●</span> success '
                f'<span style="color:{OUTCOME_COLORS[False]}">●</span> failure)' + mined)

    async def _load_contents(self, detail: PatternDetail) -> list[MemoryRecord]:
        """Fetch each episode's first record for its text (worker)."""
        session = self.session
        if session is None:
            return []
        token = self._record_tokens.next_token()
        ids = [e.record_ids[0] for e in detail.episodes if e.record_ids]
        try:
            found: list[MemoryRecord] = await self._runner.run(session.reader.get_records, ids)
        except EngineError as exc:
            self.message.emit(f"Could not read the episodes: {exc}")
            return []
        if not self._record_tokens.is_current(token) or detail is not self.selected:
            return []
        self.episodes.set_texts({r.id: r.content for r in found}, self._shown)
        return found

    def _on_pattern_double_clicked(self, _item: QTreeWidgetItem, _column: int) -> None:
        self._on_open_pattern()

    def _on_open_pattern(self) -> None:
        if self.selected is not None:
            self.record_selected.emit(self.selected.pattern.record_id)

    def apply_theme(self, name: str) -> None:
        """Plot colours of theme ``name``."""
        apply_plot_theme(self.plot, name)
