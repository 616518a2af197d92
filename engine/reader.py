"""What the browsing views read, from a local engine or from an attached introspection API.

The desktop app shows the records, the live timeline and the layer views of either a store it
opened itself or an agent it *attached* to over ``mnemoscope serve`` (docs/api.md). Both answer
the same :class:`MemoryReader` protocol with the same frozen types, so each view is written once:

* :class:`LocalReader` — over a :class:`~engine.memory_engine.MemoryEngine` (this module);
* :class:`~engine.introspection.remote.RemoteReader` — over the API's client (read-only).

Every method blocks (Chroma, the ledger or the network): the GUI calls them on worker threads
through its task runner. :attr:`MemoryReader.event_feed` delivers new events to subscribers on
the thread that produced them (the engine's emitting thread, or the remote follower's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from engine.browse import Facets, RecordDetail, facets, record_detail
from engine.errors import RecordNotFound
from engine.events import Event, EventFilter
from engine.query import RecordPage, RecordQuery, RowPage

if TYPE_CHECKING:
    from engine.exits import Masking
    from engine.layers import LayerService, PatternDetail, SocialSummary, SpatialHit
    from engine.memory_engine import MemoryEngine
    from engine.records import MemoryRecord

__all__ = ["EventFeed", "LocalReader", "MemoryReader"]


class EventFeed(Protocol):
    """Something that calls subscribers with each new event (an ``EventBus``, a follower)."""

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every new event; returns the unsubscribe function."""
        ...


class MemoryReader(Protocol):
    """Read access to one agent memory, local or remote (see the module docstring)."""

    @property
    def location(self) -> str:
        """Where the memory is: a store folder, a Chroma URL, or the API's URL."""
        ...

    @property
    def read_only(self) -> bool:
        """True when nothing may be written through this reader's session."""
        ...

    @property
    def event_feed(self) -> EventFeed:
        """New events, as they happen."""
        ...

    def count(self) -> int:
        """Live records."""
        ...

    def list_records(self, query: RecordQuery) -> RecordPage:
        """One page of the records matching ``query`` (filtered and sorted by the engine)."""
        ...

    def list_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """The same page as table rows (what the records browser shows).

        ``shown``: the view's masking while redaction is on; the text, agent and tag filters
        then match the masked text (:attr:`engine.exits.ExitPolicy.shown`). An attached API
        filters with its own server's policy instead.
        """
        ...

    def facets(self) -> Facets:
        """Agents (with counts) and, where known, tags and sources for the filter choices."""
        ...

    def record_detail(self, record_id: str) -> RecordDetail:
        """One record with its links, events and edits. Raises ``RecordNotFound``."""
        ...

    def get_records(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records of ``record_ids`` that exist, in the order asked."""
        ...

    def recent_events(self, limit: int) -> list[Event]:
        """The newest ``limit`` events (or fewer), oldest first."""
        ...

    def social_summaries(self) -> list[SocialSummary]:
        """One summary per (agent, counterpart), with its sentiment series."""
        ...

    def pattern_details(self) -> list[PatternDetail]:
        """Mined procedural patterns with their history and supporting episodes."""
        ...

    def spatial_points(self, *, since: float | None = None,
                       until: float | None = None) -> list[SpatialHit]:
        """Every record with a position (created within ``since..until``, epoch ms)."""
        ...

    def spatial_within(self, center: Sequence[float], radius: float, *,
                       since: float | None = None, until: float | None = None
                       ) -> list[SpatialHit]:
        """Points within ``radius`` of ``center`` (3-D), nearest first."""
        ...

    def close(self) -> None:
        """Release what the reader holds (connections, threads); the engine is not closed."""
        ...


class LocalReader:
    """:class:`MemoryReader` over an engine this process opened.

    The layer reads let the engine's layer service process the changes it has queued (on a
    writable store that writes the derived summary and pattern records, as it would in the
    background; see docs/layers.md).
    """

    def __init__(self, engine: MemoryEngine) -> None:
        self._engine = engine

    @property
    def engine(self) -> MemoryEngine:
        """The engine read from."""
        return self._engine

    @property
    def location(self) -> str:
        """The store's location."""
        return self._engine.store.location

    @property
    def read_only(self) -> bool:
        """True when the engine refuses writes."""
        return self._engine.read_only

    @property
    def event_feed(self) -> EventFeed:
        """The engine's event bus."""
        return self._engine.events

    def count(self) -> int:
        """Live records."""
        return self._engine.count()

    def list_records(self, query: RecordQuery) -> RecordPage:
        """One page of records (numpy over the columnar view)."""
        return self._engine.list_records(query)

    def list_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """One page of table rows straight from the columnar view (no Chroma read)."""
        return self._engine.list_rows(query, shown=shown)

    def facets(self) -> Facets:
        """Agents, tags and sources with counts."""
        return facets(self._engine)

    def record_detail(self, record_id: str) -> RecordDetail:
        """The record with links, events and edit history."""
        return record_detail(self._engine, record_id)

    def get_records(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records of ``record_ids`` that exist, in the order asked."""
        view = self._engine.store.view
        present = list(dict.fromkeys(i for i in record_ids if i in view))
        try:
            return self._engine.get_many(present) if present else []
        except RecordNotFound:  # deleted since the check: take the survivors one by one
            found = []
            for record_id in present:
                try:
                    found.append(self._engine.get(record_id))
                except RecordNotFound:
                    continue
            return found

    def recent_events(self, limit: int) -> list[Event]:
        """The newest ``limit`` events from the ledger, oldest first."""
        events = self._engine.events.query(EventFilter(limit=limit, newest_first=True))
        events.reverse()
        return events

    def _layers(self) -> LayerService:
        """The layer service, with the changes it has queued processed (as the API does)."""
        service = self._engine.layers
        service.flush()
        return service

    def social_summaries(self) -> list[SocialSummary]:
        """Summaries per counterpart, with series."""
        return self._layers().social_summaries()

    def pattern_details(self) -> list[PatternDetail]:
        """Patterns with history and episodes."""
        return self._layers().pattern_details()

    def spatial_points(self, *, since: float | None = None,
                       until: float | None = None) -> list[SpatialHit]:
        """Every spatial point, oldest first."""
        return self._layers().spatial_points(since=since, until=until)

    def spatial_within(self, center: Sequence[float], radius: float, *,
                       since: float | None = None, until: float | None = None
                       ) -> list[SpatialHit]:
        """Points within ``radius`` of ``center``, nearest first."""
        return self._layers().spatial_within(center, radius, since=since, until=until)

    def close(self) -> None:
        """Nothing to release: the engine's owner closes it."""
