"""A persisted copy of an embedded store's columnar view, for fast re-opens.

Reading 100K records back from Chroma takes 20–90 s (its metadata read dominates), which would
make every start of the app on a large store slow. An embedded store has exactly one writer (the
lock), so that writer saves its view when it closes and the next opener — writable or read-only —
loads it in a fraction of a second, provided nothing changed the records in between.

Safety rules:

* The cache is deleted *before* the first write after opening, so a crash mid-session leaves no
  cache and the next open reads Chroma (correct, just slow).
* It is written on clean close, atomically (temp files, fsync, rename; the meta file last), while
  the lock is still held, with a fingerprint of the records: the collection's id and Chroma's
  highest log sequence number (``max(seq_id)`` of ``embeddings_queue`` in ``chroma.sqlite3``),
  which every add, update, upsert and delete raises. It is read with one indexed SQLite query
  (well under a millisecond at 100K), and unlike the file's size and mtime it does not change
  when a reader merely opens the store (chromadb touches ``chroma.sqlite3`` on every open, which
  made a size+mtime fingerprint stale after the first read-only open).
* An opener uses it only when the fingerprint still matches and the dimension, format version and
  the files' shared generation agree; anything else (another tool wrote the collection, a corrupt
  or half-replaced file, a Chroma layout we do not know) falls back to reading Chroma.

Files (live rows only, in row order):

* ``.mnemoscope-view.json`` — format, dimension, fingerprint, count, generation, agents, sources
  and the distinct tag sets;
* ``.mnemoscope-view.npz`` — the numeric columns, each row's tag-set code, and ids, contents and
  hashes as one UTF-8 blob per column with the end offset (in characters) of each string;
* ``.mnemoscope-view.vectors.npy`` — the embedding matrix, memory-mapped on load and copied once
  into the view.

No pickles: a store folder may come from someone else.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.store.view import ColumnarView

__all__ = ["CACHE_ARRAYS", "CACHE_META", "CACHE_VECTORS", "fingerprint", "invalidate",
           "is_current", "load_view", "save_view"]

CACHE_ARRAYS = ".mnemoscope-view.npz"
CACHE_META = ".mnemoscope-view.json"
CACHE_VECTORS = ".mnemoscope-view.vectors.npy"
# 3: the ``state`` column (soft states); a cache of an older format is not used, so the next
# open reads Chroma and saves a new one.
FORMAT = 3
_NUMERIC = ("agent", "source", "layer", "privacy", "tier", "category", "state", "importance",
            "confidence", "created_at", "last_accessed", "access_count", "expires_at",
            "recency_anchor", "token_estimate", "has_vector")
_STRINGS = ("ids", "contents", "hashes")
_ERRORS = (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, UnicodeError,
           zipfile.BadZipFile)


def fingerprint(directory: Path, collection: str) -> dict[str, Any] | None:
    """The records' fingerprint of ``collection`` in the store at ``directory``.

    ``{"collection": <id>, "seq": <highest log sequence number>}``, read from ``chroma.sqlite3``
    without Chroma (read-only SQLite). None when the file, the collection or the tables we read
    are missing: no cache is used or saved then.
    """
    path = directory / "chroma.sqlite3"
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro",
                                                uri=True, timeout=5.0)) as db:
            found = db.execute("SELECT id FROM collections WHERE name = ?",
                               (collection,)).fetchone()
            if found is None:
                return None
            (seq,) = db.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
    except sqlite3.Error:
        return None
    return {"collection": str(found[0]), "seq": None if seq is None else int(seq)}


def invalidate(directory: Path) -> None:
    """Delete the cache (before the first write of a session); the meta file goes first."""
    for name in (CACHE_META, CACHE_ARRAYS, CACHE_VECTORS):
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


def _encode_strings(values: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """One UTF-8 blob and the end offset (in characters) of each string."""
    text = "".join(values)
    blob = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    ends = np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)))
    return blob, ends


def _decode_strings(blob: npt.NDArray[np.uint8], ends: npt.NDArray[np.int64]) -> list[str]:
    text = blob.tobytes().decode("utf-8", "surrogatepass")
    if len(ends) and (int(ends[-1]) != len(text) or bool((np.diff(ends) < 0).any())
                      or int(ends[0]) < 0):
        raise ValueError("string offsets do not match the blob")
    stops = ends.tolist()
    return [text[a:b] for a, b in zip([0, *stops[:-1]], stops, strict=True)]


def _stored(directory: Path) -> dict[str, Any] | None:
    try:
        meta: dict[str, Any] = json.loads((directory / CACHE_META).read_text(encoding="utf-8"))
    except (*_ERRORS, json.JSONDecodeError, RecursionError):  # a crafted meta nested deep
        return None
    return meta if isinstance(meta, dict) else None


# A record takes far more than this in chroma.sqlite3 (its metadata rows alone), so a meta
# ``count`` above the database's size over it cannot be the store's.
_LEAST_RECORD_BYTES = 64
# room for an .npy member's header (and the scalar ``generation``) beyond its data
_HEADER_BYTES = 1 << 16


def _sizes_fit(directory: Path, meta: dict[str, Any]) -> bool:
    """Whether the arrays file's members can belong to ``meta``'s ``count`` records, read
    from the zip's directory before anything is decompressed.

    The fingerprint is computed from the same folder, so a crafted cache matches it: a 1.5 MB
    file declaring 200M float64 (zeros compress 1000:1) cost 1.6 GB and 18 s before the count
    check after decompressing refused it. A numeric column holds at most 8 bytes a record;
    the strings (contents) at most what the database holds.
    """
    count = meta.get("count")
    database = (directory / "chroma.sqlite3").stat().st_size
    if not isinstance(count, int) or not 0 <= count <= database // _LEAST_RECORD_BYTES:
        return False
    with zipfile.ZipFile(directory / CACHE_ARRAYS) as archive:
        for member in archive.infolist():
            text = member.filename.endswith("_utf8.npy")
            limit = database if text else 8 * count
            if member.file_size > limit + _HEADER_BYTES:
                return False
    return True


def save_view(view: ColumnarView, directory: Path, collection: str, *,
              arrays_current: bool) -> None:
    """Write the cache for ``view`` with the current fingerprint.

    Args:
        collection: The collection the view mirrors.
        arrays_current: The cache on disk was loaded into ``view`` and nothing was written
            since; when its fingerprint still matches, nothing is rewritten.
    """
    stamp = fingerprint(directory, collection)
    if stamp is None:
        return
    stored = _stored(directory) if arrays_current else None
    if stored is not None and stored.get("fingerprint") == stamp \
            and stored.get("format") == FORMAT:
        return
    snapshot = view.snapshot()
    live = snapshot.live_rows
    rows = live.tolist()
    generation = uuid.uuid4().hex
    tag_sets: dict[tuple[str, ...], int] = {}
    tag_code = np.fromiter((tag_sets.setdefault(tuple(snapshot.tags[r]), len(tag_sets))
                            for r in rows), dtype=np.int32, count=len(rows))
    arrays: dict[str, Any] = {name: getattr(snapshot, name)[live] for name in _NUMERIC}
    arrays["tag_code"] = tag_code
    arrays["generation"] = np.array(generation)
    for name in _STRINGS:
        column = getattr(snapshot, name)
        arrays[f"{name}_utf8"], arrays[f"{name}_end"] = _encode_strings([column[r] for r in rows])
    vectors = np.ascontiguousarray(snapshot.vectors[live], dtype=np.float32)
    meta = {
        "format": FORMAT, "dimension": view.dimension, "fingerprint": stamp,
        "count": len(rows), "generation": generation,
        "agents": list(snapshot.agents), "sources": list(snapshot.sources),
        "tag_sets": [list(tags) for tags in tag_sets],
    }
    _atomic_write(directory / CACHE_VECTORS, lambda h: np.save(h, vectors))
    _atomic_write(directory / CACHE_ARRAYS, lambda h: np.savez(h, **arrays))
    _atomic_write(directory / CACHE_META,
                  lambda h: h.write(json.dumps(meta, ensure_ascii=False).encode("utf-8")))


def is_current(directory: Path, collection: str, dimension: int) -> bool:
    """True when the saved cache matches the store's records now (its files not checked)."""
    meta = _stored(directory)
    return (meta is not None and meta.get("format") == FORMAT
            and meta.get("dimension") == dimension
            and meta.get("fingerprint") == fingerprint(directory, collection))


