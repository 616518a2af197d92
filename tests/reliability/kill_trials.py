"""kill -9 trials: SIGKILL a child ingesting records at a random moment, reopen, check.

Used by tests/reliability/test_kill_ingest.py (small) and scripts/reliability (long).

What is checked after each kill (see docs/reliability.md):

1. the store opens (embedded Chroma and the SQLite ledger, after an unclean exit);
2. every acknowledged record is there, once, with its embedding (recomputed and compared);
3. the ledger agrees with the store: every ``create`` row of the edit history names a stored
   record, and every acknowledged record has its ``create`` row. The engine writes the store
   first, then the ledger; a kill between the two can leave records of the *unacknowledged*
   chunk without history — counted as ``history_gaps`` and reported, never hidden;
4. a re-run of the whole input completes, stores every record exactly once, and a second
   re-run ingests nothing new (no duplicates).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.reliability.driver import texts

__all__ = ["TrialResult", "run_driver", "run_trial"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TrialResult:
    """What one trial saw.

    Attributes:
        acked: Records acknowledged before the kill.
        killed_after_s: Seconds from start to SIGKILL.
        stored_after_kill: Records in the store when reopened.
        missing: Acknowledged records not found (must be 0).
        duplicates: Content hashes stored more than once (must be 0).
        bad_vectors: Acknowledged records whose stored vector is missing or wrong (must be 0).
        orphan_edits: ``create`` rows naming no stored record (must be 0).
        acked_without_history: Acknowledged records without a ``create`` row (must be 0).
        history_gaps: Stored but unacknowledged records without a ``create`` row (reported).
        rerun_count: Records after the completing re-run (must equal the input size).
        second_rerun_inserted: Records the second re-run inserted (must be 0).
        errors: Anything else that went wrong (must be empty).
    """

    acked: int = 0
    killed_after_s: float = 0.0
    stored_after_kill: int = 0
    missing: int = 0
    duplicates: int = 0
    bad_vectors: int = 0
    orphan_edits: int = 0
    acked_without_history: int = 0
    history_gaps: int = 0
    rerun_count: int = 0
    second_rerun_inserted: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """All hard invariants held (history gaps are reported, not failures)."""
        return not (self.missing or self.duplicates or self.bad_vectors or self.orphan_edits
                    or self.acked_without_history or self.second_rerun_inserted
                    or self.errors)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return env


def run_driver(store: Path, count: int, *, batch: int = 256) -> list[str]:
    """Run the driver to completion; its output lines (raises if it fails)."""
    done = subprocess.run([sys.executable, "-m", "tests.reliability.driver", str(store),
                           str(count), "--batch", str(batch)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"driver exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.splitlines()


def _kill_during_ingest(store: Path, count: int, batch: int,
                        rng: random.Random) -> tuple[int, float]:
    """Start the driver, SIGKILL it at a random moment; (acknowledged count, seconds)."""
    chunks = max(2, (count + batch - 1) // batch)
    kill_after_acks = rng.randrange(0, chunks - 1)  # 0 = during the first chunk
    fraction = rng.random()  # where inside the next chunk: decisions, Chroma write, ledger
    began = time.monotonic()
    last = began
    child = subprocess.Popen([sys.executable, "-m", "tests.reliability.driver", str(store),
                              str(count), "--batch", str(batch)], cwd=ROOT, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert child.stdout is not None
    acked = 0
    acks = 0
    try:
        chunk_s = 1.0
        for line in child.stdout:
            now = time.monotonic()
            if line.startswith("ack "):
                acked = int(line.split()[1])
                acks += 1
                chunk_s = now - last  # how long the chunk took, to spread the kill over one
            last = now
            if (line.startswith("open") and kill_after_acks == 0) or (
                    line.startswith("ack ") and acks >= kill_after_acks):
                time.sleep(fraction * chunk_s)
                break
        child.send_signal(signal.SIGKILL)
        killed = time.monotonic() - began
        # acknowledgements printed before the kill landed still count
        for line in child.stdout:
            if line.startswith("ack "):
                acked = int(line.split()[1])
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    return acked, killed


def _check(store: Path, all_texts: list[str], acked: int, result: TrialResult) -> None:
    from engine.memory_engine import MemoryEngine
    from engine.store import StoreSpec
    from engine.text import content_hash
    from tests.support.fakes import HashingEmbedder

    embedder = HashingEmbedder()
    engine = MemoryEngine.open(StoreSpec(str(store)), embedder=embedder)
    try:
        snapshot = engine.store.view.snapshot()
        result.stored_after_kill = engine.count()
        hashes = Counter(str(h) for h in snapshot.hashes[: len(snapshot.ids)])
        result.duplicates = sum(1 for n in hashes.values() if n > 1)
        ids_by_hash = {}
        for text in all_texts[:acked]:
            ids = engine.store.view.ids_with_hash(content_hash(text))
            if not ids:
                result.missing += 1
                continue
            ids_by_hash[text] = ids[0]
        if ids_by_hash:
            expected = embedder.embed(list(ids_by_hash))
            for row, record_id in enumerate(ids_by_hash.values()):
                vector = engine.store.view.vector(record_id)
                if vector is None or not np.allclose(vector, expected[row], atol=1e-5):
                    result.bad_vectors += 1
        stored_ids = {str(i) for i in snapshot.ids[: len(snapshot.ids)]}
    finally:
        engine.close()
    ledger = sqlite3.connect(f"file:{store / 'mnemoscope-ledger.sqlite3'}?mode=ro", uri=True)
    try:
        created = {row[0] for row in ledger.execute(
            "SELECT record_id FROM edits WHERE op = 'create'")}
    finally:
        ledger.close()
    result.orphan_edits = len(created - stored_ids)
    acked_ids = set(ids_by_hash.values())
    result.acked_without_history = len(acked_ids - created)
    result.history_gaps = len((stored_ids - acked_ids) - created)


def run_trial(workdir: Path, count: int, rng: random.Random, *, batch: int = 256) -> TrialResult:
    """One trial in a fresh store under ``workdir``."""
    store = workdir / "store"
    result = TrialResult()
    all_texts = texts(count)
    try:
        result.acked, result.killed_after_s = _kill_during_ingest(store, count, batch, rng)
        _check(store, all_texts, result.acked, result)
        run_driver(store, count, batch=batch)          # the re-run completes the ingest
        check = TrialResult()
        _check(store, all_texts, count, check)
        result.rerun_count = check.stored_after_kill
        result.missing += check.missing
        result.duplicates += check.duplicates
        result.bad_vectors += check.bad_vectors
        result.orphan_edits += check.orphan_edits
        if result.rerun_count != count:
            result.errors.append(f"after the re-run the store holds {result.rerun_count} "
                                 f"records, expected {count}")
        lines = run_driver(store, count, batch=batch)  # a second re-run: nothing new
        result.second_rerun_inserted = sum(int(line.split()[2]) for line in lines
                                           if line.startswith("ack "))
    except Exception as exc:  # a trial reports every failure instead of stopping the series
        result.errors.append(f"{type(exc).__name__}: {exc}")
    return result
