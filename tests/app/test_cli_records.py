"""The records commands through the real argument parser (in-process, plus one real process)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import run_cli
from tests.app.conftest import Runner

FIELDS = {"id", "content", "layer", "agent_id", "importance", "confidence", "category", "tags",
          "privacy", "source", "source_tier", "created_at", "last_accessed", "access_count",
          "expires_at", "content_hash", "provenance", "merged_from", "related", "redacted",
          "metadata"}


def test_add_get_list_edit_delete_json(cli: Runner) -> None:
    code, out, _ = cli("--json", "add", "Alice prefers green tea", "--agent", "alice",
                       "--layer", "semantic", "--importance", "0.7", "--confidence", "0.9",
                       "--tags", "tea,drinks", "--privacy", "PUBLIC", "--category", "preference",
                       "--source", "notes", "--tier", "agent")
    assert code == 0
    record = json.loads(out)
    assert set(record) >= FIELDS
    assert (record["agent_id"], record["importance"], record["tags"], record["privacy"],
            record["category"], record["source_tier"]) == (
        "alice", 0.7, ["tea", "drinks"], "PUBLIC", "preference", "agent")
    assert record.pop("ingest")["action"] == "inserted"  # add goes through the pipeline
    code, out, _ = cli("--json", "get", record["id"])
    assert code == 0 and json.loads(out) == record
    code, out, _ = cli("--json", "list", "--agent", "alice")
    listing = json.loads(out)
    assert listing["total"] == 1 and listing["records"][0]["id"] == record["id"]
    code, out, _ = cli("--json", "edit", record["id"], "--importance", "0.2", "--layer",
                       "episodic", "--ttl", "3600")
    edited = json.loads(out)
    assert code == 0 and edited["importance"] == 0.2 and edited["layer"] == "episodic"
    assert edited["expires_at"] is not None and edited["version"] == 2
    code, out, _ = cli("--json", "stats")
    assert json.loads(out)["records"] == 1
    # stats reads read-only; that is no property of the store to report
    assert cli("stats")[1].splitlines()[0].endswith("(embedded)")
    code, out, _ = cli("--json", "delete", record["id"])
    assert code == 0 and json.loads(out) == {"deleted": [record["id"]]}
    code, out, err = cli("--json", "get", record["id"])
    assert code == 1 and "no record with id" in err
    assert json.loads(out)["error"]["code"] == "MEMORY_RECORD_NOT_FOUND"


def test_get_shows_values_in_words_not_python_reprs(cli: Runner) -> None:
    code, out, _ = cli("--json", "add", "Alice prefers green tea", "--tags", "tea,drinks")
    record_id = json.loads(out)["id"]
    code, out, _ = cli("get", record_id)
    assert code == 0
    shown = {line[:16].strip(): line[17:] for line in out.splitlines()}
    assert shown["tags"] == "tea, drinks"
    assert (shown["expires_at"], shown["merged_from"], shown["redacted"], shown["metadata"]) \
        == ("never", "-", "no", "-")
    assert not any(token in out for token in ("['", "None", "False", "[]", "{}"))
    cli("edit", record_id, "--metadata", '{"room": "kitchen"}')
    assert 'metadata         {"room": "kitchen"}' in cli("get", record_id)[1]


def test_add_says_what_happened_in_words_naming_the_other_record_by_its_text(
        cli: Runner) -> None:
    code, out, _ = cli("add", "The gym opens at 6am")
    assert code == 0
    stored = out.split()[-1]
    shown = f'{stored}  "The gym opens at 6am"'
    assert cli("add", "The gym opens at 6am")[1].strip() == \
        f"exact duplicate with the same confidence: not stored again; the stored record: {shown}"
    assert cli("add", "The gym opens at 6am", "--confidence", "0.95")[1].strip() == \
        f"updated {shown} (exact duplicate, updated)"
    out = cli("add", "The gym opens at 7am")[1].strip()
    assert out.startswith("held for review ")
    assert out.endswith(f" (may contradict); the stored record: {shown}")
    assert "_" not in out.replace(stored, "")  # no snake_case reason code


def test_an_agent_the_store_does_not_know_is_named_in_a_note(cli: Runner) -> None:
    assert cli("add", "Alice prefers green tea", "--agent", "alice")[0] == 0
    code, out, err = cli("list", "--agent", "team")
    assert code == 0 and out.strip() == "(no records match)"  # not "(0-0 of 0)"
    assert err.strip() == "note: this store has no records of agent 'team' (its agents: alice)"
    code, out, err = cli("--json", "search", "when is the standup?", "--agent", "team")
    assert code == 0 and json.loads(out)["records"] == [] and "agent 'team'" in err
    code, out, err = cli("list", "--agent", "alice", "--text", "coffee")  # a known agent
    assert code == 0 and err == ""
    assert cli("list", "--offset", "5")[1].strip() == "(0 of 1: --offset 5 is past the end)"


def test_doctor_says_when_other_users_can_read_the_store(cli: Runner, tmp_path: Path) -> None:
    # A store folder made before new ones were 0700 (or copied) keeps its 0755: doctor said
    # nothing about every memory being readable by every user of the machine.
    assert cli("add", "a memory so the store exists")[0] == 0
    store = tmp_path / "store"
    shown = {line[:23].strip(): line[23:] for line in cli("doctor")[1].splitlines()}
    assert shown["store access"] == "private (mode 700)"
    store.chmod(0o755)
    shown = {line[:23].strip(): line[23:] for line in cli("doctor")[1].splitlines()}
    assert shown["store access"] == ("readable by other users of this machine (mode 755); "
                                     f"make it private with: chmod -R go-rwx {store}")
    assert json.loads(cli("--json", "doctor")[1])["store"]["others_can_read"] is True


def test_doctor_names_the_lock_holder_in_words(cli: Runner, tmp_path: Path) -> None:
    assert cli("add", "a memory so the store exists")[0] == 0
    code, out, _ = cli("doctor")
    assert code == 0
    shown = {line[:23].strip(): line[23:] for line in out.splitlines()}
    # doctor takes the free lock itself: its own PID there is no other process
    assert shown["lock holder"] == "none (only this doctor run, while it reads)"
    assert shown["store"].endswith("(embedded, 1 record)")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from engine import MemoryEngine, StoreSpec; "
         "engine = MemoryEngine.open(StoreSpec(sys.argv[1])); print('open', flush=True); "
         "sys.stdin.readline(); engine.close()", str(tmp_path / "store")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2])
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        code, out, _ = cli("doctor")
        shown = {line[:23].strip(): line[23:] for line in out.splitlines()}
        assert code == 0 and shown["lock holder"].startswith(f"PID {holder.pid} on ")
        assert " since 20" in shown["lock holder"] and "{" not in out
        # a write command says what to do in a command's terms; reading ones still work
        code, _, err = cli("add", "another memory")
        assert code == 1 and err.strip() == (
            f"error: store {tmp_path / 'store'} is in use by PID {holder.pid} (on "
            f"{socket.gethostname()}): close it there, or use a Chroma server for several "
            "processes (list, get, search and the other reading commands work meanwhile: "
            "they open it read-only)")
        assert cli("list")[0] == 0
    finally:
        holder.communicate("\n", timeout=60)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["add", "x", "--layer", "dreams"], 2, "invalid choice: 'dreams'"),
        (["add", "x", "--importance", "1.5"], 2, "importance must be in 0..1"),
        (["add", "x", "--privacy", "SECRET"], 2, "invalid choice: 'SECRET'"),
        (["add", "   "], 1, "content: must not be empty"),
        (["add", "y" * 40_000], 1, "content: is longer than 32000 characters"),
        (["add", "x", "--metadata", "{bad"], 1, "--metadata: not valid JSON"),
        (["get", "no-such-id"], 1, "no record with id 'no-such-id'"),
        (["edit", "no-such-id", "--importance", "0.1"], 1, "no record with id"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(cli: Runner, argv: list[str], code: int,
                                                       message: str) -> None:
    assert cli("add", "an existing memory")[0] == 0
    if code == 2:
        with pytest.raises(SystemExit) as info:
            cli(*argv)
        assert info.value.code == 2
    else:
        got, _, err = cli(*argv)
        assert got == 1 and message in err
    _, out, _ = cli("--json", "list")
    assert [r["content"] for r in json.loads(out)["records"]] == ["an existing memory"]


def test_reading_a_store_that_does_not_exist_says_so(cli: Runner) -> None:
    code, _, err = cli("list")
    assert code == 1 and "no Chroma store at" in err


def test_unreachable_server_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.chroma_server import free_port

    url = f"http://127.0.0.1:{free_port()}"
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "c"), "MNEMOSCOPE_DATA_DIR": str(tmp_path)}
    assert run_cli(["--store", url, "--no-model", "add", "x"], env) == 1
    err = capsys.readouterr().err
    assert f"Could not connect to the Chroma server at {url.removeprefix('http://')} — " \
           "connection refused. Is `chroma run` running" in err
    assert "Errno" not in err


def test_store_env_variable_is_the_default(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "c"), "MNEMOSCOPE_DATA_DIR": str(tmp_path),
           "MNEMOSCOPE_STORE": str(tmp_path / "from-env")}
    assert run_cli(["--no-model", "--json", "add", "hello"], env) == 0
    capsys.readouterr()
    assert (tmp_path / "from-env" / "chroma.sqlite3").exists()


@pytest.mark.slow
@pytest.mark.model
def test_console_script_with_real_model(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path),
           "MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "c"), "MNEMOSCOPE_DATA_DIR": str(tmp_path),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path.cwd())}
    store = str(tmp_path / "store")
    added = subprocess.run([sys.executable, "-m", "app", "--store", store, "--json", "add",
                            "The deploy runs every Friday"], capture_output=True, text=True,
                           env=env, timeout=300)
    assert added.returncode == 0, added.stderr
    record = json.loads(added.stdout)
    assert record["embedding_model"] == "all-MiniLM-L6-v2"
    doctor = subprocess.run([sys.executable, "-m", "app", "--store", store, "--json", "doctor"],
                            capture_output=True, text=True, env=env, timeout=300)
    report = json.loads(doctor.stdout)
    assert report["model"] == {**report["model"], "state": "ready", "dimension": 384}
    assert report["store"]["records"] == 1


def test_help_lists_commands_and_command_help_is_its_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    # The GUI launch path parses app options with a small parser; help must not go through it.
    with pytest.raises(SystemExit) as top:
        run_cli(["--help"], {})
    assert top.value.code == 0
    assert "ingest" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_cli(["list", "-h"], {})
    assert "usage: mnemoscope list" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_cli(["--help"], {})
    # the app's Edit → Undo holds only the app's own actions: a CLI delete is not undone there
    delete_help = " ".join(capsys.readouterr().out.split("\n    delete ", 1)[1].split())
    assert delete_help.startswith("delete records (each one's last state stays in the edit "
                                  "history: `fate ID` tells what became of it)")
    with pytest.raises(SystemExit):
        run_cli(["prune", "-h"], {})
    assert "gentle: expired records; normal: also those whose decayed importance fell below " \
        "0.01; aggressive: also each agent's least important tenth" in \
        " ".join(capsys.readouterr().out.split())  # what each mode removes, not just its name
