"""`serve` under abuse (issue 18): JSON for every error, one deadline per request, caps per
client address that displace slow clients instead of refusing everyone.

Raw sockets on loopback, so the requests can be malformed, partial or slow on purpose.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from engine.introspection import IntrospectionServer, ServerLimits
from engine.memory_engine import MemoryEngine
from tests.engine.introspection.conftest import TOKEN

AUTHORIZED = f"GET /v1/snapshot HTTP/1.0\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()


def _port(server: IntrospectionServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


@contextmanager
def _connect(server: IntrospectionServer, source: str = "127.0.0.1") -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(30.0)  # a bound for a broken server, not a figure
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", _port(server)))
        yield sock
    finally:
        sock.close()


def _answer(sock: socket.socket, start: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Read a whole answer (the server closes the connection after it)."""
    data = start
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def _error(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str, str]:
    status, headers, body = answer
    assert headers["content-type"] == "application/json; charset=utf-8", (status, body)
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message"} and error["message"]
    return status, error["code"], error["message"]


def _send(server: IntrospectionServer, raw: bytes) -> tuple[int, str, str]:
    with _connect(server) as sock:
        sock.sendall(raw)
        return _error(_answer(sock))


@pytest.fixture
def limited(engine: MemoryEngine, make_server: Callable[..., IntrospectionServer]
            ) -> Callable[..., IntrospectionServer]:
    def make(**limits: Any) -> IntrospectionServer:
        limits.setdefault("rate_per_s", 1000.0)
        limits.setdefault("burst", 1000)
        return make_server(engine, limits=ServerLimits(**limits))
    return make


@pytest.mark.parametrize(("raw", "status", "code"), [
    (b"GARBAGE\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /v1/snapshot HTTP/1.0 trailing\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /v1/snapshot HTTP/one\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /v1/snapshot\r\n", 400, "BAD_REQUEST"),  # HTTP/0.9: would get no status line
    (b"GET /v1/snapshot HTTP/2.0\r\n\r\n", 505, "HTTP_VERSION_NOT_SUPPORTED"),
    (b"BREW /v1/snapshot HTTP/1.0\r\n\r\n", 501, "METHOD_NOT_IMPLEMENTED"),
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n", 414, "URI_TOO_LONG"),
    (b"GET /v1/snapshot HTTP/1.0\r\nX-Long: " + b"x" * 70_000 + b"\r\n\r\n", 431,
     "HEADERS_TOO_LARGE"),
    (b"GET /v1/snapshot HTTP/1.0\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431, "HEADERS_TOO_LARGE"),
    (b"GET /v1/snapshot HTTP/1.0\r\n\r\n", 401, "UNAUTHORIZED"),
    (AUTHORIZED.replace(b"/v1/snapshot", b"/v1/nothing"), 404, "NOT_FOUND"),
    (AUTHORIZED.replace(b"GET", b"POST"), 405, "METHOD_NOT_ALLOWED"),
    (AUTHORIZED.replace(b"\r\n\r\n", b"\r\nContent-Length: 5\r\n\r\nhello"), 413,
     "BODY_NOT_ALLOWED"),
])
def test_every_error_is_a_json_body_with_a_code(
        server: IntrospectionServer, raw: bytes, status: int, code: str) -> None:
    assert _send(server, raw)[:2] == (status, code)
    assert server.errors == []


@pytest.mark.timeout(60)  # the old per-read timeout never ended this request
def test_the_deadline_covers_the_whole_request_not_each_read(
        limited: Callable[..., IntrospectionServer]) -> None:
    # every read is quick (a header line every 0.1 s, far inside read_timeout_s), yet the
    # request is never complete: the deadline of the whole head ends it
    server = limited(request_deadline_s=0.5, read_timeout_s=60.0)
    with _connect(server) as sock:
        sock.sendall(b"GET /v1/snapshot HTTP/1.0\r\n")
        sock.settimeout(0.1)
        first = b""
        while not first:
            try:
                first = sock.recv(65536)
            except TimeoutError:
                sock.sendall(b"X-Slow: 1\r\n")
        sock.settimeout(30.0)
        answer = _answer(sock, first)
    assert _error(answer) == (408, "REQUEST_TIMEOUT",
                              "the request was not complete within 0.5 s")
    assert server.errors == []


def test_a_full_address_displaces_its_oldest_unfinished_request(
        limited: Callable[..., IntrospectionServer]) -> None:
    server = limited(max_per_client=2)
    with ExitStack() as stack:
        oldest = stack.enter_context(_connect(server))
        oldest.sendall(b"GET /v1/snapshot HTTP/1.0\r\n")  # never finished
        newer = stack.enter_context(_connect(server))
        newer.sendall(b"GET /v1/snapshot HTTP/1.0\r\n")
        with _connect(server) as third:
            third.sendall(AUTHORIZED)
            status, _, body = _answer(third)
        assert status == 200 and json.loads(body)["api_version"]
        displaced = _error(_answer(oldest))
        assert displaced[:2] == (408, "REQUEST_TIMEOUT")
        assert "needed its connection for a newer one" in displaced[2]
        # the newer unfinished request still holds its connection and can complete it
        newer.sendall(f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        assert _answer(newer)[0] == 200


def test_connections_being_answered_are_never_displaced(
        limited: Callable[..., IntrospectionServer]) -> None:
    # two open event streams fill the address's cap: a third connection is refused (429),
    # and with both caps at 2, a connection from another address is refused (503)
    server = limited(max_per_client=2, max_connections=2, keepalive_s=0.2)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with ExitStack() as stack:
        for _ in range(2):
            stream = stack.enter_context(
                httpx.stream("GET", f"{server.url}/v1/events/stream", headers=headers))
            next(stream.iter_lines())
        status, code, message = _send(server, AUTHORIZED)
        assert (status, code) == (429, "TOO_MANY_CONNECTIONS")
        assert message == "more than 2 connections at once from 127.0.0.1"
        with _connect(server, "127.0.0.2") as other:
            other.sendall(AUTHORIZED)
            answer = _answer(other)
        assert _error(answer)[:2] == (503, "SERVER_BUSY") and answer[1]["retry-after"] == "1"
    assert server.errors == []
