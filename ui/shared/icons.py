"""The window's line icons: monochrome SVGs in ``assets/icons/ui`` tinted for the theme.

Each icon is drawn on a 24×24 grid with ``stroke="currentColor"`` (as line-icon sets are), so one
file serves light and dark: :func:`themed_icon` substitutes the palette's text colour (the
highlighted-text colour when selected, the disabled text colour when greyed) and QtSvg renders
it. Rendering is lazy, at the size and in the state a widget paints, once each (an icon engine
with a cache): the window re-tints every icon when the theme changes, and rendering all sizes and
states up front cost ~75 ms of the GUI thread for the sidebar and toolbar alone (measured).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

__all__ = ["ICON_DIR", "icon_names", "themed_icon"]

ICON_DIR = Path(__file__).resolve().parents[2] / "assets" / "icons" / "ui"


@cache
def _source(name: str) -> str:
    path = ICON_DIR / f"{name}.svg"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:  # a packaging mistake: say which file is missing
        raise FileNotFoundError(f"icon {name!r}: cannot read {path}: {exc}") from exc


def icon_names() -> list[str]:
    """The names of the icons shipped (file stems)."""
    return sorted(path.stem for path in ICON_DIR.glob("*.svg"))


class _TintedSvgEngine(QIconEngine):
    """Renders one SVG in a colour per icon mode, at each size asked for, once."""

    def __init__(self, svg: str, colours: dict[QIcon.Mode, QColor]) -> None:
        super().__init__()
        self._svg = svg
        self._colours = colours
        self._cache: dict[tuple[int, int, QIcon.Mode], QPixmap] = {}

    def _colour(self, mode: QIcon.Mode) -> QColor:
        return self._colours.get(mode, self._colours[QIcon.Mode.Normal])

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        key = (size.width(), size.height(), mode)
        made = self._cache.get(key)
        if made is None:
            svg = self._svg.replace("currentColor", self._colour(mode).name())
            renderer = QSvgRenderer(QByteArray(svg.encode()))
            made = QPixmap(size)
            made.fill(Qt.GlobalColor.transparent)
            side = min(size.width(), size.height())  # square, centred
            target = QRectF((size.width() - side) / 2, (size.height() - side) / 2, side, side)
            painter = QPainter(made)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            renderer.render(painter, target)
            painter.end()
            self._cache[key] = made
        return made

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode,
              state: QIcon.State) -> None:
        ratio = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        size = QSize(round(rect.width() * ratio), round(rect.height() * ratio))
        painter.drawPixmap(rect, self.pixmap(size, mode, state))

    def clone(self) -> QIconEngine:
        return _TintedSvgEngine(self._svg, self._colours)


def themed_icon(name: str, palette: QPalette, colour: QColor | None = None) -> QIcon:
    """Icon ``name`` in ``palette``'s text colour (or ``colour``), with selected and disabled
    looks.

    Args:
        name: File stem in :data:`ICON_DIR` (``"records"``, ``"import"``, …).
        palette: The palette to take the normal, selected and disabled colours from.
        colour: A colour to draw the normal state in instead (an accent).

    Raises:
        FileNotFoundError: The icon file is missing (names the file).
    """
    normal = colour or palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.WindowText)
    colours = {
        QIcon.Mode.Normal: normal, QIcon.Mode.Active: normal,
        QIcon.Mode.Selected: palette.color(QPalette.ColorGroup.Active,
                                           QPalette.ColorRole.HighlightedText),
        QIcon.Mode.Disabled: palette.color(QPalette.ColorGroup.Disabled,
                                           QPalette.ColorRole.WindowText),
    }
    return QIcon(_TintedSvgEngine(_source(name), colours))
