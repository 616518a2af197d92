"""The application controller: the session, the stores, attach, imports and the LLM gateway.

The window (``ui/main_window.py``) keeps the menus, the banner and the status bar; what is open
and how it opens, closes and changes lives here (issue 20). The window is handed this object
typed as :class:`ui.session_views.AppControl` (``ui`` may not import ``app``) and reacts to
its signals:

* ``session_changed(object)`` — the session shown: a :class:`~ui.shared.session.StoreSession`, an
  :class:`~ui.shared.session.AttachedSession`, or None. Emitted after the views were given it.
* ``store_state_changed(str)`` — what the status bar says about the store ("Opening …",
  "Importing into …", "embedded: /path", "No store").
* ``count_changed(int)`` / ``review_count_changed(int)`` — records in the store shown and review
  items pending, recounted after every write, undo, import, attach and detach (-1: unknown).
* ``busy(str)`` — long work started (open, import, attach; "" when it ended).
* ``error(str)`` — something failed; the message says what and what to do.
* ``notice(str)`` — something the person should know that is not a failure (opening cancelled).
* ``gateway_changed(object, object, str)`` — the LLM gateway was rebuilt (or dropped: None),
  the engine it records on, and why it is not usable ("" when it is).

**Policies.** A store locked by another process opens read-only, and says so
(:attr:`StoreSession.banner`). Opening anything closes what is shown first. Attaching to an
agent remembers the store it closed; detaching reopens it. An import into an embedded store
closes the engine (releasing the lock), runs in a child process (:mod:`app.import_process`) and
reopens the store; while it runs, every registered view has let go of the session.

**Views.** :attr:`views` is the one registry of session-aware views
(:class:`~ui.session_views.SessionViews`): the window registers each view once; the controller
gives them the session (Records first, the rest after its first page or once indexed) and
takes it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine import MemoryEngine, SalienceCut, StoreSpec
from engine.errors import EngineError, StoreLocked
from engine.llm import LLMGateway, LLMSettings
from ui.imports.foreign_dialogs import foreign_banner
from ui.imports.importing import ImportSummary, import_conversation, import_jsonl
from ui.main_window import WindowServices
from ui.session_views import EngineService, SessionViews
from ui.shared.session import AttachedSession, ConnectionRelay, StoreSession
from ui.shared.tasks import RequestTokens, spawn

__all__ = ["AppController", "store_text"]


def _freeze_long_lived_objects() -> None:
    """Move every object alive now out of the cyclic GC's reach (``gc.freeze``).

    A full collection over the objects of Chroma, the engine and the widgets took ~180 ms on the
    GUI thread (measured), and the cyclic GC runs on whichever thread allocates; frozen objects
    are never traversed again. Objects created later are collected as usual. No collection
    first: it would itself be the stall this avoids.
    """
    gc.freeze()


@contextlib.contextmanager
def _cyclic_collection_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block (an engine opening: thousands of new,
    long-lived objects), then freeze them all (:func:`_freeze_long_lived_objects`).

    A full collection triggered while the engine's view is built traversed the whole young heap
    on whichever thread allocated — 36-85 ms of one thread's CPU holding the GIL, measured on a
    worker during the reopen after a 10K import (and the GUI thread when it allocated first):
    the GUI thread stalled for as long. The objects made there live as long as the engine.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        _freeze_long_lived_objects()


def store_text(session: StoreSession) -> str:
    """The status bar's words for an open store: kind, location, collection, read-only."""
    spec = session.spec
    kind = "server" if spec.is_remote else "embedded"
    suffix = " · read-only" if session.read_only else ""
    name = spec.location if spec.collection == "mnemoscope_memories" \
        else f"{spec.location} [{spec.collection}]"
    return f"{kind}: {name}{suffix}"


def _locked_note(exc: StoreLocked) -> str:
    """The banner when another process holds the store: it is open read-only already, so the
    engine's advice to a command line ("… open this store read-only …") would confuse here."""
    who = f"PID {exc.holder_pid}" if exc.holder_pid else "Another process"
    where = f" ({exc.holder_info})" if exc.holder_info else ""
    return (f"Opened read-only: {who}{where} has this store open. To edit it here, close it "
            "there and open it again, or use a Chroma server for several processes.")


