"""One empty state for every view: a centred message over the part of a view that has nothing
to show yet, saying what to do next, with buttons for it.

It covers a widget exactly and follows its geometry, so a view adds one without changing its
layout: ``EmptyState(self.table)`` and then :meth:`EmptyState.show_message` when there is nothing
to show, :meth:`EmptyState.clear` when there is. Buttons are actions (the window's "Load demo
data", "Import…", a view's "Clear filters"): a button triggers its action and follows its enabled
state and text.

The labels, buttons and icon are built and filled when the message is first on screen, not when
it is asked for: the window has twenty of these, most on views not shown, and building them all
up front (and re-tinting their icons on every theme change) cost the GUI thread tens of ms.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt
from PySide6.QtGui import QAction, QPalette, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ui.shared.icons import themed_icon

__all__ = ["EmptyState"]

_ICON_SIZE = 48


def _button_text(action: QAction) -> str:
    """An action's menu text as a button label ("&Import JSONL…" → "Import JSONL…")."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&")


class _Parts:
    """The widgets of a message on screen (built on first show)."""

    def __init__(self, owner: QFrame) -> None:
        self.icon = QLabel(owner)
        self.icon.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title = QLabel("", owner)
        self.title.setObjectName("empty_title")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title.setWordWrap(True)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.35)
        font.setBold(True)
        self.title.setFont(font)  # a font, not a style sheet: style sheets freeze the palette
        self.text = QLabel("", owner)
        self.text.setObjectName("empty_text")
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.text.setWordWrap(True)
        self.text.setMaximumWidth(560)
        self.buttons = QHBoxLayout()
        self.buttons.setSpacing(8)
        layout = QVBoxLayout(owner)
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
        row.addLayout(self.buttons)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)


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
        watched = [cover]  # the cover and the splitters between it and the host
        while isinstance(host, QSplitter):
            host = host.parentWidget()
            if isinstance(host, QSplitter):
                watched.append(host)
        if host is None:
            raise ValueError(f"EmptyState: {cover!r} is a splitter without a parent to host it")
        super().__init__(host)
        self.setObjectName("empty_state")
        self._cover, self._host, self._watched = cover, host, watched
        self._icon_name = icon
        self._title = self._text = ""
        self._actions: list[QAction] = []
        self._parts: _Parts | None = None
        self._shown_actions: list[QAction] = []
        self._stale = False  # the message changed since it was put on screen
        self._icon_stale = True
        self.buttons: list[QPushButton] = []
        """The buttons on screen, one per action (empty until the message was shown)."""
        self.setAutoFillBackground(True)  # hides what it covers (the palette's window colour)
        self.setBackgroundRole(QPalette.ColorRole.Window)
        for widget in watched:
            widget.installEventFilter(self)
        self.hide()

    # -- showing ---------------------------------------------------------------------------

    def is_shown(self) -> bool:
        """True while the message is up (whether or not its view is on screen)."""
        return not self.isHidden()

    def title(self) -> str:
        """The title of the message (the last one asked for)."""
        return self._title

    def text(self) -> str:
        """The sentence under the title."""
        return self._text

    def button_texts(self) -> list[str]:
        """The labels of the message's buttons."""
        return [_button_text(action) for action in self._actions]

    def show_message(self, title: str, text: str, actions: Sequence[QAction] = ()) -> None:
        """Cover the widget with ``title``, ``text`` and a button per action."""
        self._title, self._text, self._actions = title, text, list(actions)
        self._stale = True
        if self._actions != self._shown_actions:
            self._drop_buttons()  # none of the old message's buttons outlives it
        self._follow()
        self.raise_()
        self.show()
        if self.isVisible():  # on screen now (else when its view is shown: showEvent)
            self._fill()

    def clear(self) -> None:
        """Uncover the widget."""
        self.hide()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale or self._icon_stale:
            self._fill()

    def _fill(self) -> None:
        parts = self._parts
        if parts is None:
            parts = self._parts = _Parts(self)
        if self._stale:
            self._stale = False
            parts.title.setText(self._title)
            parts.text.setText(self._text)
            if self._actions != self._shown_actions:
                self._set_buttons(parts)
        if self._icon_stale:
            self._icon_stale = False
            if self._icon_name:
                parts.icon.setPixmap(themed_icon(self._icon_name, self.palette()).pixmap(
                    _ICON_SIZE, _ICON_SIZE))
        self._fit()

    def _fit(self) -> None:
        """Leave out the icon, then the sentence (then on the title's hover), where the
        covered part is too short for them: squeezed, the icon was cut in half and the
        sentence's lines drawn over each other (the Budget view's calls at 900×600)."""
        parts, layout = self._parts, self.layout()
        if parts is None or layout is None:
            return
        # (parts made while the message is on screen are shown by their layout a turn later:
        # shown here, they count in the height from the start)
        parts.title.setVisible(True)
        parts.icon.setVisible(bool(self._icon_name))
        parts.text.setVisible(True)
        for part in (parts.icon, parts.text):
            if self._needed_height(layout) <= self.height():
                break
            part.setVisible(False)
        parts.title.setToolTip("" if parts.text.isVisible() else self._text)

    def _needed_height(self, layout: QLayout) -> int:
        layout.invalidate()  # the parts shown changed: the cached heights are stale
        width = self.width()
        return layout.totalHeightForWidth(width) if layout.hasHeightForWidth() \
            else layout.totalMinimumSize().height()

    def _drop_buttons(self) -> None:
        for old in self._shown_actions:
            old.changed.disconnect(self._sync_buttons)
        for button in self.buttons:
            button.hide()
            button.deleteLater()  # its layout forgets it when it is deleted
        self._shown_actions = []
        self.buttons = []

    def _set_buttons(self, parts: _Parts) -> None:
        self._drop_buttons()
        self._shown_actions = list(self._actions)
        self.buttons = []
        for number, action in enumerate(self._shown_actions):
            button = QPushButton(self)
            button.setDefault(number == 0)
            button.clicked.connect(action.trigger)
            action.changed.connect(self._sync_buttons)
            parts.buttons.addWidget(button)
            self.buttons.append(button)
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        for action, button in zip(self._shown_actions, self.buttons, strict=True):
            button.setText(_button_text(action))
            button.setToolTip(action.toolTip())
            button.setIcon(action.icon())
            button.setEnabled(action.isEnabled())
            button.setVisible(action.isVisible())

    # -- following the covered widget and the theme ----------------------------------------

    def _follow(self) -> None:
        cover = self._cover
        corner = QPoint(0, 0) if cover is self._host else cover.mapTo(self._host, QPoint(0, 0))
        self.setGeometry(QRect(corner, cover.size()))
        if self.isVisible():
            self._fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The garbage collector clears the attributes of a window's Python objects before Qt
        # destroys its widgets, and the covered widget's last events can arrive in between
        followed = self.__dict__.get("_watched", ())
        if watched in followed and event.type() in (QEvent.Type.Resize, QEvent.Type.Move):
            self._follow()
        return False

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._icon_stale = True  # re-tinted now if on screen, else when next shown
            if self.isVisible():
                self._fill()
