"""Candidate search: hash cache → nearest neighbours → linear-scan fallback (seed 001 step 3).

Everything is read from the engine's columnar view (DESIGN: Storage), never by looping over
records in Python on the embedding path:

1. **Hash cache**: ``view.ids_with_hash`` plus the hashes merged into records earlier
   (``hash_aliases``) plus records written earlier in the same batch.
2. **Nearest neighbours** (embedding path): partitions up to ``exact_search_max`` records are
   searched exactly with one numpy matrix-vector product over the view's unit vectors, masked
   by agent, privacy and layer codes; larger partitions through the in-process IVF index of
   their surprise partition (:mod:`engine.ingest.partition_index`, method ``ivf``: exact
   cosines of the rows of the lists nearest the query, kept current across writes). With
   ``IngestPolicy.partition_index`` off they ask Chroma's HNSW index instead
   (``store.nearest``, no ``where`` filter) for ``candidate_k`` neighbours times the store's
   share outside the partition (at most ``hnsw_overfetch`` times) and keep those of the
   partition. If HNSW returns too few partition neighbours (a small partition inside a huge
   store), the exact scan runs instead — the linear-scan fallback.
3. **Jaccard path** (no model yet): token Jaccard over the partition's texts, a linear scan.

The partition masks and counts are computed once per view snapshot
(:meth:`~engine.store.view.ViewSnapshot.derived`) and shared by the decisions that see the same
snapshot; candidate texts are read from the snapshot's object arrays row by row, so a decision
copies nothing of size N.

Two partitions are involved (DESIGN 3 and 5): merge candidates come from the same agent,
privacy and layer; surprise is measured against the same agent and privacy (any layer).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.ingest.decision import Candidate, ExactMatch
from engine.ingest.partition_index import PartitionIndex
from engine.ingest.policy import IngestPolicy
from engine.records import Category, Layer, MemoryRecord, NewMemory, Privacy, RelatedLink
from engine.store import CATEGORIES, LAYERS, PRIVACIES, MemoryStore
from engine.store.view import ViewSnapshot
from engine.text import jaccard, tokenize

__all__ = ["BatchOverlay", "CandidateSearch", "SearchResult"]

F32 = npt.NDArray[np.float32]
_PARTITIONS_KEPT = 8
_LAYER_CODE = {v: i for i, v in enumerate(LAYERS)}
_PRIVACY_CODE = {v: i for i, v in enumerate(PRIVACIES)}
_CATEGORY_CODE = {v: i for i, v in enumerate(CATEGORIES)}


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What the candidate search found for one incoming memory.

    Attributes:
        semantic: True on the embedding path, False on the Jaccard path.
        method: ``exact`` (numpy), ``ivf`` (the in-process partition index), ``hnsw``
            (Chroma), ``linear`` (Jaccard scan) or ``none`` (empty partition).
        hash_hit: The content hash is already stored in the merge partition.
        exact: The exact-duplicate record of the merge partition, if any.
        candidates: Merge-partition neighbours, most similar first (rejected pairs removed).
        rejected: Ids dropped because a person rejected the pair before.
        related: ``related`` links the record would get (similarity ≥ the related minimum).
        partition_size: Records of the merge partition (agent, privacy, layer).
        surprise_partition_size: Records of the surprise partition (agent, privacy).
        same_category_count: Records of the surprise partition with the same category.
        max_cosine: Highest cosine in the surprise partition (None on the Jaccard path).
        max_jaccard: Highest token Jaccard against the surprise partition's neighbours.
        duplicate_elsewhere: The hash is stored in the surprise partition (another layer).
    """

    semantic: bool
    method: str
    hash_hit: bool
    exact: ExactMatch | None
    candidates: tuple[Candidate, ...]
    rejected: tuple[str, ...]
    related: tuple[RelatedLink, ...]
    partition_size: int
    surprise_partition_size: int
    same_category_count: int
    max_cosine: float | None
    max_jaccard: float
    duplicate_elsewhere: bool = False

    def to_json(self) -> dict[str, Any]:
        """Wire form for the stepper and the events."""
        return {
            "path": "embedding" if self.semantic else "jaccard", "method": self.method,
            "hash_hit": self.hash_hit,
            "exact": None if self.exact is None else {"id": self.exact.id,
                                                      "confidence": self.exact.confidence,
                                                      "via_alias": self.exact.via_alias},
            "candidates": [c.to_json() for c in self.candidates],
            "rejected": list(self.rejected),
            "related": [link.to_json() for link in self.related],
            "partition_size": self.partition_size,
            "surprise_partition_size": self.surprise_partition_size,
            "same_category_count": self.same_category_count,
            "max_cosine": None if self.max_cosine is None else round(self.max_cosine, 6),
            "max_jaccard": round(self.max_jaccard, 6),
            "duplicate_elsewhere": self.duplicate_elsewhere,
        }


