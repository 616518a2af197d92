"""The public surface of ``engine.llm`` is what the issue promises, and is cheap to import."""

from __future__ import annotations

import subprocess
import sys

import engine.clock
import engine.llm

PROMISED = {"merge_confidence", "repair_json", "CircuitBreaker", "BudgetTracker",
            "ExponentialBackoff", "TokenProjector", "StreamingAssembler",
            "select_salient_messages", "DeterministicClock", "DeterministicRNG"}


def test_promised_names_are_exported() -> None:
    assert set(engine.llm.__all__) >= PROMISED
    for name in engine.llm.__all__:
        assert getattr(engine.llm, name) is not None


def test_clock_classes_are_the_same_objects() -> None:
    assert engine.llm.DeterministicClock is engine.clock.DeterministicClock
    assert engine.llm.DeterministicRNG is engine.clock.DeterministicRNG


def test_event_kinds() -> None:
    assert (engine.llm.EVENT_CALL, engine.llm.EVENT_RETRY, engine.llm.EVENT_BREAKER,
            engine.llm.EVENT_THROTTLE, engine.llm.EVENT_BUDGET_ALERT,
            engine.llm.EVENT_FALLBACK) == ("llm:call", "llm:retry", "llm:breaker",
                                           "llm:throttle", "llm:budget-alert", "llm:fallback")


def test_import_is_light() -> None:
    code = ("import sys, engine.llm; heavy = [m for m in ('torch', 'chromadb', "
            "'sentence_transformers', 'PySide6', 'json_repair', 'keyring') if m in sys.modules];"
            " print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""
