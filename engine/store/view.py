"""The engine's columnar in-memory view of the store (DESIGN: Storage).

Retrieval, dedup and the records browser never loop over records in Python and never ask Chroma
to filter (a metadata ``where`` costs ~150 ms at 100K). They work on numpy columns here: scalar
fields, categorical codes, and the L2-normalized embedding matrix.

Rows are append-only with tombstones: an update rewrites a row in place, a delete clears its
``alive`` flag, and when a third of the rows are dead the arrays are rebuilt. Growth and rebuilds
allocate *new* arrays, so a :class:`ViewSnapshot` taken earlier stays internally consistent (it
holds the old arrays); in-place updates of a live row are visible to it, which readers accept.

Thread-safety: all mutation happens under the view's lock; :meth:`ColumnarView.snapshot` is
cheap (array slices plus a copy of the alive mask and the id list).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.records import Category, Layer, MemoryRecord, Privacy, TrustTier

__all__ = [
    "CATEGORIES",
    "LAYERS",
    "PRIVACIES",
    "TIERS",
    "ColumnarView",
    "ViewSnapshot",
]

LAYERS: tuple[Layer, ...] = tuple(Layer)
PRIVACIES: tuple[Privacy, ...] = tuple(Privacy)
TIERS: tuple[TrustTier, ...] = tuple(TrustTier)
CATEGORIES: tuple[Category, ...] = tuple(Category)
_LAYER_CODE = {v: i for i, v in enumerate(LAYERS)}
_PRIVACY_CODE = {v: i for i, v in enumerate(PRIVACIES)}
_TIER_CODE = {v: i for i, v in enumerate(TIERS)}
_CATEGORY_CODE = {v: i for i, v in enumerate(CATEGORIES)}
# Process-wide, so a version number names one state of one view (caches key on it).
_VERSIONS = itertools.count(1)

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ViewSnapshot:
    """Columns of the first ``n`` rows; only rows with ``alive[row]`` exist.

    Categorical columns are codes into :data:`LAYERS`, :data:`PRIVACIES`, :data:`TIERS`,
    :data:`CATEGORIES` and ``agents`` / ``sources``. ``expires_at`` is ``inf`` for no expiry.
    ``vectors`` rows are unit length where ``has_vector`` is set and zero elsewhere.
    ``version`` changes (to a number never used before, by any view) whenever rows are written
    or removed, ``access_version`` whenever access counts are touched: derived data may be
    cached under them.
    """

    n: int
    ids: Sequence[str]
    alive: B
    agent: I32
    agents: Sequence[str]
    source: I32
    sources: Sequence[str]
    layer: I8
    privacy: I8
    tier: I8
    category: I8
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
    contents: Sequence[str]
    hashes: Sequence[str]
    tags: Sequence[tuple[str, ...]]
    version: int = 0
    access_version: int = 0

    @property
    def live_rows(self) -> npt.NDArray[np.intp]:
        """Indices of live rows, ascending."""
        return np.flatnonzero(self.alive)

    @property
    def count(self) -> int:
        """Number of live rows."""
        return int(self.alive.sum())

    def agent_code(self, agent_id: str) -> int:
        """Code of ``agent_id`` in this snapshot, or -1 when no record has it."""
        try:
            return list(self.agents).index(agent_id)
        except ValueError:
            return -1


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
        self._rows: dict[str, int] = {}
        self._by_hash: dict[str, set[int]] = {}
        self._agents: list[str] = []
        self._agent_code: dict[str, int] = {}
        self._sources: list[str] = []
        self._source_code: dict[str, int] = {}
        self._ids: list[str] = []
        self._contents: list[str] = []
        self._hashes: list[str] = []
        self._tags: list[tuple[str, ...]] = []
        self._version = next(_VERSIONS)
        self._access_version = next(_VERSIONS)
        self._allocate(max(16, capacity))

    def _allocate(self, capacity: int) -> None:
        def grow(old: Any, shape: tuple[int, ...], dtype: type,
                 fill: float | int | bool = 0) -> Any:
            fresh: Any = np.full(shape, fill, dtype=dtype)
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
                   "importance": view._importance, "confidence": view._confidence,
                   "created_at": view._created, "last_accessed": view._accessed,
                   "access_count": view._access_count, "expires_at": view._expires,
                   "recency_anchor": view._anchor, "token_estimate": view._tokens,
                   "has_vector": view._has_vec, "vectors": view._vectors}
        for name, target in targets.items():
            target[:n] = columns[name]
        view._alive[:n] = True
        view._n = n
        view._ids, view._contents, view._hashes, view._tags = ids, contents, hashes, tags
        view._rows = {record_id: row for row, record_id in enumerate(ids)}
        for row, digest in enumerate(hashes):
            view._by_hash.setdefault(digest, set()).add(row)
        view._agents, view._sources = list(agents), list(sources)
        view._agent_code = {a: i for i, a in enumerate(view._agents)}
        view._source_code = {s: i for i, s in enumerate(view._sources)}
        return view

    # -- reading ---------------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """Embedding length."""
        return self._dim

    def __len__(self) -> int:
        with self._lock:
            return self._n - self._dead

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
            return [self._ids[row] for row in sorted(self._by_hash.get(digest, ()))]

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

    def snapshot(self) -> ViewSnapshot:
        """Consistent columns for reading without the lock."""
        with self._lock:
            n = self._n
            return ViewSnapshot(
                n=n, ids=list(self._ids), alive=self._alive[:n].copy(),
                agent=self._agent[:n], agents=list(self._agents),
                source=self._source[:n], sources=list(self._sources),
                layer=self._layer[:n], privacy=self._privacy[:n], tier=self._tier[:n],
                category=self._category[:n], importance=self._importance[:n],
                confidence=self._confidence[:n], created_at=self._created[:n],
                last_accessed=self._accessed[:n], access_count=self._access_count[:n],
                expires_at=self._expires[:n], recency_anchor=self._anchor[:n],
                token_estimate=self._tokens[:n], has_vector=self._has_vec[:n],
                vectors=self._vectors[:n], contents=list(self._contents),
                hashes=list(self._hashes), tags=list(self._tags),
                version=self._version, access_version=self._access_version,
            )

    # -- writing ---------------------------------------------------------------------------

    def upsert(self, records: Sequence[MemoryRecord],
               vectors: npt.NDArray[np.float32] | None = None) -> None:
        """Insert or replace ``records``; ``vectors[i]`` (if given and non-zero) is record i's.

        A record updated without a vector keeps its old vector only if its content hash did not
        change; otherwise it is marked as having none until re-embedded.
        """
        with self._lock:
            for i, record in enumerate(records):
                row = self._rows.get(record.id)
                if row is None:
                    if self._n == self._capacity:
                        self._allocate(self._capacity * 2)
                    row = self._n
                    self._n += 1
                    self._rows[record.id] = row
                    self._ids.append(record.id)
                    self._contents.append(record.content)
                    self._hashes.append(record.content_hash)
                    self._tags.append(record.tags)
                    self._has_vec[row] = False
                else:
                    old_hash = self._hashes[row]
                    self._by_hash.get(old_hash, set()).discard(row)
                    if old_hash != record.content_hash:
                        self._has_vec[row] = False
                        self._vectors[row] = 0.0
                    self._contents[row] = record.content
                    self._hashes[row] = record.content_hash
                    self._tags[row] = record.tags
                self._by_hash.setdefault(record.content_hash, set()).add(row)
                self._alive[row] = True
                self._agent[row] = self._code(record.agent_id, self._agents, self._agent_code)
                self._source[row] = self._code(record.source, self._sources, self._source_code)
                self._layer[row] = _LAYER_CODE[record.layer]
                self._privacy[row] = _PRIVACY_CODE[record.privacy]
                self._tier[row] = _TIER_CODE[record.source_tier]
                self._category[row] = _CATEGORY_CODE[record.category]
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
            self._version = next(_VERSIONS)

    def touch(self, record_ids: Iterable[str], now_ms: float) -> None:
        """Count an access (retrieval) of each record: access_count + 1, last_accessed = now."""
        with self._lock:
            for record_id in record_ids:
                row = self._rows.get(record_id)
                if row is not None:
                    self._access_count[row] += 1
                    self._accessed[row] = now_ms
            self._access_version = next(_VERSIONS)

    def remove(self, record_ids: Iterable[str]) -> None:
        """Drop records (tombstones; rebuilt when a third of the rows are dead)."""
        with self._lock:
            for record_id in record_ids:
                row = self._rows.pop(record_id, None)
                if row is None:
                    continue
                self._alive[row] = False
                self._by_hash.get(self._hashes[row], set()).discard(row)
                self._dead += 1
            self._version = next(_VERSIONS)
            if self._n > 1024 and self._dead * 3 > self._n:
                self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        old_ids, old_contents = self._ids, self._contents
        old_hashes, old_tags = self._hashes, self._tags
        arrays = {name: getattr(self, name) for name in (
            "_alive", "_agent", "_source", "_layer", "_privacy", "_tier", "_category",
            "_importance", "_confidence", "_created", "_accessed", "_access_count",
            "_expires", "_anchor", "_tokens", "_has_vec", "_vectors")}
        capacity = max(16, len(keep) * 2)
        self._n = 0
        self._alive = None  # type: ignore[assignment]  # forces _allocate to start fresh
        self._allocate(capacity)
        for name, old in arrays.items():
            getattr(self, name)[: len(keep)] = old[keep]
        self._n = len(keep)
        self._dead = 0
        self._ids = [old_ids[r] for r in keep]
        self._contents = [old_contents[r] for r in keep]
        self._hashes = [old_hashes[r] for r in keep]
        self._tags = [old_tags[r] for r in keep]
        self._rows = {record_id: row for row, record_id in enumerate(self._ids)}
        self._by_hash = {}
        for row, digest in enumerate(self._hashes):
            self._by_hash.setdefault(digest, set()).add(row)

    @staticmethod
    def _code(value: str, table: list[str], index: dict[str, int]) -> int:
        code = index.get(value)
        if code is None:
            code = len(table)
            table.append(value)
            index[value] = code
        return code
