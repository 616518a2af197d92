"""Workspaces: loading, validation errors, incremental updates, importance, graph view."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.errors import CycleDetected
from engine.tasks.cache import CardCache
from engine.tasks.errors import (
    CardFormatError,
    CardNotFound,
    DuplicateCardId,
    MissingAnchor,
    MissingDependency,
    MissingReference,
    WorkspaceNotFound,
)
from engine.tasks.workspace import Workspace
from tests.engine.tasks.conftest import WriteCards, card, write_files


def test_load_and_lookup(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "docs/api.md": "# API\n## Login\nx\n",
        "tasks/a.md": card("A", "see @docs/api#Login\n", status="todo"),
        ".mnemoscope/ignored.md": "# not a card\n",
        "notes.txt": "not markdown",
    })
    assert sorted(ws.cards) == ["A", "docs/api"]
    assert ws.card("docs/api.md").id == "docs/api"
    assert ws.card("@docs/api").id == "docs/api"
    assert ws.card("tasks/a").id == "A"
    assert list(ws.reference_graph.edges) == [("A", "docs/api")]
    with pytest.raises(CardNotFound, match="'nope'"):
        ws.card("nope")
    assert ws.validate().ok


@pytest.mark.parametrize(
    ("files", "path"),
    [
        ({f"c{i}.md": card(f"C{i}", f"@C{i}\n") for i in range(1)}, ["C0", "C0"]),
        ({"c0.md": card("C0", "@C1\n"), "c1.md": card("C1", "@C0\n")}, ["C0", "C1", "C0"]),
        ({f"c{i}.md": card(f"C{i}", f"text @C{(i + 1) % 5} more\n") for i in range(5)},
         ["C0", "C1", "C2", "C3", "C4", "C0"]),
    ],
)
def test_reference_cycles_of_length_1_2_5(make_workspace: WriteCards, files: dict[str, str],
                                          path: list[str]) -> None:
    ws = make_workspace(files)
    report = ws.validate()
    assert report.reference_cycle == tuple(path)
    with pytest.raises(CycleDetected) as info:
        ws.check()
    assert str(info.value) == "error 1002: cycle detected: " + " -> ".join(path)


@pytest.mark.parametrize("length", [1, 2, 5])
def test_dependency_cycles_of_length_1_2_5(make_workspace: WriteCards, length: int) -> None:
    files = {f"t{i}.md": card(f"T{i}", depends_on=f"[T{(i + 1) % length}]")
             for i in range(length)}
    ws = make_workspace(files)
    expected = tuple([f"T{i}" for i in range(length)] + ["T0"])
    assert ws.validate().dependency_cycle == expected
    assert ws.graph_view().cycles == (expected,)
    assert ws.graph_view().generations == ()


def test_missing_reference_names_file_and_line(make_workspace: WriteCards) -> None:
    ws = make_workspace({"tasks/a.md": card("A", "one\ntwo @docs/missing here\n@alice is fine\n")})
    problems = ws.problems()
    assert len(problems) == 1
    problem = problems[0]
    assert isinstance(problem, MissingReference)
    assert (problem.source, problem.line, problem.target) == ("tasks/a.md", 5, "docs/missing")
    assert str(problem).startswith("tasks/a.md:5: reference: @docs/missing names no card")


def test_missing_anchor_and_missing_dependency(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "docs/api.md": "# API\n## Login\n",
        "a.md": card("A", "@docs/api#Logout\n", depends_on="[GHOST]"),
    })
    problems = ws.validate().problems
    assert {type(p) for p in problems} == {MissingAnchor, MissingDependency}
    anchor = next(p for p in problems if isinstance(p, MissingAnchor))
    assert (anchor.source, anchor.line) == ("a.md", 5)
    dep = next(p for p in problems if isinstance(p, MissingDependency))
    assert str(dep) == "a.md:3: depends_on: 'GHOST' names no card"


def test_duplicate_ids_are_an_error(make_workspace: WriteCards) -> None:
    ws = make_workspace({"a.md": card("SAME"), "b/c.md": card("SAME")})
    problems = ws.problems()
    assert len(problems) == 1
    assert isinstance(problems[0], DuplicateCardId)
    assert "a.md, b/c.md" in str(problems[0])
    assert ws.cards["SAME"].path == "a.md"
    with pytest.raises(DuplicateCardId):
        ws.check()


def test_invalid_front_matter_is_reported_with_its_file(make_workspace: WriteCards) -> None:
    ws = make_workspace({"good.md": card("G"), "bad.md": "---\nid: [oops\n---\nbody\n"})
    problems = ws.problems()
    assert len(problems) == 1
    assert isinstance(problems[0], CardFormatError)
    assert str(problems[0]).startswith("bad.md:2: front matter: invalid YAML")
    assert list(ws.cards) == ["G"]


def test_a_card_linked_out_of_the_workspace_is_not_read(tmp_path: Path) -> None:
    # A workspace from someone else (a cloned repository) with tasks/setup.md -> ~/.netrc:
    # the file was read as a card, searchable, and put in the scene of any card naming it —
    # the context a person pastes to an LLM.
    outside = tmp_path / "home" / "notes.md"
    write_files(outside.parent, {"notes.md": card("STOLEN", "machine example.com password "
                                                              "hunter2-Tr0mb0ne\n")})
    root = tmp_path / "ws"
    write_files(root, {"a.md": card("A", "Set up as in @tasks/setup.\n"),
                       "templates/base.txt": card("BASE")})
    (root / "tasks").mkdir()
    (root / "tasks" / "setup.md").symlink_to(outside)
    (root / "tasks" / "base.md").symlink_to(root / "templates" / "base.txt")  # inside: read
    ws = Workspace.open(root)
    assert "STOLEN" not in ws.cards and "hunter2" not in repr(ws.cards)
    assert ws.cards["BASE"].path == "tasks/base.md"
    link_problem, missing = ws.problems()
    assert str(link_problem) == (f"tasks/setup.md: file: a link to {outside.resolve()}, "
                                 "outside the workspace: not read")
    assert isinstance(missing, MissingReference)  # a.md's reference names nothing now
    ws.update_paths(["tasks/setup.md"])  # a watcher's event: still not read
    assert "STOLEN" not in ws.cards and len(ws.problems()) == 2


def test_incremental_update_reparses_only_changed_files(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"a.md": card("A", "@B\n"), "b.md": card("B"), "c.md": card("C")})
    cache = CardCache()
    ws = Workspace.open(root, cache=cache)
    before = {cid: c for cid, c in ws.cards.items()}
    # Same content rewritten (new mtime): looked at, not re-parsed.
    (root / "c.md").write_text(card("C"), encoding="utf-8")
    os.utime(root / "c.md", ns=(1, 1))
    change = ws.refresh()
    assert change.unchanged == ("c.md",)
    assert not change.any
    assert ws.cards["C"] is before["C"]
    # A real edit: only that card is new; edges follow.
    (root / "a.md").write_text(card("A", "@C\n"), encoding="utf-8")
    change = ws.update_paths(["a.md"])
    assert change.changed == ("a.md",)
    assert ws.cards["B"] is before["B"]
    assert list(ws.reference_graph.edges) == [("A", "C")]
    # Add, remove, rename an id.
    (root / "d.md").write_text(card("D", "@A\n"), encoding="utf-8")
    (root / "b.md").unlink()
    change = ws.refresh()
    assert (change.added, change.removed) == (("d.md",), ("b.md",))
    assert sorted(ws.reference_graph.edges) == [("A", "C"), ("D", "A")]
    (root / "c.md").write_text(card("C2"), encoding="utf-8")
    ws.update_paths(["c.md"])
    # "@C" now names nothing; without a "/" it reads as a mention, not an error.
    assert sorted(ws.reference_graph.edges) == [("D", "A")]
    assert ws.problems() == []
    # A reverted file comes from the cache, not a new parse.
    (root / "c.md").write_text(card("C"), encoding="utf-8")
    hits = cache.stats().hits
    ws.update_paths(["c.md"])
    assert cache.stats().hits == hits + 1
    assert ws.cards["C"] is before["C"]


def test_a_broken_file_and_its_fix(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"a.md": card("A")})
    ws = Workspace.open(root)
    (root / "a.md").write_text("---\nstatus: nonsense\n---\n", encoding="utf-8")
    ws.update_paths(["a.md"])
    assert "A" not in ws.cards
    ws.update_paths(["a.md"])  # saved again, still broken (was a KeyError)
    assert isinstance(ws.problems()[0], CardFormatError)
    (root / "a.md").write_text(card("A"), encoding="utf-8")
    ws.update_paths(["a.md"])
    assert "A" in ws.cards
    assert ws.problems() == []


def test_dependencies_dependents_and_add_dependency(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "db.md": card("DB", status="done"),
        "auth.md": card("AUTH", depends_on="[DB]"),
        "login.md": "---\nid: LOGIN\nstatus: todo\ndepends_on:\n  - AUTH\ntitle: Login\n---\nx\n",
    })
    assert ws.dependencies("LOGIN") == ["AUTH"]
    assert ws.dependents("DB") == ["AUTH"]
    assert ws.add_dependency("LOGIN", "DB") is True
    assert ws.add_dependency("LOGIN", "DB") is False
    text = (ws.root / "login.md").read_text(encoding="utf-8")
    assert text == "---\nid: LOGIN\nstatus: todo\ndepends_on: [AUTH, DB]\ntitle: Login\n---\nx\n"
    assert ws.dependencies("LOGIN") == ["AUTH", "DB"]
    with pytest.raises(CycleDetected) as info:
        ws.add_dependency("DB", "LOGIN")
    assert str(info.value) == "error 1002: cycle detected: DB -> LOGIN -> DB"
    assert "depends_on" not in (ws.root / "db.md").read_text(encoding="utf-8")
    with pytest.raises(CardNotFound):
        ws.dependents("NOPE")


def test_add_dependency_to_a_card_without_front_matter(make_workspace: WriteCards) -> None:
    ws = make_workspace({"notes/plan.md": "# Plan\n", "db.md": card("DB", status="todo")})
    ws.add_dependency("notes/plan", "DB")
    assert (ws.root / "notes/plan.md").read_text(encoding="utf-8").startswith(
        "---\ndepends_on: [DB]\n---\n# Plan")
    assert ws.cards["notes/plan"].is_task
    assert ws.dependents("DB") == ["notes/plan"]


def test_importance_from_mtimes_references_and_error_stack(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {
        "src/api.md": card("API"), "src/auth.md": card("AUTH"),
        "a.md": card("A", "@API @API @AUTH\n"), "b.md": card("B", "@API\n"),
    })
    now = 1_700_000_000_000.0
    for rel, age_days in {"src/api.md": 30, "src/auth.md": 0, "a.md": 7, "b.md": 70}.items():
        t = int((now - age_days * 86_400_000) * 1e6)
        os.utime(root / rel, ns=(t, t))
    ws = Workspace.open(root, clock=DeterministicClock(now))
    stack = 'Traceback:\n  File "src/auth.md", line 3\n'
    imp = ws.importance(error_stack=stack)
    assert imp["API"].references == 1.0
    assert imp["AUTH"].references == pytest.approx(1 / 3)
    assert imp["AUTH"].recent_changes == pytest.approx(1.0)
    assert imp["A"].recent_changes == pytest.approx(0.5)
    assert imp["AUTH"].in_error_stack == 1.0
    assert imp["API"].in_error_stack == 0.0
    expected = 0.3 * (1 / 3) + 0.35 * 1.0 + 0.35 * 1.0
    assert imp["AUTH"].score == pytest.approx(expected, abs=1e-6)
    assert imp["API"].score == pytest.approx(0.3 + 0.35 * 2 ** (-30 / 7), abs=1e-6)


def test_importance_from_git_history(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write_files(root, {"ws/hot.md": card("HOT"), "ws/cold.md": card("COLD")})
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    for n in range(3):
        (root / "ws/hot.md").write_text(card("HOT", f"edit {n}\n"), encoding="utf-8")
        git("commit", "-qam", f"edit {n}")
    import time

    ws = Workspace.open(root / "ws", clock=DeterministicClock(time.time() * 1000))
    imp = ws.importance()
    assert imp["HOT"].recent_changes == pytest.approx(1.0)
    assert imp["COLD"].recent_changes == pytest.approx(0.25, rel=0.01)


def test_graph_view_for_the_gui(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "a.md": card("A", "@docs/x\n", status="done", priority="high", title="Setup"),
        "b.md": card("B", depends_on="[A]"), "c.md": card("C", depends_on="[A]"),
        "d.md": card("D", depends_on="[B, C]"), "docs/x.md": "# X\n",
    })
    view = ws.graph_view()
    node = next(n for n in view.nodes if n.id == "A")
    assert (node.title, node.status, node.priority, node.is_task) == ("Setup", "done", "high",
                                                                      True)
    assert 0.0 <= node.importance <= 1.0
    assert view.generations == (("A",), ("B", "C"), ("D",))
    assert {(e.source, e.target, e.kind) for e in view.edges} == {
        ("B", "A", "depends_on"), ("C", "A", "depends_on"), ("D", "B", "depends_on"),
        ("D", "C", "depends_on"), ("A", "docs/x", "references")}
    assert view.cycles == ()
    tasks_only = ws.graph_view(include_references=False)
    assert "docs/x" not in {n.id for n in tasks_only.nodes}


def test_missing_workspace_and_non_card_paths(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceNotFound, match="is not a folder"):
        Workspace.open(tmp_path / "nowhere")
    write_files(tmp_path, {"a.md": card("A"), ".git/x.md": card("HIDDEN"), "n.txt": "x"})
    ws = Workspace.open(tmp_path)
    change = ws.update_paths([".git/x.md", "n.txt"])
    assert not change.any
    assert list(ws.cards) == ["A"]


def test_validate_one_task(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "a.md": card("A", "@docs/none\n", depends_on="[B]"),
        "b.md": card("B", depends_on="[C]"), "c.md": card("C", depends_on="[B]"),
        "d.md": card("D", status="todo"),
    })
    problems = ws.validate_task("A")
    assert [type(p) for p in problems] == [CycleDetected, MissingReference]
    assert str(problems[0]) == "error 1002: cycle detected: B -> C -> B"
    assert ws.validate_task("D") == []
