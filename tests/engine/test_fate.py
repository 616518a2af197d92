"""Record fate from the ledger (issue 9): merged, pruned, compacted, alive with a forecast."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from engine.clock import DeterministicClock
from engine.config import MemoryConfig
from engine.decay import MS_PER_DAY, decayed_importance
from engine.fate import mass_retirements, record_fate
from engine.ingest.kinds import Action
from engine.lifecycle.pruning import LOW_IMPORTANCE
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Layer, NewMemory
from engine.store import StoreSpec
from tests.engine.ingest.conftest import TableEmbedder
from tests.engine.retrieval.conftest import NOW, HashEmbedder, make_record, write


def _engine(path: Path, embedder: Any = None, **memory: Any) -> MemoryEngine:
    config = EngineConfig(memory=dataclasses.replace(MemoryConfig(), **memory))
    return MemoryEngine.open(StoreSpec(str(path)), clock=DeterministicClock(NOW),
                             embedder=embedder or HashEmbedder(), config=config)


def test_merged_record_names_the_survivor_with_similarity(tmp_path: Path) -> None:
    table = TableEmbedder()
    stored, paraphrase = "Bob takes his coffee black", "Bob always has black coffee"
    table.pair(stored, paraphrase, 0.92)  # the human tier merges from 0.90
    eng = _engine(tmp_path / "s", table)
    try:
        first = eng.ingest(NewMemory(stored))
        second = eng.ingest(NewMemory(paraphrase))
        assert second.action is Action.MERGED and first.record is not None
        fate = record_fate(eng, second.incoming_id)
        assert fate.status == "merged"
        assert fate.survivor_id == first.record.id
        merged = [s for s in fate.steps if s.kind == "merged_into"]
        assert merged and merged[0].similarity is not None
        assert abs(merged[0].similarity - 0.92) < 1e-3
        assert merged[0].threshold is not None and merged[0].threshold <= 0.92
        assert first.record.id in merged[0].text
        assert "similarity 0.920 ≥ threshold" in merged[0].text
        survivor = record_fate(eng, first.record.id)
        assert survivor.status == "alive"
        assert any(s.kind == "absorbed" and s.related_id == second.incoming_id
                   for s in survivor.steps)
    finally:
        eng.close()


def test_pruned_and_forecast(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s")
    try:
        write(eng, [make_record(0, "fresh fact", importance=0.5, age_days=1),
                    make_record(1, "ancient fact", importance=0.5, age_days=400)])
        alive = record_fate(eng, "r000")
        forecast = alive.forecast
        assert alive.status == "alive" and forecast is not None
        assert not forecast.already_below and forecast.below_at is not None
        record = eng.get("r000")
        at = decayed_importance(record.importance, record.created_at, record.access_count,
                                forecast.below_at, 30.0)
        assert abs(float(at) - LOW_IMPORTANCE) < 1e-9  # the forecast is the crossing
        assert forecast.below_at > NOW + 100 * MS_PER_DAY
        eng.prune("normal")
        gone = record_fate(eng, "r001")
        assert gone.status == "pruned"
        assert gone.forecast is None
        assert "floor" in gone.steps[-1].text
    finally:
        eng.close()


def test_compacted_into_summary_and_mass_warning(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "s", episodic_keep_recent=1, summarization_batch_size=25)
    try:
        write(eng, [make_record(i, f"Alice met Bob at the cafe on day {i}.",
                                layer=Layer.EPISODIC, importance=0.3, age_days=10 - i)
                    for i in range(6)])
        report = eng.compact("a")[0]
        fate = record_fate(eng, "r000", mass_limit=3)
        assert fate.status == "compacted"
        assert fate.survivor_id == report.summaries[0]
        assert fate.warnings and fate.warnings[0].count == 5
        assert record_fate(eng, "r000", mass_limit=5).warnings == ()
        assert any(m.count == 5 for m in mass_retirements(eng, 3))
        assert record_fate(eng, "never-seen").status == "unknown"
    finally:
        eng.close()


def test_the_comparison_sign_matches_the_numbers(tmp_path: Path) -> None:
    """Issue 19: a gray-zone deferral is *below* the threshold; the story used to say "≥"."""
    table = TableEmbedder()
    stored, gray = "Bob takes his coffee black", "Bob takes his coffee black with sugar"
    table.pair(stored, gray, 0.75)  # human tier threshold 0.80, gray zone 0.10 below it
    eng = _engine(tmp_path / "s", table)
    try:
        first = eng.ingest(NewMemory(stored))
        second = eng.ingest(NewMemory(gray))
        assert second.action is Action.DEFERRED and first.record is not None
        deferred = [s for s in record_fate(eng, second.incoming_id).steps
                    if s.kind == "deferred"]
        assert deferred and deferred[0].similarity is not None \
            and deferred[0].threshold is not None
        assert deferred[0].similarity < deferred[0].threshold
        assert f"similarity 0.750 < threshold {deferred[0].threshold:.3f}" in deferred[0].text
        assert "≥" not in deferred[0].text
    finally:
        eng.close()
