"""A Chroma server that stops answering (SIGSTOP) gives a clear error, never a hang (issue 18).

The server is a real ``chroma run`` on loopback; it is stopped with SIGSTOP, so its port still
accepts connections (the kernel completes them) but nothing answers: the case chromadb's
timeout-less HTTP session waited on forever. The store's timeouts are set short (2 s) here;
each failing call must raise :class:`StoreTimeout` naming the server and the timeout, and an
ingest must say what it committed and that a re-run resumes — which the test then does.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from app.cli import run_cli
from engine.errors import StoreTimeout
from engine.ingest import IngestPolicy
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import MemoryStore, StoreSpec
from tests.reliability.driver import texts
from tests.support.chroma_server import chroma_process
from tests.support.fakes import HashingEmbedder

TIMEOUT_S = 2.0
RECORDS = 200
CHUNK = 100
STOP_AT = 150  # inside the second chunk, before its write


def _spec(url: str) -> StoreSpec:
    return StoreSpec(url, collection="stalled", connect_timeout_s=TIMEOUT_S,
                     read_timeout_s=TIMEOUT_S)


def _timed(call: object) -> tuple[StoreTimeout, float]:
    started = time.monotonic()
    with pytest.raises(StoreTimeout) as caught:
        call()  # type: ignore[operator]
    return caught.value, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.timeout(180)  # the old client never returned; this bounds the test, not the figure
def test_a_stopped_server_times_out_with_a_clear_error_and_a_rerun_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [NewMemory(text, agent_id="stalled") for text in texts(RECORDS)]
    ledger = tmp_path / "ledger.sqlite3"
    with chroma_process(tmp_path / "chroma") as (url, process):
        engine = MemoryEngine.open(_spec(url), ledger_path=ledger, embedder=HashingEmbedder())
        engine.set_ingest_policy(IngestPolicy(batch_size=CHUNK))

        def progress(done: int, _total: int) -> None:
            if done == STOP_AT:
                os.kill(process.pid, signal.SIGSTOP)

        try:
            # a write: the second chunk's upsert meets the stopped server
            write, write_s = _timed(lambda: engine.ingest_batch(items, progress=progress))
            # a read by id goes to Chroma (the view holds no documents of other processes)
            ids = list(engine.store.view.snapshot().ids[:5])
            read, read_s = _timed(lambda: engine.store.read_by_id(ids))
            # opening the store anew: the connection is accepted, the heartbeat never answered
            opening, open_s = _timed(lambda: MemoryStore.open(_spec(url)))
            # the CLI, with the timeouts from its environment: the error document, exit 1
            capsys.readouterr()
            env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
                   "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data"),
                   "MNEMOSCOPE_STORE_CONNECT_TIMEOUT_S": "2",
                   "MNEMOSCOPE_STORE_READ_TIMEOUT_S": "2"}
            cli_code = run_cli(["--store", url, "--collection", "stalled", "--no-model",
                                "--json", "list"], env)
            cli_out = capsys.readouterr().out
        finally:
            process.send_signal(signal.SIGCONT)
            engine.close()
        print(f"\nStoreTimeout after: write {write_s:.2f} s, read {read_s:.2f} s, "
              f"open {open_s:.2f} s (timeouts {TIMEOUT_S:g} s)")

        for error, action, elapsed in ((write, f"writing {CHUNK} records to {url}", write_s),
                                       (read, f"reading {url}", read_s),
                                       (opening, f"connecting to {url}", open_s)):
            message = str(error)
            assert message.startswith(f"{action} failed: the Chroma server at {url} did not "
                                      f"answer within 2 s"), message
            assert error.server == url and error.timeout_s == TIMEOUT_S
            assert error.code == "STORE_TIMEOUT"
            assert elapsed >= TIMEOUT_S  # the timeout ended the wait, not something else
        assert cli_code == 1
        assert json.loads(cli_out)["error"] == {"code": "STORE_TIMEOUT",
                                                "message": str(opening)}
        assert write.phase == "read" and write.in_flight == CHUNK
        # what the ingest had committed, and that a re-run resumes
        assert write.committed == CHUNK and write.total == RECORDS
        assert (f"the server may still store the {CHUNK} records in flight" in str(write))
        assert (f"{CHUNK} of {RECORDS} memories were committed before this (whole chunks); "
                "re-running the same input resumes" in str(write)), str(write)

        # the server continues; the re-run completes the input without a duplicate. The chunk
        # in flight may have been stored after SIGCONT: it is then skipped like the first one.
        engine = MemoryEngine.open(_spec(url), ledger_path=ledger, embedder=HashingEmbedder())
        try:
            engine.set_ingest_policy(IngestPolicy(batch_size=CHUNK))
            retry = engine.ingest_batch(items)
            hashes = Counter(str(h) for h in engine.store.view.snapshot().hashes)
            count = engine.count()
        finally:
            engine.close()
        assert retry.counts["skipped"] >= CHUNK
        assert retry.counts["inserted"] + retry.counts["skipped"] == RECORDS
        assert count == RECORDS and max(hashes.values()) == 1
