"""The read-only introspection API: inspect a live agent's memory over local HTTP JSON.

* :mod:`.server`    the HTTP server (auth, limits, routes), :func:`serve_in_thread`
* :mod:`.source`    the reads behind it (live in-process, or following a store read-only)
* :mod:`engine.exits` (not in this package) the exit policy every response is built with:
  JSON shaping, redaction, filters on the masked text
* :mod:`.client`    a small read-only client (httpx) with reconnecting event streams — import
  it from ``engine.introspection.client``; the server itself needs only the standard library
* :mod:`.remote`    the reader the desktop app attaches with (httpx): ``engine.RemoteReader``

``docs/api.md`` documents the endpoints.
"""

from engine.introspection.server import (
    MIN_TOKEN_CHARS,
    TOKEN_ENV,
    IntrospectionServer,
    ServerLimits,
    is_loopback,
    serve_in_thread,
)
from engine.introspection.source import API_VERSION, EngineSource

__all__ = [
    "API_VERSION",
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "EngineSource",
    "IntrospectionServer",
    "ServerLimits",
    "is_loopback",
    "serve_in_thread",
]
