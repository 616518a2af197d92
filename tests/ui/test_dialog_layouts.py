"""Issue 20: the dialogs keep their size when a message appears (room is reserved for it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtWidgets import QDialog, QLabel, QWidget
from pytestqt.qtbot import QtBot

from ui.shared.dialogs import AddMemoryDialog, AttachDialog, ConnectDialog

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

REFUSED = ("Could not connect to the agent's Mnemoscope API at 127.0.0.1:8765 — connection "
           "refused. Is `mnemoscope serve` running there, on this host and port?")


def _settled_size(dialog: QDialog) -> tuple[int, int]:
    layout = dialog.layout()
    assert layout is not None
    layout.activate()  # applies the new minimum size at once (a dialog grows to it)
    return dialog.width(), dialog.height()


def _shown(qtbot: QtBot, dialog: QDialog) -> QDialog:
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _attach_error(dialog: QDialog) -> None:
    assert isinstance(dialog, AttachDialog)
    dialog.set_busy(True)  # "Connecting…"
    dialog.show_error(REFUSED)


def _connect_error(dialog: QDialog) -> None:
    assert isinstance(dialog, ConnectDialog)
    dialog.url.setText("localhost:8000")
    dialog._on_accept()  # the URL must start with http://


def _add_error(dialog: QDialog) -> None:
    assert isinstance(dialog, AddMemoryDialog)
    dialog._on_accept()  # no content: the engine's validation error


@pytest.mark.parametrize(("make", "say"), [
    (lambda parent: AttachDialog(("http://127.0.0.1:8765",), parent), _attach_error),
    (lambda parent: ConnectDialog(parent), _connect_error),
    (lambda parent: AddMemoryDialog(["assistant"], parent), _add_error),
], ids=["attach", "connect", "add-memory"])
def test_a_message_does_not_change_the_dialog_size(
        qtbot: QtBot, make: Callable[[QWidget | None], QDialog],
        say: Callable[[QDialog], None]) -> None:
    dialog = _shown(qtbot, make(None))
    # at its smallest (as a person may size it, or as a platform shows it): nothing to spare
    dialog.resize(dialog.minimumSizeHint())
    before = _settled_size(dialog)
    hint = dialog.minimumSizeHint()
    say(dialog)
    error = getattr(dialog, "error", None)
    assert isinstance(error, QLabel) and error.text()
    assert _settled_size(dialog) == before
    assert dialog.minimumSizeHint() == hint
    # and the message shows whole (not cut to the height an empty label had)
    assert error.height() >= error.heightForWidth(error.width()) > 0
    dialog.reject()


def test_a_memory_added_by_hand_is_private_unless_chosen_otherwise(qtbot: QtBot) -> None:
    """The engine, ``mnemoscope add`` and the Pipeline's form default to private; Add memory
    offered "public" (its box's first item), so a personal fact typed there was stored public."""
    from engine.records import Privacy

    dialog = AddMemoryDialog(["default"])
    qtbot.addWidget(dialog)
    assert dialog.privacy.currentText() == "private"
    dialog.content.setPlainText("Sam's passport number ends in 4471")
    assert dialog.build().privacy is Privacy.PRIVATE
