"""Vectorized score components over the columnar view (seed 002 §7, seed 004 ranking).

Every function here takes whole numpy columns and returns arrays; nothing loops over records.

Components (each in 0..1 except flagged importance, which the seed 002 boost may lift above 1):

* ``importance``: seed 004 decayed importance (half-life, access boost) × ``importance_boost``
  for records tagged important.
* ``recency``: ``exp(-Δt / halfLife)`` from the record's recency anchor (seed 002 §7).
* ``semantic``: cosine of query and record embeddings, measured from a point part of the way
  towards the candidates' mean embedding (:class:`Centring`), clipped at 0; token Jaccard for
  records without a vector or when the model is unavailable (seed 004 fallback).
* ``lexical``: BM25 of the query over the candidates, divided by the best candidate's BM25.
* ``layer``: the purpose's weight for the record's layer.
* ``access``: seed 004 ``min(accessCount / 100, 1)``.
* ``context``: how much more relevant (semantic and lexical, in their weight ratio) the best of
  the record's time neighbours (same agent and layer, within ``context_window_ms``) is than the
  record itself: the reply to a relevant question is relevant.
* ``speaker``: 1 when the record is a turn attributed to someone (``"Name: text"``) whom the
  query names, else 0: "what did Caroline say…" is answered by Caroline's own turns.
* ``date``: 1 when the record was created on a day or in a month the query names
  (:mod:`engine.retrieval.temporal`), else 0: "what did Maria donate in December 2023?".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.config import COMPONENTS, ScoringWeights
from engine.decay import MS_PER_DAY, decayed_importance
from engine.records import Layer
from engine.store.view import LAYERS, ViewSnapshot, append_rows

__all__ = [
    "Blend",
    "Centring",
    "ComponentIndex",
    "Decaying",
    "TimeOrder",
    "access_frequency",
    "combine",
    "context_lift",
    "context_relevance",
    "importance_base",
    "linear_recency",
    "neighbour_lines",
    "neighbour_matrix",
    "previous_rows",
    "recency",
    "recency_base",
]

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
Floats = npt.NDArray[np.floating[Any]]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class ComponentIndex:
    """Column positions of the components in a component matrix."""

    importance: int = COMPONENTS.index("importance")
    recency: int = COMPONENTS.index("recency")
    semantic: int = COMPONENTS.index("semantic")
    lexical: int = COMPONENTS.index("lexical")
    layer: int = COMPONENTS.index("layer")
    access: int = COMPONENTS.index("access")
    context: int = COMPONENTS.index("context")
    speaker: int = COMPONENTS.index("speaker")
    date: int = COMPONENTS.index("date")


COL = ComponentIndex()


def recency(anchor_ms: npt.ArrayLike, now_ms: float, half_life_ms: float) -> F64:
    """Seed 002 §7 ``exp(-Δt / halfLife)`` (future anchors count as now)."""
    delta = np.maximum(now_ms - np.asarray(anchor_ms, dtype=np.float64), 0.0)
    result: F64 = np.exp(-delta / half_life_ms)
    return result


def linear_recency(age_days: npt.ArrayLike, max_age_days: float = 90.0) -> F64:
    """Seed 004's linear recency ``max(0, 1 - age/90)`` (reference for its ranking example)."""
    result: F64 = np.maximum(0.0, 1.0 - np.asarray(age_days, dtype=np.float64) / max_age_days)
    return result


def access_frequency(access_count: npt.ArrayLike, cap: float = 100.0) -> F64:
    """Seed 004 ``min(accessCount / 100, 1)``."""
    result: F64 = np.minimum(np.asarray(access_count, dtype=np.float64) / cap, 1.0)
    return result


def layer_component(layer_codes: npt.NDArray[np.int8], table: Mapping[Layer, float]) -> F64:
    """The purpose's weight for each record's layer (codes index :data:`LAYERS`)."""
    lookup = np.asarray([table.get(layer, 0.0) for layer in LAYERS], dtype=np.float64)
    result: F64 = lookup[layer_codes]
    return result


def importance_component(snapshot: ViewSnapshot, now_ms: float, half_life_days: float,
                         flagged: npt.NDArray[np.bool_], boost: float) -> F64:
    """Seed 004 decayed importance with seed 002's boost for flagged records (all rows)."""
    n = snapshot.n
    value = decayed_importance(snapshot.importance[:n], snapshot.created_at[:n],
                               snapshot.access_count[:n], now_ms, half_life_days)
    result: F64 = np.where(flagged[:n], value * boost, value)
    return result


