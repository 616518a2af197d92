"""The selected record: an edit form over the editable fields, and everything else read-only.

The panel never talks to the engine: the records view fetches a
:class:`~engine.browse.RecordDetail` on a worker and calls :meth:`RecordDetailPanel.show_detail`;
a save emits :attr:`RecordDetailPanel.save_requested` with only the changed fields, and a
validation error from the engine comes back through :meth:`RecordDetailPanel.show_error`, shown
under the form and on the field it names.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine import LinkedRecord, RecordDetail
from engine.records import Layer, MemoryRecord, RecordState
from ui.records.record_links import quoted, record_tooltip
from ui.shared.choices import chosen_privacy, fill_privacy, show_privacy
from ui.shared.format import diff_value, elide, label_for, local_time, phrase
from ui.shared.wording import count_of

__all__ = ["DAY_MS", "HISTORY_FIELDS", "RecordDetailPanel", "changed_fields"]

DAY_MS = 86_400_000.0
_DAYS = " days"  # the time to live's unit
_ERROR_STYLE = "border: 1px solid #d1242f;"


def _esc(value: object) -> str:
    return html.escape(str(value))


class RecordDetailPanel(QWidget):
    """Edit form and read-only detail of one record.

    Signals:
        save_requested(str, dict): Record id and the changed fields (engine field names).
        navigate(str): The user clicked a linked record id.
    """

    save_requested = QtSignal(str, dict)
    navigate = QtSignal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._record: MemoryRecord | None = None
        self._detail: RecordDetail | None = None
        self._read_only = False
        self._redact: Callable[[str], str] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 0, 0, 0)
        self._title = QLabel("No record selected", self)
        self._title.setWordWrap(True)
        bold = self._title.font()
        bold.setBold(True)
        self._title.setFont(bold)  # a font, not a style sheet: style sheets freeze the palette
        layout.addWidget(self._title)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.content = QPlainTextEdit(self)
        self.content.setObjectName("content")
        self.content.setTabChangesFocus(True)
        self.content.setMinimumHeight(60)
        self.content.setMaximumHeight(120)
        self.layer = QComboBox(self)
        self.layer.setObjectName("layer")
        self.layer.addItems([layer.value for layer in Layer])
        self.privacy = QComboBox(self)
        self.privacy.setObjectName("privacy")
        fill_privacy(self.privacy)
        self.importance = self._unit_spin("importance")
        self.confidence = self._unit_spin("confidence")
        self.tags = QLineEdit(self)
        self.tags.setObjectName("tags")
        self.tags.setPlaceholderText("comma-separated")
        self.ttl = QDoubleSpinBox(self)
        self.ttl.setObjectName("expires_at")
        self.ttl.setRange(0.0, 36_500.0)
        self.ttl.setDecimals(1)
        self.ttl.setSuffix(_DAYS)
        self.ttl.setSpecialValueText("no expiry")
        self.ttl.setToolTip("Time to live from creation; 0 = never expires")
        numbers = QHBoxLayout()
        choices = QHBoxLayout()
        pairs: tuple[tuple[QHBoxLayout, str, QWidget], ...] = (
            (numbers, "Importance", self.importance), (numbers, "Confidence", self.confidence),
            (choices, "Layer", self.layer), (choices, "Privacy", self.privacy))
        for row, label, widget in pairs:
            row.addWidget(QLabel(label, self))
            row.addWidget(widget)
        numbers.addStretch(1)
        choices.addStretch(1)
        form.addRow("Content", self.content)
        form.addRow(choices)
        form.addRow(numbers)
        form.addRow("Tags", self.tags)
        form.addRow("TTL", self.ttl)
        layout.addLayout(form)

        self.error = QLabel("", self)
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d1242f;")
        self.error.hide()
        layout.addWidget(self.error)

        buttons = QHBoxLayout()
        self.save_button = QPushButton("Save", self)
        self.save_button.setToolTip("Save the changes (Ctrl+S)")
        self.revert_button = QPushButton("Revert", self)
        buttons.addStretch(1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.save_button)
        layout.addLayout(buttons)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.revert_button.clicked.connect(self._on_revert_clicked)
        QShortcut(QKeySequence.StandardKey.Save, self, self._on_save_clicked)

        self.tabs = QTabWidget(self)
        self.fields_view = self._browser()
        self.links_view = self._browser()
        self.history_view = self._browser()
        self.tabs.addTab(self.fields_view, "Fields")
        self.tabs.addTab(self.links_view, "Provenance && links")
        self.tabs.addTab(self.history_view, "History")
        layout.addWidget(self.tabs, 1)
        self._editors: dict[str, QWidget] = {
            "content": self.content, "layer": self.layer, "privacy": self.privacy,
            "importance": self.importance, "confidence": self.confidence, "tags": self.tags,
            "expires_at": self.ttl,
        }
        self.show_detail(None)

    def _unit_spin(self, name: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox(self)
        spin.setObjectName(name)
        spin.setRange(0.0, 1.0)
        spin.setDecimals(3)
        spin.setSingleStep(0.05)
        return spin

    def _browser(self) -> QTextBrowser:
        browser = QTextBrowser(self)
        browser.setOpenLinks(False)
        browser.anchorClicked.connect(self._on_anchor_clicked)
        return browser

    # -- showing ---------------------------------------------------------------------------

    @property
    def record(self) -> MemoryRecord | None:
        """The record shown."""
        return self._record

    def set_read_only(self, read_only: bool) -> None:
        """Disable editing (read-only or foreign store)."""
        self._read_only = read_only
        self._update_enabled()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask content shown outside the edit box (None: show as stored)."""
        self._redact = redact
        # issue 9: while masked, the content box shows the masked text and is not editable
        # (changes() then never sends it); re-render what is shown.
        if self._detail is not None and self._record is not None:
            self.show_detail(self._detail)
        self._update_enabled()

    def _update_enabled(self) -> None:
        editable = self._record is not None and not self._read_only
        for widget in self._editors.values():
            widget.setEnabled(editable)
        self.content.setReadOnly(self._redact is not None)
        self.save_button.setEnabled(editable)
        self.revert_button.setEnabled(editable)

    def show_detail(self, detail: RecordDetail | None) -> None:
        """Show ``detail`` (None: clear the panel)."""
        self.clear_error()
        self._record = detail.record if detail is not None else None
        self._detail = detail
        record = self._record
        if detail is None or record is None:
            self._title.setText("No record selected")
            self._title.setToolTip("")
            self.content.setPlainText("")
            self.tags.setText("")
            # blank, not the last record's layer, privacy and numbers (they stayed after a
            # delete, beside "No record selected", as if they were a record's)
            for combo in (self.layer, self.privacy):
                combo.setCurrentIndex(-1)
            self.ttl.setSuffix("")  # clear() keeps the suffix: " days" of nothing
            for spin in (self.importance, self.confidence, self.ttl):
                spin.clear()
            for browser in (self.fields_view, self.links_view, self.history_view):
                browser.setHtml("<p><i>Select a record to see its fields, provenance, links "
                                "and history.</i></p>")
            self._update_enabled()
            return
        shown = self._show(record.content)  # issue 19: by its text; the id secondary
        # issue 20: a paused or archived record says so where its name is
        badge = "" if record.state is RecordState.ACTIVE else f" · {record.state.value}"
        self._title.setText(f"{quoted(shown, 70)} · {record.id[:8]}{badge}")
        self._title.setToolTip(record_tooltip(shown, record.id))
        self._fill_form(record)
        self.fields_view.setHtml(self._fields_html(detail))
        self.links_view.setHtml(self._links_html(detail))
        self.history_view.setHtml(self._history_html(detail))
        self._update_enabled()

    def _fill_form(self, record: MemoryRecord) -> None:
        self.content.setPlainText(self._show(record.content))
        self.layer.setCurrentText(record.layer.value)
        show_privacy(self.privacy, record.privacy)
        self.importance.setValue(record.importance)
        self.confidence.setValue(record.confidence)
        self.tags.setText(", ".join(record.tags))
        ttl = record.ttl_ms
        self.ttl.setSuffix(_DAYS)
        self.ttl.setValue(0.0 if ttl is None else max(0.1, ttl / DAY_MS))

    def _show(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def shown_text(self, text: str) -> str:
        """``text`` as the form shows it (masked in redaction mode)."""
        return self._show(text)

    def _fields_html(self, detail: RecordDetail) -> str:
        record = detail.record
        data: dict[str, Any] = record.to_json()
        data["content"] = self._show(record.content)
        data["decayed_importance"] = detail.decayed_importance
        data.pop("provenance", None)
        texts = {link.id: self._show(link.preview) for link in (*detail.merged_from,
                                                                 *detail.related)
                 if link.preview is not None}
        rows = []
        for key, value in data.items():
            shown = self._show(value) if key == "content" else diff_value(key, value, texts)
            label = "Id" if key == "id" else label_for(key)
            rows.append(f"<tr><td><b>{_esc(label)}</b></td><td>{_esc(shown)}</td></tr>")
        return "<table cellspacing='2' cellpadding='2'>" + "".join(rows) + "</table>"

    def _link_rows(self, links: list[LinkedRecord] | tuple[LinkedRecord, ...]) -> str:
        if not links:
            return "<p><i>none</i></p>"
        items = []
        for link in links:
            similarity = "" if link.similarity is None else f" ({link.similarity:.3f})"
            if link.preview is None:
                items.append(f"<li>{_esc(link.id)}{similarity} — <i>no longer stored</i></li>")
            else:
                items.append(f"<li><a href='record:{_esc(link.id)}'>{_esc(link.id[:8])}</a>"
                             f"{similarity} — {_esc(self._show(link.preview))}</li>")
        return "<ul>" + "".join(items) + "</ul>"

    def _links_html(self, detail: RecordDetail) -> str:
        record = detail.record
        rows = "".join(
            f"<tr><td>{_esc(local_time(p.at))}</td><td>{_esc(p.source)}</td>"
            f"<td>{_esc(p.tier.value)}</td>"
            f"<td>{'' if p.confidence is None else f'{p.confidence:.3f}'}</td>"
            f"<td><code>{_esc(p.content_hash[:12])}</code></td></tr>"
            for p in record.provenance)
        sources = count_of(record.unique_sources, "unique source")
        return (f"<h4>Provenance ({sources})</h4>"
                "<table cellspacing='2' cellpadding='2'><tr><th>at</th><th>source</th>"
                f"<th>tier</th><th>confidence</th><th>hash</th></tr>{rows}</table>"
                f"<h4>Merged from</h4>{self._link_rows(list(detail.merged_from))}"
                f"<h4>Related</h4>{self._link_rows(list(detail.related))}")

    def _history_html(self, detail: RecordDetail) -> str:
        events = "".join(
            f"<tr><td>{_esc(local_time(e.ts))}</td><td>{_esc(phrase(e.kind))}</td>"
            f"<td>{_esc(e.source or '')}</td><td>{_esc(phrase(e.decision_reason))}</td></tr>"
            for e in reversed(detail.events))
        edits = "".join(
            f"<tr><td valign='top'>{_esc(local_time(e.ts))}</td>"
            f"<td valign='top'>{_esc(e.op)}</td><td valign='top'>{_esc(e.actor)}</td>"
            f"<td>{self._changes_html(e.before, e.after)}</td></tr>"
            for e in detail.edits)
        if not detail.edits_known:
            edits = ("<tr><td colspan=4><i>not available: the introspection API does not serve "
                     "edit history</i></td></tr>")
        return ("<h4>Events (newest first)</h4><table cellspacing='2' cellpadding='2'>"
                "<tr><th>time</th><th>kind</th><th>source</th><th>reason</th></tr>"
                f"{events or '<tr><td colspan=4><i>none</i></td></tr>'}</table>"
                "<h4>Edits (newest first)</h4><table cellspacing='2' cellpadding='2'>"
                "<tr><th>time</th><th>op</th><th>actor</th><th>old → new</th></tr>"
                f"{edits or '<tr><td colspan=4><i>none</i></td></tr>'}</table>")

    def _changes_html(self, before: MemoryRecord | None, after: MemoryRecord | None) -> str:
        """One line per edited field, ``field: old → new`` (content through redaction)."""
        if before is None or after is None:
            return "<i>created</i>" if before is None else "<i>deleted</i>"
        lines = [f"<b>{_esc(label_for(name))}</b>: {_esc(self._value(name, old))} → "
                 f"{_esc(self._value(name, new))}"
                 for name, old, new in changed_fields(before, after)]
        return "<br>".join(lines) or "<i>no field changed</i>"

    def _value(self, name: str, value: object) -> str:
        """A field's value as the history shows it (short, readable, masked when asked)."""
        if name == "content" and isinstance(value, str):
            return quoted(self._show(value), _HISTORY_TEXT)
        if name == "expires_at":
            return local_time(value) if isinstance(value, int | float) else "never"
        if isinstance(value, float):
            return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"
        if isinstance(value, tuple | list):
            return ", ".join(str(v) for v in value) or "(none)"
        if isinstance(value, dict):
            return elide(self._show(json.dumps(value, ensure_ascii=False, sort_keys=True)),
                         _HISTORY_TEXT)
        return str(getattr(value, "value", value))

    # -- editing ---------------------------------------------------------------------------

    def changes(self) -> dict[str, Any]:
        """The fields the form changed, in engine terms (empty when nothing changed)."""
        record = self._record
        if record is None:
            return {}
        out: dict[str, Any] = {}
        content = self.content.toPlainText()
        if self._redact is None and content.strip() != record.content:
            out["content"] = content
        if self.layer.currentText() != record.layer.value:
            out["layer"] = self.layer.currentText()
        privacy = chosen_privacy(self.privacy)
        if privacy is not None and privacy is not record.privacy:
            out["privacy"] = privacy.value
        for name, spin in (("importance", self.importance), ("confidence", self.confidence)):
            if abs(spin.value() - getattr(record, name)) > 5e-4:
                out[name] = round(spin.value(), 3)
        tags = [t.strip() for t in self.tags.text().split(",") if t.strip()]
        if tuple(tags) != record.tags:
            out["tags"] = tags
        ttl = self.ttl.value()
        current = record.ttl_ms
        if ttl == 0.0 and current is not None:
            out["expires_at"] = None
        elif ttl > 0.0 and (current is None or abs(current / DAY_MS - ttl) > 0.05):
            out["expires_at"] = record.created_at + ttl * DAY_MS
        return out

    def show_error(self, field: str, message: str) -> None:
        """Show a validation error under the form and mark the field it names."""
        self.clear_error()
        self.error.setText(message)
        self.error.show()
        name = field.rsplit(":", 1)[-1].strip().split(".")[0]
        editor = self._editors.get(name)
        if editor is not None:
            editor.setStyleSheet(_ERROR_STYLE)
            editor.setFocus()

    def clear_error(self) -> None:
        """Hide the validation error."""
        self.error.hide()
        self.error.setText("")
        for editor in self._editors.values():
            editor.setStyleSheet("")

    def _on_save_clicked(self) -> None:
        if self._record is None or self._read_only:
            return
        changes = self.changes()
        if "content" in changes and not changes["content"].strip():
            self.show_error("content", "content: must not be empty")
            return
        if not changes:
            self.clear_error()
            return
        self.save_requested.emit(self._record.id, changes)

    def _on_revert_clicked(self) -> None:
        self.clear_error()
        if self._record is not None:
            self._fill_form(self._record)

    def _on_anchor_clicked(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("record:"):
            self.navigate.emit(text.removeprefix("record:"))


HISTORY_FIELDS = ("content", "layer", "importance", "confidence", "tags", "privacy", "expires_at",
                  "category", "agent_id", "metadata", "state")
"""The fields the History tab compares between an edit's before and after."""
_HISTORY_TEXT = 120


def changed_fields(before: MemoryRecord, after: MemoryRecord) -> list[tuple[str, Any, Any]]:
    """``(field, old, new)`` for each of :data:`HISTORY_FIELDS` that differs, in that order."""
    return [(name, getattr(before, name), getattr(after, name)) for name in HISTORY_FIELDS
            if getattr(before, name) != getattr(after, name)]
