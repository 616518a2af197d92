"""The retrieval orchestrator (seed 002 §9): filter, score, sort, pack, compress.

:class:`Retriever` works on a :class:`~engine.store.view.ViewSnapshot` and never asks Chroma to
filter: the candidate set is every live row, the filters (agent, live TTL, the purpose's layer
policy, privacy, the record's state) are boolean masks, and the components are computed for all
rows with numpy so the diagnostics can show why a filtered record would or would not have
ranked. Only the packed records are materialized (through the ``fetch`` callable the engine passes).

Flow (seed 002 §9):

1. Candidates: live rows; masks for agent/layer (``filter``), TTL (``ttl``), ``privacy``, and
   ``state``: only active records are candidates (paused and archived ones never are).
2. Components (:mod:`engine.retrieval.scoring`), weights (``MemoryConfig.retrieval``).
3. Sort eligible candidates by score desc, then id asc. Above ``partition_min`` candidates a
   top slice is selected with a partition first and widened if packing exhausts it.
4. Pack greedily to the budget, in rank order. **Departure from seeds 002 and 003**: seed 002
   §9 says "pack sequentially until token budget reached" and seed 003 §2 ("knapsack-lite")
   *stops* at the first node that does not fit; here a record that does not fit is skipped and
   packing continues until the remaining budget is below the smallest candidate or
   ``SKIP_LIMIT`` records in a row did not fit. Why: memories differ in size far more than
   CueDeck's ranked documents — one long summary or pasted log ranked second would otherwise
   leave most of the budget empty while short, relevant facts ranked just below it are left
   out. What is packed is still in rank order, the bundle says ``truncated`` whenever an
   eligible record was left out, and the diagnostics name each skipped record (``budget``).
   ``SKIP_LIMIT`` bounds the scan.
5. ``throttle``: budget × compression ratio and content compressed (first sentence + tags);
   ``exhausted``: only the top ``exhausted_records`` record(s), compressed.
6. The engine emits ``memory:retrieval`` and counts accesses (not in inspection mode).

Past ``RetrievalConfig.candidate_threshold`` live records, step 2 computes the query's
components for a candidate set only (:meth:`Retriever._score_candidates`: dense, lexical,
static, date, speaker and context sources, each found without a pass over every row —
:mod:`engine.retrieval.candidates` — and scored with the same operations as every row is on
the exhaustive path), which is widened until no row outside it can outrank the first packed
records, else every row is scored (docs/retrieval.md "How candidates are found").

What does not depend on the query — candidate masks, the importance and recency bases, the
layer and access columns, BM25 term statistics, time neighbours, the semantic centring — is
computed once per view version and kept with the snapshot, which the view shares with every
reader until it changes (:func:`_derived`). Access counting after each retrieval changes only
the access columns: the next snapshot keeps everything but the access component, the
access-boosted importance base and their weighted sum, which are recomputed (O(N) vector
operations). Appending records changes no existing row: what was derived for an earlier view
state of the same lineage is extended by the new rows (:func:`_grown`, giving what a full
recompute gives). Per query the work is one matrix-vector product for cosine, the query terms'
postings, and a few vector operations. The per-candidate
diagnostics (component matrix, drop codes) are built only when read.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from engine.config import MemoryConfig, RetrievalConfig, ScoringWeights
from engine.errors import TokenBudgetUndefined
from engine.records import MemoryRecord, Privacy
from engine.retrieval.candidates import (
    FREQUENT_SHARE,
    CreatedOrder,
    StaticOrder,
    TermPostings,
    TopStatic,
    bm25_at,
    found_at,
    impact_prefix,
    member,
    slack,
    top_static,
)
from engine.retrieval.compression import compress
from engine.retrieval.dense import BOUND_MARGIN, IvfIndex, Probe
from engine.retrieval.lexical import TextIndex, bm25_weights, terms
from engine.retrieval.scoring import (
    COL,
    Blend,
    Centring,
    Decaying,
    TimeOrder,
    access_frequency,
    combine,
    context_lift,
    context_relevance,
    importance_base,
    importance_component,
    layer_component,
    lexsort_rank,
    neighbour_lines,
    neighbour_matrix,
    previous_rows,
    recency,
    recency_base,
    relevance_of,
)
from engine.retrieval.temporal import DateSpan, date_match, query_spans
from engine.retrieval.types import (
    COMPONENTS,
    DropReason,
    PressureState,
    RetrievalDiagnostics,
    RetrievalRequest,
    RetrievedBundle,
    SemanticMode,
)
from engine.store.view import ACTIVE_CODE, LAYERS, PRIVACIES, STATES, ViewSnapshot, append_rows
from engine.text import estimate_tokens

__all__ = ["Ranking", "Retriever", "rescore"]

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
B = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]
FetchFn = Callable[[Sequence[str]], list[MemoryRecord]]
T = TypeVar("T")

_CODE = {reason: np.int8(i) for i, reason in enumerate(DropReason)}
NOT_CANDIDATE = np.int8(-2)
PACKED = np.int8(-1)
SKIP_LIMIT = 256
_FIRST_SLICE = 256
WIDEN_LIMIT = 16  # most the candidate path multiplies its sources by before it scores all
# A date or speaker source lists its matching rows up to this many times its size; past that
# it reads them off the static order (the rows of a month can be a third of the store)
_LISTED = 8
_STATIC_ORDERS = 8  # static orders kept for updating (one per weights in use)
_FLOAT32_MARGIN = 1e-5  # relative rounding of a relevance held in float32, with room
_TARGET_MARGIN = 1e-9  # how far under the score to prove a widened round aims its bound
# A widened round takes this many times the dense candidates its probe's bounds imply: the
# estimate is rough, and falling short costs a further, doubled round (more than the overshoot)
_HEADROOM = 1.25
# ... and at most this many times its current width: a round probes lists in proportion to its
# dense candidates, and at 1M a round of 9× (216 of 1,000 lists) cost ~95 ms and still fell
# short when the other sources had not widened; 4× and then the doubled round settled in three
_JUMP = 4
_GATHER_BLOCK = 256  # rows gathered at a time for their dot products (``_dots``)


@dataclass(frozen=True, slots=True)
class Ranking:
    """The outcome of :func:`rescore`: a re-ranking of a bundle's candidates.

    Attributes:
        ids: Eligible candidate ids in rank order.
        scores: Their scores under the new weights.
        packed: Whether each would be packed under the bundle's budget.
        total_tokens: Tokens of the packed ones.
        truncated: Some eligible candidate would not fit.
    """

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    packed: tuple[bool, ...]
    total_tokens: int
    truncated: bool


def _pack(order: Sequence[int], cost: Callable[[int], int], budget: int, max_records: int,
          smallest: int) -> tuple[list[int], int, bool]:
    """Greedy packing of ``order`` (rows): a row that does not fit is skipped and packing goes
    on (a recorded departure from seeds 002/003, which stop; see the module docstring).

    Returns:
        (packed rows, tokens used, whether packing stopped early: full, record limit, or
        ``SKIP_LIMIT`` records in a row did not fit) — False means ``order`` ran out.
    """
    packed: list[int] = []
    used = 0
    skipped = 0
    for row in order:
        if (max_records and len(packed) >= max_records) or budget - used < smallest \
                or skipped >= SKIP_LIMIT:
            return packed, used, True
        tokens = cost(row)
        if used + tokens <= budget:
            packed.append(row)
            used += tokens
            skipped = 0
        else:
            skipped += 1
    return packed, used, False


def rescore(diagnostics: RetrievalDiagnostics, weights: ScoringWeights) -> Ranking:
    """Re-rank a bundle's candidates under other weights, without touching the store.

    The GUI's weight sliders call this: components are reused, only the ``context`` component
    (which depends on the semantic/lexical ratio) is recomputed from the stored neighbours
    (:func:`~engine.retrieval.scoring.context_lift`), and packing is re-run with the bundle's
    budget and per-candidate token costs.
    """
    components = diagnostics.components.copy(order="K")
    if len(components):
        relevance = relevance_of(components, weights) * diagnostics.eligible
        components[:, COL.context] = context_lift(relevance, diagnostics.neighbours)
    scores = combine(components, weights) if len(components) else np.zeros(0)
    eligible_rows = diagnostics.rows[diagnostics.eligible[diagnostics.rows]] \
        if len(diagnostics.rows) else diagnostics.rows
    order = lexsort_rank(scores, diagnostics.ids, eligible_rows)
    tokens = diagnostics.tokens
    smallest = int(tokens[eligible_rows].min()) if len(eligible_rows) else 0
    packed, used, _ = _pack(order.tolist(), lambda r: int(tokens[r]), diagnostics.budget,
                            diagnostics.max_records, smallest)
    packed_set = set(packed)
    return Ranking(
        ids=tuple(diagnostics.ids[r] for r in order),
        scores=tuple(float(scores[r]) for r in order),
        packed=tuple(r in packed_set for r in order.tolist()),
        total_tokens=used,
        truncated=len(packed) < len(order),
    )


@dataclass(frozen=True, slots=True)
class Candidates:
    """Who may be retrieved for one request shape in one view state (cached, read-only).

    Attributes:
        key: What determines the masks (agent, layers, privacy, count of expired records).
        filter_ok: By row: the request's agent and a layer the policy allows.
        ttl_ok: By row: not expired.
        privacy_ok: By row: a privacy partition the request allows.
        state_ok: By row: an active record (paused and archived ones are never retrieved).
        eligible: By row: live and passing all four.
        rows: The eligible rows, ascending.
        smallest: Fewest tokens any eligible record costs (0 when there is none).
    """

    key: Hashable
    filter_ok: B
    ttl_ok: B
    privacy_ok: B
    state_ok: B
    eligible: B
    rows: Rows
    smallest: int

    @property
    def count(self) -> int:
        """Number of eligible candidates."""
        return len(self.rows)


@dataclass(frozen=True, slots=True)
class Picked:
    """The candidate path's choice for one request (see ``Retriever._score_candidates``).

    Attributes:
        rows: The union of the sources: the eligible rows whose exact score is ranked,
            ascending.
        need: ``rows`` and their time neighbours: the rows a cosine is computed for (a
            neighbour's relevance is part of a row's ``context`` component).
        sources: How many rows each source proposed.
        bound: The highest score a row outside ``rows`` can have (-inf when none is
            outside): the sum over the components of what the sources left out (see
            ``Retriever._score_candidates``).
        cosines: Rows (ascending) whose (centred, clipped) cosine was computed, and those
            cosines: a widened request reuses them instead of gathering their vectors again.
        probed: The dense source's probe: how many lists (nearest first), their eligible
            rows and each one's bound of its cosine; a widened request probes only the lists
            after those.
        parts: What ``bound`` is made of (:class:`BoundParts`): a widened request reads how
            many dense candidates would bring it under a target.
    """

    rows: Rows
    need: Rows
    sources: dict[str, int]
    bound: float
    cosines: tuple[Rows, F64]
    probed: Probe
    parts: BoundParts


@dataclass(frozen=True, slots=True)
class BoundParts:
    """The terms of the candidate path's bound (``Retriever._score_candidates``).

    A row outside the union scores at most ``rest + relevance part``, where ``relevance``
    (``w_semantic × semantic + lexical``) bounds its own relevance and ``threshold`` (≥
    ``relevance``) that of any neighbour it can borrow from (rows more relevant than that are
    lenders, their neighbours candidates): with ``lift = w_context / (w_semantic +
    w_lexical)``, its relevance plus ``context`` is at most ``max(relevance + lift ×
    (threshold - relevance), lift × threshold)`` (:meth:`total`).

    Attributes:
        rest: The last static candidate's static part + the date and speaker weights of the
            sources that left rows out.
        semantic_weight: ``w_semantic``.
        semantic: The last dense candidate's cosine (what a row outside them is taken to
            have at most).
        lexical: ``w_lexical`` × the lexical source's bound (normalised).
        lift: ``w_context / (w_semantic + w_lexical)`` (0 without time neighbours or
            relevance weights).
        threshold: The relevance a lender has more than.
    """

    rest: float
    semantic_weight: float
    semantic: float
    lexical: float
    lift: float
    threshold: float

    @property
    def relevance(self) -> float:
        """What a row outside the union can have of ``w_semantic·semantic + w_lexical·lexical``."""
        return self.semantic_weight * self.semantic + self.lexical

    def total(self) -> float:
        """The bound: ``rest`` + the most relevance and ``context`` an outside row can have."""
        relevance = self.relevance
        return self.rest + max(relevance + self.lift * (self.threshold - relevance),
                               self.lift * self.threshold)

    def semantic_for(self, target: float) -> float:
        """The highest last dense cosine that would bring :meth:`total` (lenders over the
        relevance bound itself) under ``target``; -inf when no cosine would (the other terms
        are over it alone) or the cosine has no weight."""
        if self.semantic_weight <= 0:
            return -math.inf
        # total() with threshold == relevance is rest + max(1, lift) × relevance
        relevance = (target - self.rest) / max(1.0, self.lift)
        needed = (relevance - self.lexical) / self.semantic_weight
        return needed if needed > 0 else -math.inf

    def lender_threshold(self, target: float) -> float:
        """The highest lender threshold (≥ the relevance bound) keeping :meth:`total` under
        ``target``: a neighbour of a row less relevant than that cannot lend an outside row
        enough to reach ``target``, so only more relevant rows need their neighbours scored.
        The relevance bound itself when ``target`` is out of reach (or there is no lift)."""
        relevance = self.relevance
        if self.lift <= 0:
            return relevance
        room = target - self.rest
        threshold = min(relevance + (room - relevance) / self.lift, room / self.lift)
        return max(relevance, threshold)


@dataclass(slots=True)
class Scored:
    """One request's scores and the pieces its component matrix is built from on demand.

    ``picked`` is None when every row was scored; on the candidate path only its ``rows``
    carry a score (their exact one; the others' are 0, and their query-dependent component
    columns are 0 outside ``picked.need``).
    """

    scores: F64
    mode: SemanticMode
    neighbours: npt.NDArray[np.int32]
    columns: dict[int, Callable[[], npt.ArrayLike]]
    picked: Picked | None = None

    def components(self, n: int) -> F64:
        """The ``(n, len(COMPONENTS))`` matrix, column-major (each component contiguous)."""
        matrix = np.zeros((len(COMPONENTS), n), dtype=np.float64).T
        for column, build in self.columns.items():
            matrix[:, column] = build()
        return matrix




class Retriever:
    """Scores and packs retrieval requests over view snapshots; one per engine.

    Holds the :class:`~engine.retrieval.lexical.TextIndex` kept in sync with the view; what it
    derives from a snapshot is kept with the snapshot (:func:`_derived`). Thread-safe.

    Args:
        config: Weights and tables; None = defaults.
    """

    def __init__(self, config: RetrievalConfig | None = None) -> None:
        self.config = config or RetrievalConfig()
        self.index = TextIndex()
        self._lock = threading.Lock()
        self._neighbour_cache: _NeighbourCache | None = None
        # the last static order per weights, updated for the next view state of its lineage
        self._static_orders: dict[Hashable, StaticOrder] = {}
        # weights per request shape, with the config they were computed from (``config`` is
        # replaced, not changed, when the engine's retrieval settings change)
        self._weights: dict[Hashable, tuple[RetrievalConfig, ScoringWeights]] = {}

    def retrieve(self, snapshot: ViewSnapshot, request: RetrievalRequest, *, now_ms: float,
                 memory: MemoryConfig, query_vector: npt.NDArray[np.float32] | None,
                 fetch: FetchFn, embed_ms: float = 0.0) -> RetrievedBundle:
        """Run ``request`` over ``snapshot``.

        Args:
            now_ms: The time TTL, decay and recency are computed at.
            memory: Seed 002 config (half-lives, boost, compression ratio).
            query_vector: The query's unit embedding, or None for the Jaccard path.
            fetch: Materializes records by id (only the packed ones are asked for).
            embed_ms: Time the caller spent embedding the query (reported, not counted).

        Raises:
            TokenBudgetUndefined: ``request.max_tokens`` is None (seed 002 §11).
        """
        if request.max_tokens is None:
            raise TokenBudgetUndefined(
                "retrieval request has no token budget (max_tokens); set max_tokens or use "
                f"the configured max_context_tokens ({memory.max_context_tokens})")
        started = time.perf_counter()
        config = self.config
        self.index.sync(snapshot)
        n = snapshot.n
        live = snapshot.live_rows
        candidates = self._candidates(snapshot, request, now_ms)
        weights = self._weights_for(request)
        # past the threshold, score a candidate set (docs/retrieval.md "How candidates are
        # found"); without a query vector there is no dense index to ask and nothing to save
        narrow = len(live) > config.candidate_threshold and query_vector is not None
        scored = self._score(snapshot, request, candidates, weights, now_ms, memory,
                             query_vector, narrow=narrow)

        # 3-5. sort, compress, pack
        pressure = request.pressure_state
        ratio = memory.throttle_compression_ratio
        compressing = pressure in (PressureState.THROTTLE, PressureState.EXHAUSTED)
        budget = request.max_tokens
        if pressure is PressureState.THROTTLE:
            budget = max(1, math.floor(budget * ratio))
        max_records = config.exhausted_records if pressure is PressureState.EXHAUSTED else 0
        tokens = snapshot.token_estimate[:n]
        compressed: dict[int, str] = {}
        compressed_tokens: dict[int, int] = {}

        def cost(row: int) -> int:
            if not compressing:
                return int(tokens[row])
            text = compress(snapshot.content_array[row], snapshot.tag_array[row], ratio)
            compressed[row] = text
            compressed_tokens[row] = estimate_tokens(text)
            return compressed_tokens[row]

        smallest = 1 if compressing else candidates.smallest
        ids = snapshot.id_column  # no list of every id: packing reads a few
        picked = scored.picked
        packed, used, stopped = self._pack_ranked(
            scored.scores, ids, candidates.rows if picked is None else picked.rows, cost,
            budget, max_records, smallest)
        widen = dense_widen = 1
        while picked is not None and widen < WIDEN_LIMIT and len(picked.rows) < \
                candidates.count and not (stopped and _proven(
                    scored.scores, packed, picked.bound, config.proven_records)):
            # the rows the request has touched (later rounds reuse them), about doubled by
            # the next round: past config.widen_share of the store, scoring every row is
            # cheaper. Without it a query far from every topic (flat cosines: nothing to
            # prove) widened 3-4 times first, 63-135 ms at 100K where exhaustive scoring
            # takes 17 (docs/retrieval.md "When widening costs more than scoring every row")
            if 2 * (len(picked.need) + len(picked.probed[1])) > config.widen_share * n:
                break  # (below)
            # packing ran through the candidates, or a row outside them could outrank one of
            # the first packed records: take twice as many from every source. The first time
            # the budget filled but the bound was too high, the dense source alone is doubled:
            # its term is the loose one when the query's neighbourhood holds about as many
            # rows as it proposes (its last cosine still inside it), and doubling the others
            # too lowers the bound little but scores far more rows (docs/retrieval.md "Third
            # version of the candidate path"). From then on all are doubled, the dense source
            # a step ahead: more probed lists per dense candidate than letting the others
            # catch up, which missed a row of an unprobed list in test_candidates.py
            previous = dense_widen
            if stopped and widen == dense_widen == 1:
                dense_widen = 2
            else:
                widen *= 2
                dense_widen *= 2
            # the last record to prove: the widened round aims its bound under its score
            # (its union keeps every row scoring above the bound, so this record or better
            # ones are its first packed records). The dense source jumps to the size that
            # target implies, not a doubling at a time (a topic of several thousand rows
            # took four rounds at 1M), and lenders whose neighbours cannot reach the target
            # are left out (docs/retrieval.md "Fourth version: tighter bound")
            first = packed[:config.proven_records]
            target = _below(float(scored.scores[first[-1]])) if stopped and first else None
            # the cosine the target needs of the dense term (the other terms as they were):
            # the round reads further lists only while their rows can still have more
            # (docs/retrieval.md "Sixth version: fewer lists in widened rounds")
            needed = -math.inf if target is None else picked.parts.semantic_for(target)
            if target is not None:
                dense_widen = max(dense_widen, _dense_factor(
                    picked, needed, config.dense_candidates, previous))
            dense_widen = min(dense_widen, 2 * WIDEN_LIMIT)
            compressed.clear()
            compressed_tokens.clear()
            scored = self._score(snapshot, request, candidates, weights, now_ms, memory,
                                 query_vector, narrow=True, widen=widen,
                                 dense_widen=dense_widen,
                                 cosines=None if picked is None else picked.cosines,
                                 probed=None if picked is None else picked.probed,
                                 target=target, dense_bar=needed)
            picked = scored.picked
            packed, used, stopped = self._pack_ranked(
                scored.scores, ids, candidates.rows if picked is None else picked.rows, cost,
                budget, max_records, smallest)
        if picked is not None and len(picked.rows) < candidates.count and not (
                stopped and _proven(scored.scores, packed, picked.bound,
                                    config.proven_records)):
            # even widened, the candidates ran out before the budget did or do not prove the
            # first packed records: score every row (exhaustive), as the reference does
            compressed.clear()
            compressed_tokens.clear()
            scored = self._score(snapshot, request, candidates, weights, now_ms, memory,
                                 query_vector)
            picked = None
            packed, used, _ = self._pack_ranked(scored.scores, ids, candidates.rows, cost,
                                                budget, max_records, smallest)
        elapsed_ms = (time.perf_counter() - started) * 1000.0

        packed_rows = np.asarray(packed, dtype=np.intp)
        # one gather of the packed ids, not a Python call per id
        records = fetch(snapshot.id_array[packed_rows].tolist()) if packed else []
        if compressing:
            records = [rec.replace(content=compressed[r]) if compressed[r] != rec.content
                       else rec for rec, r in zip(records, packed, strict=True)]
        strategy = request.strategy.value
        if pressure is not PressureState.NORMAL:
            strategy = f"{strategy}:{pressure.value}"
        diagnostics = RetrievalDiagnostics(
            candidate_count=len(live),
            filtered_count=len(live) - candidates.count,
            scoring_breakdown=tuple(zip(COMPONENTS, weights.as_tuple(), strict=True)),
            time_ms=elapsed_ms,
            compression_applied=compressing and any(
                compressed[r] != snapshot.content_array[r] for r in packed),
            semantic_mode=scored.mode, embed_ms=embed_ms, budget=budget,
            max_records=max_records, ids=ids, rows=live, scores=scored.scores,
            eligible=candidates.eligible if picked is None else _scored_mask(picked.rows, n),
            neighbours=scored.neighbours,
            build_components=lambda: scored.components(n),
            build_drop_codes=lambda: _drop_codes(snapshot.alive[:n], candidates, packed_rows,
                                                 snapshot.state[:n], picked),
            build_tokens=lambda: _token_costs(tokens, compressed_tokens),
            candidate_sources={} if picked is None else picked.sources,
            scored_count=candidates.count if picked is None else len(picked.rows),
            candidate_bound=None if picked is None else picked.bound,
            **self._blend_diagnostics(snapshot, candidates, scored.mode),
        )
        return RetrievedBundle(records=tuple(records), total_tokens=used,
                               truncated=len(packed) < candidates.count,
                               strategy_applied=strategy, diagnostics=diagnostics,
                               request=request)

    def _weights_for(self, request: RetrievalRequest) -> ScoringWeights:
        """``config.weights_for`` the request's purpose, strategy and pressure, computed once
        per config (~80 µs each time: dict work and validation of the weights)."""
        config = self.config
        key = (request.purpose, request.strategy, request.pressure_state)
        cached = self._weights.get(key)
        if cached is None or cached[0] is not config:
            cached = (config, config.weights_for(*key))
            self._weights[key] = cached
        return cached[1]

    # -- 1. candidates ---------------------------------------------------------------------

    def _candidates(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                    now_ms: float) -> Candidates:
        """The masks of seed 002 §9 step 1, cached per view state and request shape.

        The expired set at ``now_ms`` is the live records whose expiry is before it: later
        times only add to it, so its size names it and keys the cache instead of the time
        (counted only once the soonest expiry has passed).
        """
        n = snapshot.n
        layers = request.layers if request.layers is not None \
            else self.config.layer_policy[request.purpose]
        privacy = request.privacy if request.privacy is not None else frozenset(Privacy)
        def soonest_from(start: int) -> float:
            return float(np.min(snapshot.expires_at[start:n], initial=np.inf,
                                where=snapshot.alive[start:n]))

        soonest = _grown(snapshot, "soonest expiry", lambda: soonest_from(0),
                         lambda old, start: min(old, soonest_from(start)))
        expired = 0 if now_ms <= soonest else int(np.count_nonzero(
            (snapshot.expires_at[:n] < now_ms) & snapshot.alive[:n]))
        key = ("candidates", request.agent_id, layers, privacy, expired)

        def masks(start: int) -> tuple[B, B, B, B, B]:
            """filter_ok, ttl_ok, privacy_ok, state_ok and eligible of the rows ``start..n``."""
            filter_ok: B = np.asarray([layer in layers for layer in LAYERS])[
                snapshot.layer[start:n]]
            if request.agent_id is not None:
                filter_ok &= snapshot.agent[start:n] == snapshot.agent_code(request.agent_id)
            ttl_ok: B = snapshot.expires_at[start:n] >= now_ms
            privacy_ok: B = np.asarray([p in privacy for p in PRIVACIES])[
                snapshot.privacy[start:n]]
            state_ok: B = snapshot.state[start:n] == ACTIVE_CODE
            return filter_ok, ttl_ok, privacy_ok, state_ok, snapshot.alive[start:n] & \
                filter_ok & ttl_ok & privacy_ok & state_ok

        def smallest(rows: Rows, before: int | None = None) -> int:
            """Fewest tokens of ``rows`` and ``before`` (0 when neither has any)."""
            values = [] if before is None else [before]
            if len(rows):
                values.append(int(snapshot.token_estimate[rows].min()))
            return min(values, default=0)

        def build() -> Candidates:
            filter_ok, ttl_ok, privacy_ok, state_ok, eligible = masks(0)
            rows = np.flatnonzero(eligible)
            return Candidates(key, filter_ok, ttl_ok, privacy_ok, state_ok, eligible, rows,
                              smallest(rows))

        def extend(old: Candidates, start: int) -> Candidates:
            if expired and np.any((snapshot.expires_at[start:n] < now_ms)
                                  & snapshot.alive[start:n]):
                return build()  # the key's expired count no longer names old rows' set
            added = masks(start)
            filter_ok, ttl_ok, privacy_ok, state_ok, eligible = (
                append_rows(before, after) for before, after in zip(
                    (old.filter_ok, old.ttl_ok, old.privacy_ok, old.state_ok, old.eligible),
                    added, strict=True))
            new_rows = np.flatnonzero(added[4]) + start
            return Candidates(key, filter_ok, ttl_ok, privacy_ok, state_ok, eligible,
                              append_rows(old.rows, new_rows),
                              smallest(new_rows, old.smallest if old.count else None))

        return _grown(snapshot, key, build, extend)

    # -- 2. components (seed 002 §7, seed 004) ---------------------------------------------

    def _score(self, snapshot: ViewSnapshot, request: RetrievalRequest, candidates: Candidates,
               weights: ScoringWeights, now_ms: float, memory: MemoryConfig,
               query_vector: npt.NDArray[np.float32] | None, *, narrow: bool = False,
               widen: int = 1, dense_widen: int | None = None,
               cosines: tuple[Rows, F64] | None = None,
               probed: Probe | None = None,
               target: float | None = None, dense_bar: float = -math.inf) -> Scored:
        """Every row's score under ``weights``, and how to rebuild its components.

        With ``narrow`` (a query and its vector), only the rows :meth:`_score_candidates`
        picks are scored (``Scored.picked``), exactly; when the clock is behind the data (the
        decay bases cannot be scaled) every row is. ``cosines``: those an earlier, narrower
        round of the request computed, ``probed`` its dense probe; ``dense_widen``: the dense
        source's factor (None: as ``widen``); ``target``: the score the round's bound should
        be under, ``dense_bar`` the cosine that target asks of the dense term
        (:meth:`_score_candidates`).
        """
        if narrow and query_vector is not None and (request.query or "").strip():
            scored = self._score_candidates(snapshot, request, candidates, weights, now_ms,
                                            memory, query_vector, widen, cosines,
                                            widen if dense_widen is None else dense_widen,
                                            probed, target, dense_bar)
            if scored is not None:
                return scored
        config = self.config
        n = snapshot.n
        columns: dict[int, Callable[[], npt.ArrayLike]] = {}
        scores = self._static_part(snapshot, request, weights, columns)
        flagged = self.index.flagged
        self._add_decaying(scores, columns, COL.importance, weights.importance, now_ms,
                           self._importance_base(snapshot, memory),
                           lambda: importance_component(
                               snapshot, now_ms, memory.importance_decay_half_life_days,
                               flagged(n), memory.importance_boost))
        self._add_decaying(scores, columns, COL.recency, weights.recency, now_ms,
                           self._recency_base(snapshot, memory),
                           lambda: recency(snapshot.recency_anchor[:n], now_ms,
                                           float(memory.decay_half_life_ms)))

        query = (request.query or "").strip()
        if not query:
            return Scored(scores, SemanticMode.NONE, np.zeros((n, 0), dtype=np.int32), columns)
        query_terms = terms(query)
        lexical = self._lexical(snapshot, query_terms, candidates)
        speakers = self.index.speaker_rows(query_terms, n)
        spans = query_spans(query)
        dated = date_match(snapshot.created_at[:n], spans, config.date_tolerance_ms) \
            if spans else None
        semantic, mode = self._semantic(snapshot, query_terms, query_vector, candidates)
        columns[COL.semantic] = _constant(semantic)
        columns[COL.lexical] = _constant(lexical)
        columns[COL.speaker] = lambda: _indicator(speakers, n)
        scores += weights.semantic * semantic
        scores += weights.lexical * lexical
        scores[speakers] += weights.speaker
        if dated is not None:  # the query names a day or month: the records created then
            columns[COL.date] = lambda: dated.astype(np.float64)
            scores += weights.date * dated  # a masked add is ~10x slower at 100K

        neighbours = np.zeros((n, 0), dtype=np.int32)
        if config.context_neighbours:
            neighbours, with_neighbours, their_neighbours = self._neighbours(snapshot)
            relevance_weight = weights.semantic + weights.lexical
            if len(with_neighbours) and relevance_weight > 0:
                # what a neighbour lends: its relevance, 0 for non-candidates and for "no
                # neighbour" (index -1 reads the extra last slot)
                padded = np.zeros(n + 1, dtype=np.float32)  # half the bytes to gather from
                relevance = padded[:n]
                np.multiply(semantic, weights.semantic / relevance_weight, out=relevance)
                relevance += (weights.lexical / relevance_weight) * lexical
                if candidates.count < n:
                    relevance[~candidates.eligible] = 0.0
                best = context_relevance(padded, their_neighbours, padded=True)
                best -= relevance[with_neighbours]
                context = np.zeros(n, dtype=np.float64)
                context[with_neighbours] = np.maximum(best, 0.0)  # context_lift, on fewer rows
                columns[COL.context] = _constant(context)
                scores += weights.context * context
        return Scored(scores, mode, neighbours, columns)

    @staticmethod
    def _add_decaying(scores: F64, columns: dict[int, Callable[[], npt.ArrayLike]], column: int,
                      weight: float, now_ms: float, decaying: Decaying,
                      direct: Callable[[], F64]) -> None:
        """Add a decaying component: its cached base scaled to ``now_ms`` (or ``direct()``
        when the clock is behind the data)."""
        scale = decaying.scale(now_ms)
        if scale is None:
            value = direct()
            columns[column] = _constant(value)
            if weight:
                scores += weight * value
            return
        columns[column] = _scaled(decaying.base, scale)
        if weight and scale:
            scores += (weight * scale) * decaying.base

    def _static_part(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                     weights: ScoringWeights, columns: dict[int, Callable[[], npt.ArrayLike]]
                     ) -> F64:
        """A fresh array of the weighted layer + access components (cached per view state)."""
        layer, access, fixed = self._fixed_part(snapshot, request, weights)
        columns[COL.layer] = _constant(layer)
        columns[COL.access] = _constant(access)
        return fixed.copy()

    def _importance_base(self, snapshot: ViewSnapshot, memory: MemoryConfig) -> Decaying:
        half_life, boost = memory.importance_decay_half_life_days, memory.importance_boost
        flagged = self.index.flagged
        return _grown(snapshot, ("importance", half_life, boost), lambda: importance_base(
            snapshot, half_life, flagged(snapshot.n), boost),
            lambda old, start: importance_base(snapshot, half_life, flagged(snapshot.n), boost,
                                               old, start), reads_access=True)

    def _recency_base(self, snapshot: ViewSnapshot, memory: MemoryConfig) -> Decaying:
        half_life = float(memory.decay_half_life_ms)
        return _grown(snapshot, ("recency", half_life), lambda: recency_base(snapshot, half_life),
                      lambda old, start: recency_base(snapshot, half_life, old, start))

    def _semantic(self, snapshot: ViewSnapshot, query_terms: Sequence[str],
                  query_vector: npt.NDArray[np.float32] | None, candidates: Candidates,
                  ) -> tuple[F64, SemanticMode]:
        """Cosine clipped at 0 (Jaccard for records without a vector, or without a model)."""
        n = snapshot.n
        if query_vector is None:
            return self.index.jaccard(query_terms, n), SemanticMode.JACCARD
        query = query_vector.astype(np.float32, copy=False)
        semantic = self._cosine(snapshot, query, candidates, None)
        without = self._without_vectors(snapshot)
        if len(without) and candidates.eligible[without].any():
            semantic[without] = self.index.jaccard(query_terms, n)[without]
            return semantic, SemanticMode.MIXED
        semantic[without] = 0.0
        return semantic, SemanticMode.COSINE

    def _semantic_at(self, snapshot: ViewSnapshot, query_terms: Sequence[str],
                     query_vector: F32, candidates: Candidates, rows: Rows,
                     known: tuple[Rows, F64]) -> tuple[F64, SemanticMode]:
        """:meth:`_semantic` of ``rows`` (ascending) only, aligned with them.

        Args:
            known: Rows (ascending) whose cosine is already computed, and their cosines.
        """
        query = query_vector.astype(np.float32, copy=False)
        found, at = found_at(known[0], rows)
        semantic = np.empty(len(rows), dtype=np.float64)
        semantic[found] = known[1][at[found]]
        if not found.all():  # a row's cosine has the same bits whichever rows it comes with
            semantic[~found] = self._cosine(snapshot, query, candidates, rows[~found])
        without = self._without_vectors(snapshot)
        inside = member(without, rows)
        if len(without) and candidates.eligible[without].any():
            semantic[inside] = self.index.jaccard(query_terms, snapshot.n)[rows[inside]]
            return semantic, SemanticMode.MIXED
        semantic[inside] = 0.0
        return semantic, SemanticMode.COSINE

    @staticmethod
    def _without_vectors(snapshot: ViewSnapshot) -> Rows:
        """Live rows without a vector, ascending."""
        n = snapshot.n
        return _appended(snapshot, "without_vectors", lambda start: np.flatnonzero(
            snapshot.alive[start:n] & ~snapshot.has_vector[start:n]) + start)

    def _cosine(self, snapshot: ViewSnapshot, query: F32, candidates: Candidates,
                rows: Rows | None) -> F64:
        """The (centred, blended) cosine of ``rows`` (None: every row) with ``query``, clipped
        at 0.

        A subset is computed with the same operations as every row (the centring's and the
        blend's per-row terms taken at those rows), from the view's float32 vectors: a row's
        dot product is summed row by row (``einsum``, as fast as the BLAS product here), so it
        has the same bits on the candidate path as in exhaustive scoring (a BLAS matrix-vector
        product sums the last rows of a call in another order, see ``scoring._mean_dots``).
        With ``semantic_blend`` the rows' predecessors' dot products are mixed in
        (:class:`~engine.retrieval.scoring.Blend`).
        """
        vectors = snapshot.vectors[:snapshot.n]
        cosine: F32 = np.einsum("ij,j->i", vectors, query) if rows is None \
            else _dots(vectors, rows, query)
        blend = self._blend(snapshot, candidates)
        if blend is not None:
            before = blend.predecessors(rows)
            cosine = blend.mixed(cosine, cosine[before] if rows is None
                                 else _dots(vectors, before, query), rows)
        centring = self._centring(snapshot, candidates, blend)
        if centring is None:
            return np.maximum(cosine, 0.0, dtype=np.float64)
        if rows is not None:
            centring = dataclasses.replace(centring, mean_dot=centring.mean_dot[rows],
                                           inverse_norm=centring.inverse_norm[rows])
        semantic: F64 = np.maximum(centring.cosine(cosine, query), 0.0, dtype=np.float64)
        return semantic

    def _centring(self, snapshot: ViewSnapshot, candidates: Candidates, blend: Blend | None
                  ) -> Centring | None:
        """The view state's :class:`~engine.retrieval.scoring.Centring` for ``candidates``
        (of the blended vectors when ``blend``), or None when ``semantic_centering`` is 0."""
        strength = self.config.semantic_centering
        if strength <= 0:
            return None
        vectors = snapshot.vectors[:snapshot.n]

        def over() -> B:  # the rows the centring is over
            with_vectors: B = candidates.eligible & snapshot.has_vector[:snapshot.n]
            return with_vectors

        centring: Centring = _grown(
            snapshot, ("centring", candidates.key, strength),
            lambda: Centring.of(vectors, over(), strength),
            lambda old, start: old.extended(vectors, over(), start, strength))
        if blend is not None:
            plain = centring
            centring = _derived(snapshot, ("blended centring", candidates.key, strength,
                                           blend.weight, self.config.context_window_ms,
                                           self.config.semantic_blend_layers),
                                lambda: blend.centring(plain))
        return centring

    def _semantic_bounds(self, snapshot: ViewSnapshot, query: F32, candidates: Candidates,
                         rows: Rows, dots: F64, before: F64 | None = None) -> F64:
        """An upper bound of :meth:`_cosine` at ``rows`` from upper bounds ``dots`` of their
        plain dot products with ``query`` (the dense index's codes), and ``before`` of their
        predecessors' (the rows with one, in order; None: from the index's codes).

        The same steps as :meth:`_cosine`, in float64: the blend mixes a row's dot with its
        predecessor's (bounded the same way) with positive factors, and the centring is
        ``(cos - d·m + m·m - q·m) × inverse_norm / |q - m|``, increasing in ``cos``; so bounds
        in give a bound out. :data:`~engine.retrieval.dense.BOUND_MARGIN` covers the float32
        rounding of the exact path.
        """
        cosine = dots.copy()
        blend = self._blend(snapshot, candidates)
        if blend is not None:
            previous = blend.previous[rows]
            has = previous >= 0
            if before is None:
                before = self.dense_index(snapshot).dot_bounds(query,
                                                               previous[has].astype(np.intp))
            cosine[has] = ((1.0 - blend.weight) * cosine[has] + blend.weight * before) \
                * blend.inverse[rows[has]]
        centring = self._centring(snapshot, candidates, blend)
        if centring is not None:
            query_dot = float(query.astype(np.float64) @ centring.mean.astype(np.float64))
            query_norm = math.sqrt(max(1.0 - 2.0 * query_dot + centring.mean_norm2, 1e-12))
            cosine -= centring.mean_dot[rows]
            cosine += centring.mean_norm2 - query_dot
            cosine *= centring.inverse_norm[rows]
            cosine /= query_norm
            cosine += BOUND_MARGIN
        bounds: F64 = np.maximum(cosine, 0.0)
        return bounds

    def _blend_diagnostics(self, snapshot: ViewSnapshot, candidates: Candidates,
                           mode: SemanticMode) -> dict[str, Any]:
        """``semantic_blend`` and ``blended`` of the diagnostics (nothing when no cosine was
        blended: no query, no model, or the blend off)."""
        blend = self._blend(snapshot, candidates) \
            if mode in (SemanticMode.COSINE, SemanticMode.MIXED) else None
        if blend is None:
            return {}
        return {"semantic_blend": blend.weight, "blended": blend.previous}

    def _blend(self, snapshot: ViewSnapshot, candidates: Candidates) -> Blend | None:
        """The view state's :class:`~engine.retrieval.scoring.Blend` for ``candidates`` (None
        when ``semantic_blend`` is 0). A row of the ``semantic_blend_layers`` is blended with
        its nearest earlier time neighbour (the order the ``context`` component reads: same
        agent and layer, within ``context_window_ms``) when both have a vector and the
        predecessor is eligible: a record the request may not see (another privacy partition,
        paused, expired) lends nothing, as in ``context``."""
        weight = self.config.semantic_blend
        layers = self.config.semantic_blend_layers
        if weight <= 0 or not layers:
            return None
        window = self.config.context_window_ms

        def previous() -> npt.NDArray[np.int32]:
            n = snapshot.n
            found = previous_rows(self._time_neighbours(snapshot).order, n, window)
            has = snapshot.has_vector[:n]
            usable = (found >= 0) & has & np.asarray([layer in layers for layer in LAYERS])[
                snapshot.layer[:n]]
            usable[usable] &= candidates.eligible[found[usable]] & has[found[usable]]
            found[~usable] = -1
            return found

        vectors = snapshot.vectors[:snapshot.n]
        return _grown(snapshot, ("blend", candidates.key, weight, window, layers),
                      lambda: Blend.of(vectors, previous(), weight),
                      lambda old, _: Blend.of(vectors, previous(), weight, old))

    def _score_candidates(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                          candidates: Candidates, weights: ScoringWeights, now_ms: float,
                          memory: MemoryConfig, query_vector: F32, widen: int,
                          cosines: tuple[Rows, F64] | None = None,
                          dense_widen: int | None = None,
                          probed_before: Probe | None = None,
                          target: float | None = None,
                          dense_bar: float = -math.inf) -> Scored | None:
        """The candidate path: the exact score of the union of the candidate sources, found
        without a pass over every row (docs/retrieval.md "How candidates are found").

        * ``dense``: the :attr:`~RetrievalConfig.dense_candidates` best (centred) cosines among
          the rows the dense index's probed lists hold;
        * ``lexical``: the best BM25 among the rows in each query term's postings capped by
          impact order (:func:`~engine.retrieval.candidates.impact_prefix`), scored exactly;
        * ``static``: the best query-independent part of the score (importance, recency,
          layer, access) by the threshold algorithm over the view state's
          :class:`~engine.retrieval.candidates.StaticOrder`;
        * ``date`` / ``speaker``: of the rows the query's day or speaker matches (a slice of
          the creation-time order; the speaker's rows), the best by that part (each gains the
          same weight);
        * ``context``: the time neighbours of the dense and lexical rows (they may gain a
          ``context`` lift from them).

        Every component is computed for the union and its time neighbours only, with the
        operations exhaustive scoring applies to every row (the same bits). A row outside the
        union scores at most ``bound``: its query-independent part is at most the last static
        candidate's, its cosine at most the last dense candidate's (the one approximation: the
        probed lists are taken to hold the best cosines), its BM25 at most the larger of the
        last lexical candidate's and the sum of the capped postings' last weights (0 when no
        row was left out), the date and speaker weights only if their sources were cut, and
        its relevance plus ``context`` lift at most :meth:`BoundParts.total` of them: its
        neighbours are not lenders, so none is more relevant than the lenders' threshold (the
        relevance bound itself unless ``target`` raises it; then ``max(w_semantic +
        w_lexical, w_context)`` / ``(w_semantic + w_lexical)`` times the relevance bound).

        Args:
            widen: Factor on every source's size (the retriever widens until the first
                packed records score above the bound).
            cosines: Rows (ascending) whose cosine an earlier round computed, and those.
            dense_widen: The dense source's factor (its probes and size; None: ``widen``).
            probed_before: An earlier round's dense probe (``Picked.probed``).
            target: The score a widened request needs its bound under (the earlier round's
                last record to prove): only rows more relevant than
                :meth:`BoundParts.lender_threshold` of it lend context (the bound counts what
                the others can lend); None: every row over the relevance bound.
            dense_bar: The last dense cosine that would bring the bound under ``target``
                (``BoundParts.semantic_for`` of the earlier round's terms; -inf: none): a
                widened probe stops reading lists after a step of them holding no row over
                it (:meth:`_dense_source`).

        Returns:
            The scores, or None when the clock is behind the data (the decay bases cannot be
            scaled to ``now_ms``): the caller then scores every row.
        """
        config = self.config
        n = snapshot.n
        importance_base, recency_base = (self._importance_base(snapshot, memory),
                                         self._recency_base(snapshot, memory))
        importance_scale, recency_scale = importance_base.scale(now_ms), \
            recency_base.scale(now_ms)
        if importance_scale is None or recency_scale is None:
            return None
        layer, access, fixed = self._fixed_part(snapshot, request, weights)
        # ``_add_decaying``'s terms: added only when both the weight and the scale are non-0
        decaying = [(weight * scale, base.base) for weight, scale, base in (
            (weights.importance, importance_scale, importance_base),
            (weights.recency, recency_scale, recency_base)) if weight and scale]

        def static_of(rows: Rows) -> F64:
            """The query-independent part of ``rows``' scores, as ``_score`` sums it."""
            values: F64 = fixed[rows]
            for factor, base in decaying:
                values += factor * base[rows]
            return values

        eligible = candidates.eligible

        def is_eligible(rows: Rows) -> B:
            found: B = eligible[rows]
            return found

        query = (request.query or "").strip()
        query_terms = terms(query)
        k = config.static_candidates * widen
        coefficients = (weights.importance * importance_scale,
                        weights.recency * recency_scale)
        order = self._static_order(snapshot, request, weights, memory, fixed,
                                   importance_base, recency_base, coefficients)
        scale = order.scale(coefficients)
        static = top_static(order, scale, k, is_eligible, static_of)
        sources: dict[str, Rows] = {}
        dense_factor = widen if dense_widen is None else dense_widen
        postings = self._query_postings(snapshot, candidates, query_terms)
        read = self._lexical_source(snapshot, candidates, postings,
                                    config.lexical_candidates * widen, config.widen_share * n)
        if read is None:
            return None  # the query's terms do not separate rows: scoring every row is cheaper
        lexical_rows, best, lexical_out = read
        dense, dense_least, probed, probe = self._dense_source(
            snapshot, candidates, query_vector, config.dense_probes * dense_factor,
            config.dense_candidates * dense_factor, cosines, probed_before, dense_bar)
        sources.update(dense=dense, lexical=lexical_rows, static=static.rows)
        cut = 0.0  # weights of the date and speaker sources that left rows out
        spans = query_spans(query)
        tolerance = config.date_tolerance_ms
        created = snapshot.created_at
        if spans:
            on_day = self._dated_rows(snapshot, spans, tolerance, k)
            if on_day is None:  # too many to list: read the static order for them
                def dated_ok(rows: Rows) -> B:
                    return is_eligible(rows) & date_match(created[rows], spans, tolerance)
                top = top_static(order, scale, k, dated_ok, static_of)
            else:
                top = _top_of(on_day[eligible[on_day]], k, static_of)
            sources["date"] = top.rows
            cut += 0.0 if top.complete else weights.date
        speakers = self.index.speaker_rows(query_terms, n)
        if len(speakers):
            if len(speakers) > _LISTED * k:
                def speaking(rows: Rows) -> B:
                    return is_eligible(rows) & member(speakers, rows)
                top = top_static(order, scale, k, speaking, static_of)
            else:
                top = _top_of(speakers[eligible[speakers]], k, static_of)
            if len(top.rows):
                sources["speaker"] = top.rows
            cut += 0.0 if top.complete else weights.speaker
        # what a row outside the union can have of each relevance part: at most the last
        # dense candidate's cosine and the lexical source's bound; a widened round with a
        # target raises the lenders' threshold as far as the bound stays under it
        share = weights.semantic + weights.lexical
        lexical_bound = lexical_out / best if best > 0 else 0.0
        matrix = self._neighbours(snapshot)[0] if config.context_neighbours else None
        parts = BoundParts(
            _least(static.values) + cut, weights.semantic, dense_least,
            weights.lexical * lexical_bound,
            weights.context / share if matrix is not None and share > 0 else 0.0, 0.0)
        parts = dataclasses.replace(parts, threshold=parts.relevance if target is None
                                    else parts.lender_threshold(target))
        known = probed
        if matrix is not None:
            # only a dense or lexical row more relevant than the threshold lends a neighbour
            # more than the bound allows: the neighbours of those rows are the context source
            lenders = _distinct(np.concatenate((dense, lexical_rows)), n)
            known = _with_cosines(probed, lexical_rows, lambda rows: self._cosine(
                snapshot, query_vector, candidates, rows))
            if share > 0:
                lender_semantic, _ = self._semantic_at(snapshot, query_terms, query_vector,
                                                       candidates, lenders, known)
                lender_bm25 = bm25_at(postings, lenders)
                lender_lexical = lender_bm25 / best if best > 0 else lender_bm25
                lending = weights.semantic * lender_semantic + weights.lexical * lender_lexical
                # a margin for the float32 relevance the context lift is computed in
                lenders = lenders[lending > parts.threshold * (1.0 - _FLOAT32_MARGIN)]
            near = _neighbours_of(matrix, lenders, n)
            sources["context"] = near[eligible[near]]
        rows = _distinct(np.concatenate(list(sources.values())), n)
        need = rows if matrix is None else _distinct(
            np.concatenate((rows, _neighbours_of(matrix, rows, n))), n)

        # the components of ``need`` (the union and its time neighbours), as ``_score``
        # computes them for every row; ``at`` picks the union's entries. The union's scores
        # alone are summed (a neighbour's relevance is all its row lends), with ``_score``'s
        # operations in its order: the same bits
        at = np.searchsorted(need, rows)
        semantic, mode = self._semantic_at(snapshot, query_terms, query_vector, candidates,
                                           need, known)
        bm25 = bm25_at(postings, need)
        lexical = bm25 / best if best > 0 else bm25
        speaker = member(speakers, need)
        dated = date_match(created[need], spans, tolerance) if spans else None
        scores = static_of(rows)
        scores += weights.semantic * semantic[at]
        scores += weights.lexical * lexical[at]
        scores[speaker[at]] += weights.speaker
        if dated is not None:
            scores += weights.date * dated[at]
        context = np.zeros(len(need), dtype=np.float64)
        relevance_weight = weights.semantic + weights.lexical
        lend = matrix is not None and relevance_weight > 0 and bool(
            len(self._neighbours(snapshot)[1]))
        if matrix is not None and lend:
            # as ``_score``: float32 relevance, 0 for ineligible rows and for "no neighbour"
            relevance = np.zeros(len(need) + 1, dtype=np.float32)
            np.multiply(semantic, weights.semantic / relevance_weight, out=relevance[:-1])
            relevance[:-1] += (weights.lexical / relevance_weight) * lexical
            relevance[:-1][~eligible[need]] = 0.0
            lines = matrix[rows]
            found = np.searchsorted(need, lines)
            found[lines < 0] = len(need)  # the extra 0 at the end
            lent = context_relevance(relevance, found.astype(np.int32), padded=True)
            lent -= relevance[at]
            context[at] = np.maximum(lent, 0.0)
            scores += weights.context * context[at]

        full = np.zeros(n, dtype=np.float64)
        full[rows] = scores
        bound = parts.total() if len(rows) < candidates.count else -math.inf
        picked = Picked(rows, need, {name: len(found) for name, found in sources.items()},
                        bound, known, probe, parts)

        def spread(values: F64) -> Callable[[], npt.ArrayLike]:
            """A full-length component column of ``need``'s values (built when read)."""
            return lambda: _spread_at(need, values, n)

        columns: dict[int, Callable[[], npt.ArrayLike]] = {
            COL.layer: _constant(layer), COL.access: _constant(access),
            COL.importance: _scaled(importance_base.base, importance_scale),
            COL.recency: _scaled(recency_base.base, recency_scale),
            COL.semantic: spread(semantic), COL.lexical: spread(lexical),
            COL.speaker: spread(speaker.astype(np.float64))}
        if dated is not None:
            columns[COL.date] = spread(dated.astype(np.float64))
        if lend:
            columns[COL.context] = spread(context)
        neighbours = matrix if matrix is not None else np.zeros((n, 0), dtype=np.int32)
        return Scored(full, mode, neighbours, columns, picked)

    def _fixed_part(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                    weights: ScoringWeights) -> tuple[F64, F64, F64]:
        """The layer and access columns and their weighted sum (cached per view state)."""
        n = snapshot.n
        table = self.config.layer_weights[request.purpose]
        layer_key = tuple(table.get(layer, 0.0) for layer in LAYERS)
        cap = self.config.access_cap
        layer = _appended(snapshot, ("layer", layer_key),
                          lambda start: layer_component(snapshot.layer[start:n], table))
        access = _appended(snapshot, ("access", cap),
                           lambda start: access_frequency(snapshot.access_count[start:n], cap),
                           reads_access=True)
        key = ("layer+access", layer_key, cap, weights.layer, weights.access)
        fixed = _appended(snapshot, key, lambda start: weights.layer * layer[start:]
                          + weights.access * access[start:], reads_access=True)
        return layer, access, fixed

    def _static_order(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                      weights: ScoringWeights, memory: MemoryConfig, fixed: F64,
                      importance: Decaying, recency_base: Decaying,
                      coefficients: tuple[float, float]) -> StaticOrder:
        """The view state's :class:`~engine.retrieval.candidates.StaticOrder` for these
        weights: the last one of the lineage updated (access counting, appends), else sorted
        for this request's ``coefficients`` (importance and recency weight × scale).
        """
        table = self.config.layer_weights[request.purpose]
        key = ("static order", tuple(table.get(layer, 0.0) for layer in LAYERS),
               self.config.access_cap, weights.layer, weights.access, weights.importance,
               weights.recency, memory.importance_decay_half_life_days,
               memory.importance_boost, float(memory.decay_half_life_ms))

        def compute() -> StaticOrder:
            with self._lock:
                last = self._static_orders.get(key)
            parts = (fixed, importance.base, recency_base.base, coefficients, snapshot.lineage)
            value = StaticOrder.of(*parts) if last is None else last.updated(*parts)
            with self._lock:
                self._static_orders[key] = value
                while len(self._static_orders) > _STATIC_ORDERS:
                    self._static_orders.pop(next(iter(self._static_orders)))
            return value

        return _derived(snapshot, key, compute, reads_access=True)

    def _dense_source(self, snapshot: ViewSnapshot, candidates: Candidates, query: F32,
                      probes: int, size: int, known: tuple[Rows, F64] | None,
                      before: Probe | None = None, bar: float = -math.inf
                      ) -> tuple[Rows, float, tuple[Rows, F64], Probe]:
        """The best (centred) cosines among the eligible rows of the probed lists.

        Every probed row gets an upper bound of its cosine from the index's int8 codes
        (:meth:`_semantic_bounds`), and only the rows whose bound can put them among the
        best ``size`` get their exact cosine (:meth:`~engine.retrieval.dense.Probe.best`):
        the same rows, and the same least cosine, as when every probed row was scored (the
        first and second versions of the candidate path).

        Returns:
            (those rows, the least of their cosines — what a row outside them is taken to
            score at most —, the rows whose exact cosine was computed, ascending, and those
            cosines, which the scoring of the union reuses, and the probe). ``known``'s
            cosines are reused, not recomputed, and so is ``before`` (an earlier round's
            probe): only the lists after its first ones are read.

        A widened round with a ``bar`` (the cosine its target asks of the dense term) reads
        its further lists :attr:`~RetrievalConfig.dense_probes` at a time, nearest first,
        and stops after a step holding no row whose bound is over ``bar``
        (:meth:`~engine.retrieval.dense.Probe.read_while`); ``probes`` is then only the
        most it reads. A row outside the lists read is then taken to have at most ``bar``:
        the least cosine returned is at least ``bar``, so the bound does not lean on how
        far below it the last candidate's cosine fell in the fewer lists read.
        """
        blend = self._blend(snapshot, candidates)
        previous = None if blend is None else blend.previous

        def semantic(rows: Rows, dots: F64, before: F64) -> F64:
            return self._semantic_bounds(snapshot, query, candidates, rows, dots, before)

        floor = -math.inf
        if before is not None and math.isfinite(bar):
            probe, stopped = before.read_while(probes, self.config.dense_probes, bar,
                                               candidates.eligible, previous, semantic)
            floor = bar if stopped else floor
        else:
            probe = (before if before is not None else Probe.start(
                self.dense_index(snapshot), query)).read(
                probes, candidates.eligible, previous, semantic)
        dense, least, cosines = probe.best(size, lambda rows: self._known_cosines(
            snapshot, query, candidates, rows, known))
        return dense, max(least, floor), cosines, probe

    def _known_cosines(self, snapshot: ViewSnapshot, query: F32, candidates: Candidates,
                       rows: Rows, known: tuple[Rows, F64] | None) -> F64:
        """:meth:`_cosine` of ``rows``, reusing ``known``'s (rows ascending, their cosines)."""
        if known is None or not len(known[0]):
            return self._cosine(snapshot, query, candidates, rows)
        found, at = found_at(known[0], rows)
        cosine = np.empty(len(rows), dtype=np.float64)
        cosine[found] = known[1][at[found]]
        if not found.all():  # a row's cosine has the same bits whichever rows it comes with
            cosine[~found] = self._cosine(snapshot, query, candidates, rows[~found])
        return cosine

    def _query_postings(self, snapshot: ViewSnapshot, candidates: Candidates,
                        query_terms: Sequence[str]) -> list[TermPostings]:
        """Each query term's postings among the candidates (rows ascending, BM25 weights),
        in query order, terms without postings left out (as ``_lexical`` sums them); a term
        held by :data:`~engine.retrieval.candidates.FREQUENT_SHARE` of the rows or more with
        each row's position in its postings (:meth:`_posting_positions`)."""
        if not candidates.count:
            return []
        found = []
        for word in dict.fromkeys(query_terms):
            rows, values = self._term_bm25(snapshot, candidates, word)
            if not len(rows):
                continue
            positions = self._posting_positions(snapshot, candidates, word, rows) \
                if len(rows) >= FREQUENT_SHARE * snapshot.n else None
            key = ("bm25", candidates.key, word, self.config.bm25_k1, self.config.bm25_b)
            found.append(TermPostings(rows, values, positions, key))
        return found

    @staticmethod
    def _posting_positions(snapshot: ViewSnapshot, candidates: Candidates, word: str,
                           rows: Rows) -> npt.NDArray[np.int32]:
        """By row, its position in a term's postings among the candidates (``rows``,
        ascending, as :meth:`_term_bm25` gives them), -1 where the row lacks the term.

        The candidate path looks a few thousand rows up in each query term (bm25_at): in a
        term of 75,000 postings at 100K, ~0.2 ms of binary searches, a gather instead. An
        append keeps every position (the appended rows' postings follow every earlier one,
        as :meth:`_term_bm25` extends them), so the array is extended by the appended rows,
        not rebuilt with every view state as the weights are.
        """
        n = snapshot.n

        def build() -> npt.NDArray[np.int32]:
            positions = np.full(n, -1, dtype=np.int32)
            positions[rows] = np.arange(len(rows), dtype=np.int32)
            return positions

        def extend(old: npt.NDArray[np.int32], start: int) -> npt.NDArray[np.int32]:
            first = int(np.searchsorted(rows, start))
            if len(old) != start or (first and old[rows[first - 1]] != first - 1):
                return build()  # not the postings they were extended from: start again
            added = np.full(n - start, -1, dtype=np.int32)
            added[rows[first:] - start] = np.arange(first, len(rows), dtype=np.int32)
            return append_rows(old, added)

        return _grown(snapshot, ("bm25 positions", candidates.key, word), build, extend)

    def _lexical_source(self, snapshot: ViewSnapshot, candidates: Candidates,
                        postings: list[TermPostings], size: int, limit: float
                        ) -> tuple[Rows, float, float] | None:
        """The ``size`` best BM25 rows among each term's ``size`` highest-impact postings.

        Args:
            limit: :attr:`~RetrievalConfig.widen_share` of the store's rows: the source gives
                up when the rows it has read, doubled by the next, deeper read, would pass it.

        Returns:
            (the rows, the best BM25 of any candidate — ``_lexical``'s divisor, exact —, the
            most BM25 a row left out can have), or None when it gave up: the query's terms
            are common and their weights flat (in the benchmark suite's store every term is
            in a third of the rows), so reading deeper proves nothing, and the request costs
            less scored on every row (docs/retrieval.md "When widening costs more than
            scoring every row").
        """
        if not postings:
            return np.zeros(0, dtype=np.intp), 0.0, 0.0
        n = snapshot.n

        def prefix(term: TermPostings, depth: int) -> tuple[Rows, float]:
            # per view state: a frequent term's argpartition reads every posting (~0.1 ms
            # for 75,000 at 100K), and a store's queries share their frequent terms
            compute = partial(impact_prefix, term.rows, term.weights, depth)
            if term.key is None:
                return compute()
            return _derived(snapshot, ("impact prefix", term.key, depth), compute)

        depths = [size] * len(postings)
        prefixes = [prefix(term, size) for term in postings]
        found = _distinct(np.concatenate([rows for rows, _ in prefixes]), n)
        bm25 = bm25_at(postings, found)
        while True:
            # a row outside every term's prefix has at most the sum of their last weights
            # (``unread``): read deeper, the term whose last weight is highest first, until
            # ``size`` rows found score at least that (MaxScore: a frequent term's weights are
            # low and flat, and reading it deeper would lower the sum least)
            unread = slack(sum(last for _, last in prefixes))
            if len(found) >= size and float(
                    np.partition(bm25, len(found) - size)[len(found) - size]) >= unread:
                break
            term = max(range(len(prefixes)), key=lambda t: prefixes[t][1])
            if prefixes[term][1] <= 0.0:
                break  # every posting is read
            if 2 * len(found) > limit:
                return None  # (the docstring)
            depths[term] *= 4
            prefixes[term] = prefix(postings[term], depths[term])
            added = prefixes[term][0]
            added = _distinct(added[~member(found, np.sort(added))], n) if len(added) \
                else added
            if len(added):
                merged = np.concatenate((found, added))
                order = np.argsort(merged, kind="stable")
                found = merged[order]
                bm25 = np.concatenate((bm25, bm25_at(postings, added)))[order]
        best = float(bm25.max()) if len(bm25) else 0.0
        if best < unread:  # a row outside the prefixes might be the best: sum them all
            best = self._bm25_max(snapshot, postings)
        if len(found) > size:
            top = np.argpartition(-bm25, size - 1)[:size]
            unread = max(unread, slack(float(bm25[top].min())))
            found = found[top]
        return found, best, unread

    @staticmethod
    def _bm25_max(snapshot: ViewSnapshot, postings: list[TermPostings]) -> float:
        """The best BM25 of every row holding a query term (as ``_lexical`` finds it)."""
        bm25 = np.zeros(snapshot.n, dtype=np.float64)
        for rows, values, _, _ in postings:
            bm25[rows] += values
        return float(bm25.max())

    def _dated_rows(self, snapshot: ViewSnapshot, spans: Sequence[DateSpan], tolerance: float,
                    k: int) -> Rows | None:
        """The rows created within ``tolerance`` of ``spans`` (a slice of the creation-time
        order per span), or None when there are more than ``_LISTED × k`` of them."""
        n = snapshot.n
        order = _grown(snapshot, "created order",
                       lambda: CreatedOrder.of(snapshot.created_at[:n]),
                       lambda old, start: old.extended(snapshot.created_at[:n], start))
        found = [order.within(span.start - tolerance, span.end + tolerance) for span in spans]
        if sum(len(rows) for rows in found) > _LISTED * k:
            return None
        return _distinct(np.concatenate(found), n)

    def dense_index(self, snapshot: ViewSnapshot) -> IvfIndex:
        """The view state's dense index (built on first use, extended on appends); its
        :attr:`~engine.retrieval.dense.IvfIndex.nbytes` is what the candidate path adds to
        the view's resident memory."""
        n = snapshot.n

        def build() -> IvfIndex:
            return IvfIndex.build(snapshot.vectors[:n], snapshot.has_vector[:n])

        def extend(old: IvfIndex, _: int) -> IvfIndex:
            return old.extended(snapshot.vectors[:n], snapshot.has_vector[:n])

        return _grown(snapshot, "dense index", build, extend)

    def _lexical(self, snapshot: ViewSnapshot, query_terms: Sequence[str],
                 candidates: Candidates) -> F64:
        """BM25 over the candidates, divided by the best candidate's (0..1).

        Each term's contributions (its postings among the candidates) are cached per view
        state and candidate set, so a query touches only its terms' postings.
        """
        n = snapshot.n
        if not candidates.count:
            return np.zeros(n, dtype=np.float64)
        found = [(rows, values) for rows, values in (
            self._term_bm25(snapshot, candidates, word) for word in dict.fromkeys(query_terms))
            if len(rows)]
        if not found:
            return np.zeros(n, dtype=np.float64)
        bm25 = np.zeros(n, dtype=np.float64)
        for rows, values in found:  # a term's rows are distinct: plain fancy-index adds
            bm25[rows] += values
        best = float(bm25.max())
        if best > 0:
            bm25 /= best
        return bm25

    def _term_bm25(self, snapshot: ViewSnapshot, candidates: Candidates, word: str
                   ) -> tuple[Rows, F64]:
        """One query term's BM25 contribution to the candidates that hold it (cached), rows
        ascending.

        The term lengths, their total over the candidates and each term's postings among them
        are extended on appends; the weights (which every append changes through the live count
        and the average length) are computed per view state.
        """
        k1, b = self.config.bm25_k1, self.config.bm25_b
        n, index, eligible = snapshot.n, self.index, candidates.eligible

        def statistics(start: int, old: tuple[F64, float] | None) -> tuple[F64, float]:
            lengths = index.lengths(n, start)
            total = float(lengths[eligible[start:]].sum())  # whole numbers: exact in any order
            if old is None:
                return lengths, total
            return append_rows(old[0], lengths), old[1] + total

        def postings(start: int, old: tuple[Rows, F64] | None) -> tuple[Rows, F64]:
            rows, tfs = index.term_postings(word, eligible, start)
            # ascending, for the candidate path's look-ups (bm25_at); appended rows follow
            # every earlier one
            ascending = np.argsort(rows, kind="stable")
            rows, tfs = rows[ascending], tfs[ascending]
            if old is None:
                return rows, tfs
            return append_rows(old[0], rows), append_rows(old[1], tfs)

        def weights() -> tuple[Rows, F64]:
            lengths, total = _grown(snapshot, ("bm25 lengths", candidates.key),
                                    lambda: statistics(0, None),
                                    lambda old, start: statistics(start, old))
            avgdl = total / candidates.count or 1.0
            rows, tfs = _grown(snapshot, ("bm25 postings", candidates.key, word),
                               lambda: postings(0, None),
                               lambda old, start: postings(start, old))
            return rows, bm25_weights(tfs, lengths[rows], live=candidates.count, avgdl=avgdl,
                                      k1=k1, b=b)

        return _derived(snapshot, ("bm25", candidates.key, word, k1, b), weights)

    def _neighbours(self, snapshot: ViewSnapshot
                    ) -> tuple[npt.NDArray[np.int32], Rows, npt.NDArray[np.int32]]:
        """The time-neighbour matrix, the rows with at least one neighbour, and their lines."""
        value = self._time_neighbours(snapshot)
        return value.matrix, value.rows, value.lines

    def _time_neighbours(self, snapshot: ViewSnapshot) -> _Neighbours:
        """The view state's time order and neighbours (``context_neighbours`` each side)."""
        k, window = self.config.context_neighbours, self.config.context_window_ms

        def build() -> _Neighbours:
            # Neighbours depend on who is alive in which agent and layer (the view's layout
            # changes with those), the row count and the creation times. Writes that keep the
            # layout and the earlier rows' creation times reuse the last time order: as it is
            # when no row was appended, extended by a merge when rows were.
            n = snapshot.n
            key = (snapshot.layout, k, window)
            with self._lock:
                cached = self._neighbour_cache
            if cached is not None and cached.key == key and cached.order.n <= n and \
                    cached.created == float(snapshot.created_at[:cached.order.n].sum()):
                if cached.order.n == n:
                    return cached.value
                order = cached.order.extended(snapshot)
            else:
                order = TimeOrder.of(snapshot)
            matrix = neighbour_matrix(snapshot, k, window, order)
            return remember(_Neighbours.of(order, matrix, np.any(matrix >= 0, axis=1)))

        def extend(old: _Neighbours, start: int) -> _Neighbours:
            # only the appended rows' lines and those of the k rows each side of them change
            order, positions = old.order.merged(snapshot)
            last = len(order.rows) - 1
            spans = [np.arange(max(p - k, 0), min(p + k, last) + 1) for p in positions.tolist()]
            near = np.unique(np.concatenate(spans)) if len(spans) > 1 else \
                spans[0] if spans else positions
            matrix = np.concatenate((old.matrix, np.full((snapshot.n - start, 2 * k), -1,
                                                         dtype=np.int32)))
            has = np.concatenate((old.has, np.zeros(snapshot.n - start, dtype=bool)))
            lines = neighbour_lines(order, near, k, window)
            matrix[order.rows[near]] = lines
            has[order.rows[near]] = (lines >= 0).any(axis=1)
            return remember(_Neighbours.of(order, matrix, has))

        def remember(value: _Neighbours) -> _Neighbours:
            with self._lock:
                self._neighbour_cache = _NeighbourCache(
                    (snapshot.layout, k, window), value.order,
                    float(snapshot.created_at[:snapshot.n].sum()), value)
            return value

        return _grown(snapshot, ("neighbours", k, window), build, extend)

    # -- 3-4. rank and pack ----------------------------------------------------------------

    def _pack_ranked(self, scores: F64, ids: Sequence[str], rows: Rows,
                     cost: Callable[[int], int], budget: int, max_records: int,
                     smallest: int) -> tuple[list[int], int, bool]:
        """Rank (score desc, id asc) and pack, ranking only a top slice when there are many.

        Returns:
            (packed rows, tokens used, whether packing stopped before ``rows`` ran out).
        """
        count = len(rows)
        if count == 0:
            return [], 0, False
        if count > self.config.partition_min:
            values = scores if count == len(scores) else scores[rows]
            size = _FIRST_SLICE
            while size < count:
                # every row tied with the slice's last score joins it, so ties sort by id
                threshold = np.partition(values, count - size)[count - size]
                top = rows[values >= threshold]
                order = lexsort_rank(scores, ids, top)
                packed, used, stopped = _pack(order.tolist(), cost, budget, max_records,
                                              smallest)
                if stopped or len(top) >= count:
                    return packed, used, stopped
                size *= 4
        order = lexsort_rank(scores, ids, rows)
        return _pack(order.tolist(), cost, budget, max_records, smallest)


@dataclass(frozen=True, slots=True)
class _Neighbours:
    """A view state's time neighbours (see ``Retriever._neighbours``).

    Attributes:
        order: The time order they were read from.
        matrix: :func:`~engine.retrieval.scoring.neighbour_matrix`.
        has: By row: it has at least one neighbour.
        rows: The rows that have, ascending.
        lines: Their lines of ``matrix``.
    """

    order: TimeOrder
    matrix: npt.NDArray[np.int32]
    has: B
    rows: Rows
    lines: npt.NDArray[np.int32]

    @classmethod
    def of(cls, order: TimeOrder, matrix: npt.NDArray[np.int32], has: npt.ArrayLike
           ) -> _Neighbours:
        """The neighbours in ``matrix`` (``has`` its rows with any)."""
        mask: B = np.asarray(has, dtype=np.bool_)
        rows = np.flatnonzero(mask)
        return cls(order, matrix, mask, rows, np.take(matrix, rows, axis=0))  # 10x matrix[rows]


@dataclass(frozen=True, slots=True)
class _NeighbourCache:
    """The last time neighbours, for the next view state of the same layout (see
    ``Retriever._neighbours``)."""

    key: Hashable
    order: TimeOrder
    created: float
    value: _Neighbours


def _grown(snapshot: ViewSnapshot, key: Hashable, compute: Callable[[], T],
           extend: Callable[[T, int], T], *, reads_access: bool = False) -> T:
    """:func:`_derived`, extended from an earlier view state's value when only rows were
    appended since (:meth:`ViewSnapshot.grown`): ``extend(value, start)`` must give what
    ``compute()`` would, the rows before ``start`` being unchanged."""
    return snapshot.grown(("retrieval", key), lambda _: _read_only(compute()),
                          lambda _, old, start: _read_only(extend(old, start)),
                          reads_access=reads_access)


def _appended(snapshot: ViewSnapshot, key: Hashable,
              rows_from: Callable[[int], npt.NDArray[Any]], *,
              reads_access: bool = False) -> npt.NDArray[Any]:
    """A per-row array whose row values depend on that row alone: ``rows_from(start)`` gives
    rows ``start..n``, and appended rows are computed and added (:func:`_grown`,
    :func:`~engine.store.view.append_rows`)."""
    return _grown(snapshot, key, lambda: rows_from(0),
                  lambda old, start: append_rows(old, rows_from(start)),
                  reads_access=reads_access)


def _derived(snapshot: ViewSnapshot, key: Hashable, compute: Callable[[], T], *,
             reads_access: bool = False) -> T:
    """``compute()`` once per snapshot (the view shares one snapshot per version with every
    reader), its arrays made read-only: bundles' diagnostics share them.

    Unless ``reads_access`` (``compute`` reads ``access_count`` / ``last_accessed``), the value
    also serves the later snapshots that differ only by access counting.
    """
    return snapshot.derived(("retrieval", key), lambda _: _read_only(compute()),
                            reads_access=reads_access)


def _read_only(value: T) -> T:
    """Mark ``value``'s numpy arrays read-only: itself, a tuple's members or a dataclass's
    fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: tuple[Any, ...] = tuple(getattr(value, f.name) for f in dataclasses.fields(value))
    else:
        items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if isinstance(item, np.ndarray):
            item.flags.writeable = False
    return value


def _constant(value: npt.ArrayLike) -> Callable[[], npt.ArrayLike]:
    return lambda: value


def _scaled(base: F64, scale: float) -> Callable[[], npt.ArrayLike]:
    return lambda: base * scale


def _dots(vectors: F32, rows: npt.NDArray[np.integer[Any]], query: F32) -> F32:
    """``vectors[rows]``' dot products with ``query``, summed row by row (``einsum``: the same
    bits as over every row), the rows gathered a block at a time: a block stays in cache from
    its gather to its products (5,000 scattered rows of 384 at 100K: 1.0 ms CPU gathered at
    once, 0.65 ms in blocks of 256 — a whole gather is written to memory and read back)."""
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), _GATHER_BLOCK):
        block = rows[start:start + _GATHER_BLOCK]
        np.einsum("ij,j->i", vectors[block], query, out=out[start:start + len(block)])
    return out


def _spread_at(rows: Rows, values: F64, n: int) -> F64:
    """A length-``n`` array of ``values`` at ``rows``, 0 elsewhere."""
    out = np.zeros(n, dtype=np.float64)
    out[rows] = values
    return out


def _indicator(rows: Rows, n: int) -> F64:
    out = np.zeros(n, dtype=np.float64)
    out[rows] = 1.0
    return out


def _least(values: F64) -> float:
    """The smallest of ``values`` (0 when there is none: a source with no rows adds 0)."""
    return float(values.min()) if len(values) else 0.0


def _proven(scores: F64, packed: Sequence[int], bound: float, count: int) -> bool:
    """Whether the first ``count`` packed rows all score above ``bound`` (no row outside the
    candidates can outrank them)."""
    first = packed[:count]
    return not first or float(scores[first[-1]]) > bound


def _below(score: float) -> float:
    """A value just under ``score``, past float rounding: the bound a round aims at must be
    strictly below the score it is to prove (:func:`_proven`)."""
    return score - (abs(score) + 1.0) * _TARGET_MARGIN


def _dense_factor(picked: Picked, needed: float, size: int, factor: int) -> int:
    """The dense source's factor that ``picked``'s probe implies would bring the bound under
    a target (at most :data:`_JUMP` times ``factor``, ``picked``'s own, and twice
    :data:`WIDEN_LIMIT`; ``factor`` when nothing is implied).

    The probe's cosine bounds (int8 codes, a little over the exact cosines) rank the rows
    roughly as the exact cosines do: the rows whose bound is over ``needed``, the cosine the
    target needs (:meth:`BoundParts.semantic_for`), scaled by how many bounds are over the last
    dense candidate's cosine per dense candidate now, estimate how many dense candidates it
    takes (:data:`_HEADROOM` times that). An estimate only chooses the width: the bound of
    the round it gives is computed, and proves or not, as always.
    """
    parts = picked.parts
    bounds = picked.probed[2]
    if not math.isfinite(needed) or not len(bounds):
        return factor  # the other terms alone are over the target: the dense one cannot help
    over_now = picked.probed.count_over(parts.semantic)
    wanted = picked.probed.count_over(needed) * size * factor / max(over_now, 1)
    implied = math.ceil(wanted * _HEADROOM / size)
    return max(factor, min(implied, _JUMP * factor, 2 * WIDEN_LIMIT))


def _top_of(rows: Rows, k: int, value: Callable[[Rows], F64]) -> TopStatic:
    """The ``k`` of ``rows`` with the best ``value`` (a listed date or speaker source)."""
    values = value(rows)
    if len(rows) <= k:
        return TopStatic(rows, values, True, len(rows))
    top = np.argpartition(-values, k - 1)[:k]
    return TopStatic(rows[top], values[top], False, len(rows))


def _with_cosines(known: tuple[Rows, F64], rows: Rows, cosine: Callable[[Rows], F64]
                  ) -> tuple[Rows, F64]:
    """``known`` (rows ascending, their cosines) with the cosines of ``rows`` it lacks."""
    missing = rows[~member(known[0], rows)]
    if not len(missing):
        return known
    missing = np.sort(missing)
    merged = np.concatenate((known[0], missing))
    order = np.argsort(merged, kind="stable")
    return merged[order], np.concatenate((known[1], cosine(missing)))[order]


def _neighbours_of(matrix: npt.NDArray[np.int32], rows: Rows, n: int) -> Rows:
    """The distinct time neighbours of ``rows`` (lines of the neighbour matrix, -1 = none),
    ascending."""
    near = matrix[rows].ravel()
    return _distinct(near[near >= 0], n)


def _distinct(rows: npt.NDArray[np.integer[Any]], n: int) -> Rows:
    """``rows`` (of ``n``) without repeats, ascending: sorted when they are few, else through
    a mask (cheaper than sorting many)."""
    if len(rows) * 32 < n:
        ordered = np.sort(rows).astype(np.intp, copy=False)
        if len(ordered) < 2:
            return ordered
        return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    return np.flatnonzero(_scored_mask(rows, n))


def _scored_mask(rows: npt.NDArray[np.integer[Any]], n: int) -> B:
    mask = np.zeros(n, dtype=np.bool_)
    mask[rows] = True
    return mask


def _drop_codes(alive: B, candidates: Candidates, packed: Rows,
                state: npt.NDArray[np.int8], picked: Picked | None = None
                ) -> npt.NDArray[np.int8]:
    """By row: packed, why not (filter, paused/archived, TTL, privacy, budget, unscored), or
    not a candidate. A paused or archived record of the request's scope says so before TTL and
    privacy: the user's choice is the reason it is withheld, whatever else holds."""
    drop = np.full(len(alive), NOT_CANDIDATE, dtype=np.int8)
    drop[alive] = _CODE[DropReason.BUDGET]
    if picked is not None:  # eligible, but no candidate source proposed it
        drop[candidates.eligible & ~_scored_mask(picked.rows, len(alive))] = \
            _CODE[DropReason.UNSCORED]
    passes = alive & candidates.filter_ok
    drop[passes & candidates.ttl_ok & ~candidates.privacy_ok] = _CODE[DropReason.PRIVACY]
    drop[passes & ~candidates.ttl_ok] = _CODE[DropReason.TTL]
    for code in np.unique(state[passes & ~candidates.state_ok]).tolist():
        drop[passes & (state == code)] = _CODE[DropReason(STATES[code].value)]
    drop[alive & ~candidates.filter_ok] = _CODE[DropReason.FILTER]
    drop[packed] = PACKED
    return drop


def _token_costs(tokens: npt.NDArray[np.int32], compressed: dict[int, int]
                 ) -> npt.NDArray[np.int64]:
    costs = tokens.astype(np.int64)
    for row, count in compressed.items():
        costs[row] = count
    return costs
