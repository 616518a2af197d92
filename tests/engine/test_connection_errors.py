"""Failed connections in words (issue 20: the Attach error showed "[Errno 111]")."""

from __future__ import annotations

import errno
import socket

import httpx
import pytest

from engine.connection_errors import connection_problem, host_port, unreachable


def _wrapped(inner: BaseException) -> httpx.ConnectError:
    """An httpx error caused by ``inner``, as httpx raises them."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise httpx.ConnectError(str(exc)) from exc
    except httpx.ConnectError as outer:
        return outer


@pytest.mark.parametrize(("inner", "words"), [
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
     "the host name could not be resolved (DNS)"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "the host is unreachable"),
    (OSError(errno.ENETUNREACH, "Network is unreachable"), "the network is unreachable"),
    (ConnectionResetError(errno.ECONNRESET, "reset"), "the connection was reset"),
])
def test_os_errors_in_the_chain_are_said_in_words(inner: BaseException, words: str) -> None:
    assert connection_problem(_wrapped(inner)) == words


def test_an_errno_kept_only_as_text_is_read_from_the_text() -> None:
    assert connection_problem(httpx.ConnectError("[Errno 111] Connection refused")) \
        == "connection refused"
    assert connection_problem(httpx.ConnectError("[Errno -2] Name or service not known")) \
        == "the host name could not be resolved (DNS)"


def test_timeouts_and_http_errors() -> None:
    assert connection_problem(httpx.ConnectTimeout("timed out")) \
        == "no answer in time while connecting (timed out)"
    assert connection_problem(httpx.ReadTimeout("timed out")) \
        == "the server stopped answering (timed out)"
    request = httpx.Request("GET", "http://h:8000/api/v2/heartbeat")
    response = httpx.Response(503, request=request)
    error = httpx.HTTPStatusError("503", request=request, response=response)
    assert connection_problem(error) == "the server answered HTTP 503 Service Unavailable"


def test_unknown_failures_keep_their_own_first_line() -> None:
    assert connection_problem(RuntimeError("odd\nsecond line")) == "odd"


def test_the_sentence_names_the_server_where_what_and_what_to_check() -> None:
    refused = _wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"))
    assert unreachable("the Chroma server", "http://localhost", refused,
                       "Is `chroma run` running?", default_port=8000) == (
        "Could not connect to the Chroma server at localhost:8000 — connection refused. "
        "Is `chroma run` running?")
    assert host_port("https://example.org/x") == "example.org:443"
    assert host_port("http://[::1]:9000") == "[::1]:9000"
