"""Issue 19: from every view that shows a record, one action opens it in Records; one record
context menu (with its shortcuts) everywhere; Fate from the menu and by its search picker.

"Opened" means what a person sees: the Records view is shown, the record's row is selected and
scrolled to, and the detail pane shows the same record as the selected row. The store holds
more records than one table page and the linked record is the oldest, so with the default sort
(newest first) it is on the last page, not loaded when the link is followed — where the map's
click used to show one record's detail beside another row's highlight.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from engine.ingest.kinds import Stage
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.ui.conftest import distinct_text, open_store, run
from tests.ui.observe_fixtures import BASE, GRAY, PARAPHRASE
from ui.main_window import MainWindow
from ui.records.record_links import ACTIONS, RecordRef
from ui.records.records_model import ROLE_RECORD_ID
from ui.shared.fields_view import RECORD_ID_ROLE, FieldsPanel

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

FILLER = 240  # more than one table page (200 rows)
SECRET = "Sam's travel agent is reachable at agent.smith@example.com"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    """A store whose oldest record is :data:`BASE` (vectors by a hashing embedder, so the map
    has points), with :data:`GRAY` waiting in the review queue against it. Returns the folder
    and BASE's id."""
    path = tmp_path / "store"
    engine = MemoryEngine.open(StoreSpec(str(path)), embedder=HashingEmbedder())
    try:
        base = engine.ingest(NewMemory(content=BASE, agent_id="travel"))
        assert base.record is not None
        assert engine.ingest(NewMemory(content=GRAY, agent_id="travel")).action.value \
            == "deferred"
        engine.ingest(NewMemory(content=SECRET, agent_id="travel"))
        engine.ingest_batch([NewMemory(content=distinct_text(i), agent_id=f"agent-{i % 3}")
                             for i in range(FILLER)])
        return path, base.record.id
    finally:
        engine.close()


@pytest.fixture
def window(qtbot: QtBot, make_window: Callable[..., MainWindow],
           store: tuple[Path, str]) -> MainWindow:
    made = make_window()
    made.resize(1280, 800)
    open_store(qtbot, made, store[0])
    qtbot.waitUntil(lambda: made.observe.review._session is not None, timeout=10_000)
    return made


def selected_id(window: MainWindow) -> str | None:
    index = window.records.table.selectionModel().currentIndex()
    value = window.records.model.data(index, ROLE_RECORD_ID) if index.isValid() else None
    selected = window.records.table.selectionModel().selectedRows()
    return value if isinstance(value, str) and len(selected) == 1 else None


def assert_opened(qtbot: QtBot, window: MainWindow, record_id: str) -> None:
    """Records is shown with ``record_id`` selected, in view, and in the detail pane."""
    records = window.records
    qtbot.waitUntil(lambda: window.stack.currentWidget() is records
                    and selected_id(window) == record_id
                    and records.detail.record is not None
                    and records.detail.record.id == record_id, timeout=15_000)
    row = records.model.row_of(record_id)
    assert row is not None
    rect = records.table.visualRect(records.model.index(row, 0))
    assert records.table.viewport().rect().intersects(rect)  # scrolled to
    assert records.detail.record is not None and records.detail.record.content \
        == records.model.record_at(row).content  # type: ignore[union-attr]


def test_the_linked_record_is_beyond_the_first_page(window: MainWindow,
                                                    store: tuple[Path, str]) -> None:
    assert window.records.model.total > 200
    assert window.records.model.row_of(store[1]) is None


def test_a_pipeline_candidate_opens_its_record(qtbot: QtBot, window: MainWindow,
                                               store: tuple[Path, str]) -> None:
    pipeline = window.observe.pipeline
    window.nav.setCurrentRow(list(window.views).index("pipeline"))
    assert run(qtbot, pipeline.start(NewMemory(content=PARAPHRASE, agent_id="travel")))
    for _ in range(4):  # start, normalize, embed, candidates
        assert run(qtbot, pipeline.step()) is not None
    bars = pipeline.candidate_bars
    assert bars.ids and bars.ids[0] == store[1]
    assert bars.candidates[0][0] == BASE  # named by its text, not its id
    assert store[1] in bars.tips[0] and BASE in bars.tips[0]
    assert store[1] not in pipeline.status_label.text()
    y = int(bars._TOP + bars._ROW * 0.5)
    QTest.mouseDClick(bars, Qt.MouseButton.LeftButton, pos=QPoint(40, y))
    assert_opened(qtbot, window, store[1])


