"""Status messages ("Saved content", "Deleted 1 record", "Filters cleared: they hid the record
you opened") are readable at the window's small size: the store's location gives them its
place for a while; the permanent fields left them no room."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QStatusBar, QWidget
from pytestqt.qtbot import QtBot

from engine.records import NewMemory
from engine.store import StoreSpec
from tests.ui.conftest import open_fresh, open_store
from ui.main_window import MainWindow

MESSAGE = "Filters cleared: they hid the record you opened"


def _message_room(bar: QStatusBar) -> int:
    """Pixels left of the leftmost permanent field shown (where a message is drawn)."""
    permanent = [w for w in bar.findChildren(QWidget) if w.parentWidget() is bar
                 and w.isVisible() and w.geometry().left() > 0]
    return min(w.geometry().left() for w in permanent)


@pytest.mark.parametrize("size", [(900, 600), (1280, 800)])
def test_a_status_message_has_room_beside_the_permanent_fields(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        size: tuple[int, int]) -> None:
    store = tmp_path / "a-store-folder-with-a-long-enough-name" / "store"
    engine = open_fresh(StoreSpec(str(store)))
    engine.ingest(NewMemory(content="Bob is allergic to peanuts"))
    engine.close()
    window = make_window()
    open_store(qtbot, window, store)
    window.resize(*size)
    bar = window.statusBar()
    qtbot.waitUntil(lambda: bar.width() == window.width() and window.store_label.isVisible())
    assert window.store_label.text().endswith(str(store))
    bar.showMessage(MESSAGE, 5000)
    needed = bar.fontMetrics().horizontalAdvance(MESSAGE)
    qtbot.waitUntil(lambda: not window.store_label.isVisible()
                    and _message_room(bar) > needed)
    bar.clearMessage()
    qtbot.waitUntil(window.store_label.isVisible)  # the location is back after the message
