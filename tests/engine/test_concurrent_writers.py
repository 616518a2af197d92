"""Two writers through one real Chroma server: no lost update (the optimistic-version rule)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.embedding import Vectors
from engine.errors import EditConflict
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder


class InterleavingEmbedder(HashingEmbedder):
    """Runs ``during`` while it embeds: another writer acting mid-edit."""

    def __init__(self) -> None:
        super().__init__()
        self.during: list[object] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        while self.during:
            action = self.during.pop()
            assert callable(action)
            action()
        return super().embed(texts)


@pytest.fixture
def writers(chroma_server_url: str, unique_collection: str,
            tmp_path: Path) -> Iterator[tuple[MemoryEngine, MemoryEngine, InterleavingEmbedder]]:
    spec = StoreSpec(chroma_server_url, collection=unique_collection)
    embedder = InterleavingEmbedder()
    a = MemoryEngine.open(spec, ledger_path=tmp_path / "a.sqlite3", embedder=embedder,
                          clock=DeterministicClock(1e12))
    b = MemoryEngine.open(spec, ledger_path=tmp_path / "b.sqlite3", embedder=HashingEmbedder(),
                          clock=DeterministicClock(1e12))
    yield a, b, embedder
    a.close()
    b.close()


def test_stale_edit_is_refused_and_nothing_is_lost(
        writers: tuple[MemoryEngine, MemoryEngine, InterleavingEmbedder]) -> None:
    a, b, _ = writers
    record = a.add(NewMemory(content="standup at 3pm", agent_id="team"))
    b.refresh()
    seen_by_a = a.get(record.id)
    b.update(record.id, {"importance": 0.9}, actor="b")
    with pytest.raises(EditConflict, match="version 2, edit based on 1"):
        a.update(record.id, {"tags": ["work"]}, actor="a", expected_version=seen_by_a.version)
    stored = b.get(record.id)
    assert stored.importance == 0.9 and stored.tags == () and stored.version == 2
    # Re-based on the current version, A's edit applies on top of B's: both survive.
    merged = a.update(record.id, {"tags": ["work"]}, actor="a", expected_version=2)
    assert merged.importance == 0.9 and merged.tags == ("work",) and merged.version == 3
    assert [(e.op, e.actor) for e in a.edit_history(record.id)] == [("update", "a"),
                                                                  ("create", "user")]
    assert [e.actor for e in b.edit_history(record.id)] == ["b"]


def test_a_write_landing_while_an_edit_is_prepared_is_detected(
        writers: tuple[MemoryEngine, MemoryEngine, InterleavingEmbedder]) -> None:
    a, b, embedder = writers
    record = a.add(NewMemory(content="the deploy runs on Fridays", agent_id="ops"))
    b.refresh()
    embedder.during.append(lambda: b.update(record.id, {"importance": 0.1}, actor="b"))
    with pytest.raises(EditConflict):
        a.update(record.id, {"content": "the deploy runs on Thursdays"}, actor="a")
    final = b.get(record.id)
    assert final.content == "the deploy runs on Fridays" and final.importance == 0.1


def test_refresh_sees_the_other_writers_records(
        writers: tuple[MemoryEngine, MemoryEngine, InterleavingEmbedder]) -> None:
    a, b, _ = writers
    b.add(NewMemory(content="written by b"))
    assert a.count() == 0
    assert a.refresh() == 1
    assert a.list_records().records[0].content == "written by b"
