"""``mnemoscope mcp``: the MCP memory server for agents (app/mcp_server.py, docs/agents.md).

Over stdio (the default: an MCP client such as Claude Desktop or Cursor spawns this command
and talks on its stdin/stdout, so nothing else is written to stdout) or over streamable HTTP
on loopback (``--http``) behind a bearer token. With ``--api-port`` the same process also
serves the read-only introspection API over the same engine, which the desktop app attaches to
(File → Attach) to watch the agent's memory live.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import Any

from app.cli.commands.serve import check_bind, remote_bind_warning
from app.cli.context import CliContext
from engine.errors import ConfigInvalid
from engine.introspection import MIN_TOKEN_CHARS, TOKEN_ENV

__all__ = ["MCP_TOKEN_ENV", "register"]

MCP_TOKEN_ENV = "MNEMOSCOPE_MCP_TOKEN"


def register(subparsers: Any) -> None:
    """Add the ``mcp`` command."""
    mcp = subparsers.add_parser(
        "mcp", help="serve the store to agents as an MCP memory server (stdio or HTTP)",
        description="Serve the selected store's memory tools (add, search, get, list, update, "
                    "delete, pause, archive, resume, review) over the Model Context Protocol. "
                    "Default transport: stdio, for a client that spawns this command. The store "
                    "is opened for writing (an embedded store is locked for this process).")
    mcp.add_argument("--http", action="store_true",
                     help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; "
                          f"requests need the bearer token (--token, ${MCP_TOKEN_ENV}, or a "
                          "fresh one printed at start)")
    mcp.add_argument("--host", default="127.0.0.1",
                     help="--http: interface to bind (default 127.0.0.1; others need "
                          "--allow-remote)")
    mcp.add_argument("--port", type=int, default=8766, help="--http: TCP port (default 8766; "
                                                            "0 = any free port)")
    mcp.add_argument("--token", dest="mcp_token", metavar="TOKEN",
                     help=f"--http: the bearer token clients must send (default: ${MCP_TOKEN_ENV}"
                          ", else a fresh one, printed)")
    mcp.add_argument("--allow-remote", action="store_true",
                     help="permit binding a non-loopback address (no TLS: use a tunnel)")
    mcp.add_argument("--api-port", type=int, default=None, metavar="PORT",
                     help="also serve the read-only introspection API on 127.0.0.1:PORT "
                          f"(0 = any free port; token ${TOKEN_ENV} or a fresh one) so the "
                          "desktop app can attach and watch live")
    mcp.set_defaults(handler=_mcp)


def _mcp(args: argparse.Namespace, ctx: CliContext) -> int:
    from app.mcp_server import MemoryTools, bind, build_server, engine_services

    # Everything is checked before the store is opened: a bad option writes nothing.
    if args.http:
        check_bind(args.host, args.port, allow_remote=args.allow_remote)
    if args.api_port is not None:
        check_bind("127.0.0.1", args.api_port, allow_remote=False, port_option="--api-port")
    token = args.mcp_token or os.environ.get(MCP_TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigInvalid("--token", "<hidden>", f"must be at least {MIN_TOKEN_CHARS} "
                                                   "characters")
    sock = bind(args.host, args.port) if args.http else None
    try:
        # The model loads in the background: the client's handshake and tools/list are
        # answered at once, the first call that embeds waits for it (ctx.wait_for_model).
        engine = ctx.open_engine()
        tools = MemoryTools(engine, ctx.policy, before_embedding=ctx.wait_for_model)
        server = build_server(tools, crash_dir=Path(ctx.settings.data_dir) / "crash")
        with engine_services(engine):
            api = _start_api(args.api_port, ctx) if args.api_port is not None else None
            try:
                if sock is None:
                    _announce_stdio(ctx, api)
                    from app.mcp_server import serve_stdio

                    serve_stdio(server)
                else:
                    warning = remote_bind_warning(args.host, redacting=ctx.redacting)
                    if warning is not None:
                        ctx.warn(warning)
                    issued = token or secrets.token_urlsafe(32)
                    from_env = args.mcp_token is None and token is not None
                    port = sock.getsockname()[1]
                    from app.mcp_server import serve_http

                    serve_http(server, sock, issued, args.host,
                               ready=lambda: _announce_http(ctx, args.host, port, issued,
                                                            from_env=from_env, api=api))
            finally:
                if api is not None:
                    api.stop()
    finally:
        if sock is not None:
            sock.close()
    return 0


def _start_api(port: int, ctx: CliContext) -> Any:
    """The introspection API over the engine the tools write (in-process: live events)."""
    from engine.introspection import serve_in_thread

    return serve_in_thread(ctx.open_engine(), host="127.0.0.1", port=port,
                           token=os.environ.get(TOKEN_ENV) or None)


def _announce_stdio(ctx: CliContext, api: Any) -> None:
    """Stdout belongs to the protocol: what a person should know goes to stderr (clients such
    as Claude Desktop keep it in their MCP log)."""
    redaction = "on" if ctx.redacting else "off"
    ctx.warn(f"Mnemoscope MCP server (stdio) on {ctx.settings.store}; redaction {redaction}")
    if api is not None:
        token = "(from $" + TOKEN_ENV + ")" if os.environ.get(TOKEN_ENV) else \
            ctx.issued(api.token)
        ctx.warn(f"Introspection API for the desktop app (File → Attach): {api.url} "
                 f"token {token}")


def _announce_http(ctx: CliContext, host: str, port: int, token: str, *, from_env: bool,
                   api: Any) -> None:
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/mcp"
    api_token = None if api is None or os.environ.get(TOKEN_ENV) else ctx.issued(api.token)
    if ctx.json:
        ctx.emit_json({"url": url, "token": None if from_env else ctx.issued(token),
                       "token_from_env": from_env, "redaction": ctx.redacting,
                       "api_url": None if api is None else api.url, "api_token": api_token,
                       "pid": os.getpid()})
    else:
        ctx.print(f"Mnemoscope MCP server (streamable HTTP) at {url}")
        ctx.print("Token: " + (f"(from ${MCP_TOKEN_ENV})" if from_env else ctx.issued(token)))
        if api is not None:
            ctx.print(f"Introspection API (File → Attach): {api.url} token "
                      f"{api_token or '(from $' + TOKEN_ENV + ')'}")
        ctx.print(f"Redaction: {'on' if ctx.redacting else 'off'}. Ctrl+C stops.")
    ctx.stdout.flush()
