"""Log lines under the exit policy (:mod:`engine.exits`): masked while redaction is on.

DESIGN decision 8: with redaction on, nothing that leaves the process shows a secret, logs
included. The CLI masks a command's log lines when its run redacts; the desktop app switches
redaction on and off while it runs, so its filter follows the window's toggle
(:class:`ToggledLogMasking`). Both install their filter with :func:`masked_log_handlers`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import IO

from app.terminal import escape_controls
from engine import ExitPolicy, Masker, RedactingLogFilter

__all__ = ["TerminalSafeFormatter", "ToggledLogMasking", "masked_log_handlers"]


class TerminalSafeFormatter(logging.Formatter):
    """Formats a record (message, traceback) as usual, then escapes its control characters:
    a log line quoting a memory or what a client sent must not drive the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, control characters shown as ``\\xNN``."""
        return escape_controls(super().format(record))


class ToggledLogMasking(logging.Filter):
    """Masks log records with the exit policy's masking while switched on.

    Records arrive on whatever thread logs (workers, the model loader); the switch is a plain
    attribute the GUI thread sets from the redaction toggle, so a worker never touches a
    QObject to learn it.

    Args:
        redactor: The configured masking function (the app's redactor).
        enabled: The initial state (the window's redaction mode).
    """

    def __init__(self, redactor: Masker, *, enabled: bool) -> None:
        super().__init__()
        self._policy = ExitPolicy(redactor)
        self._masking = RedactingLogFilter(self._policy)
        self.enabled = enabled

    def text(self, value: str) -> str:
        """``value`` masked while on: for what leaves the process beside log records (a crash
        report, :attr:`app.crash.CrashReports.mask`)."""
        return self._policy.text(value) if self.enabled else value

    def set_enabled(self, on: bool) -> None:
        """Switch masking on or off (a slot for the redaction toggle's ``changed``)."""
        self.enabled = on

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask ``record`` while on; never drops it."""
        return self._masking.filter(record) if self.enabled else True


@contextlib.contextmanager
def masked_log_handlers(log_filter: logging.Filter, stream: IO[str]) -> Iterator[None]:
    """While the block runs, log records reach ``stream`` (and the root's handlers) through
    ``log_filter``.

    Python prints warnings of unconfigured loggers through a last-resort handler that no
    filter can reach; a handler of the same level is installed in its place (its lines
    terminal-safe, :class:`TerminalSafeFormatter`), and every handler already on the root
    logger gets the filter too.
    """
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(TerminalSafeFormatter())
    handlers = [*root.handlers, handler]
    root.addHandler(handler)
    for each in handlers:
        each.addFilter(log_filter)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for each in handlers:
            each.removeFilter(log_filter)
