"""The engine's columnar in-memory view of the store (DESIGN: Storage).

Retrieval, dedup and the records browser never loop over records in Python and never ask Chroma
to filter (a metadata ``where`` costs ~150 ms at 100K). They work on numpy columns here: scalar
fields, categorical codes, the L2-normalized embedding matrix, and the text columns (ids,
contents, hashes, tags) as object arrays.

Rows are append-only with tombstones: an update rewrites a row in place, a delete clears its
``alive`` flag, and when a third of the rows are dead the arrays are rebuilt. Growth and rebuilds
allocate *new* arrays.

Snapshots (:meth:`ColumnarView.snapshot`) are versioned and cost no copy: every change bumps
:attr:`ColumnarView.version`, and until the next change every caller gets the same
:class:`ViewSnapshot` object. A snapshot holds read-only views of the first ``n`` rows of the
columns; rows appended later lie beyond its ``n``. Its row set, alive mask and text columns
never change (copy-on-write: a writer that deletes a row or changes a row's text while a snapshot
shows that column copies the column first and changes the copy). Scalar columns and vectors of
a row updated in place *are* visible to a snapshot taken before, which readers accept (as they
always did).

Access counting (:meth:`ColumnarView.set_access`, :meth:`ColumnarView.touch`) changes only
``access_count`` and ``last_accessed`` of existing rows. It bumps the version and the
:attr:`ViewSnapshot.access_version`, and the new snapshot shares the derived data of the one
before (:meth:`ViewSnapshot.derived`) except what was declared to read the access columns, so a
retrieval after access counting recomputes only its access-dependent parts.

Appending rows keeps every existing row as it was. Snapshots between two changes of existing rows
share a :attr:`ViewSnapshot.lineage`, and data derived for one of them can be extended by the
rows appended since instead of recomputed (:meth:`ViewSnapshot.grown`): an agent that writes
and reads in a loop pays per request for its new rows, not for all of them.

Thread-safety: all mutation happens under the view's lock; a snapshot is read without it.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, overload

import numpy as np
import numpy.typing as npt

from engine.records import Category, Layer, MemoryRecord, Privacy, RecordState, TrustTier

__all__ = [
    "ACTIVE_CODE",
    "CATEGORIES",
    "LAYERS",
    "PRIVACIES",
    "STATES",
    "TIERS",
    "ColumnarView",
    "IdColumn",
    "ViewSnapshot",
    "append_rows",
]

LAYERS: tuple[Layer, ...] = tuple(Layer)
PRIVACIES: tuple[Privacy, ...] = tuple(Privacy)
TIERS: tuple[TrustTier, ...] = tuple(TrustTier)
CATEGORIES: tuple[Category, ...] = tuple(Category)
STATES: tuple[RecordState, ...] = tuple(RecordState)
ACTIVE_CODE = 0  # STATES[0]: the zero a fresh (calloc'd) column holds is "active"
_LAYER_CODE = {v: i for i, v in enumerate(LAYERS)}
_PRIVACY_CODE = {v: i for i, v in enumerate(PRIVACIES)}
_TIER_CODE = {v: i for i, v in enumerate(TIERS)}
_CATEGORY_CODE = {v: i for i, v in enumerate(CATEGORIES)}
_STATE_CODE = {v: i for i, v in enumerate(STATES)}

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
B = npt.NDArray[np.bool_]
Obj = npt.NDArray[np.object_]
T = TypeVar("T")

# Columns a snapshot shows whose rows a writer may change in place; the writer copies one before
# changing it while a snapshot holds it (copy-on-write). Ids never change in place.
_COPY_ON_WRITE = ("_alive", "_contents", "_hashes", "_tags")
_TEXT = ("_ids", "_contents", "_hashes", "_tags")
# Layout numbers are unique in the process, so two views (a reload) never share one.
_LAYOUTS = itertools.count(1)
# Most values a lineage keeps for extension (ViewSnapshot.grown); the oldest kept goes first.
# Retrieval keeps ~20 per request shape plus one per query term seen.
GROWN_LIMIT = 4096


class IdColumn(Sequence[str]):
    """A snapshot's ids as a read-only sequence over its id column, building no list.

    Reading a few ids (what retrieval packs, the ties it sorts) costs those ids; a list of all
    of them (:attr:`ViewSnapshot.ids`) touches every string, ~1 ms at 100K rows once the
    view has changed.
    """

    __slots__ = ("_array",)

    def __init__(self, array: Obj) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return cast(list[str], self._array[index].tolist())
        return cast(str, self._array[index])

    def __iter__(self) -> Iterator[str]:
        return iter(cast(Iterable[str], self._array))


@dataclass(frozen=True, slots=True)
class ViewSnapshot:
    """Columns of the first ``n`` rows; only rows with ``alive[row]`` exist.

    Categorical columns are codes into :data:`LAYERS`, :data:`PRIVACIES`, :data:`TIERS`,
    :data:`CATEGORIES`, :data:`STATES` and ``agents`` / ``sources``. ``expires_at`` is ``inf``
    for no expiry. ``vectors`` rows are unit length where ``has_vector`` is set and zero
    elsewhere. Arrays are read-only views shared with the view and with other readers of the
    same version.

    The text columns come two ways: ``id_array``, ``content_array``, ``hash_array`` and
    ``tag_array`` are object arrays (index them, or take ``array[rows].tolist()``, when a few
    rows are needed — no copy), and ``ids``, ``contents``, ``hashes`` and ``tags`` are lists
    built from them on first use and shared by the snapshots of the same text state (never
    mutate them).

    Attributes:
        version: The view's :attr:`ColumnarView.version` this snapshot shows.
        layout: Changes only when an existing row is deleted or changes its agent, privacy,
            layer, category or has-vector flag (or rows are renumbered), not when rows are
            appended or other fields change. Data derived from those columns for the first
            ``n`` rows of a snapshot stays valid for any later snapshot of the same ``layout``,
            which only needs the rows appended since (partitions are extended, not redone).
        access_version: Bumped (with ``version``) by a change that only counts accesses
            (``access_count`` and ``last_accessed`` of existing rows). Snapshots that differ
            only by it share their derived data except what reads those two columns.
        lineage: Changes whenever an existing row changes other than by access counting (an
            update in place, a delete, a compaction) or the view is rebuilt; appending rows
            keeps it. The first ``n`` rows of a snapshot equal, column by column (but the
            access columns), those of every later snapshot of the same lineage, so data derived
            from them can be extended by the rows appended since (:meth:`grown`).
    """

    n: int
    alive: B
    agent: I32
    agents: Sequence[str]
    source: I32
    sources: Sequence[str]
    layer: I8
    privacy: I8
    tier: I8
    category: I8
    state: I8
    importance: F32
    confidence: F32
    created_at: F64
    last_accessed: F64
    access_count: I32
    expires_at: F64
    recency_anchor: F64
    token_estimate: I32
    has_vector: B
    vectors: F32
    id_array: Obj
    content_array: Obj
    hash_array: Obj
    tag_array: Obj
    version: int = 0
    layout: int = 0
    access_version: int = 0
    lineage: int = 0
    _lists: dict[str, list[Any]] = field(default_factory=dict, repr=False, compare=False)
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)
    _access_derived: dict[Hashable, Any] = field(default_factory=dict, repr=False,
                                                 compare=False)
    # key -> (n, access_version, value) of the newest snapshot of this lineage that computed
    # it (see grown); shared by the snapshots of one lineage
    _grown: dict[Hashable, tuple[int, int, Any]] = field(default_factory=dict, repr=False,
                                                         compare=False)

    @property
    def ids(self) -> list[str]:
        """Record id per row."""
        return cast(list[str], self._as_list("ids", self.id_array))

    @property
    def id_column(self) -> IdColumn:
        """Record id per row, read from ``id_array`` on demand (see :class:`IdColumn`)."""
        return IdColumn(self.id_array)

    @property
    def contents(self) -> list[str]:
        """Content per row."""
        return cast(list[str], self._as_list("contents", self.content_array))

    @property
    def hashes(self) -> list[str]:
        """Content hash per row."""
        return cast(list[str], self._as_list("hashes", self.hash_array))

    @property
    def tags(self) -> list[tuple[str, ...]]:
        """Tags per row."""
        return cast(list[tuple[str, ...]], self._as_list("tags", self.tag_array))

    def _as_list(self, name: str, array: Obj) -> list[Any]:
        found = self._lists.get(name)
        if found is None:
            # an earlier list of this lineage is extended (a list copy, ~10x cheaper than
            # tolist of every row)
            found = self.grown(("list", name), lambda _: array.tolist(),
                               lambda _, old, start: old + array[start:].tolist())
            self._lists[name] = found
        return found

    def derived(self, key: Hashable, compute: Callable[[ViewSnapshot], T], *,
                reads_access: bool = False) -> T:
        """``compute(self)``, computed once per snapshot and ``key`` (masks, partitions, …).

        A snapshot is shared by every reader until the view changes, so data derived from it is
        computed once for all of them. ``key`` names what is computed and its arguments, e.g.
        ``("ingest.partition", agent, privacy, layer)``.

        Args:
            reads_access: ``compute`` reads ``access_count`` or ``last_accessed``. Such data is
                kept for this snapshot only; all other derived data is also kept for the later
                snapshots that differ only by access counting (see ``access_version``).
        """
        store = self._access_derived if reads_access else self._derived
        try:
            return cast(T, store[key])
        except KeyError:
            value = compute(self)
            store[key] = value
            return value

    def grown(self, key: Hashable, compute: Callable[[ViewSnapshot], T],
              extend: Callable[[ViewSnapshot, T, int], T], *, reads_access: bool = False) -> T:
        """Like :meth:`derived`, but extended from an earlier snapshot's value when it can be.

        When an earlier snapshot of the same :attr:`lineage` (and, if ``reads_access``, the
        same :attr:`access_version`) computed ``key`` for its ``m <= n`` rows, the value is
        ``extend(self, that value, m)``: that snapshot's first ``m`` rows are this one's, so
        ``extend`` only has to add what rows ``m..n`` change. Otherwise it is
        ``compute(self)``. ``extend`` must give what ``compute`` would (tests hold each caller
        to it); neither may change the earlier value, which other readers may hold.
        """
        def build(snapshot: ViewSnapshot) -> T:
            last = self._grown.get(key)
            if last is not None and last[0] <= self.n and (
                    not reads_access or last[1] == self.access_version):
                value = extend(snapshot, cast(T, last[2]), last[0])
            else:
                value = compute(snapshot)
            newest = self._grown.get(key)
            if newest is None or newest[0] <= self.n:
                self._grown.pop(key, None)  # re-inserted: the newest kept is the last
                self._grown[key] = (self.n, self.access_version, value)
                if len(self._grown) > GROWN_LIMIT:
                    _drop_oldest(self._grown)
            return value

        return self.derived(key, build, reads_access=reads_access)

    @property
    def live_rows(self) -> npt.NDArray[np.intp]:
        """Indices of live rows, ascending (computed once per snapshot)."""
        return self.grown("live_rows", lambda s: _frozen(np.flatnonzero(s.alive)),
                          lambda s, old, start: append_rows(
                              old, np.flatnonzero(s.alive[start:]) + start))

    @property
    def count(self) -> int:
        """Number of live rows (computed once per snapshot)."""
        return self.grown("count", lambda s: int(np.count_nonzero(s.alive)),
                          lambda s, old, start: old + int(np.count_nonzero(s.alive[start:])))

    def agent_code(self, agent_id: str) -> int:
        """Code of ``agent_id`` in this snapshot, or -1 when no record has it."""
        try:
            return list(self.agents).index(agent_id)
        except ValueError:
            return -1


def _drop_oldest(values: dict[Hashable, Any]) -> None:
    """Drop the first entry of ``values``; none when another reader changes it meanwhile (it
    is read without a lock: the next insertion drops one)."""
    try:
        values.pop(next(iter(values)), None)
    except (RuntimeError, StopIteration):
        return


def _frozen(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A read-only view of ``array`` (the base stays writable for the view's writer)."""
    view = array.view()
    view.flags.writeable = False
    return view