def test_a_timeline_event_opens_its_record(qtbot: QtBot, window: MainWindow,
                                           store: tuple[Path, str]) -> None:
    timeline = window.observe.timeline
    window.nav.setCurrentRow(list(window.views).index("timeline"))
    qtbot.waitUntil(lambda: len(timeline.data) > 0, timeout=10_000)
    index = next(i for i, event in enumerate(timeline.data.events)
                 if event.record_id == store[1] and event.kind == "memory:record:created")
    timeline.select_event(index)
    qtbot.waitUntil(lambda: timeline.open_button.isVisible(), timeout=10_000)
    assert BASE in timeline.record_label.text() and store[1] not in timeline.record_label.text()
    assert store[1] in timeline.record_label.toolTip()
    timeline.open_button.click()
    assert_opened(qtbot, window, store[1])


def _field_naming(panel: FieldsPanel, record_id: str) -> QTreeWidgetItem:
    """The row of ``panel``'s fields that names ``record_id``."""
    items: list[QTreeWidgetItem] = []

    def walk(item: QTreeWidgetItem | None) -> None:
        if item is None:
            return
        if item.data(0, RECORD_ID_ROLE) == record_id:
            items.append(item)
        for i in range(item.childCount()):
            walk(item.child(i))

    for i in range(panel.fields.topLevelItemCount()):
        walk(panel.fields.topLevelItem(i))
    assert items, f"no field names {record_id}: {panel.rows()}"
    return items[0]


def test_a_timeline_detail_row_naming_a_record_opens_it(qtbot: QtBot, window: MainWindow,
                                                        store: tuple[Path, str]) -> None:
    """The event's labelled fields (issue 19, words) name its record; that row has the record
    menu and a double click opens the record (the two branches' features meet)."""
    timeline = window.observe.timeline
    window.nav.setCurrentRow(list(window.views).index("timeline"))
    qtbot.waitUntil(lambda: len(timeline.data) > 0, timeout=10_000)
    index = next(i for i, event in enumerate(timeline.data.events)
                 if event.record_id == store[1] and event.kind == "memory:record:created")
    timeline.select_event(index)
    qtbot.waitUntil(lambda: timeline.current_record() is not None, timeout=10_000)
    row = _field_naming(timeline.detail, store[1])
    assert BASE in row.text(1)  # named by its text
    timeline.detail.fields.setCurrentItem(row)
    assert timeline.current_detail_record() == RecordRef(store[1], BASE)
    menu = window.links.menu(timeline.detail.fields)
    assert menu is not None and "Open in Records" in [a.text() for a in menu.actions()]
    timeline.detail.fields.itemDoubleClicked.emit(row, 1)
    assert_opened(qtbot, window, store[1])


def test_a_pipeline_stage_field_naming_a_record_opens_it(qtbot: QtBot, window: MainWindow,
                                                         store: tuple[Path, str]) -> None:
    pipeline = window.observe.pipeline
    window.nav.setCurrentRow(list(window.views).index("pipeline"))
    assert run(qtbot, pipeline.start(NewMemory(content=PARAPHRASE, agent_id="travel")))
    for _ in range(4):  # start, normalize, embed, candidates
        assert run(qtbot, pipeline.step()) is not None
    panel = pipeline.panels[Stage.CANDIDATES]
    assert pipeline.stack.currentWidget() is panel
    row = _field_naming(panel.fields, store[1])
    panel.fields.fields.setCurrentItem(row)
    assert pipeline.current_field_record() == RecordRef(store[1], BASE)
    assert window.links.menu(panel.fields.fields) is not None
    panel.fields.fields.itemDoubleClicked.emit(row, 1)
    assert_opened(qtbot, window, store[1])