# Decaying bases are taken at the newest timestamp rounded up to a whole hour, so appending
# records written "now" moves that time (and rebuilds every row's base) at most once an hour.
DECAY_EPOCH_MS = 3_600_000.0


@dataclass(frozen=True, slots=True)
class Decaying:
    """A column that decays exponentially with time, factored as ``base × exp(-rate·(now - at))``.

    ``base`` is the column's value at time ``at``: the newest timestamp in it (``newest``)
    rounded up to a whole :data:`DECAY_EPOCH_MS`. It depends only on the view state and is
    computed once per state, and for rows appended since only (:meth:`extended`) while ``at``
    stays; a retrieval at ``now >= newest`` scales it by one number (:meth:`scale`, above 1
    while ``now < at``). Before ``newest`` (a clock behind the data) the caller computes the
    column directly.
    """

    base: F64
    at: float
    rate: float
    newest: float

    @classmethod
    def of(cls, times: F64, rate: float, base_at: Callable[[int, float], F64]) -> Decaying:
        """The column over ``times`` (one per row); ``base_at(start, at)`` computes the rows
        ``start..n`` at time ``at``."""
        newest = float(times.max()) if len(times) else 0.0
        at = _epoch(newest)
        return cls(base_at(0, at), at, rate, newest)

    def extended(self, times: F64, start: int, base_at: Callable[[int, float], F64]
                 ) -> Decaying:
        """This column for ``times`` whose first ``start`` are those it was computed from
        (rows appended since): their bases are kept unless ``at`` moves."""
        newest = max(self.newest, float(times[start:].max())) if len(times) > start \
            else self.newest
        at = _epoch(newest)
        if at != self.at:
            return Decaying(base_at(0, at), at, self.rate, newest)
        return Decaying(append_rows(self.base, base_at(start, at)), at, self.rate, newest)

    def scale(self, now_ms: float) -> float | None:
        """The factor at ``now_ms``, or None when ``now_ms`` is before :attr:`newest`."""
        if now_ms < self.newest:
            return None
        return math.exp(-self.rate * (now_ms - self.at))


def _epoch(newest: float) -> float:
    """``newest`` rounded up to a whole :data:`DECAY_EPOCH_MS`."""
    return math.ceil(newest / DECAY_EPOCH_MS) * DECAY_EPOCH_MS


