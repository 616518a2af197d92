"""Engine configuration: seed 002's ``MemoryConfig`` (§21 env vars), retrieval weights, dedup.

Everything is a frozen dataclass validated at construction; a bad value raises
:class:`~engine.errors.ConfigInvalid` (``MEMORY_CONFIG_INVALID``) naming the field, or the
environment variable it came from, and the bad value. :func:`memory_config_from_env` reads the
seed 002 §21 variables and, in the same naming pattern, the ``MEMORY_RETRIEVAL_*`` weights and
tables (:func:`retrieval_config_from_env`, listed in docs/retrieval.md); unknown ``MEMORY_*``
variables are reported rather than ignored, because a misspelt setting that silently does
nothing is worse than an error.

The retrieval request vocabulary (:class:`Purpose`, :class:`Strategy`, :class:`PressureState`,
:data:`COMPONENTS`) lives here because the weight tables are keyed by it;
:mod:`engine.retrieval` re-exports it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from engine.errors import ConfigInvalid
from engine.records import Layer, TrustTier

if TYPE_CHECKING:
    from engine.redaction import Redactor

__all__ = [
    "COMPONENTS",
    "DEFAULT_LAYER_WEIGHTS",
    "DEFAULT_PURPOSE_WEIGHTS",
    "DEFAULT_REDACT_PATTERNS",
    "ENV_VARS",
    "LIFECYCLE_PRUNE_MODES",
    "RETRIEVAL_ENV_VARS",
    "DedupConfig",
    "EngineConfig",
    "MemoryConfig",
    "PressureState",
    "Purpose",
    "RetentionPolicy",
    "RetrievalConfig",
    "ScoringWeights",
    "Strategy",
    "dedup_config_from_env",
    "engine_config_from_env",
    "memory_config_from_env",
    "retrieval_config_from_env",
]


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Per-layer caps (seed 002 ``retentionPolicy``); None means uncapped."""

    semantic_max: int | None = 400
    social_max: int | None = 300
    procedural_max: int | None = 250

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ConfigInvalid(f"retention_policy.{f.name}", value, "must be an integer >= 1")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# -- retrieval (seed 002 §7 and §9, DESIGN decision 6; docs/retrieval.md) ------------------------


class Purpose(StrEnum):
    """Seed 002 ``RetrievalRequest.purpose``: what the context is for (picks the weights)."""

    REASONING = "reasoning"
    DIALOG = "dialog"
    NAVIGATION = "navigation"
    SUMMARY = "summary"


class Strategy(StrEnum):
    """Seed 002 ``RetrievalRequest.strategy``: which component to emphasise."""

    BALANCED = "balanced"
    RECENCY = "recency"
    IMPORTANCE = "importance"
    SEMANTIC = "semantic"


class PressureState(StrEnum):
    """Seed 002 rate-governor pressure: ``throttle`` compresses, ``exhausted`` gives the minimum."""

    NORMAL = "normal"
    SOFT = "soft"
    THROTTLE = "throttle"
    EXHAUSTED = "exhausted"


