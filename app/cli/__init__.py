"""The ``mnemoscope`` command line: ``mnemoscope [--store PATH|URL] [--json] COMMAND ...``.

Command groups live in :mod:`app.cli.commands`, one module each, discovered automatically: a
module defines ``register(subparsers)`` and gives each parser a ``handler(args, ctx) -> int``.
Exit codes: 0 success, 1 an error the engine reported (message on stderr; with ``--json`` also an
``{"error": ...}`` document on stdout), 2 a usage error, 3 a dependency cycle (task commands).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from engine.errors import EngineError

__all__ = ["build_parser", "run_cli"]


def build_parser(*, with_commands: bool = True) -> argparse.ArgumentParser:
    """The parser; ``with_commands=False`` gives the global and app options only (fast)."""
    from app import __version__
    from app.cli import commands

    parser = argparse.ArgumentParser(
        prog="mnemoscope", add_help=with_commands,
        description="See and steer what your LLM agent remembers. Without a command, opens "
                    "the desktop app.",
    )
    if with_commands:
        parser.add_argument("--version", action="version",
                            version=f"mnemoscope {__version__}")
    parser.add_argument("--store", metavar="PATH|URL",
                        help="store directory or Chroma server URL "
                             "(default: $MNEMOSCOPE_STORE or the per-user store)")
    parser.add_argument("--token", metavar="TOKEN",
                        help="bearer token for a Chroma server ($MNEMOSCOPE_STORE_TOKEN)")
    parser.add_argument("--collection", metavar="NAME",
                        help="Chroma collection (default: mnemoscope_memories)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--redact", dest="redaction", action="store_true",
                        help="redaction on for this run: secrets and personal data are masked "
                             "in all output (default: $MNEMOSCOPE_REDACTION / settings)")
    parser.add_argument("--no-model", action="store_true",
                        help="do not load the embedding model (token-Jaccard similarity)")
    gui = parser.add_argument_group("desktop app (no COMMAND)")
    gui.add_argument("--screenshot", metavar="DIR",
                     help="render every view with the demo data to DIR/<view>.png and exit")
    gui.add_argument("--self-test", action="store_true",
                     help="open the app offscreen on a temporary store, exercise each view, "
                          "exit 0 or 1 with a report")
    gui.add_argument("--read-only", action="store_true", help="open the store read-only")
    if not with_commands:
        return parser
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"app.cli.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def run_cli(argv: Sequence[str], settings_env: dict[str, str] | None = None) -> int:
    """Parse ``argv`` and run the command. Returns the exit code."""
    import dataclasses

    from app.settings import load_settings

    # Launching the window must not pay for importing every command module: when the
    # arguments are app options only, parse them with the small parser.
    asks_help = any(a in ("-h", "--help", "--version") for a in argv)
    quick, rest = (None, argv) if asks_help else \
        build_parser(with_commands=False).parse_known_args(list(argv))
    args = quick if quick is not None and not rest else build_parser().parse_args(list(argv))
    try:
        settings = load_settings(settings_env)
        overrides = {}
        if args.store:
            overrides["store"] = args.store
        if args.token:
            overrides["store_token"] = args.token
        if args.redaction:
            overrides["redaction"] = True
        settings = dataclasses.replace(settings, **overrides)
    except EngineError as exc:
        from app.cli.context import escape_controls  # the message quotes the bad value

        print(escape_controls(f"error: {exc}"), file=sys.stderr)
        return 1
    if not getattr(args, "handler", None):
        from app.gui import run_gui

        return run_gui(args, settings)
    from app.cli.context import CliContext  # the engine facade: only commands need it

    ctx = CliContext(settings, json=args.json, load_model=not args.no_model,
                     collection=args.collection)
    try:
        with ctx.masked_logs():
            code: int = args.handler(args, ctx)
        return code
    except EngineError as exc:
        try:
            ctx.warn(f"error: {exc}")  # messages quote input and stored text: masked, escaped
        except EngineError:  # the redaction patterns themselves are bad: nothing to mask with
            from app.cli.context import escape_controls

            print(escape_controls(f"error: {exc}"), file=sys.stderr)
            return 1
        if ctx.json:
            ctx.emit_json({"error": {"code": exc.code, "message": str(exc)}})
        return 1
    except Exception:
        if not ctx.redacting:
            raise
        # A bug's crash report quotes locals and stored text too: masked like any output.
        import traceback

        ctx.warn(traceback.format_exc().rstrip("\n"))
        return 1
    finally:
        ctx.close()
