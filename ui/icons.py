"""The window's line icons: monochrome SVGs in ``assets/icons/ui`` tinted for the theme.

Each icon is drawn on a 24×24 grid with ``stroke="currentColor"`` (as line-icon sets are), so one
file serves light and dark: :func:`themed_icon` substitutes the palette's text colour (and the
disabled text colour for the disabled state) and renders it with QtSvg at the sizes asked for.
The window calls it again when the palette changes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

__all__ = ["ICON_DIR", "icon_names", "themed_icon"]

ICON_DIR = Path(__file__).resolve().parent.parent / "assets" / "icons" / "ui"
_SIZES = (16, 20, 24, 32, 48, 64)


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


def _pixmap(svg: str, colour: QColor, size: int) -> QPixmap:
    renderer = QSvgRenderer(QByteArray(svg.replace("currentColor", colour.name()).encode()))
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return pixmap


def themed_icon(name: str, palette: QPalette, colour: QColor | None = None) -> QIcon:
    """Icon ``name`` in ``palette``'s text colour (or ``colour``), with selected and disabled looks.

    Args:
        name: File stem in :data:`ICON_DIR` (``"records"``, ``"import"``, …).
        palette: The palette to take the normal and disabled text colours from.
        colour: A colour to draw the normal state in instead (an accent).

    Raises:
        FileNotFoundError: The icon file is missing (names the file).
    """
    svg = _source(name)
    normal = colour or palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.WindowText)
    disabled = palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
    selected = palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.HighlightedText)
    made = QIcon()
    for size in _SIZES:
        made.addPixmap(_pixmap(svg, normal, size), QIcon.Mode.Normal)
        made.addPixmap(_pixmap(svg, selected, size), QIcon.Mode.Selected)
        made.addPixmap(_pixmap(svg, disabled, size), QIcon.Mode.Disabled)
    return made
