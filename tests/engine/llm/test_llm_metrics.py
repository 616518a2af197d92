"""Seed 000 ``memory_llm_*`` metrics (issue 23): gateway, restart, and the engine's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import LLMError
from engine.ledger import Ledger
from engine.llm import ChatMessage, ChatRequest, CircuitConfig, CompactionSummarizer, Summarizer
from tests.engine.llm.conftest import MakeRig, episodes, open_engine
from tests.engine.retrieval.conftest import write
from tests.support.llm_server import Behaviour, LLMTestServer

HI = ChatRequest((ChatMessage("user", "hi"),), max_tokens=1)


def _by_operation(metrics: dict[str, object]) -> dict[tuple[str, str], int]:
    summary = metrics["memory_llm_latency_ms_summary"]
    assert isinstance(summary, dict)
    return {(row["provider"], row["operation"]): row["count"]
            for row in summary["by_operation"]}


def test_gateway_reports_seed_metrics_and_restores_them(server: LLMTestServer,
                                                        make_rig: MakeRig,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    server.default = Behaviour(input_tokens=1000, output_tokens=0)  # 0.001 USD per call
    rig = make_rig("openai", ledger=Ledger(path), daily_budget_usd=0.01, max_tokens=1,
                   max_attempts=1, circuit=CircuitConfig(window_size=4))
    fresh = rig.gateway.metrics()
    assert (fresh["memory_llm_circuit_state"], fresh["memory_llm_budget_utilization_percent"],
            fresh["memory_llm_budget_alerts_total"]) == (0, 0.0, {"70": 0, "90": 0, "100": 0})
    assert _by_operation(fresh) == {}
    for _ in range(7):
        rig.gateway.complete(HI, purpose="extract")
    rig.gateway.complete(HI, purpose="summarize")
    server.script(*[Behaviour("status", status=503)] * 2)
    for _ in range(2):
        with pytest.raises(LLMError):
            rig.gateway.complete(HI, purpose="summarize")
    metrics = rig.gateway.metrics()
    assert (metrics["configured"], metrics["provider"]) == (True, "openai")
    # seed 000 §4: 2 failures in a window of 4 opens the breaker (gauge value 1)
    assert (metrics["memory_llm_circuit_state"], metrics["circuit_state"]) == (1, "open")
    assert metrics["memory_llm_budget_utilization_percent"] == pytest.approx(80.0)
    assert metrics["memory_llm_budget_alerts_total"] == {"70": 1, "90": 0, "100": 0}
    assert _by_operation(metrics) == {("openai", "extract"): 7, ("openai", "summarize"): 3}
    summary = metrics["memory_llm_latency_ms_summary"]
    assert summary["all"]["count"] == 10
    assert set(summary["all"]) == {"p50", "p90", "p95", "p99", "min", "max", "mean", "count"}
    rig.ledger.close()

    # A new process over the same ledger (``mnemoscope metrics``) reports what was measured.
    again = make_rig("openai", ledger=Ledger(path), daily_budget_usd=0.01, max_tokens=1,
                     clock=rig.clock, circuit=CircuitConfig(window_size=4))
    restored = again.gateway.metrics()
    assert _by_operation(restored) == _by_operation(metrics)
    assert restored["memory_llm_budget_alerts_total"] == {"70": 1, "90": 0, "100": 0}
    assert restored["memory_llm_budget_utilization_percent"] == pytest.approx(80.0)
    assert restored["memory_llm_circuit_state"] == 1
    again.ledger.close()


def test_engine_metrics_carry_the_llm_block(tmp_path: Path, server: LLMTestServer,
                                            make_rig: MakeRig) -> None:
    eng = open_engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        empty = eng.metrics()["llm"]
        assert (empty["configured"], empty["memory_llm_circuit_state"]) == (False, 0)
        assert _by_operation(empty) == {}
        write(eng, episodes(6))
        server.script(Behaviour(content="Alice and Bob talk jazz at the cafe."))
        rig = make_rig("openai", ledger=eng.ledger)
        eng.compact("a", summarizer=CompactionSummarizer(Summarizer(rig.gateway, eng.events)))
        assert _by_operation(eng.metrics(rig.gateway)["llm"]) == {("openai", "summarize"): 1}
        # Without the gateway, the samples still come from the store's ledger.
        assert _by_operation(eng.metrics()["llm"]) == {("openai", "summarize"): 1}
    finally:
        eng.close()
