"""Reading an agent's memory through its introspection API: the desktop app's "attach".

:class:`RemoteReader` answers the :class:`~engine.reader.MemoryReader` protocol over an
:class:`~engine.introspection.client.IntrospectionClient`, converting the API's JSON back into
the engine's frozen types, so the records, timeline and layer views show an attached agent with
the same code as a local store. It is read-only by construction (the API has no write endpoint).

:class:`EventFollower` is its live event feed: one daemon thread long-polls ``/v1/events`` from
the version the reader connected at (``poll_events``: each event once, in ``seq`` order, across
reconnects and server restarts) and calls the subscribers on that thread. It long-polls rather
than reading the SSE stream so that :meth:`EventFollower.close` returns within one poll
(``wait`` seconds): a thread blocked on an idle stream would only notice the stop at the
server's next keep-alive, 15 s later, and a socket cannot be interrupted from another thread.

What the API does not carry is left empty, never invented: edit history (not served), tags and
sources in the filter choices (the snapshot counts agents only).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engine.browse import Facets, LinkedRecord, RecordDetail, link_preview
from engine.connection_errors import unreachable
from engine.decay import decayed_importance
from engine.errors import RecordNotFound, ValidationError
from engine.events import Event
from engine.introspection.client import ApiError, ApiUnauthorized, IntrospectionClient
from engine.introspection.source import API_VERSION
from engine.layers import (
    Episode,
    Pattern,
    PatternDetail,
    PatternHistoryPoint,
    SocialSummary,
    SpatialHit,
)
from engine.query import SHOWN_STATES, RecordPage, RecordQuery, RecordRow, RowPage
from engine.records import MemoryRecord

if TYPE_CHECKING:
    from engine.exits import Masking

__all__ = ["REMOTE_HISTORY_LIMIT", "EventFollower", "RemoteReader", "check_url"]

REMOTE_HISTORY_LIMIT = 5000
"""Most events :meth:`RemoteReader.recent_events` fetches (ten pages; the API's rate limit is
20 requests/s per client)."""
_PAGE = 500
_LINK_PREVIEWS = 20


def check_url(url: str) -> str:
    """The API's base URL, checked: ``http(s)://host[:port]``, no trailing slash.

    Raises:
        ValidationError: naming the URL and what is wrong with it.
    """
    text = url.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("url", url, "must look like http://127.0.0.1:8765 (the URL "
                                          "`mnemoscope serve` printed)")
    try:
        _ = parts.port
    except ValueError as exc:
        raise ValidationError("url", url, "has an invalid port") from exc
    return text


def _explain(url: str, exc: ApiError) -> ApiError:
    """A connection error said for a person attaching to ``url``."""
    if isinstance(exc, ApiUnauthorized):
        return ApiUnauthorized(
            f"{url} refused the token (HTTP 401). Use the token `mnemoscope serve` printed at "
            "start, or the value of $MNEMOSCOPE_API_TOKEN it was started with.",
            status=401, api_code=exc.api_code)
    if exc.status == 0:
        return ApiError(unreachable("the agent's Mnemoscope API", url, exc,
                                    "Is `mnemoscope serve` running there, on this host and "
                                    "port?"))
    if exc.status == 429:
        wait = f" in {exc.retry_after:.0f} s" if exc.retry_after else ""
        return ApiError(f"{url} is rate-limiting this client; try again{wait}.", status=429,
                        api_code=exc.api_code, retry_after=exc.retry_after)
    if exc.status == 404 or not exc.api_code:
        return ApiError(f"{url} does not look like a Mnemoscope introspection API "
                        f"(GET /v1/snapshot answered HTTP {exc.status}).", status=exc.status)
    return ApiError(f"{url} answered with an error: {exc}", status=exc.status,
                    api_code=exc.api_code)


def _record(data: Mapping[str, Any]) -> MemoryRecord:
    fields = {k: v for k, v in data.items() if k != "decayed_importance"}
    return MemoryRecord.from_json(fields)


class EventFollower:
    """Follows an API's events on a daemon thread and hands them to subscribers.

    Args:
        url: The API's base URL.
        token: Its bearer token.
        after: Deliver events with a larger ``seq`` than this.
        wait: Long-poll wait in seconds (also the longest :meth:`close` takes).
        on_state: Told (on the follower's thread) ``None`` when following works, an error
            message while the server cannot be reached (it keeps retrying), or the message of
            a fatal error (a refused token) after which it stops.
    """

    def __init__(self, url: str, token: str, *, after: int, wait: float = 2.0,
                 on_state: Callable[[str | None], None] | None = None) -> None:
        self._stop = threading.Event()
        self._client = IntrospectionClient(url, token, timeout=10.0, sleep=self._pause)
        self._cursor = after
        self._wait = wait
        self._on_state = on_state
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[Event], None]] = []
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def _pause(self, seconds: float) -> None:
        """The retry back-off, cut short by :meth:`close`."""
        self._stop.wait(seconds)

    @property
    def cursor(self) -> int:
        """The ``seq`` of the last event delivered (or the starting point)."""
        return self._cursor

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Deliver every new event to ``callback`` (starts following on the first call)."""
        with self._lock:
            self._subscribers.append(callback)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="mnemoscope-follow",
                                                daemon=True)
                self._thread.start()

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def _state(self, error: ApiError | None) -> None:
        if self._on_state is not None:
            self._on_state(None if error is None else f"connection lost, retrying: {error}")

    def _run(self) -> None:
        try:
            for item in self._client.poll_events(after=self._cursor, wait=self._wait,
                                                 stop=self._stop, on_state=self._state):
                event = Event.from_json(item)
                self._cursor = event.seq
                with self._lock:
                    subscribers = list(self._subscribers)
                for callback in subscribers:
                    try:
                        callback(event)
                    except Exception as exc:  # one subscriber's bug must not stop the others
                        self.errors = [*self.errors[-19:], exc]
        except ApiUnauthorized as exc:
            if self._on_state is not None:
                self._on_state(f"stopped following: {exc}")
        except ValidationError as exc:
            if self._on_state is not None:
                self._on_state(f"stopped following: the server sent a malformed event ({exc})")

    def close(self) -> None:
        """Stop following (returns within one long-poll) and close the connection."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=self._wait + 15.0)
        self._client.close()


class RemoteReader:
    """:class:`~engine.reader.MemoryReader` over a running ``mnemoscope serve`` (read-only).

    Build it with :meth:`connect`, which checks the URL, the token and the API version.

    Args:
        client: The API client (closed by :meth:`close`).
        token: The bearer token (for the event follower's own connection).
        snapshot: The ``/v1/snapshot`` answer read at connect time.
        clock: ``() -> epoch ms`` for decayed importance of single records.
    """

    def __init__(self, client: IntrospectionClient, token: str, snapshot: Mapping[str, Any], *,
                 clock: Callable[[], float] = lambda: time.time() * 1000.0,
                 on_follow_state: Callable[[str | None], None] | None = None) -> None:
        self._client = client
        self._snapshot = dict(snapshot)
        self._clock = clock
        self._follower = EventFollower(client.url, token, after=self.version,
                                       on_state=on_follow_state)

    @classmethod
    def connect(cls, url: str, token: str, *, timeout: float = 10.0,
                on_follow_state: Callable[[str | None], None] | None = None) -> RemoteReader:
        """Check ``url`` and ``token`` against the server and return a reader.

        Raises:
            ValidationError: the URL or the token is malformed (nothing was sent).
            ApiUnauthorized: the server refused the token (HTTP 401).
            ApiError: the server cannot be reached, is not a Mnemoscope API, or speaks another
                API version; the message says which and what to do.
        """
        base = check_url(url)
        if not token.strip():
            raise ValidationError("token", "", "is required: `mnemoscope serve` prints it at "
                                               "start")
        client = IntrospectionClient(base, token.strip(), timeout=timeout)
        try:
            try:
                snapshot = client.snapshot()
            except ApiError as exc:
                raise _explain(base, exc) from exc
            version = snapshot.get("api_version") if isinstance(snapshot, dict) else None
            if version != API_VERSION:
                raise ApiError(f"{base} speaks introspection API version {version!r}; this "
                               f"app reads version {API_VERSION}.")
        except BaseException:
            client.close()
            raise
        return cls(client, token.strip(), snapshot, on_follow_state=on_follow_state)

    # -- what the reader is ------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The API's URL."""
        return self._client.url

    @property
    def read_only(self) -> bool:
        """Always True: the API has no write endpoint."""
        return True

    @property
    def snapshot(self) -> Mapping[str, Any]:
        """The latest ``/v1/snapshot`` answer (read at connect, refreshed by :meth:`count`)."""
        return self._snapshot

    @property
    def version(self) -> int:
        """The event cursor of the latest snapshot."""
        return int(self._snapshot.get("version", 0))

    @property
    def event_feed(self) -> EventFollower:
        """Events after the version this reader connected at, live."""
        return self._follower

    def close(self) -> None:
        """Stop following events and close the connections."""
        self._follower.close()
        self._client.close()

    # -- records -----------------------------------------------------------------------------

    def count(self) -> int:
        """Live records (a fresh snapshot)."""
        self._snapshot = self._client.snapshot()
        return int(self._snapshot["store"]["records"])

    def list_records(self, query: RecordQuery) -> RecordPage:
        """One page of records, filtered and sorted by the server's engine."""
        params: dict[str, Any] = {
            "agent": query.agent_id, "layer": query.layer.value if query.layer else None,
            "privacy": query.privacy.value if query.privacy else None,
            "tag": list(query.tags) or None, "text": query.text,
            "importance_min": query.importance_min, "importance_max": query.importance_max,
            "created_from": query.created_from, "created_to": query.created_to,
            "include_expired": str(query.include_expired).lower(), "sort": query.sort_by.value,
            "order": "desc" if query.descending else "asc", "offset": query.offset,
            "limit": min(query.limit, _PAGE)}
        if query.states != SHOWN_STATES:  # the default is the server's too (and older ones')
            params["state"] = ",".join(sorted(state.value for state in query.states))
        page = self._client.records(**params)
        rows = page["records"]
        return RecordPage([_record(r) for r in rows], int(page["total"]), int(page["offset"]),
                          [float(r.get("decayed_importance", r["importance"])) for r in rows])

    def list_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """The page of :meth:`list_records` as table rows.

        ``shown`` is not used: the agent's API filters and masks with its own server's
        redaction policy (``mnemoscope serve --redact``), which the app cannot change.
        """
        page = self.list_records(query)
        return RowPage([RecordRow.of(r) for r in page.records], page.total, page.offset,
                       page.decayed_importance)

    def facets(self) -> Facets:
        """Agents with record counts (the API counts no tags or sources)."""
        self._snapshot = self._client.snapshot()
        agents = sorted(((str(a["agent_id"]), int(a["records"]))
                         for a in self._snapshot.get("agents", [])),
                        key=lambda pair: (-pair[1], pair[0]))
        return Facets(agents=agents, tags=(), sources=(),
                      total=int(self._snapshot["store"]["records"]))

    def record_detail(self, record_id: str) -> RecordDetail:
        """The record, its links (with previews), its events; no edit history (not served).

        Raises:
            RecordNotFound: the server has no such record.
        """
        record = self._record_or_not_found(record_id)
        half_life = float(self._snapshot.get("config", {}).get("memory", {}).get(
            "importance_decay_half_life_days", 30.0))
        decayed = float(decayed_importance(record.importance, record.created_at,
                                           record.access_count, self._clock(), half_life))
        linked = [*record.merged_from, *(link.id for link in record.related)]
        previews = self._previews(linked[:_LINK_PREVIEWS])
        events = [Event.from_json(e) for e in
                  self._client.events(after=0, limit=200, record=record_id)["events"]]
        return RecordDetail(
            record=record, decayed_importance=decayed if math.isfinite(decayed) else 0.0,
            merged_from=[LinkedRecord(i, None, previews.get(i)) for i in record.merged_from],
            related=[LinkedRecord(link.id, link.similarity, previews.get(link.id))
                     for link in record.related],
            events=events, edits=(), edits_known=False)

    def get_records(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records that exist, in the order asked (one request each: ask for a few)."""
        found: list[MemoryRecord] = []
        for record_id in dict.fromkeys(record_ids):
            try:
                found.append(self._record_or_not_found(record_id))
            except RecordNotFound:
                continue
        return found

    def _record_or_not_found(self, record_id: str) -> MemoryRecord:
        try:
            return _record(self._client.record(record_id))
        except ApiError as exc:
            if exc.status == 404:
                raise RecordNotFound(record_id) from exc
            raise

    def _previews(self, ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for record_id in dict.fromkeys(ids):
            try:
                out[record_id] = link_preview(str(self._client.record(record_id)["content"]))
            except ApiError as exc:
                if exc.status != 404:  # gone (merged away): no preview; anything else is real
                    raise
        return out

    # -- events ------------------------------------------------------------------------------

    def recent_events(self, limit: int) -> list[Event]:
        """The newest ``min(limit, REMOTE_HISTORY_LIMIT)`` events, oldest first."""
        last = int(self._client.snapshot()["events"]["last_seq"])
        cursor = max(0, last - min(limit, REMOTE_HISTORY_LIMIT))
        events: list[Event] = []
        while cursor < last:
            page = self._client.events(after=cursor, limit=_PAGE)
            events.extend(Event.from_json(e) for e in page["events"])
            following = int(page["cursor"])
            if following <= cursor:
                break
            cursor = following
        return events

    # -- layers ------------------------------------------------------------------------------

    def social_summaries(self) -> list[SocialSummary]:
        """Summaries per counterpart, with their sentiment series."""
        return [SocialSummary.from_json(s) for s in self._client.social(series=True)]

    def pattern_details(self) -> list[PatternDetail]:
        """Patterns with their recorded history and supporting episodes."""
        return [PatternDetail(Pattern.from_json(p),
                              tuple(PatternHistoryPoint.from_json(h) for h in p.get("history", [])),
                              tuple(Episode.from_json(e) for e in p.get("episodes", [])))
                for p in self._client.patterns(history=True, episodes=True)]

    def spatial_points(self, *, since: float | None = None,
                       until: float | None = None) -> list[SpatialHit]:
        """Spatial points, oldest first (the API answers at most 500)."""
        return [SpatialHit.from_json(p) for p in
                self._client.spatial(since=since, until=until, limit=_PAGE)]

    def spatial_within(self, center: Sequence[float], radius: float, *,
                       since: float | None = None, until: float | None = None
                       ) -> list[SpatialHit]:
        """Points within ``radius`` of ``center``, nearest first."""
        x, y, z = (float(v) for v in center)
        return [SpatialHit.from_json(p) for p in
                self._client.spatial(x=x, y=y, z=z, radius=radius, since=since, until=until,
                                     limit=_PAGE)]