def test_a_review_item_opens_its_stored_record(qtbot: QtBot, window: MainWindow,
                                               store: tuple[Path, str]) -> None:
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    assert review.current_record() == RecordRef(store[1], BASE)
    assert store[1][:8] not in review.stored_label.text()
    assert store[1] in review.stored_label.toolTip()
    review.open_button.click()
    assert_opened(qtbot, window, store[1])
    window.records.table.selectRow(0)
    item = review.list.item(0)
    assert item is not None
    review.list.itemDoubleClicked.emit(item)  # a double click on the item does the same
    assert_opened(qtbot, window, store[1])


def test_a_retrieval_row_opens_its_record(qtbot: QtBot, window: MainWindow,
                                          store: tuple[Path, str]) -> None:
    retrieval = window.observe.retrieval
    window.nav.setCurrentRow(list(window.views).index("retrieval"))
    retrieval.query_edit.setText("Sam window seats Tokyo")
    assert run(qtbot, retrieval.retrieve()) is not None
    bars = retrieval.live
    row = next(i for i, line in enumerate(bars.rows) if line.id == store[1])
    assert bars.rows[row].text == BASE
    QTest.mouseDClick(bars, Qt.MouseButton.LeftButton,
                      pos=QPoint(30, int(bars.row_top(row) + bars.ROW / 2)))
    assert_opened(qtbot, window, store[1])


def test_a_map_point_opens_the_record_its_detail_shows(qtbot: QtBot, window: MainWindow,
                                                       store: tuple[Path, str]) -> None:
    """The map bug: the click showed the record's detail beside another row's highlight."""
    view = window.observe.map
    window.nav.setCurrentRow(list(window.views).index("map"))
    data = run(qtbot, view.load(), timeout=60)
    assert data is not None
    index = data.projection.ids.index(store[1])
    assert BASE in view._tip(0.0, 0.0, index)
    window.records.table.selectRow(0)  # a row the link must not leave highlighted
    view.click_point(index)
    assert_opened(qtbot, window, store[1])
    assert view.current_record() == RecordRef(store[1], BASE)


def test_a_right_click_on_the_map_makes_that_point_the_menus_record(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str]) -> None:
    view = window.observe.map
    window.nav.setCurrentRow(list(window.views).index("map"))
    data = run(qtbot, view.load(), timeout=60)
    assert data is not None

    def pixel(i: int) -> QPoint:
        x, y = data.projection.points[i]
        scene: QPointF = view.scatter.mapToScene(QPointF(float(x), float(y)))
        found: QPoint = view.plot.mapFromScene(scene)  # pyqtgraph is untyped
        return found

    index = data.projection.ids.index(store[1])
    chosen = view.select_at(pixel(index))
    assert chosen >= 0 and (pixel(chosen) - pixel(index)).manhattanLength() <= 12
    assert view.current_record() == RecordRef(data.projection.ids[chosen], data.texts[chosen])
    assert view.select_at(QPoint(1, 1)) == -1  # the corner, on no point: nothing changes
    assert view.current_index == chosen


def test_the_filter_widens_when_it_hid_the_record(qtbot: QtBot, window: MainWindow,
                                                  store: tuple[Path, str]) -> None:
    records = window.records
    records.filters.text.setText("kalo")  # matches some filler, not BASE
    qtbot.waitUntil(lambda: records.model.settled
                    and records.model.query.text == "kalo", timeout=10_000)
    narrowed = records.model.total
    assert 0 < narrowed < FILLER
    sort = records.model.query.sort_by
    window.show_record(store[1])
    assert_opened(qtbot, window, store[1])
    assert records.filters.text.text() == "" and records.model.query.text is None
    assert records.model.query.sort_by is sort
    assert "Filters cleared" in window.statusBar().currentMessage()


def test_a_filter_that_shows_the_record_is_kept(qtbot: QtBot, window: MainWindow,
                                                store: tuple[Path, str]) -> None:
    records = window.records
    records.filters.text.setText("Sam")
    qtbot.waitUntil(lambda: records.model.settled
                    and records.model.query.text == "Sam", timeout=10_000)
    window.show_record(store[1])
    assert_opened(qtbot, window, store[1])
    assert records.filters.text.text() == "Sam"


