"""Compaction through the configured provider (issue 23), against the real loopback server.

The lifecycle takes a summarizer through its own protocol; :class:`CompactionSummarizer` adapts
the gateway's :class:`Summarizer` to it. These tests run the whole path: the lifecycle's
assembled prompt → gateway → HTTP on 127.0.0.1 → summary record; and the two ways it falls back
to the heuristic summarizer (the provider failing, the budget saying no), with their events.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.events import Event
from engine.lifecycle import TaskStatus
from engine.llm import CompactionSummarizer, Summarizer
from engine.memory_engine import MemoryEngine
from tests.engine.llm.conftest import MakeRig, episodes, open_engine
from tests.engine.retrieval.conftest import write
from tests.support.llm_server import Behaviour, LLMTestServer

SUMMARY = "Alice and Bob meet at the cafe to talk about jazz, day after day."


def _events(eng: MemoryEngine, kind: str) -> list[Event]:
    return [e for e in eng.events.query() if e.kind == kind]


def test_compaction_uses_the_configured_provider(tmp_path: Path, server: LLMTestServer,
                                                 make_rig: MakeRig) -> None:
    server.script(Behaviour(content=f"  {SUMMARY}\n"))
    rig = make_rig("openai")
    eng = open_engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        write(eng, episodes(6))
        summarizer = CompactionSummarizer(Summarizer(rig.gateway, eng.events))
        report = eng.compact("a", summarizer=summarizer)[0]
        [task] = report.tasks
        assert (task.status, task.summarizer) == (TaskStatus.COMPLETED, "llm:openai")
        summary = eng.get(report.summaries[0])
        assert summary.content == SUMMARY
        assert summary.metadata["summarizer"] == "llm:openai"
        assert summary.source == "compaction:llm:openai"
        assert sorted(summary.metadata["source_ref_ids"]) == [f"r{i:03d}" for i in range(4)]
        # The lifecycle's seed 002 §8 prompt went over HTTP, with its events list.
        [request] = server.requests
        sent = json.dumps(request.body)
        assert "Events (4," in sent and "Alice met Bob at the cafe on day 3" in sent
        assert _events(eng, "memory:summarization:fallback") == []
        assert _events(eng, "llm:fallback") == []
        assert [r["purpose"] for r in rig.rows("llm_calls")] == ["summarize"]
    finally:
        eng.close()


def test_failing_provider_falls_back_to_the_heuristic_with_its_events(
        tmp_path: Path, server: LLMTestServer, make_rig: MakeRig) -> None:
    server.script(*[Behaviour(kind="status", status=500)] * 2)
    rig = make_rig("openai", max_attempts=2)
    eng = open_engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        write(eng, episodes(6))
        report = eng.compact("a", summarizer=CompactionSummarizer(
            Summarizer(rig.gateway, eng.events)))[0]
        [task] = report.tasks
        assert (task.status, task.summarizer) == (TaskStatus.COMPLETED, "heuristic")
        summary = eng.get(report.summaries[0])
        assert summary.content.startswith("Summary of 4 episodes")
        assert summary.metadata["summarizer"] == "heuristic"
        assert len(server.requests) == 2  # both attempts reached the server
        [llm_fallback] = _events(eng, "llm:fallback")
        assert llm_fallback.decision_reason == "provider_error"
        assert llm_fallback.payload["records"] == 4
        [fallback] = _events(eng, "memory:summarization:fallback")
        assert (fallback.decision_reason or "").startswith("ProviderError")
    finally:
        eng.close()


def test_spent_budget_falls_back_without_calling_the_provider(
        tmp_path: Path, server: LLMTestServer, make_rig: MakeRig) -> None:
    # A budget smaller than any call's upper bound: the gateway refuses before sending.
    rig = make_rig("openai", daily_budget_usd=1e-9)
    eng = open_engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        write(eng, episodes(6))
        report = eng.compact("a", summarizer=CompactionSummarizer(
            Summarizer(rig.gateway, eng.events)))[0]
        assert report.tasks[0].summarizer == "heuristic"
        assert eng.get(report.summaries[0]).content.startswith("Summary of 4 episodes")
        assert server.requests == []
        [llm_fallback] = _events(eng, "llm:fallback")
        assert llm_fallback.decision_reason == "budget_exceeded"
        [fallback] = _events(eng, "memory:summarization:fallback")
        assert (fallback.decision_reason or "").startswith("BudgetExceeded")
    finally:
        eng.close()


def test_empty_answer_falls_back(tmp_path: Path, server: LLMTestServer,
                                 make_rig: MakeRig) -> None:
    server.script(Behaviour(content="   "))
    rig = make_rig("anthropic")
    eng = open_engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        write(eng, episodes(6))
        summarizer = CompactionSummarizer(Summarizer(rig.gateway, eng.events))
        assert summarizer.name == "llm:anthropic"
        report = eng.compact("a", summarizer=summarizer)[0]
        assert report.tasks[0].summarizer == "heuristic"
        [llm_fallback] = _events(eng, "llm:fallback")
        assert llm_fallback.decision_reason == "empty_answer"
    finally:
        eng.close()
