"""The main window: store summary and status bar (views are added by later work)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout, QWidget

__all__ = ["MainWindow"]


class MainWindow(QMainWindow):
    """Shows the open store, its record count and the embedding model state.

    Signals:
        (none yet)
    """

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Mnemoscope")
        self.resize(1280, 800)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        self._store_label = QLabel("Opening store…", central)
        self._count_label = QLabel("", central)
        for label in (self._store_label, self._count_label):
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            layout.addWidget(label)
        self.setCentralWidget(central)
        self._model_status = QLabel("model: loading", self)
        self.statusBar().addPermanentWidget(self._model_status)

    def show_store(self, location: str, count: int, read_only: bool) -> None:
        """Display the open store and its record count."""
        suffix = " (read-only)" if read_only else ""
        self._store_label.setText(f"Store: {location}{suffix}")
        self._count_label.setText(f"{count:,} records")

    def show_error(self, message: str) -> None:
        """Display an error that prevented opening the store."""
        self._store_label.setText(message)

    def show_model_state(self, text: str) -> None:
        """Display the embedding model state in the status bar."""
        self._model_status.setText(f"model: {text}")
