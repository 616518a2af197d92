"""The ``mnemoscope`` command line: ``mnemoscope [--store PATH|URL] [--json] COMMAND ...``.

Command groups live in :mod:`app.cli.commands`, one module each, discovered automatically: a
module defines ``register(subparsers)`` and gives each parser a ``handler(args, ctx) -> int``.
Exit codes: 0 success, 1 an error the engine reported (message on stderr; with ``--json`` also an
``{"error": ...}`` document on stdout), 2 a usage error, 3 a dependency cycle (task commands),
70 a bug: an unexpected exception, reported like an error (code ``INTERNAL_ERROR``) with the path
of its crash report (:mod:`app.crash`) instead of a traceback, 130 interrupted (Ctrl-C), 141
stdout closed early (``mnemoscope review list | head``: the rest of the output is dropped
quietly, as a C tool killed by SIGPIPE would).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import EngineError, StoreLocked

if TYPE_CHECKING:
    from app.cli.context import CliContext

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "build_parser",
           "report_crash", "report_error", "run_cli"]

EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: a bug, not the user's input
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


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

    from app.settings import config_dir_from, load_settings

    # Launching the window must not pay for importing every command module: when the
    # arguments are app options only, parse them with the small parser.
    asks_help = any(a in ("-h", "--help", "--version") for a in argv)
    quick, rest = (None, argv) if asks_help else \
        build_parser(with_commands=False).parse_known_args(list(argv))
    parser: argparse.ArgumentParser | None = None
    if quick is not None and not rest:
        args = quick
    else:
        parser = build_parser()
        args = parser.parse_args(list(argv))
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
                     collection=args.collection,
                     config_dir=config_dir_from(os.environ if settings_env is None
                                                else settings_env))
    try:
        try:
            if parser is not None:
                _check_text_arguments(parser, args)
            with ctx.masked_logs():
                code: int = args.handler(args, ctx)
            ctx.stdout.flush()  # a closed pipe shows here, not after the last line of Python
            return code
        finally:
            ctx.close()
    except StoreLocked as exc:
        return report_error(ctx, exc.code, _locked_message(exc), 1)
    except EngineError as exc:
        return report_error(ctx, exc.code, str(exc), 1)
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return report_error(ctx, "INTERRUPTED", "interrupted", EXIT_INTERRUPTED)
    except Exception as exc:
        return report_crash(ctx, exc, args.command)


def _locked_message(exc: StoreLocked) -> str:
    """A write command on a store another process holds: what to do, in a command's terms
    (the engine's "open this store read-only" is what the reading commands already do)."""
    who = f"PID {exc.holder_pid}" if exc.holder_pid else "another process"
    where = f" ({exc.holder_info})" if exc.holder_info else ""
    return (f"store {exc.path} is in use by {who}{where}: close it there, or use a Chroma "
            "server for several processes (list, get, search and the other reading commands "
            "work meanwhile: they open it read-only)")


def report_crash(ctx: CliContext, exc: Exception, command: str, *,
                 document: dict[str, Any] | None = None) -> int:
    """Report a bug: its traceback to a crash report (:mod:`app.crash`), one line naming that
    file to the user, an ``INTERNAL_ERROR`` error document with ``--json`` (``document`` keys
    beside it). Returns :data:`EXIT_INTERNAL`."""
    from app.crash import write_crash_report

    # under redaction the report is masked like any output (a traceback can quote stored text)
    report = write_crash_report(exc, Path(ctx.settings.data_dir) / "crash", command=command,
                                mask=ctx.policy.text if ctx.redacting else None)
    where = f"a crash report was written to {report}" if report is not None else \
        "no crash report could be written"
    return report_error(ctx, "INTERNAL_ERROR",
                        f"unexpected {type(exc).__name__}: {exc} (this is a bug; {where})",
                        EXIT_INTERNAL, crash_report=None if report is None else str(report),
                        document=document or {})


# Options whose value is a file-system path: on POSIX a path may be any bytes, which Python
# hands over as lone surrogates (surrogateescape) and ``open`` turns back into those bytes.
_PATH_DESTS = frozenset({"store", "screenshot", "file", "conversation", "out", "workspace",
                         "card", "error_stack"})


def _check_text_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse text arguments that are not valid Unicode, naming the option.

    Bytes in ``argv`` that are not UTF-8 reach Python as lone surrogates; as an agent id, a
    query or a record id they cannot be stored, hashed or looked up (the ledger's SQLite raised
    ``UnicodeEncodeError`` deep inside ``events``, ``fate``, ``search``, ``compact``). One check
    here covers every command.

    Raises:
        ValidationError: naming the option (``--agent``) or argument.
    """
    from engine.records import check_text

    names = _argument_names(parser, args)
    for dest, value in vars(args).items():
        if dest in _PATH_DESTS:
            continue
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, str):
                check_text(item, names.get(dest, dest))


def _argument_names(parser: argparse.ArgumentParser,
                    args: argparse.Namespace | None = None) -> dict[str, str]:
    """dest -> how the user wrote it (``--agent``, ``TEXT``), in the (sub-)commands that ran:
    a dest another sub-command spells differently (``add TEXT`` and ``map-collection --text``)
    is named as the running one spells it."""
    names: dict[str, str] = {}
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None) if args is not None else None
            subs = [action.choices[chosen]] if chosen in action.choices else \
                list(action.choices.values())
            for sub in subs:
                for dest, name in _argument_names(sub, args).items():
                    names.setdefault(dest, name)
        elif action.option_strings:
            names.setdefault(action.dest, action.option_strings[-1])
        else:
            names.setdefault(action.dest, str(action.metavar or action.dest))
    return names


def report_error(ctx: CliContext, code: str, message: str, exit_code: int,
                 **extra: Any) -> int:
    """Show an error on stderr and, with ``--json``, as ``{"error": {"code", "message", ...}}``
    on stdout; return ``exit_code``. ``extra`` keys go into the error object (or, given as
    ``document``, beside it: what an interrupted ingest committed)."""
    # Text from the input may hold what UTF-8 cannot encode (a lone surrogate): escape it, so
    # reporting an error never raises one of its own.
    from app.cli.context import escape_controls

    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    document = extra.pop("document", {})
    try:
        try:
            ctx.warn(f"error: {message}")  # messages quote input and stored text: masked
        except EngineError:  # the redaction patterns themselves are bad: nothing to mask with
            print(escape_controls(f"error: {message}"), file=ctx.stderr)
            return exit_code
        if ctx.json:
            ctx.emit_json({**document, "error": {"code": code, "message": message, **extra}})
            ctx.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    return exit_code


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of a closed pipe does not
    print a BrokenPipeError of its own (the recipe of Python's ``signal`` documentation)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
