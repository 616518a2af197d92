"""What the views show: an open store (engine, writes, undo/redo) or an attached agent.

:class:`DataSession` is what the browsing views (records, timeline, layers) consume: a
:class:`~engine.reader.MemoryReader` and a ``records_changed`` signal. It has two kinds:

* :class:`StoreSession` — a store this process opened; its reader is a
  :class:`~engine.reader.LocalReader` over the engine, which the editing views use directly.
  A store opened without a usable view cache comes with its columnar view deferred
  (``MemoryEngine.open(defer_view=True)``): :meth:`StoreSession.start_indexing` reads it on a
  worker with progress and cancel, while the records browser pages and filters through Chroma
  directly (:meth:`StoreSession.server_rows`). Everything that needs the view awaits
  :meth:`StoreSession.wait_indexed` on the GUI loop first, so no worker thread sits blocked.
* :class:`AttachedSession` — an agent's ``mnemoscope serve`` (read-only), read through a
  :class:`~engine.introspection.remote.RemoteReader`. Its records change when the agent's
  events say so: they arrive on the reader's follower thread, are batched by an
  :class:`~ui.observe.event_tail.EventTail` and re-emitted as ``records_changed`` at most twice a
  second.

Every write runs on a worker through the task runner, one at a time (an asyncio lock keeps undo,
redo and edits in order), and is recorded by the engine in the ledger's ``edits`` table. The
:class:`QUndoStack` holds one :class:`RecordsCommand` per user action with the same
before/after records the engine wrote to the ledger, so undo writes the "before" records back
(``engine.restore``, itself recorded in the ledger) and redo the "after" ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QUndoCommand, QUndoStack

from engine import (
    Event,
    EventFeed,
    LocalReader,
    Masking,
    MemoryEngine,
    MemoryReader,
    RecordQuery,
    RowPage,
    StoreSpec,
)
from engine.errors import EngineError
from engine.records import Layer, MemoryRecord, NewMemory, RecordState
from ui.observe.event_tail import EventTail
from ui.shared.tasks import CancelFlag, TaskRunner, spawn

__all__ = ["AttachedSession", "ConnectionRelay", "DataSession", "EditPair", "RecordsCommand",
           "StoreSession"]

EditPair = tuple[MemoryRecord | None, MemoryRecord | None]
T = TypeVar("T")


class RecordsCommand(QUndoCommand):
    """An undoable change to records: ``(before, after)`` pairs from the edit history.

    ``before`` None means the action created the record; ``after`` None means it deleted it.
    The first :meth:`redo` (run by ``QUndoStack.push``) does nothing: the change is already in
    the store when the command is pushed.
    """

    def __init__(self, session: StoreSession, text: str, pairs: Sequence[EditPair]) -> None:
        super().__init__(text)
        self._session = session
        self._pairs = list(pairs)
        self._applied = True

    @property
    def pairs(self) -> Sequence[EditPair]:
        """The ``(before, after)`` pairs."""
        return self._pairs

    def undo(self) -> None:
        self._applied = False
        restore = [before for before, _ in self._pairs if before is not None]
        delete = [after.id for before, after in self._pairs if before is None and after]
        self._session.schedule_apply(restore, delete, f"Undo {self.text()}")

    def redo(self) -> None:
        if self._applied:
            return
        self._applied = True
        restore = [after for _, after in self._pairs if after is not None]
        delete = [before.id for before, after in self._pairs if after is None and before]
        self._session.schedule_apply(restore, delete, f"Redo {self.text()}")


def _update_many(engine: MemoryEngine, ids: Sequence[str],
                 changes: Callable[[MemoryRecord], Mapping[str, Any]]) -> list[EditPair]:
    pairs: list[EditPair] = []
    for record in engine.get_many(list(ids)):
        values = changes(record)
        after = engine.update(record.id, values)
        pairs.append((record, after))
    return pairs


UNDO_BATCH = 8
"""Records per Chroma call when undo/redo writes records back, and when a consolidation is
applied or undone. Chroma's bindings hold the GIL for a whole call: undoing a 200-row delete in
one upsert stalled the GUI thread 150-550 ms, an Apply All of 100 merges 230-470 ms; 25 rows
per call keep each hold near 20-40 ms (docs/gui.md, "No stall on the GUI thread")."""


def _apply(engine: MemoryEngine, restore: Sequence[MemoryRecord], delete: Sequence[str]) -> None:
    present = engine.stored_ids(delete)
    if present:
        engine.delete(present, reason="undo")
    if restore:
        engine.restore(list(restore), batch_size=UNDO_BATCH)


class DataSession(QObject):
    """What the browsing views read: a reader and news of changed records.

    Signals:
        records_changed(list): Records were written or deleted (their ids).
        failed(str): Something the session did in the background failed; the message says why.
    """

    records_changed = QtSignal(list)
    failed = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self._tail: EventTail | None = None
        self._changed: set[str] = set()
        self._reload = QTimer(self)
        self._reload.setSingleShot(True)
        self._reload.timeout.connect(self._emit_changed)

    @property
    def reader(self) -> MemoryReader:
        """Read access to the memory shown."""
        raise NotImplementedError

    def _follow(self, feed: EventFeed | None, *, reload_ms: int = 500,
                accept: Callable[[Event], bool] | None = None) -> None:
        """Re-emit the records named by ``feed``'s events (those ``accept`` takes) as
        ``records_changed``, gathered for ``reload_ms`` after the first; None: stop."""
        if self._tail is None:
            self._tail = EventTail(parent=self)
            self._tail.arrived.connect(self._on_events)
        self._reload.setInterval(reload_ms)
        self._tail.attach(feed, accept=accept)
        if feed is None:
            self._reload.stop()
            self._changed.clear()

    def _on_events(self, events: list[Event]) -> None:
        self._changed.update(e.record_id for e in events if e.record_id)
        if self._changed and not self._reload.isActive():
            self._reload.start()

    def _emit_changed(self) -> None:
        changed, self._changed = sorted(self._changed), set()
        if changed:
            self.records_changed.emit(changed)

    @property
    def read_only(self) -> bool:
        """True when the views must not offer writes."""
        return self.reader.read_only

    @property
    def location(self) -> str:
        """Where the memory is (store folder, Chroma URL or API URL)."""
        return self.reader.location

    @property
    def store_key(self) -> tuple[str, str]:
        """Which store this shows: its location and collection (a server holds several).
        Views keep what was chosen on a store (filters, a picked record) while the same store
        comes back (the reopen after an import) and drop it for another."""
        return self.location, ""


class ConnectionRelay(QObject):
    """Carries an attached reader's follower state to the GUI thread.

    :meth:`report` is handed to the reader before the session exists and may be called from
    the follower's thread; the signal is delivered queued on the GUI thread.

    Signals:
        changed(str): Empty when following works, else what is wrong.
    """

    changed = QtSignal(str)

    def report(self, state: str | None) -> None:
        """Any thread: the follower's state (None: following)."""
        self.changed.emit(state or "")


