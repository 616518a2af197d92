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
* a query probes the ``probe`` lists whose centroids are nearest and returns the rows in them;
* beside the lists, each indexed row's vector is kept as int8 codes with a per-row scale, in list
  order (:func:`encode`), and the norm of what the codes lose: :meth:`IvfIndex.probe_bounds`
  reads the probed lists as contiguous slices and gives every probed row an **upper bound** of
  its dot product with the query (approximate dot + ``|q|`` × that norm), without gathering the
  float32 vectors from the view (docs/retrieval.md "Third version of the candidate path").

A request's probe (:class:`Probe`) keeps the probed rows and their bounds for its later,
wider rounds, and picks the rows the retriever scores exactly (:meth:`Probe.best`). A row
blended with its predecessor (``semantic_blend``) needs a bound of the predecessor's dot too:
that is first taken at its most, ``|q|`` × the longest indexed vector, and the predecessor's
codes are gathered only for the rows whose bound, so taken, could put them among the best
(docs/retrieval.md "Fifth version: cheaper dense rounds"). A widened round reads its further
lists a step at a time and stops after a step holding no row over the cosine its target needs
(:meth:`Probe.read_while`, docs/retrieval.md "Sixth version: fewer lists in widened rounds").

Appending rows assigns only the new rows (:meth:`IvfIndex.extended`): they go to a small tail
that queries scan with a mask, merged into the lists once it outgrows a tenth of them. The
centroids stay where training put them; a view whose lineage changes (an update of an existing
row's vector, a removal that compacts rows) gets a fresh index.

The index proposes; it never decides: the retriever scores what it returns with the exact
float32 cosine (the bounds only choose which probed rows must be scored exactly), so an
imperfect probe can only miss a candidate, not misrank one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from engine.store.view import append_rows

__all__ = ["BOUND_MARGIN", "TRAIN_PER_LIST", "IvfIndex", "Probe", "SemanticBounds", "encode"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
B = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]

TRAIN_PER_LIST = 32  # k-means sample size per list: centroids anchor probes, not ranks
_ITERATIONS = 8
_CHUNK = 16_384  # rows assigned per product (bounds the temporary rows × lists matrix)
# Code rows converted to float32 per product: a block's copy (768 KB) stays in the core's cache
# for the product, where converting a whole probe or gather at once went through memory. A
# gather of 10,000 scattered rows costs half as much in blocks (0.8 vs 1.7 ms, single-threaded
# BLAS); a 1M store's lists (~1,000 rows) are read ~15 % faster.
_BLOCK = 512
_CODE_MAX = 127  # int8 codes in -127..127: symmetric, so a row's scale is its largest |value|
# Added to every dot-product bound: the approximate dot is summed in float32 (384 products of
# magnitude ≤ 1 round by at most ~384 × 6e-8 ≈ 2.3e-5 in all) and so is the exact cosine the
# bound is compared with; 1e-4 covers both with room, and widens the bound by a hundredth of
# the quantisation error (~0.01), so it costs next to nothing in rows scored exactly.
BOUND_MARGIN = 1e-4
_LOSS_SLACK = 1e-6  # added to each row's loss for the float32 rounding of its computation


@dataclass(frozen=True, slots=True)
class IvfIndex:
    """An inverted-file index of a snapshot's first :attr:`n` rows (read-only once built).

    An indexed row's *position* is its place in :attr:`rows` followed by :attr:`tail_rows`;
    :attr:`codes`, :attr:`scales` and :attr:`errors` are by position, so a probed list's codes
    are one contiguous slice.

    Attributes:
        centroids: ``(lists, dim)`` unit centroids.
        offsets: ``lists + 1`` CSR offsets into :attr:`rows`.
        rows: Indexed rows (those with a vector), grouped by list (int32: 4 bytes a row).
        tail_rows: Rows appended since the lists were built.
        tail_lists: The list of each tail row.
        n: Rows of the view the index covers (with or without a vector).
        codes: ``(positions, dim)`` int8 codes of each indexed row's vector (:func:`encode`).
        scales: By position, the factor from codes to the vector (``vector ≈ scale × code``).
        errors: By position, an upper bound of ``|vector - scale × code|``.
        position: By view row, its position (-1: no vector).
        longest: At least the norm of every indexed row's vector (float32 rounding included):
            ``|q|`` × it bounds any indexed row's dot product with ``q``.
    """

    centroids: F32
    offsets: npt.NDArray[np.int64]
    rows: I32
    tail_rows: I32
    tail_lists: npt.NDArray[np.int32]
    n: int
    codes: npt.NDArray[np.int8]
    scales: F32
    errors: F32
    position: I32
    longest: float

    @property
    def lists(self) -> int:
        """Number of lists (centroids)."""
        return len(self.centroids)

    @property
    def nbytes(self) -> int:
        """Resident bytes of the index's own arrays (the float32 vectors stay in the view)."""
        return int(self.centroids.nbytes + self.offsets.nbytes + self.rows.nbytes
                   + self.tail_rows.nbytes + self.tail_lists.nbytes + self.codes.nbytes
                   + self.scales.nbytes + self.errors.nbytes + self.position.nbytes)

    @classmethod
    def build(cls, vectors: F32, has_vector: npt.NDArray[np.bool_]) -> IvfIndex:
        """Train the quantiser on ``vectors`` (unit rows) and assign every row with a vector.

        Deterministic: the same vectors give the same index (a fixed-seed sample, no random
        restarts), so two runs of a benchmark or a test see the same candidates.
        """
        with_vector = np.flatnonzero(has_vector).astype(np.int32)
        lists = max(1, min(len(with_vector), round(math.sqrt(len(with_vector)))))
        empty = np.zeros(0, np.int32)
        if not len(with_vector):
            return cls(np.zeros((0, vectors.shape[1]), np.float32), np.zeros(1, np.int64),
                       empty, empty, empty, len(vectors), *encode(vectors, empty),
                       np.full(len(vectors), -1, np.int32), 0.0)
        centroids = _train(vectors, with_vector, lists)
        assigned = _assign(vectors, with_vector, centroids)
        order = np.argsort(assigned, kind="stable")
        counts = np.bincount(assigned, minlength=lists)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        rows = with_vector[order]
        return cls(centroids, offsets, rows, empty, empty, len(vectors), *encode(vectors, rows),
                   _positions(rows, len(vectors)), _longest(vectors, rows))

    def extended(self, vectors: F32, has_vector: npt.NDArray[np.bool_]) -> IvfIndex:
        """This index plus the rows ``self.n..len(vectors)`` (appended since it was built)."""
        added = (np.flatnonzero(has_vector[self.n:]) + self.n).astype(np.int32)
        if not self.lists:
            return IvfIndex.build(vectors, has_vector)
        tail_rows = append_rows(self.tail_rows, added)
        tail_lists = append_rows(self.tail_lists, _assign(vectors, added, self.centroids))
        codes, scales, errors = encode(vectors, added)
        codes = append_rows(self.codes, codes)
        scales = append_rows(self.scales, scales)
        errors = append_rows(self.errors, errors)
        position = np.full(len(vectors) - self.n, -1, np.int32)
        position[added - self.n] = np.arange(len(self.rows) + len(self.tail_rows),
                                             len(self.rows) + len(tail_rows), dtype=np.int32)
        position = append_rows(self.position, position)
        longest = max(self.longest, _longest(vectors, added))
        if len(tail_rows) * 10 > len(self.rows):  # merge the tail into the lists
            rows = np.concatenate((self.rows, tail_rows))
            lists = np.concatenate((np.repeat(np.arange(self.lists, dtype=np.int32),
                                              np.diff(self.offsets)), tail_lists))
            order = np.argsort(lists, kind="stable")
            counts = np.bincount(lists, minlength=self.lists)
            offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
            empty = np.zeros(0, np.int32)
            # the codes move with their rows (one copy of the codes, as rare as the merge)
            return IvfIndex(self.centroids, offsets, rows[order], empty, empty, len(vectors),
                            codes[order], scales[order], errors[order],
                            _positions(rows[order], len(vectors)), longest)
        return IvfIndex(self.centroids, self.offsets, self.rows, tail_rows, tail_lists,
                        len(vectors), codes, scales, errors, position, longest)

    def probe(self, query: F32, probes: int) -> Rows:
        """The rows in the ``probes`` lists whose centroids are nearest ``query``, ascending."""
        found = self.probe_bounds(query, probes)[0]
        found.sort()
        return found

    def probe_bounds(self, query: F32, probes: int, start: int = 0) -> tuple[Rows, F64]:
        """The rows in the ``probes`` lists whose centroids are nearest ``query`` (grouped by
        list) and, for each, an upper bound of its dot product with ``query``.

        A probed list's codes are one contiguous slice: converted to float32 and multiplied
        with the query a list at a time, they cost a quarter of the memory reads of the
        float32 vectors and no gather (``vectors[rows]`` of rows scattered over the view).

        Args:
            start: Leave out the ``start`` nearest lists (an earlier, narrower probe of the
                same query read them: the lists are taken in one stable order of closeness,
                so the nearest ``start`` are the same whatever ``probes`` is).
        """
        if not self.lists:
            return np.zeros(0, np.intp), np.zeros(0, np.float64)
        probes = min(probes, self.lists)
        closeness = self.centroids @ query
        nearest = np.argsort(-closeness, kind="stable")[start:probes]
        spans = [(start, stop) for start, stop in (
            (int(self.offsets[p]), int(self.offsets[p + 1])) for p in nearest.tolist())
            if stop > start]
        # a list's rows, scales and errors are slices too: no position is looked up
        rows = [self.rows[start:stop] for start, stop in spans]
        scales = [self.scales[start:stop] for start, stop in spans]
        errors = [self.errors[start:stop] for start, stop in spans]
        dots = [self._dots(query, slice(block, min(block + _BLOCK, stop)))
                for start, stop in spans for block in range(start, stop, _BLOCK)]
        if len(self.tail_rows):
            tail = np.flatnonzero(np.isin(self.tail_lists, nearest))
            rows.append(self.tail_rows[tail])
            tail += len(self.rows)
            scales.append(self.scales[tail])
            errors.append(self.errors[tail])
            dots.append(self._gathered_dots(query, tail))
        if not rows:
            return np.zeros(0, np.intp), np.zeros(0, np.float64)
        return np.concatenate(rows).astype(np.intp), self._bounds(
            query, np.concatenate(dots), np.concatenate(scales), np.concatenate(errors))

    def dot_bounds(self, query: F32, rows: Rows) -> F64:
        """An upper bound of each of ``rows``' dot product with ``query`` (rows with a vector,
        below :attr:`n`; a gather of their codes, for rows outside the probed lists)."""
        positions = self.position[rows]
        return self._bounds(query, self._gathered_dots(query, positions),
                            self.scales[positions], self.errors[positions])

    def _dots(self, query: F32, at: slice | npt.NDArray[np.integer[Any]]) -> F32:
        """The approximate dots ``code·q`` of the positions ``at`` (at most :data:`_BLOCK`)."""
        dots: F32 = self.codes[at].astype(np.float32) @ query
        return dots

    def _gathered_dots(self, query: F32, positions: npt.NDArray[np.integer[Any]]) -> F32:
        """:meth:`_dots` of scattered ``positions``, gathered a block at a time."""
        dots = np.empty(len(positions), np.float32)
        for start in range(0, len(positions), _BLOCK):
            block = positions[start:start + _BLOCK]
            dots[start:start + len(block)] = self._dots(query, block)
        return dots

    @staticmethod
    def _bounds(query: F32, dots: F32, scales: F32, errors: F32) -> F64:
        """``scale × code·q + |q| × error`` (+ :data:`BOUND_MARGIN`) of rows whose approximate
        dots, scales and errors are given: |q·v - q·v̂| ≤ |q| |v - v̂| (Cauchy-Schwarz) for
        the decoded ``v̂ = scale × code``."""
        norm = float(np.sqrt(np.dot(query.astype(np.float64), query.astype(np.float64))))
        bounds: F64 = dots.astype(np.float64) * scales
        bounds += norm * errors.astype(np.float64)
        bounds += BOUND_MARGIN
        return bounds


SemanticBounds = Callable[[Rows, F64, F64], F64]
"""``(rows, upper bounds of their own dots with the query, of their predecessors' dots — the
rows with one, in order) →`` upper bounds of their semantic values (blended, centred): the
retriever's transform, increasing in both dots (``Retriever._semantic_bounds``)."""


class Probe(NamedTuple):
    """A request's dense probe: the eligible rows of the lists read so far and an upper bound
    of each one's semantic value, kept for the request's wider rounds.

    The first three fields are what a reader of the probe needs (how far it reached, its rows,
    their bounds); the rest is how the bounds are refined. A row blended with a predecessor
    has a **loose** bound at first: its predecessor's dot taken at its most (``|q|`` ×
    :attr:`IvfIndex.longest`, no gather). :meth:`tighten` gathers the predecessors' codes of
    the loose rows it is given and lowers their bounds in place (a bound only ever falls
    towards the tight one, so any reader sees upper bounds); :meth:`best` and
    :meth:`count_over` tighten exactly the rows whose loose bound could change their answer,
    so they answer as if every bound were tight.

    Attributes:
        lists: Lists read (the nearest first, in the index's stable order of closeness).
        rows: Their eligible rows, grouped by list.
        bounds: By row, an upper bound of its semantic value.
        own: By row, the upper bound of its own dot product (the codes').
        previous: By row, its predecessor's row (-1: none, its bound is tight).
        loose: By row, whether its bound still takes the predecessor's dot at its most.
        dense_index: The index probed.
        query: The query vector.
        semantic: The transform from dot bounds to semantic bounds (None: no row read yet).
    """

    lists: int
    rows: Rows
    bounds: F64
    own: F64
    previous: I32
    loose: B
    dense_index: IvfIndex
    query: F32
    semantic: SemanticBounds | None

    @classmethod
    def start(cls, index: IvfIndex, query: F32) -> Probe:
        """A probe that has read nothing yet."""
        return cls(0, np.zeros(0, np.intp), np.zeros(0, np.float64), np.zeros(0, np.float64),
                   np.zeros(0, np.int32), np.zeros(0, np.bool_), index, query, None)

    def read(self, probes: int, eligible: B, previous: I32 | None,
             semantic: SemanticBounds) -> Probe:
        """This probe with the lists after its first :attr:`lists` up to the ``probes``
        nearest read too (itself when it has read as many): their ``eligible`` rows, with a
        bound each (loose for a row with a predecessor in ``previous``, by view row; None: no
        blend)."""
        if probes <= self.lists:
            return self
        added, own = self.dense_index.probe_bounds(self.query, probes, self.lists)
        keep = eligible[added]
        added, own = added[keep], own[keep]
        before = previous[added] if previous is not None else np.full(len(added), -1, np.int32)
        if not self.lists:
            # the nearest lists hold the candidates: nearly every blended row's bound there
            # reaches the best ones (all of them at 100K with the benchmark's topics of ~500
            # rows), so loose bounds would only be computed twice; their codes are gathered
            loose = np.zeros(len(added), np.bool_)
            bounds = semantic(added, own, self.dense_index.dot_bounds(
                self.query, before[before >= 0].astype(np.intp)))
        else:
            # the lists a wider round adds are farther: most of their blended rows stay under
            # the best rows even with the predecessor's dot at its most, q·p ≤ |q| |p| (the
            # margin covers the exact dot's rounding)
            loose = before >= 0
            query = self.query.astype(np.float64)
            bounds = semantic(added, own, np.full(
                int(np.count_nonzero(loose)),
                math.sqrt(float(query @ query)) * self.dense_index.longest + BOUND_MARGIN))
        return Probe(max(probes, self.lists), np.concatenate((self.rows, added)),
                     np.concatenate((self.bounds, bounds)),
                     np.concatenate((self.own, own)), np.concatenate((self.previous, before)),
                     np.concatenate((self.loose, loose)), self.dense_index, self.query, semantic)

    def read_while(self, probes: int, step: int, bar: float, eligible: B,
                   previous: I32 | None, semantic: SemanticBounds) -> tuple[Probe, bool]:
        """This probe with further lists read ``step`` at a time, nearest first, up to the
        ``probes`` nearest, stopping after a step none of whose rows' tight bounds is over
        ``bar`` (:meth:`read`'s other arguments).

        The lists are read in order of their centroids' closeness, so the rows over a cosine
        sit in the first ones (at 100K with topics of ~5,000 rows, every dense candidate of a
        widened round came from the 20 nearest of the 48-96 it read): a step of lists
        holding nothing over ``bar`` is taken to mean the lists after it hold nothing over it
        either. That is the IVF approximation the bound already makes (the probed lists hold
        the best cosines), asked of the lists at the probe's edge instead of a fixed count.

        Returns:
            (the probe, whether it stopped on that rule: the caller then takes a row outside
            its lists to have at most ``bar``; False when it read the ``probes`` lists or
            every list, and its last step held rows over ``bar``).
        """
        probe, lists = self, min(probes, self.dense_index.lists)
        while probe.lists < lists:
            start = len(probe.rows)
            probe = probe.read(min(probe.lists + step, lists), eligible, previous, semantic)
            if not probe.over_from(start, bar):
                return probe, probe.lists < self.dense_index.lists
        return probe, False

    def over_from(self, start: int, value: float) -> bool:
        """Whether a row from index ``start`` of :attr:`rows` on has a tight bound over
        ``value``: a tight one over it answers at once; else the loose ones over it are
        tightened (gathers the answer does not need are not made)."""
        bounds, loose = self.bounds[start:], self.loose[start:]
        over = bounds > value
        if np.any(over & ~loose):
            return True
        self.tighten(np.flatnonzero(over) + start)
        return bool(np.any(bounds > value))

    def tighten(self, at: npt.NDArray[np.integer[Any]]) -> None:
        """Gather the predecessors' codes of the loose rows among ``at`` (indices into
        :attr:`rows`) and lower their bounds to the tight ones, in place."""
        at = at[self.loose[at]]
        if not len(at) or self.semantic is None:
            return
        before = self.dense_index.dot_bounds(self.query, self.previous[at].astype(np.intp))
        self.bounds[at] = self.semantic(self.rows[at], self.own[at], before)
        self.loose[at] = False

    def count_over(self, value: float) -> int:
        """How many rows' tight bounds are over ``value`` (the loose ones over it tightened)."""
        self.tighten(np.flatnonzero(self.loose & (self.bounds > value)))
        return int(np.count_nonzero(self.bounds > value))

    def _tighten_top(self, count: int) -> None:
        """Tighten the loose bounds that reach the ``count``-th highest tight one (``count``
        below the rows): no other loose row can be among the ``count`` highest, as a tight
        bound is never above its loose one. Where fewer than ``count`` bounds are tight (a
        store of conversations blends nearly every row), the ``count`` highest loose ones
        are tightened first to find that bound."""
        bounds, loose = self.bounds, self.loose
        if np.count_nonzero(~loose) < count:
            at = np.flatnonzero(loose)
            self.tighten(at[np.argpartition(-bounds[at], count - 1)[:count]])
        tight = bounds[~loose]
        reach = float(-np.partition(-tight, count - 1)[count - 1])
        self.tighten(np.flatnonzero(loose & (bounds >= reach)))

    def best(self, size: int, exact: Callable[[Rows], F64]
             ) -> tuple[Rows, float, tuple[Rows, F64]]:
        """The ``size`` rows with the best ``exact`` values (their semantic values, which the
        bounds bound), scoring exactly as few rows as the bounds allow.

        ``exact`` is computed for the ``size + size / 4`` rows with the highest bounds, then
        for every other row whose bound is above the ``size``-th best exact value: no row left
        unscored can be among the best ``size``, and a row outside them has a value at most
        the ``size``-th's, as when every probed row was scored. Loose bounds are tightened
        first where they reach those rows (the ``size + size / 4``-th highest tight bound, or
        the ``size``-th best exact value), so the rows scored are those every tight bound
        would have chosen.

        Returns:
            (those rows, the least of their values — what a row outside them is taken to
            have at most —, the rows whose value was computed, ascending, with their values).
        """
        rows, bounds = self.rows, self.bounds
        if len(rows) <= size:  # every probed row is one of the best: no bound needed
            value = exact(rows)
            ascending = np.argsort(rows, kind="stable")
            least = float(value.min()) if len(value) else 0.0
            return rows[ascending], least, (rows[ascending], value[ascending])
        first = size + size // 4
        loose = bool(self.loose.any())  # none after a first read: nothing to tighten
        if first < len(rows):
            if loose:
                self._tighten_top(first)
            order = np.argpartition(-bounds, first - 1)[:first]
        else:
            order = np.arange(len(rows))
        scored = np.zeros(len(rows), dtype=bool)
        picked: list[Rows] = []
        values: list[F64] = []
        while len(order):
            scored[order] = True
            picked.append(order)
            values.append(exact(rows[order]))
            # the size-th best exact value so far: an unscored row whose bound is above it
            # could be among the best, so it is scored too (a second round at most, usually
            # none: the size-th best only rises)
            known = np.concatenate(values)
            least = float(-np.partition(-known, size - 1)[size - 1]) if len(known) >= size \
                else -math.inf
            if loose:
                self.tighten(np.flatnonzero(~scored & self.loose & (bounds > least)))
            order = np.flatnonzero(~scored & (bounds > least))
        found, value = rows[np.concatenate(picked)], np.concatenate(values)
        ascending = np.argsort(found, kind="stable")
        found, value = found[ascending], value[ascending]
        top = np.argpartition(-value, size - 1)[:size]
        return found[top], float(value[top].min()), (found, value)


def encode(vectors: F32, rows: npt.NDArray[np.integer[Any]]
           ) -> tuple[npt.NDArray[np.int8], F32, F32]:
    """Int8 codes of ``vectors[rows]`` with a scale per row, and an upper bound of what each
    row's codes lose.

    A row's scale is its largest ``|value|`` / 127, so every value is within half a step of
    ``scale × code``. The loss ``|v - scale × code|`` is computed in float32 (float64 took
    three times as long to build at 100K) and raised past what float32 rounding can take from
    it (each residual is off by at most ~2 ulp of a value ≤ 1, the norm by far less than
    :data:`_LOSS_SLACK`), so it is a bound, not an estimate.

    Returns:
        ``(codes, scales, errors)``, aligned with ``rows``.
    """
    dim = vectors.shape[1]
    codes = np.empty((len(rows), dim), np.int8)
    scales = np.empty(len(rows), np.float32)
    errors = np.empty(len(rows), np.float32)
    for start in range(0, len(rows), _CHUNK):
        chunk = vectors[rows[start:start + _CHUNK]]
        scale = np.abs(chunk).max(axis=1) / np.float32(_CODE_MAX) if dim \
            else np.zeros(len(chunk), np.float32)
        scale[scale == 0] = 1.0  # a zero vector: codes 0, exact
        code = np.clip(np.rint(chunk / scale[:, None]), -_CODE_MAX, _CODE_MAX)
        residual = chunk - code * scale[:, None]
        loss = np.sqrt(np.einsum("ij,ij->i", residual, residual))
        end = start + len(chunk)
        codes[start:end] = code.astype(np.int8)
        scales[start:end] = scale
        errors[start:end] = loss * np.float32(1.0 + 1e-5) + np.float32(_LOSS_SLACK)
    return codes, scales, errors


def _longest(vectors: F32, rows: npt.NDArray[np.integer[Any]]) -> float:
    """At least the largest norm of ``vectors[rows]`` (0 for none): the norms summed in
    float64, in chunks, raised by a relative 1e-6 past their rounding."""
    longest = 0.0
    for start in range(0, len(rows), _CHUNK):
        chunk = vectors[rows[start:start + _CHUNK]].astype(np.float64)
        longest = max(longest, float(np.sqrt(np.einsum("ij,ij->i", chunk, chunk).max())))
    return longest * (1.0 + 1e-6)


def _positions(rows: I32, n: int) -> I32:
    """By view row (``n`` of them), its position in ``rows`` (-1: not there)."""
    position = np.full(n, -1, np.int32)
    position[rows] = np.arange(len(rows), dtype=np.int32)
    return position


def _train(vectors: F32, rows: npt.NDArray[np.integer[Any]], lists: int) -> F32:
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


def _assign(vectors: F32, rows: npt.NDArray[np.integer[Any]], centroids: F32
            ) -> npt.NDArray[np.int32]:
    """The nearest centroid of each of ``vectors[rows]``, in chunks."""
    out = np.empty(len(rows), np.int32)
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start:start + _CHUNK]
        out[start:start + len(chunk)] = np.argmax(vectors[chunk] @ centroids.T, axis=1)
    return out
