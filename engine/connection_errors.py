"""A failed network connection said in words, not as ``[Errno 111]``.

Connecting to a Chroma server or to an agent's ``mnemoscope serve`` fails in a handful of ways a
person can act on: nothing listens on that port, the host name does not resolve, the host is not
reachable, nothing answered in time, the server answered with an HTTP error. httpx and chromadb
report these as exception chains whose text is the operating system's (``[Errno 111]
Connection refused``, ``[Errno -2] Name or service not known``); :func:`unreachable` turns them
into one sentence naming the server, where it was looked for, what went wrong and what to check.
"""

from __future__ import annotations

import errno
import re
import socket
from urllib.parse import urlsplit

__all__ = ["connection_problem", "host_port", "unreachable"]

_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "the connection was reset",
    errno.ECONNABORTED: "the connection was aborted",
    errno.EHOSTUNREACH: "the host is unreachable",
    errno.ENETUNREACH: "the network is unreachable",
    errno.ETIMEDOUT: "no answer in time (timed out)",
    errno.EADDRNOTAVAIL: "that address is not available on this machine",
}
_DNS = "the host name could not be resolved (DNS)"
_ERRNO_IN_TEXT = re.compile(r"\[Errno (-?\d+)\]")
_DNS_TEXT = ("Name or service not known", "nodename nor servname", "getaddrinfo failed",
             "Temporary failure in name resolution", "No address associated with hostname")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first (cycles cut)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def connection_problem(exc: BaseException) -> str:
    """What went wrong with a connection, in a few words ("connection refused", ...).

    Falls back to the innermost exception's own first line when it is none of the known kinds.
    """
    chain = _chain(exc)
    for item in chain:
        if isinstance(item, socket.gaierror):
            return _DNS
        status = getattr(getattr(item, "response", None), "status_code", None)
        if isinstance(status, int) and type(item).__name__ == "HTTPStatusError":
            reason = getattr(getattr(item, "response", None), "reason_phrase", "") or ""
            return f"the server answered HTTP {status}{f' {reason}' if reason else ''}"
        name = type(item).__name__
        if name in ("ConnectTimeout", "PoolTimeout"):
            return "no answer in time while connecting (timed out)"
        if name in ("ReadTimeout", "WriteTimeout", "TimeoutException") \
                or isinstance(item, TimeoutError):
            return "the server stopped answering (timed out)"
        if isinstance(item, OSError) and item.errno in _ERRNO_WORDS:
            return _ERRNO_WORDS[item.errno]
        if name in ("SSLError",) or "CERTIFICATE_VERIFY_FAILED" in str(item):
            return "the TLS handshake failed (is it https, with a trusted certificate?)"
    for item in chain:  # httpx often keeps only the text of the OS error
        text = str(item)
        if any(marker in text for marker in _DNS_TEXT):
            return _DNS
        found = _ERRNO_IN_TEXT.search(text)
        if found:
            number = int(found.group(1))
            if number in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME),
                          socket.EAI_AGAIN):
                return _DNS
            if number in _ERRNO_WORDS:
                return _ERRNO_WORDS[number]
    innermost = chain[-1]
    text = str(innermost).strip()
    return (text.splitlines()[0] if text else type(innermost).__name__)[:200]


def host_port(url: str, default_port: int | None = None) -> str:
    """``host:port`` of ``url`` (the URL itself when it has no host)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.hostname:
        return url
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or default_port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"


def unreachable(what: str, url: str, exc: BaseException, hint: str, *,
                default_port: int | None = None) -> str:
    """One sentence for a failed connection.

    Example: ``Could not connect to the Chroma server at localhost:8000 — connection refused.
    Is `chroma run` running?``

    Args:
        what: The server, e.g. "the Chroma server".
        url: Where it was looked for.
        exc: The failure (its cause chain is read).
        hint: What to check, a question or a sentence.
        default_port: The port the URL means when it names none.
    """
    return (f"Could not connect to {what} at {host_port(url, default_port)} — "
            f"{connection_problem(exc)}. {hint}")
