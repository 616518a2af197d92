"""The read-only introspection API: a small local HTTP JSON server (seed 002 §17 items 17-18, §20).

Standard library only (``http.server.ThreadingHTTPServer``): a thread per connection, capped.
Every endpoint is ``GET`` (``docs/api.md`` lists them with their parameters):

=============================  =================================================================
``/v1/snapshot``               counts, layers, agents, config, model state, event cursor
``/v1/records``                one page of records (filters, sort, offset/limit)
``/v1/records/<id>``           one record
``/v1/diff``                   records changed since a version (``since``) or a time
``/v1/events``                 events after a cursor, long-poll (``wait``)
``/v1/events/stream``          the same as Server-Sent Events (``id:`` = seq, ``Last-Event-ID``)
``/v1/layers/social``          social summaries with sentiment series
``/v1/layers/procedural``      mined patterns with success-rate history
``/v1/layers/spatial``         spatial points, radius or nearest queries
``/v1/metrics``                seed 002 §20 metrics and seed 000 ``memory_llm_*`` metrics
``/debug/memory``              seed 002 §20 sanitized snapshot (always redacted, no paths)
=============================  =================================================================

Guards, in the order a request meets them: connection caps per client address (429) and in
all (503), where a new connection first displaces the oldest one still sending its request
(408) so that slow clients cannot hold the server; one deadline for the whole request head
(408; not a timeout per read); request-line length (414), header size (431), per-client token
bucket (429 + ``Retry-After``), on a loopback bind a ``Host`` (421) and ``Origin`` (403) that
name loopback (DNS rebinding: a web page whose name was re-pointed at 127.0.0.1), bearer token
(401 +
``WWW-Authenticate: Bearer``, compared in constant time), method (405: there are no write
endpoints), no request body (413), strict query parsing (400 for malformed, unknown or repeated
parameters and bad values). With redaction on, every response body — records, events, errors —
is built by the exit policy (:mod:`engine.exits`), and the filters (``text``, ``agent``,
``tag``, ``counterpart``) match the masked text the response shows, never the raw text. Every
error, including the ones the standard library's request parsing answers (400, 414, 431, 501,
505), is a JSON body ``{"error": {"code": ..., "message": ...}}``.

The server binds to loopback unless ``allow_remote`` is given; it never serves TLS, so a remote
bind belongs behind a tunnel or a TLS proxy.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import ipaddress
import json
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from engine.errors import ConfigInvalid, EngineError, RecordNotFound, ValidationError
from engine.exits import ExitPolicy, Masker
from engine.introspection.source import EngineSource
from engine.query import SHOWN_STATES, RecordQuery, SortKey, parse_states
from engine.records import Layer, Privacy, parse_timestamp

if TYPE_CHECKING:
    from engine.memory_engine import MemoryEngine

__all__ = ["IntrospectionServer", "ServerLimits", "is_loopback", "serve_in_thread"]

_log = logging.getLogger("mnemoscope.introspection")
TOKEN_ENV = "MNEMOSCOPE_API_TOKEN"
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Request limits.

    Attributes:
        max_url_chars: Longest request target (path + query) accepted.
        max_header_bytes: Largest total of header names and values.
        max_page: Largest ``limit`` for records, events and spatial points.
        rate_per_s: Requests per second refilled per client address.
        burst: Bucket size (requests a client may make at once).
        max_connections: Connections at once. One more displaces the oldest connection still
            sending its request (408); when every connection is being answered, it gets 503.
        max_per_client: Connections at once from one client address, displacing the same way
            within that address (else 429).
        max_streams: Open event streams at once (more get 503).
        max_wait_s: Longest long-poll ``wait``.
        request_deadline_s: The whole request head (request line and headers; there is no
            body to read) must arrive within this long of the connection (else 408).
        read_timeout_s: Longest wait for one send to the client (a client that stops
            reading is dropped).
        stream_max_s: An event stream is closed after this long (the client reconnects with
            ``Last-Event-ID``; this bounds a thread's life).
        keepalive_s: Comment line sent on an idle stream this often.
    """

    max_url_chars: int = 2048
    max_header_bytes: int = 8192
    max_page: int = 500
    rate_per_s: float = 20.0
    burst: int = 60
    max_connections: int = 32
    max_per_client: int = 8
    max_streams: int = 8
    max_wait_s: float = 30.0
    request_deadline_s: float = 10.0
    read_timeout_s: float = 10.0
    stream_max_s: float = 300.0
    keepalive_s: float = 15.0


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Bucket:
    """Token buckets per client address (monotonic time)."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, float]] = {}

    def take(self, client: str) -> float:
        """Take one token; returns 0 when allowed, else the seconds until one is available."""
        now = time.monotonic()
        with self._lock:
            if len(self._state) > 10_000:  # forget clients whose bucket has refilled
                full = self._burst / self._rate if self._rate > 0 else math.inf
                self._state = {c: (t, w) for c, (t, w) in self._state.items()
                               if now - w < full}
            tokens, then = self._state.get(client, (self._burst, now))
            tokens = min(self._burst, tokens + (now - then) * self._rate)
            if tokens >= 1.0:
                self._state[client] = (tokens - 1.0, now)
                return 0.0
            self._state[client] = (tokens, now)
            return (1.0 - tokens) / self._rate if self._rate > 0 else math.inf


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, code: str, message: str,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


class _Params:
    """Strictly parsed query parameters: unknown or repeated names are errors."""

    def __init__(self, query: str, allowed: Sequence[str], repeatable: Sequence[str] = ()
                 ) -> None:
        try:
            parsed = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query),
                              max_num_fields=50, errors="strict")
        except (ValueError, UnicodeDecodeError) as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY",
                             f"malformed query string: {exc}") from exc
        for name, values in parsed.items():
            if name not in allowed:
                raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY",
                                 f"unknown parameter {name!r}; allowed: {', '.join(allowed)}")
            if len(values) > 1 and name not in repeatable:
                raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY",
                                 f"parameter {name!r} given {len(values)} times")
        self._values = parsed

    def text(self, name: str) -> str | None:
        values = self._values.get(name)
        return values[0] if values else None

    def texts(self, name: str) -> list[str]:
        return list(self._values.get(name, []))

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise _bad(name, raw, "must be an integer") from None
        if not low <= value <= high:
            raise _bad(name, raw, f"must be in {low}..{high}")
        return value

    def number(self, name: str, low: float = -math.inf, high: float = math.inf
               ) -> float | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise _bad(name, raw, "must be a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise _bad(name, raw, f"must be a finite number in {low}..{high}")
        return value

    def time(self, name: str) -> float | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            return parse_timestamp(float(raw) if _is_number(raw) else raw, name)
        except ValidationError as exc:
            raise _bad(name, raw, exc.reason) from exc

    def flag(self, name: str, default: bool = False) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in ("1", "true", "yes", ""):
            return True
        if raw.lower() in ("0", "false", "no"):
            return False
        raise _bad(name, raw, "must be true or false")

    def choice(self, name: str, choices: Sequence[str]) -> str | None:
        raw = self.text(name)
        if raw is None:
            return None
        for choice in choices:
            if raw.lower() == choice.lower():
                return choice
        raise _bad(name, raw, f"must be one of {', '.join(choices)}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _bad(name: str, value: str, reason: str) -> _HttpError:
    shown = value if len(value) <= 80 else value[:77] + "..."
    return _HttpError(HTTPStatus.BAD_REQUEST, "BAD_PARAMETER", f"{name}: {reason} (got {shown!r})")


_RECORD_PARAMS = ("agent", "layer", "privacy", "state", "tag", "text", "importance_min",
                  "importance_max", "created_from", "created_to", "include_expired", "sort",
                  "order", "offset", "limit")


_ERROR_CODES = {
    HTTPStatus.BAD_REQUEST: "BAD_REQUEST",
    HTTPStatus.REQUEST_TIMEOUT: "REQUEST_TIMEOUT",
    HTTPStatus.REQUEST_URI_TOO_LONG: "URI_TOO_LONG",
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: "HEADERS_TOO_LARGE",
    HTTPStatus.NOT_IMPLEMENTED: "METHOD_NOT_IMPLEMENTED",
    HTTPStatus.HTTP_VERSION_NOT_SUPPORTED: "HTTP_VERSION_NOT_SUPPORTED",
}
"""Codes of the errors the standard library's request parsing answers (``send_error``)."""