class _OverlayGroup:
    """The new records of one (agent, privacy) written earlier in a batch chunk, with their
    vectors stacked in one growing matrix so a search is one matrix-vector product."""

    def __init__(self) -> None:
        self.records: list[MemoryRecord] = []
        self.vector_count = 0
        self.category_counts: Counter[Category] = Counter()
        self.layer_counts: Counter[Layer] = Counter()
        self._has_vector: list[bool] = []
        self._matrix: F32 | None = None

    def add(self, record: MemoryRecord, vector: F32 | None) -> None:
        row = len(self.records)
        if vector is not None:
            if self._matrix is None:
                self._matrix = np.zeros((max(16, 2 * row), len(vector)), dtype=np.float32)
            elif row >= len(self._matrix):
                grown = np.zeros((max(2 * len(self._matrix), row + 1), self._matrix.shape[1]),
                                 dtype=np.float32)
                grown[:len(self._matrix)] = self._matrix
                self._matrix = grown
            self._matrix[row] = vector
            self.vector_count += 1
        self.records.append(record)
        self._has_vector.append(vector is not None)
        self.category_counts[record.category] += 1
        self.layer_counts[record.layer] += 1

    def similarities(self, vector: F32) -> npt.NDArray[np.float32]:
        """Cosine of ``vector`` to every record of the group (rows without a vector: -inf)."""
        count = len(self.records)
        if self._matrix is None:
            return np.full(count, -np.inf, dtype=np.float32)
        matrix = self._matrix[:count] if count <= len(self._matrix) else self._matrix
        sims = np.full(count, -np.inf, dtype=np.float32)
        sims[:len(matrix)] = np.einsum("ij,j->i", matrix, vector)
        if self.vector_count < count:
            sims[~np.asarray(self._has_vector)] = -np.inf
        return sims


@dataclass
class BatchOverlay:
    """Records written earlier in the same batch but not yet in the view.

    Batch ingest writes a chunk at once; until then, later memories of the chunk must still see
    earlier ones (a file that repeats a line must not insert it twice). New records are grouped
    by agent and privacy (the surprise partition) with their vectors stacked, so searching the
    overlay costs one matrix-vector product, not a Python loop over the chunk.
    """

    records: dict[str, MemoryRecord] = field(default_factory=dict)
    vectors: dict[str, F32] = field(default_factory=dict)
    new_ids: list[str] = field(default_factory=list)
    by_hash: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[tuple[str, Privacy], _OverlayGroup] = field(default_factory=dict)

    def put(self, record: MemoryRecord, vector: F32 | None, *, new: bool) -> None:
        """Remember a record written in this batch (``new``: inserted, not updated)."""
        self.records[record.id] = record
        if vector is not None:
            self.vectors[record.id] = vector
        if new and record.id not in self.by_hash.get(record.content_hash, ()):
            self.new_ids.append(record.id)
            self.by_hash.setdefault(record.content_hash, []).append(record.id)
            key = (record.agent_id, record.privacy)
            group = self.groups.get(key)
            if group is None:
                group = self.groups[key] = _OverlayGroup()
            group.add(record, vector)


