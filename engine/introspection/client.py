"""A small read-only client for the introspection API (the desktop app's "attach").

Synchronous (httpx), one :class:`IntrospectionClient` per attached server; the GUI runs its
calls on worker threads like any other engine call. Errors are :class:`ApiError` (an
:class:`~engine.errors.EngineError`), with :class:`ApiUnauthorized` for a wrong token.

Following events without gaps: :meth:`IntrospectionClient.stream_events` reads the SSE stream
and, whenever the connection ends (server restart, network blip, the server's stream time
limit), reconnects with ``Last-Event-ID`` set to the last sequence number it delivered. It never
yields an event twice (it drops any ``seq`` at or below the last one) and, without a kind
filter, checks that sequence numbers are consecutive, filling any hole from the long-poll
endpoint before going on. :meth:`IntrospectionClient.poll_events` is the same guarantee over
long-polling, for networks that buffer streams.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from engine.errors import EngineError

__all__ = ["ApiError", "ApiUnauthorized", "IntrospectionClient"]


class ApiError(EngineError):
    """The introspection API answered with an error, or could not be reached.

    Attributes:
        status: HTTP status (0 when the server could not be reached).
        api_code: The ``error.code`` of the answer (e.g. ``RATE_LIMITED``).
    """

    code = "API_ERROR"

    def __init__(self, message: str, *, status: int = 0, api_code: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.api_code = api_code
        self.retry_after = retry_after


class ApiUnauthorized(ApiError):
    """The token was missing or wrong (HTTP 401); reconnecting will not help."""

    code = "API_UNAUTHORIZED"


class IntrospectionClient:
    """Read-only access to one ``mnemoscope serve`` (or in-process) API.

    Args:
        url: Base URL printed by the server, e.g. ``http://127.0.0.1:8765``.
        token: The bearer token printed by the server.
        timeout: Seconds for connecting and for each ordinary request.
        transport: An httpx transport (tests).
        sleep: How to wait between reconnects (tests pass a fast one).
    """

    def __init__(self, url: str, token: str, *, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._base = url.rstrip("/")
        self._timeout = timeout
        self._sleep = sleep
        self._http = httpx.Client(base_url=self._base, timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Bearer {token}",
                                           "Accept": "application/json"})
        self.reconnects = 0

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self._base

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> IntrospectionClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- plain requests ----------------------------------------------------------------------

    def _get(self, path: str, params: Mapping[str, Any] | None = None, *,
             timeout: float | None = None) -> Any:
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.get(path, params=clean,
                                      timeout=self._timeout if timeout is None else timeout)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the introspection API at {self._base}: {exc}") \
                from exc
        return _json_or_raise(response)

    def snapshot(self) -> dict[str, Any]:
        """Counts, layers, agents, config, model state and the current ``version``."""
        result: dict[str, Any] = self._get("/v1/snapshot")
        return result

    def records(self, **params: Any) -> dict[str, Any]:
        """One page of records; parameters as in ``docs/api.md`` (agent, layer, tag, ...)."""
        result: dict[str, Any] = self._get("/v1/records", params)
        return result

    def record(self, record_id: str) -> dict[str, Any]:
        """One record (ApiError with status 404 when it does not exist)."""
        result: dict[str, Any] = self._get(f"/v1/records/{quote(record_id, safe='')}")
        return result

    def diff(self, *, since: int | None = None, since_time: str | float | None = None,
             limit: int | None = None) -> dict[str, Any]:
        """Records changed since a version (event seq) or a time."""
        result: dict[str, Any] = self._get("/v1/diff", {"since": since,
                                                        "since_time": since_time,
                                                        "limit": limit})
        return result

    def events(self, *, after: int = 0, limit: int = 100, kinds: Sequence[str] | None = None,
               wait: float = 0.0, record: str | None = None) -> dict[str, Any]:
        """Events after a cursor (of one record, if given); waits up to ``wait`` seconds for
        the first (long-poll)."""
        params: dict[str, Any] = {"after": after, "limit": limit, "wait": wait, "record": record}
        if kinds:
            params["kind"] = list(kinds)
        result: dict[str, Any] = self._get("/v1/events", params, timeout=self._timeout + wait)
        return result

    def social(self, *, agent: str | None = None, counterpart: str | None = None,
               series: bool = True) -> list[dict[str, Any]]:
        """Social summaries (with sentiment series)."""
        result = self._get("/v1/layers/social", {"agent": agent, "counterpart": counterpart,
                                                 "series": str(series).lower()})
        summaries: list[dict[str, Any]] = result["summaries"]
        return summaries

    def patterns(self, *, agent: str | None = None, history: bool = True,
                 episodes: bool = False) -> list[dict[str, Any]]:
        """Mined procedural patterns (with success-rate history and, when asked, their
        supporting episodes)."""
        result = self._get("/v1/layers/procedural", {"agent": agent,
                                                     "history": str(history).lower(),
                                                     "episodes": str(episodes).lower()})
        patterns: list[dict[str, Any]] = result["patterns"]
        return patterns

    def spatial(self, **params: Any) -> list[dict[str, Any]]:
        """Spatial points (``x``, ``y``, ``z`` with ``radius`` or ``k`` for queries)."""
        points: list[dict[str, Any]] = self._get("/v1/layers/spatial", params)["points"]
        return points

    def metrics(self) -> dict[str, Any]:
        """Seed 002 §20 and seed 000 ``memory_llm_*`` metrics of ``/v1/metrics``."""
        result: dict[str, Any] = self._get("/v1/metrics")
        return result

    def debug_memory(self) -> dict[str, Any]:
        """The sanitized snapshot of ``/debug/memory``."""
        result: dict[str, Any] = self._get("/debug/memory")
        return result

    # -- following events --------------------------------------------------------------------

    def poll_events(self, *, after: int = 0, kinds: Sequence[str] | None = None,
                    wait: float = 10.0, stop: threading.Event | None = None,
                    max_retry_delay: float = 5.0,
                    on_state: Callable[[ApiError | None], None] | None = None
                    ) -> Iterator[dict[str, Any]]:
        """Follow events by long-polling from ``after``, retrying across outages, in order.

        ``on_state(error)`` is told each failed request (it is retried) and ``on_state(None)``
        the first answer after a failure, so a viewer can say the connection is lost or back.
        """
        cursor = after
        delay = 0.25
        failing = False
        while stop is None or not stop.is_set():
            try:
                page = self.events(after=cursor, limit=500, kinds=kinds, wait=wait)
            except ApiUnauthorized:
                raise
            except ApiError as exc:
                self.reconnects += 1
                failing = True
                if on_state is not None:
                    on_state(exc)
                self._sleep(exc.retry_after or delay)
                delay = min(max_retry_delay, delay * 2)
                continue
            if failing and on_state is not None:
                on_state(None)
            failing = False
            delay = 0.25
            for event in page["events"]:
                if event["seq"] > cursor:
                    cursor = event["seq"]
                    yield event
            cursor = max(cursor, int(page["cursor"]))

    def stream_events(self, *, after: int = 0, kinds: Sequence[str] | None = None,
                      stop: threading.Event | None = None, max_retry_delay: float = 5.0,
                      read_timeout: float = 60.0) -> Iterator[dict[str, Any]]:
        """Follow events over SSE from ``after``, reconnecting with ``Last-Event-ID``.

        Yields each event (the JSON of :meth:`engine.events.Event.to_json`) once, in ``seq``
        order, until ``stop`` is set (checked between events and on each keep-alive).

        Raises:
            ApiUnauthorized: the token is wrong (no retry).
        """
        last = after
        delay = 0.25
        while stop is None or not stop.is_set():
            params: dict[str, Any] = {"kind": list(kinds)} if kinds else {}
            headers = {"Accept": "text/event-stream", "Last-Event-ID": str(last)}
            try:
                with self._http.stream("GET", "/v1/events/stream", params=params,
                                       headers=headers,
                                       timeout=httpx.Timeout(self._timeout,
                                                             read=read_timeout)) as response:
                    if response.status_code != 200:
                        response.read()
                        _json_or_raise(response)
                    delay = 0.25
                    for event in _sse_events(response.iter_lines(), stop):
                        seq = int(event["seq"])
                        if seq <= last:
                            continue
                        if not kinds and seq != last + 1:
                            yield from self._backfill(last, seq)
                        last = seq
                        yield event
                        if stop is not None and stop.is_set():
                            return
            except ApiUnauthorized:
                raise
            except ApiError as exc:
                self._sleep(exc.retry_after or delay)
                delay = min(max_retry_delay, delay * 2)
            except httpx.HTTPError:
                self._sleep(delay)
                delay = min(max_retry_delay, delay * 2)
            self.reconnects += 1

    def _backfill(self, last: int, upto: int) -> Iterator[dict[str, Any]]:
        """Events strictly between ``last`` and ``upto`` (a hole in a stream), in order."""
        cursor = last
        while cursor < upto - 1:
            page = self.events(after=cursor, limit=min(500, upto - 1 - cursor))
            found = [e for e in page["events"] if cursor < e["seq"] < upto]
            if not found:
                return
            yield from found
            cursor = found[-1]["seq"]


def _sse_events(lines: Iterator[str], stop: threading.Event | None
                ) -> Iterator[dict[str, Any]]:
    """Parse Server-Sent Events into the JSON of their ``data`` (comments are keep-alives)."""
    data: list[str] = []
    for line in lines:
        if stop is not None and stop.is_set():
            return
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)


def _json_or_raise(response: httpx.Response) -> Any:
    try:
        document = response.json()
    except ValueError:
        document = None
    if response.status_code == 200 and document is not None:
        return document
    error = document.get("error", {}) if isinstance(document, dict) else {}
    message = error.get("message") or f"HTTP {response.status_code}"
    code = error.get("code", "")
    retry = response.headers.get("Retry-After")
    retry_after = float(retry) if retry and retry.replace(".", "", 1).isdigit() else None
    kind = ApiUnauthorized if response.status_code == 401 else ApiError
    raise kind(f"introspection API {response.request.url.path}: {message}",
               status=response.status_code, api_code=code, retry_after=retry_after)
