"""Light and dark themes: the Fusion style with a palette, following the system when asked.

``"system"`` follows ``QStyleHints.colorScheme()`` and re-applies when it changes. Plots
(pyqtgraph, used by later views) take their colours from :func:`plot_colors`.
"""

from __future__ import annotations

import sys
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

__all__ = ["THEMES", "apply_plot_theme", "apply_theme", "blend", "is_dark", "plot_colors",
           "resolve_theme"]

THEMES = ("system", "light", "dark")

_LIGHT = {
    QPalette.ColorRole.Window: "#f3f4f6", QPalette.ColorRole.WindowText: "#1f2328",
    QPalette.ColorRole.Base: "#ffffff", QPalette.ColorRole.AlternateBase: "#f6f8fa",
    QPalette.ColorRole.Text: "#1f2328", QPalette.ColorRole.Button: "#e9ebef",
    QPalette.ColorRole.ButtonText: "#1f2328", QPalette.ColorRole.Highlight: "#2f6feb",
    QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#ffffe1",
    QPalette.ColorRole.ToolTipText: "#1f2328", QPalette.ColorRole.PlaceholderText: "#8c959f",
    QPalette.ColorRole.Link: "#0969da", QPalette.ColorRole.Mid: "#c9ced6",
}
_DARK = {
    QPalette.ColorRole.Window: "#202329", QPalette.ColorRole.WindowText: "#e6e8eb",
    QPalette.ColorRole.Base: "#16181d", QPalette.ColorRole.AlternateBase: "#1d2026",
    QPalette.ColorRole.Text: "#e6e8eb", QPalette.ColorRole.Button: "#2b2f37",
    QPalette.ColorRole.ButtonText: "#e6e8eb", QPalette.ColorRole.Highlight: "#3b82f6",
    QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2b2f37",
    QPalette.ColorRole.ToolTipText: "#e6e8eb", QPalette.ColorRole.PlaceholderText: "#7d8590",
    QPalette.ColorRole.Link: "#58a6ff", QPalette.ColorRole.Mid: "#3a3f48",
}
_DISABLED_TEXT = {"light": "#8c959f", "dark": "#6e7681"}


def resolve_theme(choice: str) -> str:
    """``"light"`` or ``"dark"`` for a setting of system/light/dark."""
    if choice in ("light", "dark"):
        return choice
    hints = QGuiApplication.styleHints()
    return "dark" if hints.colorScheme() == Qt.ColorScheme.Dark else "light"


def apply_theme(app: QApplication, choice: str) -> str:
    """Apply the theme for ``choice`` to ``app``; returns the one applied (light or dark)."""
    name = resolve_theme(choice)
    app.setStyle("Fusion")
    palette = QPalette()
    for role, colour in (_DARK if name == "dark" else _LIGHT).items():
        palette.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText,
                 QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(_DISABLED_TEXT[name]))
    app.setPalette(palette)
    app.setProperty("mnemoscope_theme", name)
    if "pyqtgraph" in sys.modules:  # only once a plot view has imported it (startup stays light)
        import pyqtgraph

        background, foreground = plot_colors(name)
        pyqtgraph.setConfigOptions(background=background, foreground=foreground)
    return name


def is_dark(app: QApplication) -> bool:
    """True when the applied theme is dark."""
    return bool(app.property("mnemoscope_theme") == "dark")


def apply_plot_theme(plot: Any, name: str) -> None:
    """Colour a pyqtgraph ``PlotWidget``'s background and left/bottom axes for theme ``name``."""
    background, foreground = plot_colors(name)
    plot.setBackground(background)
    for axis in ("left", "bottom"):
        plot.getAxis(axis).setTextPen(foreground)
        plot.getAxis(axis).setPen(foreground)


def plot_colors(name: str) -> tuple[str, str]:
    """(background, foreground) for plots in theme ``name``."""
    return (_DARK if name == "dark" else _LIGHT)[QPalette.ColorRole.Base], \
        (_DARK if name == "dark" else _LIGHT)[QPalette.ColorRole.Text]


def blend(low: str | QColor, high: str | QColor, t: float) -> QColor:
    """The colour ``t`` (clipped to 0..1) of the way from ``low`` to ``high`` (linear RGB)."""
    a, b = QColor(low), QColor(high)
    t = min(1.0, max(0.0, t))
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t,
                           a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t)
