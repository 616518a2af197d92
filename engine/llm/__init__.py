"""LLM gateway placeholder"""
from engine.clock import DeterministicClock, DeterministicRNG
from engine.llm.backoff import ExponentialBackoff
from engine.llm.breaker import CircuitBreaker
from engine.llm.budget import BudgetTracker
from engine.llm.confidence import fold_confidence, merge_confidence
from engine.llm.projection import TokenProjector
from engine.llm.repair import repair_json
from engine.llm.salience import select_salient_messages
from engine.llm.streaming import StreamingAssembler
