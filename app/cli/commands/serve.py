"""``mnemoscope serve``: the read-only introspection API for a store (docs/api.md).

With ``--writable`` this process is the store's long-lived writer, so it also runs the store's
lifecycle on its schedule (:class:`~engine.lifecycle.LifecycleScheduler`, ``MEMORY_LIFECYCLE_*``;
docs/retrieval.md "Lifecycle"). Read-only, the writer it follows runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from typing import Any

from app.cli.context import CliContext
from engine import LifecycleScheduler
from engine.errors import ConfigInvalid
from engine.introspection import (
    TOKEN_ENV,
    IntrospectionServer,
    ServerLimits,
    is_loopback,
)

__all__ = ["check_bind", "register", "remote_bind_warning"]


def register(subparsers: Any) -> None:
    """Add the ``serve`` command."""
    serve = subparsers.add_parser(
        "serve", help="serve a read-only HTTP JSON API to inspect a store (or a live agent)",
        description="Serve the read-only introspection API for the selected store. An "
                    "embedded store in use by an agent is opened read-only and followed as "
                    "the agent writes. A bearer token is required on every request: "
                    f"${TOKEN_ENV}, or a fresh one printed at start.")
    serve.add_argument("--host", default="127.0.0.1",
                       help="interface to bind (default 127.0.0.1; others need --allow-remote)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port (0 = any free port)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="permit binding a non-loopback address (no TLS: use a tunnel)")
    redaction = serve.add_mutually_exclusive_group()
    redaction.add_argument("--redaction", dest="redaction", action="store_true", default=None,
                           help="redact every response (default: the settings' redaction)")
    redaction.add_argument("--no-redaction", dest="redaction", action="store_false")
    serve.add_argument("--writable", action="store_true",
                       help="open the store for writing (this process becomes the agent's "
                            "engine; layer summaries are kept current); default read-only")
    serve.add_argument("--refresh", type=float, default=2.0, metavar="SECONDS",
                       help="read-only: shortest time between view reloads (default 2)")
    serve.add_argument("--rate", type=float, default=20.0, metavar="PER_SECOND",
                       help="requests per second per client (default 20)")
    per_client = ServerLimits().max_per_client
    serve.add_argument("--max-per-client", type=int, default=per_client, metavar="N",
                       help=f"connections at once per client address (default {per_client}; "
                            "on loopback every local client shares one address)")
    serve.set_defaults(handler=_serve)


def check_bind(host: str, port: int, *, allow_remote: bool, port_option: str = "--port") -> None:
    """Refuse a port out of range, and a non-loopback host unless ``--allow-remote`` forces it
    (``serve`` and ``mcp --http``: both expose the agent's memory).

    Raises:
        ConfigInvalid: naming the option.
    """
    if not 0 <= port <= 65535:
        raise ConfigInvalid(port_option, port, "must be in 0..65535")
    if not is_loopback(host) and not allow_remote:
        raise ConfigInvalid("--host", host, "a non-loopback address exposes the agent's "
                            "memory to the network; add --allow-remote to do it on purpose")


def remote_bind_warning(host: str, *, redacting: bool) -> str | None:
    """What to tell a person who binds a non-loopback ``host`` on purpose (``--allow-remote``),
    or None on loopback: neither server speaks TLS, so the token and the memories cross the
    network readable by anyone on the path."""
    if is_loopback(host):
        return None
    exposed = "every memory in clear" if not redacting else "the masked memories"
    return (f"warning: serving on {host} without TLS: the bearer token and {exposed} cross "
            "the network readable by anyone on the path; prefer the loopback default behind "
            "an SSH tunnel or a TLS proxy")


def _serve(args: argparse.Namespace, ctx: CliContext) -> int:
    check_bind(args.host, args.port, allow_remote=args.allow_remote)
    if args.refresh < 0:
        raise ConfigInvalid("--refresh", args.refresh, "must be >= 0")
    if args.max_per_client < 1:
        raise ConfigInvalid("--max-per-client", args.max_per_client, "must be at least 1")
    ctx.load_model = ctx.load_model and args.writable  # reading needs no embeddings
    engine = ctx.open_engine(read_only=not args.writable)
    token = os.environ.get(TOKEN_ENV) or None
    server = IntrospectionServer(
        engine, host=args.host, port=args.port, token=token, allow_remote=args.allow_remote,
        redaction=args.redaction, refresh_interval_s=args.refresh,
        limits=ServerLimits(rate_per_s=args.rate, burst=max(1, int(args.rate * 3)),
                            max_per_client=args.max_per_client))
    lifecycle = LifecycleScheduler.for_engine(engine)
    if args.writable:
        engine.start_layers()
    scheduled = lifecycle.start()  # False read-only or with MEMORY_LIFECYCLE_ENABLED=off
    lifecycle_state = {"running": scheduled, "interval_ms": lifecycle.interval_ms}
    done = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        done.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    warning = remote_bind_warning(args.host, redacting=server.redaction)
    if warning is not None:
        ctx.warn(warning)
    server.start()
    shown_token = "(from $" + TOKEN_ENV + ")" if token else ctx.issued(server.token)
    if ctx.json:
        ctx.emit_json({"url": server.url, "token": None if token else ctx.issued(server.token),
                       "token_from_env": bool(token), "mode": server.source.mode,
                       "redaction": server.redaction, "pid": os.getpid(),
                       "lifecycle": lifecycle_state})
        ctx.stdout.flush()
    else:
        ctx.print(f"Mnemoscope introspection API ({server.source.mode}) at {server.url}")
        ctx.print(f"Token: {shown_token}")
        ctx.print("Lifecycle: " + (f"every {lifecycle.interval_ms / 60_000:g} min"
                                   if scheduled else "not run here (read-only or switched off)"))
        ctx.print(f"Redaction: {'on' if server.redaction else 'off'}. Ctrl+C stops.")
        ctx.stdout.flush()
    try:
        done.wait()
    finally:
        lifecycle.stop()  # a writer: stopped before the API and the engine go
        server.stop()
        engine.close_layers()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
