"""Memory records in Chroma: embedded ``PersistentClient`` or ``HttpClient`` to a server.

The same :class:`MemoryStore` code path serves both (DESIGN: Storage). Embeddings always come from
the engine (never Chroma's default embedding function, which would download a model). The
collection uses cosine space and records ``schema_version`` in its metadata. Writes go in batches
of ``get_max_batch_size()``. An embedded store is locked for one process (:mod:`.lock`); a
read-only open takes no lock and refuses writes.

A collection written by another tool opens read-only: a sample of its records decides its layout
(mem0, LangChain, LlamaIndex, plain, or a saved mapping) and :mod:`.foreign` maps its fields onto
records; vectors of another length than the model's are left out of the view.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import numpy as np
import numpy.typing as npt

from engine.connection_errors import unreachable
from engine.errors import (
    Cancelled,
    RecordNotFound,
    SchemaMismatch,
    StoreReadOnly,
    StoreTimeout,
    StoreUnavailable,
    ValidationError,
)
from engine.records import MemoryRecord, RecordState
from engine.store import view_cache
from engine.store.codec import (
    SCHEMA_VERSION,
    SCHEMA_VERSION_BASE,
    SCHEMA_VERSION_STATES,
    is_lean,
    lean_metadata,
    record_from_chroma,
    record_to_chroma,
    stored_version,
)
from engine.store.filtered_scan import NewestScan, matches
from engine.store.foreign import (
    DETECT_SAMPLE,
    FieldMapping,
    ForeignInfo,
    ForeignLayout,
    ForeignReader,
    ForeignSample,
    detect_layout,
)
from engine.store.lock import StoreLock, read_lock_holder
from engine.store.view import ColumnarView

__all__ = [
    "DEFAULT_COLLECTION",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_SCAN_FROM",
    "DEFAULT_SCAN_WINDOW",
    "CollectionInfo",
    "MemoryStore",
    "StoreSpec",
    "close_client",
    "list_collections",
]

DEFAULT_COLLECTION = "mnemoscope_memories"
_READ_PAGE = 250
"""Records per Chroma ``get`` when reading the view. chromadb converts a page's embeddings and
metadata to Python objects holding the GIL: 2000-record pages froze every other thread (the GUI)
for up to 176 ms each, 250-record pages for at most 25 ms, and the whole 100K read was no slower
(measured: 34.5 s vs 22.0 s at load ~5)."""
_ID_PAGE = 20_000
"""Ids per Chroma ``get`` when listing every record before reading the view by id (ids only:
~5 ms of Python objects each, under the GUI's 25 ms)."""
_MIGRATING = "migrating_to"
"""Collection metadata: set while the records are rewritten in the layout of this schema
version (``MemoryStore._migrate``), so a killed migration resumes."""
_SOFT_STATES = "soft_states"
"""Collection metadata: some record was ever written paused or archived (what
:meth:`MemoryStore.preview` needs to know; a schema-2 store is taken to have)."""
_URL = re.compile(r"^https?://", re.IGNORECASE)
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 60.0
"""A server store's timeouts. chromadb 1.5 builds its HTTP session with no timeout at all, so a
stopped server (SIGSTOP, a hung host) blocked every call forever. Connecting is quick on any
network a store is used over; the read timeout waits for the answer to one call, and the slowest
legitimate call is an upsert of a whole batch, which the server answers only once its vectors
are in the HNSW index (about 5 ms of CPU per record: docs/ingest.md), so it stays generous."""

DEFAULT_SCAN_WINDOW = 2500
"""Newest records one Chroma read of a filtered server page examines (issue 24). At 1M records
one unfiltered read of the newest 2,500 records, documents and metadata, took 0.83 s on the
loaded 2-core machine (1,000: 0.67 s, 10,000: 2.7 s; about 0.3 s of it is Chroma stepping
over the older records to its offset), and a filter matching one record in 12 fills a
200-row page from it."""
DEFAULT_SCAN_FROM = 250_000
"""Collections of at least this many records read filtered pages from their newest records.
Chroma's ``where`` grows with the store and the scan does not: agent + layer (one record in 12,
a flat-schema store, load 5-6 on 2 cores) took 352 ms by ``where`` and 955 ms by scan at 100K,
1,643 ms by ``where`` and 1,136 ms by scan at 1M; they cross near 250K."""
_SCAN_MAX_WINDOWS = 2.0
"""A filtered page whose matches so far say it needs more windows than this is selected by
Chroma's ``where`` instead (a rare filter: Chroma's cost grows with the records its clauses
match, the scan's with the records it reads)."""

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Where a store is and how to open it.

    Attributes:
        location: A directory path (embedded) or an ``http(s)://host:port`` URL (server).
        token: Bearer token for a server that requires one.
        read_only: Open without the lock and refuse writes.
        collection: Collection name; other tools' collections open read-only.
        connect_timeout_s: Server stores: longest wait for a connection.
        read_timeout_s: Server stores: longest wait for the answer to one call (and for
            sending one). A call that runs out raises :class:`~engine.errors.StoreTimeout`.
        mapping: For a collection written by another tool: which of its metadata keys hold
            the text, agent, time and importance (:mod:`engine.store.foreign`); ignored for
            Mnemoscope's own collections.
        scan_window: Server stores: how many of the newest records one Chroma read of a
            filtered page examines (:meth:`MemoryStore.server_scan`).
        scan_from: Server stores: filtered pages of a collection of at least this many records
            are read from its newest records; below, Chroma's ``where`` is faster.

    Raises:
        ValidationError: a timeout that is not a positive finite number, a scan window
            below 1, or a negative ``scan_from``.
    """

    location: str
    token: str | None = None
    read_only: bool = False
    collection: str = DEFAULT_COLLECTION
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    mapping: FieldMapping | None = None
    scan_window: int = DEFAULT_SCAN_WINDOW
    scan_from: int = DEFAULT_SCAN_FROM

    def __post_init__(self) -> None:
        for name, least in (("scan_window", 1), ("scan_from", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValidationError(name, value,
                                      f"must be a whole number of records, at least {least}")
        for name in ("connect_timeout_s", "read_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValidationError(name, value, "must be a positive number of seconds")

    @property
    def is_remote(self) -> bool:
        """True for a server URL."""
        return bool(_URL.match(self.location))

    @property
    def exists(self) -> bool:
        """A server (asked when opened), or a directory that holds a Chroma store."""
        return self.is_remote or (Path(self.location).expanduser() / "chroma.sqlite3").exists()


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """A collection found in a Chroma directory or server."""

    name: str
    count: int
    ours: bool
    schema_version: int | None


def _batches(rows: npt.NDArray[np.intp], size: int) -> list[npt.NDArray[np.intp]]:
    return [rows[start:start + size] for start in range(0, len(rows), size)]


@dataclass(frozen=True, slots=True)
class _Call:
    """One Chroma call of a write: ``update`` (metadata only) or ``upsert`` of these rows."""

    kind: Literal["update", "upsert"]
    rows: npt.NDArray[np.intp]


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


def _connect(spec: StoreSpec) -> Any:
    """Create the Chroma client for ``spec`` (embedded or HTTP), checking the server answers."""
    import chromadb

    if spec.is_remote:
        url = urlparse(spec.location)
        if not url.hostname:
            raise ValidationError("store", spec.location, "a server URL needs a host")
        try:
            port = url.port or (443 if url.scheme == "https" else 8000)
        except ValueError as exc:
            raise ValidationError("store", spec.location, f"bad port: {exc}") from exc
        headers = {"Authorization": f"Bearer {spec.token}"} if spec.token else None
        action = f"connecting to {spec.location}"
        client = None
        try:
            _probe(spec, f"{url.scheme}://{url.netloc}", headers)
            client = chromadb.HttpClient(host=url.hostname, port=port,
                                         ssl=url.scheme == "https", headers=headers,
                                         settings=_settings())
            _set_timeouts(client, spec)
            client.heartbeat()
        except Exception as exc:
            if client is not None:
                close_client(client)
            failure = _failure(spec, action, exc)
            if isinstance(failure, StoreTimeout):
                raise failure from exc
            raise StoreUnavailable(unreachable(
                "the Chroma server", spec.location, exc,
                "Is `chroma run` running, and are the URL and token right?",
                default_port=port)) from exc
        return client
    path = Path(spec.location).expanduser()
    if spec.read_only and not spec.exists:
        raise StoreUnavailable(f"no Chroma store at {path} (no chroma.sqlite3 there)")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)  # as StoreLock makes it
        return chromadb.PersistentClient(path=str(path), settings=_settings())
    except Exception as exc:
        _forget_failed_system(str(path))
        raise StoreUnavailable(f"cannot open the Chroma store at {path}: {_short(exc)}") from exc


def _timeout(spec: StoreSpec) -> Any:
    import httpx

    return httpx.Timeout(spec.read_timeout_s, connect=spec.connect_timeout_s,
                         pool=spec.connect_timeout_s)


def _probe(spec: StoreSpec, base: str, headers: dict[str, str] | None) -> None:
    """Ask the server for its heartbeat within the store's timeouts.

    ``chromadb.HttpClient(...)`` already calls the server (who am I, tenant, database) with
    its session's timeout, which is none: against a stopped server the constructor itself
    would hang. Only a server that answered a moment ago gets that far.
    """
    import httpx

    with httpx.Client(timeout=_timeout(spec), headers=headers) as probe:
        probe.get(f"{base}/api/v2/heartbeat")


def _set_timeouts(client: Any, spec: StoreSpec) -> None:
    """Give the HTTP session of a chromadb ``HttpClient`` the store's timeouts.

    chromadb 1.5 builds ``httpx.Client(timeout=None)`` and offers no setting for it; every
    call goes through that one session (the admin client shares its system), whose default
    timeout applies to each request.

    Raises:
        StoreUnavailable: this chromadb has no such session (its internals changed), so the
            store could hang; refusing is better than that.
    """
    sessions = {id(s): s for s in (getattr(getattr(o, "_server", None), "_session", None)
                                    for o in (client, getattr(client, "_admin_client", None)))
                if s is not None and hasattr(s, "timeout")}
    if not sessions:
        raise StoreUnavailable("this chromadb's HTTP client has no session to set timeouts "
                               "on; a server store would wait forever for a stopped server")
    for session in sessions.values():
        session.timeout = _timeout(spec)


def _check_store_folder(directory: Path) -> None:
    """Refuse a path that is a file, a folder holding other files and no store, or a store
    folder holding symbolic links.

    A store is created in a new or empty folder; a mistyped ``--store`` (a document, a home
    folder) must not become a Chroma store among the user's files. A store folder may come
    from someone else (an archive, a shared drive): a link in it (``.mnemoscope.lock`` →
    ``~/.bashrc``) would have this process write — even a read-only open, as Chroma touches
    ``chroma.sqlite3`` — to whatever file it points at, so a folder with one is not opened.

    Raises:
        StoreUnavailable: naming the path and what to give instead.
    """
    if not directory.exists():
        return
    if not directory.is_dir():
        raise StoreUnavailable(f"{directory} is a file, not a store folder: give the folder "
                               "of a store, or a new or empty folder to create one in")
    try:
        names = [entry.name for entry in directory.iterdir()]
    except OSError as exc:
        raise StoreUnavailable(f"cannot read the folder {directory}: {exc.strerror or exc}"
                               ) from exc
    if any(name == "chroma.sqlite3" or name.startswith((".mnemoscope", "mnemoscope-"))
           for name in names):
        _refuse_links(directory)
        return  # a store (ours, or another tool's Chroma folder), perhaps only part made
    others = sorted(name for name in names if not name.startswith("."))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3:,} more" if len(others) > 3
                                         else "")
        raise StoreUnavailable(f"{directory} holds other files ({shown}) and no store: give "
                               "the folder of a store, or a new or empty folder to create "
                               "one in")


def _refuse_links(directory: Path) -> None:
    """Refuse a symbolic link among the store folder's files or in its subfolders (Chroma's
    segment folders hold the index files it rewrites), naming the first found.

    Raises:
        StoreUnavailable: a link was found (or the folder could not be read).
    """
    try:
        for entry in directory.iterdir():
            inner = [entry] if entry.is_symlink() or not entry.is_dir() else \
                [entry, *entry.iterdir()]
            link = next((path for path in inner if path.is_symlink()), None)
            if link is not None:
                raise StoreUnavailable(
                    f"{link} is a symbolic link (to {os.readlink(link)}); a store folder must "
                    "hold its own files, or opening it would write to the file the link "
                    "points at. This folder may come from someone else: remove the link (or "
                    "copy the file in, if you made it)")
    except OSError as exc:
        raise StoreUnavailable(f"cannot read the folder {directory}: {exc.strerror or exc}"
                               ) from exc


def _timed_out(spec: StoreSpec, exc: BaseException) -> tuple[str, float] | None:
    """``(phase, seconds)`` when ``exc`` (or what caused it) is an HTTP timeout, else None."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (httpx.ConnectTimeout, httpx.PoolTimeout)):
            return "connect", spec.connect_timeout_s
        if isinstance(seen, httpx.TimeoutException):
            return "read", spec.read_timeout_s
        seen = seen.__cause__ or seen.__context__
    return None