def test_fate_opens_from_the_context_menu(qtbot: QtBot, window: MainWindow,
                                          store: tuple[Path, str]) -> None:
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    menu = window.links.menu(review.list)
    assert menu is not None
    actions = {a.text(): a for a in menu.actions()}
    assert [a.text() for a in menu.actions() if a.text() in {t for _k, t, _s in ACTIONS}] \
        == [text for _key, text, _keys in ACTIONS]
    assert all(actions[text].shortcut().toString() == QKeySequence(keys).toString()
               for _key, text, keys in ACTIONS)
    actions["Show fate"].trigger()
    assert window.stack.currentWidget() is window.fate
    qtbot.waitUntil(lambda: window.fate.fate is not None, timeout=10_000)
    fate = window.fate.fate
    assert fate is not None and fate.record_id == store[1] and fate.status == "alive"
    assert window.fate.status_label.text().startswith(f"‘{BASE}’")


def test_copy_text_and_id_put_the_record_on_the_clipboard(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str]) -> None:
    records = window.records
    records.filters.text.setText("travel agent")
    qtbot.waitUntil(lambda: records.model.settled and records.model.total == 1,
                    timeout=10_000)
    records.table.selectRow(0)
    ref = records.current_record()
    assert ref is not None and ref.text == SECRET
    menu = window.links.menu(records.table)
    assert menu is not None
    actions = {a.text(): a for a in menu.actions()}
    assert "Open in Records" not in actions  # already there
    clipboard = QApplication.clipboard()
    actions["Copy text"].trigger()
    assert clipboard.text() == SECRET
    actions["Copy id"].trigger()
    assert clipboard.text() == ref.id
    window.redaction.set_enabled(True)  # the copy is what the view shows: masked
    actions["Copy text"].trigger()
    assert "agent.smith@example.com" not in clipboard.text()
    assert clipboard.text().startswith("Sam's travel agent is reachable at <REDACT:")
    window.links.trigger("similar", ref)  # the query box shows the masked text too
    retrieval = window.observe.retrieval
    assert retrieval.query_edit.text() == window.redaction.show(SECRET) != SECRET
    qtbot.waitUntil(lambda: retrieval.bundle is not None, timeout=10_000)


