"""A polling file watcher for a workspace; plain-Python callbacks (no Qt in the engine).

:class:`WorkspaceWatcher` checks the ``*.md`` files under a folder every ``interval_ms`` on
one daemon thread, comparing (modification time, size) with the previous poll, and calls the
callback with the paths that were added, changed or removed. The GUI's task runner bridges the
callback to a Qt signal; the callback runs on the watcher thread, so it must only hand the
paths over (for example to :meth:`Workspace.update_paths` on the owner's thread).

Polling is used instead of OS notifications because it behaves the same on every platform
and network share, and a workspace is small (500 files stat in about a millisecond).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileChanges", "WorkspaceWatcher"]


@dataclass(frozen=True, slots=True)
class FileChanges:
    """Paths (relative, ``/``-separated) that changed between two polls."""

    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path of the change, for :meth:`Workspace.update_paths`."""
        return (*self.added, *self.changed, *self.removed)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    base = str(root)
    prefix = len(os.path.join(base, ""))
    stack = [base]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # a folder removed while we looked
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith(".md") and entry.is_file():
                    stat = entry.stat()
                    rel = entry.path[prefix:]
                    found[rel if os.sep == "/" else rel.replace(os.sep, "/")] = (
                        stat.st_mtime_ns, stat.st_size)
            except OSError:
                continue
    return found


class WorkspaceWatcher:
    """Polls a workspace folder and reports changed card files.

    Args:
        root: The workspace folder.
        callback: Called with a :class:`FileChanges` (on the watcher thread) when a poll finds
            a change. Exceptions it raises are passed to ``on_error`` and the watcher goes on.
        interval_ms: Time between polls.
        on_error: Receives exceptions raised by ``callback``; default: ignore them.
    """

    def __init__(self, root: str | os.PathLike[str], callback: Callable[[FileChanges], None],
                 interval_ms: float = 500.0,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self.root = Path(root)
        self._callback = callback
        self._interval = interval_ms / 1000.0
        self._on_error = on_error
        self._state = _snapshot(self.root)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None and self._thread.is_alive()

    def poll(self) -> FileChanges | None:
        """Compare the folder with the last poll; call the callback and return the change.

        Thread-safe; the background thread calls it, tests may call it directly.
        """
        with self._lock:
            current = _snapshot(self.root)
            previous = self._state
            self._state = current
        added = tuple(sorted(p for p in current if p not in previous))
        removed = tuple(sorted(p for p in previous if p not in current))
        changed = tuple(sorted(p for p in current if p in previous and previous[p] != current[p]))
        if not (added or removed or changed):
            return None
        changes = FileChanges(added, changed, removed)
        try:
            self._callback(changes)
        except Exception as exc:  # a faulty subscriber must not kill the watcher
            if self._on_error is not None:
                self._on_error(exc)
        return changes

    def start(self) -> None:
        """Start polling on a daemon thread (idempotent)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="workspace-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop polling and join the thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()

    def __enter__(self) -> WorkspaceWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
