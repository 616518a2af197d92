"""Retrieval configuration: component weights by purpose, strategy and pressure; layer tables.

DESIGN decision 6: ``score = IW·importance + RW·recency + SW·semantic + PW·layer`` (seed 002 §7)
plus seed 004's access frequency and a lexical (BM25) component (seed 003 §7 mixes 0.7 semantic
+ 0.3 keyword). How the weights are chosen, in order:

1. :attr:`RetrievalConfig.purpose_weights` gives the base weights for the request's purpose.
2. A non-``balanced`` strategy gives its component(s) at least
   :attr:`RetrievalConfig.strategy_share` of the total weight; the others share the rest in
   their base proportions (``semantic`` strategy boosts semantic, lexical and context, keeping
   their ratio). A strategy never lowers its components' share.
3. ``soft`` pressure multiplies importance by :attr:`RetrievalConfig.soft_importance_factor`
   (a fuller context is not affordable, so favour what matters); the weights are then
   renormalised to sum to 1.

The layer component is :attr:`RetrievalConfig.layer_weights` ``[purpose][layer]`` (seed 002 §7
"semantic > episodic when purpose=dialog").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from engine.errors import ConfigInvalid
from engine.records import Layer
from engine.retrieval.types import COMPONENTS, PressureState, Purpose, Strategy

__all__ = ["DEFAULT_LAYER_WEIGHTS", "DEFAULT_PURPOSE_WEIGHTS", "RetrievalConfig", "ScoringWeights"]


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """One weight per score component (see :data:`~engine.retrieval.types.COMPONENTS`)."""

    importance: float = 0.08
    recency: float = 0.04
    semantic: float = 0.49
    lexical: float = 0.21
    layer: float = 0.03
    access: float = 0.02
    context: float = 0.35
    speaker: float = 0.08

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigInvalid(f"weights.{name}", value, "must be a number >= 0")
        if self.total() <= 0:
            raise ConfigInvalid("weights", self.as_tuple(), "at least one weight must be > 0")

    def as_tuple(self) -> tuple[float, ...]:
        """Weights in :data:`COMPONENTS` order."""
        return tuple(float(getattr(self, name)) for name in COMPONENTS)

    def total(self) -> float:
        """Sum of the weights."""
        return sum(self.as_tuple())

    def normalized(self) -> ScoringWeights:
        """The same proportions, summing to 1."""
        total = self.total()
        return ScoringWeights(*(w / total for w in self.as_tuple()))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> ScoringWeights:
        """Build from ``{component: weight}``; missing components are 0."""
        unknown = sorted(set(values) - set(COMPONENTS))
        if unknown:
            raise ConfigInvalid(f"weights.{unknown[0]}", values[unknown[0]],
                                f"unknown component; known: {', '.join(COMPONENTS)}")
        return cls(*(float(values.get(name, 0.0)) for name in COMPONENTS))


# Base weights per purpose. Relevance (semantic + lexical + context) dominates when there is a
# query: decayed importance is a tie-breaker there (on LoCoMo dev a 0.20 importance weight let
# the age of a session outrank relevance: hit@5 -0.02), and it decides alone when there is no
# query. ``summary`` leans on recency and layer (episodes to condense), ``navigation`` on layer
# (spatial/procedural). See docs/retrieval.md.
DEFAULT_PURPOSE_WEIGHTS: Mapping[Purpose, ScoringWeights] = MappingProxyType({
    Purpose.REASONING: ScoringWeights(0.08, 0.04, 0.49, 0.21, 0.03, 0.02, 0.35, 0.08),
    Purpose.DIALOG: ScoringWeights(0.08, 0.08, 0.46, 0.20, 0.06, 0.02, 0.33, 0.08),
    Purpose.NAVIGATION: ScoringWeights(0.15, 0.05, 0.38, 0.16, 0.23, 0.02, 0.19, 0.04),
    Purpose.SUMMARY: ScoringWeights(0.15, 0.20, 0.32, 0.14, 0.18, 0.02, 0.16, 0.04),
})

_L = Layer
DEFAULT_LAYER_WEIGHTS: Mapping[Purpose, Mapping[Layer, float]] = MappingProxyType({
    Purpose.REASONING: MappingProxyType({_L.SEMANTIC: 1.0, _L.PROCEDURAL: 0.8, _L.EPISODIC: 0.6,
                                         _L.SOCIAL: 0.5, _L.SPATIAL: 0.3, _L.SYSTEM: 0.7}),
    # seed 002 §7: semantic > episodic when purpose=dialog
    Purpose.DIALOG: MappingProxyType({_L.SEMANTIC: 1.0, _L.SOCIAL: 0.9, _L.EPISODIC: 0.7,
                                      _L.PROCEDURAL: 0.4, _L.SPATIAL: 0.2, _L.SYSTEM: 0.5}),
    Purpose.NAVIGATION: MappingProxyType({_L.SPATIAL: 1.0, _L.PROCEDURAL: 0.7, _L.EPISODIC: 0.5,
                                          _L.SEMANTIC: 0.4, _L.SOCIAL: 0.2, _L.SYSTEM: 0.3}),
    Purpose.SUMMARY: MappingProxyType({_L.EPISODIC: 1.0, _L.SEMANTIC: 0.8, _L.SOCIAL: 0.6,
                                       _L.PROCEDURAL: 0.5, _L.SPATIAL: 0.4, _L.SYSTEM: 0.3}),
})

_STRATEGY_COMPONENTS: Mapping[Strategy, tuple[str, ...]] = MappingProxyType({
    Strategy.RECENCY: ("recency",),
    Strategy.IMPORTANCE: ("importance",),
    Strategy.SEMANTIC: ("semantic", "lexical", "context", "speaker"),
})


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Everything retrieval is configured with (documented in docs/retrieval.md).

    Attributes:
        purpose_weights: Base component weights per purpose.
        layer_weights: Layer component value per purpose and layer.
        layer_policy: Layers a purpose may retrieve at all (seed 002 §9 "layer policy").
        strategy_share: Least weight share a non-balanced strategy gives its component(s).
        soft_importance_factor: Importance multiplier under ``soft`` pressure.
        recency_half_life_ms: ``exp(-Δt/halfLife)`` (seed 002 §7); None = MemoryConfig's.
        importance_half_life_days: Seed 004 decay; None = MemoryConfig's.
        importance_boost: Multiplier for flagged records (tag ``important``); None = config's.
        compression_ratio: Share of tokens kept under ``throttle``; None = MemoryConfig's.
        exhausted_records: Records returned under ``exhausted`` pressure (the minimum).
        access_cap: Seed 004 access frequency ``min(count / cap, 1)``.
        bm25_k1: BM25 term saturation.
        bm25_b: BM25 length normalisation.
        context_neighbours: How many time neighbours on each side lend relevance (the
            ``context`` component: a reply is relevant when its question is). 0 disables.
        context_window_ms: How close in time a neighbour must be to lend relevance.
        partition_min: Candidate count above which packing ranks a top slice first.
    """

    purpose_weights: Mapping[Purpose, ScoringWeights] = field(
        default_factory=lambda: dict(DEFAULT_PURPOSE_WEIGHTS))
    layer_weights: Mapping[Purpose, Mapping[Layer, float]] = field(
        default_factory=lambda: dict(DEFAULT_LAYER_WEIGHTS))
    layer_policy: Mapping[Purpose, frozenset[Layer]] = field(
        default_factory=lambda: {p: frozenset(Layer) for p in Purpose})
    strategy_share: float = 0.8
    soft_importance_factor: float = 1.5
    recency_half_life_ms: float | None = None
    importance_half_life_days: float | None = None
    importance_boost: float | None = None
    compression_ratio: float | None = None
    exhausted_records: int = 1
    access_cap: float = 100.0
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    context_neighbours: int = 2
    context_window_ms: float = 600_000.0
    partition_min: int = 4096

    def __post_init__(self) -> None:
        for purpose in Purpose:
            if purpose not in self.purpose_weights:
                raise ConfigInvalid("purpose_weights", purpose.value, "missing purpose")
            if purpose not in self.layer_weights:
                raise ConfigInvalid("layer_weights", purpose.value, "missing purpose")
            if purpose not in self.layer_policy:
                raise ConfigInvalid("layer_policy", purpose.value, "missing purpose")
            for layer, value in self.layer_weights[purpose].items():
                if not 0.0 <= value <= 1.0:
                    raise ConfigInvalid(f"layer_weights.{purpose}.{layer}", value,
                                        "must be in 0..1")
        object.__setattr__(self, "purpose_weights", MappingProxyType(dict(self.purpose_weights)))
        object.__setattr__(self, "layer_weights", MappingProxyType(dict(self.layer_weights)))
        object.__setattr__(self, "layer_policy", MappingProxyType(dict(self.layer_policy)))
        checks: tuple[tuple[str, float, float, float], ...] = (
            ("strategy_share", self.strategy_share, 0.0, 1.0),
            ("bm25_b", self.bm25_b, 0.0, 1.0),
        )
        for name, value, low, high in checks:
            if not low <= value <= high:
                raise ConfigInvalid(name, value, f"must be in {low}..{high}")
        positive = (("soft_importance_factor", self.soft_importance_factor),
                    ("access_cap", self.access_cap), ("bm25_k1", self.bm25_k1),
                    ("context_window_ms", self.context_window_ms))
        for name, value in positive:
            if not value > 0:
                raise ConfigInvalid(name, value, "must be > 0")
        if self.context_neighbours < 0:
            raise ConfigInvalid("context_neighbours", self.context_neighbours, "must be >= 0")
        if self.exhausted_records < 1:
            raise ConfigInvalid("exhausted_records", self.exhausted_records, "must be >= 1")
        if self.compression_ratio is not None and not 0.0 < self.compression_ratio <= 1.0:
            raise ConfigInvalid("compression_ratio", self.compression_ratio, "must be in (0, 1]")

    def weights_for(self, purpose: Purpose, strategy: Strategy,
                    pressure: PressureState) -> ScoringWeights:
        """The weights for one request (strategy and pressure applied, summing to 1)."""
        base = self.purpose_weights[purpose].normalized()
        values = dict(zip(COMPONENTS, base.as_tuple(), strict=True))
        emphasised = _STRATEGY_COMPONENTS.get(strategy, ())
        inside = sum(values[c] for c in emphasised)
        if emphasised and inside < self.strategy_share:
            outside = 1.0 - inside
            for name in COMPONENTS:
                if name in emphasised:
                    values[name] = self.strategy_share * (
                        values[name] / inside if inside > 0 else 1.0 / len(emphasised))
                else:
                    values[name] = (1.0 - self.strategy_share) * (
                        values[name] / outside if outside > 0 else 0.0)
        if pressure is PressureState.SOFT:
            values["importance"] *= self.soft_importance_factor
        return ScoringWeights.from_mapping(values).normalized()
