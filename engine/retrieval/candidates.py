"""Sublinear candidate sources for the candidate path (docs/retrieval.md "How candidates are
found", "Sublinear sources").

The candidate path scores the union of a few sources exactly. Each source here finds its rows
without a pass over every row, and says how high a row it left out can score:

* :class:`StaticOrder` — the rows in descending order of the decaying part of the
  query-independent score, kept per view state and updated (not re-sorted) after access
  counting and appends. :func:`top_static` reads it with the threshold algorithm (Fagin et
  al.): it stops once the ``k``-th best exact score seen is at least what any unread row can
  reach — exact for any request time, no approximation.
* :func:`impact_prefix` — a BM25 term's postings capped by impact order (its ``L`` best rows and
  the ``L``-th weight, the most any other row gains from the term); :func:`bm25_at` the exact
  BM25 of a few rows by binary search in the row-sorted postings or of the postings in the
  rows, whichever is shorter, or through a frequent term's position of each row in its
  postings (:class:`TermPostings`).
* :class:`CreatedOrder` — the rows in creation-time order, so the rows created on a day or in
  a month a query names are a slice (binary search), not a mask over every row.
* :func:`member` — which of a few rows are in a sorted row list (speaker rows, records without
  a vector) without a full-length mask.

Everything here reads the same arrays exhaustive scoring reads and computes a row's value with
the same operations, so a row's score on the candidate path has the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "CreatedOrder",
    "StaticOrder",
    "TermPostings",
    "TopStatic",
    "bm25_at",
    "found_at",
    "impact_prefix",
    "member",
    "slack",
    "top_static",
]

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]

# A bound is raised by this relative margin (and an absolute one for bounds near 0): the rows
# it bounds are summed in another order than the bound, which may round up by a few ulps.
_SLACK = 1e-9
# Changes above this share of the rows re-sort the static order instead of moving rows.
_RESORT_SHARE = 8
# The threshold algorithm reads the static order in blocks that double from this size.
_FIRST_BLOCK = 1024
# A term held by at least this share of the rows also keeps each row's position in its
# postings (4 bytes a row: at most what its postings' rows and weights take, 16 bytes a posting)
FREQUENT_SHARE = 0.25


def slack(bound: float) -> float:
    """``bound`` raised by a margin above float rounding (see :data:`_SLACK`)."""
    return bound + abs(bound) * _SLACK + 1e-12 if math.isfinite(bound) else bound


@dataclass(frozen=True, slots=True)
class StaticOrder:
    """Rows by descending ``decaying`` (ties in row order), for :func:`top_static`.

    The query-independent part of a row's score at time ``now`` is
    ``fixed + a·importance + r·recency`` with ``a = w_i·s_i(now)`` and ``r = w_r·s_r(now)``
    (the bases at the decay epoch, :class:`~engine.retrieval.scoring.Decaying`, scaled to
    ``now``). The order is by ``decaying = a₀·importance + r₀·recency`` for the coefficients
    of the request it was sorted for; as every term is ≥ 0, a later request's part is at most
    ``fixed + q·decaying`` with ``q = max(a/a₀, r/r₀)`` (1 at the time it was sorted for, below
    1 later: recency decays faster than importance). Rows unread past a position therefore
    score at most ``suffix_fixed[position] + q·decaying[order[position]]``.

    Attributes:
        fixed: The non-decaying part (weighted layer + access) by row.
        decaying: ``a₀·importance + r₀·recency`` by row.
        order: All rows (live or not: eligibility is checked when read) by descending
            ``decaying``.
        suffix_fixed: ``suffix_fixed[i]`` = the largest ``fixed`` of ``order[i:]``
            (one extra entry, -inf, past the end).
        coefficients: ``(a₀, r₀)``.
        lineage: The view lineage it describes (see ``ViewSnapshot.lineage``).
    """

    fixed: F64
    decaying: F64
    order: Rows
    suffix_fixed: F64
    coefficients: tuple[float, float]
    lineage: int

    @property
    def n(self) -> int:
        """Rows covered."""
        return len(self.order)

    @classmethod
    def of(cls, fixed: F64, importance: F64, recency: F64, coefficients: tuple[float, float],
           lineage: int) -> StaticOrder:
        """A full sort (O(n log n)): on first use, and when many rows changed."""
        decaying = _decaying(importance, recency, coefficients)
        order = np.argsort(-decaying, kind="stable").astype(np.intp)
        return cls(fixed, decaying, order, _suffix_max(fixed[order]), coefficients, lineage)

    def updated(self, fixed: F64, importance: F64, recency: F64,
                coefficients: tuple[float, float], lineage: int) -> StaticOrder:
        """This order for new columns, keeping its coefficients: the rows whose values
        changed (access counting changes a few rows' access component and importance) and
        the rows appended since are taken out and merged back in at their place (O(n) memory
        moves instead of a sort); sorted again for ``coefficients`` when the lineage changed
        or many rows did (a decay epoch moved).
        """
        old = self.n
        n = len(fixed)
        if lineage != self.lineage or n < old:
            return StaticOrder.of(fixed, importance, recency, coefficients, lineage)
        decaying = _decaying(importance, recency, self.coefficients)
        changed = np.flatnonzero((fixed[:old] != self.fixed) | (decaying[:old] != self.decaying))
        moved = np.concatenate((changed, np.arange(old, n, dtype=np.intp))) \
            if n > old else changed
        if len(moved) * _RESORT_SHARE > n:
            return StaticOrder.of(fixed, importance, recency, coefficients, lineage)
        if not len(moved):
            return StaticOrder(fixed, decaying, self.order, self.suffix_fixed,
                               self.coefficients, lineage)
        gone = np.zeros(n, dtype=np.bool_)
        gone[changed] = True
        kept = self.order[~gone[self.order]]
        moved = moved[np.argsort(-decaying[moved], kind="stable")]
        # ``kept`` descends in ``decaying``: insert each moved row after the rows it does not
        # exceed (negated, the order ascends, which searchsorted needs)
        at = np.searchsorted(-decaying[kept], -decaying[moved], side="right")
        order = np.insert(kept, at, moved)
        return StaticOrder(fixed, decaying, order, _suffix_max(fixed[order]),
                           self.coefficients, lineage)

    def scale(self, coefficients: tuple[float, float]) -> float:
        """``q`` for a request's ``(a, r)`` (see the class docstring)."""
        ratios = [0.0]
        for now, then in zip(coefficients, self.coefficients, strict=True):
            if now > 0:
                ratios.append(now / then if then > 0 else math.inf)
        return max(ratios)


def _decaying(importance: F64, recency: F64, coefficients: tuple[float, float]) -> F64:
    decaying: F64 = coefficients[0] * importance
    decaying += coefficients[1] * recency
    return decaying


def _suffix_max(values: F64) -> F64:
    """``out[i] = max(values[i:])``, with a last entry of -inf."""
    out = np.full(len(values) + 1, -np.inf)
    if len(values):
        out[:-1] = np.maximum.accumulate(values[::-1])[::-1]
    return out


@dataclass(frozen=True, slots=True)
class TopStatic:
    """What :func:`top_static` found.

    Attributes:
        rows: The ``k`` accepted rows with the best exact value (fewer if fewer exist).
        values: Their exact values.
        complete: Every accepted row is in ``rows`` (nothing was left out).
        read: How many rows of the order were read.
    """

    rows: Rows
    values: F64
    complete: bool
    read: int


def top_static(order: StaticOrder, scale: float, k: int, accept: Callable[[Rows], B],
               value: Callable[[Rows], F64]) -> TopStatic:
    """The ``k`` rows with the best ``value`` among those ``accept`` passes (threshold
    algorithm over ``order``).

    Args:
        scale: :meth:`StaticOrder.scale` of the request's coefficients.
        accept: Which of some rows may be proposed (eligible; created on the query's day).
        value: The exact query-independent part of some rows' scores.

    Reads ``order`` in doubling blocks; after each, the rows not read yet score at most
    ``suffix_fixed + scale·decaying`` at the first unread position, and reading stops once
    ``k`` read rows score at least that.
    """
    rows = np.zeros(0, dtype=np.intp)
    values = np.zeros(0, dtype=np.float64)
    position, block, total = 0, max(_FIRST_BLOCK, 2 * k), order.n
    cut = False  # an accepted row was left out of ``rows``
    while position < total:
        chunk = order.order[position:position + block]
        position += len(chunk)
        block *= 2
        chunk = chunk[accept(chunk)]
        if len(chunk):
            rows = np.concatenate((rows, chunk))
            values = np.concatenate((values, value(chunk)))
            if len(rows) > k:
                keep = np.argpartition(-values, k - 1)[:k]
                rows, values, cut = rows[keep], values[keep], True
        if position < total and len(rows) >= k:
            unread = order.suffix_fixed[position] + scale * float(
                order.decaying[order.order[position]])
            if float(values.min()) >= slack(unread):
                return TopStatic(rows, values, False, position)
    return TopStatic(rows, values, not cut, position)


def impact_prefix(rows: Rows, weights: F64, size: int) -> tuple[Rows, float]:
    """A term's ``size`` rows of highest weight (its postings capped by impact order), and the
    most any other row of the postings gains from the term (0 when none is left out)."""
    if len(rows) <= size:
        return rows, 0.0
    top = np.argpartition(-weights, size - 1)[:size]
    return rows[top], float(weights[top].min())


class TermPostings(NamedTuple):
    """One query term's BM25 contributions (per view state and candidate set).

    Attributes:
        rows: The candidate rows holding the term, ascending.
        weights: Their BM25 weights.
        positions: For a term held by at least :data:`FREQUENT_SHARE` of the rows, each row's
            position in ``rows`` (-1 where it lacks the term), else None: a look-up at a few
            thousand rows costs a gather instead of a binary search each in ~n/4 or more
            postings.
        key: What names these weights in the view state's derived data (the term's impact
            prefixes are kept under it too); None: not kept.
    """

    rows: Rows
    weights: F64
    positions: npt.NDArray[np.int32] | None = None
    key: Hashable = None


def bm25_at(postings: Sequence[TermPostings], rows: Rows) -> F64:
    """The BM25 of ``rows`` (ascending, distinct): each term's weight where the row holds it,
    summed in term order (as exhaustive scoring sums them: the same bits).

    Each term's weights are found the cheapest way: through its ``positions``, else by a
    binary search of ``rows`` in its postings or of its postings in ``rows``, whichever
    searches fewer values.
    """
    total = np.zeros(len(rows), dtype=np.float64)
    for term_rows, weights, positions, _ in postings:
        if positions is not None:
            where = positions[rows]
            held = where >= 0
            total[held] += weights[where[held]]
        elif len(term_rows) < len(rows):
            hit, at = found_at(rows, term_rows)
            total[at[hit]] += weights[hit]
        else:
            hit, at = found_at(term_rows, rows)
            total[hit] += weights[at[hit]]
    return total


def member(sorted_rows: Rows, rows: Rows) -> B:
    """By entry of ``rows``: whether it is in ``sorted_rows`` (ascending)."""
    return found_at(sorted_rows, rows)[0]


def found_at(sorted_rows: Rows, rows: Rows) -> tuple[B, Rows]:
    """By entry of ``rows``: whether it is in ``sorted_rows`` (ascending), and where."""
    if not len(sorted_rows):
        return np.zeros(len(rows), dtype=np.bool_), np.zeros(len(rows), dtype=np.intp)
    at = np.searchsorted(sorted_rows, rows)
    np.minimum(at, len(sorted_rows) - 1, out=at)
    hit: B = sorted_rows[at] == rows
    return hit, at


@dataclass(frozen=True, slots=True)
class CreatedOrder:
    """Rows by creation time (ties in row order), for the rows created within a span.

    Attributes:
        rows: The rows (live or not) by ``created_at``.
        times: Their creation times.
    """

    rows: Rows
    times: F64

    @classmethod
    def of(cls, created_at: F64) -> CreatedOrder:
        """Sorted once per view lineage."""
        order = np.argsort(created_at, kind="stable").astype(np.intp)
        return cls(order, created_at[order])

    def extended(self, created_at: F64, start: int) -> CreatedOrder:
        """With the rows ``start..`` (appended) merged in after the rows of equal time."""
        if len(created_at) <= start:
            return self
        added = CreatedOrder.of(created_at[start:])
        at = np.searchsorted(self.times, added.times, side="right")
        return CreatedOrder(np.insert(self.rows, at, added.rows + start),
                            np.insert(self.times, at, added.times))

    def within(self, start: float, end: float) -> Rows:
        """Rows created in ``[start, end)``, in time order."""
        first, last = np.searchsorted(self.times, (start, end), side="left").tolist()
        return self.rows[first:last]