@dataclass(frozen=True, slots=True)
class _Partition:
    """The merge and surprise partitions of one (agent, privacy, layer) in a snapshot.

    Computed once per snapshot (:meth:`ViewSnapshot.derived`), so decisions between two writes
    share it; after a write that only appended rows or changed other fields (the snapshot's
    ``layout`` is the same) the previous one is extended by the new rows instead of redone over
    every row. Masks and counts only: row-index arrays (8 bytes a row) are built by the paths
    that need them.

    Attributes:
        n: Rows of the snapshot it was computed for.
        layout: That snapshot's ``layout``.
        surprise: Live rows of the agent and privacy (mask over the snapshot's rows).
        merge: ``surprise`` rows of the layer too.
        searchable: ``surprise`` rows that have a vector.
        surprise_size: Rows of ``surprise``.
        merge_size: Rows of ``merge``.
        searchable_size: Rows of ``searchable``.
        category_counts: ``surprise`` rows per category code.
    """

    n: int
    layout: int
    surprise: npt.NDArray[np.bool_]
    merge: npt.NDArray[np.bool_]
    searchable: npt.NDArray[np.bool_]
    surprise_size: int
    merge_size: int
    searchable_size: int
    category_counts: npt.NDArray[np.intp]

    @classmethod
    def of(cls, snapshot: ViewSnapshot, agent: int, privacy: int, layer: int,
           previous: _Partition | None = None) -> _Partition:
        """The partitions of ``snapshot`` for agent code ``agent`` (-1: none), ``privacy`` and
        ``layer`` codes.

        Args:
            previous: The same partition of an earlier snapshot; used (and extended by the rows
                appended since) when its layout is the snapshot's.
        """
        if previous is not None and (previous.layout != snapshot.layout
                                     or previous.n > snapshot.n):
            previous = None
        if previous is not None and previous.n == snapshot.n:
            return previous
        start = 0 if previous is None else previous.n
        rows = slice(start, snapshot.n)
        if agent >= 0:
            surprise = snapshot.alive[rows] & (snapshot.agent[rows] == agent) & \
                (snapshot.privacy[rows] == privacy)
        else:
            surprise = np.zeros(snapshot.n - start, dtype=bool)
        merge = surprise & (snapshot.layer[rows] == layer)
        searchable = surprise & snapshot.has_vector[rows]
        counts = np.bincount(snapshot.category[rows][surprise], minlength=len(CATEGORIES))
        sizes = [int(np.count_nonzero(mask)) for mask in (surprise, merge, searchable)]
        if previous is not None:
            surprise = np.concatenate((previous.surprise, surprise))
            merge = np.concatenate((previous.merge, merge))
            searchable = np.concatenate((previous.searchable, searchable))
            counts = counts + previous.category_counts
            sizes = [size + before for size, before in zip(sizes, (
                previous.surprise_size, previous.merge_size, previous.searchable_size),
                strict=True)]
        return cls(n=snapshot.n, layout=snapshot.layout, surprise=surprise, merge=merge,
                   searchable=searchable, surprise_size=sizes[0], merge_size=sizes[1],
                   searchable_size=sizes[2], category_counts=counts)


