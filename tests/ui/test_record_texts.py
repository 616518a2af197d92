"""Issue 19: no view names a record by its id alone — walked over every view with the demo data.

Each view is put in the state its screenshot shows (``--screenshot``'s own preparation, so the
walk sees what a person sees) and its visible texts are collected:

* labels — their text and tooltip, grouped by the widget they sit in (a panel);
* rendered text browsers (the record detail, the review pair) — their plain text, one group;
* item views (tables, lists, trees) — every cell's display text and tooltip, one group per view;
* the painted rankings (pipeline candidates, retrieval rows) — each row's label and tooltip.

Editable and raw text (line edits, the timeline's raw event fields) is not a label and is left
out: a raw view may show ids, one click away from the labelled one.

**The rule.** A *record id* is the id of a record stored in the window's store, written in full
or as a prefix of at least 8 of its characters. Wherever a text shows one, the same group must
also show that record's text: the first 20 characters of its content (its whole content when
shorter), whitespace collapsed. Ids that name no stored record (events, runs, records merged
away) are not record ids and are not checked. A group is deliberately small — one label panel or
one item view — so a list of ids is not excused by texts shown elsewhere in the window.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QLabel, QTextBrowser, QWidget
from pytestqt.qtbot import QtBot

from app.wiring import SHOTS, VIEW_NAMES, _prepare_steer_views, _select_row, _workflow_shots
from engine.query import RecordQuery
from tests.ui.conftest import DEMO, open_store, run
from ui.main_window import MainWindow
from ui.observe.retrieval_view import ScoreBars
from ui.observe.stepper_view import SimilarityBars

pytestmark = [pytest.mark.slow,
              pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

_HEX = re.compile(r"[0-9a-f]{8,}(?:-[0-9a-f]{4}){0,3}(?:-[0-9a-f]{12})?", re.I)
_TAGS = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"\s+")
_ROWS = 400  # rows read per item view (the records table pages 200 at a time)


@dataclass(frozen=True, slots=True)
class Group:
    """Texts shown together: where a record id must find its record's text."""

    where: str
    texts: tuple[str, ...]


def _flat(text: str) -> str:
    return _SPACES.sub(" ", _TAGS.sub(" ", text)).strip()


def _count(count: Callable[[QModelIndex], int], parent: QModelIndex, default: int) -> int:
    """A model's row or column count (list and table models keep some of them private)."""
    try:
        return count(parent)
    except TypeError:
        return default


def _model_texts(model: QAbstractItemModel, parent: QModelIndex = QModelIndex()  # noqa: B008
                 ) -> Iterator[str]:
    for row in range(min(model.rowCount(parent), _ROWS)):
        for column in range(_count(model.columnCount, parent, 1)):
            index = model.index(row, column, parent)
            for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                value = model.data(index, role)
                if isinstance(value, str) and value:
                    yield value
        first = model.index(row, 0, parent)
        if _count(model.rowCount, first, 0) > 0:
            yield from _model_texts(model, first)


def visible_groups(view: QWidget) -> list[Group]:
    """The texts ``view`` shows now, grouped as the module docstring says."""
    groups: list[Group] = []
    panels: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for widget in view.findChildren(QWidget):
        if not widget.isVisible():
            continue
        name = type(widget).__name__
        if isinstance(widget, QLabel):
            parent = widget.parentWidget()
            key = id(parent)
            names[key] = f"labels in {type(parent).__name__}"
            panels.setdefault(key, []).extend([widget.text(), widget.toolTip()])
        elif isinstance(widget, QTextBrowser):
            groups.append(Group(name, (widget.toPlainText(),)))
        elif isinstance(widget, QAbstractItemView) and widget.model() is not None:
            groups.append(Group(name, tuple(_model_texts(widget.model()))))
        elif isinstance(widget, SimilarityBars):
            tips = list(widget.tips) + [""] * len(widget.candidates)
            groups.extend(Group(name, (label, tip)) for (label, _similarity), tip
                          in zip(widget.candidates, tips, strict=False))
        elif isinstance(widget, ScoreBars):
            groups.extend(Group(name, (row.text,)) for row in widget.rows)
    groups.extend(Group(names[key], tuple(texts)) for key, texts in panels.items())
    return groups