# Score components in a fixed order (columns of the component matrix).
COMPONENTS: tuple[str, ...] = (
    "importance", "recency", "semantic", "lexical", "layer", "access", "context", "speaker",
    "date")


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """One weight per score component (see :data:`COMPONENTS`); defaults: ``reasoning``'s."""

    importance: float = 0.02
    recency: float = 0.04
    semantic: float = 0.49
    lexical: float = 0.21
    layer: float = 0.03
    access: float = 0.02
    context: float = 0.50
    speaker: float = 0.08
    date: float = 0.28

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            value = getattr(self, name)
            if not _is_number(value) or value < 0:
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
# query; decayed importance is a tie-breaker there for ``reasoning`` (factual recall: on the
# LoCoMo dev conversations 0.02 beat 0.08, and 0.20 let the age of a session outrank relevance),
# and it decides alone when there is no query. ``context`` is about 0.7 of semantic + lexical
# (it only lends what a record's own relevance lacks). ``summary`` leans on recency and layer
# (episodes to condense), ``navigation`` on layer (spatial/procedural). ``date`` (the query
# names a day or month the record was created in) is 0.2 of the other weights' sum (on the
# LoCoMo dev conversations 0.2 beat 0.1 and tied 0.3); a query without a date scores 0 on it
# for every record, so its ranking is unchanged. See docs/retrieval.md.
DEFAULT_PURPOSE_WEIGHTS: Mapping[Purpose, ScoringWeights] = MappingProxyType({
    Purpose.REASONING: ScoringWeights(0.02, 0.04, 0.49, 0.21, 0.03, 0.02, 0.50, 0.08, 0.28),
    Purpose.DIALOG: ScoringWeights(0.08, 0.08, 0.46, 0.20, 0.06, 0.02, 0.47, 0.08, 0.29),
    Purpose.NAVIGATION: ScoringWeights(0.15, 0.05, 0.38, 0.16, 0.23, 0.02, 0.27, 0.04, 0.26),
    Purpose.SUMMARY: ScoringWeights(0.15, 0.20, 0.32, 0.14, 0.18, 0.02, 0.23, 0.04, 0.26),
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
    Strategy.SEMANTIC: ("semantic", "lexical", "context", "speaker", "date"),
})


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Retrieval weights and tables (``MemoryConfig.retrieval``; docs/retrieval.md).

    How one request's weights are chosen (:meth:`weights_for`):

    1. :attr:`purpose_weights` gives the base weights for the request's purpose.
    2. A non-``balanced`` strategy gives its component(s) at least :attr:`strategy_share` of
       the total weight; the others share the rest in their base proportions (``semantic``
       boosts semantic, lexical, context, speaker and date, keeping their ratio). A strategy never
       lowers its components' share.
    3. ``soft`` pressure multiplies importance by :attr:`soft_importance_factor` (a fuller
       context is not affordable, so favour what matters); the weights are then renormalised
       to sum to 1. ``throttle`` and ``exhausted`` change packing, not weights
       (``MemoryConfig.throttle_compression_ratio``, :attr:`exhausted_records`).

    Half-lives, the importance boost and the compression ratio are seed 002's own
    ``MemoryConfig`` fields.

    Attributes:
        purpose_weights: Base component weights per purpose.
        layer_weights: Layer component value per purpose and layer (0..1).
        layer_policy: Layers a purpose may retrieve at all (seed 002 §9 "layer policy").
        strategy_share: Least weight share a non-balanced strategy gives its component(s).
        soft_importance_factor: Importance multiplier under ``soft`` pressure.
        exhausted_records: Records returned under ``exhausted`` pressure (the minimum).
        access_cap: Seed 004 access frequency ``min(count / cap, 1)``.
        bm25_k1: BM25 term saturation.
        bm25_b: BM25 length normalisation.
        context_neighbours: How many time neighbours on each side lend relevance (the
            ``context`` component: a reply is relevant when its question is). 0 disables.
        context_window_ms: How close in time a neighbour must be to lend relevance.
        semantic_centering: How far towards the candidates' mean embedding cosine is measured
            from (0: plain cosine; see :class:`engine.retrieval.scoring.Centring`).
        semantic_blend: At query time, a record's vector is ``norm((1 - a) * v + a * v_prev)``
            with ``v_prev`` the vector of the record written just before it (same agent and
            layer, within ``context_window_ms``; eligible for the request): a short reply
            ("Yes, it was amazing!") takes some of the topic it answers. 0 disables
            (docs/retrieval.md "Third round").
        semantic_blend_layers: The layers whose records are blended: episodic ones (turns of
            a conversation, one event after another) by default; a semantic fact states its
            own subject, and blending facts with their neighbours lost hit@5 on LoCoMo.
        date_tolerance_ms: How far outside a day or month the query names a record may have
            been created and still match it (the ``date`` component; time zones, notes
            written the day after).
        partition_min: Candidate count above which packing ranks a top slice first.
        candidate_threshold: Live records above which a query is scored on a candidate set
            (dense, lexical, static, date, speaker and context candidates) instead of every
            row (docs/retrieval.md "How candidates are found"). 0 always uses candidates.
        dense_candidates: Rows the dense index proposes (nearest by centred cosine).
        lexical_candidates: Rows the inverted index proposes (best BM25).
        static_candidates: Rows proposed by the query-independent part of the score
            (importance, recency, layer, access) and, among the rows a query's date or
            speaker matches, by the score before relevance.
        dense_probes: Lists of the dense index a query probes.
        proven_records: Packed records the candidate path makes sure no row outside its
            candidates could outrank (it widens its sources up to 16× until they score
            above the bound).
        widen_share: A request widens only while the rows it has touched (cosines computed,
            dense probe bounded), doubled for the next round, stay within this share of the
            store; past it every row is scored (a candidate row costs ~4.6× an exhaustively
            scored one). A query far from every record proves nothing and would otherwise
            widen several times first.
    """

    purpose_weights: Mapping[Purpose, ScoringWeights] = field(
        default_factory=lambda: dict(DEFAULT_PURPOSE_WEIGHTS))
    layer_weights: Mapping[Purpose, Mapping[Layer, float]] = field(
        default_factory=lambda: dict(DEFAULT_LAYER_WEIGHTS))
    layer_policy: Mapping[Purpose, frozenset[Layer]] = field(
        default_factory=lambda: {p: frozenset(Layer) for p in Purpose})
    strategy_share: float = 0.8
    soft_importance_factor: float = 1.5
    exhausted_records: int = 1
    access_cap: float = 100.0
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    context_neighbours: int = 2
    context_window_ms: float = 600_000.0
    semantic_centering: float = 0.5
    semantic_blend: float = 0.3
    semantic_blend_layers: frozenset[Layer] = frozenset({Layer.EPISODIC})
    date_tolerance_ms: float = 86_400_000.0
    partition_min: int = 4096
    candidate_threshold: int = 50_000
    dense_candidates: int = 512
    lexical_candidates: int = 512
    static_candidates: int = 256
    dense_probes: int = 24
    proven_records: int = 10
    widen_share: float = 0.25

    def __post_init__(self) -> None:
        self._check_tables()
        for name, low, high in (("strategy_share", 0.0, 1.0), ("bm25_b", 0.0, 1.0),
                                ("semantic_centering", 0.0, 1.0),
                                ("semantic_blend", 0.0, 1.0)):
            value = getattr(self, name)
            if not _is_number(value) or not low <= value <= high:
                raise ConfigInvalid(name, value, f"must be in {low}..{high}")
        for name in ("soft_importance_factor", "access_cap", "bm25_k1", "context_window_ms",
                     "widen_share"):
            value = getattr(self, name)
            if not _is_number(value) or value <= 0:
                raise ConfigInvalid(name, value, "must be a number > 0")
        layers = self.semantic_blend_layers
        if not isinstance(layers, frozenset) or not all(isinstance(x, Layer) for x in layers):
            raise ConfigInvalid("semantic_blend_layers", layers, "must be a set of layers")
        if not _is_number(self.date_tolerance_ms) or self.date_tolerance_ms < 0:
            raise ConfigInvalid("date_tolerance_ms", self.date_tolerance_ms,
                                "must be a number >= 0")
        for name, least in (("context_neighbours", 0), ("exhausted_records", 1),
                            ("partition_min", 1), ("candidate_threshold", 0),
                            ("dense_candidates", 1), ("lexical_candidates", 1),
                            ("static_candidates", 1), ("dense_probes", 1),
                            ("proven_records", 0)):
            value = getattr(self, name)
            if not _is_int(value) or value < least:
                raise ConfigInvalid(name, value, f"must be an integer >= {least}")

    def _check_tables(self) -> None:
        for name in ("purpose_weights", "layer_weights", "layer_policy"):
            table = getattr(self, name)
            missing = [p.value for p in Purpose if p not in table]
            if missing:
                raise ConfigInvalid(name, sorted(str(p) for p in table),
                                    f"missing purpose(s) {', '.join(missing)}")
        for purpose in Purpose:
            if not isinstance(self.purpose_weights[purpose], ScoringWeights):
                raise ConfigInvalid(f"purpose_weights.{purpose}", self.purpose_weights[purpose],
                                    "must be ScoringWeights")
            for layer, value in self.layer_weights[purpose].items():
                if not _is_number(value) or not 0.0 <= value <= 1.0:
                    raise ConfigInvalid(f"layer_weights.{purpose}.{layer}", value,
                                        "must be in 0..1")
            if not self.layer_policy[purpose]:
                raise ConfigInvalid(f"layer_policy.{purpose}", set(), "must allow a layer")
        object.__setattr__(self, "purpose_weights", MappingProxyType(dict(self.purpose_weights)))
        object.__setattr__(self, "layer_weights", MappingProxyType(
            {p: MappingProxyType(dict(t)) for p, t in self.layer_weights.items()}))
        object.__setattr__(self, "layer_policy", MappingProxyType(
            {p: frozenset(layers) for p, layers in self.layer_policy.items()}))

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


# engine.redaction.DEFAULT_PATTERNS (a test keeps the two equal). Spelled out here so that
# building a default config does not import engine.redaction, which compiles every rule.
DEFAULT_REDACT_PATTERNS: tuple[str, ...] = ("EMAIL", "UUID", "NUMSEQ16", "CARD", "SSN", "PHONE",
                                            "IBAN", "SECRETS")


def _check_redact_patterns(patterns: tuple[str, ...]) -> None:
    """Compile each pattern as the engine's Redactor will; a bad one names itself."""
    from engine.errors import RedactionPatternInvalid
    from engine.redaction import Redactor

    for pattern in patterns:
        try:
            Redactor([pattern])
        except RedactionPatternInvalid as exc:
            raise ConfigInvalid("redact_patterns", pattern, str(exc)) from exc


