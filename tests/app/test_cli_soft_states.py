"""``pause``, ``archive``, ``resume`` and ``list --state`` through the real argument parser;
``get`` and ``export`` show the state; ``search`` never finds a paused or archived record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.conftest import Runner


def _add(cli: Runner, text: str) -> str:
    code, out, _ = cli("--json", "add", text, "--agent", "bob")
    assert code == 0
    record_id: str = json.loads(out)["id"]
    return record_id


def _listed(cli: Runner, *options: str) -> dict[str, str]:
    code, out, _ = cli("--json", "list", *options)
    assert code == 0
    return {r["id"]: r["state"] for r in json.loads(out)["records"]}


def _found(cli: Runner, query: str) -> list[str]:
    code, out, _ = cli("--json", "search", query, "--agent", "bob")
    assert code == 0
    return [r["id"] for r in json.loads(out)["records"]]


def test_pause_archive_resume_list_get_export(cli: Runner, tmp_path: Path) -> None:
    tea = _add(cli, "Bob drinks green tea every morning")
    chess = _add(cli, "Bob plays chess on Sundays")
    piano = _add(cli, "Bob practises the piano at night")
    assert _found(cli, "green tea")[0] == tea
    code, out, _ = cli("--json", "pause", tea)
    assert code == 0 and json.loads(out)["records"] == [
        {"id": tea, "state": "paused", "version": 2}]
    code, out, _ = cli("archive", chess)
    assert code == 0 and out.strip() == "archived 1 record(s)"
    assert tea not in _found(cli, "green tea") and chess not in _found(cli, "chess Sundays")
    # list hides archived records unless asked
    assert _listed(cli) == {tea: "paused", piano: "active"}
    assert _listed(cli, "--state", "archived") == {chess: "archived"}
    assert _listed(cli, "--state", "all") == {tea: "paused", chess: "archived",
                                              piano: "active"}
    code, out, _ = cli("list")
    assert "[paused] Bob drinks green tea" in out and "chess" not in out
    code, out, _ = cli("--json", "stats")
    assert json.loads(out)["by_state"] == {"active": 1, "paused": 1, "archived": 1}
    code, out, _ = cli("get", chess)
    assert code == 0 and any(line.split() == ["state", "archived"]
                             for line in out.splitlines())
    export = tmp_path / "out.jsonl"
    code, _, _ = cli("export", str(export))
    assert code == 0
    exported = {row["id"]: row["state"] for row in
                map(json.loads, export.read_text(encoding="utf-8").splitlines())}
    assert exported == {tea: "paused", chess: "archived", piano: "active"}
    code, out, _ = cli("--json", "resume", tea, chess)
    assert code == 0 and json.loads(out)["resumed"] == [tea, chess]
    assert _found(cli, "green tea")[0] == tea and _found(cli, "chess Sundays")[0] == chess
    assert _listed(cli) == {tea: "active", chess: "active", piano: "active"}


def test_a_duplicate_merged_into_a_paused_record_says_it_stays_paused(cli: Runner) -> None:
    tea = _add(cli, "Bob drinks green tea every morning")
    cli("pause", tea)
    code, out, _ = cli("add", "Bob drinks green tea every morning", "--agent", "bob",
                       "--confidence", "0.95")
    assert code == 0 and out.strip().endswith("; the record stays paused")


def test_bad_state_and_unknown_id_are_clear_errors(
        cli: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    tea = _add(cli, "Bob drinks green tea every morning")
    with pytest.raises(SystemExit) as info:
        cli("list", "--state", "sleeping")
    assert info.value.code == 2
    assert "argument --state: unknown state 'sleeping'; must be one of active, paused, " \
        "archived, all" in capsys.readouterr().err
    code, _, err = cli("pause", tea, "no-such-id")
    assert code == 1 and "no-such-id" in err
    assert _listed(cli) == {tea: "active"}  # nothing changed
