"""Engine configuration: seed 002's ``MemoryConfig`` (§21 env vars) and the dedup settings.

Everything is a frozen dataclass validated at construction; a bad value raises
:class:`~engine.errors.ConfigInvalid` (``MEMORY_CONFIG_INVALID``) naming the field, or the
environment variable it came from, and the bad value. :func:`memory_config_from_env` reads the
seed 002 §21 variables; unknown ``MEMORY_*`` variables are reported rather than ignored, because a
misspelt setting that silently does nothing is worse than an error.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from engine.errors import ConfigInvalid
from engine.records import TrustTier

__all__ = [
    "ENV_VARS",
    "DedupConfig",
    "MemoryConfig",
    "RetentionPolicy",
    "dedup_config_from_env",
    "memory_config_from_env",
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
        redact_patterns: Named (EMAIL, UUID, NUMSEQ16, SECRETS) or regex patterns.
        retention_policy: Per-layer caps.
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
    redact_patterns: tuple[str, ...] = ("EMAIL", "UUID", "NUMSEQ16", "SECRETS")
    retention_policy: RetentionPolicy = field(default_factory=RetentionPolicy)

    def __post_init__(self) -> None:
        positive_ints = ("episodic_max", "summarization_batch_size", "embedding_dim",
                         "max_context_tokens", "decay_half_life_ms")
        for name in positive_ints:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigInvalid(name, value, "must be an integer >= 1")
        for name in ("episodic_window_ms", "summarization_min_interval_ms",
                     "episodic_keep_recent"):
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


_TIER_DEFAULTS = MappingProxyType({TrustTier.HUMAN: 0.80, TrustTier.AGENT: 0.85,
                                   TrustTier.AUTO: 0.90})


@dataclass(frozen=True, slots=True)
class DedupConfig:
    """Near-duplicate and merge settings (seed 001, seed 004, DESIGN decisions 2-5).

    Attributes:
        thresholds: Cosine threshold per trust tier (seed 001: 0.80 / 0.85 / 0.90).
        jaccard_thresholds: Token-Jaccard thresholds used while the model is unavailable.
        cross_category_threshold: Different categories merge only at or above this (seed 004).
        gray_zone: Width below a threshold that defers to review instead of dropping.
        surprise_threshold: Minimum surprise to store a new record (seed 004).
        related_top_k: How many ``related`` links a record keeps.
        exact_search_max: Partition size up to which search is exact numpy, else Chroma HNSW.
        source_contribution_cap: Max share one source may contribute to a merged confidence.
    """

    thresholds: Mapping[TrustTier, float] = field(default_factory=lambda: dict(_TIER_DEFAULTS))
    jaccard_thresholds: Mapping[TrustTier, float] = field(
        default_factory=lambda: {TrustTier.HUMAN: 0.60, TrustTier.AGENT: 0.65,
                                 TrustTier.AUTO: 0.70})
    cross_category_threshold: float = 0.95
    gray_zone: float = 0.10
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
})

_DEDUP_ENV: Mapping[str, str] = MappingProxyType({
    "MEMORY_DEDUP_THRESHOLD_HUMAN": "human",
    "MEMORY_DEDUP_THRESHOLD_AGENT": "agent",
    "MEMORY_DEDUP_THRESHOLD_AUTO": "auto",
    "MEMORY_DEDUP_GRAY_ZONE": "gray_zone",
    "MEMORY_SURPRISE_THRESHOLD": "surprise_threshold",
    "MEMORY_RELATED_TOP_K": "related_top_k",
})

# MEMORY_* variables owned by other subsystems (seed 000 §3: the primary LLM provider).
_OTHER_MEMORY_VARS = frozenset({"MEMORY_LLM_PRIMARY"})

_INT = re.compile(r"^[+-]?\d+$")


def _parse(var: str, raw: str, kind: type) -> Any:
    text = raw.strip()
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
        parts = tuple(p.strip() for p in text.split(",") if p.strip())
        if not parts:
            raise ConfigInvalid(var, raw, "must list at least one pattern")
        return parts
    raise AssertionError(f"unhandled kind {kind}")  # pragma: no cover - table is static


def _rename(exc: ConfigInvalid, var: str) -> ConfigInvalid:
    return ConfigInvalid(var, exc.value, exc.reason)


def memory_config_from_env(env: Mapping[str, str]) -> MemoryConfig:
    """Build a :class:`MemoryConfig` from seed 002 §21 environment variables.

    Raises:
        ConfigInvalid: naming the variable and the bad value; also for unknown ``MEMORY_*``
            names (a typo should not silently do nothing).
    """
    known = set(ENV_VARS) | set(_DEDUP_ENV) | _OTHER_MEMORY_VARS
    for name in env:
        if name.startswith("MEMORY_") and name not in known:
            raise ConfigInvalid(name, env[name], "unknown setting; see the README for the list")
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
    try:
        if retention:
            top["retention_policy"] = RetentionPolicy(**retention)
        return dataclasses.replace(defaults, **top)
    except ConfigInvalid as exc:
        var = next((v for v, p in ENV_VARS.items() if p.endswith(exc.field)), exc.field)
        raise _rename(exc, var) from exc


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
