"""An empty state over a short part of a view leaves out what does not fit instead of
squeezing it: the Budget view's "No LLM provider configured" at 900×600 drew half an icon and
its sentence's two lines cut through the middle."""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from ui.shared.empty_state import EmptyState

TEXT = ("Mnemoscope calls an LLM only to summarize and to extract memories. Choose a provider, "
        "model and daily budget to see its calls, spend and rate limits here.")


def _whole(state: EmptyState, widget: QWidget) -> bool:
    """``widget`` is inside the message and has the height its text needs."""
    needed = widget.heightForWidth(widget.width()) if widget.hasHeightForWidth() \
        else widget.sizeHint().height()
    return state.rect().contains(widget.geometry()) and widget.height() >= needed


def test_a_short_cover_leaves_out_the_icon_then_the_sentence(qtbot: QtBot) -> None:
    host = QWidget()
    qtbot.addWidget(host)
    host.resize(600, 400)
    cover = QWidget(host)
    cover.setGeometry(0, 0, 600, 150)
    host.show()
    state = EmptyState(cover, "budget")
    settings = QAction("Provider settings…", host)
    state.show_message("No LLM provider configured", TEXT, [settings])
    qtbot.waitUntil(lambda: state.isVisible() and len(state.buttons) == 1)
    title, text = state.findChild(QWidget, "empty_title"), state.findChild(QWidget, "empty_text")
    assert title is not None and text is not None
    icon = next(w for w in state.children() if isinstance(w, QWidget)
                and w not in (title, text, *state.buttons))
    parts = (title, text, state.buttons[0])

    # 150 px: the title, the whole sentence and the button; no room for the 48 px icon too
    qtbot.waitUntil(lambda: not icon.isVisible() and all(_whole(state, w) for w in parts))
    assert text.isVisible() and title.toolTip() == ""

    cover.resize(600, 90)  # the title and the button; the sentence on the title's hover
    qtbot.waitUntil(lambda: not text.isVisible()
                    and all(_whole(state, w) for w in (title, state.buttons[0])))
    assert title.toolTip() == TEXT

    cover.resize(600, 300)  # room again: everything back
    qtbot.waitUntil(lambda: icon.isVisible() and text.isVisible()
                    and all(_whole(state, w) for w in (icon, *parts)))
    assert title.toolTip() == ""
