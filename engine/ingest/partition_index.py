"""An in-process inverted-file (IVF) index over one dedup partition's vectors in the view.

The ingest dedup decision needs the nearest neighbours of an incoming memory among the records
of its surprise partition (agent and privacy). Up to ``exact_search_max`` records that is one
exact numpy product (:mod:`engine.ingest.search`); past it an exact scan costs 7-9 ms of CPU
at 83K records (memory-bound: 128 MB of float32 per query) and Chroma's HNSW query on a 1M
store 20-200 ms. This index answers from a few percent of the partition:

* **Lists.** Spherical k-means puts the partition's ``m`` unit vectors into ``4·√m`` lists
  around unit centroids (trained once on a sample of :data:`TRAIN_PER_LIST` rows per list, a
  fixed seed: the same data give the same lists). A query scores the centroids, takes the rows
  of its ``nprobe`` nearest lists (at least :data:`MIN_PROBE_SHARE` of the partition), and
  computes their exact float32 cosines from the view's vectors, so every similarity it reports
  is exact; only which rows are looked at is approximate (recall: docs/ingest.md).
* **Outliers.** A vector that fits its nearest centroid far worse than the training rows
  typically do (:data:`OUTLIER_SPREAD`) — a topic that arrived after training — goes to an
  outlier list that every query scans: in the list of its nearest (but still distant)
  centroid, a query near it would rank that centroid no higher than many others and miss it.
  Once the outliers grew by :data:`OUTLIER_RETRAIN` of the partition, the lists are trained
  again (rows that still fit nothing stay outliers: correct, at the cost of a longer scan).
* **Int8 codes.** When the lists are sorted, their vectors are coded as int8 with a scale per
  row (384 bytes a row, contiguous per list). A query estimates the probed rows' cosines from
  the codes (each within ``scale/2 · ‖q‖₁`` of the true cosine) and computes the exact float32
  cosine of every row whose estimate can reach the ``k``-th best: the top ``k`` of the probed
  rows are exactly those an exact scan of the same rows would give.
* **Kept current across writes, never rebuilt per decision.** A row's list depends only on
  its vector, and partition membership is read from the snapshot's mask at query time, so the
  index only has to know *which list each vector is in*. Per view row it keeps the list
  (``-1``: none) and a fingerprint of the vector it assigned (its first component: a
  changed vector with the same float32 first component keeps its old list, which costs that
  row's recall, never a wrong similarity).
  Rows appended since (the snapshot's ``lineage`` unchanged) are assigned on the next query;
  after any other write (an update, a delete, a re-embedding, a compaction that renumbers
  rows) the partition's rows are compared with their fingerprints and the changed ones
  reassigned — one float gathered per partition row (~1.5 ms at 83K rows of a 1M view), not a
  k-means. Rows that left the partition
  or died are dropped by the mask. Newly assigned rows wait in an overflow array until it
  grows past a share of the lists, then the lists are re-sorted (amortized). When the
  partition has grown to :data:`REBUILD_GROWTH` times its size at training, the centroids are
  trained again (the lists would otherwise get long).

The index is engine-internal and thread-safe (one lock per index: a refresh and the query that
follows it see one state).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.store.view import ViewSnapshot

__all__ = ["PartitionIndex"]

F32 = npt.NDArray[np.float32]
Rows = npt.NDArray[np.intp]

MIN_LISTS = 8
MAX_LISTS = 4096  # list numbers are int16
LISTS_PER_ROOT = 4  # lists = 4·√m: ~72 rows a list at 83K (finer lists find more per row
# scanned: on the real model's vectors 4·√m at 8 % recalls what 2·√m needs 12 % for)
TRAIN_PER_LIST = 32  # k-means sample: enough rows per centroid (16: recall 0.988 at 8 %)
TRAIN_ROUNDS = 6
MIN_PROBE_SHARE = 0.08  # a query scans at least this share of the partition's rows
# (IngestPolicy.index_probe_share: recall on the real model's vectors)
MIN_PROBE_LISTS = 8
REBUILD_GROWTH = 4.0  # retrain the centroids once the partition grew this many times
OUTLIER_SPREAD = 4.0  # outlier: fit below median - 4 x (median - lower quartile) of training
OUTLIER_RETRAIN = 0.05  # retrain once the outliers grew by this share of the partition
OVERFLOW_SHARE = 0.05  # re-sort the lists when the overflow exceeds this share of them
_BLOCK = 16_384  # rows per assignment product (bounds the temporary matrix)
_SEED = 20_261_126


class PartitionIndex:
    """IVF lists over the vectors of one partition of the view (see the module docstring).

    Args:
        probe_share: The least share of the partition a query scans (its lists nearest first).
    """

    def __init__(self, *, probe_share: float = MIN_PROBE_SHARE) -> None:
        self._lock = threading.Lock()
        self._probe_share = probe_share
        self._centroids: F32 | None = None
        self._trained_size = 0
        # per view row: list (-1 none) and the first component of the vector assigned
        self._assign = np.full(0, -1, dtype=np.int16)
        self._print = np.zeros(0, dtype=np.float32)
        # lists as one sorted array: rows of list l are _rows[_starts[l]:_starts[l + 1]]
        self._rows: Rows = np.zeros(0, dtype=np.intp)
        self._starts: Rows = np.zeros(1, dtype=np.intp)
        # the sorted rows' vectors as int8 codes with a scale per row (contiguous per list: a
        # query reads 384 bytes a row instead of gathering 1,536 from the view)
        self._codes = np.zeros((0, 0), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)
        # per view row: assigned since the lists were sorted (its code, if any, is stale)
        self._moved = np.zeros(0, dtype=bool)
        self._overflow: list[Rows] = []
        self._overflow_size = 0
        # rows whose best centroid is less similar than this go to the outlier list, which
        # every query scans (list number ``lists``)
        self._fit_floor = -1.0
        self._outliers = 0
        self._outliers_trained = 0  # outliers right after the last training
        self._lineage: int | None = None
        self._n = 0

    @property
    def lists(self) -> int:
        """Number of lists around a centroid (0 before the first query)."""
        return 0 if self._centroids is None else len(self._centroids)

    def search(self, vector: F32, snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_],
               size: int, k: int) -> tuple[Rows, F32]:
        """The ``k`` rows of ``mask`` most similar to ``vector`` among the probed lists.

        Args:
            vector: The unit query vector.
            snapshot: The view snapshot the rows and vectors are read from.
            mask: The partition's searchable rows (alive, with a vector) in ``snapshot``.
            size: Rows set in ``mask``.
            k: How many rows to return.

        Returns:
            (rows, exact cosines), most similar first.
        """
        with self._lock:
            self._refresh(snapshot, mask, size)
            coded, extra = self._probe(vector, size)
            # the sorted rows by their codes: an estimate within ``bound`` of the cosine, so
            # every row whose cosine can reach the k-th best lower estimate is scored exactly
            positions = coded[self._keep(self._rows[coded], snapshot, mask)]
            rows = self._rows[positions]
            if len(rows) > k:
                scales = self._scales[positions]
                estimate = np.einsum("ij,j->i", self._codes[positions], vector) * scales
                # + 1e-4: float32 rounding of the estimate itself
                bound = scales * (0.5 * float(np.abs(vector).sum())) + 1e-4
                kth = -np.partition(-(estimate - bound), k - 1)[k - 1]
                rows = rows[estimate + bound >= kth]
            extra = extra[self._keep(extra, snapshot, mask)]
            rows = np.concatenate((rows, extra))
            sims: F32 = np.einsum("ij,j->i", snapshot.vectors[rows], vector)
        if len(rows) > k:
            top = np.argpartition(-sims, k)[:k]
            rows, sims = rows[top], sims[top]
        order = np.argsort(-sims, kind="stable")
        return rows[order], sims[order]

    def _keep(self, rows: Rows, snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_]
              ) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` are rows of the snapshot's partition (``mask``)."""
        keep = rows < snapshot.n
        keep[keep] = mask[rows[keep]]
        return keep

    # -- keeping current -------------------------------------------------------------------

    def _refresh(self, snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_], size: int) -> None:
        if self._centroids is None or size > REBUILD_GROWTH * self._trained_size or \
                self._outliers > self._outliers_trained + OUTLIER_RETRAIN * max(
                    size, self._trained_size):
            self._train(snapshot, mask, size)
            return
        if snapshot.lineage == self._lineage:
            if snapshot.n > self._n:  # rows appended since: assign those of the partition
                self._assign_rows(snapshot, np.flatnonzero(mask[self._n:]) + self._n)
        else:
            # existing rows may have changed: reassign those whose vector is not the one
            # assigned (a changed fingerprint), or that were not in the partition then
            rows = np.flatnonzero(mask)
            self._grow(snapshot.n)
            held = (self._assign[rows] >= 0) & (self._print[rows] == _first(snapshot.vectors,
                                                                            rows))
            self._assign_rows(snapshot, rows[~held])
        self._lineage = snapshot.lineage
        self._n = max(self._n, snapshot.n)

    def _grow(self, n: int) -> None:
        if n > len(self._assign):
            capacity = max(n, 2 * len(self._assign))
            assign = np.full(capacity, -1, dtype=np.int16)
            assign[:len(self._assign)] = self._assign
            fingerprint = np.zeros(capacity, dtype=np.float32)
            fingerprint[:len(self._print)] = self._print
            moved = np.zeros(capacity, dtype=bool)
            moved[:len(self._moved)] = self._moved
            self._assign, self._print, self._moved = assign, fingerprint, moved

    def _assign_rows(self, snapshot: ViewSnapshot, rows: Rows) -> None:
        """Put ``rows`` into their nearest lists (the overflow until the next re-sort)."""
        if not len(rows):
            return
        self._grow(snapshot.n)
        lists = self._nearest_lists(snapshot.vectors, rows)
        self._assign[rows] = lists
        self._print[rows] = _first(snapshot.vectors, rows)
        self._moved[rows] = True
        self._outliers += int(np.count_nonzero(lists == self.lists))
        self._overflow.append(rows)
        self._overflow_size += len(rows)
        if self._overflow_size > max(1024.0, OVERFLOW_SHARE * len(self._rows)):
            self._sort_lists(snapshot.vectors)

    def _sort_lists(self, vectors: F32) -> None:
        """Sort the assigned rows by list and code their vectors (the overflow emptied)."""
        # rows past these vectors (seen in a newer snapshot than the caller's) are assigned
        # again when they are seen next
        self._assign[len(vectors):] = -1
        self._n = min(self._n, len(vectors))
        held = np.flatnonzero(self._assign[:len(vectors)] >= 0)
        lists = self._assign[held]
        order = np.argsort(lists, kind="stable")
        self._rows = held[order]
        self._codes = np.empty((len(self._rows), vectors.shape[1]), dtype=np.int8)
        self._scales = np.empty(len(self._rows), dtype=np.float32)
        for start in range(0, len(self._rows), _BLOCK):
            block = vectors[self._rows[start:start + _BLOCK]]
            # per row: the largest component maps to ±127, so a code is within scale/2 of it
            scales = np.maximum(np.abs(block).max(axis=1), 1e-12) / 127.0
            self._codes[start:start + _BLOCK] = np.rint(block / scales[:, None])
            self._scales[start:start + _BLOCK] = scales
        self._moved[:] = False
        # lists + 1 lists: the last holds the outliers
        self._starts = np.searchsorted(lists[order], np.arange(self.lists + 2)).astype(np.intp)
        self._outliers = int(self._starts[-1] - self._starts[-2])
        self._overflow = []
        self._overflow_size = 0

    def _nearest_lists(self, vectors: F32, rows: Rows) -> npt.NDArray[np.int16]:
        """The list of each row: its nearest centroid's, or the outlier list (``lists``)."""
        found, fit = self._fit(vectors, rows)
        found[fit < self._fit_floor] = self.lists
        return found

    def _fit(self, vectors: F32, rows: Rows) -> tuple[npt.NDArray[np.int16], F32]:
        """Each row's nearest centroid and its cosine to it."""
        assert self._centroids is not None  # callers train first
        found = np.empty(len(rows), dtype=np.int16)
        fit = np.empty(len(rows), dtype=np.float32)
        for start in range(0, len(rows), _BLOCK):
            block = vectors[rows[start:start + _BLOCK]]
            # a few appended rows: einsum (single-threaded, see _probe); many: one BLAS product
            scores = np.einsum("ij,kj->ik", block, self._centroids) if len(block) <= 8 else \
                block @ self._centroids.T
            best = np.argmax(scores, axis=1)
            found[start:start + _BLOCK] = best
            fit[start:start + _BLOCK] = scores[np.arange(len(best)), best]
        return found, fit

    def _train(self, snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_], size: int) -> None:
        """Spherical k-means on a sample of the partition, then every row assigned."""
        rows = np.flatnonzero(mask)
        lists = min(MAX_LISTS, max(MIN_LISTS, round(LISTS_PER_ROOT * math.sqrt(max(1, size)))))
        rng = np.random.default_rng(_SEED)
        sample = rows if len(rows) <= TRAIN_PER_LIST * lists else \
            np.sort(rng.choice(rows, TRAIN_PER_LIST * lists, replace=False))
        data = snapshot.vectors[sample]
        lists = min(lists, max(1, len(data)))
        centroids = data[rng.choice(len(data), lists, replace=False)].copy()
        for _ in range(TRAIN_ROUNDS):
            nearest = np.argmax(data @ centroids.T, axis=1)
            # per-list sums by one sort and reduceat (np.add.at: 0.12 s a round at 18K rows)
            order = np.argsort(nearest, kind="stable")
            counts = np.bincount(nearest, minlength=lists)
            filled = counts > 0
            sums = np.zeros_like(centroids)
            sums[filled] = np.add.reduceat(data[order], (np.cumsum(counts) - counts)[filled],
                                           axis=0)
            norms = np.linalg.norm(sums, axis=1)
            empty = norms == 0.0
            # an empty list takes a random sample row: every centroid keeps a share of the data
            sums[empty] = data[rng.choice(len(data), int(empty.sum()))]
            norms[empty] = 1.0
            centroids = (sums / norms[:, None]).astype(np.float32)
        self._centroids = np.ascontiguousarray(centroids)
        self._trained_size = max(1, size)
        self._assign = np.full(0, -1, dtype=np.int16)
        self._print = np.zeros(0, dtype=np.float32)
        self._moved = np.zeros(0, dtype=bool)
        self._grow(snapshot.n)
        if len(rows):
            nearest, fit = self._fit(snapshot.vectors, rows)
            # a vector that fits its centroid far worse than the typical row (a topic that
            # came after training, or none the lists could learn) is scanned by every query
            # instead of waiting in a list no query near it would probe; the floor is robust
            # to a share of such rows among the training data (median and quartile)
            middle, quartile = np.quantile(fit, [0.5, 0.25])
            self._fit_floor = float(middle - OUTLIER_SPREAD * (middle - quartile))
            nearest[fit < self._fit_floor] = len(self._centroids)
            self._assign[rows] = nearest
            self._print[rows] = _first(snapshot.vectors, rows)
        self._sort_lists(snapshot.vectors)
        self._outliers_trained = self._outliers
        self._lineage = snapshot.lineage
        self._n = snapshot.n

    # -- querying ----------------------------------------------------------------------------

    def _probe(self, vector: F32, size: int) -> tuple[Rows, Rows]:
        """The lists nearest ``vector`` (at least the probe share of ``size``): positions in
        the sorted rows, and the rows assigned to them since (the overflow)."""
        assert self._centroids is not None  # _refresh trained it
        # einsum, not a BLAS matvec: BLAS threads stall when the cores are busy (search.py)
        scores = np.einsum("ij,j->i", self._centroids, vector)
        order = np.argsort(-scores, kind="stable")
        lengths = np.diff(self._starts[:-1])[order]
        wanted = self._probe_share * size
        # lists nearest first until the probe share is scanned (and at least MIN_PROBE_LISTS)
        enough = int(np.searchsorted(np.cumsum(lengths), wanted)) + 1
        probed = np.append(order[:max(MIN_PROBE_LISTS, enough)], self.lists)  # + outliers
        parts: list[Rows] = [np.arange(self._starts[lst], self._starts[lst + 1])
                             for lst in probed.tolist()]
        positions = np.concatenate(parts)
        if not self._overflow:
            return positions, np.zeros(0, dtype=np.intp)
        # a row assigned since the sort is read from the view, never by its old code
        positions = positions[~self._moved[self._rows[positions]]]
        chosen = np.zeros(self.lists + 1, dtype=bool)
        chosen[probed] = True
        extra = np.unique(np.concatenate(self._overflow))  # a row reassigned twice: once
        return positions, extra[chosen[self._assign[extra]]]

    def describe(self) -> dict[str, Any]:
        """Sizes for the stage data and the benchmark (lists, rows held, overflow)."""
        return {"lists": self.lists, "rows": len(self._rows), "outliers": self._outliers,
                "overflow": self._overflow_size, "trained_size": self._trained_size}


def _first(vectors: F32, rows: Rows) -> F32:
    """The first component of ``vectors[rows]`` (the fingerprint of a row's vector).

    One float per row, taken from the flat array: ~1 ms for 83K rows of a 1M view, a quarter of
    ``vectors[rows, :2]`` (a cache miss per row either way; the flat take skips numpy's mixed
    fancy-and-slice indexing).
    """
    if vectors.flags.c_contiguous:
        first: F32 = vectors.reshape(-1).take(rows * vectors.shape[1])
        return first
    column: F32 = vectors[rows, 0]
    return column
