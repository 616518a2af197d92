"""One empty state for every view: a centred message over the part of a view that has nothing
to show yet, saying what to do next, with buttons for it.

It covers a widget exactly and follows its geometry, so a view adds one without changing its
layout: ``EmptyState(self.table)`` and then :meth:`EmptyState.show_message` when
there is nothing to show, :meth:`EmptyState.clear` when there is. Buttons are actions (the
window's "Load demo data", "Import…", a view's "Clear filters"): a button triggers its action and
follows its enabled state and text.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt
from PySide6.QtGui import QAction, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ui.icons import themed_icon

__all__ = ["EmptyState"]

_ICON_SIZE = 48


def _button_text(action: QAction) -> str:
    """An action's menu text as a button label ("&Import JSONL…" → "Import JSONL…")."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&")


class EmptyState(QFrame):
    """A message and next steps shown over ``cover`` while it has nothing to show.

    Args:
        cover: The widget to cover. It becomes the parent, except a splitter (which would take
            the message as one more pane): then the nearest ancestor that is not a splitter
            is, and the message follows the splitter's place in it.
        icon: Name of an icon in ``assets/icons/ui`` shown above the title ("" for none).
    """

    def __init__(self, cover: QWidget, icon: str = "") -> None:
        host: QWidget | None = cover
        self._watched = [cover]  # the cover and the splitters between it and the host
        while isinstance(host, QSplitter):
            host = host.parentWidget()
            if isinstance(host, QSplitter):
                self._watched.append(host)
        if host is None:
            raise ValueError(f"EmptyState: {cover!r} is a splitter without a parent to host it")
        super().__init__(host)
        self._cover = cover
        self._host = host
        self._icon_name = icon
        self._actions: list[QAction] = []
        self.icon = QLabel(self)
        self.setObjectName("empty_state")
        self.setAutoFillBackground(True)  # hides what it covers (the palette's window colour)
        self.setBackgroundRole(QPalette.ColorRole.Window)
        self.icon.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title = QLabel("", self)
        self.title.setObjectName("empty_title")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title.setWordWrap(True)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.35)
        font.setBold(True)
        self.title.setFont(font)  # a font, not a style sheet: style sheets freeze the palette
        self.text = QLabel("", self)
        self.text.setObjectName("empty_text")
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.text.setWordWrap(True)
        self.text.setMaximumWidth(560)
        self._buttons = QHBoxLayout()
        self._buttons.setSpacing(8)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        layout.addWidget(self.icon)
        layout.addWidget(self.title)
        # Centred by stretches, not by an alignment: an aligned label gets its one-line size
        # hint as width and a word-wrapped text is then cut.
        text_row = QHBoxLayout()
        text_row.addStretch(1)
        text_row.addWidget(self.text, 6)
        text_row.addStretch(1)
        layout.addLayout(text_row)
        layout.addSpacing(6)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addLayout(self._buttons)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)
        self.buttons: list[QPushButton] = []
        self._paint_icon()
        for watched in self._watched:
            watched.installEventFilter(self)
        self._follow()
        self.hide()

    # -- showing ---------------------------------------------------------------------------

    def is_shown(self) -> bool:
        """True while the message is up (whether or not the view itself is on screen)."""
        return not self.isHidden()

    def show_message(self, title: str, text: str, actions: Sequence[QAction] = ()) -> None:
        """Cover the widget with ``title``, ``text`` and a button per action."""
        self.title.setText(title)
        self.text.setText(text)
        if list(actions) != self._actions:
            self._set_actions(actions)
        self._follow()
        self.raise_()
        self.show()

    def clear(self) -> None:
        """Uncover the widget."""
        self.hide()

    def _set_actions(self, actions: Sequence[QAction]) -> None:
        for old in self._actions:
            old.changed.disconnect(self._sync_buttons)
        for button in self.buttons:
            self._buttons.removeWidget(button)
            button.deleteLater()
        self._actions = list(actions)
        self.buttons = []
        for number, action in enumerate(self._actions):
            button = QPushButton(self)
            button.setDefault(number == 0)
            button.clicked.connect(action.trigger)
            action.changed.connect(self._sync_buttons)
            self._buttons.addWidget(button)
            self.buttons.append(button)
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        for action, button in zip(self._actions, self.buttons, strict=True):
            button.setText(_button_text(action))
            button.setToolTip(action.toolTip())
            button.setIcon(action.icon())
            button.setEnabled(action.isEnabled())
            button.setVisible(action.isVisible())

    def _paint_icon(self) -> None:
        if self._icon_name:
            self.icon.setPixmap(themed_icon(self._icon_name, self.palette()).pixmap(
                _ICON_SIZE, _ICON_SIZE))
        self.icon.setVisible(bool(self._icon_name))

    # -- following the covered widget ------------------------------------------------------

    def _follow(self) -> None:
        cover = self._cover
        corner = QPoint(0, 0) if cover is self._host else cover.mapTo(self._host, QPoint(0, 0))
        self.setGeometry(QRect(corner, cover.size()))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched in self._watched and event.type() in (QEvent.Type.Resize, QEvent.Type.Move):
            self._follow()
        return False

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._paint_icon()
