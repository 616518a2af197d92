import pytest

from engine.config import (
    COMPONENTS,
    DEFAULT_PURPOSE_WEIGHTS,
    DEFAULT_REDACT_PATTERNS,
    RETRIEVAL_ENV_VARS,
    DedupConfig,
    MemoryConfig,
    PressureState,
    Purpose,
    RetentionPolicy,
    RetrievalConfig,
    ScoringWeights,
    Strategy,
    dedup_config_from_env,
    memory_config_from_env,
)
from engine.errors import ConfigInvalid
from engine.records import Layer, TrustTier


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


@pytest.mark.parametrize(
    ("raw", "pattern"),
    [
        ("EMAIL, [unclosed", "[unclosed"),
        ("EMAIL,PHONEBOOK", "PHONEBOOK"),
        ("EMP-\\d{3,5}, (a|)", "(a|)"),  # matches the empty string
        (r"EMP-(\d+", r"EMP-(\d+"),
    ],
)
def test_bad_redact_pattern_fails_at_load_naming_variable_and_pattern(raw: str,
                                                                      pattern: str) -> None:
    with pytest.raises(ConfigInvalid) as info:
        memory_config_from_env({"MEMORY_REDACT_PATTERNS": raw})
    assert info.value.code == "MEMORY_CONFIG_INVALID"
    assert info.value.field == "MEMORY_REDACT_PATTERNS"
    assert info.value.value == pattern
    assert str(info.value).startswith("MEMORY_REDACT_PATTERNS: ")
    assert repr(pattern) in str(info.value)


def test_bad_redact_pattern_in_code_fails_too() -> None:
    with pytest.raises(ConfigInvalid, match=r"redact_patterns: .*'\[a-'"):
        MemoryConfig(redact_patterns=("EMAIL", "[a-"))


def test_redact_patterns_keep_commas_inside_expressions() -> None:
    config = memory_config_from_env({
        "MEMORY_REDACT_PATTERNS": r"EMAIL, EMP-\d{3,5}, ticket [#,]\d+, (?:a,b|c)x, \,z, PHONE"})
    assert config.redact_patterns == (
        "EMAIL", r"EMP-\d{3,5}", r"ticket [#,]\d+", "(?:a,b|c)x", r"\,z", "PHONE")


def test_default_redact_patterns_are_the_redactors() -> None:
    from engine.redaction import DEFAULT_PATTERNS

    assert DEFAULT_REDACT_PATTERNS == DEFAULT_PATTERNS == MemoryConfig().redact_patterns


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


def test_retrieval_weights_come_from_env_variables() -> None:
    config = memory_config_from_env({
        "MEMORY_RETRIEVAL_WEIGHT_DIALOG_RECENCY": "0.5",
        "MEMORY_RETRIEVAL_LAYER_WEIGHT_NAVIGATION_SOCIAL": "0.9",
        "MEMORY_RETRIEVAL_LAYERS_SUMMARY": "episodic, Semantic",
        "MEMORY_RETRIEVAL_STRATEGY_SHARE": "0.6",
        "MEMORY_RETRIEVAL_CONTEXT_NEIGHBOURS": "3",
        "MEMORY_RETRIEVAL_DATE_TOLERANCE_MS": "0",
        "MEMORY_RETRIEVAL_SEMANTIC_BLEND": "0.25",
        "MEMORY_RETRIEVAL_SEMANTIC_BLEND_LAYERS": "episodic,social",
        "MEMORY_RETRIEVAL_PROVEN_RECORDS": "0",
    }).retrieval
    assert config.purpose_weights[Purpose.DIALOG].recency == 0.5
    # the purpose's other weights keep their defaults
    assert config.purpose_weights[Purpose.DIALOG].semantic == \
        DEFAULT_PURPOSE_WEIGHTS[Purpose.DIALOG].semantic
    assert config.purpose_weights[Purpose.REASONING] == DEFAULT_PURPOSE_WEIGHTS[Purpose.REASONING]
    assert config.layer_weights[Purpose.NAVIGATION][Layer.SOCIAL] == 0.9
    assert config.layer_policy[Purpose.SUMMARY] == {Layer.EPISODIC, Layer.SEMANTIC}
    assert (config.strategy_share, config.context_neighbours) == (0.6, 3)
    assert (config.date_tolerance_ms, RetrievalConfig().date_tolerance_ms) == (0.0, 86_400_000.0)
    assert config.semantic_blend == 0.25
    assert config.semantic_blend_layers == {Layer.EPISODIC, Layer.SOCIAL}
    assert RetrievalConfig().semantic_blend_layers == {Layer.EPISODIC}
    assert (config.proven_records, RetrievalConfig().proven_records) == (0, 10)
    assert config.weights_for(Purpose.DIALOG, Strategy.RECENCY, PressureState.NORMAL).recency \
        == pytest.approx(0.6)
    assert memory_config_from_env({}).retrieval == RetrievalConfig()


