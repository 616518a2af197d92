"""A store without a usable view cache: first page at once, indexing behind it, filters wait.

The store is opened read-only (no lock, the cache is never rewritten), so one build serves the
module; its view cache is deleted so every open has to index it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from engine.exits import Masking
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, RowPage, SortKey
from engine.reader import LocalReader
from engine.records import Layer
from engine.store import StoreSpec, view_cache
from tests.ui.bigstore import build_store
from tests.ui.conftest import open_fresh, open_store, run
from ui.main_window import MainWindow
from ui.records.records_model import RecordTableModel
from ui.shared.tasks import TaskRunner, spawn

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
COUNT = 6000  # three 2000-record pages of indexing


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of COUNT records (record i written i-th) without a view cache."""
    path = tmp_path_factory.mktemp("indexing") / "store"
    build_store(path, COUNT)
    view_cache.invalidate(path)
    return path


def test_first_page_comes_before_the_index_then_the_query_order(
        qtbot: QtBot, make_window: Callable[..., MainWindow], uncached: Path) -> None:
    window = make_window()
    model = window.records.model
    first: list[tuple[bool, bool, str | None]] = []
    progress: list[tuple[int, int]] = []

    def on_reloaded() -> None:
        session = window.session
        if not first and session is not None:
            record = model.record_at(0)
            first.append((model.preview, session.indexing, record.id if record else None))

    model.reloaded.connect(on_reloaded)
    window.store_opened.connect(
        lambda session: session.indexing_progress.connect(
            lambda done, total: progress.append((done, total))))
    open_store(qtbot, window, uncached, read_only=True, indexed=False, timeout=60)
    session = window.session
    assert session is not None
    # The first page was Chroma's newest-written records, shown while the index was built.
    assert first == [(True, True, f"r{COUNT - 1:06d}")]
    assert model.total == COUNT
    assert window.index_label.isVisibleTo(window) or not session.indexing
    assert "newest written first" in window.records.count_label.text() or not session.indexing
    assert not window.export_action.isEnabled() or not session.indexing
    qtbot.waitUntil(lambda: not session.indexing, timeout=60_000)
    assert session.engine.view_ready and progress and progress[-1] == (COUNT, COUNT)
    qtbot.waitUntil(lambda: model.settled and not model.preview)
    assert model.total == COUNT and window.records.count_label.text() == f"{COUNT:,} records"
    assert not window.index_label.isVisibleTo(window)
    assert window.export_action.isEnabled()
    # Filter choices need the index: they arrive once it is built.
    qtbot.waitUntil(lambda: window.records.filters.agent.count() == 5)  # Any + 4 agents
    model.sort(model.sort_section())  # a sort runs in the engine now
    qtbot.waitUntil(lambda: model.settled)
    assert model.record_at(0) is not None and model.record_at(0).id == "r000000"  # type: ignore[union-attr]


