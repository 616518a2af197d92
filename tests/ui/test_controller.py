"""Issue 20: the application controller's policies, seen through the window.

Detach returns to the store shown before attaching (counts and views follow); the Review count
in the sidebar and status bar follows every change to the queue; one registry gives every view
the session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from engine.introspection import serve_in_thread
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.ui.conftest import open_fresh, open_store, run
from tests.ui.observe_fixtures import BASE, CONTRADICTION, GRAY
from ui.main_window import MainWindow
from ui.shared.session import StoreSession

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def _seed(path: Path, contents: list[str]) -> None:
    engine = open_fresh(StoreSpec(str(path)))
    try:
        for content in contents:
            engine.add(NewMemory(content, agent_id="home-robot"))
    finally:
        engine.close()


def _enabled(window: MainWindow, name: str) -> bool:
    item = window.nav.item(list(window.views).index(name))
    return bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)


def test_detach_returns_to_the_store_shown_before_attaching(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    mine, agents = tmp_path / "mine", tmp_path / "agent"
    _seed(mine, ["The fern stands on the windowsill", "Mia hides behind the sofa",
                 "Chris parks his bike in the hallway"])
    _seed(agents, ["Jordan likes coffee at 6:45"])
    window = make_window()
    open_store(qtbot, window, mine)
    qtbot.waitUntil(lambda: window.count_label.text() == "3 records")
    agent_engine = open_fresh(StoreSpec(str(agents), read_only=True))
    server = serve_in_thread(agent_engine, port=0)
    try:
        assert run(qtbot, window.attach(server.url, server.token)) is not None
        qtbot.waitUntil(lambda: window.count_label.text() == "1 record")
        assert window.records.session is window.attached_session  # the store was closed
        assert not _enabled(window, "review") and not window.import_action.isEnabled()

        run(qtbot, window.detach(), timeout=60)
    finally:
        server.stop()
        agent_engine.close()
    session = window.session
    assert session is not None and session.spec.location == str(mine)
    assert window.attached_session is None
    assert window.store_label.text() == f"embedded: {mine}"
    qtbot.waitUntil(lambda: window.count_label.text() == "3 records")
    qtbot.waitUntil(lambda: window.records.model.settled and window.records.model.total == 3)
    assert all(_enabled(window, name) for name in window.views)
    assert not window.detach_action.isEnabled() and window.import_action.isEnabled()
    # every registered view has the reopened store again (none kept the agent's reader)
    qtbot.waitUntil(lambda: window.observe.review._session is session
                    and window.fate._session is session and window.scan._session is session)


def test_detach_without_a_store_before_shows_no_store(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    agents = tmp_path / "agent"
    _seed(agents, ["Jordan likes coffee at 6:45"])
    window = make_window()
    agent_engine = open_fresh(StoreSpec(str(agents), read_only=True))
    server = serve_in_thread(agent_engine, port=0)
    try:
        assert run(qtbot, window.attach(server.url, server.token)) is not None
        qtbot.waitUntil(lambda: window.count_label.text() == "1 record")
        run(qtbot, window.detach())
    finally:
        server.stop()
        agent_engine.close()
    assert window.session is None and window.attached_session is None
    assert window.store_label.text() == "No store" and window.count_label.text() == ""
    assert not window.banner.isVisible()
    assert all(_enabled(window, name) for name in window.views)
    assert window.records.session is None and window.observe.timeline._session is None


def _review_shown(window: MainWindow, pending: int) -> bool:
    item = window.nav.item(list(window.views).index("review"))
    if pending == 0:
        return item.text() == "Review" and not window.review_label.isVisibleTo(window)
    noun = "review" if pending == 1 else "reviews"
    return item.text() == f"Review ({pending})" \
        and window.review_label.text() == f"{pending} {noun} pending" \
        and window.review_label.isVisibleTo(window)


def test_review_count_follows_every_change_to_the_queue(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    store = tmp_path / "store"
    engine = open_fresh(StoreSpec(str(store)))
    engine.ingest(NewMemory(content=BASE))
    engine.ingest(NewMemory(content=GRAY))  # held for review before the window opens
    engine.close()
    window = make_window()
    open_store(qtbot, window, store)
    qtbot.waitUntil(lambda: _review_shown(window, 1))
    session = window.session
    assert isinstance(session, StoreSession)

    # an ingest that writes no record but defers one (as the pipeline view's persist does)
    run(qtbot, session.run_write(session.engine.ingest, NewMemory(content=CONTRADICTION)))
    qtbot.waitUntil(lambda: _review_shown(window, 2))

    review = window.observe.review
    qtbot.waitUntil(lambda: len(review.items) == 2)
    run(qtbot, review.decide([review.items[0][0].id], "approve"))
    qtbot.waitUntil(lambda: _review_shown(window, 1))
    window.undo_action.trigger()  # the approval comes back to the queue
    qtbot.waitUntil(lambda: _review_shown(window, 2))
    qtbot.waitUntil(lambda: len(review.items) == 2)  # the view's own list follows too
    run(qtbot, review.decide([item.id for item, _ in review.items], "reject"))
    qtbot.waitUntil(lambda: _review_shown(window, 0))


def test_import_refreshes_the_review_count(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    store = tmp_path / "store"
    engine = open_fresh(StoreSpec(str(store)))
    engine.ingest(NewMemory(content=BASE))
    engine.close()
    source = tmp_path / "held.jsonl"
    source.write_text(f'{{"content": "{GRAY}"}}\n', encoding="utf-8")
    window = make_window()
    open_store(qtbot, window, store)
    qtbot.waitUntil(lambda: _review_shown(window, 0))
    assert run(qtbot, window.run_import(source)) is not None
    qtbot.waitUntil(lambda: _review_shown(window, 1))


def test_one_registry_gives_every_session_view_the_store(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    store = tmp_path / "store"
    _seed(store, ["The fern stands on the windowsill"])
    window = make_window()
    views = window.controller.views
    assert views.names == ("records", "timeline", "pipeline", "review", "retrieval", "map",
                           "layers", "secrets", "fate")
    assert views.store_only == {"pipeline", "review", "retrieval", "map", "secrets", "fate",
                                "budget"}
    open_store(qtbot, window, store)
    session = window.session
    qtbot.waitUntil(lambda: all(view._session is session for view in (
        window.observe.timeline, window.observe.pipeline, window.observe.review,
        window.observe.retrieval, window.observe.map, window.fate, window.scan)))
    run(qtbot, window.close_store())
    assert all(view._session is None for view in (
        window.observe.timeline, window.observe.pipeline, window.observe.review,
        window.observe.retrieval, window.observe.map, window.fate, window.scan))
    assert window.records.session is None and window.store_label.text() == "No store"