def problems(groups: list[Group], contents: dict[str, str]) -> list[str]:
    """Every record id shown without its record's text in the same group."""
    by_prefix: dict[str, str] = {}
    for record_id in contents:
        by_prefix[record_id[:8].lower()] = record_id
    found: list[str] = []
    for group in groups:
        flat = [_flat(text) for text in group.texts]
        for text in flat:
            for match in _HEX.finditer(text):
                token = match.group(0).lower()
                named = by_prefix.get(token[:8])
                if named is None or not named.startswith(token):
                    continue  # not a stored record's id (an event, a run, a hash)
                content = _flat(contents[named])[:20]
                if not any(content in other for other in flat):
                    found.append(f"{group.where}: {text[:120]!r} names {named} without "
                                 f"“{content}…”")
    return found


def test_the_rule_finds_an_id_alone_and_accepts_an_id_beside_its_text() -> None:
    contents = {"0f1e2d3c-aaaa-4bbb-8ccc-123456789abc": "Sam prefers window seats"}
    alone = [Group("list", ("merged into 0f1e2d3c-aaaa-4bbb-8ccc-123456789abc",))]
    prefix = [Group("labels", ("Stored record 0f1e2d3c-aaa · agent",))]
    named = [Group("list", ("merged into “Sam prefers window seats” · 0f1e2d3c",))]
    elsewhere = [Group("tree", ("0f1e2d3c",)), Group("labels", ("Sam prefers window seats",))]
    unknown = [Group("list", ("event 9a8b7c6d-1111-4222-8333-444455556666",))]
    assert len(problems(alone, contents)) == 1
    assert len(problems(prefix, contents)) == 1
    assert problems(named, contents) == []
    assert len(problems(elsewhere, contents)) == 1  # its text elsewhere does not excuse it
    assert problems(unknown, contents) == []


@pytest.fixture
def demo_window(qtbot: QtBot, make_window: Callable[..., MainWindow],
                tmp_path: Path) -> MainWindow:
    window = make_window()
    window.resize(1280, 800)
    open_store(qtbot, window, tmp_path / "store")
    assert run(qtbot, window.run_import(DEMO), timeout=240) is not None
    qtbot.waitUntil(lambda: window.records.model.settled and window.records.model.total > 0,
                    timeout=30_000)
    qtbot.waitUntil(lambda: window.observe.review._session is not None, timeout=30_000)
    return window


def test_no_view_names_a_record_by_its_id_alone(qtbot: QtBot, demo_window: MainWindow,
                                                tmp_path: Path) -> None:
    window = demo_window
    session = window.session
    assert session is not None
    rows = run(qtbot, session.runner.run(session.engine.list_rows, RecordQuery(limit=10_000)))
    contents = {row.id: row.content for row in rows.rows}
    assert len(contents) > 100
    folder = tmp_path / "shots"
    folder.mkdir()
    run(qtbot, _select_row(window, 2), timeout=60)
    run(qtbot, _prepare_steer_views(window, window.controller, session.runner, folder),
        timeout=120)
    found: list[str] = []
    walked: dict[str, int] = {}
    for view, name in SHOTS:
        window.nav.setCurrentRow(list(window.views).index(view))
        if view in VIEW_NAMES and view != "records":
            run(qtbot, window.observe.prepare_screenshot(view), timeout=120)
        if view == "layers":
            run(qtbot, window.layers.prepare_screenshot(name.removeprefix("layers-")),
                timeout=120)
        if view == "timeline":  # the selected event's record is named when its text arrives
            timeline = window.observe.timeline
            named = [i for i, e in enumerate(timeline.data.events) if e.record_id in contents]
            timeline.select_event(named[-1])
            qtbot.waitUntil(timeline.open_button.isVisible, timeout=10_000)
        groups = visible_groups(window.views[view])
        walked[name] = sum(len(g.texts) for g in groups)
        found.extend(f"{name}: {problem}" for problem in problems(groups, contents))
    assert all(walked[name] > 0 for _view, name in SHOTS), walked
    assert not found, "\n".join(found)
    shutil.rmtree(folder, ignore_errors=True)


