"""The Fate view: "why did this memory disappear?" for any record (issue 9).

The record is picked by its words (issue 19): typing in the search box lists the stored
memories that contain them (``reader.list_rows`` on a worker, debounced), and a click shows the
fate of the one picked; a record id pasted there (a deleted or merged-away record) works too, and
any view's record context menu opens its fate here (:meth:`FateView.show_fate`).

The story comes from :func:`engine.fate.record_fate` on a worker (stale answers dropped by
token); the last known content comes from the edit history and is rendered through
:meth:`ui.shared.redaction.Redaction.show`, like every other text of the view. Each step is told in
words from its fields (:mod:`ui.shared.format`): the other record by its text (read on the same
worker; a memory merged away or deleted by its last known content), the similarity against its
threshold with the sign the numbers have, times local and relative with the exact time on hover.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import FateStep, LocalReader, MemoryEngine, RecordFate, mass_retirements, record_fate
from engine.errors import EngineError
from ui.records.record_links import RECORD_ID, RecordRef, record_tooltip
from ui.records.record_search import RecordSearch
from ui.shared.empty_state import EmptyState
from ui.shared.format import (
    compare,
    exact_time,
    local_time,
    number,
    phrase,
    record_label,
    relative_time,
    sentence,
)
from ui.shared.redaction import Redaction
from ui.shared.session import StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["FateView", "load_fate"]

_STATUS_COLOURS = {"alive": "#1a7f37", "merged": "#0969da", "compacted": "#8250df",
                   "pruned": "#bc4c00", "deleted": "#cf222e", "expired": "#bc4c00",
                   "retention": "#bc4c00", "skipped": "#0969da", "deferred": "#9a6700"}


_GONE_LIMIT = 20  # records no longer stored whose last text a story looks up


@dataclass(frozen=True, slots=True)
class LoadedFate:
    """What the worker hands back: the fate, the last known content, global warnings, and the
    text of the records the story names (id → the stored content, or a gone record's last
    known content; absent when not known)."""

    fate: RecordFate
    content: str
    mass_batches: int
    texts: Mapping[str, str] = field(default_factory=dict)


def load_fate(engine: MemoryEngine, record_id: str, mass_limit: int) -> LoadedFate:
    """Worker: the fate of ``record_id``, how many mass retirements the store holds, and the
    texts of the records its story names."""
    fate = record_fate(engine, record_id, mass_limit=mass_limit)
    named = {fate.survivor_id, *(step.related_id for step in fate.steps)} - {None, record_id}
    texts = {record.id: record.content
             for record in LocalReader(engine).get_records(sorted(i for i in named if i))}
    # a memory merged away or deleted is named by its last known content (its own fate's)
    for gone in sorted(i for i in named if i and i not in texts)[:_GONE_LIMIT]:
        content = record_fate(engine, gone, mass_limit=mass_limit).content
        if content:
            texts[gone] = content
    if fate.content:
        texts[record_id] = fate.content
    return LoadedFate(fate, fate.content, len(mass_retirements(engine, mass_limit)), texts)


def step_story(step: FateStep, texts: Mapping[str, str],
               show: Callable[[str], str] = str) -> str:
    """One fate step as a sentence naming the other record by its text.

    Steps that name another record are told from their fields; the others keep the engine's
    sentence (it names no id: "created by user", "pruned (prune:normal): …"), through ``show``
    (``texts`` are already shown).
    """
    other = record_label(step.related_id, texts, limit=50)[0] if step.related_id else ""
    similarity = ""
    if step.similarity is not None:
        similarity = f" (similarity {compare(step.similarity, step.threshold)})" \
            if step.threshold is not None else f" (similarity {number(step.similarity)})"
    told = {
        "merged_into": f"merged into {other}{similarity}",
        "absorbed": f"absorbed the incoming memory {other}{similarity}",
        "skipped_duplicate": f"not stored: a duplicate of {other}{similarity}",
        "deferred": f"held for review against {other}{similarity}" if other else
                    f"an incoming memory was held for review against it{similarity}",
        "compacted": f"compacted into the summary {other}" if other else "",
    }.get(step.kind) if step.related_id or step.kind == "deferred" else None
    return told or show(step.text)


class FateView(QWidget):
    """Pick a record by its words (or id), see its story; jump to the survivor or the summary.

    Signals:
        open_record(str): The user asked to open a (live) record in the Records view.
    """

    open_record = Signal(str)

    def __init__(self, runner: TaskRunner, redaction: Redaction,
                 parent: QWidget | None = None, *, mass_limit: int = 20) -> None:
        super().__init__(parent)
        self._runner = runner
        self._redaction = redaction
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._loaded: LoadedFate | None = None
        self.mass_limit = mass_limit
        self.id_edit = QLineEdit(self)
        self.id_edit.setPlaceholderText("Type words of a memory to find it (or paste a record "
                                        "id: alive, merged, deleted, pruned, compacted…)")
        self.id_edit.setClearButtonEnabled(True)
        self.id_edit.returnPressed.connect(self._on_show_clicked)
        self.show_button = QPushButton("Show fate", self)
        self.show_button.clicked.connect(self._on_show_clicked)
        self.picker = QListWidget(self)
        self.finder = RecordSearch(runner, self.id_edit, self.picker, redaction.show, self,
                                   masking=redaction.masking)
        self.finder.picked.connect(self.show_fate)
        self.finder.failed.connect(self._on_search_failed)
        self.status_label = QLabel("Type words of a memory above, or right-click a record in "
                                   "any view → Show fate.", self)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setWordWrap(True)
        self.content_label = QLabel("", self)
        self.content_label.setWordWrap(True)
        self.content_label.setTextFormat(Qt.TextFormat.PlainText)
        self.forecast_label = QLabel("", self)
        self.warning_label = QLabel("", self)
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet("color: #cf222e; font-weight: 600;")
        self.open_button = QPushButton("Open survivor", self)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.open_button.hide()
        self.steps = QTreeWidget(self)
        self.steps.setHeaderLabels(["When", "What", "Story"])
        self.steps.setRootIsDecorated(False)
        self.steps.header().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.steps.itemDoubleClicked.connect(self._on_step_double_clicked)
        top = QHBoxLayout()
        top.addWidget(self.id_edit, 1)
        top.addWidget(self.show_button)
        # the record shown: its status and the way to its survivor (the context menu's record)
        self.record_bar = QWidget(self)
        status = QHBoxLayout(self.record_bar)
        status.setContentsMargins(0, 0, 0, 0)
        status.addWidget(self.status_label, 1)
        status.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.picker)
        layout.addWidget(self.record_bar)
        layout.addWidget(self.content_label)
        layout.addWidget(self.forecast_label)
        layout.addWidget(self.warning_label)
        layout.addWidget(self.steps, 1)
        self.empty_state = EmptyState(self.steps, "fate")
        self._fit_lines()
        self._show_empty_state()
        redaction.changed.connect(self._on_redaction_changed)

    @property
    def fate(self) -> RecordFate | None:
        """The fate shown, if any."""
        return None if self._loaded is None else self._loaded.fate

    def set_session(self, session: StoreSession | None) -> None:
        """Follow the open store (None: nothing open)."""
        if self._session is not None:
            self._session.records_changed.disconnect(self._on_records_changed)
        self._session = session
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
        self._tokens.next_token()
        self._loaded = None
        self.steps.clear()
        self.finder.set_reader(session.reader if session is not None else None)
        self.status_label.setText("Type words of a memory above, or right-click a record in "
                                  "any view → Show fate.")
        self.status_label.setToolTip("")
        for label in (self.content_label, self.forecast_label, self.warning_label):
            label.setText("")
        self._fit_lines()
        self.open_button.hide()
        self._show_empty_state()

    def _fit_lines(self) -> None:
        """Show only the lines under the status that say something: empty, they still took
        their height and left a gap above the story."""
        for label in (self.content_label, self.forecast_label, self.warning_label):
            label.setVisible(bool(label.text()))

    def _show_empty_state(self) -> None:
        if self._loaded is not None:
            self.empty_state.clear()
            return
        self.empty_state.show_message(
            "Pick a record…", "…by typing words of it above, or right-click a record in any "
            "view → Show fate (a deleted one is found by its id). Its story shows here step "
            "by step: created, merged into another, superseded, deleted, pruned or compacted, "
            "and where its content lives on.")

    def _on_records_changed(self, ids: list[str]) -> None:
        """The story shown goes on when its record (or the one it lives on in) is edited,
        deleted, merged or restored: told again, or it kept saying "Alive" with the words it
        had before an edit or a delete."""
        loaded = self._loaded
        if loaded is None:
            return
        fate = loaded.fate
        if {fate.record_id, fate.survivor_id} & set(ids):
            spawn(self.load(fate.record_id, quiet=True))

    def show_fate(self, record_id: str) -> None:
        """Look ``record_id`` up (on a worker) and show its story."""
        self.finder.close()
        self.id_edit.clear()  # the record is named below, by its text; the box is for searching
        spawn(self.load(record_id))

    async def load(self, record_id: str, *, quiet: bool = False) -> RecordFate | None:
        """Load and show the fate of ``record_id``; None when no store is open or stale.

        Args:
            quiet: Keep the story shown until the new one is read (it is being brought up
                to date) instead of saying the ledger is being read.
        """
        session = self._session
        if session is None or not record_id:
            return None
        token = self._tokens.next_token()
        if not quiet:
            self.status_label.setText("Reading the ledger…")
        try:
            loaded = await self._runner.run(load_fate, session.engine, record_id,
                                            self.mass_limit)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.status_label.setText(f"Cannot read the fate of this record: {exc}")
                self.status_label.setToolTip(f"id {record_id}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self._loaded = loaded
        self._show_empty_state()
        self._render()
        return loaded.fate

    def _render(self) -> None:
        loaded = self._loaded
        if loaded is None:
            return
        fate, show = loaded.fate, self._redaction.show
        texts = {k: show(v) for k, v in loaded.texts.items() if v}
        name = record_label(fate.record_id, texts, limit=70, incoming=True)[0]
        status = sentence(phrase(fate.status))
        if fate.survivor_id:
            survivor = record_label(fate.survivor_id, texts, limit=70)[0]
            status = {"merged": "Merged into", "skipped": "Not stored: a duplicate of",
                      "compacted": "Compacted into the summary"}.get(
                fate.status, f"{status}:") + f" {survivor}"
        self.status_label.setText(f"{name} — {status}")
        self.status_label.setToolTip(f"id {fate.record_id}\nstatus {fate.status}"
                                     + (f"\nsurvivor {fate.survivor_id}"
                                        if fate.survivor_id else ""))
        colour = _STATUS_COLOURS.get(fate.status, "")
        self.status_label.setStyleSheet(f"color: {colour}; font-weight: 600;" if colour else "")
        self.content_label.setText(f"Last known content: {show(loaded.content)}"
                                   if loaded.content else "")
        self.content_label.setToolTip(show(loaded.content))
        forecast = fate.forecast
        if forecast is None:
            self.forecast_label.setText("")
            self.forecast_label.setToolTip("")
        else:
            when = ("already below it — the next normal prune retires it"
                    if forecast.already_below else
                    f"falls below it {relative_time(forecast.below_at)}"
                    if forecast.below_at is not None else "never falls below it")
            self.forecast_label.setText(
                f"Decayed importance {number(forecast.decayed_now, decimals=3)} (stored "
                f"{number(forecast.importance, decimals=2)}); retrieval floor "
                f"{number(forecast.floor, decimals=2)}: at the current decay it {when}.")
            self.forecast_label.setToolTip(exact_time(forecast.below_at))
        warnings = [f"⚠ {w.actor} retired {w.count:,} records at once ({local_time(w.ts)}) — "
                    f"more than {self.mass_limit}." for w in fate.warnings]
        if loaded.mass_batches and not warnings:
            warnings.append(f"{count_of(loaded.mass_batches, 'batch', 'batches')} in this "
                            f"store retired more than {self.mass_limit} records at once.")
        self.warning_label.setText("\n".join(warnings))
        self.warning_label.setToolTip("\n".join(f"batch {w.batch}" for w in fate.warnings))
        self._fit_lines()
        self.open_button.setVisible(fate.survivor_id is not None or fate.status == "alive")
        self.open_button.setText("Open survivor" if fate.survivor_id else "Open record")
        self.steps.clear()
        for step in fate.steps:
            story = step_story(step, texts, show)
            item = QTreeWidgetItem([relative_time(step.ts), sentence(phrase(step.kind)), story])
            item.setToolTip(0, exact_time(step.ts))
            item.setToolTip(1, step.kind)
            related = "" if step.related_id is None else "\n\n" + record_tooltip(
                texts.get(step.related_id, ""), step.related_id)
            item.setToolTip(2, story + related)
            item.setData(0, Qt.ItemDataRole.UserRole, step.related_id)
            self.steps.addTopLevelItem(item)
        for column in (0, 1):
            self.steps.resizeColumnToContents(column)

    def current_record(self) -> RecordRef | None:
        """The record whose fate is shown (the context menu's record)."""
        loaded = self._loaded
        if loaded is None:
            return None
        return RecordRef(loaded.fate.record_id, loaded.content)

    def current_step_record(self) -> RecordRef | None:
        """The record the current step names, when its text is known."""
        loaded, item = self._loaded, self.steps.currentItem()
        related = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None
        if loaded is None or not isinstance(related, str) or related not in loaded.texts:
            return None
        return RecordRef(related, loaded.texts[related])

    def _on_redaction_changed(self, _on: bool) -> None:
        self._render()

    def _on_search_failed(self, message: str) -> None:
        self.status_label.setText(message)

    def _on_show_clicked(self) -> None:
        text = self.id_edit.text().strip()
        if RECORD_ID.fullmatch(text):
            self.show_fate(text)
        elif not self.finder.pick_first():  # Enter picks the first match
            spawn(self.finder.search(text))

    def _on_open_clicked(self) -> None:
        fate = self.fate
        if fate is not None:
            self.open_record.emit(fate.survivor_id or fate.record_id)

    def _on_step_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        related = item.data(0, Qt.ItemDataRole.UserRole)
        if isinstance(related, str) and related:
            self.show_fate(related)