def _hostname(url: str) -> str | None:
    """The host name of ``url`` (lower case, IPv6 without brackets), None when unreadable."""
    try:
        return urlsplit(url).hostname
    except ValueError:  # e.g. an unclosed "[" or a port that is no number
        return None


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


@dataclass(eq=False, slots=True)
class _Connection:
    """One accepted connection, as the caps see it.

    Attributes:
        sock: The socket.
        client: The client's address.
        accepted: ``time.monotonic()`` at accept; the request deadline counts from here.
        reading: Still receiving its request head: the only state a connection can be
            displaced in (one being answered is never cut off).
        displaced: A newer connection took its place; its reads end with 408.
    """

    sock: socket.socket
    client: str
    accepted: float
    reading: bool = True
    displaced: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True  # rebind a port in TIME_WAIT after a restart (not a live one)
    # socketserver's default backlog of 5 makes a burst of connections wait for SYN retries
    # (1 s, then 3 s) before the caps ever see them
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: IntrospectionServer) -> None:
        self.api = api
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}  # in accept order
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        connection = _Connection(request, str(client_address[0]), time.monotonic())
        refusal = self._admit(connection)
        if refusal is not None:
            status, code, message = refusal
            body = _error_body(code, message)
            with contextlib.suppress(OSError):
                request.settimeout(self.api.limits.read_timeout_s)
                request.sendall(
                    f"HTTP/1.0 {status.value} {status.phrase}\r\n"
                    "Content-Type: application/json; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nRetry-After: 1\r\n"
                    "Connection: close\r\n\r\n".encode("ascii") + body)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.release(request)
            raise

    def _admit(self, new: _Connection) -> tuple[HTTPStatus, str, str] | None:
        """Count ``new`` in, displacing the oldest connection still sending its request when a
        cap is reached; the refusal to answer when no connection can be displaced.

        Slow clients (one header line every few seconds) could otherwise hold every slot until
        their deadline and reconnect; a request head arrives in milliseconds from a client
        that means it, so the oldest unfinished head is the one to drop.
        """
        limits = self.api.limits
        with self._lock:
            mine = [c for c in self._open.values() if c.client == new.client]
            if len(mine) >= limits.max_per_client and not self._displace(mine):
                return (HTTPStatus.TOO_MANY_REQUESTS, "TOO_MANY_CONNECTIONS",
                        f"more than {limits.max_per_client} connections at once from "
                        f"{new.client}")
            if len(self._open) >= limits.max_connections \
                    and not self._displace(list(self._open.values())):
                return (HTTPStatus.SERVICE_UNAVAILABLE, "SERVER_BUSY",
                        f"all {limits.max_connections} connections are being answered; "
                        "retry in a moment")
            self._open[new.sock] = new
            return None

    def _displace(self, candidates: Sequence[_Connection]) -> bool:
        """Drop the oldest of ``candidates`` still reading its request (lock held)."""
        oldest = next((c for c in candidates if c.reading), None)
        if oldest is None:
            return False
        oldest.displaced = True
        del self._open[oldest.sock]
        with contextlib.suppress(OSError):  # wakes its thread's read, which answers 408
            oldest.sock.shutdown(socket.SHUT_RD)
        return True

    def connection(self, request: Any) -> _Connection:
        """The bookkeeping of an admitted ``request``."""
        with self._lock:
            found = self._open.get(request)
        # not found: displaced before its thread began; its first read answers 408
        return found if found is not None else _Connection(request, "", time.monotonic(),
                                                           displaced=True)

    def head_read(self, connection: _Connection) -> None:
        """``connection`` received its whole request head: it can no longer be displaced."""
        with self._lock:
            connection.reading = False

    def release(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection drops are routine (a client went away); anything else is logged."""
        import sys

        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            _log.debug("connection from %s ended: %s", client_address, error)
            return
        _log.exception("introspection request from %s failed", client_address)
        if error is not None:
            self.api.errors.append(error)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.release(request)


class _HeadReader(io.RawIOBase):
    """The request's socket, read against one deadline for the whole request head.

    A socket timeout bounds each read; a client sending one header line every few seconds
    never meets it. This reader gives every read only the time left until the deadline, and
    ends the reads of a displaced connection at once.
    """

    def __init__(self, connection: _Connection, deadline: float) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline
        self.late: str | None = None  # why reading ended early: "deadline" or "displaced"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock = self._connection.sock
        if self._connection.reading:
            left = self._deadline - time.monotonic()
            if self._connection.displaced or left <= 0:
                raise self._late()
            sock.settimeout(left)
        try:
            count = sock.recv_into(buffer)
        except TimeoutError:
            raise self._late() from None
        if count == 0 and self._connection.displaced:
            raise self._late()
        return count

    def _late(self) -> TimeoutError:
        self.late = "displaced" if self._connection.displaced else "deadline"
        return TimeoutError(f"request head not complete: {self.late}")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    raw_requestline: bytes  # set by handle_one_request before parse_request
    server_version = "mnemoscope-introspection"
    sys_version = ""
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        super().setup()
        # what an error answer reads when it comes before the request line was parsed
        self.requestline = self.command = self.request_version = ""
        limits = self.server.api.limits
        self._tracked = self.server.connection(self.connection)
        self._head = _HeadReader(self._tracked,
                                 self._tracked.accepted + limits.request_deadline_s)
        self.rfile.close()  # the plain reader: reads go through the deadline instead
        self.rfile = io.BufferedReader(self._head)

    def log_message(self, format: str, *args: Any) -> None:
        # The request line carries the query (``text=…``): logged as the policy shows it.
        _log.debug("%s %s", self.address_string(), self.server.api.policy.text(format % args))

    def handle_one_request(self) -> None:
        super().handle_one_request()  # ends a read that ran out of time, answering nothing
        if self._head.late is not None:
            limits = self.server.api.limits
            why = (f"the request was not complete within {limits.request_deadline_s:g} s"
                   if self._head.late == "deadline" else
                   "the request was not complete when the server needed its connection for "
                   "a newer one")
            with contextlib.suppress(OSError):
                self._send_error_json(HTTPStatus.REQUEST_TIMEOUT, "REQUEST_TIMEOUT", why)

    def parse_request(self) -> bool:
        if len(self.raw_requestline.split()) == 2:
            # HTTP/0.9 (no version): the standard library would wait for headers that never
            # come, then answer without a status line
            self.server.head_read(self._tracked)
            self.send_error(HTTPStatus.BAD_REQUEST, "HTTP/0.9 requests are not served")
            return False
        parsed = super().parse_request()
        self.server.head_read(self._tracked)
        self.connection.settimeout(self.server.api.limits.read_timeout_s)
        return parsed

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The standard library's own error answers (bad request line, long lines, unknown
        methods), as JSON like every other error instead of its HTML page."""
        status = HTTPStatus(code)
        text = message or status.phrase
        if explain and explain != status.description:
            text = f"{text}: {explain}"
        shown = text if len(text) <= 200 else text[:197] + "..."
        code_name = _ERROR_CODES.get(status) or status.phrase.upper().replace(" ", "_") \
            .replace("-", "_")
        self._send_error_json(status, code_name, shown)

    def _send_error_json(self, status: HTTPStatus, code: str, message: str,
                         headers: Mapping[str, str] | None = None) -> None:
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            # parse_request starts from this default and keeps it when it refuses a request
            # line; answered as HTTP/0.9, the error would go out without a status line
            self.request_version = "HTTP/1.0"
        self.connection.settimeout(self.server.api.limits.read_timeout_s)
        self._send_json(status, {"error": {"code": code, "message": message}},
                        {"Connection": "close", **(headers or {})})

    # Every method but GET is refused: there are no write endpoints.
    def _refuse_method(self) -> None:
        self._run(lambda: self._raise(_HttpError(
            HTTPStatus.METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED",
            f"{self.command} is not allowed: the introspection API is read-only",
            {"Allow": "GET"})))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _refuse_method

    def do_GET(self) -> None:
        self._run(self._route)

    @staticmethod
    def _raise(error: _HttpError) -> None:
        raise error

    # -- plumbing --------------------------------------------------------------------------

    def _run(self, action: Callable[[], None]) -> None:
        api = self.server.api
        try:
            self._guard()
            action()
        except _HttpError as exc:
            self._send_json(exc.status, {"error": {"code": exc.code, "message": exc.message}},
                            exc.headers)
        except RecordNotFound as exc:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": {"code": exc.code,
                                                             "message": str(exc)}})
        except ValidationError as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": {"code": exc.code,
                                                               "message": str(exc)}})
        except EngineError as exc:
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE,
                            {"error": {"code": exc.code, "message": str(exc)}})
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug: log it, answer 500 without details
            _log.exception("introspection request failed: %s", api.policy.text(self.path))
            api.errors.append(exc)
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR,
                            {"error": {"code": "INTERNAL", "message": "internal error"}})

    def _guard(self) -> None:
        api = self.server.api
        limits = api.limits
        if len(self.path) > limits.max_url_chars:
            raise _HttpError(HTTPStatus.REQUEST_URI_TOO_LONG, "URI_TOO_LONG",
                             f"request target longer than {limits.max_url_chars} characters")
        header_bytes = sum(len(k) + len(v) for k, v in self.headers.items())
        if header_bytes > limits.max_header_bytes:
            raise _HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "HEADERS_TOO_LARGE",
                             f"headers larger than {limits.max_header_bytes} bytes")
        wait = api.bucket.take(self.client_address[0])
        if wait > 0:
            raise _HttpError(HTTPStatus.TOO_MANY_REQUESTS, "RATE_LIMITED",
                             "too many requests; slow down",
                             {"Retry-After": str(max(1, math.ceil(wait)))})
        if not api.host_allowed(self.headers.get("Host")):
            raise _HttpError(HTTPStatus.MISDIRECTED_REQUEST, "HOST_NOT_ALLOWED",
                             "the Host header names another machine; this server is bound to "
                             "loopback and answers loopback names only (DNS rebinding)")
        if not api.origin_allowed(self.headers.get("Origin")):
            raise _HttpError(HTTPStatus.FORBIDDEN, "ORIGIN_NOT_ALLOWED",
                             "requests from a web page of another site are refused")
        if not api.authorized(self.headers.get("Authorization")):
            raise _HttpError(HTTPStatus.UNAUTHORIZED, "UNAUTHORIZED",
                             "a valid bearer token is required",
                             {"WWW-Authenticate": 'Bearer realm="mnemoscope"'})
        if self.command != "GET":
            return
        length = self.headers.get("Content-Length")
        if (length is not None and length.strip() not in ("", "0")) or \
                self.headers.get("Transfer-Encoding"):
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "BODY_NOT_ALLOWED",
                             "GET requests take no body")

    def _send_json(self, status: HTTPStatus, document: Any,
                   headers: Mapping[str, str] | None = None, *, redact: bool = False) -> None:
        api = self.server.api
        policy = api.always_redacting if redact else api.policy
        body = json.dumps(policy.document(document), ensure_ascii=False,
                          allow_nan=False, separators=(",", ":")).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    # -- routes ----------------------------------------------------------------------------

    def _route(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = split.query
        source = self.server.api.source
        limits = self.server.api.limits
        if path == "/v1/snapshot":
            _Params(query, ())
            self._send_json(HTTPStatus.OK, source.snapshot())
        elif path == "/v1/records":
            params = _Params(query, _RECORD_PARAMS, repeatable=("tag",))
            self._send_json(HTTPStatus.OK, source.records(_record_query(params, limits)))
        elif path.startswith("/v1/records/"):
            _Params(query, ())
            record_id = unquote(path[len("/v1/records/"):])
            if not record_id or "/" in record_id or len(record_id) > 128:
                raise _HttpError(HTTPStatus.NOT_FOUND, "NOT_FOUND", "no such record id")
            self._send_json(HTTPStatus.OK, source.record(record_id))
        elif path == "/v1/diff":
            params = _Params(query, ("since", "since_time", "limit"))
            since = params.integer("since", -1, 0, 2**62)
            since_time = params.time("since_time")
            if since >= 0 and since_time is not None:
                raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY",
                                 "give since or since_time, not both")
            self._send_json(HTTPStatus.OK, source.diff(
                since_seq=since if since >= 0 else None, since_ms=since_time,
                limit=params.integer("limit", limits.max_page, 1, limits.max_page)))
        elif path == "/v1/events":
            params = _Params(query, ("after", "limit", "kind", "wait", "record"),
                             repeatable=("kind",))
            wait = params.number("wait", 0.0, limits.max_wait_s) or 0.0
            self._send_json(HTTPStatus.OK, source.events(
                after=params.integer("after", 0, 0, 2**62),
                limit=params.integer("limit", 100, 1, limits.max_page),
                kinds=params.texts("kind") or None, wait_s=wait,
                stop=self.server.api.stopping, record_id=params.text("record")))
        elif path == "/v1/events/stream":
            params = _Params(query, ("after", "kind"), repeatable=("kind",))
            after = params.integer("after", 0, 0, 2**62)
            last_id = self.headers.get("Last-Event-ID")
            if last_id is not None:
                try:
                    after = max(0, int(last_id.strip()))
                except ValueError:
                    raise _bad("Last-Event-ID", last_id, "must be an integer") from None
            self._stream(after, params.texts("kind") or None)
        elif path == "/v1/layers/social":
            params = _Params(query, ("agent", "counterpart", "series"))
            self._send_json(HTTPStatus.OK, source.social(
                agent_id=params.text("agent"), counterpart=params.text("counterpart"),
                series=params.flag("series", True)))
        elif path == "/v1/layers/procedural":
            params = _Params(query, ("agent", "history", "episodes"))
            self._send_json(HTTPStatus.OK, source.procedural(
                agent_id=params.text("agent"), history=params.flag("history", True),
                episodes=params.flag("episodes", False)))
        elif path == "/v1/layers/spatial":
            self._spatial(query, limits)
        elif path == "/v1/metrics":
            _Params(query, ())
            self._send_json(HTTPStatus.OK, source.metrics())
        elif path == "/debug/memory":
            _Params(query, ())
            self._send_json(HTTPStatus.OK, source.debug(), redact=True)
        else:
            raise _HttpError(HTTPStatus.NOT_FOUND, "NOT_FOUND", f"no endpoint {path!r}")

    def _spatial(self, query: str, limits: ServerLimits) -> None:
        params = _Params(query, ("agent", "layer", "since", "until", "x", "y", "z", "radius",
                                 "k", "limit"), repeatable=("layer",))
        axes = [params.number(axis) for axis in ("x", "y", "z")]
        radius = params.number("radius", 0.0)
        k = params.integer("k", -1, 1, limits.max_page)
        center: list[float] | None = None
        if any(a is not None for a in axes):
            if any(a is None for a in axes):
                raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY", "give all of x, y and z")
            center = [float(a) for a in axes if a is not None]
        if center is not None and (radius is None) == (k < 0):
            raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY",
                             "with x, y, z give exactly one of radius or k")
        if center is None and (radius is not None or k >= 0):
            raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_QUERY", "radius and k need x, y, z")
        layers = [Layer(_choose("layer", v, [x.value for x in Layer]))
                  for v in params.texts("layer")]
        filters: dict[str, Any] = {"agent_id": params.text("agent"),
                                   "since": params.time("since"), "until": params.time("until")}
        if layers:
            filters["layers"] = layers
        self._send_json(HTTPStatus.OK, self.server.api.source.spatial(
            center=center, radius=radius, k=None if k < 0 else k, filters=filters,
            limit=params.integer("limit", limits.max_page, 1, limits.max_page)))

    def _stream(self, after: int, kinds: Sequence[str] | None) -> None:
        api = self.server.api
        if not api.streams.acquire(blocking=False):
            raise _HttpError(HTTPStatus.SERVICE_UNAVAILABLE, "TOO_MANY_STREAMS",
                             "too many open event streams", {"Retry-After": "1"})
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(b"retry: 1000\n\n")
            self.wfile.flush()
            limits = api.limits
            ends = time.monotonic() + limits.stream_max_s
            cursor = after
            while not api.stopping.is_set():
                left = ends - time.monotonic()
                if left <= 0:
                    break
                found, cursor = api.source.wait_events(
                    after=cursor, limit=200, kinds=kinds,
                    wait_s=min(left, limits.keepalive_s), stop=api.stopping)
                if not found:
                    self.wfile.write(b": keepalive\n\n")
                for event in found:
                    data = json.dumps(api.policy.event(event), ensure_ascii=False,
                                      allow_nan=False, separators=(",", ":"))
                    kind = event.kind.replace("\n", " ").replace("\r", " ")
                    self.wfile.write(f"id: {event.seq}\nevent: {kind}\ndata: {data}\n\n"
                                     .encode())
                self.wfile.flush()
        finally:
            api.streams.release()
            self.close_connection = True