@dataclass(frozen=True, slots=True)
class Centring:
    """Cosine measured from ``m = strength × mean`` of the candidates' embeddings.

    Embeddings of one store share a common direction (one person's memories, one project's
    notes), which lifts every cosine and compresses the differences that rank. Measuring the
    angle from a point towards their mean instead of from the origin,
    ``cos(q - m, d - m)``, spreads them again (the "all-but-the-top" correction of
    anisotropic embeddings). Everything but the query's own dot products is per view state:

    ``(q - m)·(d - m) = q·d - d·m - q·m + m·m``, ``|d - m|² = 1 - 2 d·m + m·m`` (unit ``d``).

    The mean is that of the first :func:`mean_rows` of the rows (all of them up to 64, then
    at least 94 %): rows appended after keep the point where it is until their count reaches
    the next step (every 4096 rows at 100K), so :meth:`extended` computes ``d·m`` for the new
    rows only. ``d·m`` is a dot product per row (:func:`_mean_dots`), which gives a row the same
    bits whichever rows are computed with it (a BLAS matrix-vector product does not: its kernels
    sum the last rows of a call in another order).

    Attributes:
        mean: ``m``.
        mean_dot: ``d·m`` by row.
        inverse_norm: ``1 / |d - m|`` by row.
        mean_norm2: ``m·m``.
        count: How many rows the centring is over (the ``rows`` mask's count).
    """

    mean: F32
    mean_dot: F32
    inverse_norm: F32
    mean_norm2: float
    count: int = 0

    @classmethod
    def of(cls, vectors: F32, rows: npt.NDArray[np.bool_], strength: float,
           sample: int = 8192) -> Centring:
        """Centring towards ``strength`` × the mean of ``vectors[rows]`` (unit vectors).

        The mean is taken over the first :func:`mean_rows` of the rows, and of those over at
        most ``sample`` (every k-th, so the same data gives the same point): it only anchors
        the angle, and it spares a pass over every vector; ``d·m`` needs one.
        """
        chosen = np.flatnonzero(rows)
        count = len(chosen)
        chosen = chosen[: mean_rows(count)]
        if len(chosen) > sample:
            chosen = chosen[:: -(-len(chosen) // sample)]
        mean: F32 = vectors[chosen].mean(axis=0, dtype=np.float32) if len(chosen) \
            else np.zeros(vectors.shape[1], dtype=np.float32)
        mean *= np.float32(strength)
        mean_norm2 = float(mean @ mean)
        mean_dot = _mean_dots(vectors, mean)
        return cls(mean, mean_dot, _inverse_norm(mean_dot, mean_norm2), mean_norm2, count)

    def extended(self, vectors: F32, rows: npt.NDArray[np.bool_], start: int, strength: float,
                 sample: int = 8192) -> Centring:
        """:meth:`of` for ``vectors`` and ``rows`` whose first ``start`` entries are those this
        centring was computed from (rows appended since): the same point while the count of
        rows it is the mean of stays, and ``d·m`` computed for the appended rows."""
        count = self.count + int(np.count_nonzero(rows[start:]))
        if mean_rows(count) != mean_rows(self.count):
            return Centring.of(vectors, rows, strength, sample)
        added = _mean_dots(vectors[start:], self.mean)
        return Centring(self.mean, append_rows(self.mean_dot, added),
                        append_rows(self.inverse_norm, _inverse_norm(added, self.mean_norm2)),
                        self.mean_norm2, count)

    def cosine(self, cosine: F32, query: F32) -> F32:
        """``cos(q - m, d - m)`` for every row from the plain cosines ``q·d``."""
        query_dot = float(query @ self.mean)
        query_norm = math.sqrt(max(1.0 - 2.0 * query_dot + self.mean_norm2, 1e-12))
        centred: F32 = cosine - self.mean_dot
        centred += np.float32(self.mean_norm2 - query_dot)
        centred *= self.inverse_norm
        centred *= np.float32(1.0 / query_norm)
        return centred


@dataclass(frozen=True, slots=True)
class Blend:
    """Each record's vector mixed with its predecessor's at query time (``semantic_blend``).

    A record written right after another by the same agent in the same layer (the next turn of
    an exchange) is scored as ``u = norm((1 - a)·d + a·p)``, ``p`` the predecessor's vector: a
    short reply ("Yes, it was amazing!") takes some of the topic of what it answers, which its
    own embedding lacks. Nothing is re-embedded or stored (dedup still compares the plain
    vectors); for unit ``d`` and ``p``:

    ``q·u = ((1 - a)·q·d + a·q·p) / |(1 - a)·d + a·p|``,
    ``|(1 - a)·d + a·p|² = (1 - a)² + a² + 2a(1 - a)·d·p``,

    so per query it costs the predecessors' cosines (read from the same matrix-vector product)
    and a few vector operations; ``d·p`` is per view state. The centring's per-row terms are
    those of ``u`` (:meth:`centring`), so the blended cosine is centred like the plain one.

    Attributes:
        previous: By row, the row whose vector is mixed in, or -1 (none: first of its run, no
            vector, or the predecessor is not eligible for the request).
        inverse: By row, ``1 / |(1 - a)·d + a·p|`` (1 where ``previous`` is -1).
        weight: ``a``.
    """

    previous: I32
    inverse: F32
    weight: float

    @classmethod
    def of(cls, vectors: F32, previous: I32, weight: float, old: Blend | None = None
           ) -> Blend:
        """The blend of the rows with a ``previous`` row (``previous``: -1 elsewhere).

        Args:
            old: The blend of an earlier state whose rows are the first of these, with the same
                vectors: only the rows whose predecessor changed (appended rows, and the rows an
                append or eligibility change gave a new predecessor) are recomputed.
        """
        inverse = np.ones(len(previous), dtype=np.float32)
        if old is None:
            changed = np.flatnonzero(previous >= 0)
        else:
            count = len(old.previous)
            inverse[:count] = old.inverse
            changed = np.flatnonzero(previous[:count] != old.previous)
            changed = np.concatenate((changed, np.flatnonzero(previous[count:] >= 0) + count))
        if len(changed):
            before = previous[changed]
            joined = changed[before >= 0]
            dots = np.einsum("ij,ij->i", vectors[joined], vectors[previous[joined]])
            keep, mix = 1.0 - weight, weight
            squared = keep * keep + mix * mix + 2.0 * keep * mix * dots.astype(np.float64)
            inverse[changed] = 1.0
            inverse[joined] = (1.0 / np.sqrt(np.maximum(squared, 1e-12))).astype(np.float32)
        return cls(previous, inverse, weight)

    def mixed(self, own: F32, before: F32, rows: npt.NDArray[np.intp] | None = None) -> F32:
        """``own``, a per-row quantity ``d·x`` of ``rows`` (None: every row), for the blended
        vectors: ``u·x``. ``before`` holds the predecessors' ``p·x`` for the rows of ``rows``
        that have one, in order (:meth:`predecessors`). The same float32 operations whichever
        rows are asked for, so a row gets the same bits on the candidate path as exhaustively.
        """
        previous = self.previous if rows is None else self.previous[rows]
        inverse = self.inverse if rows is None else self.inverse[rows]
        has = previous >= 0
        out: F32 = own.copy()
        out[has] = (np.float32(1.0 - self.weight) * own[has]
                    + np.float32(self.weight) * before) * inverse[has]
        return out

    def predecessors(self, rows: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.int32]:
        """The predecessors of the rows of ``rows`` (None: every row) that have one, in order."""
        previous = self.previous if rows is None else self.previous[rows]
        found: npt.NDArray[np.int32] = previous[previous >= 0]
        return found

    def centring(self, centring: Centring) -> Centring:
        """``centring`` with its per-row terms (``u·m``, ``1 / |u - m|``) for the blended
        vectors (the same point ``m``)."""
        mean_dot = self.mixed(centring.mean_dot, centring.mean_dot[self.predecessors()])
        return Centring(centring.mean, mean_dot, _inverse_norm(mean_dot, centring.mean_norm2),
                        centring.mean_norm2, centring.count)


def previous_rows(order: TimeOrder, n: int, window_ms: float) -> I32:
    """By row, the live row of the same agent and layer written just before it within
    ``window_ms`` (column 0 of :func:`neighbour_matrix`), or -1."""
    out = np.full(n, -1, dtype=np.int32)
    rows, t, group = order.rows, order.times, order.groups
    if len(rows) > 1:
        ok = (group[1:] == group[:-1]) & (t[1:] - t[:-1] <= window_ms)
        out[rows[1:][ok]] = rows[:-1][ok]
    return out


def mean_rows(count: int) -> int:
    """How many of ``count`` rows :class:`Centring`'s mean is over: ``count`` up to 64, then
    ``count`` with all but its 5 leading bits cleared (at least 16/17 of it), so it moves once
    per ``2^(bits - 5)`` rows added."""
    if count <= 64:
        return count
    return count & ~((1 << (count.bit_length() - 5)) - 1)


def _mean_dots(vectors: F32, mean: F32) -> F32:
    """``vectors @ mean`` row by row: each row's dot product is summed the same way however many
    rows there are (as fast as the BLAS product here, ~6 ms at 100K × 384)."""
    dots: F32 = np.einsum("ij,j->i", vectors, mean)
    return dots


def _inverse_norm(mean_dot: F32, mean_norm2: float) -> F32:
    """``1 / |d - m|`` from ``d·m`` and ``m·m`` (unit ``d``)."""
    squared = np.maximum(1.0 - 2.0 * mean_dot + mean_norm2, 1e-12).astype(np.float32)
    inverse_norm: F32 = 1.0 / np.sqrt(squared)
    return inverse_norm


def importance_base(snapshot: ViewSnapshot, half_life_days: float,
                    flagged: npt.NDArray[np.bool_], boost: float,
                    previous: Decaying | None = None, start: int = 0) -> Decaying:
    """:func:`importance_component` factored for reuse (:class:`Decaying`).

    Args:
        previous: This base for the first ``start`` rows of ``snapshot`` (rows appended
            since; see :meth:`Decaying.extended`), or None to compute every row.
    """
    n = snapshot.n
    created = snapshot.created_at[:n]

    def base_at(first: int, at: float) -> F64:
        value = decayed_importance(snapshot.importance[first:n], created[first:],
                                   snapshot.access_count[first:n], at, half_life_days)
        base: F64 = np.where(flagged[first:n], value * boost, value)
        return base

    if previous is not None:
        return previous.extended(created, start, base_at)
    return Decaying.of(created, math.log(2.0) / (half_life_days * MS_PER_DAY), base_at)


def recency_base(snapshot: ViewSnapshot, half_life_ms: float,
                 previous: Decaying | None = None, start: int = 0) -> Decaying:
    """:func:`recency` factored for reuse (:class:`Decaying`); ``previous`` and ``start`` as
    for :func:`importance_base`."""
    anchor = snapshot.recency_anchor[: snapshot.n]

    def base_at(first: int, at: float) -> F64:
        return recency(anchor[first:], at, half_life_ms)

    if previous is not None:
        return previous.extended(anchor, start, base_at)
    return Decaying.of(anchor, 1.0 / half_life_ms, base_at)


@dataclass(frozen=True, slots=True)
class TimeOrder:
    """Live rows sorted by (agent, layer, creation time, row): what time neighbours are read
    from (:func:`neighbour_matrix`).

    Attributes:
        rows: The live rows in that order.
        times: Their creation times.
        groups: Their ``agent × len(LAYERS) + layer``.
        n: The snapshot row count it covers.
    """

    rows: npt.NDArray[np.intp]
    times: F64
    groups: npt.NDArray[np.int64]
    n: int

    @classmethod
    def of(cls, snapshot: ViewSnapshot) -> TimeOrder:
        """The order of ``snapshot``'s live rows."""
        return cls._sorted(snapshot, np.flatnonzero(snapshot.alive[: snapshot.n]),
                           snapshot.n)

    @classmethod
    def _sorted(cls, snapshot: ViewSnapshot, rows: npt.NDArray[np.intp], n: int) -> TimeOrder:
        created, groups = snapshot.created_at[rows], _groups(snapshot, rows)
        order = np.lexsort((created, groups))  # stable: equal keys stay in row order
        return cls(rows[order], created[order], groups[order], n)

    def extended(self, snapshot: ViewSnapshot) -> TimeOrder:
        """This order with the live rows ``self.n..snapshot.n`` merged in (appended rows: every
        earlier row is unchanged, so an O(N) merge replaces the O(N log N) sort)."""
        return self.merged(snapshot)[0]

    def merged(self, snapshot: ViewSnapshot) -> tuple[TimeOrder, npt.NDArray[np.intp]]:
        """:meth:`extended`, and the positions the merged-in rows took in it (ascending)."""
        fresh = np.flatnonzero(snapshot.alive[self.n: snapshot.n]) + self.n
        if not len(fresh):
            return (TimeOrder(self.rows, self.times, self.groups, snapshot.n),
                    np.zeros(0, dtype=np.intp))
        new = TimeOrder._sorted(snapshot, fresh, snapshot.n)
        # rows of the same (group, time) keep row order: an appended row goes after them
        starts = np.searchsorted(self.groups, new.groups, side="left")
        ends = np.searchsorted(self.groups, new.groups, side="right")
        at = np.fromiter((start + np.searchsorted(self.times[start:end], time, side="right")
                          for start, end, time in zip(starts.tolist(), ends.tolist(),
                                                      new.times.tolist(), strict=True)),
                         dtype=np.intp, count=len(fresh))
        order = TimeOrder(np.insert(self.rows, at, new.rows),
                          np.insert(self.times, at, new.times),
                          np.insert(self.groups, at, new.groups), snapshot.n)
        return order, at + np.arange(len(at))  # ``at`` ascends: each insert shifts the next


def _groups(snapshot: ViewSnapshot, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    groups: npt.NDArray[np.int64] = snapshot.agent[rows].astype(np.int64) * len(LAYERS)
    groups += snapshot.layer[rows]
    return groups


def neighbour_matrix(snapshot: ViewSnapshot, k: int, window_ms: float,
                     order: TimeOrder | None = None) -> I32:
    """For each live row, up to ``k`` rows of the same agent and layer before and after it.

    Records written together by one agent in one layer share a context (adjacent turns of an
    exchange, facts noted from one conversation). Returns an ``(n, 2k)`` array of row indices
    (columns ``0..k-1`` the earlier neighbours, nearest first, then the later ones) with ``-1``
    where there is none (another agent or layer, further than ``window_ms`` away, a dead row).

    Args:
        order: ``TimeOrder.of(snapshot)`` if the caller has it (or extended it).
    """
    n = snapshot.n
    out = np.full((n, 2 * k), -1, dtype=np.int32)
    if n == 0 or k == 0:
        return out
    order = order or TimeOrder.of(snapshot)
    rows, t, group = order.rows, order.times, order.groups
    for off in range(1, k + 1):
        if off >= len(rows):
            break
        ok = (group[off:] == group[:-off]) & (np.abs(t[off:] - t[:-off]) <= window_ms)
        later, earlier = rows[off:][ok], rows[:-off][ok]
        out[later, off - 1] = earlier
        out[earlier, k + off - 1] = later
    return out


def neighbour_lines(order: TimeOrder, positions: npt.NDArray[np.intp], k: int,
                    window_ms: float) -> I32:
    """The :func:`neighbour_matrix` lines of the rows at ``positions`` of ``order`` only
    (what an append changes: the new rows' lines and those of the ``k`` rows each side)."""
    out = np.full((len(positions), 2 * k), -1, dtype=np.int32)
    rows, t, group = order.rows, order.times, order.groups
    last = len(rows) - 1
    for off in range(1, k + 1):
        for column, other in ((off - 1, positions - off), (k + off - 1, positions + off)):
            inside = (other >= 0) & (other <= last)
            near = np.clip(other, 0, max(last, 0))
            ok = inside & (group[near] == group[positions]) & \
                (np.abs(t[near] - t[positions]) <= window_ms)
            out[ok, column] = rows[near[ok]]
    return out


def context_relevance(relevance: Floats, neighbours: I32, *, padded: bool = False) -> Floats:
    """Best ``relevance`` among each row's neighbours (0 where it has none).

    Args:
        padded: ``relevance`` already ends with an extra 0 (read for the index -1), which
            spares a copy.
    """
    if neighbours.shape[1] == 0:
        return np.zeros(len(neighbours))
    if not padded:
        relevance = np.append(relevance, 0.0)
    result: Floats = relevance[neighbours[:, 0]]
    for column in range(1, neighbours.shape[1]):
        np.maximum(result, relevance[neighbours[:, column]], out=result)
    return result


def context_lift(relevance: F64, neighbours: I32) -> F64:
    """The ``context`` component: how much more relevant a row's best neighbour is than itself.

    ``max(0, best neighbour relevance - own relevance)``: a reply inherits the relevance its
    own words lack from the question before it, while a record that already matches gains
    nothing from matching neighbours (it would otherwise be counted twice).
    """
    result: F64 = np.maximum(context_relevance(relevance, neighbours) - relevance, 0.0)
    return result


def relevance_of(components: F64, weights: ScoringWeights) -> F64:
    """Semantic and lexical mixed in their weight ratio (0..1): what neighbours lend."""
    total = weights.semantic + weights.lexical
    if total <= 0:
        return np.zeros(len(components))
    result: F64 = (weights.semantic * components[:, COL.semantic]
                   + weights.lexical * components[:, COL.lexical]) / total
    return result


def combine(components: F64, weights: ScoringWeights) -> F64:
    """Weighted sum of the component matrix (columns in :data:`COMPONENTS` order).

    Column by column (fast for the column-major matrices retrieval builds; avoids BLAS threads).
    """
    result: F64 = np.zeros(components.shape[0], dtype=np.float64)
    for column, weight in enumerate(weights.as_tuple()):
        if weight:
            result += weight * components[:, column]
    return result


def lexsort_rank(scores: F64, ids: Sequence[str], subset: npt.NDArray[np.intp]
                 ) -> npt.NDArray[np.intp]:
    """``subset`` ordered by score desc, then id asc (seed 002 §9 step 3, stable).

    A numpy sort by score; only runs of exactly equal scores are re-sorted by id in Python.
    """
    ranked = subset[np.argsort(-scores[subset], kind="stable")]
    if len(ranked) < 2:
        return ranked
    ordered = scores[ranked]
    equal = ordered[1:] == ordered[:-1]
    if not equal.any():
        return ranked
    edges = np.diff(np.concatenate(([0], equal.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        run = ranked[start:end + 1].tolist()
        ranked[start:end + 1] = sorted(run, key=ids.__getitem__)
    return ranked
