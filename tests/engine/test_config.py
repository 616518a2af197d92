import pytest

from engine.config import (
    DedupConfig,
    MemoryConfig,
    RetentionPolicy,
    dedup_config_from_env,
    memory_config_from_env,
)
from engine.errors import ConfigInvalid
from engine.records import TrustTier


def test_defaults_are_seed_002_section_21() -> None:
    config = memory_config_from_env({})
    assert config == MemoryConfig()
    assert (config.episodic_max, config.episodic_window_ms, config.summarization_batch_size,
            config.decay_half_life_ms, config.importance_boost, config.embedding_dim,
            config.max_context_tokens) == (1200, 900_000, 25, 3_600_000, 2.5, 384, 1800)
    assert config.retention_policy == RetentionPolicy(400, 300, 250)


def test_env_vars_are_read() -> None:
    config = memory_config_from_env({
        "MEMORY_EPISODIC_MAX": "50", "MEMORY_THROTTLE_COMPRESSION_RATIO": "0.4",
        "MEMORY_REDACT_PATTERNS": "EMAIL, UUID", "MEMORY_RETENTION_SOCIAL_MAX": "7",
    })
    assert config.episodic_max == 50
    assert config.throttle_compression_ratio == 0.4
    assert config.redact_patterns == ("EMAIL", "UUID")
    assert config.retention_policy.social_max == 7


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORY_EPISODIC_MAX": "lots"}, "MEMORY_EPISODIC_MAX: must be an integer"),
        ({"MEMORY_EPISODIC_MAX": "0"}, "MEMORY_EPISODIC_MAX: must be an integer >= 1"),
        ({"MEMORY_THROTTLE_COMPRESSION_RATIO": "1.5"}, "MEMORY_THROTTLE_COMPRESSION_RATIO"),
        ({"MEMORY_IMPORTANCE_BOOST": "nan"}, "MEMORY_IMPORTANCE_BOOST: must be a finite"),
        ({"MEMORY_RETENTION_SEMANTIC_MAX": "-3"}, "MEMORY_RETENTION_SEMANTIC_MAX"),
        ({"MEMORY_EPISODIC_MAXX": "3"}, "MEMORY_EPISODIC_MAXX: unknown setting"),
    ],
)
def test_bad_env_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigInvalid, match=message) as info:
        memory_config_from_env(env)
    assert info.value.code == "MEMORY_CONFIG_INVALID"


def test_dedup_config() -> None:
    config = DedupConfig()
    assert config.threshold(TrustTier.HUMAN) == 0.80
    assert config.threshold(TrustTier.AGENT) == 0.85
    assert config.threshold(TrustTier.AUTO) == 0.90
    changed = dedup_config_from_env({"MEMORY_DEDUP_THRESHOLD_AUTO": "0.93",
                                     "MEMORY_DEDUP_GRAY_ZONE": "0.05"})
    assert changed.threshold(TrustTier.AUTO) == 0.93 and changed.gray_zone == 0.05
    with pytest.raises(ConfigInvalid, match="MEMORY_DEDUP_THRESHOLD_HUMAN"):
        dedup_config_from_env({"MEMORY_DEDUP_THRESHOLD_HUMAN": "1.2"})
    with pytest.raises(ConfigInvalid, match="thresholds: missing tier"):
        DedupConfig(thresholds={TrustTier.HUMAN: 0.8})
