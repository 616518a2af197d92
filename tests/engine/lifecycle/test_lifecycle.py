"""Expiry, seed 004 pruning modes, retention caps and seed 002 §8 compaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.clock import DeterministicClock
from engine.config import MemoryConfig, RetentionPolicy
from engine.errors import SummaryLocked
from engine.lifecycle import HeuristicSummarizer, PruneMode, TaskStatus, assemble_prompt
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Layer, MemoryRecord
from engine.store import StoreSpec
from tests.engine.retrieval.conftest import NOW, HashEmbedder, make_record, write


def _engine(path: Path, **memory: Any) -> MemoryEngine:
    config = EngineConfig(memory=dataclasses.replace(MemoryConfig(), **memory))
    return MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(NOW),
                             embedder=HashEmbedder(), config=config)


def test_prune_modes_and_dry_run(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s")
    try:
        records = [make_record(i, f"fact number {i}", importance=0.2 + i * 0.05, age_days=1)
                   for i in range(10)]
        records.append(make_record(10, "expired fact", age_days=2, expires_in_days=-1))
        records.append(make_record(11, "ancient fact", importance=0.5, age_days=400))
        write(eng, records)
        gentle = eng.prune(PruneMode.GENTLE, dry_run=True)
        assert gentle.selection.ids == ("r010",)
        normal = eng.prune("normal", dry_run=True)
        assert normal.selection.reasons == {"r010": "expired", "r011": "low_importance"}
        aggressive = eng.prune("aggressive", dry_run=True)
        # + floor(12 × 10%) = 1 more: the lowest decayed importance of the rest
        assert aggressive.selection.reasons["r000"] == "bottom_decile"
        assert len(aggressive.selection) == 3
        assert eng.count() == 12  # dry runs change nothing
        done = eng.prune("normal")
        assert eng.count() == 10
        assert done.remaining == 10
        assert eng.metrics()["aggregate"]["pruned"] == 2
        assert [e.kind for e in eng.events.query()].count("memory:record:expired") == 1
    finally:
        eng.close()


def test_expire_and_retention_caps(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", retention_policy=RetentionPolicy(semantic_max=3,
                                                                   social_max=None))
    try:
        write(eng, [make_record(i, f"semantic fact {i}", importance=i / 10) for i in range(5)]
              + [make_record(5, "gone", age_days=2, expires_in_days=-1, layer=Layer.SOCIAL)])
        assert eng.expire(dry_run=True).selection.ids == ("r005",)
        assert eng.expire().remaining == 5
        report = eng.enforce_retention()
        assert set(report.selection.ids) == {"r000", "r001"}  # the least important go
        assert report.selection.by_reason() == {"retention:semantic": 2}
        assert eng.count() == 3
    finally:
        eng.close()


def _episodes(count: int) -> list[MemoryRecord]:
    return [make_record(i, f"Alice met Bob at the cafe on day {i}. They talked about jazz.",
                        layer=Layer.EPISODIC, importance=0.3, age_days=count - i + 1,
                        tags=("cafe",)) for i in range(count)]


def test_compaction_reduces_keeps_recent_and_references_sources(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_keep_recent=3, summarization_batch_size=25)
    try:
        write(eng, _episodes(10))
        preview = eng.compact("a", dry_run=True)[0]
        assert eng.count() == 10
        assert preview.tasks[0].status is TaskStatus.QUEUED
        report = eng.compact("a")[0]  # no summarizer configured → the heuristic one
        assert report.removed == 7
        assert eng.count() == 10 - 7 + 1
        summary = eng.get(report.summaries[0])
        assert summary.layer is Layer.SEMANTIC
        assert sorted(summary.metadata["source_ref_ids"]) == [f"r{i:03d}" for i in range(7)]
        assert summary.metadata["summarizer"] == "heuristic"
        assert summary.content.startswith("Summary of 7 episodes")
        kept = {f"r{i:03d}" for i in range(7, 10)}  # the 3 most recent stay untouched
        assert all(r in eng.store.view for r in kept)
        tasks = eng.summarization_tasks("a")
        assert tasks[0].status is TaskStatus.COMPLETED
        assert tasks[0].summary_record_id == summary.id
        kinds = [e.kind for e in eng.events.query()]
        assert {"memory:summarization:queued", "memory:summarization:completed",
                "memory:compaction"} <= set(kinds)
    finally:
        eng.close()


class _Failing:
    name = "llm"

    def summarize(self, records: Sequence[MemoryRecord], prompt: str) -> str:
        raise ConnectionError("provider unreachable")


def test_failing_summarizer_falls_back_to_the_heuristic(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_keep_recent=2)
    try:
        write(eng, _episodes(6))
        report = eng.compact("a", summarizer=_Failing())[0]
        assert report.tasks[0].status is TaskStatus.COMPLETED
        assert report.tasks[0].summarizer == "heuristic"
        assert eng.get(report.summaries[0]).metadata["summarizer"] == "heuristic"
    finally:
        eng.close()


def test_concurrent_compaction_is_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_keep_recent=1)
    caught: list[SummaryLocked] = []

    class Reentrant:
        name = "reentrant"

        def summarize(self, records: Sequence[MemoryRecord], prompt: str) -> str:
            try:
                eng.compact("a")
            except SummaryLocked as exc:
                caught.append(exc)
            return "Alice and Bob met at the cafe several times."

    try:
        write(eng, _episodes(4))
        report = eng.compact("a", summarizer=Reentrant())[0]
        assert caught
        assert caught[0].code == "MEMORY_SUMMARY_LOCKED"
        assert report.tasks[0].summarizer == "reentrant"
    finally:
        eng.close()


def test_prompt_and_heuristic_summary_are_deterministic() -> None:
    records = _episodes(3)
    prompt = assemble_prompt(records, "a")
    assert "Events (3" in prompt
    assert "thematic synthesis" in prompt
    text = HeuristicSummarizer().summarize(records, prompt)
    assert text == HeuristicSummarizer().summarize(list(reversed(records)), prompt)
    assert "about alice, bob, cafe" in text
    assert "day 2" in text


def test_compaction_skips_lone_groups(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_keep_recent=0)
    try:
        write(eng, [make_record(0, "A lone episode.", layer=Layer.EPISODIC, age_days=5)])
        report = eng.compact("a")[0]
        assert report.tasks[0].status is TaskStatus.SKIPPED
        assert eng.count() == 1
    finally:
        eng.close()


@pytest.mark.parametrize("mode", ["gentle", "normal", "aggressive"])
def test_prune_on_an_empty_store(tmp_path: Path, mode: str) -> None:
    eng = _engine(tmp_path / mode)
    try:
        assert len(eng.prune(mode).selection) == 0
    finally:
        eng.close()


def test_compact_if_due_respects_episodic_max_and_interval(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_max=6, episodic_keep_recent=2,
                  summarization_batch_size=3, summarization_min_interval_ms=60_000)
    try:
        write(eng, _episodes(5))
        assert eng.compact_if_due() == []  # 5 <= episodic_max: not due
        write(eng, [make_record(20 + i, f"Bob went hiking on trail {i}. It rained.",
                                layer=Layer.EPISODIC, importance=0.3, age_days=30 + i,
                                tags=("hike",)) for i in range(5)])
        reports = eng.compact_if_due()
        assert len(reports) == 1 and reports[0].removed > 0
        assert reports[0].remaining <= 6
        assert eng.compact_if_due() == []  # within the minimum interval
    finally:
        eng.close()
