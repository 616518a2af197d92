"""No command shows a traceback for bad input; ingest says what it committed (issue 18).

Through the real argument parser, in-process (token-Jaccard path), except where the behaviour
is the process's own: a closed stdout pipe and the streaming mode read by another process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.memory_engine import MemoryEngine
from tests.app.conftest import Runner
from tests.reliability.driver import texts

ROOT = Path(__file__).resolve().parents[2]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_ingest_keeps_good_lines_around_hostile_ones(cli: Runner, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "m.jsonl", [
        {"content": "Noor waters the ferns on Fridays"},
        {"content": "lone \ud800 surrogate"},
        {"content": "far future", "created_at": 1e30},
        {"content": "Noor's bike is the green one by the door"},
    ])
    code, out, err = cli("--json", "ingest", path)
    assert code == 1 and "Traceback" not in err
    results = json.loads(out)["results"]
    assert [(r["line"], r["action"]) for r in results] == [
        (1, "inserted"), (2, "error"), (3, "error"), (4, "inserted")]
    assert results[1]["reason"].startswith("content: lone surrogate U+D800 at character 6")
    assert results[2]["reason"].startswith("created_at: must be a time in the years 1970..9999")
    code, out, _ = cli("ingest", path)
    assert f"{path}:2: content: lone surrogate U+D800 at character 6" in out


@pytest.mark.parametrize("argv", [
    ("add", "an argument that was not UTF-8: \udcff"),  # how Python decodes such argv bytes
    ("add", "a memory", "--ttl", "1e30"),
])
def test_add_refuses_hostile_input_with_the_input_code(cli: Runner,
                                                       argv: tuple[str, ...]) -> None:
    code, out, err = cli("--json", *argv)
    assert code == 1 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["code"] == "MEMORY_INPUT_INVALID"
    assert error["message"].split(":")[0] in ("text", "expires_at")


@pytest.mark.parametrize(("argv", "named"), [
    (("fate", "x\udcff"), "id"),
    (("events", "--kind", "k\udcff"), "--kind"),
    (("events", "--record", "r\udcff"), "--record"),
    (("search", "when is lunch", "--agent", "a\udcff"), "--agent"),
    (("compact", "--agent", "a\udcff"), "--agent"),
])
def test_text_arguments_that_are_not_utf8_are_input_errors(
        cli: Runner, argv: tuple[str, ...], named: str) -> None:
    """Bytes in argv that are not UTF-8 arrive as lone surrogates: as an id, agent or kind
    they used to reach SQLite and crash with UnicodeEncodeError."""
    assert cli("add", "Lunch is at noon on weekdays")[0] == 0
    code, out, err = cli("--json", *argv)
    assert code == 1 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["code"] == "MEMORY_INPUT_INVALID"
    assert error["message"].startswith(f"{named}: lone surrogate U+DCFF at character 2")


def test_a_path_that_is_not_utf8_still_works(cli: Runner, tmp_path: Path) -> None:
    """A file name may be any bytes on POSIX: paths are not checked as text."""
    path = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    _jsonl(path, [{"content": "Ren bakes sourdough on Saturdays"}])
    code, out, _ = cli("--json", "ingest", str(path))
    assert code == 0 and json.loads(out)["counts"]["inserted"] == 1
    record = json.loads(cli("--json", "get", json.loads(out)["results"][0]["id"])[1])
    assert record["source"] == "import:caf\ufffd.jsonl"


def test_deep_conversation_is_an_input_error(cli: Runner, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    code, out, err = cli("--json", "import-conversation", str(deep))
    assert code == 1 and "Traceback" not in err
    assert json.loads(out)["error"] == {
        "code": "MEMORY_INPUT_INVALID",
        "message": f"{deep}: file: not JSON: nested too deeply"}


def test_an_unexpected_exception_is_a_crash_report(cli: Runner, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a bug in the engine")

    monkeypatch.setattr(MemoryEngine, "import_jsonl", broken)
    path = _jsonl(tmp_path / "m.jsonl", [{"content": "x"}])
    code, out, err = cli("--json", "ingest", path)
    assert code == 70 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["code"] == "INTERNAL_ERROR"
    report = Path(error["crash_report"])
    assert report.parent == tmp_path / "data" / "crash"
    assert str(report) in error["message"] and str(report) in err
    text = report.read_text(encoding="utf-8")
    assert "Traceback" in text and "a bug in the engine" in text and "command:  ingest" in text


def test_a_bug_part_way_still_reports_the_committed_lines(
        cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second chunk (lines 257..) hits a bug: the first chunk's 256 lines are committed
    and reported beside the INTERNAL_ERROR, in the document and on the stream."""
    from engine.ingest.pipeline import IngestPipeline

    decide = IngestPipeline._decide_chunk

    def second_chunk_breaks(self: IngestPipeline, chunk: Any, vectors: Any, start: int,
                            *args: Any, **kwargs: Any) -> Any:
        if start > 0:
            raise ZeroDivisionError("a bug in the second chunk")
        return decide(self, chunk, vectors, start, *args, **kwargs)

    monkeypatch.setattr(IngestPipeline, "_decide_chunk", second_chunk_breaks)
    path = _jsonl(tmp_path / "m.jsonl", [{"content": t} for t in texts(300)])
    code, out, err = cli("--json", "ingest", path)
    assert code == 70 and "Traceback" not in err
    document = json.loads(out)
    assert document["error"]["code"] == "INTERNAL_ERROR"
    assert [r["line"] for r in document["results"]] == list(range(1, 257))
    assert json.loads(cli("--json", "stats")[1])["records"] == 256
    code, out, _ = cli("ingest", path, "--stream")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 70 and len(lines) == 257  # 256 skipped as duplicates now, then the summary
    assert lines[-1]["summary"]["error"]["code"] == "INTERNAL_ERROR"
    assert lines[-1]["summary"]["counts"]["skipped"] == 256


def test_stream_prints_each_line_then_a_summary(cli: Runner, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "m.jsonl", [
        {"content": "Ivo keeps his passport in the blue folder"},
        {"content": "broken", "created_at": -5},
        {"content": "Ivo's flight leaves from gate 12"},
    ])
    code, out, _ = cli("ingest", path, "--stream")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [(d["line"], d["action"]) for d in lines[:3]] == [
        (1, "inserted"), (2, "error"), (3, "inserted")]
    assert lines[3] == {"summary": {
        "counts": {"inserted": 2, "updated": 0, "skipped": 0, "merged": 0, "deferred": 0,
                   "error": 1},
        "cancelled": False, "stopped_at_line": None, "error": None}}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT),
            "MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
            "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}


def test_a_closed_stdout_ends_quietly(cli: Runner, tmp_path: Path) -> None:
    """``mnemoscope review list | head``: the reader is gone before the output is written."""
    for text in ("The gym opens at 6am", "The gym opens at 7am"):  # one item to list
        assert cli("add", text)[0] == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.main", "--store", str(tmp_path / "store"), "--no-model",
             "review", "list"],
            stdout=write_end, stderr=subprocess.PIPE, env=_env(tmp_path), cwd=ROOT,
            check=False, timeout=300)
    finally:
        os.close(write_end)
    assert done.stderr.decode() == ""
    assert done.returncode == 141
