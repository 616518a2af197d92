"""Crash reports: an unexpected exception becomes a file, not a traceback on the user's screen.

Every error the engine raises on purpose is an :class:`~engine.errors.EngineError` with a code
and a message naming what is wrong; anything else is a bug. The command line and the desktop
app write the bug's traceback to ``<data dir>/crash/crash-<UTC time>-<pid>.log`` with the
versions a bug report needs, and show the user one line with that path (issue 18: no command
shows a traceback for bad input).

The report holds the traceback and the command's name, not its arguments or the input: those
can be private memories (the user attaches the input themselves if they choose to).

The desktop app runs inside :func:`crash_reports`: an exception that escapes a slot or a task
(``ui.shared.tasks.spawn`` hands those to ``sys.excepthook``) is written the same way, then passed
on to the previous hook. A traceback can quote stored text (an exception message naming a
memory), so it is masked like a log line while the window's redaction mode is on
(:attr:`CrashReports.mask`, set by ``app.wiring.launch`` once the window exists), in the report
and on stderr.
"""

from __future__ import annotations

import os
import platform
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

__all__ = ["CrashReports", "crash_reports", "write_crash_report"]


def write_crash_report(exc: BaseException, directory: Path, *, command: str,
                       mask: Callable[[str], str] | None = None) -> Path | None:
    """Write ``exc``'s traceback and the versions to a new file in ``directory``.

    Args:
        exc: The unexpected exception.
        directory: Where crash reports go (created if missing).
        command: What was running (e.g. ``"ingest"``), for the report's header.
        mask: Applied to the traceback under redaction (it can quote stored text).

    Returns:
        The report's path, or None when it could not be written (a read-only or full disk:
        the caller still reports the error, without a path).
    """
    from app import __version__

    now = datetime.now(UTC)
    name = f"crash-{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}.log"
    header = [
        f"mnemoscope {__version__} crash report",
        f"time:     {now.isoformat(timespec='seconds')}",
        f"command:  {command}",
        f"python:   {platform.python_version()} ({sys.executable})",
        f"platform: {platform.platform()}",
        "",
    ]
    body = "".join(traceback.format_exception(exc))
    if mask is not None:
        body = mask(body)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # tracebacks quote text
        path = directory / name
        # errors="backslashreplace": the report must be writable whatever the exception holds
        path.write_text("\n".join(header) + body, encoding="utf-8", errors="backslashreplace")
    except OSError:
        return None
    return path


class CrashReports:
    """The crash hook installed by :func:`crash_reports`, for the app to configure.

    Attributes:
        mask: Applied to a report's traceback and to the one printed on stderr (the desktop
            app sets it to its log masking, which masks while the redaction mode is on); None
            writes them as raised.
    """

    def __init__(self) -> None:
        self.mask: Callable[[str], str] | None = None


@contextmanager
def crash_reports(directory: Path, *, command: str = "app") -> Iterator[CrashReports]:
    """While active, every uncaught exception is written to a crash report in ``directory``
    (and a line naming it to stderr) before the previous ``sys.excepthook`` runs."""
    previous = sys.excepthook
    reports = CrashReports()

    def hook(kind: type[BaseException], exc: BaseException,
             tb: TracebackType | None) -> None:
        mask = reports.mask
        if not isinstance(exc, KeyboardInterrupt):
            report = write_crash_report(exc.with_traceback(tb), directory, command=command,
                                        mask=mask)
            if report is not None:
                print(f"mnemoscope: unexpected {kind.__name__} (a bug); crash report: {report}",
                      file=sys.stderr)
        if mask is not None and previous is sys.__excepthook__:
            # Python's own hook would print the raw traceback: print it masked instead. A hook
            # someone else installed (a debugger, pytest-qt) gets the exception as raised.
            print(mask("".join(traceback.format_exception(kind, exc, tb))), end="",
                  file=sys.stderr)
            return
        previous(kind, exc, tb)

    sys.excepthook = hook
    try:
        yield reports
    finally:
        sys.excepthook = previous