def test_a_filter_waits_for_the_index_and_then_runs(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, runner: TaskRunner,
        uncached: Path) -> None:
    engine = open_fresh(StoreSpec(str(uncached), read_only=True), defer_view=True)
    gate = asyncio.Event()
    asked: list[str] = []

    class Index:  # a StoreIndex whose readiness the test releases
        @property
        def indexing(self) -> bool:
            return not gate.is_set()

        async def wait_indexed(self) -> bool:
            await gate.wait()
            return engine.view_ready

        def request_view(self, feature: str) -> None:
            asked.append(feature)

        def server_answers(self, query: RecordQuery, *,
                           shown: Masking | None = None) -> str | None:
            return engine.server_answers(query, shown=shown)

        def server_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
            return engine.server_rows(query, shown=shown)

        def server_count(self, query: RecordQuery, *, shown: Masking | None = None) -> int:
            return engine.server_count(query, shown=shown)

    model = RecordTableModel(runner)

    def state() -> tuple[bool, bool, bool, int]:
        return model.preview, model.waiting, model.settled, model.total

    try:
        model.set_reader(LocalReader(engine), Index())
        qtbot.waitUntil(lambda: model.settled)
        assert state() == (True, False, True, COUNT)
        assert [r.id if r else None for r in (model.record_at(0), model.record_at(1))] == \
            [f"r{COUNT - 1:06d}", f"r{COUNT - 2:06d}"]
        model.set_query(RecordQuery(layer=Layer.PROCEDURAL, sort_by=SortKey.IMPORTANCE))
        qtbot.waitUntil(lambda: model.waiting)
        assert state() == (False, True, False, 0)  # no preview rows under the filter
        assert asked == ["Sorting by importance"]  # the view is asked for by what needs it
        assert run(qtbot, runner.run(engine.load_view), timeout=120) == COUNT
        qtbot.wait(50)
        assert state() == (False, True, False, 0)  # still waiting for the session's word
        gate.set()
        qtbot.waitUntil(lambda: model.settled, timeout=30_000)
        assert state() == (False, False, True, COUNT // 6)
        shown = [model.record_at(r) for r in range(min(model.total, 200))]
        assert all(r is not None and r.layer is Layer.PROCEDURAL for r in shown)
        importances = [r.importance for r in shown if r is not None]
        assert importances == sorted(importances, reverse=True)
    finally:
        model.set_reader(None)
        engine.close()


class _ServerIndex:
    """A StoreIndex that is always indexing: every query Chroma can answer goes to the store."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    @property
    def indexing(self) -> bool:
        return True

    async def wait_indexed(self) -> bool:
        return False

    def request_view(self, feature: str) -> None:
        raise AssertionError(f"{feature} asked for the view")

    def server_answers(self, query: RecordQuery, *, shown: Masking | None = None) -> str | None:
        return self.engine.server_answers(query, shown=shown)

    def server_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        return self.engine.server_rows(query, shown=shown)

    def server_count(self, query: RecordQuery, *, shown: Masking | None = None) -> int:
        return self.engine.server_count(query, shown=shown)


def test_a_filtered_page_from_the_newest_records_shows_at_once_and_is_counted_after(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, runner: TaskRunner,
        uncached: Path) -> None:
    # windows of 500 records: the first page of one agent (1 in 4) takes two of 6,000
    engine = open_fresh(StoreSpec(str(uncached), read_only=True, scan_window=500,
                                  scan_from=0),
                        defer_view=True)
    model = RecordTableModel(runner)
    totals: list[tuple[int, bool]] = []
    model.total_changed.connect(lambda total: totals.append((total, model.counted)))
    try:
        model.set_reader(LocalReader(engine), _ServerIndex(engine))
        qtbot.waitUntil(lambda: model.settled)
        model.set_query(RecordQuery(agent_id="alpha"))
        qtbot.waitUntil(lambda: model.counted and model.total == COUNT // 4, timeout=30_000)
        # first the 250 rows found in two windows ("at least"), then the exact count
        assert totals[-2:] == [(250, False), (COUNT // 4, True)]
        model.ensure_rows(1400, 1499)  # the last page: from the counted list
        qtbot.waitUntil(lambda: model.record_at(1499) is not None, timeout=30_000)
        assert model.record_at(1499).id == "r000000"  # type: ignore[union-attr]
        assert model.total == COUNT // 4 and model.counted
    finally:
        model.set_reader(None)
        engine.close()


def test_cancel_stops_indexing_and_closes_the_store(
        qtbot: QtBot, make_window: Callable[..., MainWindow], uncached: Path) -> None:
    window = make_window()
    cancelled: list[int] = []

    def cancel_once(done: int) -> None:  # at the first progress report (one page read)
        if done and not cancelled:
            cancelled.append(done)
            window.index_cancel.click()

    window.index_bar.valueChanged.connect(cancel_once)
    spawn(window.open_store(StoreSpec(str(uncached), read_only=True)))
    qtbot.waitUntil(lambda: window.session is not None, timeout=60_000)
    session = window.session
    assert session is not None
    qtbot.waitUntil(lambda: "cancelled" in window.banner_label.text(), timeout=60_000)
    assert window.session is None and window.banner.isVisible()
    assert cancelled and cancelled[0] < COUNT
    assert session.indexing_cancelled and not session.engine.view_ready
    assert window.store_label.text() == "No store" and window.records.model.total == 0
    assert "not indexed" not in window.statusBar().currentMessage()  # the banner says it
    assert not window.index_cancel.isVisibleTo(window)
    open_store(qtbot, window, uncached, read_only=True, timeout=60)  # nothing was damaged
    assert window.records.model.total == COUNT
