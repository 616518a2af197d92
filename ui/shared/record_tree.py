"""Lists of records as tree widgets, set up once for every view that lists records by their text.

The Records view's Find similar panel and the Layers tabs' interaction, episode and neighbour
lists are the same thing: a flat :class:`RecordTree` of a few short columns and one column of
record text. Each row holds its record's id and, once read, the record's content as the engine
gave it; the text column shows it elided to one line, with the full text and the id on hover
(:func:`~ui.records.record_links.record_tooltip`). Until the text is read the column shows "…",
and a record that is no longer stored says so; neither offers the record to the context menu
(:meth:`RecordTree.current_record`), since there is nothing to copy or run yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem, QWidget

from ui.records.record_links import RecordRef, elide, record_tooltip

__all__ = ["GONE", "PENDING", "RecordTree"]

PENDING = "…"
"""What the text column shows while the record's text is being read."""
GONE = "(no longer stored)"
"""What the text column shows for a record that was deleted or merged away since listed."""

_ID = Qt.ItemDataRole.UserRole + 1
_TEXT = Qt.ItemDataRole.UserRole + 2  # the content as the engine gave it (not masked here)
_TEXT_LIMIT = 160  # characters: a row is one line; the whole text is on hover


class RecordTree(QTreeWidget):
    """A flat list of records, one row each, named by their text (see the module docstring).

    Args:
        headers: The column titles.
        text_column: The column that shows the record's text (it takes the spare width).
        widths: The starting widths of the first columns, in pixels.
        parent: The owning widget.
    """

    def __init__(self, headers: Sequence[str], text_column: int, widths: Sequence[int] = (),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text_column = text_column
        self.setHeaderLabels(list(headers))
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)  # one line a row: long lists lay out in one pass
        self.setAlternatingRowColors(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        for column, width in enumerate(widths):
            self.setColumnWidth(column, width)

    def add_record(self, cells: Sequence[str], record_id: str | None, text: str | None = None,
                   shown: Callable[[str], str] | None = None) -> QTreeWidgetItem:
        """Append a row of ``cells`` (the columns other than the text column) for ``record_id``.

        Args:
            cells: The other columns' texts, in order, leaving out the text column.
            record_id: The record the row stands for (None: a row with no record, whose text
                column stays empty).
            text: Its content when already known; None shows "…" until :meth:`set_texts`.
            shown: How to show a text (the redaction mask while it is on); None: as it is.
        """
        row = list(cells)
        row.insert(self.text_column, PENDING if record_id is not None else "")
        item = QTreeWidgetItem(row)
        item.setData(0, _ID, record_id)
        if text is not None and record_id is not None:
            self._set_text(item, text, shown)
        self.addTopLevelItem(item)
        return item

    def set_texts(self, texts: Mapping[str, str],
                  shown: Callable[[str], str] | None = None) -> None:
        """Fill the text column from ``texts`` (id → content); a row whose record is missing
        from it says it is no longer stored."""
        for item in self.record_items():
            record_id = self.record_id(item)
            if record_id is None:
                continue
            text = texts.get(record_id)
            if text is None:
                item.setText(self.text_column, GONE)
                item.setToolTip(self.text_column, "")
                item.setData(0, _TEXT, None)
            else:
                self._set_text(item, text, shown)

    def _set_text(self, item: QTreeWidgetItem, text: str,
                  shown: Callable[[str], str] | None) -> None:
        visible = shown(text) if shown is not None else text
        item.setText(self.text_column, elide(visible, _TEXT_LIMIT))
        item.setToolTip(self.text_column, record_tooltip(visible, str(item.data(0, _ID))))
        item.setData(0, _TEXT, text)

    def record_items(self) -> list[QTreeWidgetItem]:
        """The rows, top to bottom."""
        items = (self.topLevelItem(i) for i in range(self.topLevelItemCount()))
        return [item for item in items if item is not None]

    def record_ids(self) -> list[str]:
        """The listed records' ids, top to bottom."""
        return [str(item.data(0, _ID)) for item in self.record_items()]

    @staticmethod
    def record_id(item: QTreeWidgetItem) -> str | None:
        """The id of the record ``item`` stands for (None: a row of another list)."""
        record_id = item.data(0, _ID)
        return record_id if isinstance(record_id, str) else None

    def texts_loaded(self) -> bool:
        """True when no row is waiting for its text."""
        return all(item.text(self.text_column) != PENDING for item in self.record_items())

    def current_record(self) -> RecordRef | None:
        """The current row's record, the record context menu's target (None: no row, or its
        text not read yet or no longer stored)."""
        item = self.currentItem()
        if item is None:
            return None
        record_id, text = self.record_id(item), item.data(0, _TEXT)
        if record_id is None or not isinstance(text, str):
            return None
        return RecordRef(record_id, text)
