"""The "Layers" view: the social graph, the procedural patterns and the spatial scatter.

One navigation entry with three tabs (docs/gui.md says why): the three are views of the same
thing — what the layer handlers derive from an agent's memories (docs/layers.md) — and the
navigation stays a short list of tasks. Each tab loads when first shown and reloads when its
session's records change while it is visible; each links to the records view through
:attr:`LayersView.record_selected`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from engine import PatternDetail, SocialSummary
from ui.layers.layer_tab import LayerTab
from ui.layers.patterns_view import PatternsView
from ui.layers.social_view import SocialView
from ui.layers.spatial_view import SpatialData, SpatialView
from ui.shared.record_tree import RecordTree
from ui.shared.session import DataSession
from ui.shared.tasks import TaskRunner, wait_until

__all__ = ["TAB_NAMES", "LayersView"]

TAB_NAMES = ("social", "procedural", "spatial")


class LayersView(QWidget):
    """Tabs for the social, procedural and spatial layers.

    Signals:
        record_selected(str): Show this record in the records view.
        message(str): A short status message.
    """

    record_selected = QtSignal(str)
    message = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.social = SocialView(runner, self)
        self.procedural = PatternsView(runner, self)
        self.spatial = SpatialView(runner, self)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.social, "Social")
        self.tabs.addTab(self.procedural, "Procedural")
        self.tabs.addTab(self.spatial, "Spatial")
        self.tabs.setTabToolTip(0, "Who each agent knows: sentiment and interactions")
        self.tabs.setTabToolTip(1, "Recurring step sequences and how often they worked")
        self.tabs.setTabToolTip(2, "Where things were remembered, filtered by time")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.tabs)
        for tab in self._tabs():
            tab.record_selected.connect(self.record_selected)
            tab.message.connect(self.message)

    def _tabs(self) -> tuple[LayerTab[list[SocialSummary]], LayerTab[list[PatternDetail]],
                             LayerTab[SpatialData]]:
        return self.social, self.procedural, self.spatial

    def set_empty_actions(self, actions: tuple[QAction, ...]) -> None:
        """The window's actions that fill a store, offered by every tab while it has nothing
        to show (Load demo data, Import…)."""
        for tab in self._tabs():
            tab.empty_actions = actions

    def record_trees(self) -> list[RecordTree]:
        """The tabs' lists of records (interactions, episodes, neighbours)."""
        return [tree for tab in self._tabs() for tree in tab.record_trees]

    def show_tab(self, name: str) -> None:
        """Bring tab ``name`` (one of :data:`TAB_NAMES`) to the front."""
        self.tabs.setCurrentIndex(TAB_NAMES.index(name))

    def refresh(self) -> None:
        """Load the tab shown again (the window's Refresh, F5)."""
        self._tabs()[self.tabs.currentIndex()].refresh()

    def set_session(self, session: DataSession | None) -> None:
        """Show ``session``'s layers in every tab."""
        for tab in self._tabs():
            tab.set_session(session)

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask record text with ``redact`` (None: as stored)."""
        for tab in self._tabs():
            tab.set_redactor(redact)

    async def prepare_screenshot(self, name: str) -> None:
        """Show tab ``name`` in a representative state over the demo data (``--screenshot``)."""
        self.show_tab(name)
        if name == "social":
            await wait_until(lambda: bool(self.social.summaries), 60.0)
            talked = [s for s in self.social.summaries if s.trend in ("rising", "falling")]
            busiest = max(talked or self.social.summaries, default=None,
                          key=lambda s: (s.interactions, s.counterpart))
            if busiest is not None:
                self.social.select_counterpart(busiest.agent_id, busiest.counterpart)
                await wait_until(self.social.records.texts_loaded)
        elif name == "procedural":
            await wait_until(lambda: bool(self.procedural.details), 60.0)
            mixed = [d for d in self.procedural.details
                     if d.pattern.successes and d.pattern.failures]
            chosen = max(mixed or self.procedural.details, default=None,
                         key=lambda d: (d.pattern.support, len(d.pattern.steps)))
            if chosen is not None:
                self.procedural.select_pattern(chosen.pattern.agent_id,
                                               chosen.pattern.pattern_id)
                await wait_until(self.procedural.episodes.texts_loaded)
        elif name == "spatial":
            spatial = self.spatial
            await wait_until(lambda: len(spatial.data.hits) > 0, 60.0)
            data = spatial.data
            if not len(data.hits):
                return
            t0, t1 = float(data.t[0]), float(data.t[-1])
            spatial.set_time_window(t0 + (t1 - t0) * 0.2, t1 + 60.0)
            rows = spatial.visible_rows
            xy = np.stack([data.x[rows], data.y[rows]], axis=1)
            close = (np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2)
                     <= spatial.radius_spin.value()).sum(axis=1)
            spatial.select_point(data.hits[int(rows[int(np.argmax(close))])].record_id)
            await wait_until(lambda: bool(spatial.content_label.text()))

