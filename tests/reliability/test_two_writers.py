"""Two writers through one Chroma server hammer the same record: no lost update.

The rule (MemoryEngine.update, docs/reliability.md): an edit names the version it is based on;
if the stored version differs — before the edit is prepared or just before it is written —
the edit is refused with EditConflict and nothing is written; the writer re-reads and retries.
Every successful edit is in its writer's edit history. (tests/engine/test_concurrent_writers.py
covers the single-conflict cases; this is the sustained race.)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.errors import EditConflict
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from engine.store.chroma_store import CLAIM_PRUNE_EVERY_SECONDS
from tests.support.fakes import HashingEmbedder

EDITS_EACH = 15


@pytest.mark.slow
def test_concurrent_increments_lose_nothing(chroma_server_url: str, unique_collection: str,
                                            tmp_path: Path) -> None:
    spec = StoreSpec(chroma_server_url, collection=unique_collection)
    writers = [MemoryEngine.open(spec, ledger_path=tmp_path / f"{name}.sqlite3",
                                 embedder=HashingEmbedder(), clock=DeterministicClock(1e12))
               for name in ("a", "b")]
    try:
        record = writers[0].add(NewMemory("shared counter 0", agent_id="race"))
        conflicts = [0, 0]
        errors: list[BaseException] = []
        start = threading.Barrier(2)

        def hammer(index: int) -> None:
            engine = writers[index]
            try:
                start.wait()
                done = 0
                while done < EDITS_EACH:
                    engine.refresh()
                    current = engine.get(record.id)
                    count = int(current.content.rsplit(" ", 1)[1])
                    try:
                        engine.update(record.id, {"content": f"shared counter {count + 1}"},
                                      actor=f"writer{index}", expected_version=current.version)
                    except EditConflict:
                        conflicts[index] += 1
                        continue
                    done += 1
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not errors, errors
        writers[0].refresh()
        final = writers[0].get(record.id)
        # every successful edit counted once: no increment was overwritten
        assert final.content == f"shared counter {2 * EDITS_EACH}", (final.content, conflicts)
        assert final.version == 1 + 2 * EDITS_EACH
        histories = [[e for e in w.edit_history(record.id) if e.op == "update"]
                     for w in writers]
        assert [len(h) for h in histories] == [EDITS_EACH, EDITS_EACH]
        print(f"conflicts refused and retried: {conflicts}")
    finally:
        for engine in writers:
            engine.close()


@pytest.mark.slow
def test_a_dead_writers_claim_does_not_block_the_record(chroma_server_url: str,
                                                        unique_collection: str,
                                                        tmp_path: Path) -> None:
    spec = StoreSpec(chroma_server_url, collection=unique_collection)
    engine = MemoryEngine.open(spec, ledger_path=tmp_path / "w.sqlite3",
                               embedder=HashingEmbedder(), clock=DeterministicClock(1e12))
    try:
        record = engine.add(NewMemory("claimed then abandoned", agent_id="race"))
        # a writer claimed version 2 and died before writing it
        assert engine.store.claim_version(record.id, 2, "dead-writer")
        assert not engine.store.claim_version(record.id, 2, "live-writer")  # fresh: refused
        with pytest.raises(EditConflict):
            engine.update(record.id, {"importance": 0.3}, expected_version=1)
        # once the claim is stale it is replaced and the edit goes through
        assert engine.store.claim_version(record.id, 2, "live-writer", stale_after_s=0.0)
        assert not engine.store.claim_version(record.id, 2, "third", stale_after_s=3600.0)
    finally:
        engine.close()


@pytest.mark.slow
def test_claims_older_than_an_hour_are_pruned(chroma_server_url: str, unique_collection: str,
                                              tmp_path: Path) -> None:
    spec = StoreSpec(chroma_server_url, collection=unique_collection)
    engine = MemoryEngine.open(spec, ledger_path=tmp_path / "p.sqlite3",
                               embedder=HashingEmbedder(), clock=DeterministicClock(1e12))
    try:
        store = engine.store
        record = engine.add(NewMemory("edited over months", agent_id="prune"))
        for version in (2, 3):  # two real edits, each claimed
            engine.update(record.id, {"importance": 0.1 * version}, expected_version=version - 1)
        claims = store._claims_collection()
        now = time.time()
        claims.add(ids=["old@2", "old@3"], documents=["a", "b"], embeddings=[[1.0], [1.0]],
                   metadatas=[{"at": now - 7200.0}, {"at": now - 3700.0}])
        assert set(claims.get()["ids"]) == {f"{record.id}@2", f"{record.id}@3", "old@2",
                                           "old@3"}
        store.prune_claims()
        assert set(claims.get()["ids"]) == {f"{record.id}@2", f"{record.id}@3"}  # recent kept
        store.prune_claims(older_than_s=0.0)
        assert claims.get()["ids"] == []
        # claim_version prunes by itself, at most every CLAIM_PRUNE_EVERY_SECONDS
        claims.add(ids=["old@4"], documents=["c"], embeddings=[[1.0]],
                   metadatas=[{"at": now - 7200.0}])
        assert store.claim_version(record.id, 4, "writer")
        assert "old@4" in claims.get()["ids"]  # pruned a moment ago: not yet again
        store._claims_pruned_at -= CLAIM_PRUNE_EVERY_SECONDS
        assert store.claim_version(record.id, 5, "writer")
        assert set(claims.get()["ids"]) == {f"{record.id}@4", f"{record.id}@5"}
    finally:
        engine.close()
