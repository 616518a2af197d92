"""CLI: ``scene``, ``tasks validate|deps|dependents|add-dep``, ``cards search``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import run_cli

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo_workspace"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"), "MNEMOSCOPE_LOAD_MODEL": "0"}


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def cycle_workspace(tmp_path: Path) -> Path:
    return write(tmp_path / "cyc", {
        "a.md": "---\nid: A\nstatus: todo\ndepends_on: [B]\n---\nSee @B\n",
        "b.md": "---\nid: B\nstatus: todo\ndepends_on: [A]\n---\nSee @A\n",
    })


def test_demo_workspace_validates(demo: Path, env: dict[str, str],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["tasks", "validate", "--workspace", str(demo), "--json"], env) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert 20 <= report["cards"] <= 40


def test_cycle_exits_3_with_the_path(tmp_path: Path, env: dict[str, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(cycle_workspace(tmp_path))
    assert run_cli(["scene", "A", "--workspace", ws], env) == 3
    assert capsys.readouterr().err.strip() == "error 1002: cycle detected: A -> B -> A"
    assert run_cli(["tasks", "validate", "--workspace", ws], env) == 3
    err = capsys.readouterr().err
    assert "error 1002: cycle detected: A -> B -> A" in err
    assert run_cli(["--json", "scene", "A", "--workspace", ws], env) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == {"code": "1002", "message": "error 1002: cycle detected: A -> B -> A",
                            "path": ["A", "B", "A"]}


def test_add_dep_refuses_a_cycle_and_writes_otherwise(demo: Path, env: dict[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(demo)
    before = (demo / "tasks/db/setup.md").read_text(encoding="utf-8")
    assert run_cli(["tasks", "add-dep", "DB-1", "QA-1", "--workspace", ws], env) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error 1002: cycle detected: DB-1 -> QA-1 -> ")
    assert err.endswith(" -> DB-1")
    assert (demo / "tasks/db/setup.md").read_text(encoding="utf-8") == before
    assert run_cli(["tasks", "add-dep", "OPS-3", "QA-1", "--workspace", ws], env) == 0
    assert "OPS-3 now depends on QA-1" in capsys.readouterr().out
    assert run_cli(["tasks", "deps", "OPS-3", "--workspace", ws, "--json"], env) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "OPS-3",
                                                   "dependencies": ["OPS-2", "QA-1"]}
    assert run_cli(["tasks", "dependents", "AUTH-2", "--workspace", ws], env) == 0
    assert capsys.readouterr().out.splitlines() == [  # each card's title beside its id
        "AUTH-3  Session middleware", "AUTH-4  Password reset by email", "UI-2    Login page"]
    assert run_cli(["tasks", "dependents", "UI-3", "--workspace", ws], env) == 0
    assert capsys.readouterr().out == "UI-3 has no dependents\n"


def test_scene_out_json_and_delta(demo: Path, env: dict[str, str], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "SCENE.md"
    assert run_cli(["scene", "MAIL-1", "--workspace", str(demo), "--out", str(out)], env) == 0
    assert "wrote" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert "<REDACT:sha256-" in text
    assert "Tallyho-Stg-" not in text
    assert run_cli(["scene", "AUTH-2", "--workspace", str(demo), "--budget", "400",
                    "--json"], env) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["truncated"] is True
    assert doc["included"][0]["id"] == "AUTH-2"
    assert doc["pruned"]
    assert doc["text"].rstrip().endswith("> [!WARNING] Context Truncated here...")
    first = doc["scene_hash"]
    login = demo / "tasks/auth/login.md"
    login.write_text(login.read_text(encoding="utf-8") + "\nOne more note.\n", encoding="utf-8")
    assert run_cli(["scene", "AUTH-2", "--workspace", str(demo), "--budget", "400",
                    "--since", first[:12]], env) == 0
    delta = capsys.readouterr().out
    assert delta.startswith(f"# SCENE DELTA: AUTH-2 — since {first[:12]}")
    assert "## changed: AUTH-2" in delta
    assert "One more note." in delta


def test_usage_errors_and_unknown_card(demo: Path, env: dict[str, str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run_cli(["scene", "AUTH-2", "--workspace", str(demo), "--budget", "0"], env)
    assert info.value.code == 2
    capsys.readouterr()
    assert run_cli(["tasks", "deps", "NOPE", "--workspace", str(demo)], env) == 1
    assert "'NOPE'" in capsys.readouterr().err


def test_validate_reports_file_and_line(tmp_path: Path, env: dict[str, str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    ws = write(tmp_path / "bad", {"a.md": "---\nid: A\n---\nline\n@docs/missing\n",
                                  "b.md": "---\nid: [x\n---\n", "c.md": "---\nid: A\n---\n"})
    assert run_cli(["tasks", "validate", "--workspace", str(ws)], env) == 1
    err = capsys.readouterr().err
    assert "b.md:2: front matter: invalid YAML" in err
    assert "a.md:5: reference: @docs/missing names no card" in err
    assert "declared by several files: a.md, c.md" in err


def test_cards_search_keyword_only(demo: Path, env: dict[str, str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["cards", "search", "login", "--workspace", str(demo), "--json"], env) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "keyword"
    assert "keyword-only" in doc["note"]
    # "login" in the path (100) + token in path (10) + in content (50 + 5) = 165 / 200.
    assert doc["hits"][0]["id"] == "AUTH-2"
    assert doc["hits"][0]["score"] == pytest.approx(0.825)
    assert all(hit["score"] > 0 for hit in doc["hits"])
