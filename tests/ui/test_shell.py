"""The window's shell and the records browser's polish (issue 19, gui-shell): the sidebar and
toolbar, empty states, the demo offer on any empty store, the Content column's width, plurals,
History's old → new values and a detail pane that follows the filter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog
from pytestqt.qtbot import QtBot

from engine.events import EventBus
from engine.ledger import Ledger
from engine.llm import ChatMessage, ChatRequest, DeterministicClock, LLMGateway, LLMSettings
from engine.llm.settings import ProviderKind
from engine.memory_engine import MemoryEngine
from engine.records import Layer
from engine.store import StoreSpec
from tests.engine.llm.conftest import START_MS
from tests.support.fakes import HashingEmbedder
from tests.support.llm_server import LLMTestServer
from tests.ui.bigstore import build_store
from tests.ui.conftest import open_store, run, write_import_file
from tests.ui.observe_fixtures import BASE, CONTRADICTION
from ui.main_window import MainWindow, Preferences
from ui.observe.budget_view import BudgetView
from ui.records.records_model import COLUMNS
from ui.shared.tasks import TaskRunner
from ui.shared.theme import apply_theme
from ui.shared.wording import count_of

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def _stroke_lightness(icon: QIcon) -> int:
    """Lightness of an icon's most opaque pixel (its stroke colour)."""
    image = icon.pixmap(20, 20).toImage()
    best, lightness = -1, 0
    for x in range(image.width()):
        for y in range(image.height()):
            colour = image.pixelColor(x, y)
            if colour.alpha() > best:
                best, lightness = colour.alpha(), colour.lightness()
    assert best > 200, "the icon draws nothing"
    return lightness


def _embedded(spec: StoreSpec) -> MemoryEngine:
    """Open like the app, with a deterministic embedder (the map needs vectors)."""
    from app.wiring import forget_embedded_clients

    forget_embedded_clients()
    return MemoryEngine.open(spec, embedder=HashingEmbedder(), defer_view=True)


def _jsonl(path: Path, *contents: str) -> Path:
    path.write_text("".join(json.dumps({"content": c}) + "\n" for c in contents),
                    encoding="utf-8")
    return path


# -- navigation and toolbar ----------------------------------------------------------------

def test_sidebar_entries_have_icons_that_follow_the_theme_and_switch_views(
        qtbot: QtBot, qapp: QApplication, make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    apply_theme(qapp, "light")
    names = list(window.views)
    for number, name in enumerate(names):
        item = window.nav.item(number)
        assert not item.icon().isNull(), name
        assert item.text() == name.capitalize()
        assert "Ctrl+" in item.toolTip() or number >= 10  # the tip names the shortcut
        window.nav.setCurrentRow(number)
        assert window.stack.currentWidget() is window.views[name]
    window.view_actions["timeline"].trigger()  # Ctrl+2 does what the sidebar does
    assert window.nav.currentRow() == names.index("timeline")
    assert window.stack.currentWidget() is window.observe.timeline
    assert _stroke_lightness(window.nav.item(0).icon()) < 100  # dark strokes on light
    window.set_theme("dark")
    qtbot.waitUntil(lambda: _stroke_lightness(window.nav.item(0).icon()) > 150)
    window.set_theme("light")


def test_toolbar_has_the_common_actions_with_icons_and_shortcuts(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = make_window()
    actions = [a for a in window.main_toolbar.actions() if not a.isSeparator()]
    assert [a.iconText() for a in actions] == ["Open Store", "Import", "Search", "Redaction",
                                               "Refresh"]
    for made in actions:
        assert not made.icon().isNull(), made.iconText()
        keys = made.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        assert keys and f"({keys})" in made.toolTip(), made.toolTip()

    # Open Store: the folder chosen is opened.
    build_store(tmp_path / "store", 3)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        lambda *_args, **_kw: str(tmp_path / "store"))
    with qtbot.waitSignal(window.store_opened, timeout=30_000):
        window.open_action.trigger()
    qtbot.waitUntil(lambda: window.records.model.settled and window.records.model.total == 3)
    session = window.session
    assert session is not None
    qtbot.waitUntil(lambda: not session.indexing)

    # Import: the file chosen is imported (in-process here: no bulk importer).
    source = _jsonl(tmp_path / "more.jsonl", "Water the fern on Sundays",
                    "Mugs are in the upper cabinet")
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *_args, **_kw: (str(source), ""))
    assert window.import_action.isEnabled()
    window.import_action.trigger()
    qtbot.waitUntil(lambda: window.records.model.total == 5, timeout=30_000)

    # Search: to Records, cursor in the search box.
    window.nav.setCurrentRow(list(window.views).index("map"))
    window.activateWindow()
    window.search_action.trigger()
    assert window.stack.currentWidget() is window.records
    qtbot.waitUntil(window.records.filters.text.hasFocus)

    # Redaction: toggles the app-wide mode.
    assert window.redaction_label.text() == "redaction: off"
    window.redaction_action.trigger()
    assert window.redaction_label.text() == "redaction: on"
    window.redaction_action.trigger()

    # Refresh: the records are read again.
    with qtbot.waitSignal(window.records.model.reloaded, timeout=10_000):
        window.refresh_action.trigger()


