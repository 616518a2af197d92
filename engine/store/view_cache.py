"""A persisted copy of an embedded store's columnar view, for fast re-opens.

Reading 100K records back from Chroma takes tens of seconds (its metadata read dominates), which
would make every start of the app on a large store slow. An embedded store has exactly one
writer (the lock), so that writer can save its view when it closes and the next opener can load
it in well under a second, provided nothing changed the store in between.

Safety rules:

* The cache is deleted *before* the first write after opening, so a crash mid-session leaves no
  cache and the next open reads Chroma (correct, just slow).
* It is written on clean close, atomically (temp files, fsync, rename), while the lock is still
  held, together with a fingerprint of ``chroma.sqlite3`` (size and mtime) taken after Chroma's
  client closed.
* An opener uses it only when the fingerprint still matches and the dimension and format version
  agree; anything else (another tool wrote the directory, a corrupt file) falls back to Chroma.

Files: ``.mnemoscope-view.npz`` (numeric columns and vectors of live rows) and
``.mnemoscope-view.json`` (format version, fingerprint, ids, contents, hashes, tags, agents,
sources).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from engine.store.view import ColumnarView

__all__ = ["fingerprint", "invalidate", "load_view", "save_view"]

CACHE_ARRAYS = ".mnemoscope-view.npz"
CACHE_META = ".mnemoscope-view.json"
FORMAT = 1
_NUMERIC = ("agent", "source", "layer", "privacy", "tier", "category", "importance",
            "confidence", "created_at", "last_accessed", "access_count", "expires_at",
            "recency_anchor", "token_estimate", "has_vector", "vectors")


def fingerprint(directory: Path) -> dict[str, int] | None:
    """Size and mtime of the store's ``chroma.sqlite3`` (None when it does not exist)."""
    try:
        stat = (directory / "chroma.sqlite3").stat()
    except OSError:
        return None
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def invalidate(directory: Path) -> None:
    """Delete the cache (before the first write of a session)."""
    for name in (CACHE_META, CACHE_ARRAYS):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def _atomic_write(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_view(view: ColumnarView, directory: Path, *, arrays_current: bool) -> None:
    """Write the cache for ``view`` with the current fingerprint.

    Args:
        arrays_current: The arrays file on disk already matches ``view`` (no write happened
            since it was loaded); only the fingerprint is refreshed.
    """
    stamp = fingerprint(directory)
    if stamp is None:
        return
    snapshot = view.snapshot()
    live = snapshot.live_rows
    if not arrays_current or not (directory / CACHE_ARRAYS).exists():
        columns = {name: getattr(snapshot, name)[live] for name in _NUMERIC}
        _atomic_write(directory / CACHE_ARRAYS, lambda h: np.savez(h, **columns))
    rows = live.tolist()
    meta = {
        "format": FORMAT, "dimension": view.dimension, "fingerprint": stamp, "count": len(rows),
        "ids": [snapshot.ids[r] for r in rows], "contents": [snapshot.contents[r] for r in rows],
        "hashes": [snapshot.hashes[r] for r in rows],
        "tags": [list(snapshot.tags[r]) for r in rows],
        "agents": list(snapshot.agents), "sources": list(snapshot.sources),
    }
    _atomic_write(directory / CACHE_META,
                  lambda h: h.write(json.dumps(meta, ensure_ascii=False).encode("utf-8")))


def load_view(directory: Path, dimension: int,
              stamp: dict[str, int] | None) -> ColumnarView | None:
    """The cached view if it was saved for the store as ``stamp`` fingerprints it, else None."""
    try:
        meta = json.loads((directory / CACHE_META).read_text(encoding="utf-8"))
        if (meta.get("format") != FORMAT or meta.get("dimension") != dimension
                or stamp is None or meta.get("fingerprint") != stamp):
            return None
        # Open the file ourselves: np.load leaks its handle when the archive is damaged.
        with (directory / CACHE_ARRAYS).open("rb") as handle, \
                np.load(handle, allow_pickle=False) as data:
            columns = {name: data[name] for name in _NUMERIC}
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None
    count = int(meta["count"])
    if any(len(column) != count for column in columns.values()) or len(meta["ids"]) != count:
        return None
    return ColumnarView.from_columns(
        dimension, columns, ids=meta["ids"], contents=meta["contents"], hashes=meta["hashes"],
        tags=[tuple(t) for t in meta["tags"]], agents=meta["agents"], sources=meta["sources"])
