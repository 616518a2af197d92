"""The ledger, the settings file and exports survive a crash mid-write.

Settings and exports are written to a temp file in the same folder, fsynced and renamed over
the target (``app.settings.atomic_write_text``, ``engine.ingest.jsonl``); the ledger is SQLite
in WAL mode (a transaction is all or nothing). Each is checked by killing a writer process
with SIGKILL at random moments (seeded) or by failing the write part-way.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import StoreUnavailable
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]
KILLS = 4

SETTINGS_WRITER = """
import sys
from pathlib import Path
from app.settings import Settings, save_settings
folder = Path(sys.argv[1])
stores = tuple(f"/stores/{i:04d}" * 8 for i in range(400))  # ~20 KB per write
for n in range(10**9):
    rate = 0.25 if n % 2 else 0.75
    save_settings(Settings(sampling_rate=rate, recent_stores=stores), config_dir=folder)
    print(f"saved {n}", flush=True)
"""

LEDGER_WRITER = """
import sys
from engine.ledger import Ledger
ledger = Ledger(sys.argv[1])
ledger.migrate("crashtest", ["CREATE TABLE rows (run INTEGER, txn INTEGER, part INTEGER, "
                             "pad TEXT)"])
run = int(sys.argv[2])
for n in range(10**9):
    with ledger.transaction() as conn:
        conn.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)",
                         [(run, n, part, "x" * 2000) for part in range(3)])
    print(f"committed {n}", flush=True)
"""


def _kill_writer(code: str, arg: Path, rng: random.Random, *, min_acks: int = 3,
                 extra: tuple[str, ...] = ()) -> int:
    """Run ``code`` as a child; SIGKILL it after a random moment; acknowledged count."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", code, str(arg), *extra], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    acks = 0
    try:
        target = min_acks + rng.randrange(0, 40)
        for _line in child.stdout:
            acks += 1
            if acks >= target:
                time.sleep(rng.uniform(0.0, 0.05))  # land anywhere inside a later write
                break
        child.send_signal(signal.SIGKILL)
        acks += sum(1 for _ in child.stdout)
    finally:
        child.kill()
        child.wait()
        errors = child.stderr.read()
        child.stdout.close()
        child.stderr.close()
    assert acks >= min_acks, f"the writer did not get going: {errors[-1500:]}"
    return acks


def test_settings_file_is_never_torn_by_a_kill(tmp_path: Path) -> None:
    from app.settings import load_settings

    rng = random.Random(11)
    for trial in range(KILLS):
        folder = tmp_path / f"config{trial}"
        _kill_writer(SETTINGS_WRITER, folder, rng)
        settings = load_settings({}, config_dir=folder)  # parses: never half a file
        assert settings.sampling_rate in (0.25, 0.75)
        assert len(settings.recent_stores) == 400


def test_ledger_transactions_are_all_or_nothing_across_kills(tmp_path: Path) -> None:
    rng = random.Random(12)
    path = tmp_path / "ledger.sqlite3"
    for run in range(KILLS):
        acknowledged = _kill_writer(LEDGER_WRITER, path, rng, extra=(str(run),))
        conn = sqlite3.connect(path)  # reopen after the kill, WAL recovery included
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            per_txn = conn.execute("SELECT run, txn, COUNT(*) FROM rows GROUP BY run, txn"
                                   ).fetchall()
        finally:
            conn.close()
        assert all(count == 3 for _, _, count in per_txn), "half a transaction survived"
        committed = sum(1 for r, _, _ in per_txn if r == run)
        # every acknowledged transaction is durable; at most the one in flight is extra
        assert acknowledged <= committed <= acknowledged + 1, (run, acknowledged, committed)
        assert {r for r, _, _ in per_txn} == set(range(run + 1))


def test_failed_export_leaves_the_previous_file_intact(tmp_path: Path) -> None:
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=HashingEmbedder())
    try:
        engine.ingest_batch([NewMemory(f"export record {i} w{i}a w{i}b", agent_id="x")
                             for i in range(20)])
        target = tmp_path / "out.jsonl"
        assert engine.export_jsonl(target) == 20
        previous = target.read_bytes()
        calls = [0]

        def failing(text: str) -> str:
            calls[0] += 1
            if calls[0] > 10:
                raise OSError(errno.EIO, "simulated I/O error half-way through the export")
            return text

        with pytest.raises(StoreUnavailable, match="half-way") as caught:
            engine.export_jsonl(target, redact=failing)
        assert str(target) in str(caught.value)
        assert target.read_bytes() == previous
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
        lines = [json.loads(line) for line in previous.decode().splitlines()]
        assert len(lines) == 20
    finally:
        engine.close()
