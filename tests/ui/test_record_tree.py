"""The one list of records (``ui.shared.record_tree``) that Find similar and the Layers tabs share:
rows named by their text (id on hover), offered to the record menu only once their text is read."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QAbstractItemView
from pytestqt.qtbot import QtBot

from ui.main_window import MainWindow
from ui.records.record_links import RecordRef
from ui.shared.record_tree import GONE, PENDING, RecordTree

MIA = "Mia liked   the\ngarden tour"
RECORD = "0f1e2d3c-aaaa-4bbb-8ccc-123456789abc"


def test_a_row_shows_its_records_text_and_is_offered_once_read(qtbot: QtBot) -> None:
    tree = RecordTree(["When", "Sentiment", "Interaction"], 2, (120, 72))
    qtbot.addWidget(tree)
    item = tree.add_record(["2026-11-25 10:00", "+0.50"], RECORD)
    assert [item.text(c) for c in range(3)] == ["2026-11-25 10:00", "+0.50", PENDING]
    tree.setCurrentItem(item)
    assert tree.current_record() is None and not tree.texts_loaded()  # still being read

    tree.set_texts({RECORD: MIA}, str.upper)  # ``shown``: the redaction mask, say
    assert item.text(2) == "MIA LIKED THE GARDEN TOUR"  # one line, shown as masked
    assert item.toolTip(2) == f"MIA LIKED   THE\nGARDEN TOUR\n\nid {RECORD}"  # whole, with id
    assert tree.current_record() == RecordRef(RECORD, MIA)  # the content as given
    assert tree.texts_loaded() and tree.record_ids() == [RECORD]

    tree.set_texts({})  # deleted or merged away since listed
    assert item.text(2) == GONE and tree.current_record() is None


def test_rows_without_a_record_and_long_texts(qtbot: QtBot) -> None:
    tree = RecordTree(["Cosine", "Content", "Agent"], 1)
    qtbot.addWidget(tree)
    plain = tree.add_record(["0.910", "bot"], None)  # an episode with no record, say
    long = tree.add_record(["0.800", "bot"], RECORD, "word " * 100)
    assert plain.text(1) == "" and tree.record_id(plain) is None
    tree.set_texts({RECORD: "word " * 100})
    assert plain.text(1) == ""  # left alone
    assert len(long.text(1)) <= 160 and long.text(1).endswith("…")
    assert long.toolTip(1).startswith("word " * 99)
    assert tree.selectionMode() is QAbstractItemView.SelectionMode.SingleSelection
    assert not tree.rootIsDecorated() and tree.uniformRowHeights()


def test_find_similar_and_the_layer_lists_are_the_same_list(
        make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    trees = [window.records.similar.tree, *window.layers.record_trees()]
    assert len(trees) == 4  # Find similar; interactions, episodes, neighbours
    assert all(isinstance(tree, RecordTree) for tree in trees)
    # the text column is the one that names the record, in each
    assert [tree.headerItem().text(tree.text_column) for tree in trees] == \
        ["Content", "Interaction", "Episode", "Memory"]
