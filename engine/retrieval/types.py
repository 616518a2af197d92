"""Seed 002 retrieval types: :class:`RetrievalRequest`, :class:`RetrievedBundle`, diagnostics.

The bundle carries, besides seed 002's fields, the score of *every* candidate (packed or not),
each score component, and why a candidate was dropped (``budget``, ``filter``, ``ttl``,
``privacy``, ``paused``, ``archived``). Those per-candidate diagnostics are kept as numpy arrays
and turned into dicts only when asked for (:attr:`RetrievalDiagnostics.candidates`,
:meth:`RetrievedBundle.to_json`), so a retrieval over 100K candidates builds no per-candidate
Python objects on its hot path.

:class:`Purpose`, :class:`Strategy`, :class:`PressureState` and :data:`COMPONENTS` are defined in
:mod:`engine.config` (the weight tables are keyed by them) and re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.config import COMPONENTS, PressureState, Purpose, Strategy
from engine.errors import ValidationError
from engine.records import Layer, MemoryRecord, Privacy
from engine.retrieval.scoring import lexsort_rank

__all__ = [
    "COMPONENTS",
    "CandidateDiagnostic",
    "DropReason",
    "PressureState",
    "Purpose",
    "RetrievalDiagnostics",
    "RetrievalRequest",
    "RetrievedBundle",
    "SemanticMode",
    "Strategy",
]

F64 = npt.NDArray[np.float64]


class DropReason(StrEnum):
    """Why a candidate is not in the bundle."""

    BUDGET = "budget"  # scored, but did not fit the token budget
    FILTER = "filter"  # another agent, or a layer the purpose's policy excludes
    TTL = "ttl"  # expired (seed 002 §9: live TTL only)
    PRIVACY = "privacy"  # a privacy partition the request excludes
    PAUSED = "paused"  # kept by the user but paused: never retrieved until resumed
    ARCHIVED = "archived"  # archived: kept, hidden by default, never retrieved until resumed
    # passed the filters, but on the candidate path no candidate source proposed it: its
    # exact score was not computed (docs/retrieval.md "How candidates are found")
    UNSCORED = "unscored"


class SemanticMode(StrEnum):
    """How the semantic component was computed (diagnostics say so, seed 004 fallback)."""

    COSINE = "cosine"  # query embedding · record embedding
    JACCARD = "jaccard"  # model unavailable: token Jaccard of query and content
    MIXED = "mixed"  # cosine where a record has a vector, Jaccard for records pending one
    NONE = "none"  # no query text: relevance components are 0


# Code order of DropReason in the per-candidate array; -1 = packed.
_DROP_CODES: tuple[DropReason, ...] = tuple(DropReason)


def _check_enum(kind: type[StrEnum], value: object, name: str) -> Any:
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        for member in kind:
            if member.value == value.strip().lower():
                return member
    choices = ", ".join(m.value for m in kind)
    raise ValidationError(name, value, f"must be one of {choices}")


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """What to retrieve (seed 002 ``RetrievalRequest``).

    Attributes:
        max_tokens: Token budget; None raises ``MEMORY_TOKEN_BUDGET_UNDEFINED`` at retrieval.
        query: Optional query text; without it relevance components are 0.
        agent_id: Only this agent's records (None: all agents).
        purpose: Picks the component weights and the layer policy.
        strategy: ``balanced`` or a component to emphasise.
        pressure_state: Rate-governor pressure (seed 002 §9 step 5).
        model: The LLM the context is for (informational; recorded in the event).
        layers: Explicit layer filter (None: the purpose's layer policy).
        privacy: Partitions allowed (None: both).
    """

    max_tokens: int | None
    query: str | None = None
    agent_id: str | None = None
    purpose: Purpose = Purpose.REASONING
    strategy: Strategy = Strategy.BALANCED
    pressure_state: PressureState = PressureState.NORMAL
    model: str | None = None
    layers: frozenset[Layer] | None = None
    privacy: frozenset[Privacy] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "purpose", _check_enum(Purpose, self.purpose, "purpose"))
        object.__setattr__(self, "strategy", _check_enum(Strategy, self.strategy, "strategy"))
        object.__setattr__(self, "pressure_state",
                           _check_enum(PressureState, self.pressure_state, "pressure_state"))
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise ValidationError("max_tokens", self.max_tokens, "must be an integer >= 1")
        if self.query is not None and not isinstance(self.query, str):
            raise ValidationError("query", self.query, "must be text or None")
        if self.layers is not None:
            object.__setattr__(self, "layers", frozenset(
                _check_enum(Layer, x, "layers") for x in self.layers))
        if self.privacy is not None:
            object.__setattr__(self, "privacy", frozenset(
                Privacy(x) if not isinstance(x, Privacy) else x for x in self.privacy))

    def to_json(self) -> dict[str, Any]:
        """Wire form (snake_case)."""
        return {
            "max_tokens": self.max_tokens, "query": self.query, "agent_id": self.agent_id,
            "purpose": self.purpose.value, "strategy": self.strategy.value,
            "pressure_state": self.pressure_state.value, "model": self.model,
            "layers": sorted(x.value for x in self.layers) if self.layers is not None else None,
            "privacy": sorted(x.value for x in self.privacy) if self.privacy is not None
            else None,
        }


@dataclass(frozen=True, slots=True)
class CandidateDiagnostic:
    """One candidate's line in the diagnostics (built lazily from the arrays)."""

    id: str
    score: float
    components: Mapping[str, float]
    packed: bool
    drop_reason: DropReason | None
    tokens: int

    def to_json(self) -> dict[str, Any]:
        """Wire form, as printed by ``search --json``."""
        return {"id": self.id, "score": round(self.score, 6),
                "components": {k: round(v, 6) for k, v in self.components.items()},
                "packed": self.packed,
                "drop_reason": self.drop_reason.value if self.drop_reason else None,
                "tokens": self.tokens}


def _no_components() -> F64:
    return np.zeros((0, len(COMPONENTS)))


def _no_drop_codes() -> npt.NDArray[np.int8]:
    return np.zeros(0, np.int8)


def _no_tokens() -> npt.NDArray[np.int64]:
    return np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class RetrievalDiagnostics:
    """Seed 002 ``RetrievalDiagnostics`` plus per-candidate arrays.

    The arrays are indexed by *view row* (the snapshot the retrieval ran on); ``rows`` lists
    the rows that were candidates (the live records). Turn them into per-candidate lines with
    :attr:`candidates` (rank order) or :meth:`candidate`. The component matrix, the drop codes
    and the token costs are built the first time they are read (from the ``build_*``
    callables the retriever passes): a retrieval nobody inspects never materializes them.

    Attributes:
        candidate_count: Live records considered (seed 002 ``candidateCount``).
        filtered_count: Of those, dropped by agent/layer filter, state (paused, archived), TTL or
            privacy.
        scoring_breakdown: ``(component, weight)`` pairs actually used.
        time_ms: Scoring + packing time (excluding query embedding and record fetch).
        compression_applied: Content was compressed (``throttle`` / ``exhausted``).
        semantic_mode: How the semantic component was computed.
        embed_ms: Time spent embedding the query (0 when none).
        budget: The effective token budget after pressure.
        max_records: Most records packing may take (``exhausted`` pressure), or 0 for no limit.
        ids: Ids by row.
        rows: Candidate rows (live records), ascending.
        scores: Final score by row (filtered candidates are scored too).
        eligible: By row: passed the filters.
        neighbours: ``(n, 2k)`` time-neighbour rows (-1: none) for the ``context`` component.
        components: ``(n, len(COMPONENTS))`` component values by row, weights not applied.
        drop_codes: By row: -1 packed, else an index into :class:`DropReason`.
        tokens: Tokens each row costs when packed (after compression, if any).
        candidate_sources: On the candidate path, how many eligible rows each source proposed
            (``dense``, ``lexical``, ``static``, ``date``, ``speaker``, ``context``; a row
            may come from several); empty when every eligible row was scored (exhaustive).
        scored_count: Eligible rows whose exact score was ranked (all of them when
            exhaustive, the union of the sources on the candidate path).
        candidate_bound: On the candidate path, the highest score a row outside the
            candidates could have (records packed above it are in the exhaustive order);
            None when exhaustive.
        semantic_blend: The share of its predecessor's vector a record's vector was blended
            with for the semantic component (``RetrievalConfig.semantic_blend``; 0: none).
        blended: By row, the row whose vector was blended into its own (-1: none); empty
            when nothing was blended.
    """

    candidate_count: int
    filtered_count: int
    scoring_breakdown: tuple[tuple[str, float], ...]
    time_ms: float
    compression_applied: bool
    semantic_mode: SemanticMode
    embed_ms: float
    budget: int
    max_records: int = 0
    ids: Sequence[str] = ()
    rows: npt.NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, np.intp))
    scores: F64 = field(default_factory=lambda: np.zeros(0))
    eligible: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    neighbours: npt.NDArray[np.int32] = field(
        default_factory=lambda: np.zeros((0, 0), np.int32))
    build_components: Callable[[], F64] = _no_components
    build_drop_codes: Callable[[], npt.NDArray[np.int8]] = _no_drop_codes
    build_tokens: Callable[[], npt.NDArray[np.int64]] = _no_tokens
    candidate_sources: Mapping[str, int] = field(default_factory=dict)
    scored_count: int = 0
    candidate_bound: float | None = None
    semantic_blend: float = 0.0
    blended: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    _built: dict[str, Any] = field(default_factory=dict, repr=False)

    def _once(self, name: str, build: Callable[[], Any]) -> Any:
        value = self._built.get(name)
        if value is None:
            value = self._built.setdefault(name, build())
        return value

    @property
    def components(self) -> F64:
        """``(n, len(COMPONENTS))`` component values by row (column-major), weights not applied."""
        result: F64 = self._once("components", self.build_components)
        return result

    @property
    def drop_codes(self) -> npt.NDArray[np.int8]:
        """By row: -1 packed, -2 not a candidate, else an index into :class:`DropReason`."""
        result: npt.NDArray[np.int8] = self._once("drop_codes", self.build_drop_codes)
        return result

    @property
    def tokens(self) -> npt.NDArray[np.int64]:
        """Tokens each row costs when packed (after compression, if any)."""
        result: npt.NDArray[np.int64] = self._once("tokens", self.build_tokens)
        return result

    @property
    def weights(self) -> dict[str, float]:
        """The weights used, by component."""
        return dict(self.scoring_breakdown)

    @property
    def order(self) -> npt.NDArray[np.intp]:
        """Candidate rows in rank order: eligible first, score desc, then id asc."""
        rows = self.rows
        if not len(rows):
            return rows
        passed = self.eligible[rows]
        return np.concatenate([lexsort_rank(self.scores, self.ids, rows[passed]),
                               lexsort_rank(self.scores, self.ids, rows[~passed])])

    def candidate(self, row: int) -> CandidateDiagnostic:
        """The diagnostic line of the candidate at view row ``row``."""
        code = int(self.drop_codes[row])
        return CandidateDiagnostic(
            id=self.ids[row], score=float(self.scores[row]),
            components={name: float(self.components[row, j])
                        for j, name in enumerate(COMPONENTS)},
            packed=code < 0, drop_reason=None if code < 0 else _DROP_CODES[code],
            tokens=int(self.tokens[row]))

    def explain(self, row: int, *, parts: int = 3) -> str:
        """One line on why the candidate at view row ``row`` scored as it did.

        Its score, then the ``parts`` components that added most to it (weight × value, the
        component's own value in brackets; the semantic one says how it was computed), then
        why it was left out when it was. For an agent or a person who asks "why this memory?"
        without reading the whole diagnostics (the MCP server's ``search_memories``).

        Example: ``score 0.412: semantic +0.294 (cosine 0.600), lexical +0.101 (0.481)``.
        """
        weights = self.weights
        added = sorted(((weights.get(name, 0.0) * float(self.components[row, j]), name,
                         float(self.components[row, j])) for j, name in enumerate(COMPONENTS)),
                       key=lambda part: (-part[0], part[1]))
        shown = []
        for contribution, name, value in added[:parts]:
            if contribution <= 0.0:
                break
            how = f"{self.semantic_mode.value} " if name == "semantic" else ""
            if how and self.is_blended(row):
                how = f"{self.semantic_mode.value} blended {self.semantic_blend:g} with the " \
                    f"previous record's, "
            shown.append(f"{name} +{contribution:.3f} ({how}{value:.3f})")
        line = f"score {float(self.scores[row]):.3f}: " + (", ".join(shown) or "no component "
                                                           "above zero")
        code = int(self.drop_codes[row])
        if code >= 0:
            line += f"; not packed: {_DROP_CODES[code].value}"
        return line

    @property
    def semantic_label(self) -> str:
        """How the semantic component was computed, in a few words for a status line: the
        mode, and how many eligible records were blended with their predecessor
        (``cosine, 412 blended 0.3 with the previous record``)."""
        count = int(np.count_nonzero(self.blended[self.eligible] >= 0)) \
            if len(self.blended) and len(self.eligible) == len(self.blended) else 0
        if not count:
            return self.semantic_mode.value
        return (f"{self.semantic_mode.value}, {count:,} blended {self.semantic_blend:g} with "
                "the previous record")

    def is_blended(self, row: int) -> bool:
        """Whether the semantic component of the row ``row`` is of its vector blended with its
        predecessor's (``semantic_blend``; :attr:`blended` names the predecessor)."""
        return row < len(self.blended) and int(self.blended[row]) >= 0

    @property
    def candidates(self) -> list[CandidateDiagnostic]:
        """Every candidate, in rank order (built on demand)."""
        return [self.candidate(int(r)) for r in self.order]

    def drop_counts(self) -> dict[str, int]:
        """How many candidates were dropped for each reason."""
        codes = self.drop_codes[self.rows] if len(self.rows) else self.drop_codes[:0]
        counts = np.bincount(codes[codes >= 0].astype(np.intp), minlength=len(_DROP_CODES))
        return {reason.value: int(counts[i]) for i, reason in enumerate(_DROP_CODES)}

    def to_json(self, *, candidates: bool = True, limit: int | None = None) -> dict[str, Any]:
        """Wire form; ``limit`` caps the candidate list (rank order)."""
        out: dict[str, Any] = {
            "candidate_count": self.candidate_count, "filtered_count": self.filtered_count,
            "scoring_breakdown": [{"key": k, "weight": round(w, 6)}
                                  for k, w in self.scoring_breakdown],
            "time_ms": round(self.time_ms, 6), "compression_applied": self.compression_applied,
            "semantic_mode": self.semantic_mode.value, "embed_ms": round(self.embed_ms, 6),
            "budget": self.budget, "drop_counts": self.drop_counts(),
            "candidate_sources": dict(self.candidate_sources),
            "scored_count": self.scored_count,
            "candidate_bound": None if self.candidate_bound is None
            else round(self.candidate_bound, 6),
            "semantic_blend": self.semantic_blend,
        }
        if candidates:
            order = self.order if limit is None else self.order[:limit]
            out["candidates"] = [self.candidate(int(r)).to_json() for r in order]
        return out