class _TokenCache:
    """Token sets by content hash for the Jaccard path and keyword novelty (bounded LRU)."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._items: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._capacity = capacity

    def tokens(self, digest: str, text: str) -> frozenset[str]:
        found = self._items.get(digest)
        if found is not None:
            self._items.move_to_end(digest)
            return found
        tokens = frozenset(tokenize(text))
        self._items[digest] = tokens
        if len(self._items) > self._capacity:
            self._items.popitem(last=False)
        return tokens


class CandidateSearch:
    """Finds exact and near duplicates of an incoming memory (see the module docstring).

    Args:
        store: The record store (for the view and HNSW).
        policy: Sizes and thresholds.
    """

    def __init__(self, store: MemoryStore, policy: IngestPolicy) -> None:
        self._store = store
        self._policy = policy
        self._tokens = _TokenCache()
        # the latest partitions, to extend after a write (bounded: each holds three masks)
        self._partitions: OrderedDict[tuple[int, int, int], _Partition] = OrderedDict()
        self._partitions_lock = threading.Lock()
        # IVF indexes of the large surprise partitions (agent, privacy codes), kept current
        # across writes (bounded: each holds ~7 bytes per view row and 392 per
        # partition row)
        self._indexes: OrderedDict[tuple[int, int], PartitionIndex] = OrderedDict()

    def search(
        self,
        new: NewMemory,
        content_hash: str,
        vector: F32 | None,
        snapshot: ViewSnapshot,
        *,
        overlay: BatchOverlay | None = None,
        aliases: Sequence[str] = (),
        rejected: Collection[str] = (),
    ) -> SearchResult:
        """Search the view (and the batch overlay) for duplicates of ``new``."""
        agent = snapshot.agent_code(new.agent_id)
        privacy = _PRIVACY_CODE[new.privacy]
        layer = _LAYER_CODE[new.layer]
        part = self._partition(snapshot, agent, privacy, layer)
        exact, hash_hit, elsewhere = self._exact(new, content_hash, snapshot, part, overlay,
                                                 aliases)
        tokens = self._tokens.tokens(content_hash, new.content)
        sims: npt.NDArray[Any]
        if vector is not None:
            rows, sims, method = self._nearest(vector, snapshot, part, (agent, privacy))
        else:
            rows, sims, method = self._jaccard_scan(tokens, snapshot, part)
        merge_mask = snapshot.layer[rows] == layer if len(rows) else np.zeros(0, dtype=bool)
        # On the embedding path rows come most similar first (ties are improbable): only the
        # best candidate_k that survive the rejected pairs can be candidates.
        wanted = self._policy.candidate_k + len(rejected) if vector is not None else len(rows)
        found: list[Candidate] = []
        for row, sim in zip(rows[merge_mask][:wanted].tolist(),
                            sims[merge_mask][:wanted].tolist(), strict=True):
            if sim <= 0.0:
                continue  # nothing in common: not a candidate
            found.append(Candidate(str(snapshot.id_array[row]), float(sim),
                                   CATEGORIES[int(snapshot.category[row])],
                                   str(snapshot.content_array[row]), method))
        max_cos = float(sims.max()) if vector is not None and len(sims) else None
        neighbour_rows = rows[: self._policy.candidate_k].tolist()
        max_jac = max((jaccard(tokens, self._row_tokens(snapshot, r)) for r in neighbour_rows),
                      default=0.0) if vector is not None else \
            (float(sims.max()) if len(sims) else 0.0)
        surprise_size = part.surprise_size
        same_category = int(part.category_counts[_CATEGORY_CODE[new.category]])
        merge_size = part.merge_size
        if overlay is not None and overlay.new_ids:
            extra = self._overlay(new, tokens, vector, overlay, wanted)
            found.extend(extra.candidates)
            surprise_size += extra.surprise_size
            merge_size += extra.merge_size
            same_category += extra.same_category
            if extra.max_cosine is not None:
                max_cos = extra.max_cosine if max_cos is None else max(max_cos,
                                                                       extra.max_cosine)
            max_jac = max(max_jac, extra.max_jaccard)
        found.sort(key=lambda c: (-c.similarity, c.id))
        dropped = tuple(c.id for c in found if c.id in rejected)
        candidates = tuple(c for c in found if c.id not in rejected)[: self._policy.candidate_k]
        related = tuple(
            RelatedLink(c.id, c.similarity) for c in candidates
            if c.similarity >= self._policy.related_min_similarity
        )[: self._policy.dedup.related_top_k]
        return SearchResult(
            semantic=vector is not None,
            method=method if surprise_size else "none",
            hash_hit=hash_hit, exact=exact, candidates=candidates, rejected=dropped,
            related=related, partition_size=merge_size,
            surprise_partition_size=surprise_size, same_category_count=same_category,
            max_cosine=max_cos, max_jaccard=max_jac, duplicate_elsewhere=elsewhere,
        )

    def _partition(self, snapshot: ViewSnapshot, agent: int, privacy: int, layer: int
                   ) -> _Partition:
        key = (agent, privacy, layer)

        def compute(current: ViewSnapshot) -> _Partition:
            with self._partitions_lock:
                previous = self._partitions.get(key)
            part = _Partition.of(current, agent, privacy, layer, previous)
            with self._partitions_lock:
                self._partitions[key] = part
                self._partitions.move_to_end(key)
                while len(self._partitions) > _PARTITIONS_KEPT:
                    self._partitions.popitem(last=False)
            return part

        return snapshot.derived(("ingest.partition", *key), compute)

    # -- hash cache --------------------------------------------------------------------------

    def _exact(self, new: NewMemory, content_hash: str, snapshot: ViewSnapshot,
               part: _Partition, overlay: BatchOverlay | None, aliases: Sequence[str]
               ) -> tuple[ExactMatch | None, bool, bool]:
        view = self._store.view
        elsewhere = False
        direct = view.ids_with_hash(content_hash)
        pending = overlay.by_hash.get(content_hash, []) if overlay is not None else []
        for via_alias, ids in ((False, pending), (False, direct), (True, aliases)):
            for record_id in ids:
                if overlay is not None and record_id in overlay.records:
                    record = overlay.records[record_id]
                    if _same_partition(record, new, layer=True):
                        return ExactMatch(record.id, record.confidence, via_alias), True, False
                    elsewhere = elsewhere or _same_partition(record, new, layer=False)
                    continue
                row = view.row_of(record_id)
                if row is None or row >= snapshot.n or not snapshot.alive[row]:
                    continue
                if part.merge[row]:
                    stored = self._store.get(record_id)
                    return ExactMatch(stored.id, stored.confidence, via_alias), True, False
                elsewhere = elsewhere or (bool(part.surprise[row]) and not via_alias)
        return None, False, elsewhere

    # -- embedding path ----------------------------------------------------------------------

    def _nearest(self, vector: F32, snapshot: ViewSnapshot, part: _Partition,
                 key: tuple[int, int]
                 ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32], str]:
        size = part.searchable_size
        k = self._policy.candidate_k
        if size == 0:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float32), "exact"
        if size > self._policy.dedup.exact_search_max and self._policy.partition_index:
            rows, sims = self._index(key).search(vector, snapshot, part.searchable, size, 4 * k)
            return rows, sims, "ivf"
        if size > self._policy.dedup.exact_search_max:
            found = self._hnsw(vector, snapshot, part, k)
            if found is not None:
                return found[0], found[1], "hnsw"
        rows = np.flatnonzero(part.searchable)
        # einsum runs single-threaded SIMD loops: ~1 ms per 10K rows, steady. A BLAS matmul
        # is faster on an idle machine but its threads stall badly when the cores are busy
        # (measured 0.5-20 ms for the same 10K product while the model encodes).
        if size * 4 < snapshot.n:
            sims = np.einsum("ij,j->i", snapshot.vectors[rows], vector)
        else:
            sims = np.einsum("ij,j->i", snapshot.vectors, vector)[rows]
        top = _top_k(sims, 4 * k)
        return rows[top], sims[top].astype(np.float32), "exact"

    def _index(self, key: tuple[int, int]) -> PartitionIndex:
        with self._partitions_lock:
            index = self._indexes.get(key)
            if index is None:
                index = self._indexes[key] = PartitionIndex(
                    probe_share=self._policy.index_probe_share)
            self._indexes.move_to_end(key)
            while len(self._indexes) > _PARTITIONS_KEPT:
                self._indexes.popitem(last=False)
            return index

    def _hnsw(self, vector: F32, snapshot: ViewSnapshot, part: _Partition, k: int
              ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]] | None:
        # Other partitions' records crowd HNSW's answer in proportion to their share of the
        # store: fetch that many more (at most hnsw_overfetch times k).
        mask = part.searchable
        share = -(-snapshot.count // max(1, part.searchable_size))
        wanted = k * max(1, min(self._policy.hnsw_overfetch, share))
        hits = self._store.nearest(vector, wanted)
        view = self._store.view
        rows: list[int] = []
        sims: list[float] = []
        for record_id, similarity in hits:
            row = view.row_of(record_id)
            if row is not None and row < snapshot.n and mask[row]:
                rows.append(row)
                sims.append(similarity)
        if len(rows) < k and len(hits) >= wanted:
            return None  # the partition is crowded out of HNSW's answer: scan exactly
        return np.asarray(rows, dtype=np.intp), np.asarray(sims, dtype=np.float32)

    # -- Jaccard path ------------------------------------------------------------------------

    def _jaccard_scan(self, tokens: frozenset[str], snapshot: ViewSnapshot, part: _Partition
                      ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], str]:
        rows = np.flatnonzero(part.surprise)
        if not len(rows):
            return rows, np.zeros(0, dtype=np.float64), "linear"
        sims = np.fromiter((jaccard(tokens, self._row_tokens(snapshot, r)) for r in rows.tolist()),
                           dtype=np.float64, count=len(rows))
        top = _top_k(sims, 4 * self._policy.candidate_k)
        return rows[top], sims[top], "linear"

    def _row_tokens(self, snapshot: ViewSnapshot, row: int) -> frozenset[str]:
        return self._tokens.tokens(str(snapshot.hash_array[row]),
                                   str(snapshot.content_array[row]))

    # -- batch overlay -----------------------------------------------------------------------

    def _overlay(self, new: NewMemory, tokens: frozenset[str], vector: F32 | None,
                 overlay: BatchOverlay, wanted: int) -> _OverlayFound:
        group = overlay.groups.get((new.agent_id, new.privacy))
        if group is None:
            return _OverlayFound()
        records = group.records
        k = self._policy.candidate_k
        max_cos: float | None = None
        if vector is not None and group.vector_count:
            sims = group.similarities(vector)
            order = _top_k(sims, 4 * k)
            order = order[np.isfinite(sims[order])]
            max_cos = float(sims[order[0]]) if len(order) else None
            # keyword novelty against the nearest neighbours, as for the view (module doc)
            neighbours = order[:k].tolist()
            max_jac = max((jaccard(tokens, self._record_tokens(records[i])) for i in neighbours),
                          default=0.0)
            scored = [(i, float(sims[i])) for i in order.tolist()]
        else:
            jaccards = [jaccard(tokens, self._record_tokens(r)) for r in records]
            max_jac = max(jaccards, default=0.0)
            scored = [] if vector is not None else list(enumerate(jaccards))
        if len(group.layer_counts) > 1:
            scored = [(i, sim) for i, sim in scored if records[i].layer == new.layer]
        elif new.layer not in group.layer_counts:
            scored = []
        if vector is not None:
            scored = scored[:wanted]
        found = [Candidate(records[i].id, sim, records[i].category, records[i].content, "batch")
                 for i, sim in scored]
        return _OverlayFound(found, len(records), group.layer_counts[new.layer],
                             group.category_counts[new.category], max_cos, max_jac)

    def _record_tokens(self, record: MemoryRecord) -> frozenset[str]:
        return self._tokens.tokens(record.content_hash, record.content)


@dataclass(frozen=True, slots=True)
class _OverlayFound:
    """What the batch overlay adds to a search: candidates of the merge partition (the
    nearest ``4 × candidate_k`` on the embedding path), partition sizes and maxima."""

    candidates: list[Candidate] = field(default_factory=list)
    surprise_size: int = 0
    merge_size: int = 0
    same_category: int = 0
    max_cosine: float | None = None
    max_jaccard: float = 0.0


def _same_partition(record: MemoryRecord | None, new: NewMemory, *, layer: bool) -> bool:
    if record is None:
        return False
    return (record.agent_id == new.agent_id and record.privacy == new.privacy
            and (not layer or record.layer == new.layer))


def _top_k(values: npt.NDArray[Any], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` largest values, largest first (ties by index)."""
    if len(values) <= k:
        return np.argsort(-values, kind="stable")
    part = np.argpartition(-values, k)[:k]
    return part[np.argsort(-values[part], kind="stable")]

