"""``mnemoscope fate ID`` through the real argument parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import run_cli


def test_fate_of_a_deleted_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    base = ["--store", str(tmp_path / "store"), "--no-model"]
    assert run_cli([*base, "--json", "add", "Alice prefers green tea"], env) == 0
    record_id = json.loads(capsys.readouterr().out)["id"]
    assert run_cli([*base, "delete", record_id], env) == 0
    capsys.readouterr()
    assert run_cli([*base, "fate", record_id, "--json"], env) == 0
    fate = json.loads(capsys.readouterr().out)
    assert fate["status"] == "deleted"
    assert [s["kind"] for s in fate["steps"]] == ["created", "deleted"]
    assert run_cli([*base, "fate", record_id], env) == 0
    text = capsys.readouterr().out
    assert f"{record_id}: deleted" in text and "deleted by" in text


def test_fate_of_a_merged_memory_shows_its_text_and_the_survivor_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    base = ["--store", str(tmp_path / "store"), "--no-model"]
    first = "Ana keeps three bee hives on the flat roof of her house"
    second = "Ana keeps three bee hives on the flat roof of her home"
    assert run_cli([*base, "add", first, "--tier", "human"], env) == 0
    capsys.readouterr()
    assert run_cli([*base, "--json", "add", second, "--tier", "human"], env) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["ingest"]["action"] == "merged"
    assert run_cli([*base, "--json", "events", "--kind", "merge-applied"], env) == 0
    incoming = json.loads(capsys.readouterr().out)["events"][0]["payload"]["incoming_id"]
    assert run_cli([*base, "fate", incoming], env) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{incoming}: merged → {added['id']}"
    assert lines[1:3] == [f"  text     {second}", f"  now in   {first}"]
