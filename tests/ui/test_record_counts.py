"""The status bar's record count and the Records table's count agree (polish).

Seen once after the demo data load: the status bar said 206 records while the table held 225.
The layer service writes derived records by itself (a social summary per counterpart, a
procedural record per pattern) when the Layers view reads; no call of the window's session made
those writes, so nothing recounted — until a filter change reloaded the table, which then held
the new records beside the old count.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from engine.records import Layer, NewMemory, RecordState
from engine.store import StoreSpec
from tests.ui.conftest import open_fresh, open_store, run
from ui.main_window import MainWindow
from ui.records.records_view import STATE_CHOICES

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

MEETINGS = [("mia", 0.4), ("mia", 0.7), ("chris", -0.2), ("mia", 0.9), ("chris", -0.6)]


@pytest.fixture
def social_store(tmp_path: Path) -> Path:
    """Five interaction records of agent ``robot`` with two people, and no derived summary
    yet (the layer service never ran on this store)."""
    path = tmp_path / "store"
    engine = open_fresh(StoreSpec(str(path)))
    try:
        for day, (person, sentiment) in enumerate(MEETINGS):
            engine.add(NewMemory(
                content=f"{person} talked with the robot about the garden on day {day}",
                agent_id="robot", layer=Layer.SOCIAL,
                metadata={"social": {"otherAgentId": person, "sentiment": sentiment}}))
        assert engine.count() == len(MEETINGS)
    finally:
        engine.close()
    return path


def test_records_the_layers_view_derives_are_counted_in_the_status_bar_and_the_table(
        qtbot: QtBot, make_window: Callable[..., MainWindow], social_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, social_store)
    records = window.records
    assert window.count_label.text() == records.count_label.text() == "5 records"
    window.nav.setCurrentRow(list(window.views).index("layers"))
    window.layers.show_tab("social")
    social = window.layers.social
    qtbot.waitUntil(lambda: len(social.summaries) == 2, timeout=20_000)
    # the two summaries are records now: the count and the table follow without a reload
    qtbot.waitUntil(lambda: window.count_label.text() == "7 records"
                    and records.model.settled and records.model.total == 7, timeout=10_000)
    assert records.count_label.text() == "7 records"
    session = window.session
    assert session is not None
    assert run(qtbot, session.runner.run(session.engine.count)) == 7


def test_the_table_says_how_many_of_the_stores_records_its_filters_show(
        qtbot: QtBot, make_window: Callable[..., MainWindow], social_store: Path) -> None:
    """An archived record is counted in the store (status bar) and hidden by the default
    State filter: the table says "4 of 5 records", not a bare "4 records" beside "5 records"."""
    window = make_window()
    open_store(qtbot, window, social_store)
    records = window.records
    session = window.session
    assert session is not None
    first = records.model.record_at(0)
    assert first is not None
    run(qtbot, records.set_state([first.id], RecordState.ARCHIVED))
    qtbot.waitUntil(lambda: records.model.settled and records.model.total == 4,
                    timeout=10_000)
    qtbot.waitUntil(lambda: records.count_label.text() == "4 of 5 records", timeout=10_000)
    assert window.count_label.text() == "5 records"
    records.filters.state.setCurrentIndex(len(STATE_CHOICES) - 1)  # every state
    qtbot.waitUntil(lambda: records.model.settled and records.model.total == 5,
                    timeout=10_000)
    assert records.count_label.text() == window.count_label.text() == "5 records"
    records.filters.text.setText("mia")  # a search says the same
    qtbot.waitUntil(lambda: records.model.settled and records.model.total == 3,
                    timeout=10_000)
    assert records.count_label.text() == "3 of 5 records"
