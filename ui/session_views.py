"""The one registry of the views that show a session, and the controller's interface.

Every view that reads the open store or the attached agent is registered here once, with what it
needs: a *reader* view (records, timeline, layers) shows any
:class:`~ui.shared.session.DataSession`,
a *store* view (pipeline, review, retrieval, map, secrets, fate) runs the engine itself and is
given only a :class:`~ui.shared.session.StoreSession` (None while attached). The application
controller
(``app/controller.py``) owns the registry and hands sessions to it; before issue 20 the window
kept two hand-written lists of these views that had drifted apart (an import let go of five of
them and left the Fate and Secrets views holding the engine it closed).

:class:`AppControl` is what the window knows of the controller: ``ui`` may not import ``app``
(import-linter's layers contract), so the controller is injected and typed by this protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import SignalInstance

from engine import MemoryEngine, SalienceCut, StoreSpec
from engine.llm import LLMGateway, LLMSettings
from ui.imports.importing import ImportSummary
from ui.shared.session import AttachedSession, DataSession, StoreSession

EngineService = Callable[[MemoryEngine | None], Awaitable[None]]
"""Started on a writable store's engine, stopped (called with None) before it closes."""

__all__ = ["AppControl", "ReaderView", "SessionViews", "StoreView"]


class ReaderView(Protocol):
    """A view that shows any session (a store or an attached agent)."""

    def set_session(self, session: DataSession | None) -> None:
        """Show ``session`` (None: nothing open)."""


class StoreView(Protocol):
    """A view that runs the engine itself: only an open store."""

    def set_session(self, session: StoreSession | None) -> None:
        """Show ``session`` (None: nothing open, or an attached agent)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    show: Callable[[DataSession | None], None]
    store_only: bool


class SessionViews:
    """The views that receive the session, in navigation order, each registered once.

    The first reader view registered (Records) gets a store at once; the others are given it
    by :meth:`show_rest` once the first page is in (their loads would compete with it for the
    workers and the GIL) or the store is indexed.
    """

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._store_only: set[str] = set()

    def add_reader_view(self, name: str, view: ReaderView) -> None:
        """Register ``view``: it shows stores and attached agents alike."""
        self._entries.append(_Entry(name, view.set_session, False))

    def add_store_view(self, name: str, view: StoreView | None) -> None:
        """Register ``view`` (None: a view that follows the store otherwise, e.g. Budget
        through the gateway): it is given a store only, and is off while attached."""
        self._store_only.add(name)
        if view is None:
            return
        set_store = view.set_session

        def show(session: DataSession | None) -> None:
            set_store(session if isinstance(session, StoreSession) else None)

        self._entries.append(_Entry(name, show, True))

    @property
    def names(self) -> tuple[str, ...]:
        """Registered views with a session to show, in registration order."""
        return tuple(entry.name for entry in self._entries)

    @property
    def store_only(self) -> frozenset[str]:
        """Views that need an open store: off (greyed in the navigation) while attached."""
        return frozenset(self._store_only)

    def show_first(self, session: DataSession | None) -> None:
        """Give ``session`` to the first view (Records)."""
        if self._entries:
            self._entries[0].show(session)

    def show_rest(self, session: DataSession | None) -> None:
        """Give ``session`` to every view but the first."""
        for entry in self._entries[1:]:
            entry.show(session)

    def show_all(self, session: DataSession | None) -> None:
        """Give ``session`` to every view at once."""
        for entry in self._entries:
            entry.show(session)

    async def release(self) -> None:
        """Let every view go of its session, one per turn of the event loop.

        Together they took 40-180 ms of GUI-thread CPU in one tick
        (tests/ui/test_event_loop_stalls.py); one at a time, the loop stays responsive.
        """
        for entry in self._entries:
            entry.show(None)
            await asyncio.sleep(0)


class AppControl(Protocol):
    """What the window asks of the application controller (``app.controller.AppController``).

    The window keeps the menus, the banner and the status bar; it reacts to these signals
    (documented on the controller) and calls these methods from its menu actions.
    """

    @property
    def session_changed(self) -> SignalInstance:
        """``session_changed(object)``: the session shown changed (a session, or None)."""

    @property
    def store_state_changed(self) -> SignalInstance:
        """``store_state_changed(str)``: what the status bar says about the store."""

    @property
    def count_changed(self) -> SignalInstance:
        """``count_changed(int)``: records in the store shown (-1: unknown, with an error)."""

    @property
    def review_count_changed(self) -> SignalInstance:
        """``review_count_changed(int)``: items pending in the review queue."""

    @property
    def busy(self) -> SignalInstance:
        """``busy(str)``: long work started ("" when it ended)."""

    @property
    def error(self) -> SignalInstance:
        """``error(str)``: something failed; the message says what and what to do."""

    @property
    def notice(self) -> SignalInstance:
        """``notice(str)``: news that is not a failure (opening was cancelled)."""

    @property
    def gateway_changed(self) -> SignalInstance:
        """``gateway_changed(object, object, str)``: the gateway, its engine, its problem."""

    @property
    def views(self) -> SessionViews:
        """The registry of session-aware views (the window registers its views here)."""

    @property
    def session(self) -> StoreSession | None:
        """The open store."""

    @property
    def attached(self) -> AttachedSession | None:
        """The agent attached to."""

    @property
    def count(self) -> int:
        """Records in the store shown, as last counted."""

    @property
    def gateway(self) -> LLMGateway | None:
        """The running LLM gateway."""

    @property
    def llm_settings(self) -> LLMSettings:
        """The LLM provider settings in effect."""

    def first_page_shown(self) -> None:
        """The Records table's first page arrived: the other views may load."""

    def need_full_view(self, feature: str) -> None:
        """``feature`` (a title) was opened and needs every record in this process: read the
        open store's deferred view now (issue 24; no-op when it is ready or being read)."""

    async def open_store(self, spec: StoreSpec) -> StoreSession | None:
        """Open ``spec`` (closing what is shown)."""

    async def close_store(self) -> None:
        """Close what is shown (the store, or the attached agent)."""

    async def attach(self, url: str, token: str, *,
                     still_wanted: Callable[[], bool] | None = None) -> AttachedSession | None:
        """Attach to an agent's ``serve`` API."""

    async def detach(self) -> None:
        """Detach, and reopen the store shown before attaching."""

    async def run_import(self, path: Path, *, conversation_agent: str | None,
                         progress: Callable[[int, int], None],
                         cancelled: Callable[[], bool],
                         keep: SalienceCut | None = None) -> ImportSummary:
        """Import ``path`` into the open store (a conversation with the salience cut ``keep``)."""

    def add_engine_service(self, service: EngineService) -> None:
        """Run ``service(engine)`` whenever a writable store's engine comes up, and
        ``service(None)`` before it closes (the lifecycle scheduler: it writes)."""

    async def refresh_counts(self) -> None:
        """Count the records and the review queue again."""

    async def apply_llm_settings(self, settings: LLMSettings) -> bool:
        """Save ``settings`` and rebuild the gateway with them."""