def load_view(directory: Path, dimension: int,
              stamp: dict[str, Any] | None) -> ColumnarView | None:
    """The cached view if it was saved for the records ``stamp`` fingerprints, else None."""
    meta = _stored(directory)
    if (meta is None or stamp is None or meta.get("format") != FORMAT
            or meta.get("dimension") != dimension or meta.get("fingerprint") != stamp):
        return None
    try:
        return _read(directory, dimension, meta)
    except _ERRORS:
        return None


def _read(directory: Path, dimension: int, meta: dict[str, Any]) -> ColumnarView | None:
    if not _sizes_fit(directory, meta):
        return None
    count = int(meta["count"])
    # Open the file ourselves: np.load leaks its handle when the archive is damaged.
    with (directory / CACHE_ARRAYS).open("rb") as handle, \
            np.load(handle, allow_pickle=False) as data:
        if str(data["generation"]) != meta["generation"]:
            return None  # the files are from different saves
        columns = {name: data[name] for name in _NUMERIC}
        strings = {name: _decode_strings(data[f"{name}_utf8"], data[f"{name}_end"])
                   for name in _STRINGS}
        tag_code = data["tag_code"]
    tag_sets = [tuple(str(t) for t in tags) for tags in meta["tag_sets"]]
    if len(tag_code) and (int(tag_code.min()) < 0 or int(tag_code.max()) >= len(tag_sets)):
        return None
    if any(len(c) != count for c in (*columns.values(), *strings.values(), tag_code)):
        return None
    vectors = np.load(directory / CACHE_VECTORS, mmap_mode="r", allow_pickle=False)
    if vectors.shape != (count, dimension) or vectors.dtype != np.float32:
        return None
    columns["vectors"] = vectors
    try:
        return ColumnarView.from_columns(
            dimension, columns, ids=strings["ids"], contents=strings["contents"],
            hashes=strings["hashes"], tags=[tag_sets[c] for c in tag_code.tolist()],
            agents=[str(a) for a in meta["agents"]], sources=[str(s) for s in meta["sources"]])
    finally:
        del columns, vectors  # unmap the vectors file now (Windows cannot replace a mapped file)