def _choose(name: str, value: str, choices: Sequence[str]) -> str:
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise _bad(name, value, f"must be one of {', '.join(choices)}")


def _record_query(params: _Params, limits: ServerLimits) -> RecordQuery:
    sort = params.choice("sort", [k.value for k in SortKey]) or SortKey.CREATED.value
    order = params.choice("order", ["asc", "desc"]) or "desc"
    layer = params.choice("layer", [x.value for x in Layer])
    privacy = params.choice("privacy", [x.value for x in Privacy])
    state = params.text("state")
    try:
        # state: active, paused, archived (comma-separated) or all; default: archived hidden
        states = SHOWN_STATES if state is None else parse_states(state, "state")
        return RecordQuery(
            agent_id=params.text("agent"), layer=Layer(layer) if layer else None,
            privacy=Privacy(privacy) if privacy else None, states=states,
            tags=tuple(params.texts("tag")),
            text=params.text("text") or None,
            importance_min=params.number("importance_min", 0.0, 1.0),
            importance_max=params.number("importance_max", 0.0, 1.0),
            created_from=params.time("created_from"), created_to=params.time("created_to"),
            include_expired=params.flag("include_expired", True), sort_by=SortKey(sort),
            descending=order == "desc", offset=params.integer("offset", 0, 0, 10**9),
            limit=params.integer("limit", 50, 1, limits.max_page))
    except ValidationError as exc:
        raise _HttpError(HTTPStatus.BAD_REQUEST, "BAD_PARAMETER", str(exc)) from exc