class AppController(QObject):
    """Owns what the app has open and the rules for opening, closing and importing.

    Signals:
        session_changed(object): The session shown (StoreSession, AttachedSession or None).
        store_state_changed(str): The status bar's words about the store.
        count_changed(int): Records in the store shown (-1: the count failed; see ``error``).
        review_count_changed(int): Review items pending (0 without a store).
        busy(str): Long work started ("" when it ended).
        error(str): Something failed; the message is for the person.
        notice(str): News that is not a failure (e.g. opening was cancelled).
        gateway_changed(object, object, str): The LLM gateway (or None), the engine whose
            ledger it records on (or None), and why it is not usable ("" when it is).
    """

    session_changed = Signal(object)
    store_state_changed = Signal(str)
    count_changed = Signal(int)
    review_count_changed = Signal(int)
    busy = Signal(str)
    error = Signal(str)
    notice = Signal(str)
    gateway_changed = Signal(object, object, str)

    def __init__(self, services: WindowServices, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._runner = services.runner
        self._views = SessionViews()
        self._session: StoreSession | None = None
        self._attached: AttachedSession | None = None
        self._before_attach: StoreSpec | None = None
        self._waiting_first_page: StoreSession | None = None
        self._count = 0
        self._review_count = 0
        # counts run on workers and may finish out of order: only the latest one is shown
        self._count_tokens = RequestTokens()
        self._review_tokens = RequestTokens()
        self._gateway: LLMGateway | None = None
        # Gateway rebuilds run one at a time; each builds on the engine last asked for, so a
        # rebuild still in flight when the store closes finishes before its ledger does.
        self._gateway_lock = asyncio.Lock()
        self._gateway_engine: MemoryEngine | None = None
        self._llm_settings = services.llm.settings if services.llm is not None \
            else LLMSettings()
        self._engine_services: list[EngineService] = []

    # -- state -----------------------------------------------------------------------------

    @property
    def views(self) -> SessionViews:
        """The registry of session-aware views."""
        return self._views

    @property
    def session(self) -> StoreSession | None:
        """The open store."""
        return self._session

    @property
    def attached(self) -> AttachedSession | None:
        """The agent attached to."""
        return self._attached

    @property
    def count(self) -> int:
        """Records in the store shown, as last counted."""
        return self._count

    @property
    def review_count(self) -> int:
        """Review items pending, as last counted."""
        return self._review_count

    @property
    def gateway(self) -> LLMGateway | None:
        """The running LLM gateway (None without a store or provider services)."""
        return self._gateway

    @property
    def llm_settings(self) -> LLMSettings:
        """The LLM provider settings in effect."""
        return self._llm_settings

    # -- stores ----------------------------------------------------------------------------

    async def open_store(self, spec: StoreSpec) -> StoreSession | None:
        """Open ``spec`` on a worker and show it; a locked store opens read-only.

        Returns:
            The session, or None when the store could not be opened (``error`` says why) or
            was closed while it opened (indexing cancelled or failed).
        """
        self.store_state_changed.emit(f"Opening {spec.location}…")
        self.busy.emit(f"Opening {spec.location}…")
        self._before_attach = None  # a store chosen now is what a later detach returns to
        await self.close_store()
        try:
            return await self._open(spec)
        finally:
            self.busy.emit("")

    async def _open(self, spec: StoreSpec) -> StoreSession | None:
        notes: list[str] = []
        try:
            with _cyclic_collection_paused():  # the engine's view: many long-lived objects
                try:
                    engine = await self._runner.run(self._services.open_engine, spec)
                except StoreLocked as exc:
                    spec = dataclasses.replace(spec, read_only=True)
                    engine = await self._runner.run(self._services.open_engine, spec)
                    notes.append(_locked_note(exc))
        except EngineError as exc:
            self.store_state_changed.emit("No store")
            self.session_changed.emit(None)
            self.error.emit(f"Could not open {spec.location}: {exc}")
            return None
        foreign = engine.store.foreign_info
        if foreign is not None:  # the banner names the layout and the next step
            notes.append(foreign_banner(foreign, spec.collection))
        elif spec.read_only and not notes:
            notes.append("Opened read-only, as asked.")
        # issue 24: a server store reads its full view only when a feature needs it (the
        # records table pages, filters and searches on the server meanwhile); an embedded
        # store reads it at once, and caches it for the next open.
        session = StoreSession(engine, self._runner, spec, banner=" ".join(notes),
                               on_demand=spec.is_remote, parent=self)
        self._session = session
        session.records_changed.connect(self._on_records_changed)
        session.busy_changed.connect(self._on_busy_changed)
        session.indexing_finished.connect(self._on_indexing_finished)
        self._show(session)
        self.store_state_changed.emit(store_text(session))
        self.session_changed.emit(session)
        await self._set_gateway(session.engine)
        if session is self._session:
            await self._run_engine_services(session.engine)
        if session is self._session:
            await self.refresh_counts()
        if session is not self._session:
            return None  # closed meanwhile (indexing cancelled or failed; ``error`` says)
        _freeze_long_lived_objects()
        return session

    def _show(self, session: StoreSession) -> None:
        """Records at once (a preview while indexing); the other views after its first page
        (their loads would compete with it for the workers and the GIL), or once indexed."""
        self._waiting_first_page = None if session.indexing else session
        self._views.show_first(session)
        if session.indexing and not session.on_demand:
            session.start_indexing()

    def first_page_shown(self) -> None:
        """The Records table's first page arrived (or failed): give the others the store."""
        session, self._waiting_first_page = self._waiting_first_page, None
        if session is not None and session is self._session and not session.indexing:
            self._views.show_rest(session)

    def need_full_view(self, feature: str) -> None:
        """``feature`` (its title, e.g. "Timeline") was opened and needs every record in this
        process: read the open store's deferred view unless it is ready or being read."""
        session = self._session
        if session is not None and session.indexing:
            session.request_view(feature)

    def _on_indexing_finished(self, ready: bool) -> None:
        session = self._session
        if session is None or self.sender() is not session:
            return  # a store closed meanwhile (no lambda holding the session: it would leak)
        if ready:
            self._views.show_rest(session)
            self.session_changed.emit(session)  # editing and exports are possible now
            spawn(self.refresh_counts())
            _freeze_long_lived_objects()
            return
        if not session.on_demand:
            spawn(self._abandon(session))
            return
        # A read asked for on demand: the store stays open and browsable; it can be asked
        # for again (the waiting views offer it).
        if not session.indexing_cancelled:
            self.error.emit(f"Could not read every record of {session.spec.location}: "
                            f"{session.indexing_error}. Records still browses the store.")
        self.session_changed.emit(session)

    async def _abandon(self, session: StoreSession) -> None:
        """Close a store whose indexing failed or was cancelled, and say so."""
        location = session.spec.location
        cancelled = session.indexing_cancelled
        error = session.indexing_error
        await self.close_store()
        if cancelled:
            self.notice.emit(f"Opening {location} was cancelled before its records were "
                             "indexed.")
        else:
            self.error.emit(f"Could not index {location}: {error}")

    async def close_store(self) -> None:
        """Close what is shown: the store (after its pending writes) or the attached agent."""
        await self._close_attached()
        session = self._session
        if session is None:
            return
        self._session = None
        self._waiting_first_page = None
        session.end_waiting()
        self._views.show_all(None)
        await self._set_gateway(None)
        await self._run_engine_services(None)  # they may write: stopped before the close
        await session.drain()
        await self._runner.run(session.engine.close)
        session.deleteLater()
        self._set_counts(0, 0)
        self.store_state_changed.emit("No store")
        self.session_changed.emit(None)

    # -- attaching to a running agent (issue 10) -------------------------------------------

    async def attach(self, url: str, token: str, *,
                     still_wanted: Callable[[], bool] | None = None) -> AttachedSession | None:
        """Connect to ``url`` on a worker and show the agent read-only (closing what is open).

        The store shown before is remembered: :meth:`detach` reopens it.

        Args:
            still_wanted: Asked once connected; False (the person cancelled meanwhile) drops
                the connection and leaves what is open as it was.

        Returns:
            The session, or None when attaching failed (``error`` says why) or was cancelled.
        """
        attach = self._services.attach
        if attach is None:
            return None
        relay = ConnectionRelay()
        self.busy.emit(f"Attaching to {url}…")
        try:
            reader = await self._runner.run(attach, url, token, relay.report)
        except EngineError as exc:
            relay.deleteLater()
            self.error.emit(str(exc))
            return None
        finally:
            self.busy.emit("")
        if still_wanted is not None and not still_wanted():
            relay.deleteLater()
            await self._runner.run(reader.close)
            return None
        previous = self._session.spec if self._session is not None else self._before_attach
        await self.close_store()
        self._before_attach = previous
        session = AttachedSession(reader, self._runner, relay, self)
        self._attached = session
        session.records_changed.connect(self._on_records_changed)
        self._views.show_all(session)
        await self._set_gateway(None)
        self.store_state_changed.emit(f"attached: {reader.location} · read-only")
        self.session_changed.emit(session)
        await self.refresh_counts()
        return session

    async def detach(self) -> None:
        """Stop showing the attached agent, then reopen the store shown before attaching."""
        if self._attached is None:
            return
        previous, self._before_attach = self._before_attach, None
        await self._close_attached()
        if previous is not None:
            await self.open_store(previous)
        else:
            self._set_counts(0, 0)
            self.store_state_changed.emit("No store")
            self.session_changed.emit(None)

    async def _close_attached(self) -> None:
        session = self._attached
        if session is None:
            return
        self._attached = None
        self._views.show_all(None)
        await session.close()
        session.deleteLater()

    # -- imports ---------------------------------------------------------------------------

    async def run_import(self, path: Path, *, conversation_agent: str | None,
                         progress: Callable[[int, int], None],
                         cancelled: Callable[[], bool],
                         keep: SalienceCut | None = None) -> ImportSummary:
        """Import ``path`` (JSONL, or a conversation for ``conversation_agent`` with the
        salience cut ``keep``, the engine's default when None) into the store.

        An embedded store is imported out of process (see the module docstring); a server
        store through the session's serialized writes.

        Raises:
            EngineError: no writable store is open, or the import failed (what it wrote is in
                the store: its own cancel undoes a partial run).
        """
        session = self._session
        if session is None or session.read_only:
            raise EngineError("Open a writable store to import into.")
        if self._services.bulk_import is not None and not session.spec.is_remote:
            return await self._import_out_of_process(session, path, conversation_agent,
                                                     progress, cancelled, keep)
        if conversation_agent is not None:
            summary: ImportSummary = await session.run_write(
                import_conversation, session.engine, path, agent_id=conversation_agent,
                keep=keep, progress=progress, cancelled=cancelled)
        else:
            summary = await session.run_write(import_jsonl, session.engine, path,
                                              progress=progress, cancelled=cancelled)
        session.records_changed.emit([o.record_id for o in summary.outcomes if o.record_id])
        return summary

    async def _import_out_of_process(self, session: StoreSession, path: Path,
                                     conversation_agent: str | None,
                                     progress: Callable[[int, int], None],
                                     cancelled: Callable[[], bool],
                                     keep: SalienceCut | None) -> ImportSummary:
        """Close the engine, import in a child process, reopen (see :mod:`app.import_process`)."""
        bulk_import = self._services.bulk_import
        assert bulk_import is not None
        self.busy.emit(f"Importing {path.name}…")
        await self._views.release()
        await self._set_gateway(None)  # the gateway writes to the ledger being closed
        await self._run_engine_services(None)  # so does the lifecycle scheduler
        self.store_state_changed.emit(f"Importing into {session.spec.location}…")
        await session.drain()
        await self._runner.run(session.engine.close)
        _freeze_long_lived_objects()  # what the window made so far stays out of collections
        failure: EngineError | None = None
        summary: ImportSummary | None = None
        try:
            # While the child writes, this process only relays progress: no automatic full
            # collection over the window's heap in the meantime (a 45 ms gap on the GUI thread
            # in CI), nor while the reopened engine builds its view.
            with _cyclic_collection_paused():
                try:
                    summary = await self._runner.run(bulk_import, session.spec, path,
                                                     conversation_agent, progress, cancelled,
                                                     keep=keep)
                except EngineError as exc:
                    failure = exc
                reopened = await self._runner.run(self._services.open_engine, session.spec)
            session.replace_engine(reopened)
        except EngineError as exc:
            self._session = None
            session.deleteLater()
            self._set_counts(0, 0)
            self.store_state_changed.emit("No store")
            self.session_changed.emit(None)
            self.busy.emit("")
            message = f"Could not reopen {session.spec.location} after the import: {exc}"
            self.error.emit(message)
            raise EngineError(message) from exc
        self._show(session)
        self.store_state_changed.emit(store_text(session))
        self.session_changed.emit(session)
        await self._set_gateway(session.engine)  # on the reopened engine's ledger
        await self._run_engine_services(session.engine)
        self.busy.emit("")
        _freeze_long_lived_objects()
        if failure is not None:
            spawn(self.refresh_counts())
            raise failure
        assert summary is not None
        session.records_changed.emit([o.record_id for o in summary.outcomes if o.record_id])
        return summary

    # -- counts ----------------------------------------------------------------------------

    def _set_counts(self, records: int, review: int) -> None:
        self._count_tokens.next_token()
        self._review_tokens.next_token()
        self._count = records
        self._review_count = review
        self.count_changed.emit(records)
        self.review_count_changed.emit(review)

    async def refresh_counts(self) -> None:
        """Count the records and the pending review items again (on workers)."""
        session: StoreSession | AttachedSession | None = self._session or self._attached
        if session is None:
            self._set_counts(0, 0)
            return
        token = self._count_tokens.next_token()
        try:
            count = await self._runner.run(session.reader.count)
        except EngineError as exc:
            if self._count_tokens.is_current(token):
                self._count = -1
                self.count_changed.emit(-1)
                self.error.emit(f"Could not count the records: {exc}")
            return
        if not self._count_tokens.is_current(token):
            return
        self._count = count
        self.count_changed.emit(count)
        if isinstance(session, StoreSession):
            if session.indexing:  # the queue is counted once the store is indexed
                spawn(self._refresh_review_count(session))
            else:
                await self._refresh_review_count(session)
        else:
            self._review_tokens.next_token()
            self._review_count = 0
            self.review_count_changed.emit(0)

    async def _refresh_review_count(self, session: StoreSession) -> None:
        if not await session.wait_indexed() or session is not self._session:
            return
        token = self._review_tokens.next_token()
        try:
            pending = await self._runner.run(session.engine.pending_review_count)
        except EngineError:
            return  # the Review view says why when opened; the count keeps its last value
        if self._review_tokens.is_current(token) and session is self._session:
            self._review_count = pending
            self.review_count_changed.emit(pending)

    def _on_records_changed(self, _ids: list[str]) -> None:
        spawn(self.refresh_counts())

    def _on_busy_changed(self, busy: bool) -> None:
        # every write goes through StoreSession.run_write: ingest, review decisions, undo and
        # redo, imports. Writes that change no record (a deferral) still change the queue.
        session = self._session
        if not busy and session is not None and self.sender() is session:
            spawn(self._refresh_review_count(session))

    # -- the LLM gateway (issue 9) ---------------------------------------------------------

    def add_engine_service(self, service: EngineService) -> None:
        """Run ``service(engine)`` whenever a store's engine comes up (open, reopen after an
        import) and ``service(None)`` before it closes: a service that writes (the lifecycle
        scheduler) is stopped before the engine it writes to goes away."""
        self._engine_services.append(service)

    async def _run_engine_services(self, engine: MemoryEngine | None) -> None:
        for service in self._engine_services:
            await service(engine)

    async def _set_gateway(self, engine: MemoryEngine | None) -> None:
        """Build (worker) the LLM gateway on ``engine``'s ledger, dropping the old one.

        Calls are serialised; one superseded by a later call while it waited does nothing.
        """
        self._gateway_engine = engine
        async with self._gateway_lock:
            if engine is not self._gateway_engine:
                return  # a later call asked for another engine (or none): it builds
            old, self._gateway = self._gateway, None
            if old is not None:
                await self._runner.run(old.close)
            llm = self._services.llm
            if engine is None or llm is None:
                self.gateway_changed.emit(None, None, "")
                return
            try:
                gateway = await self._runner.run(llm.make_gateway, engine, self._llm_settings)
            except EngineError as exc:
                self.gateway_changed.emit(None, None, f"LLM provider not usable: {exc}")
                return
            self._gateway = gateway
            self.gateway_changed.emit(gateway, engine, llm.problem)

    @property
    def gateway_engine(self) -> MemoryEngine | None:
        """The engine whose ledger the gateway records on (None while importing)."""
        return self._gateway_engine

    async def apply_llm_settings(self, settings: LLMSettings) -> bool:
        """Persist ``settings`` (worker, atomic) and rebuild the running gateway with them.

        Returns:
            False when the settings file could not be written (the settings still apply to
            this session; ``error`` says so).
        """
        llm = self._services.llm
        if llm is None:
            return False
        self._llm_settings = settings
        saved = True
        try:
            await self._runner.run(llm.save, settings)
        except (OSError, EngineError) as exc:
            saved = False
            self.error.emit(f"LLM settings apply to this session but were not saved: {exc}")
        await self._set_gateway(self._gateway_engine)  # the current one (none while importing)
        return saved