# Buffers append_rows made: id -> (a weak reference to it, rows of it given out so far).
_FILLED: dict[int, tuple[weakref.ReferenceType[npt.NDArray[Any]], int]] = {}
_FILLED_LOCK = threading.Lock()


def append_rows(old: npt.NDArray[Any], new: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``np.concatenate((old, new))`` as a read-only array, without copying ``old`` when it can.

    The result is a view of a buffer with room to spare; when ``old`` is such a view and no
    other array was appended to it yet, ``new`` is written into the room after it (which no
    earlier view shows) instead of copying every row: appending one row to a derived column of
    100K rows costs the row, not 0.1-1 ms of copying. Otherwise the rows are copied into a new
    buffer of twice their count. ``old`` and every earlier result stay as they were.
    """
    if not len(new) and not old.flags.writeable and new.dtype == old.dtype:
        return old  # nothing to add: the same read-only rows
    total = len(old) + len(new)
    owner = old.base
    if isinstance(owner, np.ndarray) and owner.dtype == old.dtype == new.dtype \
            and owner.shape[1:] == old.shape[1:] and len(owner) >= total \
            and old.ctypes.data == owner.ctypes.data and old.strides == owner.strides:
        with _FILLED_LOCK:
            entry = _FILLED.get(id(owner))
            if entry is not None and entry[0]() is owner and entry[1] == len(old):
                owner[len(old):total] = new
                _FILLED[id(owner)] = (entry[0], total)
                return _frozen(owner[:total])
    buffer = np.empty((max(16, 2 * total), *old.shape[1:]), dtype=np.result_type(old, new))
    buffer[: len(old)] = old
    buffer[len(old): total] = new
    key = id(buffer)

    def forget(reference: weakref.ReferenceType[npt.NDArray[Any]]) -> None:
        with _FILLED_LOCK:
            if _FILLED.get(key, (None, 0))[0] is reference:
                del _FILLED[key]

    with _FILLED_LOCK:
        _FILLED[key] = (weakref.ref(buffer, forget), total)
    return _frozen(buffer[:total])


def _objects(values: Sequence[Any]) -> Obj:
    """An object array holding ``values`` as they are (tuples stay elements, not rows)."""
    return np.fromiter(values, dtype=object, count=len(values))


class ColumnarView:
    """Mutable, thread-safe columns mirroring the store's records.

    Args:
        dimension: Embedding length.
        capacity: Initial row capacity (grows by doubling).
    """

    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self._dim = dimension
        self._lock = threading.RLock()
        self._n = 0
        self._dead = 0
        self._version = 0
        self._layout = next(_LAYOUTS)
        self._lineage = next(_LAYOUTS)
        self._grown: dict[Hashable, tuple[int, int, Any]] = {}  # see ViewSnapshot.grown
        self._access_version = 0
        self._snapshot: ViewSnapshot | None = None
        self._shared: set[str] = set()  # columns (of _COPY_ON_WRITE) a snapshot holds
        self._text_lists: dict[str, list[Any]] = {}  # lists built for the current text state
        # data derived for the current state but for the access columns (ViewSnapshot.derived)
        self._derived: dict[Hashable, Any] = {}
        self._rows: dict[str, int] = {}
        # content hash -> rows. Tuples of ints, not sets: the garbage collector stops tracking
        # them, while 100K sets made every full collection take ~70 ms (a latency spike).
        self._by_hash: dict[str, tuple[int, ...]] = {}
        self._agents: list[str] = []
        self._agent_code: dict[str, int] = {}
        self._sources: list[str] = []
        self._source_code: dict[str, int] = {}
        self._allocate(max(16, capacity))

    def _allocate(self, capacity: int) -> None:
        def grow(old: Any, shape: tuple[int, ...], dtype: type,
                 fill: object = 0) -> Any:
            # np.zeros is calloc: pages of unused capacity are never touched (a 100K view's
            # doubled vector capacity is 300 MB; np.full wrote all of it, ~0.4 s).
            zero = dtype is not object and fill == 0
            fresh: Any = np.zeros(shape, dtype=dtype) if zero else np.full(shape, fill, dtype)
            if old is not None:
                fresh[: self._n] = old[: self._n]
            return fresh

        existing = getattr(self, "_alive", None) is not None
        get = (lambda name: getattr(self, name)) if existing else (lambda name: None)
        self._capacity = capacity
        self._alive: B = grow(get("_alive"), (capacity,), np.bool_, False)
        self._agent: I32 = grow(get("_agent"), (capacity,), np.int32)
        self._source: I32 = grow(get("_source"), (capacity,), np.int32)
        self._layer: I8 = grow(get("_layer"), (capacity,), np.int8)
        self._privacy: I8 = grow(get("_privacy"), (capacity,), np.int8)
        self._tier: I8 = grow(get("_tier"), (capacity,), np.int8)
        self._category: I8 = grow(get("_category"), (capacity,), np.int8)
        self._state: I8 = grow(get("_state"), (capacity,), np.int8)
        self._importance: F32 = grow(get("_importance"), (capacity,), np.float32)
        self._confidence: F32 = grow(get("_confidence"), (capacity,), np.float32)
        self._created: F64 = grow(get("_created"), (capacity,), np.float64)
        self._accessed: F64 = grow(get("_accessed"), (capacity,), np.float64)
        self._access_count: I32 = grow(get("_access_count"), (capacity,), np.int32)
        self._expires: F64 = grow(get("_expires"), (capacity,), np.float64, np.inf)
        self._anchor: F64 = grow(get("_anchor"), (capacity,), np.float64)
        self._tokens: I32 = grow(get("_tokens"), (capacity,), np.int32)
        self._has_vec: B = grow(get("_has_vec"), (capacity,), np.bool_, False)
        self._vectors: F32 = grow(get("_vectors"), (capacity, self._dim), np.float32)
        self._ids: Obj = grow(get("_ids"), (capacity,), object, None)
        self._contents: Obj = grow(get("_contents"), (capacity,), object, None)
        self._hashes: Obj = grow(get("_hashes"), (capacity,), object, None)
        self._tags: Obj = grow(get("_tags"), (capacity,), object, None)
        self._shared.clear()  # every column is a fresh array no snapshot holds

    @classmethod
    def from_columns(cls, dimension: int, columns: dict[str, Any], *, ids: list[str],
                     contents: list[str], hashes: list[str], tags: list[tuple[str, ...]],
                     agents: list[str], sources: list[str]) -> ColumnarView:
        """Rebuild a view from saved live columns (see :mod:`engine.store.view_cache`)."""
        view = cls(dimension, capacity=max(16, len(ids) * 2))
        n = len(ids)
        targets: dict[str, Any] = {"agent": view._agent, "source": view._source,
                                   "layer": view._layer,
                   "privacy": view._privacy, "tier": view._tier, "category": view._category,
                   "state": view._state,
                   "importance": view._importance, "confidence": view._confidence,
                   "created_at": view._created, "last_accessed": view._accessed,
                   "access_count": view._access_count, "expires_at": view._expires,
                   "recency_anchor": view._anchor, "token_estimate": view._tokens,
                   "has_vector": view._has_vec, "vectors": view._vectors}
        for name, target in targets.items():
            target[:n] = columns[name]
        view._alive[:n] = True
        view._n = n
        for target, values in ((view._ids, ids), (view._contents, contents),
                               (view._hashes, hashes), (view._tags, tags)):
            target[:n] = _objects(values)
        view._rows = {record_id: row for row, record_id in enumerate(ids)}
        view._index_hashes(hashes)
        view._agents, view._sources = list(agents), list(sources)
        view._agent_code = {a: i for i, a in enumerate(view._agents)}
        view._source_code = {s: i for i, s in enumerate(view._sources)}
        return view

    # -- reading ---------------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """Embedding length."""
        return self._dim

    @property
    def version(self) -> int:
        """Bumped by every change; a snapshot of the same version shows the same data."""
        with self._lock:
            return self._version

    def __len__(self) -> int:
        with self._lock:
            return self._n - self._dead

    def resident_bytes(self) -> dict[str, int]:
        """Bytes the view's numpy data occupies in memory, by kind, for its rows.

        ``vectors`` is the embedding matrix (float32, ``rows × dimension × 4``); ``columns``
        the scalar columns (masks, codes, times, counts). Capacity beyond the rows is not
        counted: it is allocated zeroed (calloc) and its pages are not touched until rows are
        written. The texts, ids and tags are Python objects and are not counted here.
        """
        with self._lock:
            rows = self._n
            scalars = ("_alive", "_agent", "_source", "_layer", "_privacy", "_tier",
                       "_category", "_state", "_importance", "_confidence", "_created",
                       "_accessed", "_access_count", "_expires", "_anchor", "_tokens",
                       "_has_vec")
            columns = sum(rows * getattr(self, name).itemsize for name in scalars)
            return {"vectors": rows * self._dim * self._vectors.itemsize, "columns": columns}

    def __contains__(self, record_id: object) -> bool:
        with self._lock:
            return isinstance(record_id, str) and record_id in self._rows

    def row_of(self, record_id: str) -> int | None:
        """Current row of ``record_id`` or None."""
        with self._lock:
            return self._rows.get(record_id)

    def ids_with_hash(self, digest: str) -> list[str]:
        """Ids of live records whose content hash is ``digest`` (the exact-duplicate cache)."""
        with self._lock:
            return [str(self._ids[row]) for row in sorted(self._by_hash.get(digest, ()))]

    def vector(self, record_id: str, *, content_hash: str | None = None) -> F32 | None:
        """A copy of the record's embedding, or None when it has none yet.

        Args:
            content_hash: Only return the vector if the stored content still has this hash
                (a write without a new vector may keep the old one only for unchanged content).
        """
        with self._lock:
            row = self._rows.get(record_id)
            if row is None or not self._has_vec[row]:
                return None
            if content_hash is not None and self._hashes[row] != content_hash:
                return None
            vector: F32 = self._vectors[row].copy()
            return vector

    def holds_unchanged(self, records: Sequence[MemoryRecord],
                        vectors: F32) -> npt.NDArray[np.bool_]:
        """Per record: True when it is held with this very content and embedding.

        Such a record's write changes only its metadata. ``vectors[i]`` is record i's (a zero
        row: none); it matches a held vector within 1e-6 per component.
        """
        same = np.zeros(len(records), dtype=bool)
        with self._lock:
            for i, record in enumerate(records):
                row = self._rows.get(record.id)
                if row is not None and self._has_vec[row] \
                        and self._contents[row] == record.content:
                    same[i] = bool(np.abs(self._vectors[row] - vectors[i]).max() <= 1e-6)
        return same

    def snapshot(self) -> ViewSnapshot:
        """The columns as of now, for reading without the lock (no copy; see the module doc).

        Every call between two changes returns the same object.
        """
        with self._lock:
            cached = self._snapshot
            if cached is not None and cached.version == self._version:
                return cached
            n = self._n
            snapshot = ViewSnapshot(
                n=n, alive=_frozen(self._alive[:n]),
                agent=_frozen(self._agent[:n]), agents=list(self._agents),
                source=_frozen(self._source[:n]), sources=list(self._sources),
                layer=_frozen(self._layer[:n]), privacy=_frozen(self._privacy[:n]),
                tier=_frozen(self._tier[:n]), category=_frozen(self._category[:n]),
                state=_frozen(self._state[:n]),
                importance=_frozen(self._importance[:n]),
                confidence=_frozen(self._confidence[:n]), created_at=_frozen(self._created[:n]),
                last_accessed=_frozen(self._accessed[:n]),
                access_count=_frozen(self._access_count[:n]),
                expires_at=_frozen(self._expires[:n]), recency_anchor=_frozen(self._anchor[:n]),
                token_estimate=_frozen(self._tokens[:n]), has_vector=_frozen(self._has_vec[:n]),
                vectors=_frozen(self._vectors[:n]), id_array=_frozen(self._ids[:n]),
                content_array=_frozen(self._contents[:n]), hash_array=_frozen(self._hashes[:n]),
                tag_array=_frozen(self._tags[:n]), version=self._version, layout=self._layout,
                access_version=self._access_version, lineage=self._lineage,
                _lists=self._text_lists, _derived=self._derived, _grown=self._grown,
            )
            self._shared.update(_COPY_ON_WRITE)
            self._snapshot = snapshot
            return snapshot

    # -- writing ---------------------------------------------------------------------------

    def _changed(self, *, text: bool, layout: bool, access_only: bool = False,
                 existing: bool = True) -> None:
        """Count a change (under the lock): ``text``, the text columns or ``n`` changed;
        ``layout``, an existing row left or moved between partitions (see ViewSnapshot);
        ``access_only``, only access columns of existing rows changed (derived data that does
        not read them stays with the next snapshot); ``existing``, a row a snapshot shows
        changed other than by access counting (False: rows were only appended, or only
        accesses counted; the lineage stays)."""
        self._version += 1
        self._snapshot = None
        if access_only:
            self._access_version += 1
        else:
            self._derived = {}  # data derived for older snapshots stays with them
        if text:
            self._text_lists = {}  # lists built for older snapshots stay with them
        if layout:
            self._layout = next(_LAYOUTS)
        if existing and not access_only:
            self._lineage = next(_LAYOUTS)
            self._grown = {}  # what older snapshots computed stays with them

    def _partition_key(self, row: int) -> tuple[int, int, int, int, bool]:
        return (int(self._agent[row]), int(self._privacy[row]), int(self._layer[row]),
                int(self._category[row]), bool(self._has_vec[row]))

    def _own(self, name: str) -> Any:
        """Column ``name`` ready for an in-place change of a row a snapshot may show."""
        if name in self._shared:
            setattr(self, name, getattr(self, name).copy())
            self._shared.discard(name)
        return getattr(self, name)

    def upsert(self, records: Sequence[MemoryRecord],
               vectors: npt.NDArray[np.float32] | None = None) -> None:
        """Insert or replace ``records``; ``vectors[i]`` (if given and non-zero) is record i's.

        A record updated without a vector keeps its old vector only if its content hash did not
        change; otherwise it is marked as having none until re-embedded.
        """
        if not records:
            return
        with self._lock:
            text_changed = layout_changed = existing = False
            appended_from = self._n  # rows from here on are this call's own
            for i, record in enumerate(records):
                row = self._rows.get(record.id)
                before = None if row is None else self._partition_key(row)
                existing |= row is not None and row < appended_from
                if row is None:
                    if self._n == self._capacity:
                        self._allocate(self._capacity * 2)
                    row = self._n  # beyond every snapshot's rows: written in place
                    self._n += 1
                    self._rows[record.id] = row
                    self._ids[row] = record.id
                    self._contents[row] = record.content
                    self._hashes[row] = record.content_hash
                    self._tags[row] = record.tags
                    self._alive[row] = True
                    self._has_vec[row] = False
                    text_changed = True
                else:
                    text_changed |= self._update_text(row, record)
                self._index(record.content_hash, row)
                self._agent[row] = self._code(record.agent_id, self._agents, self._agent_code)
                self._source[row] = self._code(record.source, self._sources, self._source_code)
                self._layer[row] = _LAYER_CODE[record.layer]
                self._privacy[row] = _PRIVACY_CODE[record.privacy]
                self._tier[row] = _TIER_CODE[record.source_tier]
                self._category[row] = _CATEGORY_CODE[record.category]
                self._state[row] = _STATE_CODE[record.state]
                self._importance[row] = record.importance
                self._confidence[row] = record.confidence
                self._created[row] = record.created_at
                self._accessed[row] = record.last_accessed
                self._access_count[row] = record.access_count
                self._expires[row] = np.inf if record.expires_at is None else record.expires_at
                self._anchor[row] = record.recency_anchor or record.created_at
                self._tokens[row] = record.token_estimate
                if vectors is not None:
                    vector = vectors[i]
                    norm = float(np.linalg.norm(vector))
                    if norm > 0.0:
                        self._vectors[row] = vector / norm
                        self._has_vec[row] = True
                layout_changed |= before is not None and before != self._partition_key(row)
            self._changed(text=text_changed, layout=layout_changed, existing=existing)

    def _update_text(self, row: int, record: MemoryRecord) -> bool:
        """Write the text columns of an existing row (copy-on-write); True if one changed."""
        changed = False
        old_hash = self._hashes[row]
        if old_hash != record.content_hash:
            self._unindex(old_hash, row)
            self._own("_hashes")[row] = record.content_hash
            self._has_vec[row] = False
            self._vectors[row] = 0.0
            changed = True
        if self._contents[row] != record.content:
            self._own("_contents")[row] = record.content
            changed = True
        if self._tags[row] != record.tags:
            self._own("_tags")[row] = record.tags
            changed = True
        return changed

    def touch(self, record_ids: Iterable[str], now_ms: float) -> None:
        """Count an access (retrieval) of each record: access_count + 1, last_accessed = now.

        An access-only change (see :attr:`ViewSnapshot.access_version`); unknown ids are
        ignored.
        """
        with self._lock:
            touched = False
            for record_id in record_ids:
                row = self._rows.get(record_id)
                if row is not None:
                    self._access_count[row] += 1
                    self._accessed[row] = now_ms
                    touched = True
            if touched:
                self._changed(text=False, layout=False, access_only=True)

    def set_access(self, records: Sequence[MemoryRecord]) -> None:
        """Write ``access_count`` and ``last_accessed`` of stored ``records``, nothing else.

        An access-only change (see :attr:`ViewSnapshot.access_version`): the other fields of
        ``records`` must be those the view holds (the store's access counting guarantees it).

        Raises:
            KeyError: naming a record the view does not hold.
        """
        with self._lock:
            rows = [self._rows[record.id] for record in records]
            for row, record in zip(rows, records, strict=True):
                self._access_count[row] = record.access_count
                self._accessed[row] = record.last_accessed
            if rows:
                self._changed(text=False, layout=False, access_only=True)

    def remove(self, record_ids: Iterable[str]) -> None:
        """Drop records (tombstones; rebuilt when a third of the rows are dead)."""
        with self._lock:
            removed = False
            for record_id in record_ids:
                row = self._rows.pop(record_id, None)
                if row is None:
                    continue
                self._own("_alive")[row] = False
                self._unindex(self._hashes[row], row)
                self._dead += 1
                removed = True
            if not removed:
                return
            compacted = self._n > 1024 and self._dead * 3 > self._n
            if compacted:
                self._compact()
            self._changed(text=compacted, layout=True)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        arrays = {name: getattr(self, name) for name in (
            "_alive", "_agent", "_source", "_layer", "_privacy", "_tier", "_category",
            "_state", "_importance", "_confidence", "_created", "_accessed", "_access_count",
            "_expires", "_anchor", "_tokens", "_has_vec", "_vectors", *_TEXT)}
        capacity = max(16, len(keep) * 2)
        self._n = 0
        self._alive = None  # type: ignore[assignment]  # forces _allocate to start fresh
        self._allocate(capacity)
        for name, old in arrays.items():
            getattr(self, name)[: len(keep)] = old[keep]
        self._n = len(keep)
        self._dead = 0
        self._rows = {record_id: row for row, record_id in enumerate(self._ids[: self._n])}
        self._index_hashes(self._hashes[: self._n].tolist())

    def _index_hashes(self, hashes: Sequence[str]) -> None:
        """Rebuild the hash index for rows ``0..len(hashes)``."""
        by_hash: dict[str, list[int]] = {}
        for row, digest in enumerate(hashes):
            by_hash.setdefault(digest, []).append(row)
        self._by_hash = {digest: tuple(rows) for digest, rows in by_hash.items()}

    def _index(self, digest: str, row: int) -> None:
        rows = self._by_hash.get(digest, ())
        if row not in rows:
            self._by_hash[digest] = (*rows, row)

    def _unindex(self, digest: str, row: int) -> None:
        rows = tuple(r for r in self._by_hash.get(digest, ()) if r != row)
        if rows:
            self._by_hash[digest] = rows
        else:
            self._by_hash.pop(digest, None)

    @staticmethod
    def _code(value: str, table: list[str], index: dict[str, int]) -> int:
        code = index.get(value)
        if code is None:
            code = len(table)
            table.append(value)
            index[value] = code
        return code