# Pruning modes a scheduled lifecycle run may use (engine.lifecycle.PruneMode's values, plus
# "off"); spelled out so that the config does not import the lifecycle package.
LIFECYCLE_PRUNE_MODES: tuple[str, ...] = ("off", "gentle", "normal", "aggressive")


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """Seed 002 ``MemoryConfig``. Times are milliseconds; defaults are §21's.

    Attributes:
        episodic_window_ms: Episodic records younger than this are never compacted.
        episodic_max: Episodic count above which compaction is due.
        episodic_keep_recent: K most recent episodic records compaction never touches (§8).
        summarization_batch_size: Records per summarization task.
        summarization_min_interval_ms: Minimum time between compaction runs per agent.
        decay_half_life_ms: Recency half-life for ``exp(-Δt/halfLife)`` (seed 002 §7).
        importance_decay_half_life_days: Ebbinghaus half-life for importance (seed 004).
        importance_boost: Multiplier for records flagged important (seed 002).
        throttle_compression_ratio: Token ratio kept under ``throttle`` pressure.
        embedding_dim: Vector dimension; must match the model.
        max_context_tokens: Default retrieval budget.
        redact_patterns: Pattern names (EMAIL, UUID, NUMSEQ16, CARD, SSN, PHONE, IBAN,
            SECRETS or one secret rule) or regular expressions (:mod:`engine.redaction`);
            checked here, so a bad one fails at load, not at the first redaction.
        retention_policy: Per-layer caps.
        retrieval: Retrieval weights and tables (``MEMORY_RETRIEVAL_*``).
        episodic_ring_max: Seed 002 §12 episodic ring buffer: at most this many active
            episodic records per agent; a write past it rolls the oldest off (0: no ring).
        retention_strict: Refuse a write that would take an agent's capped layer past its
            retention cap (``MEMORY_CAPACITY_EXCEEDED``) instead of letting the lifecycle
            scheduler retire the least important records on its next run.
        lifecycle_enabled: Run the lifecycle scheduler where the engine is long-lived (the
            off switch; :class:`~engine.lifecycle.LifecycleScheduler`).
        lifecycle_interval_ms: Time between two scheduled lifecycle runs.
        lifecycle_prune: Seed 004 pruning mode of a scheduled run (``off``, ``gentle``,
            ``normal``, ``aggressive``); expiry and retention caps run in any case.
    """

    episodic_window_ms: int = 900_000
    episodic_max: int = 1200
    episodic_keep_recent: int = 50
    summarization_batch_size: int = 25
    summarization_min_interval_ms: int = 60_000
    decay_half_life_ms: int = 3_600_000
    importance_decay_half_life_days: float = 30.0
    importance_boost: float = 2.5
    throttle_compression_ratio: float = 0.55
    embedding_dim: int = 384
    max_context_tokens: int = 1800
    redact_patterns: tuple[str, ...] = DEFAULT_REDACT_PATTERNS
    retention_policy: RetentionPolicy = field(default_factory=RetentionPolicy)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    episodic_ring_max: int = 0
    retention_strict: bool = False
    lifecycle_enabled: bool = True
    lifecycle_interval_ms: int = 300_000
    lifecycle_prune: str = "off"

    def __post_init__(self) -> None:
        positive_ints = ("episodic_max", "summarization_batch_size", "embedding_dim",
                         "max_context_tokens", "decay_half_life_ms", "lifecycle_interval_ms")
        for name in positive_ints:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigInvalid(name, value, "must be an integer >= 1")
        for name in ("episodic_window_ms", "summarization_min_interval_ms",
                     "episodic_keep_recent", "episodic_ring_max"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise ConfigInvalid(name, value, "must be an integer >= 0")
        if not _is_number(self.importance_decay_half_life_days) or \
                self.importance_decay_half_life_days <= 0:
            raise ConfigInvalid("importance_decay_half_life_days",
                                self.importance_decay_half_life_days, "must be a number > 0")
        if not _is_number(self.importance_boost) or self.importance_boost < 1.0:
            raise ConfigInvalid("importance_boost", self.importance_boost, "must be >= 1.0")
        ratio = self.throttle_compression_ratio
        if not _is_number(ratio) or not 0.0 < ratio <= 1.0:
            raise ConfigInvalid("throttle_compression_ratio", ratio, "must be in (0, 1]")
        if not isinstance(self.redact_patterns, tuple) or not all(
            isinstance(p, str) and p for p in self.redact_patterns
        ):
            raise ConfigInvalid("redact_patterns", self.redact_patterns,
                                "must be a tuple of non-empty strings")
        if self.redact_patterns != DEFAULT_REDACT_PATTERNS:
            _check_redact_patterns(self.redact_patterns)
        if not isinstance(self.retrieval, RetrievalConfig):
            raise ConfigInvalid("retrieval", self.retrieval, "must be a RetrievalConfig")
        for name in ("retention_strict", "lifecycle_enabled"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigInvalid(name, getattr(self, name), "must be true or false")
        if self.lifecycle_prune not in LIFECYCLE_PRUNE_MODES:
            raise ConfigInvalid("lifecycle_prune", self.lifecycle_prune,
                                f"must be one of {', '.join(LIFECYCLE_PRUNE_MODES)}")
        if 0 < self.episodic_ring_max <= self.episodic_keep_recent:
            # the ring would roll off episodes seed 002 §8 promises to keep untouched
            raise ConfigInvalid("episodic_ring_max", self.episodic_ring_max,
                                "must be 0 (no ring) or more than episodic_keep_recent "
                                f"({self.episodic_keep_recent})")

    def redactor(self) -> Redactor:
        """The :class:`~engine.redaction.Redactor` of :attr:`redact_patterns` (shared, cached).

        Every exit that masks text for this configuration uses this one, so a custom pattern in
        ``MEMORY_REDACT_PATTERNS`` applies to events, exports, scans, prompts and views alike.
        """
        from engine.redaction import redactor_for

        return redactor_for(self.redact_patterns)


_TIER_DEFAULTS = MappingProxyType({TrustTier.HUMAN: 0.80, TrustTier.AGENT: 0.85,
                                   TrustTier.AUTO: 0.90})


@dataclass(frozen=True, slots=True)
class DedupConfig:
    """Near-duplicate and merge settings (seed 001, seed 004, DESIGN decisions 2-5).

    Attributes:
        thresholds: Cosine threshold per trust tier (seed 001: 0.80 / 0.85 / 0.90).
        jaccard_thresholds: Token-Jaccard thresholds used while the model is unavailable.
        cross_category_threshold: Different categories merge only at or above this (seed 004).
        gray_zone: Width below the lowest tier threshold where the review band starts (0.30:
            cosine 0.50; chosen on STS-B train, docs/ingest.md "Quality on unseen data").
        surprise_threshold: Minimum surprise to store a new record (seed 004).
        related_top_k: How many ``related`` links a record keeps.
        exact_search_max: Partition size up to which search is exact numpy, else the in-process
            partition index (Chroma HNSW with ``IngestPolicy.partition_index`` off).
        source_contribution_cap: Max share one source may contribute to a merged confidence.
    """

    thresholds: Mapping[TrustTier, float] = field(default_factory=lambda: dict(_TIER_DEFAULTS))
    jaccard_thresholds: Mapping[TrustTier, float] = field(
        default_factory=lambda: {TrustTier.HUMAN: 0.60, TrustTier.AGENT: 0.65,
                                 TrustTier.AUTO: 0.70})
    cross_category_threshold: float = 0.95
    gray_zone: float = 0.30
    surprise_threshold: float = 0.15
    related_top_k: int = 5
    exact_search_max: int = 50_000
    source_contribution_cap: float = 0.5

    def __post_init__(self) -> None:
        for name in ("thresholds", "jaccard_thresholds"):
            table = getattr(self, name)
            missing = [t.value for t in TrustTier if t not in table]
            if missing:
                raise ConfigInvalid(name, dict(table), f"missing tier(s) {', '.join(missing)}")
            for tier, value in table.items():
                if not _is_number(value) or not 0.0 < value <= 1.0:
                    raise ConfigInvalid(f"{name}.{tier}", value, "must be in (0, 1]")
            object.__setattr__(self, name, MappingProxyType(dict(table)))
        for name in ("cross_category_threshold", "surprise_threshold", "source_contribution_cap"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value <= 1.0:
                raise ConfigInvalid(name, value, "must be in 0..1")
        if not _is_number(self.gray_zone) or not 0.0 <= self.gray_zone < 0.5:
            raise ConfigInvalid("gray_zone", self.gray_zone, "must be in [0, 0.5)")
        for name in ("related_top_k", "exact_search_max"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise ConfigInvalid(name, value, "must be an integer >= 0")

    def threshold(self, tier: TrustTier, *, semantic: bool = True) -> float:
        """The merge threshold for ``tier`` on the embedding (or Jaccard) path."""
        return (self.thresholds if semantic else self.jaccard_thresholds)[tier]


# Seed 002 §21 variable → (field, parser). Retention caps are nested.
ENV_VARS: Mapping[str, str] = MappingProxyType({
    "MEMORY_EPISODIC_MAX": "episodic_max",
    "MEMORY_EPISODIC_WINDOW_MS": "episodic_window_ms",
    "MEMORY_EPISODIC_KEEP_RECENT": "episodic_keep_recent",
    "MEMORY_SUMMARIZATION_MIN_INTERVAL_MS": "summarization_min_interval_ms",
    "MEMORY_SUMMARIZATION_BATCH": "summarization_batch_size",
    "MEMORY_DECAY_HALFLIFE_MS": "decay_half_life_ms",
    "MEMORY_IMPORTANCE_DECAY_HALFLIFE_DAYS": "importance_decay_half_life_days",
    "MEMORY_IMPORTANCE_BOOST": "importance_boost",
    "MEMORY_THROTTLE_COMPRESSION_RATIO": "throttle_compression_ratio",
    "MEMORY_EMBEDDING_DIM": "embedding_dim",
    "MEMORY_MAX_CONTEXT_TOKENS": "max_context_tokens",
    "MEMORY_REDACT_PATTERNS": "redact_patterns",
    "MEMORY_RETENTION_SEMANTIC_MAX": "retention_policy.semantic_max",
    "MEMORY_RETENTION_SOCIAL_MAX": "retention_policy.social_max",
    "MEMORY_RETENTION_PROCEDURAL_MAX": "retention_policy.procedural_max",
    # ours, in §21's pattern (docs/retrieval.md "Lifecycle"): ring buffer, strict caps, scheduler
    "MEMORY_EPISODIC_RING_MAX": "episodic_ring_max",
    "MEMORY_RETENTION_STRICT": "retention_strict",
    "MEMORY_LIFECYCLE_ENABLED": "lifecycle_enabled",
    "MEMORY_LIFECYCLE_INTERVAL_MS": "lifecycle_interval_ms",
    "MEMORY_LIFECYCLE_PRUNE": "lifecycle_prune",
})

_DEDUP_ENV: Mapping[str, str] = MappingProxyType({
    "MEMORY_DEDUP_THRESHOLD_HUMAN": "human",
    "MEMORY_DEDUP_THRESHOLD_AGENT": "agent",
    "MEMORY_DEDUP_THRESHOLD_AUTO": "auto",
    "MEMORY_DEDUP_GRAY_ZONE": "gray_zone",
    "MEMORY_SURPRISE_THRESHOLD": "surprise_threshold",
    "MEMORY_RELATED_TOP_K": "related_top_k",
})

# Retrieval (docs/retrieval.md): scalar settings, then one variable per purpose × component
# weight, per purpose × layer weight, and per purpose layer policy (seed 002 §21 style: one value
# per variable, lists comma-separated).
_RETRIEVAL_SCALARS: Mapping[str, str] = MappingProxyType({
    "MEMORY_RETRIEVAL_STRATEGY_SHARE": "strategy_share",
    "MEMORY_RETRIEVAL_SOFT_IMPORTANCE_FACTOR": "soft_importance_factor",
    "MEMORY_RETRIEVAL_EXHAUSTED_RECORDS": "exhausted_records",
    "MEMORY_RETRIEVAL_ACCESS_CAP": "access_cap",
    "MEMORY_RETRIEVAL_BM25_K1": "bm25_k1",
    "MEMORY_RETRIEVAL_BM25_B": "bm25_b",
    "MEMORY_RETRIEVAL_CONTEXT_NEIGHBOURS": "context_neighbours",
    "MEMORY_RETRIEVAL_CONTEXT_WINDOW_MS": "context_window_ms",
    "MEMORY_RETRIEVAL_SEMANTIC_CENTERING": "semantic_centering",
    "MEMORY_RETRIEVAL_SEMANTIC_BLEND": "semantic_blend",
    "MEMORY_RETRIEVAL_SEMANTIC_BLEND_LAYERS": "semantic_blend_layers",
    "MEMORY_RETRIEVAL_DATE_TOLERANCE_MS": "date_tolerance_ms",
    "MEMORY_RETRIEVAL_CANDIDATE_THRESHOLD": "candidate_threshold",
    "MEMORY_RETRIEVAL_WIDEN_SHARE": "widen_share",
    "MEMORY_RETRIEVAL_PROVEN_RECORDS": "proven_records",
})


def _weight_var(purpose: Purpose, component: str) -> str:
    return f"MEMORY_RETRIEVAL_WEIGHT_{purpose.value.upper()}_{component.upper()}"


def _layer_weight_var(purpose: Purpose, layer: Layer) -> str:
    return f"MEMORY_RETRIEVAL_LAYER_WEIGHT_{purpose.value.upper()}_{layer.value.upper()}"


def _layers_var(purpose: Purpose) -> str:
    return f"MEMORY_RETRIEVAL_LAYERS_{purpose.value.upper()}"


# Every retrieval variable → what it sets ("weight:<purpose>:<component>",
# "layer_weight:<purpose>:<layer>", "layers:<purpose>" or a RetrievalConfig field name).
RETRIEVAL_ENV_VARS: Mapping[str, str] = MappingProxyType({
    **_RETRIEVAL_SCALARS,
    **{_weight_var(p, c): f"weight:{p.value}:{c}" for p in Purpose for c in COMPONENTS},
    **{_layer_weight_var(p, layer): f"layer_weight:{p.value}:{layer.value}"
       for p in Purpose for layer in Layer},
    **{_layers_var(p): f"layers:{p.value}" for p in Purpose},
})

# MEMORY_* variables owned by other subsystems (seed 000 §3: the primary LLM provider).
_OTHER_MEMORY_VARS = frozenset({"MEMORY_LLM_PRIMARY"})

_INT = re.compile(r"^[+-]?\d+$")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _parse(var: str, raw: str, kind: type) -> Any:
    text = raw.strip()
    if kind is bool:  # before int: bool is a subclass of int
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigInvalid(var, raw, "must be one of 1/0, true/false, yes/no, on/off")
    if kind is str:
        return text.lower()
    if kind is int:
        if not _INT.match(text):
            raise ConfigInvalid(var, raw, "must be an integer")
        return int(text)
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigInvalid(var, raw, "must be a number") from None
        if not math.isfinite(value):
            raise ConfigInvalid(var, raw, "must be a finite number")
        return value
    if kind is tuple:
        parts = tuple(p.strip() for p in _split_patterns(text) if p.strip())
        if not parts:
            raise ConfigInvalid(var, raw, "must list at least one pattern")
        return parts
    raise AssertionError(f"unhandled kind {kind}")  # pragma: no cover - table is static


def _split_patterns(text: str) -> list[str]:
    """Split a comma-separated pattern list on the commas that separate patterns.

    A comma inside a regular expression's brackets, braces or parentheses (``\\d{3,5}``,
    ``[,;]``) or after a backslash belongs to the expression.
    """
    parts: list[str] = []
    depth = 0
    in_class = False
    current: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            current.append(char)
            current.append(next(chars, ""))
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "({":
            depth += 1
        elif char in ")}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _rename(exc: ConfigInvalid, var: str) -> ConfigInvalid:
    return ConfigInvalid(var, exc.value, exc.reason)


def memory_config_from_env(env: Mapping[str, str]) -> MemoryConfig:
    """Build a :class:`MemoryConfig` from seed 002 §21 environment variables.

    Raises:
        ConfigInvalid: naming the variable and the bad value; also for unknown ``MEMORY_*``
            names (a typo should not silently do nothing).
    """
    known = set(ENV_VARS) | set(_DEDUP_ENV) | set(RETRIEVAL_ENV_VARS) | _OTHER_MEMORY_VARS
    for name in env:
        if name.startswith("MEMORY_") and name not in known:
            raise ConfigInvalid(name, env[name], "unknown setting; see the README "
                                                  "and docs/retrieval.md for the list")
    defaults = MemoryConfig()
    top: dict[str, Any] = {}
    retention: dict[str, Any] = {}
    for var, path in ENV_VARS.items():
        if var not in env:
            continue
        if path.startswith("retention_policy."):
            retention[path.split(".", 1)[1]] = _parse(var, env[var], int)
            continue
        kind = type(getattr(defaults, path))
        top[path] = _parse(var, env[var], kind)
    top["retrieval"] = retrieval_config_from_env(env)
    try:
        if retention:
            top["retention_policy"] = RetentionPolicy(**retention)
        return dataclasses.replace(defaults, **top)
    except ConfigInvalid as exc:
        var = next((v for v, p in ENV_VARS.items() if p.endswith(exc.field)), exc.field)
        raise _rename(exc, var) from exc


def retrieval_config_from_env(env: Mapping[str, str]) -> RetrievalConfig:
    """Build a :class:`RetrievalConfig` from ``MEMORY_RETRIEVAL_*`` variables.

    A purpose's weights start from :data:`DEFAULT_PURPOSE_WEIGHTS`; each
    ``MEMORY_RETRIEVAL_WEIGHT_<PURPOSE>_<COMPONENT>`` replaces one of them (weights are
    normalised per request, so they need not sum to 1). Layer weights and policies likewise.

    Raises:
        ConfigInvalid: naming the variable and the bad value.
    """
    defaults = RetrievalConfig()
    weights = {p: dict(zip(COMPONENTS, defaults.purpose_weights[p].as_tuple(), strict=True))
               for p in Purpose}
    layer_weights = {p: dict(defaults.layer_weights[p]) for p in Purpose}
    policy = dict(defaults.layer_policy)
    changes: dict[str, Any] = {}
    for var, target in RETRIEVAL_ENV_VARS.items():
        if var not in env:
            continue
        raw = env[var]
        kind, _, rest = target.partition(":")
        if kind == "weight":
            purpose, component = rest.split(":")
            weights[Purpose(purpose)][component] = _parse_in(var, raw, 0.0, math.inf)
        elif kind == "layer_weight":
            purpose, layer = rest.split(":")
            layer_weights[Purpose(purpose)][Layer(layer)] = _parse_in(var, raw, 0.0, 1.0)
        elif kind == "layers":
            policy[Purpose(rest)] = _parse_layers(var, raw)
        elif target == "semantic_blend_layers":
            changes[target] = _parse_layers(var, raw)
        else:
            changes[target] = _parse(var, raw, type(getattr(defaults, target)))
    purpose_weights = {}
    for purpose, values in weights.items():
        if not any(values.values()):
            raise ConfigInvalid(_weight_var(purpose, "*"), values,
                                "at least one weight of the purpose must be > 0")
        purpose_weights[purpose] = ScoringWeights.from_mapping(values)
    try:
        return dataclasses.replace(defaults, purpose_weights=purpose_weights,
                                   layer_weights=layer_weights, layer_policy=policy, **changes)
    except ConfigInvalid as exc:
        var = next((v for v, f in _RETRIEVAL_SCALARS.items() if f == exc.field), exc.field)
        raise _rename(exc, var) from exc


def _parse_in(var: str, raw: str, low: float, high: float) -> float:
    """A number in ``low..high`` from variable ``var``."""
    value = float(_parse(var, raw, float))
    if not low <= value <= high:
        bound = f">= {low:g}" if math.isinf(high) else f"in {low:g}..{high:g}"
        raise ConfigInvalid(var, raw, f"must be a number {bound}")
    return value


def _parse_layers(var: str, raw: str) -> frozenset[Layer]:
    """A comma-separated list of layer names from variable ``var``."""
    names = [part.strip().lower() for part in raw.split(",") if part.strip()]
    known = {layer.value: layer for layer in Layer}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        reason = (f"unknown layer {unknown[0]!r}" if unknown else "must list at least one layer")
        raise ConfigInvalid(var, raw, f"{reason}; layers: {', '.join(known)}")
    return frozenset(known[name] for name in names)


def dedup_config_from_env(env: Mapping[str, str]) -> DedupConfig:
    """Build a :class:`DedupConfig` from ``MEMORY_DEDUP_*`` / ``MEMORY_SURPRISE_*`` variables."""
    defaults = DedupConfig()
    thresholds = dict(defaults.thresholds)
    changes: dict[str, Any] = {}
    for var, name in _DEDUP_ENV.items():
        if var not in env:
            continue
        if name in ("human", "agent", "auto"):
            thresholds[TrustTier(name)] = _parse(var, env[var], float)
        elif name == "related_top_k":
            changes[name] = _parse(var, env[var], int)
        else:
            changes[name] = _parse(var, env[var], float)
    try:
        return dataclasses.replace(defaults, thresholds=thresholds, **changes)
    except ConfigInvalid as exc:
        var = next((v for v, n in _DEDUP_ENV.items() if exc.field.endswith(n)), exc.field)
        raise _rename(exc, var) from exc


# -- the engine's whole configuration ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the engine is configured with; built once by the app and passed down."""

    memory: MemoryConfig = field(default_factory=MemoryConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    sampling_rate: float = 1.0
    redaction: bool = False
    slow_mo_ms: float = 0.0
    """seed 001 slow-mo: pause between the stages of a headless ``MemoryEngine.ingest``."""

    def __post_init__(self) -> None:
        if not isinstance(self.slow_mo_ms, int | float) or not 0.0 <= self.slow_mo_ms < 60_000:
            raise ConfigInvalid("slow_mo_ms", self.slow_mo_ms,
                                "must be a number of milliseconds in 0..60000")


def engine_config_from_env(env: Mapping[str, str], *, sampling_rate: float = 1.0,
                           redaction: bool = False) -> EngineConfig:
    """An :class:`EngineConfig` from seed 002 ``MEMORY_*`` and dedup variables.

    Raises:
        ConfigInvalid: naming the variable and its bad value.
    """
    return EngineConfig(memory=memory_config_from_env(env), dedup=dedup_config_from_env(env),
                        sampling_rate=sampling_rate, redaction=redaction)
