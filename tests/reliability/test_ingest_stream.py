"""``ingest --stream`` read by another process that kills it: every line printed is committed.

The real command in a child process (token-Jaccard path), its stdout read line by line as it
runs; the store is then opened and checked against what was printed (issue 18: a caller of a
killed ``ingest`` could not tell what was committed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.memory_engine import MemoryEngine
from engine.store import StoreSpec
from tests.reliability.driver import texts

ROOT = Path(__file__).resolve().parents[2]
LINES = 1200  # 5 chunks of the default 256
BATCH = 256


def _start(tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    """The command in a child; its stderr goes to ``tmp_path/stderr.txt`` (:func:`_finish`).

    Its stdout is read through the pipe's text wrapper only (``readline``, ``read``): mixing
    that with ``communicate``, which reads the raw pipe, would drop what the wrapper had
    already buffered.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "app.main", "--store", str(tmp_path / "store"),
             "--no-model", *argv], stdout=subprocess.PIPE, stderr=err, text=True, env=env,
            cwd=ROOT)


def _finish(child: subprocess.Popen[str], tmp_path: Path) -> tuple[str, str]:
    """The rest of the child's stdout and all its stderr, once it has ended."""
    assert child.stdout is not None
    out = child.stdout.read()
    child.stdout.close()
    child.wait(timeout=600)
    return out, (tmp_path / "stderr.txt").read_text(encoding="utf-8")


def _file(tmp_path: Path) -> str:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"content": t}) + "\n" for t in texts(LINES)),
                    encoding="utf-8")
    return str(path)


def _read_until(child: subprocess.Popen[str], count: int) -> list[dict[str, Any]]:
    assert child.stdout is not None
    seen: list[dict[str, Any]] = []
    while len(seen) < count:
        line = child.stdout.readline()
        assert line, f"the child ended after {len(seen)} lines: {child.wait()}"
        seen.append(json.loads(line))
    return seen


def _stored_ids(tmp_path: Path) -> set[str]:
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=None)
    try:
        snapshot = engine.store.view.snapshot()
        return {snapshot.ids[row] for row in snapshot.live_rows.tolist()}
    finally:
        engine.close()


@pytest.mark.slow
def test_every_streamed_line_survives_sigkill(tmp_path: Path) -> None:
    path = _file(tmp_path)
    child = _start(tmp_path, "ingest", path, "--stream")
    try:
        streamed = _read_until(child, BATCH + 1)  # the second chunk has committed
    finally:
        child.kill()
        _finish(child, tmp_path)
    stored = _stored_ids(tmp_path)
    assert all(d["action"] == "inserted" for d in streamed)
    missing = [d["line"] for d in streamed if d["id"] not in stored]
    assert not missing, f"lines printed as committed but not stored: {missing[:10]}"
    assert len(stored) < LINES  # the kill landed mid-run
    print(f"killed after {len(streamed)} streamed lines; {len(stored)} records stored")
    # a second run completes the file: what was stored is recognised, nothing is doubled
    rerun = _start(tmp_path, "--json", "ingest", path)
    out, err = _finish(rerun, tmp_path)
    assert rerun.returncode == 0, err
    counts = json.loads(out)["counts"]
    assert counts["skipped"] == len(stored) and counts["inserted"] == LINES - len(stored)


@pytest.mark.slow
def test_sigterm_stops_between_memories_and_says_where(tmp_path: Path) -> None:
    path = _file(tmp_path)
    child = _start(tmp_path, "ingest", path, "--stream")
    streamed = _read_until(child, 1)  # the first chunk has committed
    child.send_signal(signal.SIGTERM)
    out, err = _finish(child, tmp_path)
    assert child.returncode == 130, err
    assert "Traceback" not in err
    streamed += [json.loads(line) for line in out.splitlines()]
    summary = streamed.pop()["summary"]
    assert summary["cancelled"] is True and summary["error"] is None
    stopped = summary["stopped_at_line"]
    assert [d["line"] for d in streamed] == list(range(1, stopped))  # every line before it
    assert stopped % BATCH == 1  # at a chunk boundary: the chunk in progress was not written
    assert _stored_ids(tmp_path) == {d["id"] for d in streamed}
    assert f"lines before {stopped} were committed" in err
    print(f"SIGTERM: stopped at line {stopped}, {len(streamed)} lines committed")


@pytest.mark.slow
def test_a_full_disk_mid_ingest_reports_the_committed_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ingest --json`` on a store that fills its 6 MiB filesystem part way: the error
    document carries every committed line and the line it stopped at (mount rights needed,
    as for tests/reliability/test_disk.py)."""
    from app.cli import run_cli
    from tests.reliability.test_disk import _mount, _umount

    path = _file(tmp_path)
    small = tmp_path / "small"
    small.mkdir()
    _mount("-t", "tmpfs", "-o", "size=6m", "tmpfs", str(small))
    try:
        env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
               "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
        code = run_cli(["--store", str(small / "store"), "--no-model", "--json", "ingest",
                        path], env)
        out, err = capsys.readouterr()
        assert code == 1 and "Traceback" not in err, err
        document = json.loads(out)
        assert document["error"]["code"] == "STORE_UNAVAILABLE", document["error"]
        stopped = document["stopped_at_line"]
        committed = document["results"]
        assert committed, "the disk filled before the first chunk"
        assert [r["line"] for r in committed] == list(range(1, stopped))
        assert f"lines before {stopped} were committed" in document["error"]["message"]
        _mount("-o", "remount,size=256m", str(small))
        engine = MemoryEngine.open(StoreSpec(str(small / "store")), embedder=None)
        try:
            missing = [r["line"] for r in committed if r["id"] not in engine.store.view]
        finally:
            engine.close()
        assert not missing, f"reported committed but not stored: {missing[:10]}"
        print(f"disk full at line {stopped}: {document['error']['message']}")
    finally:
        _umount(small)
