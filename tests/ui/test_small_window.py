"""Polish: every view at 1000×700 (the smallest window the app is checked at) shows its words
whole — no label runs past the window's edge, where its end is cut off unseen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractScrollArea, QLabel, QWidget
from pytestqt.qtbot import QtBot

from engine.memory_engine import MemoryEngine
from engine.records import Category, Layer, NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.ui.conftest import open_store, run
from tests.ui.observe_fixtures import BASE, GRAY
from ui.main_window import MainWindow

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def _in_scroll_area(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


def cut_labels(window: MainWindow) -> list[str]:
    """The visible labels (outside scroll areas) whose right edge is past the window's."""
    cut = []
    for label in window.findChildren(QLabel):
        if not label.isVisible() or not label.text() or _in_scroll_area(label) \
                or label is window.store_label:  # a long path: cut, whole on hover
            continue
        right = label.mapTo(window, QPoint(label.width(), 0)).x()
        squeezed = not label.wordWrap() and label.width() < label.sizeHint().width() - 1
        if right > window.width() + 1 or squeezed:
            cut.append(f"{type(label.parentWidget()).__name__}: {label.text()[:60]!r} "
                       f"(width {label.width()} < {label.sizeHint().width()}, right edge "
                       f"{right} of {window.width()})")
    return cut


def window_on(qtbot: QtBot, window: MainWindow, store: Path, view: str,
              size: tuple[int, int] = (1000, 700)) -> MainWindow:
    """``window`` with ``store`` open, resized to ``size``, showing ``view``."""
    open_store(qtbot, window, store)
    window.resize(*size)
    window.nav.setCurrentRow(list(window.views).index(view))
    return window


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A record and a gray-zone pair waiting in Review (long agent and source names, as an
    agent's are)."""
    path = tmp_path / "store"
    engine = MemoryEngine.open(StoreSpec(str(path)), embedder=HashingEmbedder())
    try:
        for text in (BASE, GRAY):
            engine.ingest(NewMemory(content=text, agent_id="research-agent-with-a-long-name",
                                    source="research-agent:session-12345", layer=Layer.EPISODIC,
                                    category=Category.EPISODE))
        assert engine.pending_review_count() == 1
    finally:
        engine.close()
    return path


def test_no_view_cuts_its_labels_at_1000_by_700(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, store)
    window.resize(1000, 700)
    found = {}
    review = window.observe.review
    qtbot.waitUntil(lambda: review._session is not None, timeout=10_000)
    for row, name in enumerate(window.views):
        window.nav.setCurrentRow(row)
        if name == "review":
            qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
        qtbot.wait(50)  # a layout pass
        cut = cut_labels(window)
        if cut:
            found[name] = cut
    assert found == {}


def test_review_items_wrap_to_the_lists_width(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store: Path) -> None:
    """A review item's text was cut at the list's right edge (read by scrolling sideways)."""
    window = window_on(qtbot, make_window(), store, "review")
    review = window.observe.review
    qtbot.waitUntil(lambda: bool(review.items), timeout=10_000)
    qtbot.wait(50)
    item = review.list.item(0)
    assert item is not None
    rect = review.list.visualItemRect(item)
    assert rect.width() <= review.list.viewport().width()
    lines = review.list.fontMetrics().lineSpacing()
    assert rect.height() >= 3 * lines  # the reason line and the text over two lines



def test_retrieval_over_an_empty_store_says_so_and_offers_the_demo(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Polish: a question asked of an empty store said "No record of this agent and layer
    policy fits the request. Try another agent, purpose or a larger budget"."""
    window = make_window()
    open_store(qtbot, window, tmp_path / "empty")
    retrieval = window.observe.retrieval
    window.nav.setCurrentRow(list(window.views).index("retrieval"))
    retrieval.query_edit.setText("when is the team standup?")
    assert run(qtbot, retrieval.retrieve()) is not None
    assert retrieval.empty_state.is_shown()
    assert retrieval.empty_state.title() == "Nothing to retrieve from"
    assert retrieval.empty_state.button_texts() == ["Load Demo Data", "Import JSONL…"]


def test_review_items_stand_apart(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Polish: wrapped review items touched, the next one's reason line directly under the
    last one's text (in the dark theme, with alternate rows barely darker, they ran together)."""
    path = tmp_path / "store"
    engine = MemoryEngine.open(StoreSpec(str(path)), embedder=HashingEmbedder())
    try:
        for text in (BASE, GRAY, BASE.replace("Sam", "Alex"), GRAY.replace("Sam", "Alex")):
            engine.ingest(NewMemory(content=text, agent_id="travel", source="travel:1",
                                    layer=Layer.EPISODIC, category=Category.EPISODE))
        assert engine.pending_review_count() >= 2
    finally:
        engine.close()
    window = window_on(qtbot, make_window(), path, "review", (900, 600))
    review = window.observe.review
    qtbot.waitUntil(lambda: len(review.items) >= 2, timeout=10_000)
    qtbot.wait(50)
    first, second = (review.list.visualItemRect(review.list.item(i)) for i in range(2))
    assert second.top() - first.bottom() - 1 >= 4  # a gap between them, never an overlap


def test_the_pipeline_summary_reads_across_the_view(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store: Path) -> None:
    """Polish: beside the buttons, the run's summary was a column of five lines at 1000 px."""
    window = window_on(qtbot, make_window(), store, "pipeline")
    pipeline = window.observe.pipeline
    pipeline.content_edit.setPlainText("Sam's passport number is due for renewal in March.")
    assert run(qtbot, pipeline.start(simulate=True))
    while pipeline.run is not None and pipeline.run.next_stage is not None:
        assert run(qtbot, pipeline.step()) is not None
    label = pipeline.status_label
    assert "nothing was written" in label.text()
    qtbot.wait(50)  # a layout pass
    assert label.width() >= pipeline.width() * 0.8
    assert label.height() <= 2 * label.fontMetrics().lineSpacing() + 4


def test_the_what_if_column_titles_are_whole(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store: Path) -> None:
    """Polish: at 1000×700 the what-if box was 190 px wide and cut "Record A", "Record B"."""
    window = window_on(qtbot, make_window(), store, "pipeline")
    table = window.observe.pipeline.whatif_table
    header = table.horizontalHeader()
    qtbot.waitUntil(lambda: header.width() > 0)
    qtbot.wait(50)  # a layout pass
    metrics = header.fontMetrics()
    model = table.model()
    cut = [str(model.headerData(c, header.orientation())) for c in range(3)
           if header.sectionSize(c) < metrics.horizontalAdvance(
               str(model.headerData(c, header.orientation()))) + 8]
    assert cut == []
