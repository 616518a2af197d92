"""An in-process inverted-file (IVF) index over one dedup partition's vectors in the view.

The ingest dedup decision needs the nearest neighbours of an incoming memory among the records
of its surprise partition (agent and privacy). Up to ``exact_search_max`` records that is one
exact numpy product (:mod:`engine.ingest.search`); past it an exact scan costs 7-9 ms of CPU
at 83K records (memory-bound: 128 MB of float32 per query) and Chroma's HNSW query on a 1M
store 20-200 ms. This index answers from a few percent of the partition:

* **Lists.** Spherical k-means puts the partition's ``m`` unit vectors into ``2·√m`` lists
  around unit centroids (trained once on a sample of :data:`TRAIN_PER_LIST` rows per list, a
  fixed seed: the same data give the same lists). A query scores the centroids, takes the rows
  of its ``nprobe`` nearest lists (at least :data:`MIN_PROBE_SHARE` of the partition), and
  computes their exact float32 cosines from the view's vectors, so every similarity it reports
  is exact; only which rows are looked at is approximate (recall: docs/ingest.md).
* **Outliers.** A vector that fits no centroid as well as the worst-fitting 1 % of the
  training rows (:data:`OUTLIER_QUANTILE`) — typically a topic that arrived after training —
  goes to an outlier list that every query scans: in a list of its nearest (but still
  distant) centroid, a query near it would rank that centroid no higher than many others and
  miss it. Once outliers are :data:`OUTLIER_RETRAIN` of the partition, the lists are trained
  again.
* **Kept current across writes, never rebuilt per decision.** A row's list depends only on
  its vector, and partition membership is read from the snapshot's mask at query time, so the
  index only has to know *which list each vector is in*. Per view row it keeps the list
  (``-1``: none) and a fingerprint of the vector it assigned (its first two components).
  Rows appended since (the snapshot's ``lineage`` unchanged) are assigned on the next query;
  after any other write (an update, a delete, a re-embedding, a compaction that renumbers
  rows) the partition's rows are compared with their fingerprints and the changed ones
  reassigned — O(partition) gathers of two floats, not a k-means. Rows that left the partition
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
LISTS_PER_ROOT = 2  # lists = 2·√m: ~290 rows a list at 83K (finer lists: better recall per row
# scanned on unclustered vectors; measured 1x / 2x / 4x √m: docs/ingest.md)
TRAIN_PER_LIST = 32  # k-means sample: enough rows per centroid, bounded training cost
TRAIN_ROUNDS = 6
MIN_PROBE_SHARE = 0.04  # a query scans at least this share of the partition's rows
MIN_PROBE_LISTS = 8
REBUILD_GROWTH = 4.0  # retrain the centroids once the partition grew this many times
OUTLIER_QUANTILE = 0.01  # the worst-fitting 1 % of the training rows: the outlier list
OUTLIER_RETRAIN = 0.05  # retrain once the outlier list holds this share of the partition
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
        # per view row: list (-1 none) and the first two components of the vector assigned
        self._assign = np.full(0, -1, dtype=np.int16)
        self._print = np.zeros((0, 2), dtype=np.float32)
        # lists as one sorted array: rows of list l are _rows[_starts[l]:_starts[l + 1]]
        self._rows: Rows = np.zeros(0, dtype=np.intp)
        self._starts: Rows = np.zeros(1, dtype=np.intp)
        self._overflow: list[Rows] = []
        self._overflow_size = 0
        # rows whose best centroid is less similar than this go to the outlier list, which
        # every query scans (list number ``lists``)
        self._fit_floor = -1.0
        self._outliers = 0
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
            rows = self._probe(vector, size)
            rows = rows[rows < snapshot.n]
            rows = rows[mask[rows]]
            sims: F32 = np.einsum("ij,j->i", snapshot.vectors[rows], vector)
        if len(rows) > k:
            top = np.argpartition(-sims, k)[:k]
            rows, sims = rows[top], sims[top]
        order = np.argsort(-sims, kind="stable")
        return rows[order], sims[order]

    # -- keeping current -------------------------------------------------------------------

    def _refresh(self, snapshot: ViewSnapshot, mask: npt.NDArray[np.bool_], size: int) -> None:
        if self._centroids is None or size > REBUILD_GROWTH * self._trained_size or \
                self._outliers > OUTLIER_RETRAIN * max(size, self._trained_size):
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
            held = self._assign[rows] >= 0
            current = snapshot.vectors[rows, :2]
            held &= (self._print[rows] == current).all(axis=1)
            self._assign_rows(snapshot, rows[~held])
        self._lineage = snapshot.lineage
        self._n = max(self._n, snapshot.n)

    def _grow(self, n: int) -> None:
        if n > len(self._assign):
            capacity = max(n, 2 * len(self._assign))
            assign = np.full(capacity, -1, dtype=np.int16)
            assign[:len(self._assign)] = self._assign
            fingerprint = np.zeros((capacity, 2), dtype=np.float32)
            fingerprint[:len(self._print)] = self._print
            self._assign, self._print = assign, fingerprint

    def _assign_rows(self, snapshot: ViewSnapshot, rows: Rows) -> None:
        """Put ``rows`` into their nearest lists (the overflow until the next re-sort)."""
        if not len(rows):
            return
        self._grow(snapshot.n)
        lists = self._nearest_lists(snapshot.vectors, rows)
        self._assign[rows] = lists
        self._print[rows] = snapshot.vectors[rows, :2]
        self._outliers += int(np.count_nonzero(lists == self.lists))
        self._overflow.append(rows)
        self._overflow_size += len(rows)
        if self._overflow_size > max(1024.0, OVERFLOW_SHARE * len(self._rows)):
            self._sort_lists()

    def _sort_lists(self) -> None:
        held = np.flatnonzero(self._assign >= 0)
        lists = self._assign[held]
        order = np.argsort(lists, kind="stable")
        self._rows = held[order]
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
            sums = np.zeros_like(centroids)
            np.add.at(sums, nearest, data)
            norms = np.linalg.norm(sums, axis=1)
            empty = norms == 0.0
            # an empty list takes a random sample row: every centroid keeps a share of the data
            sums[empty] = data[rng.choice(len(data), int(empty.sum()))]
            norms[empty] = 1.0
            centroids = (sums / norms[:, None]).astype(np.float32)
        self._centroids = np.ascontiguousarray(centroids)
        self._trained_size = max(1, size)
        self._assign = np.full(0, -1, dtype=np.int16)
        self._print = np.zeros((0, 2), dtype=np.float32)
        self._grow(snapshot.n)
        if len(rows):
            nearest, fit = self._fit(snapshot.vectors, rows)
            # the worst-fitting rows of the training data set the floor: a later vector that
            # fits no centroid as well as they do (a topic that came after training) is
            # scanned by every query instead of waiting in a list no query near it probes
            self._fit_floor = float(np.quantile(fit, OUTLIER_QUANTILE))
            nearest[fit < self._fit_floor] = len(self._centroids)
            self._assign[rows] = nearest
            self._print[rows] = snapshot.vectors[rows, :2]
        self._sort_lists()
        self._lineage = snapshot.lineage
        self._n = snapshot.n

    # -- querying ----------------------------------------------------------------------------

    def _probe(self, vector: F32, size: int) -> Rows:
        """Rows of the lists nearest ``vector`` (at least the probe share of ``size``)."""
        assert self._centroids is not None  # _refresh trained it
        # einsum, not a BLAS matvec: BLAS threads stall when the cores are busy (search.py)
        scores = np.einsum("ij,j->i", self._centroids, vector)
        order = np.argsort(-scores, kind="stable")
        lengths = np.diff(self._starts[:-1])[order]
        wanted = self._probe_share * size
        # lists nearest first until the probe share is scanned (and at least MIN_PROBE_LISTS)
        enough = int(np.searchsorted(np.cumsum(lengths), wanted)) + 1
        probed = np.append(order[:max(MIN_PROBE_LISTS, enough)], self.lists)  # + outliers
        parts: list[Rows] = [self._rows[self._starts[lst]:self._starts[lst + 1]]
                             for lst in probed.tolist()]
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)
        if self._overflow:
            # rows assigned since the lists were sorted; a row found twice (reassigned from a
            # probed list to another) is kept once. A row that moved from a probed list to
            # another stays a candidate: an extra exact cosine costs nothing in correctness.
            chosen = np.zeros(self.lists + 1, dtype=bool)
            chosen[probed] = True
            extra = np.concatenate(self._overflow)
            rows = np.unique(np.concatenate((rows, extra[chosen[self._assign[extra]]])))
        return rows

    def describe(self) -> dict[str, Any]:
        """Sizes for the stage data and the benchmark (lists, rows held, overflow)."""
        return {"lists": self.lists, "rows": len(self._rows), "outliers": self._outliers,
                "overflow": self._overflow_size, "trained_size": self._trained_size}