class AttachedSession(DataSession):
    """An agent's memory read through its introspection API: read-only, followed live.

    ``relay.changed`` says when following the agent's events fails or works again.
    """

    def __init__(self, reader: MemoryReader, runner: TaskRunner, relay: ConnectionRelay,
                 parent: QObject | None = None, *, reload_ms: int = 500) -> None:
        super().__init__(runner, parent)
        self.relay = relay
        relay.setParent(self)
        self._reader = reader
        self._follow(reader.event_feed, reload_ms=reload_ms)

    @property
    def reader(self) -> MemoryReader:
        """The remote reader."""
        return self._reader

    @property
    def read_only(self) -> bool:
        """Always True: the API has no write endpoint."""
        return True

    async def close(self) -> None:
        """Stop following and close the connections (on a worker)."""
        self._follow(None)
        await self.runner.run(self._reader.close)


class StoreSession(DataSession):
    """One open store: the engine, its indexing, serialized writes and the undo stack.

    A store opened with its view deferred reads it either at once (``start_indexing`` right
    after opening: an embedded store, whose view is then cached) or only when a feature that
    needs every record asks (:meth:`request_view`, issue 24: a Chroma server store). A read
    asked for on demand can be cancelled and asked for again; the store stays open and its
    records browsable meanwhile.

    Signals:
        busy_changed(bool): A write started or finished.
        indexing_started(): A read of the deferred view began (``view_wanted_by`` names the
            feature that asked for it, "" when it was read at open).
        indexing_progress(int, int): Records of the deferred view read so far, and the total.
        indexing_finished(bool): The deferred view is ready (True) or its read failed / was
            cancelled (False; ``indexing_error`` says why, ``indexing_cancelled`` tells which).
    """

    busy_changed = QtSignal(bool)
    indexing_started = QtSignal()
    indexing_progress = QtSignal(int, int)
    indexing_finished = QtSignal(bool)

    def __init__(self, engine: MemoryEngine, runner: TaskRunner, spec: StoreSpec, *,
                 banner: str = "", on_demand: bool = False,
                 parent: QObject | None = None) -> None:
        super().__init__(runner, parent)
        self.engine = engine
        self.spec = spec
        self.banner = banner
        self.on_demand = on_demand
        """True: a deferred view is read only when asked for (:meth:`request_view`), and a
        failed or cancelled read leaves the store open."""
        self.undo_stack = QUndoStack(self)
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy = 0
        self._reader = LocalReader(engine)
        # Set once waiting for the view is over: it is ready, an eager read failed (the store
        # is then closed), or the session ended. A cancelled read on demand leaves it clear:
        # whoever waits for the view gets it if it is asked for again.
        self._indexed = asyncio.Event()
        self._ready = engine.view_ready
        self._loading = False
        self._read_done = asyncio.Event()  # the current read ended (see read_view)
        self._cancel_indexing = CancelFlag()
        self.indexing_error = ""
        self.view_wanted_by = ""
        if self._ready:
            self._indexed.set()
        self._follow_background(engine)

    def _follow_background(self, engine: MemoryEngine) -> None:
        # The engine's own background writers change records no call of this session made:
        # the layer service writes derived social summaries and procedural patterns (when the
        # Layers view reads, or after ingests). Their events are the views' and the status
        # bar count's only news of it (a count left at 204 beside a table of 223 records).
        self._follow(engine.events, accept=_background_write)

    @property
    def reader(self) -> LocalReader:
        """A reader over the current engine (it is replaced after an out-of-process import)."""
        if self._reader.engine is not self.engine:
            self._reader = LocalReader(self.engine)
        return self._reader

    @property
    def read_only(self) -> bool:
        """True when the store refuses writes."""
        return self.engine.read_only

    @property
    def store_key(self) -> tuple[str, str]:
        """The store's location and collection (see :attr:`DataSession.store_key`)."""
        return self.spec.location, self.spec.collection

    # -- indexing (the deferred columnar view) ---------------------------------------------

    @property
    def indexing(self) -> bool:
        """True until the engine's view is ready (not read yet, being read, or its read
        failed or was cancelled)."""
        return not self._ready

    @property
    def view_loading(self) -> bool:
        """True while the deferred view is being read."""
        return self._loading

    def start_indexing(self) -> None:
        """Read the engine's deferred view on a worker (no-op when it is ready or being read).

        A read that failed or was cancelled starts again from the first record.
        """
        if self._ready or self._loading:
            return
        self._loading = True
        self._cancel_indexing = CancelFlag()
        self._read_done = asyncio.Event()
        self.indexing_error = ""
        progress = self.runner.progress_relay(self.indexing_progress.emit)
        self.indexing_started.emit()
        spawn(self._index(self.engine, self._cancel_indexing, self._read_done, progress))

    def request_view(self, feature: str) -> None:
        """``feature`` (its title: "Timeline", "Sorting by importance") needs every record in
        this process: read the view unless it is ready or already being read."""
        if self._ready or self._loading:
            return
        self.view_wanted_by = feature
        self.start_indexing()

    async def _index(self, engine: MemoryEngine, cancel: CancelFlag, done: asyncio.Event,
                     progress: Callable[[int, int], None]) -> None:
        try:
            await self.runner.run(engine.load_view, progress=progress, cancelled=cancel.is_set)
        except EngineError as exc:
            if engine is self.engine:
                self.indexing_error = str(exc)
        finally:
            done.set()
        if engine is not self.engine:
            return  # the engine was replaced (reopened) meanwhile; its own indexing reports
        self._loading = False
        self._ready = engine.view_ready
        if self._ready or not self.on_demand:
            self._indexed.set()  # an eager read that failed closes the store: waiting is over
        self.indexing_finished.emit(self._ready)

    def cancel_indexing(self) -> None:
        """Stop reading the view at the next page.

        A read at open ends with the store closed (the window says why); a read on demand
        leaves the store open and the view unread until it is asked for again.
        """
        self._cancel_indexing.set()

    def end_waiting(self) -> None:
        """The session is being closed: stop any read, and release every view waiting for
        it (their waits answer False)."""
        self._cancel_indexing.set()
        self._indexed.set()
        self._read_done.set()

    @property
    def indexing_cancelled(self) -> bool:
        """True once :meth:`cancel_indexing` was called for the current read."""
        return self._cancel_indexing.is_set()

    async def read_view(self, feature: str) -> bool:
        """Ask for the view for ``feature`` (a title, e.g. "Export") and wait for that read:
        True once the view is ready, False when the read failed or was cancelled (the person
        chose not to wait) or the session ended. What a command that needs every record
        awaits; a view that should follow a later read uses :meth:`wait_indexed`."""
        if self._ready:
            return True
        self.request_view(feature)
        await self._read_done.wait()
        return self._ready

    async def wait_indexed(self) -> bool:
        """Wait until the view is ready; False when it never will be (an eager read failed,
        or the session ended). This does not ask for the view (:meth:`request_view`), and a
        cancelled read on demand does not end the wait: a view waiting here shows what it
        waited for whenever the view is read."""
        await self._indexed.wait()
        return self._ready

    def server_answers(self, query: RecordQuery, *, shown: Masking | None = None
                       ) -> str | None:
        """None when Chroma can answer ``query`` before the view is read, else what needs it
        (``shown``: the masking of the view asking, while redaction is on)."""
        return self.engine.server_answers(query, shown=shown)

    def server_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """Blocking (run it on a worker): ``query``'s page filtered and paged by Chroma, its
        text masked by the engine when ``shown`` is given."""
        return self.engine.server_rows(query, shown=shown)

    def server_count(self, query: RecordQuery, *, shown: Masking | None = None) -> int:
        """Blocking (run it on a worker; seconds at 1M records): the exact number of records
        matching ``query``, for a :meth:`server_rows` page whose total was a lower bound."""
        return self.engine.server_count(query, shown=shown)

    def replace_engine(self, engine: MemoryEngine) -> None:
        """Use ``engine`` (the store reopened after an out-of-process import)."""
        self.engine = engine
        self._cancel_indexing = CancelFlag()
        self.indexing_error = ""
        self.view_wanted_by = ""
        self._loading = False
        self._ready = engine.view_ready
        if self._ready:
            self._indexed.set()
        else:
            self._indexed.clear()
        self._follow_background(engine)

    # -- writes ----------------------------------------------------------------------------

    async def run_write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a writing engine call on a worker, after the writes queued before it."""
        async with self._lock:
            self._busy += 1
            self.busy_changed.emit(True)
            try:
                return await self.runner.run(fn, *args, **kwargs)
            finally:
                self._busy -= 1
                self.busy_changed.emit(self._busy > 0)

    async def update(self, record_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
        """Edit one record (validated by the engine; content re-embedded on the worker).

        Raises:
            ValidationError: a bad value (nothing was written).
        """
        pairs: list[EditPair] = await self.run_write(
            _update_many, self.engine, [record_id], lambda _record: changes)
        self._push(f"Edit {', '.join(sorted(changes))}", pairs)
        after = pairs[0][1]
        assert after is not None
        return after

    async def add(self, new: NewMemory) -> MemoryRecord:
        """Add a memory."""
        record: MemoryRecord = await self.run_write(self.engine.add, new)
        self._push("Add memory", [(None, record)])
        return record

    async def delete(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """Delete records (undoable)."""
        deleted: list[MemoryRecord] = await self.run_write(self.engine.delete, list(record_ids))
        noun = "record" if len(deleted) == 1 else "records"
        self._push(f"Delete {len(deleted)} {noun}", [(r, None) for r in deleted])
        return deleted

    async def set_state(self, record_ids: Sequence[str], state: RecordState) -> list[EditPair]:
        """Pause, archive or resume records (issue 20 soft states; undoable as one step).

        Records already in ``state`` are left as they are and are not part of the step.

        Returns:
            The ``(before, after)`` pairs of the records that changed.
        """
        pairs: list[EditPair] = await self.run_write(_set_state, self.engine,
                                                     list(record_ids), state)
        verb = _STATE_VERBS[state]
        noun = "record" if len(pairs) == 1 else "records"
        self._push(f"{verb} {len(pairs)} {noun}", pairs)
        return pairs

    async def relayer(self, record_ids: Sequence[str], layer: Layer) -> None:
        """Move records to ``layer`` (undoable as one step)."""
        pairs = await self.run_write(_update_many, self.engine, list(record_ids),
                                  lambda _record: {"layer": layer})
        self._push(f"Move {len(pairs)} to {layer.value}", pairs)

    async def add_tags(self, record_ids: Sequence[str], tags: Sequence[str]) -> None:
        """Add ``tags`` to records (undoable as one step)."""
        pairs = await self.run_write(_update_many, self.engine, list(record_ids),
                                  lambda record: {"tags": [*record.tags, *tags]})
        self._push(f"Tag {len(pairs)} with {', '.join(tags)}", pairs)

    async def redact(self, record_ids: Sequence[str],
                     redactor: Callable[[str], str]) -> list[MemoryRecord]:
        """Redact records' content in place (issue 9 scan view; undoable as one step)."""
        pairs: list[EditPair] = await self.run_write(_redact_many, self.engine,
                                                     list(record_ids), redactor)
        noun = "record" if len(pairs) == 1 else "records"
        self._push(f"Redact {len(pairs)} {noun}", pairs)
        return [after for _before, after in pairs if after is not None]

    def _push(self, text: str, pairs: Sequence[EditPair]) -> None:
        if pairs:
            self.undo_stack.push(RecordsCommand(self, text, pairs))
        self.records_changed.emit([record.id for before, after in pairs
                                   for record in (after or before,) if record is not None])

    # -- undo / redo -----------------------------------------------------------------------

    def schedule_apply(self, restore: Sequence[MemoryRecord], delete: Sequence[str],
                       what: str) -> None:
        """Write ``restore`` back and delete ``delete`` on a worker, after earlier writes."""
        restore, delete = list(restore), list(delete)
        # the engine when the write runs (an out-of-process import may have replaced it)
        self.schedule_write(lambda: _apply(self.engine, restore, delete),
                            [r.id for r in restore] + delete, what)

    def schedule_write(self, write: Callable[[], T], changed: Sequence[str], what: str,
                       done: Callable[[T], None] | None = None) -> None:
        """Run ``write`` on a worker after earlier writes (an undo or redo), then announce
        ``changed`` records and hand its result to ``done``; a failure is reported through
        ``failed`` as "``what`` failed: …"."""
        task = asyncio.ensure_future(self._write(write, list(changed), what, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, write: Callable[[], T], changed: list[str], what: str,
                     done: Callable[[T], None] | None) -> None:
        try:
            result = await self.run_write(write)
        except EngineError as exc:
            self.failed.emit(f"{what} failed: {exc}")
            return
        self.records_changed.emit(changed)
        if done is not None:
            done(result)

    async def drain(self) -> None:
        """Wait for scheduled undo/redo writes (before closing the store)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def pending(self) -> int:
        """Undo/redo writes still running."""
        return len(self._tasks)


BACKGROUND_SOURCES = frozenset({"layers"})
"""Event sources of writes the engine makes by itself (not through a session call): the layer
service's derived records (``engine.layers``)."""


def _background_write(event: Event) -> bool:
    """Any thread: ``event`` reports a record written or deleted by a background writer."""
    return event.source in BACKGROUND_SOURCES and bool(event.record_id)


_STATE_VERBS = {RecordState.PAUSED: "Pause", RecordState.ARCHIVED: "Archive",
                RecordState.ACTIVE: "Resume"}


def _set_state(engine: MemoryEngine, record_ids: list[str],
               state: RecordState) -> list[EditPair]:
    """Worker: the engine's pause / archive / resume, with the pairs that changed (for undo)."""
    before = {r.id: r for r in engine.get_many(record_ids)}
    change = {RecordState.PAUSED: engine.pause, RecordState.ARCHIVED: engine.archive,
              RecordState.ACTIVE: engine.resume}[state]
    return [(before[after.id], after) for after in change(record_ids)
            if before[after.id].state is not after.state]


def _redact_many(engine: MemoryEngine, record_ids: list[str],
                 redactor: Callable[[str], str]) -> list[EditPair]:
    """Worker: ``engine.set_redacted`` for each id, with the before/after pairs for undo."""
    pairs: list[EditPair] = []
    for record_id in record_ids:
        before = engine.get(record_id)
        pairs.append((before, engine.set_redacted(record_id, redactor)))
    return pairs
