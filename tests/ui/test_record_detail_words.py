"""The record detail's Provenance & links tab counts in words ("1 unique source")."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from engine import RecordDetail
from engine.records import MemoryRecord, NewMemory, ProvenanceEntry
from ui.records.record_detail import RecordDetailPanel

NOW_MS = 1_790_000_000_000.0


@pytest.mark.parametrize(("sources", "heading"), [
    (("chat",), "Provenance (1 unique source)"),
    (("chat", "notes"), "Provenance (2 unique sources)"),
])
def test_provenance_heading_counts_sources_in_words(qtbot: QtBot, sources: tuple[str, ...],
                                                    heading: str) -> None:
    record = MemoryRecord.create(NewMemory("Sam prefers aisle seats", source=sources[0]),
                                 now_ms=NOW_MS)
    extra = tuple(ProvenanceEntry(source, record.content_hash, NOW_MS) for source in sources[1:])
    record = record.replace(provenance=record.provenance + extra)
    panel = RecordDetailPanel()
    qtbot.addWidget(panel)
    panel.show_detail(RecordDetail(record=record, decayed_importance=record.importance,
                                   merged_from=(), related=(), events=(), edits=()))
    assert record.unique_sources == len(sources)
    assert panel.links_view.toPlainText().splitlines()[0] == heading
