"""Dense candidates: an inverted-file (IVF) index over a view's unit vectors, in numpy.

Past :attr:`~engine.config.RetrievalConfig.candidate_threshold` live records the retriever does
not compute a cosine for every row: it asks this index for the rows nearest the query and
scores those (with the lexical, static, date and speaker candidates) exactly
(:mod:`engine.retrieval.retriever`). The environment has no hnswlib or faiss, and Chroma's own
HNSW sits behind the store (a ``where`` filter on it costs ~150 ms at 100K, DESIGN "Storage"),
so the index is built here over the snapshot's vectors:

* a coarse quantiser: spherical k-means (inner product of unit vectors) with ``√n`` lists,
  trained on a deterministic sample of at most :data:`TRAIN_PER_LIST` rows per list;
* every row with a vector is assigned to its nearest centroid; the lists are kept as one row
  array sorted by list (CSR offsets), so probing a list is a slice;
* a query probes the ``probe`` lists whose centroids are nearest and returns the rows in them.

Appending rows assigns only the new rows (:meth:`IvfIndex.extended`): they go to a small tail
that queries scan with a mask, merged into the lists once it outgrows a tenth of them. The
centroids stay where training put them; a view whose lineage changes (an update of an existing
row's vector, a removal that compacts rows) gets a fresh index.

The index proposes; it never decides: the retriever scores what it returns with the exact
float32 cosine, so an imperfect probe can only miss a candidate, not misrank one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.store.view import append_rows

__all__ = ["TRAIN_PER_LIST", "IvfIndex"]

F32 = npt.NDArray[np.float32]
Rows = npt.NDArray[np.intp]

TRAIN_PER_LIST = 32  # k-means sample size per list: centroids anchor probes, not ranks
_ITERATIONS = 8
_CHUNK = 16_384  # rows assigned per product (bounds the temporary rows × lists matrix)


@dataclass(frozen=True, slots=True)
class IvfIndex:
    """An inverted-file index of a snapshot's first :attr:`n` rows (read-only once built).

    Attributes:
        centroids: ``(lists, dim)`` unit centroids.
        offsets: ``lists + 1`` CSR offsets into :attr:`rows`.
        rows: Indexed rows (those with a vector), grouped by list.
        tail_rows: Rows appended since the lists were built.
        tail_lists: The list of each tail row.
        n: Rows of the view the index covers (with or without a vector).
    """

    centroids: F32
    offsets: npt.NDArray[np.int64]
    rows: Rows
    tail_rows: Rows
    tail_lists: npt.NDArray[np.int32]
    n: int

    @property
    def lists(self) -> int:
        """Number of lists (centroids)."""
        return len(self.centroids)

    @property
    def nbytes(self) -> int:
        """Resident bytes of the index's own arrays (the vectors stay in the view)."""
        return int(self.centroids.nbytes + self.offsets.nbytes + self.rows.nbytes
                   + self.tail_rows.nbytes + self.tail_lists.nbytes)

    @classmethod
    def build(cls, vectors: F32, has_vector: npt.NDArray[np.bool_]) -> IvfIndex:
        """Train the quantiser on ``vectors`` (unit rows) and assign every row with a vector.

        Deterministic: the same vectors give the same index (a fixed-seed sample, no random
        restarts), so two runs of a benchmark or a test see the same candidates.
        """
        with_vector = np.flatnonzero(has_vector)
        lists = max(1, min(len(with_vector), round(math.sqrt(len(with_vector)))))
        if not len(with_vector):
            return cls(np.zeros((0, vectors.shape[1]), np.float32),
                       np.zeros(1, np.int64), with_vector, with_vector,
                       np.zeros(0, np.int32), len(vectors))
        centroids = _train(vectors, with_vector, lists)
        assigned = _assign(vectors, with_vector, centroids)
        order = np.argsort(assigned, kind="stable")
        counts = np.bincount(assigned, minlength=lists)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return cls(centroids, offsets, with_vector[order], np.zeros(0, np.intp),
                   np.zeros(0, np.int32), len(vectors))

    def extended(self, vectors: F32, has_vector: npt.NDArray[np.bool_]) -> IvfIndex:
        """This index plus the rows ``self.n..len(vectors)`` (appended since it was built)."""
        added = np.flatnonzero(has_vector[self.n:]) + self.n
        if not self.lists:
            return IvfIndex.build(vectors, has_vector)
        tail_rows = append_rows(self.tail_rows, added)
        tail_lists = append_rows(self.tail_lists, _assign(vectors, added, self.centroids))
        if len(tail_rows) * 10 > len(self.rows):  # merge the tail into the lists
            rows = np.concatenate((self.rows, tail_rows))
            lists = np.concatenate((np.repeat(np.arange(self.lists, dtype=np.int32),
                                              np.diff(self.offsets)), tail_lists))
            order = np.argsort(lists, kind="stable")
            counts = np.bincount(lists, minlength=self.lists)
            offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
            return IvfIndex(self.centroids, offsets, rows[order], np.zeros(0, np.intp),
                            np.zeros(0, np.int32), len(vectors))
        return IvfIndex(self.centroids, self.offsets, self.rows, tail_rows, tail_lists,
                        len(vectors))

    def probe(self, query: F32, probes: int) -> Rows:
        """The rows in the ``probes`` lists whose centroids are nearest ``query``, ascending."""
        if not self.lists:
            return np.zeros(0, np.intp)
        probes = min(probes, self.lists)
        closeness = self.centroids @ query
        nearest = np.argpartition(-closeness, probes - 1)[:probes] if probes < self.lists \
            else np.arange(self.lists)
        parts = [self.rows[self.offsets[p]:self.offsets[p + 1]] for p in nearest.tolist()]
        if len(self.tail_rows):
            parts.append(self.tail_rows[np.isin(self.tail_lists, nearest)])
        found = np.concatenate(parts) if parts else np.zeros(0, np.intp)
        found.sort()
        return found


def _train(vectors: F32, rows: Rows, lists: int) -> F32:
    """Spherical k-means centroids of a deterministic sample of ``vectors[rows]``."""
    sample = rows[:: max(1, len(rows) // (lists * TRAIN_PER_LIST))]
    data = vectors[sample]
    # start from evenly spaced sample rows: deterministic and spread over insertion order
    centroids = np.array(data[np.linspace(0, len(data) - 1, lists).astype(np.intp)],
                         dtype=np.float32)
    for _ in range(_ITERATIONS):
        nearest = np.argmax(data @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, data)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        sums[empty] = centroids[empty]  # an empty list keeps its centroid
        norms[empty] = np.linalg.norm(centroids[empty], axis=1)
        centroids = (sums / np.maximum(norms, 1e-12)[:, None]).astype(np.float32)
    return centroids


def _assign(vectors: F32, rows: Rows, centroids: F32) -> npt.NDArray[np.int32]:
    """The nearest centroid of each of ``vectors[rows]``, in chunks."""
    out = np.empty(len(rows), np.int32)
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start:start + _CHUNK]
        out[start:start + len(chunk)] = np.argmax(vectors[chunk] @ centroids.T, axis=1)
    return out