class IntrospectionServer:
    """The API server over one engine. Start with :meth:`start` (thread) or :meth:`serve`.

    Args:
        engine: The engine to expose (writable = in-process and live; read-only = following
            another process, see :mod:`.source`).
        host: Interface to bind; loopback unless ``allow_remote``.
        port: TCP port (0 = any free port; see :attr:`url`).
        token: The bearer token (at least 16 characters); None generates one
            (``secrets.token_urlsafe(32)``).
        allow_remote: Permit a non-loopback ``host``.
        redaction: Redact every response; None follows the engine's configuration.
        redactor: The redaction function; default: the engine's configured patterns
            (``MEMORY_REDACT_PATTERNS``).
        limits: Request limits.
        refresh_interval_s: Read-only mode: shortest time between view reloads.

    Raises:
        ConfigInvalid: a non-loopback host without ``allow_remote`` or a short token.
        RedactionPatternInvalid: a configured redaction pattern is unknown or invalid.
    """

    def __init__(self, engine: MemoryEngine, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, allow_remote: bool = False,
                 redaction: bool | None = None, redactor: Masker | None = None,
                 limits: ServerLimits | None = None, refresh_interval_s: float = 2.0) -> None:
        if not is_loopback(host) and not allow_remote:
            raise ConfigInvalid("host", host, "binding a non-loopback address exposes the "
                                "agent's memory to the network; pass allow_remote "
                                "(--allow-remote) to do it on purpose")
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise ConfigInvalid("token", "<hidden>",
                                f"must be at least {MIN_TOKEN_CHARS} characters")
        self.token = token or secrets.token_urlsafe(32)
        # The names a request may give for this server (Host, Origin): loopback ones when it is
        # bound to loopback; None (no check) for a remote bind, whose names are not known here.
        self.loopback_names: frozenset[str] | None = frozenset({
            "127.0.0.1", "localhost", "::1", host.strip().strip("[]").lower()}) \
            if is_loopback(host) else None
        self.limits = limits or ServerLimits()
        self.redaction = engine.config.redaction if redaction is None else redaction
        # ``/debug/memory`` is always redacted (seed 002 §20 "sanitized"); every other route
        # follows the toggle. One policy builds every response and the filters' view of text.
        self.always_redacting = ExitPolicy(redactor) if redactor is not None else \
            ExitPolicy.for_config(engine.config, redaction=True)
        self.policy = self.always_redacting if self.redaction else ExitPolicy(None)
        self.bucket = _Bucket(self.limits.rate_per_s, self.limits.burst)
        self.streams = threading.BoundedSemaphore(self.limits.max_streams)
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.source = EngineSource(engine, refresh_interval_s=refresh_interval_s,
                                   policy=self.policy)
        try:
            self._httpd = _Server((host, port), self)
        except OSError as exc:
            self.source.close()
            from engine.errors import StoreUnavailable

            raise StoreUnavailable(f"cannot listen on {host}:{port}: {exc}") from exc
        self._thread: threading.Thread | None = None
        address = self._httpd.server_address
        bound_host, bound_port = str(address[0]), int(address[1])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}"

    def host_allowed(self, header: str | None) -> bool:
        """True when a ``Host`` header (``name[:port]``) names this loopback server; a request
        without one (an HTTP/1.0 client; browsers always send it) passes."""
        if self.loopback_names is None or header is None:
            return True
        return _hostname(f"//{header.strip()}") in self.loopback_names

    def origin_allowed(self, header: str | None) -> bool:
        """True without an ``Origin`` (not a browser's cross-site request) or with a loopback
        one; ``null`` (a sandboxed page) and other sites are refused."""
        if self.loopback_names is None or header is None:
            return True
        return _hostname(header.strip()) in self.loopback_names

    def authorized(self, header: str | None) -> bool:
        """True when ``header`` is ``Bearer <the token>`` (constant-time comparison)."""
        if not header:
            return False
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(presented.strip().encode(), self.token.encode())

    def start(self) -> IntrospectionServer:
        """Serve in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            kwargs={"poll_interval": 0.1},
                                            name="mnemoscope-introspection", daemon=True)
            self._thread.start()
        return self

    def serve(self) -> None:
        """Serve on this thread until :meth:`stop` is called (e.g. from a signal handler)."""
        self._httpd.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        """Stop serving, end open streams and long-polls, and close the socket."""
        self.stopping.set()
        self.source.close()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10.0)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> IntrospectionServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def serve_in_thread(engine: MemoryEngine, **options: Any) -> IntrospectionServer:
    """Run the API for ``engine`` inside the agent's own process (live events); started.

    Takes the options of :class:`IntrospectionServer`. Call ``stop()`` when done.
    """
    return IntrospectionServer(engine, **options).start()
