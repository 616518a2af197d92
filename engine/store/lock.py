"""An exclusive, advisory lock on an embedded store directory.

Two processes writing one Chroma ``PersistentClient`` path silently lose embeddings (measured,
DESIGN: Storage), so an embedded store is opened by one process at a time. The lock is an OS file
lock (``flock`` on POSIX, ``msvcrt.locking`` on Windows) on ``<store>/.mnemoscope.lock``; the OS
releases it when the holder dies, so a crash never leaves a stale lock. The file also records the
holder's PID, host and start time so a second opener can say who holds it.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import IO

from engine.errors import StoreLocked, StoreUnavailable

__all__ = ["LOCK_FILENAME", "StoreLock", "read_lock_holder"]

LOCK_FILENAME = ".mnemoscope.lock"


def read_lock_holder(directory: Path) -> dict[str, object] | None:
    """What the lock file says about its holder (pid, host, since), or None."""
    try:
        text = (directory / LOCK_FILENAME).read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class StoreLock:
    """Holds the exclusive lock of ``directory`` until :meth:`release`."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._file is not None

    def acquire(self) -> None:
        """Take the lock without waiting.

        Raises:
            StoreLocked: another process (or another opener in this one) holds it.
            StoreUnavailable: the directory cannot be created or the lock file not opened.
        """
        try:
            # 0700: the folder holds the memories (and the ledger beside them) in clear;
            # with the default umask other users of the machine could read them all.
            self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle = _open_lock_file(self._directory / LOCK_FILENAME)
        except OSError as exc:
            raise StoreUnavailable(f"cannot lock store {self._directory}: {exc}") from exc
        try:
            _lock(handle)
        except OSError:
            handle.close()
            holder = read_lock_holder(self._directory) or {}
            pid = holder.get("pid")
            info = f"on {holder.get('host')}" if holder.get("host") else ""
            raise StoreLocked(str(self._directory), pid if isinstance(pid, int) else None,
                              info) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.time()}))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._file is None:
            return
        try:
            self._file.seek(0)
            self._file.truncate()
            _unlock(self._file)
        finally:
            self._file.close()
            self._file = None


def _open_lock_file(path: Path) -> IO[str]:
    """The lock file, opened for reading and writing, created if missing — never through a
    symbolic link (the store folder's own check refuses one first; ``O_NOFOLLOW`` closes the
    window after it): the holder truncates and rewrites this file, and a link planted in a
    store folder from someone else must not make that any file the user can write.

    Raises:
        OSError: it cannot be opened, is a link, or is not a regular file.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "r+", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


if sys.platform == "win32":  # pragma: no cover - exercised by the Windows CI build only
    import msvcrt

    def _lock(handle: IO[str]) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)

    def _unlock(handle: IO[str]) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(handle: IO[str]) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(handle: IO[str]) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