def _failure(spec: StoreSpec, action: str, exc: BaseException, *,
             in_flight: int = 0) -> StoreUnavailable:
    """The error for a failed Chroma call: :class:`StoreTimeout` when a server did not answer
    in time (naming it and the timeout), else :class:`StoreUnavailable` with the cause.

    Args:
        action: What was being done, e.g. ``"reading <location>"``.
        in_flight: Records a write had sent when it timed out.
    """
    timed_out = _timed_out(spec, exc) if spec.is_remote else None
    if timed_out is None:
        return StoreUnavailable(f"{action} failed: {_short(exc)}")
    phase, seconds = timed_out
    return StoreTimeout(spec.location, action, phase, seconds, in_flight=in_flight)


def _forget_failed_system(identifier: str) -> None:
    """Drop Chroma's cached system for a path whose opening failed.

    chromadb 1.5 caches one system per path per process *before* starting it; when the start
    fails (read-only filesystem, disk full) the broken system stays cached and every later
    open of that path in the process fails with "'RustBindingsAPI' object has no attribute
    'bindings'", even once the cause is gone (tests/reliability/test_disk.py).
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_system.pop(identifier, None)
    SharedSystemClient._identifier_to_refcount.pop(identifier, None)


def close_client(client: Any) -> None:
    """Close a Chroma client, including the httpx session its HTTP client leaves open.

    Use it for every ``chromadb.HttpClient`` (tests and benchmarks too): chromadb's own
    ``close()`` leaves the session's sockets to the garbage collector, which warns.
    """
    owners = (client, getattr(client, "_admin_client", None))
    sessions = [getattr(getattr(o, "_server", None), "_session", None) for o in owners]
    with contextlib.suppress(Exception):  # closing must not fail during shutdown
        client.close()
    # chromadb 1.5's FastAPI client never closes its httpx.Client, leaking sockets.
    for session in sessions:
        if session is not None and hasattr(session, "close"):
            session.close()


def _records(count: int) -> str:
    return f"{count} record" if count == 1 else f"{count} records"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


CLAIMS_SUFFIX = "__claims"
CLAIM_STALE_SECONDS = 60.0
# A claim matters only between a writer's version check and its write (milliseconds); one
# kept an hour can no longer decide anything, so older ones are deleted, at most every 10 min.
CLAIM_KEEP_SECONDS = 3600.0
CLAIM_PRUNE_EVERY_SECONDS = 600.0


def list_collections(spec: StoreSpec) -> list[CollectionInfo]:
    """Collections in the directory or server of ``spec`` (opens it read-only, no lock)."""
    client = _connect(dataclasses.replace(spec, read_only=True))
    infos = []
    try:
        for item in client.list_collections():
            name = item if isinstance(item, str) else item.name
            if name.endswith(CLAIMS_SUFFIX):
                continue  # the edit-claims side collection of a store (claim_version)
            collection = client.get_collection(name, embedding_function=None)
            meta = collection.metadata or {}
            version = meta.get("schema_version")
            infos.append(CollectionInfo(name, collection.count(), version is not None,
                                        int(version) if isinstance(version, int) else None))
    except Exception as exc:
        raise _failure(spec, f"listing the collections of {spec.location}", exc) from exc
    finally:
        close_client(client)
    return infos


class MemoryStore:
    """Records in one Chroma collection plus the engine's columnar view of them.

    Build with :meth:`open`. Not a context manager on purpose: the engine owns its lifetime.

    The view is complete once :meth:`open` returns, except after ``open(defer_view=True)``
    without a usable view cache: then :meth:`load_view` (run by the caller on a worker) builds
    it, and until it has, :attr:`view` and everything that needs it wait, while :meth:`count`
    and :meth:`preview` answer from Chroma directly.
    """

    def __init__(self, spec: StoreSpec, client: Any, collection: Any, view: ColumnarView, *,
                 read_only: bool, foreign: bool, lock: StoreLock | None) -> None:
        self._spec = spec
        self._client = client
        self._collection = collection
        self._view = view
        self._read_only = read_only
        self._foreign = foreign
        self._lock = lock
        self._max_batch = 1000
        # The persisted view (embedded stores): valid until this session's first write.
        self._cache_dir = None if spec.is_remote else Path(spec.location).expanduser()
        self._view_from_cache = False
        self._dirty = False
        self._claims_pruned_at = 0.0  # time.monotonic() of the last prune (0: not yet)
        # Deferred view (open(defer_view=True)): set once load_view finished or failed.
        self._view_ready = threading.Event()
        self._view_ready.set()
        self._view_failure: str | None = None
        self._stop_loading = threading.Event()
        self._loading = threading.Lock()
        self._chroma_count = 0
        self._warm: threading.Thread | None = None
        self._reader: ForeignReader | None = None  # a foreign collection's field mapping
        self._foreign_info: ForeignInfo | None = None
        self._opened_at = 0.0  # the created time of foreign records without one
        meta = (collection.metadata or {}) if collection is not None else {}
        version = meta.get("schema_version")
        self._schema_version = version if isinstance(version, int) else SCHEMA_VERSION_BASE
        self._migrating = _MIGRATING in meta
        self._soft_states = bool(meta.get(_SOFT_STATES)) \
            or self._schema_version == SCHEMA_VERSION_STATES
        # server_page's ids of the last filter: (filters, ids in Chroma's order)
        self._server_ids: tuple[str, list[str]] | None = None
        self._server_ids_lock = threading.Lock()
        # server_scan's cursor of the last filter (guarded by _server_ids_lock too)
        self._scan: NewestScan | None = None
        if client is not None:
            try:
                self._max_batch = max(1, int(client.get_max_batch_size()))
            except Exception:
                self._max_batch = 1000

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, spec: StoreSpec, *, dimension: int = 384, now_ms: float = 0.0,
             progress: ProgressFn | None = None, defer_view: bool = False) -> MemoryStore:
        """Open (creating if needed and allowed) the store described by ``spec``.

        Args:
            progress: Called with (loaded, total) while the view is read from Chroma.
            defer_view: When the view cannot come from the cache, return as soon as Chroma is
                open (count known) and leave reading the view to :meth:`load_view`.

        Raises:
            StoreLocked: an embedded store is held by another process (open read-only instead).
            StoreUnavailable: the server is unreachable or the directory unusable.
            SchemaMismatch: the collection was written by a newer Mnemoscope.
        """
        lock: StoreLock | None = None
        directory = None if spec.is_remote else Path(spec.location).expanduser()
        if directory is not None:
            _check_store_folder(directory)
        if directory is not None and not spec.read_only:
            lock = StoreLock(directory)
            lock.acquire()
        stamp = view_cache.fingerprint(directory, spec.collection) \
            if directory is not None else None
        client = None
        try:
            client = _connect(spec)
            collection, foreign = cls._collection_for(client, spec, dimension)
            read_only = spec.read_only or foreign
            view = ColumnarView(dimension)
            store = cls(spec, client, collection, view, read_only=read_only, foreign=foreign,
                        lock=lock)
            store._opened_at = now_ms
            if foreign and collection is not None:
                store._detect_layout(dimension)
            cached = None
            if directory is not None and stamp is not None and not foreign \
                    and collection is not None:
                cached = view_cache.load_view(directory, dimension, stamp)
            if cached is not None:
                store._migrate(progress)
                store._view = cached
                store._view_from_cache = True
                store._start_warm_up()
                if progress is not None:
                    progress(len(cached), len(cached))
            elif defer_view and collection is not None:
                # the migration runs in load_view, on the caller's worker: a server store
                # answers its first pages meanwhile (the codec reads both layouts)
                store._chroma_count = store._count_in_chroma()
                store._view_ready.clear()
            else:
                store._migrate(progress)
                store._view = store._read_view(now_ms, progress)
            return store
        except BaseException:
            if client is not None:  # its HTTP session's sockets, or the embedded system
                close_client(client)
            if lock is not None:
                lock.release()
            raise

    @staticmethod
    def _collection_for(client: Any, spec: StoreSpec, dimension: int) -> tuple[Any, bool]:
        try:
            existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
            if spec.collection in existing:
                collection = client.get_collection(spec.collection, embedding_function=None)
            elif spec.read_only:
                return None, spec.collection != DEFAULT_COLLECTION
            else:
                collection = client.create_collection(
                    spec.collection,
                    metadata={"schema_version": SCHEMA_VERSION, "dimension": dimension,
                              "created_by": "mnemoscope"},
                    configuration={"hnsw": {"space": "cosine"}},
                    embedding_function=None,
                )
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise _failure(spec, f"opening collection {spec.collection!r} at {spec.location}",
                           exc) from exc
        meta = collection.metadata or {}
        version = meta.get("schema_version")
        if version is None:
            return collection, True
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise SchemaMismatch(
                f"collection {spec.collection!r} at {spec.location} has schema version "
                f"{version!r}; this Mnemoscope reads up to {SCHEMA_VERSION}. Upgrade Mnemoscope."
            )
        stored_dim = meta.get("dimension")
        if isinstance(stored_dim, int) and stored_dim != dimension:
            raise SchemaMismatch(
                f"collection {spec.collection!r} holds {stored_dim}-d vectors; the configured "
                f"model makes {dimension}-d vectors"
            )
        return collection, False

    def _detect_layout(self, dimension: int) -> None:
        """Decide a foreign collection's layout from its first records (and its vectors'
        length), so every read maps its fields (:mod:`engine.store.foreign`)."""
        with self._reading():
            sample = self._collection.get(limit=DETECT_SAMPLE,
                                          include=["documents", "metadatas", "embeddings"])
        detected = detect_layout(self._spec.collection, sample["documents"] or [],
                                 sample["metadatas"] or [])
        mapping = self._spec.mapping if self._spec.mapping is not None \
            and not self._spec.mapping.empty else None
        layout = ForeignLayout.CUSTOM if mapping is not None else detected
        # A custom mapping still reads the detected tool's own keys for what it leaves out.
        self._reader = ForeignReader(detected, self._spec.collection, mapping)
        vectors = sample.get("embeddings")
        width = None if vectors is None or len(vectors) == 0 else len(vectors[0])
        self._foreign_info = ForeignInfo(layout, mapping, width,
                                         width is None or width == dimension)

    def foreign_sample(self, limit: int = DETECT_SAMPLE) -> ForeignSample:
        """The first ``limit`` records of this foreign collection as Chroma holds them (what
        a mapping is chosen from; the GUI's field-mapping dialog).

        Raises:
            ValidationError: this is a Mnemoscope collection (no mapping applies).
            StoreUnavailable: Chroma could not be read.
        """
        if self._reader is None or self._collection is None:
            raise ValidationError("collection", self._spec.collection,
                                  "is a Mnemoscope collection; mappings are for other tools' ones")
        with self._reading():
            got = self._collection.get(limit=limit, include=["documents", "metadatas"])
        ids = tuple(str(i) for i in got["ids"])
        documents = tuple(got["documents"] or [None] * len(ids))
        metadatas = tuple(dict(m or {}) for m in (got["metadatas"] or [None] * len(ids)))
        return ForeignSample(self._spec.collection, self._reader.layout, ids, documents,
                             metadatas)

    def _decode(self, record_id: str, document: str | None, metadata: Any,
                now_ms: float) -> MemoryRecord:
        """A record from what Chroma returned: the foreign layout's mapping, or our codec."""
        if self._reader is not None:
            return self._reader.record(record_id, document, metadata, now_ms=now_ms)
        return record_from_chroma(record_id, document, metadata, lenient=True, now_ms=now_ms)

    def _start_warm_up(self) -> None:
        """Make Chroma load the collection's segments on a thread, after a cached open.

        The first read of a collection in a process loads its index (~0.2 s of CPU at 100K,
        GIL released). Opened from the cache, nothing needs Chroma for the first page of the
        records browser (``list_rows`` reads the view), so the load runs in the background
        instead of in front of the first record detail or write.
        """
        collection = self._collection

        def warm() -> None:
            with contextlib.suppress(Exception):  # only a warm-up: real reads report errors
                collection.get(limit=1, include=[])

        self._warm = threading.Thread(target=warm, name="mnemoscope-chroma-warm-up",
                                      daemon=True)
        self._warm.start()

    def _count_in_chroma(self) -> int:
        with self._reading():
            return int(self._collection.count())

    def _read_view(self, now_ms: float, progress: ProgressFn | None,
                   cancelled: CancelFn | None = None) -> ColumnarView:
        """A new view with every record of the collection, read from Chroma page by page."""
        view = ColumnarView(self._view.dimension)
        if self._collection is None:
            return view
        ids = self._every_id(cancelled)
        total, offset = len(ids), 0
        while offset < total:
            self._check_stop(cancelled, offset, total)
            with self._reading():
                page = self._collection.get(ids=ids[offset:offset + _READ_PAGE],
                                            include=["documents", "metadatas", "embeddings"])
            records = [self._decode(i, d, m, now_ms)
                       for i, d, m in zip(page["ids"], page["documents"], page["metadatas"],
                                          strict=True)]
            if records:  # a record deleted since its id was listed is absent
                view.upsert(records, _as_matrix(page.get("embeddings"), len(records),
                                                view.dimension))
            offset += _READ_PAGE
            if progress is not None:
                progress(min(offset, total), total)
        self._check_stop(cancelled, min(offset, total), total)  # a late cancel still wins
        return view

    def _every_id(self, cancelled: CancelFn | None) -> list[str]:
        """Every record's id, in Chroma's order, in pages of :data:`_ID_PAGE` (ids only).

        The view is then read by id: Chroma pages by ``offset`` step over every earlier row
        (SQLite), so reading a 1M store in 250-record pages by offset took 14 minutes, four
        times Chroma's own read in its largest pages (docs/benchmarks.md, ``open-uncached``);
        by id each page costs its own rows.
        """
        total = self._count_in_chroma()
        ids: list[str] = []
        while len(ids) < total:
            self._check_stop(cancelled, 0, total)
            with self._reading():
                page = self._collection.get(limit=_ID_PAGE, offset=len(ids), include=[])["ids"]
            if not page:
                break
            ids.extend(page)
        return ids

    def _check_stop(self, cancelled: CancelFn | None, done: int, total: int) -> None:
        if self._stop_loading.is_set() or (cancelled is not None and cancelled()):
            raise Cancelled(f"reading {self.location} stopped after {done:,} of {total:,} "
                            "records")

    # -- the deferred view -----------------------------------------------------------------

    @property
    def view_ready(self) -> bool:
        """False while a deferred view is still to be read (see :meth:`load_view`)."""
        return self._view_ready.is_set() and self._view_failure is None

    def load_view(self, now_ms: float, progress: ProgressFn | None = None,
                  cancelled: CancelFn | None = None) -> None:
        """Read the view deferred by ``open(defer_view=True)`` (a no-op when it is ready).

        Blocking (tens of seconds at 100K): run it on a worker. Everything waiting for the view
        proceeds once it returns; if it fails or is cancelled they raise
        :class:`StoreUnavailable` instead. A read that failed or was cancelled may be asked
        for again (issue 24: a server store reads its view only when a feature needs it, and
        the person may cancel and ask later); it starts from the first record.

        Raises:
            Cancelled: ``cancelled()`` turned true, or the store was closed meanwhile.
            StoreUnavailable: Chroma failed, or the store was closed.
        """
        with self._loading:
            if self._view_ready.is_set():
                if self._view_failure is None:
                    return
                if self._stop_loading.is_set() or self._collection is None:  # closed
                    raise StoreUnavailable(self._view_failure)
                self._view_failure = None  # asked again after a failed or cancelled read
                self._view_ready.clear()
            try:
                self._migrate(progress, cancelled)
                self._view = self._read_view(now_ms, progress, cancelled)
            except BaseException as exc:
                self._view_failure = (f"the records of {self.location} were not indexed: "
                                      f"{_short(exc)}")
                raise
            finally:
                self._view_ready.set()

    def _await_view(self) -> ColumnarView:
        self._view_ready.wait()
        if self._view_failure is not None:
            raise StoreUnavailable(self._view_failure)
        return self._view

    def preview(self, offset: int, limit: int, *, now_ms: float = 0.0,
                every_state: bool = False) -> tuple[list[MemoryRecord], int]:
        """Records newest-written first, read from Chroma without the view, and the total.

        What the records browser shows while a deferred view loads: Chroma's own order
        (insertion order), reversed, so the first page is the most recently written records.
        Archived records are left out, as the browser's default filter leaves them out
        (``engine.query.SHOWN_STATES``). Only a store that ever held a soft state can hold
        them (collection metadata ``soft_states``, or schema version 2: :mod:`engine.store.codec`),
        so only such a store pays for the two ``where``-filtered Chroma reads this takes (the
        archived ids for the total, then the page). With ``every_state`` every record is shown
        (a query for every state).
        """
        where: dict[str, Any] | None = None
        total = self.count()
        if not every_state and self._soft_states and self._collection is not None:
            with self._reading():
                archived = self._collection.get(
                    where={"state": RecordState.ARCHIVED.value}, include=[])["ids"]
            if archived:
                total = max(0, total - len(archived))
                # $ne also matches records written before states existed (no key): active
                where = {"state": {"$ne": RecordState.ARCHIVED.value}}
        stop = max(0, total - offset)
        start = max(0, stop - limit)
        if self._collection is None or stop == start:
            return [], total
        with self._reading():
            page = self._collection.get(limit=stop - start, offset=start, where=where,
                                        include=["documents", "metadatas"])
        records = [self._decode(i, d, m, now_ms)
                   for i, d, m in zip(page["ids"], page["documents"], page["metadatas"],
                                      strict=True)]
        return records[::-1], total

    @property
    def server_filterable(self) -> bool:
        """True when Chroma ``where`` filters can read our fields (not a foreign collection)."""
        return self._reader is None

    def any_match(self, where: dict[str, Any]) -> bool:
        """True when some record matches the Chroma ``where`` filter (reads one id at most).

        Raises:
            StoreUnavailable: Chroma failed.
        """
        if self._collection is None:
            return False
        with self._reading():
            return bool(self._collection.get(where=where, limit=1, include=[])["ids"])

    def server_page(self, where: dict[str, Any] | None, where_document: dict[str, Any] | None,
                    offset: int, limit: int, *,
                    now_ms: float = 0.0) -> tuple[list[MemoryRecord], int]:
        """Records matching Chroma filters, newest written first, without the view; and the total.

        No filter is :meth:`preview` (Chroma's count and an offset). With filters, Chroma
        selects the matching ids (ids only, no documents) once per filter — kept until a call
        with other filters, so scrolling pages one stable list — and a page reads just its
        records by id. A ``where`` alone is faster through :meth:`server_scan` on a large store.

        Raises:
            StoreUnavailable: Chroma failed (the server went away).
            ValidationError: a foreign collection, whose fields Chroma filters cannot read.
        """
        if where is None and where_document is None:  # every record, archived ones too
            return self.preview(offset, limit, now_ms=now_ms, every_state=True)
        self._check_filterable()
        if self._collection is None:
            return [], 0
        with self._server_ids_lock:
            ids = self._selected_ids(where, where_document)
        return self._page_of_ids(ids, offset, limit, now_ms), len(ids)

    def server_scan(self, where: dict[str, Any], offset: int, limit: int, *,
                    now_ms: float = 0.0) -> tuple[list[MemoryRecord], int, bool]:
        """A page of the records matching ``where``, newest written first, read from the newest
        records in windows of ``StoreSpec.scan_window`` and tested in the engine
        (:mod:`engine.store.filtered_scan`: why); the total so far; and whether it is final.

        Chroma's ``where`` costs time in proportion to the records its clauses match, however
        few a page needs: 1.8 s for agent + layer at 1M records (below ``StoreSpec.scan_from``
        records it is still the faster, and used). A common filter's page is among the newest
        records, so the scan reads windows until the page is full; a rare one, which at its
        rate so far would need more than two windows, is selected by Chroma's ``where``, cheap
        exactly then. The scan continues where the last page stopped (one cursor, for the last
        filter). A first page (``offset`` 0) starts anew, its ids selected before forgotten, so
        a reload sees the records written since.

        Returns:
            ``(records, total, counted)``: with ``counted`` False the total is the number of
            matches found so far (at least the rows up to this page: the table can show "at
            least"), and :meth:`server_count` gives the exact one.

        Raises:
            StoreUnavailable: Chroma failed (the server went away).
            ValidationError: a foreign collection, whose fields Chroma filters cannot read.
        """
        self._check_filterable()
        if self._collection is None:
            return [], 0, True
        if _hidden_states_only(where):
            # Paused and archived records are few, or none: Chroma's where is cheap then (and
            # a store that never held one holds none: no read at all)
            if not self._soft_states:
                return [], 0, True
            records, total = self.server_page(where, None, offset, limit, now_ms=now_ms)
            return records, total, True
        key = repr((where, None))
        wanted = offset + limit
        window = self._spec.scan_window
        with self._server_ids_lock:
            if self._server_ids is not None and self._server_ids[0] == key:
                if offset:
                    ids = self._server_ids[1]  # counted meanwhile: page the exact list
                    return self._page_of_ids(ids, offset, limit, now_ms), len(ids), True
                self._server_ids = None  # a first page: select again (a reload)
            scan = self._scan
            if scan is None or scan.key != key or offset == 0:
                size = self._count_in_chroma()
                if size < self._spec.scan_from:  # small: Chroma's where is faster
                    ids = self._selected_ids(where, None)
                    return self._page_of_ids(ids, offset, limit, now_ms), len(ids), True
                scan = self._scan = NewestScan(key, size)
            read = 0
            while len(scan.matched) < wanted and not scan.done:
                if read and scan.windows_to_fill(wanted, window) > _SCAN_MAX_WINDOWS:
                    ids = self._selected_ids(where, None)  # a rare filter
                    return self._page_of_ids(ids, offset, limit, now_ms), len(ids), True
                self._scan_window(scan, where, window, now_ms)
                read += 1
            return scan.matched[offset:wanted], len(scan.matched), scan.done

    def server_count(self, where: dict[str, Any] | None,
                     where_document: dict[str, Any] | None) -> int:
        """The exact number of records matching Chroma filters (what :meth:`server_scan`'s
        page leaves open): from a finished scan, else Chroma selects the ids, which later pages
        of the same filter then read from (the same records in the same order as the scan's).

        Blocking for as long as Chroma's ``where`` takes (seconds at 1M records): a worker.

        Raises:
            StoreUnavailable: Chroma failed (the server went away).
            ValidationError: a foreign collection, whose fields Chroma filters cannot read.
        """
        if where is None and where_document is None:
            return self.count()
        self._check_filterable()
        if self._collection is None or (where_document is None and where is not None
                                        and _hidden_states_only(where)
                                        and not self._soft_states):
            return 0  # no record was ever paused or archived (as server_scan)
        key = repr((where, where_document))
        with self._server_ids_lock:
            scan = self._scan
            if scan is not None and scan.key == key and scan.done:
                return len(scan.matched)
            if self._server_ids is not None and self._server_ids[0] == key:
                return len(self._server_ids[1])
        # selected without the lock: the pages scrolled meanwhile need not wait for it
        found = self._chroma_ids(where, where_document)
        with self._server_ids_lock:
            self._server_ids = (key, found)
        return len(found)

    def _check_filterable(self) -> None:
        if not self.server_filterable:
            raise ValidationError("filter", self._spec.collection,
                                  "a collection written by another tool is filtered once its "
                                  "records are indexed")

    def _selected_ids(self, where: dict[str, Any] | None,
                      where_document: dict[str, Any] | None) -> list[str]:
        """The ids Chroma selects for the filters, in Chroma's order (kept for the filters until
        others are asked for). Hold ``_server_ids_lock``."""
        key = repr((where, where_document))
        cached = self._server_ids
        if cached is None or cached[0] != key:
            cached = self._server_ids = (key, self._chroma_ids(where, where_document))
        return cached[1]

    def _chroma_ids(self, where: dict[str, Any] | None,
                    where_document: dict[str, Any] | None) -> list[str]:
        """Every id matching the filters, in Chroma's order, selected by Chroma (ids only)."""
        with self._reading():
            return list(self._collection.get(where=where, where_document=where_document,
                                             include=[])["ids"])

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn a failed Chroma read inside the block into :class:`StoreUnavailable` (or
        :class:`StoreTimeout`) naming the store. Only Chroma calls go inside: an error of the
        engine's own code (decoding, matching) is a bug and must not pass for a server fault."""
        try:
            yield
        except Exception as exc:
            raise _failure(self._spec, f"reading {self.location}", exc) from exc

    def _page_of_ids(self, ids: Sequence[str], offset: int, limit: int,
                     now_ms: float) -> list[MemoryRecord]:
        """Records ``offset .. offset + limit`` of ``ids`` counted from the end (newest written
        first), read by id."""
        stop = max(0, len(ids) - offset)
        wanted = list(ids[max(0, stop - limit):stop])[::-1]
        if not wanted:
            return []
        with self._reading():
            page = self._collection.get(ids=wanted, include=["documents", "metadatas"])
        found = {i: self._decode(i, d, m, now_ms)
                 for i, d, m in zip(page["ids"], page["documents"], page["metadatas"],
                                    strict=True)}
        # A record deleted since the ids were selected is left out of its page.
        return [found[i] for i in wanted if i in found]

    def _scan_window(self, scan: NewestScan, where: dict[str, Any], window: int,
                     now_ms: float) -> None:
        """Read the next ``window`` records older than those ``scan`` examined; keep matches."""
        stop = scan.size - scan.examined
        start = max(0, stop - window)
        with self._reading():
            page = self._collection.get(limit=stop - start, offset=start,
                                        include=["documents", "metadatas"])
        ids, documents, metadatas = page["ids"], page["documents"], page["metadatas"]
        scan.examined += stop - start
        for index in range(len(ids) - 1, -1, -1):  # newest first
            record_id, metadata = ids[index], metadatas[index]
            if record_id not in scan.seen and matches(where, metadata):
                scan.seen.add(record_id)
                scan.matched.append(self._decode(record_id, documents[index], metadata,
                                                 now_ms))

    # -- properties ------------------------------------------------------------------------

    @property
    def spec(self) -> StoreSpec:
        """How the store was opened."""
        return self._spec

    @property
    def location(self) -> str:
        """Directory path or server URL."""
        return self._spec.location

    @property
    def kind(self) -> str:
        """``"embedded"`` or ``"server"``."""
        return "server" if self._spec.is_remote else "embedded"

    @property
    def read_only(self) -> bool:
        """True when writes are refused (asked for, or a foreign collection)."""
        return self._read_only

    @property
    def foreign(self) -> bool:
        """True when the collection was not written by Mnemoscope."""
        return self._foreign

    @property
    def foreign_info(self) -> ForeignInfo | None:
        """A foreign collection's detected layout and vectors (None for our own)."""
        return self._foreign_info

    @property
    def view(self) -> ColumnarView:
        """The columnar view (live); waits while a deferred view loads (see :meth:`load_view`).

        Raises:
            StoreUnavailable: the deferred view failed to load or was cancelled.
        """
        return self._await_view()

    @property
    def max_batch_size(self) -> int:
        """Chroma's largest accepted batch."""
        return self._max_batch

    def lock_holder(self) -> dict[str, object] | None:
        """Who holds the lock of an embedded store (None for a server)."""
        if self._spec.is_remote:
            return None
        return read_lock_holder(Path(self._spec.location).expanduser())

    def count(self) -> int:
        """Number of records (Chroma's count at open while a deferred view is not read)."""
        if not self.view_ready:
            return self._chroma_count
        return len(self._view)

    # -- reading ---------------------------------------------------------------------------

    def get(self, record_id: str) -> MemoryRecord:
        """The record with ``record_id``.

        Raises:
            RecordNotFound: no such record.
        """
        return self.get_many([record_id])[0]

    def get_many(self, record_ids: Sequence[str]) -> list[MemoryRecord]:
        """Records in the order of ``record_ids``.

        Raises:
            RecordNotFound: naming the first missing id.
        """
        if not record_ids:
            return []
        if self.view_ready:  # else (a deferred view is read) Chroma's answer says what is missing
            for record_id in record_ids:
                if record_id not in self._view:
                    raise RecordNotFound(record_id)
        found: dict[str, MemoryRecord] = {}
        for start in range(0, len(record_ids), self._max_batch):
            chunk = list(dict.fromkeys(record_ids[start:start + self._max_batch]))
            with self._reading():
                page = self._collection.get(ids=chunk, include=["documents", "metadatas"])
            for i, d, m in zip(page["ids"], page["documents"], page["metadatas"], strict=True):
                found[i] = self._decode(i, d, m, self._opened_at)
        missing = [r for r in record_ids if r not in found]
        if missing:
            raise RecordNotFound(missing[0])
        return [found[r] for r in record_ids]

    def read_by_id(self, record_ids: Sequence[str], *, now_ms: float = 0.0) -> list[MemoryRecord]:
        """Records read from Chroma by id, bypassing the view (documents and metadata only).

        For a read-only opener following a writer in another process: its view does not know
        the writer's new records. Missing ids are simply absent from the result.
        """
        if self._collection is None or not record_ids:
            return []
        found: list[MemoryRecord] = []
        for start in range(0, len(record_ids), self._max_batch):
            with self._reading():
                page = self._collection.get(ids=list(record_ids[start:start + self._max_batch]),
                                            include=["documents", "metadatas"])
            found.extend(self._decode(i, d, m, now_ms)
                         for i, d, m in zip(page["ids"], page["documents"], page["metadatas"],
                                            strict=True))
        return found

    def versions(self, record_ids: Sequence[str]) -> dict[str, int]:
        """The stored ``version`` of each existing record, read from Chroma (not the view)."""
        if self._collection is None or not record_ids:
            return {}
        with self._reading():
            page = self._collection.get(ids=list(record_ids), include=["metadatas"])
        return {record_id: stored_version(meta)
                for record_id, meta in zip(page["ids"], page["metadatas"], strict=True)}

    def claim_version(self, record_id: str, version: int, token: str, *,
                      stale_after_s: float = CLAIM_STALE_SECONDS) -> bool:
        """Claim the right to write ``version`` of a record (server stores; compare-and-swap).

        Chroma has no compare-and-swap, but its ``add`` is first-writer-wins: adding an id that
        exists is ignored. Each writer adds ``<record_id>@<version>`` with its own ``token`` to
        the side collection ``<collection>__claims`` and reads it back; only the writer whose
        token is stored may write that version (tests/reliability/test_two_writers.py). The
        caller has just checked that the stored version is ``version - 1``: a claim on
        ``version`` older than ``stale_after_s`` therefore belongs to a writer that died
        between claiming and writing, and is replaced once. An embedded store is written by
        one process (the store lock), so every claim succeeds.

        Raises:
            StoreUnavailable: the server could not be reached.
        """
        if not self._spec.is_remote or self._client is None:
            return True
        key = f"{record_id}@{version}"
        if not self._claims_pruned_at or \
                time.monotonic() - self._claims_pruned_at >= CLAIM_PRUNE_EVERY_SECONDS:
            self.prune_claims()
        try:
            claims = self._claims_collection()
            for attempt in range(2):
                claims.add(ids=[key], documents=[token], embeddings=[[1.0]],
                           metadatas=[{"at": time.time()}])
                stored = claims.get(ids=[key], include=["documents", "metadatas"])
                documents = stored.get("documents") or []
                if documents and documents[0] == token:
                    return True
                metas = stored.get("metadatas") or [{}]
                at = (metas[0] or {}).get("at")
                if attempt or not isinstance(at, int | float) or \
                        time.time() - float(at) < stale_after_s:
                    return False
                claims.delete(ids=[key])  # a dead writer's claim: replace it once
        except Exception as exc:
            raise _failure(self._spec, f"claiming {key} on {self.location}", exc) from exc
        return False

    def _claims_collection(self) -> Any:
        assert self._client is not None
        return self._client.get_or_create_collection(
            f"{self._spec.collection}{CLAIMS_SUFFIX}", embedding_function=None,
            metadata={"mnemoscope_claims": 1})

    def prune_claims(self, older_than_s: float = CLAIM_KEEP_SECONDS) -> None:
        """Delete the claims (see :meth:`claim_version`) made more than ``older_than_s`` ago.

        Server stores only. Called by :meth:`claim_version` at most every
        ``CLAIM_PRUNE_EVERY_SECONDS``, so the side collection holds about an hour of writes
        instead of one entry per version ever written.

        Raises:
            StoreUnavailable: the server could not be reached.
        """
        if not self._spec.is_remote or self._client is None:
            return
        cutoff = time.time() - older_than_s
        try:
            self._claims_collection().delete(where={"at": {"$lt": cutoff}})
        except Exception as exc:
            raise _failure(self._spec, f"pruning the write claims of {self.location}", exc
                           ) from exc
        self._claims_pruned_at = time.monotonic()

    def reload_view(self, now_ms: float, progress: ProgressFn | None = None) -> None:
        """Rebuild the columnar view from Chroma and swap it in when complete."""
        self._await_view()
        self._view = self._read_view(now_ms, progress)

    def nearest(self, vector: npt.NDArray[np.float32], k: int) -> list[tuple[str, float]]:
        """Chroma's HNSW top-``k`` neighbours of ``vector`` as ``(id, cosine similarity)``.

        Used for large partitions; small ones are searched exactly in the view.
        """
        size = len(self.view)
        if self._collection is None or k <= 0 or size == 0:
            return []
        try:
            result = self._collection.query(query_embeddings=vector.reshape(1, -1),
                                            n_results=min(k, size),
                                            include=["distances"])
        except Exception as exc:
            raise _failure(self._spec, f"querying {self.location}", exc) from exc
        ids = result["ids"][0]
        distances = result["distances"][0]
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)
                if math.isfinite(float(d))]

    def similar_by_id(self, record_id: str, k: int, *, now_ms: float = 0.0
                      ) -> tuple[MemoryRecord, list[tuple[MemoryRecord, float]]]:
        """The record ``record_id`` and Chroma's HNSW neighbours of its stored vector, nearest
        first, as ``(record, cosine similarity)``; the record itself is left out. No view
        needed: Find similar on a server store before its full view is read (issue 24). Two
        Chroma calls: the record with its vector, then the query. A neighbour whose distance
        is not a finite number is left out.

        Raises:
            RecordNotFound: no such record.
            ValidationError: the record has no vector yet, or ``k`` is not in 1..1000.
            StoreUnavailable: Chroma failed.
        """
        if not 1 <= k <= 1000:
            raise ValidationError("k", k, "must be in 1..1000")
        if self._collection is None:
            raise RecordNotFound(record_id)
        try:
            got = self._collection.get(ids=[record_id],
                                       include=["documents", "metadatas", "embeddings"])
            if not got["ids"]:
                raise RecordNotFound(record_id)
            vector = np.asarray(got["embeddings"][0], dtype=np.float32)
            if not vector.any():  # the zero vector of a record stored while the model loaded
                raise ValidationError("record", record_id,
                                      "has no embedding yet: similar records are found once "
                                      "the model embedded it")
            # one more than asked: the record itself is its own nearest neighbour (Chroma
            # returns fewer when the collection is smaller)
            found = self._collection.query(
                query_embeddings=vector.reshape(1, -1), n_results=k + 1,
                include=["documents", "metadatas", "distances"])
        except (RecordNotFound, ValidationError):
            raise
        except Exception as exc:
            raise _failure(self._spec, f"querying {self.location}", exc) from exc
        record = self._decode(record_id, got["documents"][0], got["metadatas"][0], now_ms)
        out: list[tuple[MemoryRecord, float]] = []
        for i, d, m, distance in zip(found["ids"][0], found["documents"][0],
                                     found["metadatas"][0], found["distances"][0],
                                     strict=True):
            if i != record_id and math.isfinite(float(distance)):
                out.append((self._decode(i, d, m, now_ms), 1.0 - float(distance)))
        return record, out[:k]

    # -- writing ---------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._read_only:
            why = "it was written by another tool" if self._foreign else "it is open read-only"
            raise StoreReadOnly(f"cannot write to {self.location}: {why}")
        if not self._dirty and self._cache_dir is not None:
            view_cache.invalidate(self._cache_dir)  # before the store changes: crash-safe
        self._dirty = True

    @property
    def schema_version(self) -> int:
        """The collection's ``schema_version`` (see :mod:`engine.store.codec`)."""
        return self._schema_version

    def _set_collection_meta(self, changes: dict[str, Any], action: str) -> None:
        """Change keys of the collection's metadata (Chroma's ``modify`` replaces all of it;
        a None value removes the key).

        Raises:
            StoreUnavailable: Chroma refused the change (nothing was written).
        """
        meta = dict(self._collection.metadata or {})
        meta.update(changes)
        try:
            self._collection.modify(metadata={k: v for k, v in meta.items() if v is not None})
        except Exception as exc:
            raise _failure(self._spec, f"{action} {self.location}", exc) from exc

    # -- migration to the lean layout (issue 24) --------------------------------------------

    @property
    def needs_migration(self) -> bool:
        """True while a writable store still holds records of the flat layout (schema 1, 2)
        or a migration was stopped part-way (see :meth:`_migrate`)."""
        return not self._read_only and not self._foreign and self._collection is not None \
            and (self._schema_version < SCHEMA_VERSION or self._migrating)

    def _migrate(self, progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None) -> None:
        """Rewrite the records of the flat layout in the lean one (:mod:`engine.store.codec`).

        Runs when a writable store of schema 1 or 2 is opened, before its view is read. First
        the collection is marked schema 3 with ``migrating_to`` set: from then on an older
        build refuses the store (it would misread lean records), and a migration stopped
        part-way (killed, cancelled, server gone) resumes at the next writable open. Then the
        ids of the flat records (``mnemo_schema < 3``) are read once and their metadata
        rewritten a page at a time by Chroma ``update`` (metadata only: documents and vectors
        stay, nothing is re-indexed); each record is either flat or lean at any moment, and
        :func:`~engine.store.codec.record_from_chroma` reads both, so a store stopped
        midway reads every record as before. Last, ``migrating_to`` is removed.

        Args:
            progress: Called with (records rewritten, records to rewrite) after each page.
            cancelled: Polled before each page.

        Raises:
            Cancelled: ``cancelled()`` turned true or the store is closing (it resumes later).
            StoreUnavailable: Chroma failed.
        """
        if not self.needs_migration:
            return
        self._check_writable()  # drops the view cache first: its fingerprint goes stale
        start_version = self._schema_version
        self._set_collection_meta({"schema_version": SCHEMA_VERSION, _MIGRATING: SCHEMA_VERSION,
                                   _SOFT_STATES: True if self._soft_states else None},
                                  "marking schema version 3 (migrating) of")
        self._schema_version, self._migrating = SCHEMA_VERSION, True
        done = 0
        try:
            ids = self._collection.get(where={"mnemo_schema": {"$lt": SCHEMA_VERSION}},
                                       include=[])["ids"]
            for start in range(0, len(ids), _READ_PAGE):
                if self._stop_loading.is_set() or (cancelled is not None and cancelled()):
                    raise Cancelled(f"migrating {self.location} to the lean layout stopped "
                                    f"after {done:,} of {len(ids):,} records; it resumes "
                                    "when the store is next opened for writing")
                page = self._collection.get(ids=ids[start:start + _READ_PAGE],
                                            include=["metadatas"])
                # another writer of a server store may have rewritten a record meanwhile
                flat = [(i, m) for i, m in zip(page["ids"], page["metadatas"], strict=True)
                        if m and not is_lean(m)]
                if flat:
                    self._collection.update(ids=[i for i, _ in flat],
                                            metadatas=[lean_metadata(m) for _, m in flat])
                if not self._soft_states and start_version < SCHEMA_VERSION_STATES and any(
                        m.get("state", "active") != "active" for _, m in flat):
                    self._mark_soft_states()  # states kept within version 1 by an old build
                done += len(page["ids"])
                if progress is not None:
                    progress(done, len(ids))
        except (Cancelled, StoreUnavailable):
            raise
        except Exception as exc:
            raise _failure(self._spec, f"migrating {self.location} to the lean layout", exc
                           ) from exc
        self._set_collection_meta({_MIGRATING: None}, "ending the migration of")
        self._migrating = False

    def _mark_soft_states(self) -> None:
        """Note in the collection that it holds (or held) paused or archived records."""
        self._set_collection_meta({_SOFT_STATES: True}, "marking soft states in")
        self._soft_states = True

    def write(self, records: Sequence[MemoryRecord],
              vectors: npt.NDArray[np.float32] | None = None, *,
              batch_size: int | None = None) -> None:
        """Upsert ``records`` (with their embeddings) in batches, then update the view.

        ``vectors[i]`` belongs to ``records[i]``; a record without one keeps its stored vector
        if its content did not change, else is stored with a zero vector (pending embedding).
        A record already stored with the same document and embedding gets a metadata update
        instead of an upsert: an upsert re-inserts its vector into Chroma's HNSW index (about
        5 ms of CPU per row against 0.2 ms; docs/ingest.md). If a batch fails, the batches
        already written in this call are rolled back to their previous state, so a call
        writes all of its records or none.

        Args:
            records: What to write.
            vectors: Their embeddings (rows in the order of ``records``), if computed.
            batch_size: At most this many records per Chroma call (default: Chroma's largest
                batch). The app's undo writes small batches: Chroma's bindings hold the GIL
                for a whole call (an upsert of 200 records: 150-550 ms during which the GUI
                thread could not run), and between two calls other threads get it back.

        Raises:
            StoreReadOnly: the store is read-only.
            StoreUnavailable: Chroma failed (server down, disk full).
        """
        self._check_writable()
        if not records:
            return
        if not self._soft_states and any(
                record.state is not RecordState.ACTIVE for record in records):
            self._mark_soft_states()
        size = self._max_batch if batch_size is None else max(1, min(batch_size, self._max_batch))
        view = self.view
        dim = view.dimension
        matrix = np.zeros((len(records), dim), dtype=np.float32)
        has = np.zeros(len(records), dtype=bool)
        if vectors is not None:
            if vectors.shape != (len(records), dim):
                raise ValidationError("vectors", vectors.shape, f"expected ({len(records)}, {dim})")
            matrix[:] = vectors
            has[:] = np.linalg.norm(vectors, axis=1) > 0
        for i, record in enumerate(records):
            if not has[i]:
                kept = view.vector(record.id, content_hash=record.content_hash)
                if kept is not None:
                    matrix[i] = kept
                    has[i] = True
        unchanged = view.holds_unchanged(records, matrix) & has
        calls = [_Call("update", part) for part in _batches(np.flatnonzero(unchanged), size)] \
            + [_Call("upsert", part) for part in _batches(np.flatnonzero(~unchanged), size)]
        # Rollback restores the calls this one already made; a single call has none to restore,
        # so only a write of several calls pays for reading the previous state.
        previous: dict[str, tuple[Any, Any, Any]] = {}
        made: list[_Call] = []
        try:
            if len(calls) > 1:
                previous = self._previous_state(records, calls)
            for call in calls:
                chunk = [records[i] for i in call.rows]
                if call.kind == "update":  # the document and embedding are the stored ones
                    self._collection.update(ids=[r.id for r in chunk],
                                            metadatas=[record_to_chroma(r) for r in chunk])
                else:
                    self._collection.upsert(ids=[r.id for r in chunk],
                                            documents=[r.content for r in chunk],
                                            metadatas=[record_to_chroma(r) for r in chunk],
                                            embeddings=matrix[call.rows])
                made.append(call)
        except Exception as exc:
            # After a timeout the rollback meets the same silent server: its first call times
            # out too and ends it, so the error comes at most one more timeout later.
            self._roll_back(records, made, previous)
            action = f"writing {_records(len(records))} to {self.location}"
            failure = _failure(self._spec, action, exc, in_flight=len(records))
            if isinstance(failure, StoreTimeout):
                raise failure from exc  # the server may still apply what it was sent
            raise StoreUnavailable(f"{action} failed: {_short(exc)}; nothing was changed"
                                   ) from exc
        view.upsert(records, np.where(has[:, None], matrix, 0.0).astype(np.float32))

    def write_access(self, records: Sequence[MemoryRecord]) -> None:
        """Store new ``access_count`` / ``last_accessed`` of stored ``records`` (access counting).

        One metadata update per batch (no documents, no embeddings), and the view changes only
        its access columns (:meth:`~engine.store.view.ColumnarView.set_access`), so data derived
        from it survives. The other fields of ``records`` must be the stored ones.

        Raises:
            RecordNotFound: naming the first id the store does not hold.
            StoreReadOnly: the store is read-only.
            StoreUnavailable: Chroma failed (nothing was changed in the view).
        """
        self._check_writable()
        view = self.view
        for record in records:
            if record.id not in view:
                raise RecordNotFound(record.id)
        try:
            for start in range(0, len(records), self._max_batch):
                chunk = records[start:start + self._max_batch]
                self._collection.update(ids=[r.id for r in chunk],
                                        metadatas=[record_to_chroma(r) for r in chunk])
        except Exception as exc:
            raise _failure(self._spec, f"counting accesses of {_records(len(records))} in "
                           f"{self.location}", exc, in_flight=len(records)) from exc
        view.set_access(records)

    def _previous_state(self, records: Sequence[MemoryRecord],
                        calls: Sequence[_Call]) -> dict[str, tuple[Any, Any, Any]]:
        """``id -> (document, metadata, embedding)`` of the stored records among ``calls``
        (the embedding only where an upsert would replace it)."""
        view = self.view
        state: dict[str, tuple[Any, Any, Any]] = {}
        for kind in ("update", "upsert"):
            existing = [records[i].id for call in calls if call.kind == kind for i in call.rows
                        if records[i].id in view]
            include: Any = ["metadatas"] if kind == "update" else \
                ["documents", "metadatas", "embeddings"]
            for start in range(0, len(existing), self._max_batch):
                page = self._collection.get(ids=existing[start:start + self._max_batch],
                                            include=include)
                for i, record_id in enumerate(page["ids"]):
                    state[record_id] = (
                        None if kind == "update" else page["documents"][i],
                        page["metadatas"][i],
                        None if kind == "update" else page["embeddings"][i])
        return state

    def _roll_back(self, records: Sequence[MemoryRecord], made: Sequence[_Call],
                   previous: dict[str, tuple[Any, Any, Any]]) -> None:
        """Best effort: restore what the calls already made changed."""
        try:
            for call in made:
                ids = [records[i].id for i in call.rows]
                old = [i for i in ids if i in previous]
                if call.kind == "update":
                    self._collection.update(ids=old, metadatas=[previous[i][1] for i in old])
                    continue
                fresh = [i for i in ids if i not in previous]
                if fresh:
                    self._collection.delete(ids=fresh)
                if old:
                    self._collection.upsert(
                        ids=old,
                        documents=[previous[i][0] for i in old],
                        metadatas=[previous[i][1] for i in old],
                        embeddings=np.asarray([previous[i][2] for i in old], dtype=np.float32),
                    )
        except Exception:  # the store is unreachable; the caller already reports the failure
            return

    def delete(self, record_ids: Sequence[str]) -> None:
        """Delete records by id (unknown ids raise before anything is deleted).

        Raises:
            RecordNotFound: naming the first unknown id.
            StoreReadOnly: the store is read-only.
            StoreUnavailable: Chroma failed.
        """
        self._check_writable()
        view = self.view
        for record_id in record_ids:
            if record_id not in view:
                raise RecordNotFound(record_id)
        try:
            for start in range(0, len(record_ids), self._max_batch):
                self._collection.delete(ids=list(record_ids[start:start + self._max_batch]))
        except Exception as exc:
            raise _failure(self._spec, f"deleting from {self.location}", exc) from exc
        view.remove(record_ids)

    def close(self) -> None:
        """Close the client, save the view (embedded, writable), release the lock. Idempotent.

        A deferred view still loading is stopped first (at its next page).
        """
        self._stop_loading.set()
        with self._loading:  # the loader's current page finishes before the client goes
            if not self._view_ready.is_set():
                self._view_failure = f"{self.location} was closed before its records were indexed"
                self._view_ready.set()
        if self._warm is not None:
            self._warm.join()
            self._warm = None
        self._collection = None
        client, self._client = self._client, None
        if client is not None:
            close_client(client)
            if self._cache_dir is not None and not self._read_only and self.view_ready:
                with contextlib.suppress(OSError):  # a cache we cannot write is only slower
                    view_cache.save_view(self._view, self._cache_dir, self._spec.collection,
                                         arrays_current=self._view_from_cache and not self._dirty)
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _hidden_states_only(where: dict[str, Any]) -> bool:
    """True when ``where`` keeps only records in states other than active (a ``state``
    ``$in`` clause, alone or in an ``$and``; ``engine.query.server_filter`` writes that form
    exactly when active is not among the states shown)."""
    clauses = where.get("$and", [where]) if len(where) == 1 else [where]
    return any(isinstance(c, dict) and isinstance(c.get("state"), dict)
               and "$in" in c["state"] and RecordState.ACTIVE.value not in c["state"]["$in"]
               for c in clauses)


def _as_matrix(raw: Any, rows: int, dim: int) -> npt.NDArray[np.float32] | None:
    if raw is None:
        return None
    try:
        matrix = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError):  # vectors of different lengths (a foreign collection)
        return None
    if matrix.shape != (rows, dim):
        return None
    return matrix
