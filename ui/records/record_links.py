"""Records named by their text, and one record context menu for every view that shows records.

A person recognises a memory by what it says, not by its UUID: every view names a record by its
content (elided, the full text and the id on hover) through :func:`elide`, :func:`quoted`,
:func:`record_tooltip` and :func:`name_ids`; a view that only has ids asks for the texts on a
worker with :func:`fetch_texts`.

:class:`RecordLinks` (one per window, built by :class:`~ui.main_window.MainWindow`) gives each
widget that shows records the same actions, in its context menu and on the keyboard while the
widget has focus, acting on the widget's *current* record (the row the right click selected)::

    links.attach(review.list, review.current_record)

=====================  ================  ============================================
action                 shortcut          what it does (signal the window answers)
=====================  ================  ============================================
Open in Records        Ctrl+Return       ``open_requested(id)``
Show fate              Ctrl+Shift+F      ``fate_requested(id)``
Run through pipeline   Ctrl+Shift+P      ``pipeline_requested(id)``
Find similar           Ctrl+Shift+S      ``similar_requested(id, text)`` (text as shown)
Pause                  Ctrl+Alt+P        ``state_requested(ref, PAUSED)`` (off when read-only)
Archive                Ctrl+Alt+A        ``state_requested(ref, ARCHIVED)`` (off when read-only)
Resume                 Ctrl+Alt+R        ``state_requested(ref, ACTIVE)`` (off when read-only)
Copy text              Ctrl+C            the content to the clipboard (masked while redaction is on)
Copy id                Ctrl+Shift+C      the id to the clipboard
Delete                 Del               ``delete_requested(ref)`` (undoable; off when read-only)
=====================  ================  ============================================

The shortcuts are per widget (``WidgetWithChildrenShortcut``), so Ctrl+C in a text field still
copies its selection and two views never compete for a key. A widget that acts on a selection of
its own (the Records table) hands :meth:`RecordLinks.attach` its own actions for some keys: the
menu entry and the shortcut then run that action, and follow its enabled state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QPoint, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QAbstractScrollArea, QMenu, QWidget

from engine import MemoryReader, RecordState
from engine.errors import EngineError
from ui.shared.format import elide, quoted  # one elision and quoting everywhere (re-exported)
from ui.shared.redaction import Redaction
from ui.shared.tasks import TaskRunner

__all__ = ["ACTIONS", "RECORD_ID", "RecordLinks", "RecordRef", "elide", "fetch_texts",
           "name_ids", "quoted", "record_tooltip"]

ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("open", "Open in Records", "Ctrl+Return"),
    ("fate", "Show fate", "Ctrl+Shift+F"),
    ("pipeline", "Run through pipeline", "Ctrl+Shift+P"),
    ("similar", "Find similar", "Ctrl+Shift+S"),
    ("pause", "Pause", "Ctrl+Alt+P"),
    ("archive", "Archive", "Ctrl+Alt+A"),
    ("resume", "Resume", "Ctrl+Alt+R"),
    ("copy_text", "Copy text", "Ctrl+C"),
    ("copy_id", "Copy id", "Ctrl+Shift+C"),
    ("delete", "Delete", "Del"),
)
"""(key, menu text, shortcut) of the record actions, in menu order."""

RECORD_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
"""The shape of a record id (a UUID): ``RECORD_ID.fullmatch(text)`` tells an id from words."""

_ENGINE_ACTIONS = ("fate", "pipeline")  # need a store's full view (not while attached)
_STORE_ACTIONS = ("similar",)  # need an open store: before its full view, its index answers
_STATES = {"pause": RecordState.PAUSED, "archive": RecordState.ARCHIVED,
           "resume": RecordState.ACTIVE}
_WRITE_ACTIONS = ("delete", *_STATES)  # need a writable store
_GROUP_STARTS = ("pause", "copy_text", "delete")  # a separator above each in the menu


@dataclass(frozen=True, slots=True)
class RecordRef:
    """A record as a view shows it: its id and its content (as stored, not masked)."""

    id: str
    text: str


def record_tooltip(text: str, record_id: str) -> str:
    """The hover text of a record's label: its full content, then its id."""
    return f"{text}\n\nid {record_id}" if text else f"id {record_id}"


def name_ids(text: str, names: Mapping[str, str], limit: int = 48) -> str:
    """``text`` with every record id of ``names`` (id → content) replaced by its quoted text."""
    for record_id, content in names.items():
        if record_id and content and record_id in text:
            text = text.replace(record_id, quoted(content, limit))
    return text


def _texts(reader: MemoryReader, ids: Sequence[str]) -> dict[str, str]:
    return {record.id: record.content for record in reader.get_records(ids)}


async def fetch_texts(runner: TaskRunner, reader: MemoryReader,
                      ids: Sequence[str]) -> dict[str, str]:
    """Content of the records ``ids`` that still exist (id → text), read on a worker.

    A record that is gone, or a read that fails, is simply absent: the caller keeps its
    fallback ("no longer stored").
    """
    wanted = list(dict.fromkeys(i for i in ids if i))
    if not wanted:
        return {}
    try:
        return await runner.run(_texts, reader, wanted)
    except EngineError:
        return {}


@dataclass(slots=True)
class _Attached:
    widget: QWidget
    current: Callable[[], RecordRef | None]
    actions: dict[str, QAction] = field(default_factory=dict)
    own: Mapping[str, QAction] = field(default_factory=dict)


