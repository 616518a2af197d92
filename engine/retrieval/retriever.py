"""The retrieval orchestrator (seed 002 §9): filter, score, sort, pack, compress.

:class:`Retriever` works on a :class:`~engine.store.view.ViewSnapshot` and never asks Chroma to
filter: the candidate set is every live row, the filters (agent, live TTL, the purpose's layer
policy, privacy) are boolean masks, and the components are computed for all rows with numpy so
the diagnostics can show why a filtered record would or would not have ranked. Only the packed
records are materialized (through the ``fetch`` callable the engine passes).

Flow (seed 002 §9):

1. Candidates: live rows; masks for agent/layer (``filter``), TTL (``ttl``), ``privacy``.
2. Components (:mod:`engine.retrieval.scoring`), weights (``MemoryConfig.retrieval``).
3. Sort eligible candidates by score desc, then id asc. Above ``partition_min`` candidates a
   top slice is selected with ``argpartition`` first and widened if packing exhausts it.
4. Pack greedily to the budget: a record that does not fit is skipped and packing continues
   (seed 003 §2 knapsack-lite) until the remaining budget is below the smallest candidate or
   ``skip_limit`` records in a row did not fit.
5. ``throttle``: budget × compression ratio and content compressed (first sentence + tags);
   ``exhausted``: only the top ``exhausted_records`` record(s), compressed.
6. The engine emits ``memory:retrieval`` and counts accesses (not in inspection mode).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.config import MemoryConfig, RetrievalConfig, ScoringWeights
from engine.errors import TokenBudgetUndefined
from engine.records import MemoryRecord, Privacy
from engine.retrieval.compression import compress
from engine.retrieval.lexical import TextIndex, terms
from engine.retrieval.scoring import (
    COL,
    access_frequency,
    combine,
    context_relevance,
    importance_component,
    layer_component,
    lexsort_rank,
    neighbour_matrix,
    recency,
    relevance_of,
)
from engine.retrieval.types import (
    COMPONENTS,
    DropReason,
    PressureState,
    RetrievalDiagnostics,
    RetrievalRequest,
    RetrievedBundle,
    SemanticMode,
)
from engine.store.view import LAYERS, PRIVACIES, ViewSnapshot
from engine.text import estimate_tokens

__all__ = ["Ranking", "Retriever", "rescore"]

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
FetchFn = Callable[[Sequence[str]], list[MemoryRecord]]

_CODE = {reason: np.int8(i) for i, reason in enumerate(DropReason)}
NOT_CANDIDATE = np.int8(-2)
PACKED = np.int8(-1)
SKIP_LIMIT = 256
_FIRST_SLICE = 256


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
    """Greedy packing of ``order`` (rows).

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
    (which depends on the semantic/lexical ratio) is recomputed from the stored neighbours, and
    packing is re-run with the bundle's budget and per-candidate token costs.
    """
    components = diagnostics.components.copy(order="K")
    if len(components):
        relevance = relevance_of(components, weights) * diagnostics.eligible
        components[:, COL.context] = context_relevance(relevance, diagnostics.neighbours)
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


class Retriever:
    """Scores and packs retrieval requests over view snapshots; one per engine.

    Holds the :class:`~engine.retrieval.lexical.TextIndex` kept in sync with the view and a
    cache of the time-neighbour matrix. Thread-safe.

    Args:
        config: Weights and tables; None = defaults.
    """

    def __init__(self, config: RetrievalConfig | None = None) -> None:
        self.config = config or RetrievalConfig()
        self.index = TextIndex()
        self._lock = threading.RLock()
        self._neighbours: tuple[tuple[float, ...], npt.NDArray[np.int32]] | None = None

    def _neighbour_matrix(self, snapshot: ViewSnapshot) -> npt.NDArray[np.int32]:
        n = snapshot.n
        config = self.config
        key = (float(n), float(snapshot.alive.sum()), float(snapshot.created_at[:n].sum()),
               float(snapshot.agent[:n].sum()), float(config.context_neighbours),
               config.context_window_ms)
        with self._lock:
            cached = self._neighbours
            if cached is not None and cached[0] == key:
                return cached[1]
            matrix = neighbour_matrix(snapshot, config.context_neighbours,
                                      config.context_window_ms)
            self._neighbours = (key, matrix)
            return matrix

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
        alive = snapshot.alive[:n]
        rows = np.flatnonzero(alive)

        # 1. candidate masks (seed 002 §9 step 1)
        if request.agent_id is not None:
            agent_ok: B = snapshot.agent[:n] == snapshot.agent_code(request.agent_id)
        else:
            agent_ok = np.ones(n, dtype=bool)
        allowed_layers = request.layers if request.layers is not None \
            else config.layer_policy[request.purpose]
        layer_lookup = np.asarray([layer in allowed_layers for layer in LAYERS])
        filter_ok = agent_ok & layer_lookup[snapshot.layer[:n]]
        ttl_ok: B = snapshot.expires_at[:n] >= now_ms
        allowed_privacy = request.privacy if request.privacy is not None else frozenset(Privacy)
        privacy_ok = np.asarray([p in allowed_privacy for p in PRIVACIES])[snapshot.privacy[:n]]
        eligible = alive & filter_ok & ttl_ok & privacy_ok
        drop = np.full(n, NOT_CANDIDATE, dtype=np.int8)
        drop[alive] = _CODE[DropReason.BUDGET]
        drop[alive & filter_ok & ttl_ok & ~privacy_ok] = _CODE[DropReason.PRIVACY]
        drop[alive & filter_ok & ~ttl_ok] = _CODE[DropReason.TTL]
        drop[alive & ~filter_ok] = _CODE[DropReason.FILTER]

        # 2. components (seed 002 §7, seed 004)
        half_life_days = memory.importance_decay_half_life_days
        boost = memory.importance_boost
        # (n, 7) in column-major order: each component is one contiguous array, so filling a
        # column and the weighted sum are plain vector operations (no strided writes, no BLAS)
        components = np.zeros((len(COMPONENTS), n), dtype=np.float64).T
        flagged = self.index.flagged(n)
        components[:, COL.importance] = importance_component(snapshot, now_ms, half_life_days,
                                                             flagged, boost)
        components[:, COL.recency] = recency(snapshot.recency_anchor[:n], now_ms,
                                             float(memory.decay_half_life_ms))
        components[:, COL.layer] = layer_component(snapshot.layer[:n],
                                                   config.layer_weights[request.purpose])
        components[:, COL.access] = access_frequency(snapshot.access_count[:n], config.access_cap)
        mode = self._relevance(snapshot, request, query_vector, eligible, components)
        weights = config.weights_for(request.purpose, request.strategy, request.pressure_state)
        neighbours = self._neighbour_matrix(snapshot) if config.context_neighbours and \
            mode is not SemanticMode.NONE else np.zeros((n, 0), dtype=np.int32)
        if neighbours.shape[1]:
            components[:, COL.context] = context_relevance(
                relevance_of(components, weights) * eligible, neighbours)
        scores = combine(components, weights)

        # 3-5. sort, compress, pack
        pressure = request.pressure_state
        ratio = memory.throttle_compression_ratio
        compressing = pressure in (PressureState.THROTTLE, PressureState.EXHAUSTED)
        budget = request.max_tokens
        if pressure is PressureState.THROTTLE:
            budget = max(1, math.floor(budget * ratio))
        max_records = config.exhausted_records if pressure is PressureState.EXHAUSTED else 0
        tokens = snapshot.token_estimate[:n].astype(np.int64)
        compressed: dict[int, str] = {}

        def cost(row: int) -> int:
            if not compressing:
                return int(tokens[row])
            text = compress(snapshot.contents[row], snapshot.tags[row], ratio)
            compressed[row] = text
            tokens[row] = estimate_tokens(text)
            return int(tokens[row])

        eligible_rows = np.flatnonzero(eligible)
        smallest = 1 if compressing else (int(tokens[eligible_rows].min())
                                          if len(eligible_rows) else 0)
        packed = self._pack_ranked(scores, snapshot.ids, eligible_rows, cost, budget,
                                   max_records, smallest)
        packed_rows = np.asarray(packed, dtype=np.intp)
        drop[packed_rows] = PACKED
        used = int(tokens[packed_rows].sum()) if len(packed) else 0
        truncated = bool((drop == _CODE[DropReason.BUDGET]).any())
        elapsed_ms = (time.perf_counter() - started) * 1000.0

        records = fetch([snapshot.ids[r] for r in packed]) if packed else []
        if compressing:
            records = [rec.replace(content=compressed[r]) if compressed[r] != rec.content
                       else rec for rec, r in zip(records, packed, strict=True)]
        strategy = request.strategy.value
        if pressure is not PressureState.NORMAL:
            strategy = f"{strategy}:{pressure.value}"
        diagnostics = RetrievalDiagnostics(
            candidate_count=len(rows),
            filtered_count=int(len(rows) - eligible.sum()),
            scoring_breakdown=tuple(zip(COMPONENTS, weights.as_tuple(), strict=True)),
            time_ms=elapsed_ms,
            compression_applied=compressing and any(
                compressed[r] != snapshot.contents[r] for r in packed),
            semantic_mode=mode, embed_ms=embed_ms, budget=budget, max_records=max_records,
            ids=snapshot.ids, rows=rows, scores=scores, components=components,
            drop_codes=drop, tokens=tokens, eligible=eligible, neighbours=neighbours,
        )
        return RetrievedBundle(records=tuple(records), total_tokens=used, truncated=truncated,
                               strategy_applied=strategy, diagnostics=diagnostics,
                               request=request)

    def _relevance(self, snapshot: ViewSnapshot, request: RetrievalRequest,
                   query_vector: npt.NDArray[np.float32] | None, eligible: B,
                   components: F64) -> SemanticMode:
        """Fill the semantic and lexical columns; return how semantic was computed."""
        n = snapshot.n
        query = (request.query or "").strip()
        if not query:
            return SemanticMode.NONE
        query_terms = terms(query)
        has_vector = snapshot.has_vector[:n]
        if query_vector is not None:
            cosine = snapshot.vectors[:n] @ query_vector.astype(np.float32)
            semantic = np.maximum(cosine.astype(np.float64), 0.0)
            missing = eligible & ~has_vector
            if missing.any():
                jaccard = self.index.jaccard(query_terms, n)
                semantic = np.where(has_vector, semantic, jaccard)
                mode = SemanticMode.MIXED
            else:
                mode = SemanticMode.COSINE
        else:
            semantic = self.index.jaccard(query_terms, n)
            mode = SemanticMode.JACCARD
        components[:, COL.semantic] = semantic
        components[:, COL.speaker] = self.index.speaker_match(query_terms, n)
        bm25 = self.index.bm25(query_terms, eligible, k1=self.config.bm25_k1,
                               b=self.config.bm25_b)
        best = float(bm25.max()) if n else 0.0
        if best > 0:
            components[:, COL.lexical] = bm25 / best
        return mode

    def _pack_ranked(self, scores: F64, ids: Sequence[str], eligible_rows: npt.NDArray[np.intp],
                     cost: Callable[[int], int], budget: int, max_records: int,
                     smallest: int) -> list[int]:
        """Rank (score desc, id asc) and pack, ranking only a top slice when there are many."""
        count = len(eligible_rows)
        if count == 0:
            return []
        if count <= self.config.partition_min:
            order = lexsort_rank(scores, ids, eligible_rows)
            return _pack(order.tolist(), cost, budget, max_records, smallest)[0]
        size = _FIRST_SLICE
        eligible_scores = scores[eligible_rows]
        while True:
            if size >= count:
                order = lexsort_rank(scores, ids, eligible_rows)
                return _pack(order.tolist(), cost, budget, max_records, smallest)[0]
            kth = np.argpartition(-eligible_scores, size - 1)[size - 1]
            threshold = eligible_scores[kth]
            # every row tied with the slice's last score joins it, so ties sort by id
            top = eligible_rows[eligible_scores >= threshold]
            order = lexsort_rank(scores, ids, top)
            packed, _, stopped = _pack(order.tolist(), cost, budget, max_records, smallest)
            if stopped or len(top) >= count:
                return packed
            size *= 4
