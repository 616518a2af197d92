"""Find similar in the Records view: the records nearest to one record, by cosine (issue 24).

Before a store's full view is read (a Chroma server store at scale), Find similar cannot run a
retrieval over every record; the store's own HNSW index answers instead
(:func:`engine.browse.similar_records`: the record's stored vector as the query, no other
record read). The Records view fetches the answer on a worker and shows it here, under the
table: the record asked about, then its neighbours nearest first with their cosine, text,
agent, layer and state. The texts arrive masked from the engine while redaction is on.
Double-clicking a neighbour shows it in the detail panel; every row has the record context
menu (``RecordLinks``), so Find similar can be followed from neighbour to neighbour.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import SimilarRecords
from engine.records import RecordState
from ui.records.record_links import RecordRef, quoted, record_tooltip
from ui.shared.record_tree import RecordTree

__all__ = ["SimilarPanel"]

_COLUMNS = ("Cosine", "Content", "Agent", "Layer", "State")


class SimilarPanel(QWidget):
    """The nearest records to one record (see the module docstring); hidden until asked.

    Signals:
        record_activated(str): A neighbour was double-clicked (its id).
    """

    record_activated = QtSignal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._record_id = ""
        self.title = QLabel("", self)
        self.title.setWordWrap(True)
        self.close_button = QPushButton("Close", self)
        self.close_button.setToolTip("Hide the similar records")
        self.close_button.clicked.connect(self.clear)
        self.tree = RecordTree(_COLUMNS, 1, (64, 420, 110, 90), self)
        self.tree.itemDoubleClicked.connect(self._on_double_clicked)
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(head)
        layout.addWidget(self.tree, 1)
        self.hide()

    @property
    def record_id(self) -> str:
        """The record whose neighbours are shown or asked for ("" when hidden)."""
        return self._record_id

    def show_loading(self, record_id: str) -> None:
        """Say the neighbours of ``record_id`` are being asked for."""
        self._record_id = record_id
        self.tree.clear()
        self.title.setText("Finding similar records with the store's index…")
        self.show()

    def show_result(self, result: SimilarRecords) -> None:
        """Show ``result`` (its texts as the engine gave them: masked under redaction)."""
        self._record_id = result.record.id
        self.tree.clear()
        count = len(result.rows)
        self.title.setText(
            f"{count} record{'s' if count != 1 else ''} most similar to "
            f"{quoted(result.record.content, 60)}, by cosine of the stored vectors (the "
            "store's index answered: no other record was read)")
        self.title.setToolTip(record_tooltip(result.record.content, result.record.id))
        for row, cosine in zip(result.rows, result.cosines, strict=True):
            item = self.tree.add_record([f"{cosine:.3f}", row.agent_id, row.layer.value,
                                         row.state.value], row.id, row.content)
            item.setTextAlignment(0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if row.state is not RecordState.ACTIVE:
                item.setToolTip(4, "Kept, but not retrieved until resumed")
        if not result.rows:
            self.title.setText(f"No other record has a stored vector near "
                               f"{quoted(result.record.content, 60)}")
        self.show()

    def show_error(self, record_id: str, message: str) -> None:
        """Say why the neighbours of ``record_id`` could not be found."""
        self._record_id = record_id
        self.tree.clear()
        self.title.setText(f"Could not find similar records: {message}")
        self.show()

    def clear(self) -> None:
        """Hide the panel."""
        self._record_id = ""
        self.tree.clear()
        self.hide()

    def ids(self) -> list[str]:
        """The neighbours' ids, nearest first."""
        return self.tree.record_ids()

    def cosines(self) -> list[float]:
        """The neighbours' cosines as shown, nearest first."""
        return [float(item.text(0)) for item in self.tree.record_items()]

    def current_record(self) -> RecordRef | None:
        """The selected neighbour (the record context menu's target)."""
        return self.tree.current_record()

    def _on_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        record_id = self.tree.record_id(item)
        if record_id is not None:
            self.record_activated.emit(record_id)
