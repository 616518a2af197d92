"""Labelled fields with the raw JSON one click away: the detail panel of events and stages.

:class:`FieldsPanel` shows :class:`ui.shared.format.Field` rows as a two-column form ("Similarity" —
"0.884 ≥ threshold 0.80") in its **Fields** tab and the same data as indented JSON in its
**Raw** tab. A row that names a record keeps the record's id as item data
(:data:`RECORD_ID_ROLE`) and its full text with the id as tool tip, so views can open the
record from the row.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QPlainTextEdit,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.shared.format import Field

__all__ = ["RECORD_ID_ROLE", "FieldsPanel"]

RECORD_ID_ROLE = int(Qt.ItemDataRole.UserRole) + 1
"""Item data role (on column 0 and 1) holding the id of the record a row names."""


class FieldsPanel(QWidget):
    """A form of labelled fields (tab "Fields") and their raw JSON (tab "Raw").

    Signals:
        record_activated(str): A row naming a record was double-clicked (its id).
    """

    record_activated = QtSignal(str)

    def __init__(self, placeholder: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.fields = QTreeWidget(self.tabs)
        self.fields.setColumnCount(2)
        self.fields.setHeaderHidden(True)
        self.fields.setRootIsDecorated(True)
        self.fields.setIndentation(12)  # nested rows keep room for their labels
        self.fields.setUniformRowHeights(True)
        self.fields.setAlternatingRowColors(True)
        self.fields.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.fields.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.fields.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.fields.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self._label_width = 0  # what the labels need; the column gets at most half the width
        self.fields.viewport().installEventFilter(self)
        self.fields.itemDoubleClicked.connect(self._on_item_double_clicked)
        self.raw = QPlainTextEdit(self.tabs)
        self.raw.setReadOnly(True)
        self.raw.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.raw.setPlaceholderText(placeholder)
        self.placeholder = placeholder
        self.tabs.addTab(self.fields, "Fields")
        self.tabs.addTab(self.raw, "Raw")
        self.tabs.setTabToolTip(1, "The same data as the engine wrote it (JSON)")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self.clear()

    def clear(self) -> None:
        """Show the placeholder and no fields."""
        self.fields.clear()
        self.raw.clear()
        if self.placeholder:
            item = QTreeWidgetItem([self.placeholder, ""])
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.fields.addTopLevelItem(item)
            self.fields.setFirstColumnSpanned(0, self.fields.rootIndex(), True)

    def set_fields(self, fields: Sequence[Field], raw: str) -> None:
        """Show ``fields`` in the form and ``raw`` (JSON text) in the Raw tab."""
        self.fields.clear()

        def make(field: Field) -> QTreeWidgetItem:
            item = QTreeWidgetItem([field.label, field.value])
            if field.tooltip:
                item.setToolTip(1, field.tooltip)
                item.setToolTip(0, field.tooltip)
            else:  # the label column is elided in a narrow pane: the whole label on hover
                item.setToolTip(0, field.label)
                if field.value:
                    item.setToolTip(1, field.value)
            if field.record_id is not None:
                for column in (0, 1):
                    item.setData(column, RECORD_ID_ROLE, field.record_id)
            for child in field.children:
                item.addChild(make(child))
            return item

        self.fields.addTopLevelItems([make(f) for f in fields])
        self.fields.expandAll()
        self.fields.resizeColumnToContents(0)
        self._label_width = self.fields.columnWidth(0) + 12
        self._fit_label_column()
        scroll = self.raw.verticalScrollBar().value()
        self.raw.setPlainText(raw)
        self.raw.verticalScrollBar().setValue(scroll)

    def _fit_label_column(self) -> None:
        """Labels as wide as they need, at most half the panel: values stay visible
        (elided, full text on hover) however narrow the panel is."""
        available = self.fields.viewport().width()
        if self._label_width and available > 0:
            self.fields.setColumnWidth(0, min(self._label_width, max(80, available // 2)))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        fields = self.__dict__.get("fields")  # None once a closed window's attributes are cleared
        if fields is not None and watched is fields.viewport() \
                and event.type() == QEvent.Type.Resize:
            self._fit_label_column()
        return super().eventFilter(watched, event)

    def rows(self) -> list[tuple[str, str]]:
        """Every row as ``(label, value)``, depth first (what the form shows; for tests)."""
        found: list[tuple[str, str]] = []

        def walk(item: QTreeWidgetItem | None) -> None:
            if item is None:
                return
            found.append((item.text(0), item.text(1)))
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.fields.topLevelItemCount()):
            walk(self.fields.topLevelItem(i))
        return found

    def text(self) -> str:
        """The form as ``label: value`` lines."""
        return "\n".join(f"{label}: {value}" for label, value in self.rows())

    def record_ids(self) -> list[str]:
        """Ids of the records the rows name, in row order."""
        found: list[str] = []

        def walk(item: QTreeWidgetItem | None) -> None:
            if item is None:
                return
            value = item.data(0, RECORD_ID_ROLE)
            if isinstance(value, str):
                found.append(value)
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.fields.topLevelItemCount()):
            walk(self.fields.topLevelItem(i))
        return found

    def current_record_id(self) -> str | None:
        """The record the current row names, if any (what the record context menu acts on)."""
        item = self.fields.currentItem()
        record_id = item.data(0, RECORD_ID_ROLE) if item is not None else None
        return record_id if isinstance(record_id, str) else None

    def _on_item_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        record_id = item.data(0, RECORD_ID_ROLE)
        if isinstance(record_id, str) and record_id:
            self.record_activated.emit(record_id)
