"""CLI on collections written by mem0, LangChain and LlamaIndex (issue 22): ``list``,
``search``, ``stats``, ``doctor``, ``fate`` show their real fields; ``map-collection`` saves a
mapping for an unknown layout; ``adopt --into`` copies through the ingest pipeline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import run_cli
from tests.support import foreign_stores

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """``mnemoscope --store <tmp>/other --no-model ARGV…`` with a private config folder."""
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}

    def call(*argv: str) -> tuple[int, str, str]:
        code = run_cli(["--store", str(tmp_path / "other"), "--no-model", *argv], env)
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _json(result: tuple[int, str, str]) -> Any:
    code, out, err = result
    assert code == 0, err
    return json.loads(out)


def test_mem0_store_through_the_cli(tmp_path: Path, run: Run) -> None:
    ids = foreign_stores.write_mem0(tmp_path / "other")
    listed = _json(run("--collection", "mem0", "--json", "list"))
    rows = {(r["content"], r["agent_id"], r["created_at"])
            for r in listed["records"]}
    assert rows == {("Likes green tea in the morning", "travel-bot", "2024-05-01T15:15:00.000Z"),
                    ("Is allergic to peanuts", "bob", "2024-06-10T19:00:00.000Z"),
                    ("Likes green tea in the morning", "travel-bot", "2024-07-01T16:00:00.000Z")}
    found = _json(run("--collection", "mem0", "--json", "search", "peanuts", "--inspect"))
    first = found["records"][0]
    assert (first["content"], first["agent_id"]) == ("Is allergic to peanuts", "bob")
    stats = _json(run("--collection", "mem0", "--json", "stats"))
    assert stats["foreign_layout"] == {"layout": "mem0", "mapping": None,
                                       "vector_dimension": 384, "vectors_used": True}
    code, out, _ = run("--collection", "mem0", "stats")
    assert code == 0 and "layout:   mem0 layout" in out
    assert out.splitlines()[0].endswith("(embedded, another tool's collection: read-only)")
    code, out, _ = run("--collection", "mem0", "doctor")
    assert code == 0 and "foreign layout         mem0 layout" in out
    fate = _json(run("--collection", "mem0", "--json", "fate", ids[1]))
    assert fate["status"] == "alive"
    assert [s["text"] for s in fate["steps"]] == [
        "created by mem0 in collection mem0"]


def test_langchain_and_llamaindex_stats_name_their_layout(tmp_path: Path, run: Run) -> None:
    foreign_stores.write_langchain(tmp_path / "other")
    foreign_stores.write_llamaindex(tmp_path / "other")
    langchain = _json(run("--collection", "langchain", "--json", "stats"))
    assert langchain["foreign_layout"]["layout"] == "langchain"
    assert langchain["foreign_layout"]["vectors_used"] is False
    assert langchain["by_agent"] == {"carol": 1, "default": 1}
    code, out, _ = run("--collection", "langchain", "stats")
    assert code == 0
    assert "its 1536-d vectors do not fit the model: search uses words only" in out
    llama = _json(run("--collection", "llamaindex", "--json", "list"))
    assert {r["content"] for r in llama["records"]} == {
        "Quarterly revenue grew eight percent", "The board approved the new office lease"}


def test_map_collection_is_saved_and_used(tmp_path: Path, run: Run) -> None:
    foreign_stores.write_custom(tmp_path / "other")
    before = _json(run("--collection", "notes", "--json", "list"))
    assert {r["content"] for r in before["records"]} == {
        "(no document)"}
    code, out, err = run("--collection", "notes", "map-collection", "--text", "memory",
                         "--agent", "who", "--time", "when", "--importance", "weight")
    assert code == 0, err
    assert "saved the mapping of 'notes'" in err
    assert "custom layout (text=memory, agent=who, time=when, importance=weight)" in out
    saved = json.loads((tmp_path / "config" / "settings.json").read_text(encoding="utf-8"))
    assert saved["foreign_mappings"] == {str(tmp_path / "other"): {"notes": {
        "text": "memory", "agent": "who", "time": "when", "importance": "weight"}}}
    assert "store" not in saved  # only the mapping is written, not this run's --store
    after = _json(run("--collection", "notes", "--json", "list"))
    rows = {(r["content"], r["agent_id"], r["importance"])
            for r in after["records"]}
    assert rows == {("Prefers aisle seats", "frank", 0.9),
                    ("Works from Lisbon in winter", "grace", 0.3)}
    code, _, err = run("--collection", "notes", "map-collection", "--clear")
    assert code == 0 and "forgot" in err
    cleared = _json(run("--collection", "notes", "--json", "list"))
    assert {r["content"] for r in cleared["records"]} == {
        "(no document)"}
    code, _, err = run("--collection", "nots", "map-collection", "--text", "memory")
    assert code == 1 and "no such collection" in err and "there: notes" in err
    assert run("add", "ours")[0] == 0
    code, _, err = run("--collection", "mnemoscope_memories", "map-collection", "--text", "x")
    assert code == 1 and "is a Mnemoscope collection" in err


def test_a_bad_mapping_in_the_settings_file_names_it(tmp_path: Path, run: Run) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.json").write_text(json.dumps(
        {"foreign_mappings": {"/x": {"notes": {"txt": "memory"}}}}), encoding="utf-8")
    code, _, err = run("stats")
    assert code == 1
    assert "foreign_mappings./x.notes.txt" in err


def test_adopt_prints_the_dedup_report(tmp_path: Path, run: Run) -> None:
    ids = foreign_stores.write_mem0(tmp_path / "other")
    into = tmp_path / "ours"
    report = _json(run("--collection", "mem0", "--json", "adopt", "--into", str(into)))
    assert report["counts"]["inserted"] == 2
    assert report["counts"]["skipped"] == 1
    duplicate = report["results"][2]
    assert (duplicate["action"], duplicate["reason"]) == ("skipped", "equal_confidence")
    adopted = _json(run_cli_list(run, into))
    sources = {r["source"] for r in adopted["records"]}
    assert sources == {f"mem0/{ids[0]}", f"mem0/{ids[1]}"}
    code, out, _ = run("--collection", "mem0", "adopt", "--into", str(tmp_path / "again"))
    assert code == 0
    assert "adopted mem0 (mem0) into" in out and "inserted 2, skipped 1" in out
    assert "record 3: skipped (equal_confidence)" in out
    code, _, err = run("--collection", "mnemoscope_memories", "adopt", "--into", str(into))
    assert code == 1 and "nothing to adopt" in err


def run_cli_list(run: Run, store: Path) -> tuple[int, str, str]:
    """``list --json`` of another store (``--store`` given last wins)."""
    return run("--store", str(store), "--json", "list")


def test_redaction_covers_foreign_records_and_the_adopt_report(
        tmp_path: Path, run: Run) -> None:
    """The mapped text is also in ``metadata.foreign.data``: both are masked at the exit."""
    import chromadb
    from chromadb.config import Settings

    secret = "mail dana.secret@example.com for the keys"
    client = chromadb.PersistentClient(path=str(tmp_path / "other"),
                                       settings=Settings(anonymized_telemetry=False))
    client.get_or_create_collection("mem0", embedding_function=None).add(
        ids=["m1"], embeddings=np.eye(1, 384, dtype=np.float32),
        metadatas=[{"data": secret, "hash": "h", "user_id": "dana",
                    "created_at": "2024-01-01T00:00:00-08:00"}])
    del client
    printed = []
    for argv in (("list",), ("search", "keys", "--inspect"), ("get", "m1"), ("fate", "m1"),
                 ("adopt", "--into", str(tmp_path / "ours"))):
        for mode in ((), ("--json",)):
            code, out, err = run("--redact", "--collection", "mem0", *mode, *argv)
            assert code == 0, (argv, err)
            printed.append(out + err)
    everything = "\n".join(printed)
    assert "dana.secret@example.com" not in everything
    assert "<REDACT:" in everything  # shown masked, not dropped