def test_every_retrieval_weight_has_a_variable() -> None:
    weights = [v for v in RETRIEVAL_ENV_VARS if v.startswith("MEMORY_RETRIEVAL_WEIGHT_")]
    assert len(weights) == len(Purpose) * len(COMPONENTS)
    assert "MEMORY_RETRIEVAL_WEIGHT_SUMMARY_SPEAKER" in RETRIEVAL_ENV_VARS
    assert "MEMORY_RETRIEVAL_WEIGHT_DIALOG_DATE" in RETRIEVAL_ENV_VARS
    assert "MEMORY_RETRIEVAL_LAYER_WEIGHT_DIALOG_SYSTEM" in RETRIEVAL_ENV_VARS


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORY_RETRIEVAL_WEIGHT_REASONING_SEMANTIC": "-0.1"},
         "MEMORY_RETRIEVAL_WEIGHT_REASONING_SEMANTIC: must be a number >= 0"),
        ({"MEMORY_RETRIEVAL_WEIGHT_DIALOG_LEXICAL": "heavy"},
         "MEMORY_RETRIEVAL_WEIGHT_DIALOG_LEXICAL: must be a number"),
        ({"MEMORY_RETRIEVAL_LAYER_WEIGHT_SUMMARY_EPISODIC": "1.5"},
         "MEMORY_RETRIEVAL_LAYER_WEIGHT_SUMMARY_EPISODIC: must be a number in 0..1"),
        ({"MEMORY_RETRIEVAL_LAYERS_DIALOG": "semantic,dreams"},
         "MEMORY_RETRIEVAL_LAYERS_DIALOG: unknown layer 'dreams'"),
        ({"MEMORY_RETRIEVAL_BM25_B": "1.2"}, "MEMORY_RETRIEVAL_BM25_B: must be in 0.0..1.0"),
        ({"MEMORY_RETRIEVAL_CONTEXT_NEIGHBOURS": "-1"},
         "MEMORY_RETRIEVAL_CONTEXT_NEIGHBOURS: must be an integer >= 0"),
        ({"MEMORY_RETRIEVAL_SOFT_IMPORTANCE_FACTOR": "0"},
         "MEMORY_RETRIEVAL_SOFT_IMPORTANCE_FACTOR: must be a number > 0"),
        ({"MEMORY_RETRIEVAL_SEMANTIC_BLEND": "1.5"},
         r"MEMORY_RETRIEVAL_SEMANTIC_BLEND: must be in 0\.0\.\.1\.0"),
        ({"MEMORY_RETRIEVAL_SEMANTIC_BLEND": "some"},
         "MEMORY_RETRIEVAL_SEMANTIC_BLEND: must be a number"),
        ({"MEMORY_RETRIEVAL_SEMANTIC_BLEND_LAYERS": "episodic,dreams"},
         "MEMORY_RETRIEVAL_SEMANTIC_BLEND_LAYERS: unknown layer 'dreams'"),
        ({"MEMORY_RETRIEVAL_PROVEN_RECORDS": "-1"},
         "MEMORY_RETRIEVAL_PROVEN_RECORDS: must be an integer >= 0"),
        ({"MEMORY_RETRIEVAL_DATE_TOLERANCE_MS": "-1"},
         "MEMORY_RETRIEVAL_DATE_TOLERANCE_MS: must be a number >= 0"),
        ({f"MEMORY_RETRIEVAL_WEIGHT_SUMMARY_{c.upper()}": "0" for c in COMPONENTS},
         r"MEMORY_RETRIEVAL_WEIGHT_SUMMARY_\*: at least one weight"),
        ({"MEMORY_RETRIEVAL_WEIGHT_REASONING_SEMANTICS": "1"},
         "MEMORY_RETRIEVAL_WEIGHT_REASONING_SEMANTICS: unknown setting"),
    ],
)
def test_bad_retrieval_variables_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigInvalid, match=message):
        memory_config_from_env(env)


def test_retrieval_config_validates_direct_construction() -> None:
    with pytest.raises(ConfigInvalid, match="purpose_weights: missing purpose"):
        RetrievalConfig(purpose_weights={Purpose.REASONING: ScoringWeights()})
    with pytest.raises(ConfigInvalid, match=r"layer_policy\.dialog: must allow a layer"):
        RetrievalConfig(layer_policy={**{p: frozenset(Layer) for p in Purpose},
                                      Purpose.DIALOG: frozenset()})
    with pytest.raises(ConfigInvalid, match=r"weights\.lexical: must be a number >= 0"):
        ScoringWeights(lexical=float("nan"))