def test_the_documented_workflow(qtbot: QtBot, demo_window: MainWindow) -> None:
    """docs/gui.md, "find a duplicate, follow it to its survivor", step by step."""
    window = demo_window
    records, fate = window.records, window.fate
    records.filters.text.setText("coffee machine")  # 1. search Records
    qtbot.waitUntil(lambda: records.model.settled
                    and records.model.query.text == "coffee machine", timeout=10_000)
    rows = [records.model.record_at(row) for row in range(records.model.total)]
    likes = [row for row in rows if row is not None
             and row.content.startswith("Jordan likes the coffee machine")]
    assert len(likes) == 1  # the merged pair is one record
    survivor = likes[0]
    # seed 004: the more important version's text (0.7 over the stored 0.6), the stored id
    assert survivor.content == "Jordan likes the coffee machine started at 6:45."
    records.table.selectRow(records.model.row_of(survivor.id) or 0)
    menu = window.links.menu(records.table)  # 2. right-click → Show fate
    assert menu is not None
    next(a for a in menu.actions() if a.text() == "Show fate").trigger()
    qtbot.waitUntil(lambda: fate.fate is not None and fate.fate.record_id == survivor.id,
                    timeout=10_000)
    steps = [fate.steps.topLevelItem(i) for i in range(fate.steps.topLevelItemCount())]
    absorbed = next(item for item in steps if item is not None
                    and item.text(2).startswith("absorbed the incoming memory ‘Jordan likes "
                                                "the coffee machine started at 6:45.’"))
    assert "≥ threshold" in absorbed.text(2)
    fate.steps.itemDoubleClicked.emit(absorbed, 2)  # 3. the duplicate's own story
    qtbot.waitUntil(lambda: fate.fate is not None and fate.fate.status == "merged",
                    timeout=10_000)
    assert fate.fate is not None
    duplicate = fate.fate.record_id
    assert fate.status_label.text() == (
        f"‘Jordan likes the coffee machine started at 6:45.’ · {duplicate[:8]} — Merged into "
        f"‘Jordan likes the coffee machine started at 6:45.’ · {survivor.id[:8]}")
    fate.open_button.click()  # 4. Open survivor
    qtbot.waitUntil(lambda: window.stack.currentWidget() is records
                    and records.current_record() is not None
                    and records.current_record().id == survivor.id  # type: ignore[union-attr]
                    and records.detail.record is not None
                    and records.detail.record.id == survivor.id, timeout=15_000)


# the offscreen platform cannot raise a popup or give it the keyboard; the menu is only painted
@pytest.mark.qt_log_ignore(
    "This plugin does not support (raise|grabbing the keyboard|propagateSizeHints)")
def test_the_workflow_screenshots_follow_the_documented_steps(
        qtbot: QtBot, demo_window: MainWindow, tmp_path: Path) -> None:
    """``--screenshot``'s docs/gui.md workflow images: five steps, ending on the survivor."""
    window = demo_window
    names = run(qtbot, _workflow_shots(window, tmp_path), timeout=120)
    assert names == ["workflow-1-search.png", "workflow-2-menu.png", "workflow-3-fate.png",
                     "workflow-4-duplicate.png", "workflow-5-survivor.png"]
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in names)
    survivor = window.records.detail.record
    assert window.stack.currentWidget() is window.records and survivor is not None
    assert survivor.content == "Jordan likes the coffee machine started at 6:45."
    assert window.fate.fate is not None and window.fate.fate.status == "merged"