@dataclass(frozen=True, slots=True, eq=False)
class RetrievedBundle:
    """Seed 002 ``RetrievedBundle``: the packed records and how they were chosen.

    ``records`` are in rank order; under ``throttle``/``exhausted`` their content is the
    compressed text (the stored records are unchanged).
    """

    records: tuple[MemoryRecord, ...]
    total_tokens: int
    truncated: bool
    strategy_applied: str
    diagnostics: RetrievalDiagnostics
    request: RetrievalRequest

    def retrieval_hash(self) -> str:
        """Determinism hash (seed 002 QG2): packed ids, contents, scores (9 dp), totals."""
        diagnostics = self.diagnostics
        packed = {diagnostics.ids[r]: r
                  for r in np.flatnonzero(diagnostics.drop_codes == -1).tolist()}
        digest = hashlib.sha256()
        for record in self.records:
            row = packed.get(record.id)
            score = float(diagnostics.scores[row]) if row is not None else 0.0
            digest.update(f"{record.id}\x1f{record.content}\x1f{score:.9f}\x1e".encode())
        digest.update(f"{self.total_tokens}|{self.truncated}|{self.strategy_applied}".encode())
        return digest.hexdigest()

    def to_json(self, *, candidates: bool = True, limit: int | None = None) -> dict[str, Any]:
        """Wire form printed by ``search --json``."""
        return {
            "records": [r.to_json() for r in self.records],
            "total_tokens": self.total_tokens,
            "truncated": self.truncated,
            "strategy_applied": self.strategy_applied,
            "diagnostics": self.diagnostics.to_json(candidates=candidates, limit=limit),
        }

    def dumps(self) -> str:
        """Compact JSON text of :meth:`to_json`."""
        return json.dumps(self.to_json(), sort_keys=True)
