"""Small pyqtgraph items shared by the plot views."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

import numpy as np
import pyqtgraph as pg
from pyqtgraph.graphicsItems.DateAxisItem import (
    DAY_SPACING,
    HOUR_SPACING,
    MINUTE_SPACING,
    MONTH_SPACING,
    MS_SPACING,
    SECOND_SPACING,
    YEAR_SPACING,
    TickSpec,
    ZoomLevel,
    makeMSStepper,
    makeMStepper,
    makeSStepper,
    makeYStepper,
)
from PySide6.QtCore import QPointF, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QFontMetrics, QImage, QPainter

__all__ = ["PassiveScatter", "SpanViewBox", "TimeAxis", "span_caption"]


class PassiveScatter(pg.ScatterPlotItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A scatter drawn over others (rings, markers) that lets clicks through to them.

    pyqtgraph offers a click to the items under the cursor from the top down and stops at the
    first that accepts; a plain ring around a selected point would take the next click on it.
    """

    def mouseClickEvent(self, ev: Any) -> None:
        ev.ignore()


def _levels() -> OrderedDict[float, ZoomLevel]:
    """pyqtgraph's date zoom levels with labels a reader can place on their own.

    The stock levels label sub-second ticks ``51.000`` and days ``25``: no hour, no month. Here
    every tick names its unit (``18:36:51.500``, ``18:36``, ``Wed 25 Nov``, ``Nov 2026``) and
    each level's example text is as wide as its widest label, so the spacing pyqtgraph derives
    from it keeps labels from overlapping. Keys are the densest seconds-per-example-width each
    level accepts (pyqtgraph's rule: the first level too fine for the density stops the walk).
    The skip steps include 2 (every other second, minute, hour): with only pyqtgraph's 1, 5, 15
    an 8-second span 450 px wide gets one label.
    """
    day = TickSpec(DAY_SPACING, makeSStepper(DAY_SPACING), "%a %d %b", autoSkip=[1, 2, 7])
    return OrderedDict([
        (np.inf, ZoomLevel([TickSpec(YEAR_SPACING, makeYStepper(1), "%Y",
                                     autoSkip=[1, 5, 10, 25]),
                            TickSpec(MONTH_SPACING, makeMStepper(1), "%b %Y",
                                     autoSkip=[1, 3, 6])], "Sep 9999")),
        (5 * DAY_SPACING, ZoomLevel([
            TickSpec(MONTH_SPACING, makeMStepper(1), "%b %Y", autoSkip=[1, 3, 6]),
            TickSpec(DAY_SPACING, makeSStepper(DAY_SPACING), "%d %b", autoSkip=[1, 2, 7])],
            "99 Sep 99")),  # wider than its labels: twenty days' labels would fill 80 % and vanish
        (6 * HOUR_SPACING, ZoomLevel([day, TickSpec(
            HOUR_SPACING, makeSStepper(HOUR_SPACING), "%H:%M", autoSkip=[1, 2, 3, 6, 12])],
            "Wed 99 Sep")),
        (15 * MINUTE_SPACING, ZoomLevel([day, TickSpec(
            MINUTE_SPACING, makeSStepper(MINUTE_SPACING), "%H:%M",
            autoSkip=[1, 2, 5, 10, 15, 30])],
            "Wed 99 Sep")),
        (30 * SECOND_SPACING, ZoomLevel([TickSpec(
            SECOND_SPACING, makeSStepper(SECOND_SPACING), "%H:%M:%S",
            autoSkip=[1, 2, 5, 10, 15, 30])], "99:99:99")),
        (1 * SECOND_SPACING, ZoomLevel([
            TickSpec(SECOND_SPACING, makeSStepper(SECOND_SPACING), "%H:%M:%S"),
            TickSpec(MS_SPACING, makeMSStepper(MS_SPACING), "%H:%M:%S.%f",
                     autoSkip=[1, 2, 5, 10, 20, 25, 50])], "99:99:99.999")),
    ])


class TimeAxis(pg.DateAxisItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A time axis over epoch seconds, in local time, whose every label names its unit.

    pyqtgraph's ``DateAxisItem`` picks ticks and converts to local time; this one only replaces
    its labels (see :func:`_levels`). The date of the visible span is the axis title
    (:func:`span_caption`), set by the view that owns the range.
    """

    def __init__(self, orientation: str = "bottom", **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.zoomLevels = _levels()
        # pyqtgraph measures labels with the painter's metrics on first paint; a range change
        # before that (a test, a view still hidden) needs metrics too.
        self.fontMetrics = QFontMetrics(self.font())

    def labels(self) -> list[str]:
        """The tick labels drawn for the current range (coarse levels first).

        pyqtgraph's own layout pass, on a scratch painter: it leaves out a level too crowded
        to read and labels that would stick out of the axis, as the paint does.
        """
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        painter = QPainter(image)
        try:
            specs = self.generateDrawSpecs(painter)
        finally:
            painter.end()
        return [] if specs is None else [text for _rect, _flags, text in specs[2]]


def span_caption(x0: float, x1: float) -> str:
    """The axis title for epoch seconds ``x0``..``x1``: the date(s) and "local time".

    ``Wed 25 Nov 2026 · local time (UTC+01:00)``; a span over several days names both ends.
    """
    try:
        start, end = (datetime.fromtimestamp(x).astimezone() for x in (x0, x1))
    except (OverflowError, OSError, ValueError):  # far outside the calendar: no caption
        return "local time"
    offset = start.strftime("%z")
    zone = f"UTC{offset[:3]}:{offset[3:]}" if offset else "local"
    if start.date() == end.date():
        dates = start.strftime("%a %d %b %Y")
    elif start.year == end.year:
        dates = f"{start.strftime('%a %d %b')} – {end.strftime('%a %d %b %Y')}"
    else:
        dates = f"{start.strftime('%d %b %Y')} – {end.strftime('%d %b %Y')}"
    return f"{dates} · local time ({zone})"


class SpanViewBox(pg.ViewBox):  # type: ignore[misc]  # pyqtgraph is untyped
    """A view box whose Shift+drag marks a span of x and zooms to it (plain drag pans).

    The span is drawn with pyqtgraph's own rubber band across the full height, and on release
    :attr:`span_selected` carries its two ends in view coordinates; the owner sets the range
    (so it can stop fitting or following first).

    Signals:
        span_selected(float, float): The x range the user marked (low, high).
    """

    span_selected = QtSignal(float, float)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._spanning = False

    def mouseDragEvent(self, ev: Any, axis: int | None = None) -> None:
        left = ev.button() == Qt.MouseButton.LeftButton
        if left and axis is None and ev.isStart():
            self._spanning = bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if not (left and axis is None and self._spanning):
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        down, here = ev.buttonDownPos(ev.button()), ev.pos()
        box = self.boundingRect()
        if not ev.isFinish():
            self.updateScaleBox(QPointF(down.x(), box.top()), QPointF(here.x(), box.bottom()))
            return
        self._spanning = False
        self.rbScaleBox.hide()
        if abs(here.x() - down.x()) < 4:  # a twitch, not a span
            return
        low, high = sorted((self.mapToView(down).x(), self.mapToView(here).x()))
        self.span_selected.emit(low, high)
