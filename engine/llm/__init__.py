"""The LLM gateway: real providers behind backoff, circuit breaker, rate projection and budget.

Seed 000's algorithms, each in its own module and importable from here under its Python name:

=========================  ==========================================  =================
name                       what                                        seed 000
=========================  ==========================================  =================
``merge_confidence``       harmonic-mean confidence merge, 6 dp        §5
``repair_json``            token-aware JSON repair with safety limits  §7, §12
``CircuitBreaker``         closed / open / half-open state machine     §4
``BudgetTracker``          daily budget, UTC-midnight window, alerts   §6
``ExponentialBackoff``     capped exponential delays + RNG jitter      §2
``TokenProjector``         token projection and the 80 % throttle      §3
``StreamingAssembler``     streaming assembly state machine            §8
``select_salient_messages`` salience selection, RNG tie-break          §1
``DeterministicClock/RNG`` test clock and LCG (same objects as          §10
                           :mod:`engine.clock`)
=========================  ==========================================  =================

On top: :class:`LLMGateway` (providers over httpx: OpenAI-compatible and Anthropic, streaming),
:class:`Extractor` (conversation → validated memory candidates) and :class:`Summarizer`
(compaction summaries; :class:`CompactionSummarizer` is it as the lifecycle's compaction
summarizer), both falling back to local heuristics and saying why;
:func:`check_connection` (one small real request that says in plain words whether provider
settings work) and the settings' file form, presets and key stores (:mod:`engine.llm.settings`).
"""

from engine.clock import DeterministicClock, DeterministicRNG
from engine.llm.backoff import BackoffConfig, ExponentialBackoff
from engine.llm.breaker import BreakerState, CircuitBreaker, CircuitConfig
from engine.llm.budget import BudgetDecision, BudgetTracker
from engine.llm.confidence import fold_confidence, merge_confidence
from engine.llm.connection import EVENT_CONNECTION_TEST, ConnectionCheck, check_connection
from engine.llm.errors import (
    BudgetExceeded,
    CircuitOpen,
    InvalidModelOutput,
    KeyringUnavailable,
    LLMError,
    ProviderError,
    ProviderNotConfigured,
    RateLimited,
)
from engine.llm.extractor import (
    SCHEMA_VERSION,
    Conversation,
    ConversationTurn,
    ExtractionResult,
    Extractor,
    FieldRepair,
    InvalidItem,
    MemoryCandidate,
    load_conversation,
    parse_conversation,
    validate_extraction,
)
from engine.llm.gateway import (
    EVENT_BREAKER,
    EVENT_BUDGET_ALERT,
    EVENT_CALL,
    EVENT_FALLBACK,
    EVENT_RETRY,
    EVENT_THROTTLE,
    GatewayStatus,
    LLMGateway,
)
from engine.llm.latency import LatencySummary
from engine.llm.persistence import BreakerTransition, LLMActivity, LLMCall, llm_activity
from engine.llm.projection import (
    ProjectionResult,
    RateLimiter,
    TokenProjector,
    token_limit_for_window,
)
from engine.llm.providers import ChatMessage, ChatRequest, ChatResponse, LLMProvider, Usage
from engine.llm.repair import repair_json
from engine.llm.salience import SalienceConfig, SelectionResult, select_salient_messages
from engine.llm.settings import (
    PROVIDER_PRESETS,
    KeyringStore,
    LLMSettings,
    ModelPrice,
    ProviderKind,
    ProviderPreset,
    SecretStore,
    env_overrides,
    key_lookup,
    llm_settings_from_env,
    llm_settings_from_json,
    llm_settings_to_json,
    preset_name,
)
from engine.llm.streaming import StreamEvent, StreamingAssembler
from engine.llm.summarizer import CompactionSummarizer, Summarizer, SummaryResult

__all__ = [
    "EVENT_BREAKER",
    "EVENT_BUDGET_ALERT",
    "EVENT_CALL",
    "EVENT_CONNECTION_TEST",
    "EVENT_FALLBACK",
    "EVENT_RETRY",
    "EVENT_THROTTLE",
    "PROVIDER_PRESETS",
    "SCHEMA_VERSION",
    "BackoffConfig",
    "BreakerState",
    "BreakerTransition",
    "BudgetDecision",
    "BudgetExceeded",
    "BudgetTracker",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "CircuitBreaker",
    "CircuitConfig",
    "CircuitOpen",
    "CompactionSummarizer",
    "ConnectionCheck",
    "Conversation",
    "ConversationTurn",
    "DeterministicClock",
    "DeterministicRNG",
    "ExponentialBackoff",
    "ExtractionResult",
    "Extractor",
    "FieldRepair",
    "GatewayStatus",
    "InvalidItem",
    "InvalidModelOutput",
    "KeyringStore",
    "KeyringUnavailable",
    "LLMActivity",
    "LLMCall",
    "LLMError",
    "LLMGateway",
    "LLMProvider",
    "LLMSettings",
    "LatencySummary",
    "MemoryCandidate",
    "ModelPrice",
    "ProjectionResult",
    "ProviderError",
    "ProviderKind",
    "ProviderNotConfigured",
    "ProviderPreset",
    "RateLimited",
    "RateLimiter",
    "SalienceConfig",
    "SecretStore",
    "SelectionResult",
    "StreamEvent",
    "StreamingAssembler",
    "Summarizer",
    "SummaryResult",
    "TokenProjector",
    "Usage",
    "check_connection",
    "env_overrides",
    "fold_confidence",
    "key_lookup",
    "llm_activity",
    "llm_settings_from_env",
    "llm_settings_from_json",
    "llm_settings_to_json",
    "load_conversation",
    "merge_confidence",
    "parse_conversation",
    "preset_name",
    "repair_json",
    "select_salient_messages",
    "token_limit_for_window",
    "validate_extraction",
]
