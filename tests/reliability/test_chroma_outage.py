"""The Chroma server stops in the middle of an ingest and comes back on the same path and port."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

from engine.errors import StoreUnavailable
from engine.ingest import IngestPolicy
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.reliability.driver import texts
from tests.support.chroma_server import chroma_server, free_port
from tests.support.fakes import HashingEmbedder

RECORDS = 600
CHUNK = 100
STOP_AT = 350  # inside the fourth chunk


def _hash_counts(url: str, collection: str, ledger: Path) -> tuple[int, Counter[str]]:
    engine = MemoryEngine.open(StoreSpec(url, collection=collection), ledger_path=ledger,
                               embedder=HashingEmbedder())
    try:
        snapshot = engine.store.view.snapshot()
        return engine.count(), Counter(str(h) for h in snapshot.hashes)
    finally:
        engine.close()


@pytest.mark.slow
def test_outage_is_reported_nothing_half_written_and_a_retry_completes(tmp_path: Path) -> None:
    data, port, collection = tmp_path / "chroma", free_port(), "outage"
    items = [NewMemory(text, agent_id="outage") for text in texts(RECORDS)]
    with ExitStack() as server:
        url = server.enter_context(chroma_server(data, port=port))
        engine = MemoryEngine.open(StoreSpec(url, collection=collection),
                                   ledger_path=tmp_path / "ledger.sqlite3",
                                   embedder=HashingEmbedder())
        engine.set_ingest_policy(IngestPolicy(batch_size=CHUNK))

        def progress(done: int, total: int) -> None:
            if done == STOP_AT:
                server.close()  # terminate `chroma run` while the chunk is being decided

        try:
            with pytest.raises(StoreUnavailable) as caught:
                engine.ingest_batch(items, progress=progress)
        finally:
            engine.close()
    # the outage is reported, naming the server, and says nothing was changed
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "nothing was changed" in message, message
    # ... and what the ingest had committed, and that a re-run resumes (issue 18)
    assert (caught.value.committed, caught.value.total) == (3 * CHUNK, RECORDS)
    assert message.endswith(f"; {3 * CHUNK} of {RECORDS} memories were committed before this "
                            "(whole chunks); re-running the same input resumes: the committed "
                            "ones are skipped as exact duplicates"), message

    with chroma_server(data, port=port) as url:
        count, hashes = _hash_counts(url, collection, tmp_path / "check.sqlite3")
        # whole chunks only: the three committed chunks, nothing of the one that failed
        assert count == 3 * CHUNK
        assert max(hashes.values()) == 1
        engine = MemoryEngine.open(StoreSpec(url, collection=collection),
                                   ledger_path=tmp_path / "ledger.sqlite3",
                                   embedder=HashingEmbedder())
        try:
            retry = engine.ingest_batch(items)  # the retry: same input, from the start
        finally:
            engine.close()
        assert retry.counts["inserted"] == RECORDS - 3 * CHUNK
        assert retry.counts["skipped"] == 3 * CHUNK  # the committed ones are exact duplicates
        count, hashes = _hash_counts(url, collection, tmp_path / "check.sqlite3")
        assert count == RECORDS and max(hashes.values()) == 1