class RecordLinks(QObject):
    """The record actions of every view (see the module docstring).

    Signals:
        open_requested(str): Show this record in the Records view.
        fate_requested(str): Show this record's fate.
        pipeline_requested(str): Put this record in the pipeline stepper's form.
        similar_requested(str, str): Show the memories similar to this record (its id, and
            its text as shown: masked while redaction is on).
        state_requested(object, object): Pause, archive or resume this :class:`RecordRef`:
            the :class:`~engine.RecordState` it should have (the window confirms).
        delete_requested(object): Delete this :class:`RecordRef` (the window confirms).
        message(str): A short status message ("Copied the text of …").
    """

    open_requested = QtSignal(str)
    fate_requested = QtSignal(str)
    pipeline_requested = QtSignal(str)
    similar_requested = QtSignal(str, str)
    state_requested = QtSignal(object, object)
    delete_requested = QtSignal(object)
    message = QtSignal(str)

    def __init__(self, redaction: Redaction, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._redaction = redaction
        self._attached: list[_Attached] = []
        self._store = False
        self._engine = False
        self._writable = False

    def attach(self, widget: QWidget, current: Callable[[], RecordRef | None], *,
               own: Mapping[str, QAction] | None = None, open_here: bool = True) -> None:
        """Give ``widget`` the record actions on its current record.

        Args:
            current: The widget's current record (None: none selected).
            own: Actions the widget runs itself, by key of :data:`ACTIONS`, instead of acting
                on the current record (the Records table deletes, pauses, archives and resumes
                its whole selection); the entry is enabled while the widget's action is.
            open_here: False for the Records table itself (it has no "Open in Records").
        """
        entry = _Attached(widget, current, own=dict(own or {}))
        for key, text, keys in ACTIONS:
            if key == "open" and not open_here:
                continue
            made = QAction(text, widget)
            made.setShortcut(QKeySequence(keys))
            made.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            mine = entry.own.get(key)
            if mine is not None:
                made.triggered.connect(mine.trigger)
                mine.changed.connect(lambda where=entry: self._update(where))
            else:
                made.triggered.connect(
                    lambda _checked=False, kind=key, where=entry: self._on_action(kind, where))
            widget.addAction(made)
            entry.actions[key] = made
        self._attached.append(entry)
        widget.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        widget.customContextMenuRequested.connect(
            lambda position, where=entry: self._on_context_menu(where, position))
        self._update(entry)

    def set_available(self, *, engine: bool, writable: bool, store: bool | None = None) -> None:
        """Enable what the session allows: Find similar needs an open store (``store``;
        default ``engine``), Fate and Pipeline its full view (``engine``), Delete a writable
        one; Pause, Archive and Resume a writable one too."""
        self._store = engine if store is None else store
        self._engine, self._writable = engine, writable
        for entry in self._attached:
            self._update(entry)

    def _update(self, entry: _Attached) -> None:
        for key, made in entry.actions.items():
            mine = entry.own.get(key)
            made.setEnabled(mine.isEnabled() if mine is not None
                            else self._writable if key in _WRITE_ACTIONS
                            else self._engine if key in _ENGINE_ACTIONS
                            else self._store if key in _STORE_ACTIONS else True)

    def menu(self, widget: QWidget) -> QMenu | None:
        """The context menu of ``widget``'s current record (None: no record is current).

        Its actions are the widget's own, so the menu shows the shortcuts that work there.
        """
        entry = next((e for e in self._attached if e.widget is widget), None)
        if entry is None:
            return None
        ref = entry.current()
        if ref is None:
            return None
        made = QMenu(widget)
        # mask, then cut: a cut through a secret would leave part of it unmasked
        title = made.addAction(elide(self._redaction.show(ref.text), 40) or ref.id)
        title.setEnabled(False)
        made.addSeparator()
        for key, _text, _keys in ACTIONS:
            if key in entry.actions:
                if key in _GROUP_STARTS:
                    made.addSeparator()
                made.addAction(entry.actions[key])
        return made

    def _on_context_menu(self, entry: _Attached, position: QPoint) -> None:
        made = self.menu(entry.widget)
        if made is None:
            return
        made.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        widget = entry.widget  # a scroll area reports the position in its viewport
        origin = widget.viewport() if isinstance(widget, QAbstractScrollArea) else widget
        made.popup(origin.mapToGlobal(position))

    def _on_action(self, kind: str, entry: _Attached) -> None:
        ref = entry.current()
        if ref is None:
            self.message.emit("No record is selected here.")
            return
        self.trigger(kind, ref)

    def trigger(self, kind: str, ref: RecordRef) -> None:
        """Run action ``kind`` (a key of :data:`ACTIONS`) on ``ref``."""
        if kind == "open":
            self.open_requested.emit(ref.id)
        elif kind == "fate":
            self.fate_requested.emit(ref.id)
        elif kind == "pipeline":
            self.pipeline_requested.emit(ref.id)
        elif kind == "similar":  # the query box shows it: masked while redaction is on
            self.similar_requested.emit(ref.id, self._redaction.show(ref.text))
        elif kind == "copy_text":
            self._redaction.copy(ref.text)
            self.message.emit(f"Copied the text of {quoted(self._redaction.show(ref.text))}")
        elif kind == "copy_id":
            QGuiApplication.clipboard().setText(ref.id)
            self.message.emit(f"Copied the id of {quoted(self._redaction.show(ref.text))}")
        elif kind in _STATES:
            self.state_requested.emit(ref, _STATES[kind])
        elif kind == "delete":
            self.delete_requested.emit(ref)
        else:
            raise ValueError(f"unknown record action {kind!r}")