def test_the_shortcuts_act_on_the_focused_views_record(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str]) -> None:
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    window.activateWindow()
    review.list.setFocus()
    qtbot.waitUntil(review.list.hasFocus, timeout=5_000)
    QTest.keyClick(review.list, Qt.Key.Key_C,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert QApplication.clipboard().text() == store[1]
    QTest.keyClick(review.list, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert_opened(qtbot, window, store[1])
    # Ctrl+C in the Records table is the record's Copy text (not the table's copy of a cell)
    records = window.records
    records.table.setFocus()
    qtbot.waitUntil(records.table.hasFocus, timeout=5_000)
    QApplication.clipboard().clear()
    QTest.keyClick(records.table, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == BASE
    assert window.statusBar().currentMessage().startswith("Copied the text of")


def test_run_through_pipeline_and_find_similar(qtbot: QtBot, window: MainWindow,
                                               store: tuple[Path, str]) -> None:
    review = window.observe.review
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    ref = review.current_record()
    assert ref is not None
    window.links.trigger("pipeline", ref)
    pipeline = window.observe.pipeline
    assert window.stack.currentWidget() is pipeline
    qtbot.waitUntil(lambda: pipeline.content_edit.toPlainText() == BASE, timeout=10_000)
    assert pipeline.agent_edit.text() == "travel"
    retrieval = window.observe.retrieval
    window.links.trigger("similar", ref)
    assert window.stack.currentWidget() is retrieval
    assert retrieval.query_edit.text() == BASE
    qtbot.waitUntil(lambda: bool(retrieval.live.rows), timeout=10_000)
    assert retrieval.live.rows[0].id == store[1]


def test_delete_from_the_menu_is_undoable(qtbot: QtBot, window: MainWindow,
                                          store: tuple[Path, str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    session = window.session
    assert session is not None
    asked: list[RecordRef] = []

    def confirm(ref: RecordRef) -> bool:
        asked.append(ref)
        return True

    monkeypatch.setattr(window, "confirm_delete", confirm)
    window.links.trigger("delete", RecordRef(store[1], BASE))
    stack = session.undo_stack
    qtbot.waitUntil(lambda: stack.count() == 1 and session.pending() == 0, timeout=10_000)
    assert asked == [RecordRef(store[1], BASE)]
    assert stack.undoText() and not run(qtbot, session.runner.run(
        lambda: store[1] in session.engine.store.view))
    window.undo_group.undo()
    qtbot.waitUntil(lambda: not stack.canUndo() and session.pending() == 0, timeout=10_000)
    qtbot.waitUntil(lambda: run(qtbot, session.runner.run(
        lambda: store[1] in session.engine.store.view)), timeout=10_000)


def test_fate_search_picker_finds_a_record_by_its_words(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str]) -> None:
    fate = window.fate
    window.nav.setCurrentRow(list(window.views).index("fate"))
    fate.id_edit.setFocus()
    QTest.keyClicks(fate.id_edit, "seats sam")  # words in any order, any case
    qtbot.waitUntil(lambda: fate.picker.isVisible() and fate.picker.count() == 1,
                    timeout=10_000)
    item = fate.picker.item(0)
    assert item is not None and item.text().startswith(BASE)
    assert store[1] in item.toolTip()
    fate.picker.itemClicked.emit(item)
    qtbot.waitUntil(lambda: fate.fate is not None, timeout=10_000)
    assert fate.fate is not None and fate.fate.record_id == store[1]
    assert not fate.picker.isVisible()


def test_read_only_and_attached_turn_off_what_they_cannot_do(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store: tuple[Path, str]) -> None:
    made = make_window()
    open_store(qtbot, made, store[0], read_only=True)
    made.records.table.selectRow(0)
    menu = made.links.menu(made.records.table)
    assert menu is not None
    actions = {a.text(): a for a in menu.actions()}
    assert not actions["Delete"].isEnabled() and not actions["Pause"].isEnabled()
    assert actions["Show fate"].isEnabled() and actions["Copy text"].isEnabled()


def test_the_rankings_are_walked_by_keyboard(qtbot: QtBot, window: MainWindow,
                                             store: tuple[Path, str]) -> None:
    """Up/Down move the current row of a painted ranking, Enter opens it; the menu follows."""
    retrieval = window.observe.retrieval
    window.nav.setCurrentRow(list(window.views).index("retrieval"))
    retrieval.query_edit.setText("Sam window seats Tokyo")
    assert run(qtbot, retrieval.retrieve()) is not None
    bars = retrieval.live
    assert bars.current == 0 and len(bars.rows) > 2
    bars.setFocus()
    QTest.keyClick(bars, Qt.Key.Key_Down)
    QTest.keyClick(bars, Qt.Key.Key_Down)
    QTest.keyClick(bars, Qt.Key.Key_Up)
    assert bars.current == 1
    second = bars.rows[1]
    assert retrieval.current_record() == RecordRef(second.id, retrieval.texts[second.id])
    menu = window.links.menu(bars)
    assert menu is not None and menu.actions()[0].text().startswith(second.text[:20])
    QTest.keyClick(bars, Qt.Key.Key_Return)
    assert_opened(qtbot, window, second.id)


def test_an_attached_agents_rows_are_paged_through_to_find_a_record(
        store: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent's API has no "locate": the records view pages through its rows instead, and
    finds the record where the engine would."""
    from engine.query import RecordQuery, SortKey
    from engine.reader import LocalReader
    from tests.ui.conftest import open_fresh
    from ui.records import records_view

    monkeypatch.setattr(records_view, "_SCAN_PAGE", 50)  # several pages over this store
    engine = open_fresh(StoreSpec(str(store[0]), read_only=True))
    try:
        reader = LocalReader(engine)
        for query in (RecordQuery(), RecordQuery(sort_by=SortKey.CONTENT, descending=False),
                      RecordQuery(agent_id="travel")):
            assert records_view._scan_rows(reader, query, store[1]) == \
                engine.locate_row(query, store[1])
        assert engine.locate_row(RecordQuery(), store[1]) == FILLER + 1  # the last row
        assert records_view._scan_rows(reader, RecordQuery(agent_id="agent-0"),
                                       store[1]) is None
        monkeypatch.setattr(records_view, "_SCAN_LIMIT", 100)  # gives up past the limit
        assert records_view._scan_rows(reader, RecordQuery(), store[1]) is None
    finally:
        engine.close()


@pytest.mark.qt_log_ignore("This plugin does not support raise",  # offscreen popups
                           "This plugin does not support grabbing the keyboard")
def test_a_right_click_pops_the_menu_up_at_the_pointer(qtbot: QtBot, window: MainWindow,
                                                        store: tuple[Path, str]) -> None:
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    item = review.list.item(0)
    assert item is not None
    where = review.list.visualItemRect(item).center()
    review.list.customContextMenuRequested.emit(where)  # what a right click emits
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None, timeout=5_000)
    popup = QApplication.activePopupWidget()
    assert isinstance(popup, QMenu)
    assert popup.actions()[0].text() == "Sam prefers window seats on long…"  # its text
    expected = review.list.viewport().mapToGlobal(where)
    assert (popup.pos() - expected).manhattanLength() < 40
    popup.close()


def test_a_record_no_longer_stored_says_so(qtbot: QtBot, window: MainWindow) -> None:
    records = window.records
    records.table.selectRow(0)
    qtbot.waitUntil(lambda: records.detail.record is not None, timeout=10_000)
    window.show_record("0f1e2d3c-aaaa-4bbb-8ccc-123456789abc")  # merged away, say
    qtbot.waitUntil(lambda: "no longer stored" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert records.detail.record is None and selected_id(window) is None  # nothing stale


def test_texts_are_cut_at_a_word_and_ids_named_by_their_text() -> None:
    from ui.records.record_links import elide, name_ids, quoted, record_tooltip

    assert elide("short  text\nhere") == "short text here"
    cut = elide("The team standup moved to 5pm because the design review runs long", 40)
    assert cut == "The team standup moved to 5pm because…" and len(cut) <= 40
    assert elide("x" * 100, 10) == "x" * 9 + "…"  # one long word: cut inside it
    assert quoted("Sam likes tea") == "‘Sam likes tea’"
    record = "0f1e2d3c-aaaa-4bbb-8ccc-123456789abc"
    story = f"merged into {record} (similarity 0.870 ≥ threshold 0.800)"
    assert name_ids(story, {record: "Sam likes tea"}) == \
        "merged into ‘Sam likes tea’ (similarity 0.870 ≥ threshold 0.800)"
    assert name_ids(story, {}) == story  # an unknown record keeps its id
    assert record_tooltip("Sam likes tea", record) == f"Sam likes tea\n\nid {record}"


# -- Pause / Archive / Resume in every record menu (polish) ----------------------------------

_STATE_KEYS = {"Pause": "Ctrl+Alt+P", "Archive": "Ctrl+Alt+A", "Resume": "Ctrl+Alt+R"}


def _answer_yes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Answer every QMessageBox.question Yes; the questions asked are returned."""
    from typing import Any

    from PySide6.QtWidgets import QMessageBox

    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_args: Any) -> Any:
        asked.append(text)
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", question)
    return asked


def _state_of(qtbot: QtBot, window: MainWindow, record_id: str) -> str:
    session = window.session
    assert session is not None
    return str(run(qtbot, session.runner.run(session.engine.get, record_id)).state.value)


def test_every_view_that_shows_records_offers_pause_archive_resume(
        qtbot: QtBot, window: MainWindow) -> None:
    """Records table, Review items, Retrieval rows, Timeline event details, Map points,
    Layers lists and the rest: each widget's record actions hold the three, with their keys."""
    observe = window.observe
    widgets = [window.records.table, observe.review.list, observe.retrieval.live,
               observe.timeline.record_bar, observe.timeline.detail.fields, observe.map.plot,
               observe.pipeline.candidate_bars, window.fate.steps, window.scan.table,
               *window.layers.record_trees()]
    assert len(widgets) > 8  # the Layers tabs have record lists
    for widget in widgets:
        keys = {a.text(): a.shortcut().toString() for a in widget.actions()}
        assert {text: keys.get(text) for text in _STATE_KEYS} == {
            text: QKeySequence(key).toString() for text, key in _STATE_KEYS.items()}, widget
        if widget is not window.records.table:  # its own follow its selection (below)
            assert all(a.isEnabled() for a in widget.actions() if a.text() in _STATE_KEYS)
    window.records.table.selectRow(0)  # the table's menu shows them too, with the keys
    menu = window.links.menu(window.records.table)
    assert menu is not None
    shown = {a.text(): a for a in menu.actions()}
    assert {text: shown[text].shortcut().toString() for text in _STATE_KEYS} == {
        text: QKeySequence(key).toString() for text, key in _STATE_KEYS.items()}
    # an active record can be paused or archived, not resumed
    assert [shown[text].isEnabled() for text in _STATE_KEYS] == [True, True, False]


def test_pause_from_a_review_items_menu_asks_and_is_undoable(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    asked = _answer_yes(monkeypatch)
    menu = window.links.menu(review.list)
    assert menu is not None
    {a.text(): a for a in menu.actions()}["Pause"].trigger()
    qtbot.waitUntil(lambda: "Paused 1 record" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert len(asked) == 1 and asked[0].startswith(f"Pause ‘{BASE[:20]}")  # named by its text
    assert _state_of(qtbot, window, store[1]) == "paused"
    # asked again, it says so instead of asking
    window.links.trigger("pause", RecordRef(store[1], BASE))
    qtbot.waitUntil(lambda: "is paused already" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert len(asked) == 1
    session = window.session
    assert session is not None
    window.undo_group.undo()
    qtbot.waitUntil(lambda: session.pending() == 0 and not session.undo_stack.canUndo(),
                    timeout=10_000)
    assert _state_of(qtbot, window, store[1]) == "active"


def test_archive_by_keyboard_on_a_review_item_and_pause_on_the_records_table(
        qtbot: QtBot, window: MainWindow, store: tuple[Path, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl+Alt+A acts on the focused view's record (not ambiguous with the Edit menu's),
    Ctrl+Alt+P in the table on its selection."""
    review = window.observe.review
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    asked = _answer_yes(monkeypatch)
    window.activateWindow()
    review.list.setFocus()
    qtbot.waitUntil(review.list.hasFocus, timeout=5_000)
    QTest.keyClick(review.list, Qt.Key.Key_A,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: "Archived 1 record" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert _state_of(qtbot, window, store[1]) == "archived" and len(asked) == 1

    records = window.records
    window.nav.setCurrentRow(list(window.views).index("records"))
    qtbot.waitUntil(lambda: records.model.settled and records.model.record_at(0) is not None,
                    timeout=10_000)
    records.table.selectRow(0)
    first = records.model.record_at(0)
    assert first is not None and first.id != store[1]
    records.table.setFocus()
    qtbot.waitUntil(records.table.hasFocus, timeout=5_000)
    QTest.keyClick(records.table, Qt.Key.Key_P,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: "Paused 1 record" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert asked[1].startswith("Pause this record?")  # the table's own question
    assert _state_of(qtbot, window, first.id) == "paused"


def test_find_similar_follows_deletes_of_its_records(qtbot: QtBot, window: MainWindow,
                                                     store: tuple[Path, str]) -> None:
    """The panel listed a deleted neighbour (and went on naming a deleted record) until it
    was asked again."""
    records, similar = window.records, window.records.similar
    records.find_similar(store[1])
    qtbot.waitUntil(lambda: len(similar.ids()) > 1, timeout=10_000)
    nearest = similar.ids()[0]
    run(qtbot, records.delete_records([nearest]))
    qtbot.waitUntil(lambda: nearest not in similar.ids() and bool(similar.ids()),
                    timeout=10_000)
    assert similar.record_id == store[1] and similar.isVisibleTo(records)
    run(qtbot, records.delete_records([store[1]]))  # the record they are similar to
    qtbot.waitUntil(lambda: not similar.isVisibleTo(records), timeout=10_000)
    assert similar.record_id == "" and similar.ids() == []
