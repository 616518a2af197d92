"""Small pyqtgraph items shared by the plot views."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg

__all__ = ["PassiveScatter"]


class PassiveScatter(pg.ScatterPlotItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A scatter drawn over others (rings, markers) that lets clicks through to them.

    pyqtgraph offers a click to the items under the cursor from the top down and stops at the
    first that accepts; a plain ring around a selected point would take the next click on it.
    """

    def mouseClickEvent(self, ev: Any) -> None:
        ev.ignore()