# -- empty states --------------------------------------------------------------------------

def test_views_say_no_store_is_open_until_one_is(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    assert set(window.no_store) == set(window.views) - {"tasks"}
    records = window.no_store["records"]
    assert records.is_shown() and records.title() == "No store open"
    assert records.button_texts() == [
        "Open Store Folder…", "Connect to Chroma Server…", "Attach to Agent (serve)…"]
    open_store(qtbot, window, tmp_path / "store")
    assert not any(empty.is_shown() for empty in window.no_store.values())
    run(qtbot, window.close_store())
    assert all(empty.is_shown() for empty in window.no_store.values())


def test_each_view_shows_its_empty_state_until_it_has_data(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    views = window.observe
    records = window.records.empty_state
    qtbot.waitUntil(lambda: records.is_shown())
    assert records.title() == "No memories yet"
    assert records.button_texts() == [
        "Load Demo Data", "Import JSONL…", "Import Conversation…"]
    assert all(b.isEnabled() for b in records.buttons)
    qtbot.waitUntil(lambda: views.timeline.empty_state.is_shown())
    assert views.timeline.empty_state.title() == "No events yet"
    # its next step is a button, as in Records (it was only named in the sentence)
    assert views.timeline.empty_state.button_texts() == ["Load Demo Data", "Import JSONL…"]
    window.nav.setCurrentRow(list(window.views).index("review"))
    qtbot.waitUntil(lambda: views.review.empty_state.is_shown())
    assert views.review.empty_state.title() == "Nothing to review"
    assert views.retrieval.empty_state.is_shown()
    assert views.retrieval.empty_state.title() == "Type a question…"
    assert views.pipeline.empty_state.is_shown()
    assert views.pipeline.empty_state.title() == "Step a memory through the pipeline"
    assert window.fate.empty_state.is_shown()
    assert window.fate.empty_state.title() == "Pick a record…"
    tasks = window.tasks_view.empty_state
    assert tasks.is_shown() and tasks.title() == "Open a task workspace…"
    assert tasks.button_texts() == ["Open workspace…"]

    # Data arrives: a stored memory and one held for review (it may contradict it).
    summary = run(qtbot, window.run_import(_jsonl(tmp_path / "two.jsonl", BASE, CONTRADICTION)))
    assert summary is not None
    qtbot.waitUntil(lambda: window.records.model.total == 1)
    assert not records.is_shown()
    qtbot.waitUntil(lambda: len(views.timeline.data) > 0)
    assert not views.timeline.empty_state.is_shown()
    qtbot.waitUntil(lambda: len(views.review.items) == 1)
    assert not views.review.empty_state.is_shown()
    views.pipeline.content_edit.setPlainText("Sam likes aisle seats")
    assert run(qtbot, views.pipeline.start())
    assert not views.pipeline.empty_state.is_shown()
    assert run(qtbot, views.retrieval.retrieve()) is not None
    assert not views.retrieval.empty_state.is_shown()
    record_id = window.records.model.record_at(0).id  # type: ignore[union-attr]
    assert run(qtbot, window.fate.load(record_id)) is not None
    assert not window.fate.empty_state.is_shown()
    workspace = tmp_path / "ws"
    (workspace / "tasks").mkdir(parents=True)
    (workspace / "tasks" / "a.md").write_text("---\nid: A\nstatus: todo\n---\nA task\n",
                                              encoding="utf-8")
    assert run(qtbot, window.tasks_view.open_workspace(workspace)) is not None
    assert not tasks.is_shown()

    # Filters that match nothing say so, and clearing them brings the rows back.
    window.nav.setCurrentRow(0)
    window.records.filters.text.setText("no memory says this")
    qtbot.waitUntil(lambda: records.is_shown() and window.records.model.total == 0)
    assert records.title() == "No records match these filters"
    assert records.button_texts() == ["Clear filters"]
    records.buttons[0].click()
    qtbot.waitUntil(lambda: window.records.model.total == 1 and not records.is_shown())


def test_map_is_empty_until_records_have_embeddings(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    window = make_window(open_engine=_embedded)
    open_store(qtbot, window, tmp_path / "store")
    window.nav.setCurrentRow(list(window.views).index("map"))
    view = window.observe.map
    qtbot.waitUntil(lambda: view.data is not None)
    assert view.empty_state.is_shown() and view.empty_state.title() == "Nothing to map yet"
    assert view.empty_state.button_texts() == ["Load Demo Data", "Import JSONL…"]
    # the empty state alone explains it: no legend and no key to marks that cannot show
    assert view.legend.text() == "" and view.marks.isHidden()
    assert run(qtbot, window.run_import(write_import_file(tmp_path / "m.jsonl", 6))) is not None
    qtbot.waitUntil(lambda: view.data is not None and len(view.data.texts) == 6,
                    timeout=15_000)
    assert not view.empty_state.is_shown()
    assert not view.marks.isHidden() and "6 points" in view.legend.text()


def test_demo_data_is_offered_on_any_empty_store_after_the_first_launch(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    demo = _jsonl(tmp_path / "demo.jsonl", "Water the fern on Sundays",
                  "Mugs are in the upper cabinet", "The standup is at 9:30")
    window = make_window(preferences=Preferences(demo_offered=True), demo_memories=demo,
                         default_store=str(tmp_path / "default"))
    window.resize(1100, 700)  # (the fixture leaves a window given preferences at its size)
    open_store(qtbot, window, tmp_path / "elsewhere")  # not the default store, not first
    assert window.banner.isVisible()
    assert "empty" in window.banner_label.text()
    assert "Welcome" not in window.banner_label.text()  # that was the first launch's
    assert window.banner_button.text() == "Load demo data"
    window.banner_button.click()
    qtbot.waitUntil(lambda: window.records.model.total == 3, timeout=30_000)
    assert not window.banner.isVisible()
    qtbot.waitUntil(lambda: window.count_label.text() == "3 records")

    # Emptied again: offered again. Dismissed: not again for this store in this run.
    window.records.table.selectAll()
    run(qtbot, window.records.delete_records(window.records.selected_ids()))
    qtbot.waitUntil(lambda: window.banner.isVisible() and window.controller.count == 0)
    assert window.banner_button.text() == "Load demo data"
    window.banner_dismiss.click()
    run(qtbot, window.controller.refresh_counts())
    assert not window.banner.isVisible()
    # The Records view still offers it.
    assert window.records.empty_state.buttons[0].text() == "Load Demo Data"


def test_no_demo_offer_on_a_read_only_store(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")))  # an empty store
    engine.close()
    window = make_window()
    open_store(qtbot, window, tmp_path / "store", read_only=True)
    assert window.banner_label.text() == "Opened read-only, as asked."
    assert not window.banner_button.isVisible()
    records = window.records.empty_state
    qtbot.waitUntil(lambda: records.is_shown())
    assert records.title() == "No memories yet" and records.button_texts() == []
    assert "read-only" in records.text()


# -- records browser -----------------------------------------------------------------------

def test_content_column_takes_the_spare_width(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    build_store(tmp_path / "store", 20)
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    table = window.records.table
    header = table.horizontalHeader()

    def widths() -> list[int]:
        return [header.sectionSize(i) for i in range(header.count())]

    narrow = widths()[0]
    window.resize(1600, 1000)
    qtbot.waitUntil(lambda: window.width() == 1600)
    qtbot.waitUntil(lambda: widths()[0] >= 0.4 * table.viewport().width())
    assert widths()[0] > narrow and widths()[0] > max(widths()[1:])
    # Fewer columns shown: the spare width all goes to Content, the columns fill the table.
    for section in range(3, header.count()):
        header.hideSection(section)
    qtbot.waitUntil(lambda: sum(w for i, w in enumerate(widths()) if not header.isSectionHidden(i))
                    == table.viewport().width())
    assert widths()[1:3] == [COLUMNS[1].width, COLUMNS[2].width]
    # Dragged by hand: the person's width is kept.
    header.resizeSection(0, 333)
    window.resize(1200, 800)
    qtbot.waitUntil(lambda: window.width() == 1200)
    assert header.sectionSize(0) == 333


def test_counts_are_plural_only_when_not_one(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    assert [count_of(n, "record") for n in (0, 1, 2, 12_345)] == [
        "0 records", "1 record", "2 records", "12,345 records"]
    assert count_of(1, "person") == "1 person" and count_of(2, "person") == "2 people"
    build_store(tmp_path / "store", 1)
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    qtbot.waitUntil(lambda: window.count_label.text() == "1 record")
    assert window.records.count_label.text() == "1 record"
    qtbot.waitUntil(lambda: window.observe.timeline.count_label.text() != "")
    assert "1 events" not in window.observe.timeline.count_label.text()


def test_history_shows_old_and_new_values(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    build_store(tmp_path / "store", 3)
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    view, session = window.records, window.session
    assert session is not None
    view.table.selectRow(0)
    record = view.model.record_at(0)
    assert record is not None and record.layer is Layer.PROCEDURAL  # r000002: layer 2 % 6
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == record.id)
    view.detail.layer.setCurrentText(Layer.SEMANTIC.value)
    view.detail.importance.setValue(0.75)
    view.detail.content.setPlainText("memory number two, edited")
    view.detail.save_button.click()
    qtbot.waitUntil(lambda: session.undo_stack.count() == 1)
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.layer is Layer.SEMANTIC)
    history = view.detail.history_view.toPlainText()
    # fields by their labels (issue 19, words not codes), texts quoted like every record's
    assert "Layer: procedural → semantic" in history
    assert "Importance: 0.02 → 0.75" in history
    assert "Text: ‘memory number 000002 about topic 2’ → ‘memory number two, edited’" \
        in history
    assert "Tags:" not in history  # unchanged fields are not listed


def test_detail_pane_follows_the_filter(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    build_store(tmp_path / "store", 24)
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    view = window.records
    view.table.selectRow(0)
    shown = view.model.record_at(0)
    assert shown is not None and shown.layer is Layer.SYSTEM  # r000023: layer 23 % 6
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == shown.id)

    # A filter that hides the record: the detail shows the new current (first) row.
    view.filters.layer.setCurrentText(Layer.SEMANTIC.value)
    qtbot.waitUntil(lambda: view.model.query.layer is Layer.SEMANTIC and view.model.settled)
    first = view.model.record_at(0)
    assert first is not None and first.layer is Layer.SEMANTIC
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == first.id)
    assert view.table.selectionModel().isRowSelected(0)

    # A filter that hides every record: the detail is cleared.
    view.filters.text.setText("no memory says this")
    qtbot.waitUntil(lambda: view.model.query.text == "no memory says this"
                    and view.model.settled)
    qtbot.waitUntil(lambda: view.detail.record is None)
    assert view.detail.save_button.isEnabled() is False

    # A filter that keeps it: it stays shown and selected.
    view.filters.clear()
    qtbot.waitUntil(lambda: view.model.query.text is None and view.model.settled)
    view.table.selectRow(2)
    kept = view.model.record_at(2)
    assert kept is not None
    qtbot.waitUntil(lambda: view.detail.record is not None and view.detail.record.id == kept.id)
    view.filters.agent.setCurrentIndex(view.filters.agent.findData(kept.agent_id))
    qtbot.waitUntil(lambda: view.model.query.agent_id == kept.agent_id and view.model.settled)
    assert view.detail.record is not None and view.detail.record.id == kept.id
    row = view.model.row_of(kept.id)
    assert row is not None and view.table.selectionModel().isRowSelected(row)


def test_empty_state_buttons_follow_their_actions(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QLabel, QWidget

    from ui.shared.empty_state import EmptyState

    host = QWidget()
    qtbot.addWidget(host)
    host.resize(400, 300)
    host.show()
    empty = EmptyState(host, "records")
    fired: list[bool] = []
    action = QAction("&Load Demo Data", host)
    action.triggered.connect(lambda: fired.append(True))
    empty.show_message("No memories yet", "Load some.", [action])
    assert empty.is_shown() and empty.geometry() == host.rect()
    assert empty.button_texts() == ["Load Demo Data"]
    empty.buttons[0].click()
    assert fired == [True]
    action.setEnabled(False)
    assert not empty.buttons[0].isEnabled()
    host.resize(500, 320)
    assert empty.geometry() == host.rect()
    empty.clear()
    assert not empty.is_shown()

    # On a view not shown, nothing is built until it is (twenty of these live in the window).
    hidden = QWidget()
    qtbot.addWidget(hidden)
    lazy = EmptyState(hidden, "review")
    lazy.show_message("Nothing to review", "Yet.", [action])
    assert lazy.is_shown() and lazy.buttons == [] and lazy.findChild(QLabel) is None
    hidden.show()
    qtbot.waitUntil(lambda: len(lazy.buttons) == 1)
    label = lazy.findChild(QLabel, "empty_title")
    assert label is not None and label.text() == "Nothing to review"


def test_event_filters_of_a_window_whose_attributes_were_cleared_ignore_the_last_events(
        qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QWidget

    from ui.shared.empty_state import EmptyState

    # The garbage collector clears a closed window's Python attributes before Qt destroys its
    # widgets; a resize in between reached the filter and raised AttributeError (seen in a
    # `mnemoscope bench` run, where the GUI suite's windows were collected later).
    host = QWidget()
    qtbot.addWidget(host)
    host.show()
    empty = EmptyState(host, "records")
    empty.__dict__.clear()
    host.resize(321, 123)  # a shown widget's resize event is sent at once, through the filter
    assert host.size().width() == 321

    # the same for the Fields panel's filter on its tree (every details pane has one)
    from ui.shared.fields_view import FieldsPanel

    panel = FieldsPanel()
    qtbot.addWidget(panel)
    panel.show()
    viewport = panel.fields.viewport()
    before = viewport.width()
    panel.__dict__.clear()
    panel.resize(panel.width() + 150, panel.height())  # the tree's viewport grows with it
    qtbot.waitUntil(lambda: viewport.width() > before)



def test_secrets_and_budget_say_when_there_is_nothing(
        qtbot: QtBot, tmp_path: Path, runner: TaskRunner,
        make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    run(qtbot, window.run_import(_jsonl(tmp_path / "one.jsonl", "Water the fern on Sundays")))
    assert run(qtbot, window.scan.scan()) == []
    assert window.scan.empty_state.is_shown()
    assert window.scan.empty_state.title() == "No secrets found"
    assert window.scan.summary.text().startswith("0 records hold")
    run(qtbot, window.run_import(_jsonl(tmp_path / "key.jsonl",
                                        "The deploy key is sk-live-abcdefghijklmnopqrstuvwx")))
    hits = run(qtbot, window.scan.scan())
    assert hits is not None and len(hits) == 1
    assert not window.scan.empty_state.is_shown()
    assert window.scan.summary.text().startswith("1 record holds")

    clock, ledger = DeterministicClock(START_MS), Ledger(None)
    bus = EventBus(clock=clock, ledger=ledger)
    view = BudgetView(runner)
    qtbot.addWidget(view)
    view.show()
    requested: list[bool] = []
    view.settings_requested.connect(lambda: requested.append(True))
    idle = LLMGateway(LLMSettings(), ledger=ledger, events=bus, clock=clock)
    view.set_gateway(idle, ledger, bus, clock)
    qtbot.waitUntil(lambda: view.snapshot is not None)
    assert view.calls_empty.is_shown()
    assert view.calls_empty.title() == "No LLM provider configured"
    view.calls_empty.buttons[0].click()
    assert requested == [True]
    with LLMTestServer() as server:
        gateway = LLMGateway(
            LLMSettings(provider="openai", kind=ProviderKind.OPENAI,
                        base_url=server.base_url + "/v1", model="test-model",
                        api_key_env=None, use_keyring=False, max_tokens=1),
            ledger=ledger, events=bus, clock=clock, api_key=lambda: "k")
        with qtbot.waitSignal(view.refreshed, timeout=10_000):
            view.set_gateway(gateway, ledger, bus, clock)
        assert view.calls_empty.title() == "No LLM calls yet"
        gateway.complete(ChatRequest((ChatMessage("user", "hi"),), max_tokens=1))
        qtbot.waitUntil(lambda: view.calls.topLevelItemCount() == 1, timeout=10_000)
        assert not view.calls_empty.is_shown()
        view.set_gateway(None, None, None, None)
        run(qtbot, runner.run(gateway.close))
    run(qtbot, runner.run(idle.close))


def test_every_column_title_starts_with_a_capital(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """Polish: Fate, Secrets and the Pipeline's tables titled their columns "when", "memory
    (redacted)", "similarity", beside Records' "Content" and "Layer"."""
    from PySide6.QtWidgets import QHeaderView

    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    titles = {}
    for header in window.findChildren(QHeaderView):
        model = header.model()  # every header in the window has its view's model
        for section in range(header.count()):
            text = str(model.headerData(section, header.orientation()) or "")
            if text[:1].isalpha():
                titles[text] = type(header.parentWidget()).__name__
    assert len(titles) > 30  # the records table, fate, secrets, pipeline, budget, layers…
    assert {text: where for text, where in titles.items() if not text[0].isupper()} == {}
