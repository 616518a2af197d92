"""The app-wide redaction state and the one function every view uses to render record text.

Issue 9: while redaction is on, content is masked in every view, tooltip, detail pane, timeline
detail, context preview, clipboard copy and export. Views never call a redactor themselves; they
render text through :meth:`Redaction.show` and re-render when :attr:`Redaction.changed` fires::

    redaction = window.redaction              # one instance per window (MainWindow owns it)
    label.setText(redaction.show(record.content))
    redaction.changed.connect(lambda _on: self._rerender())

Clipboard copies go through :meth:`Redaction.copy` and exports pass
:meth:`Redaction.export_redactor` (None when off) to the writer.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication

from engine import ExitPolicy, Masking, redact_text

__all__ = ["Redaction"]


class Redaction(QObject):
    """Whether content is masked app-wide, and how to render text accordingly.

    Signals:
        changed(bool): Redaction was switched on (True) or off (False).
    """

    changed = Signal(bool)

    def __init__(self, enabled: bool = False,
                 redactor: Callable[[str], str] = redact_text,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._enabled = enabled
        self._redactor = redactor
        self._masking = ExitPolicy(redactor).shown

    @property
    def enabled(self) -> bool:
        """True while content is masked; assign to switch (emits :attr:`changed` on a change)."""
        return self._enabled

    @enabled.setter
    def enabled(self, on: bool) -> None:
        self._set_enabled(on)

    def _set_enabled(self, on: bool) -> None:
        if on == self._enabled:
            return
        self._enabled = on
        self.changed.emit(on)

    def is_enabled(self) -> bool:
        """True while content is masked."""
        return self._enabled

    def set_enabled(self, on: bool) -> None:
        """Switch masking on or off; emits :attr:`changed` when the state changes."""
        self._set_enabled(on)

    def toggle(self) -> None:
        """Flip the state."""
        self._set_enabled(not self._enabled)

    @property
    def redactor(self) -> Callable[[str], str]:
        """The masking function used while on (``engine.redaction.redact_text`` by default)."""
        return self._redactor

    def show(self, text: str) -> str:
        """Return ``text`` as it may be displayed now: masked while on, unchanged while off."""
        return self._redactor(text) if self._enabled and text else text

    def current(self) -> Callable[[str], str] | None:
        """The redactor while on, None while off (for APIs that take an optional redactor)."""
        return self._redactor if self._enabled else None

    def masking(self) -> Masking | None:
        """What text filters match against while on (the exit policy's ``shown``: one per
        window, its remembered masks shared by the views that search), None while off."""
        return self._masking if self._enabled else None

    def export_redactor(self, asked: bool) -> Callable[[str], str] | None:
        """The redactor for an export: always while on, else only when the user ``asked``."""
        return self._redactor if (self._enabled or asked) else None

    def copy(self, text: str) -> str:
        """Put ``text`` on the clipboard as displayed now (masked while on); return it."""
        shown = self.show(text)
        clipboard = QApplication.clipboard()
        clipboard.setText(shown)
        return shown
