"""Walk every widget of a window and collect the text a person could see (issue 9 tests)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsTextItem,
    QGraphicsView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

MAX_ROWS = 400


def shown_texts(window: QMainWindow) -> list[str]:
    """Every text of the window and its dialogs: titles, labels, line edits (as displayed),
    text edits, tooltips, graphics-scene texts and item tooltips (task graph, plots), item-view
    cells (DisplayRole and ToolTipRole over the loaded rows), the status bar message.

    Hidden widgets are scanned too (a stricter check than "visible"): a tab or pane shown later
    must not hold unmasked text either.
    """
    texts = [window.windowTitle(), window.statusBar().currentMessage()]
    for widget in window.findChildren(QWidget):
        texts.append(widget.toolTip())
        texts.append(widget.windowTitle())
        if isinstance(widget, QLabel):
            texts.append(widget.text())
        elif isinstance(widget, QLineEdit):
            texts.append(widget.displayText())  # as shown: a password field shows bullets
        elif isinstance(widget, QTextEdit | QPlainTextEdit):
            texts.append(widget.toPlainText())
        elif isinstance(widget, QGraphicsView) and widget.scene() is not None:
            texts.extend(_scene_texts(widget.scene()))
        elif isinstance(widget, QAbstractItemView):
            model = widget.model()
            try:
                columns = model.columnCount(QModelIndex())
            except TypeError:  # list models keep columnCount private: one column
                columns = 1
            for row in range(min(model.rowCount(QModelIndex()), MAX_ROWS)):
                for column in range(columns):
                    index = model.index(row, column)
                    for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                        value = model.data(index, role)
                        if isinstance(value, str):
                            texts.append(value)
    return [t for t in texts if t]


def _scene_texts(scene: QGraphicsScene) -> list[str]:
    """Text drawn in a graphics scene (task graph labels, plot labels) and item tooltips."""
    texts: list[str] = []
    for item in scene.items():
        texts.append(item.toolTip())
        if isinstance(item, QGraphicsSimpleTextItem):
            texts.append(item.text())
        elif isinstance(item, QGraphicsTextItem):
            texts.append(item.toPlainText())
    return texts


def leaks(window: QMainWindow, secrets: list[str]) -> list[tuple[str, str]]:
    """(secret, text) pairs where a secret appears in a shown text."""
    return [(secret, text) for text in shown_texts(window) for secret in secrets
            if secret in text]
