"""The polling watcher and the parsed-card LRU (seed 003 §5 strategy 4)."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.clock import DeterministicClock
from engine.tasks.cache import CardCache
from engine.tasks.cards import parse_card
from engine.tasks.watcher import FileChanges, WorkspaceWatcher
from engine.tasks.workspace import Workspace
from tests.engine.tasks.conftest import card, write_files


def _running(watcher: WorkspaceWatcher) -> bool:
    return watcher.running


def test_poll_reports_added_changed_removed(tmp_path: Path) -> None:
    write_files(tmp_path, {"a.md": "one", "b.md": "two", ".hidden/x.md": "no"})
    seen: list[FileChanges] = []
    watcher = WorkspaceWatcher(tmp_path, seen.append)
    assert watcher.poll() is None
    (tmp_path / "a.md").write_text("one, longer", encoding="utf-8")
    (tmp_path / "b.md").unlink()
    write_files(tmp_path, {"sub/c.md": "three", "notes.txt": "ignored"})
    change = watcher.poll()
    assert change == FileChanges(("sub/c.md",), ("a.md",), ("b.md",))
    assert seen == [change]
    assert watcher.poll() is None


def test_watcher_thread_drives_workspace_updates_and_stops_cleanly(tmp_path: Path) -> None:
    write_files(tmp_path, {"a.md": card("A")})
    workspace = Workspace.open(tmp_path)
    got = threading.Event()
    changes: list[FileChanges] = []

    def on_change(change: FileChanges) -> None:
        changes.append(change)
        got.set()

    before = set(threading.enumerate())
    watcher = WorkspaceWatcher(tmp_path, on_change, interval_ms=10)
    with watcher:
        assert watcher.running
        write_files(tmp_path, {"b.md": card("B", "@A\n")})
        assert got.wait(10)
    assert not _running(watcher)  # (a function call: mypy narrowed the property above)
    assert set(threading.enumerate()) == before  # no leaked thread
    workspace.update_paths(changes[0].paths)
    assert "B" in workspace.cards


def test_callback_errors_go_to_on_error(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def boom(_: FileChanges) -> None:
        raise RuntimeError("subscriber failed")

    watcher = WorkspaceWatcher(tmp_path, boom, on_error=errors.append)
    write_files(tmp_path, {"a.md": "x"})
    assert watcher.poll() is not None
    assert [str(e) for e in errors] == ["subscriber failed"]


def test_cache_bounds_bytes_and_idle_time() -> None:
    clock = DeterministicClock(0.0)
    cards = [parse_card(f"c{i}.md", (("x" * 1000) + str(i)).encode()) for i in range(10)]
    cache = CardCache(max_bytes=5_000, idle_ms=1_000, clock=clock)
    for item in cards:
        cache.put(item)
    stats = cache.stats()
    assert stats.bytes <= 5_000
    assert stats.entries < 10
    assert stats.evictions > 0
    last = cards[-1]
    assert cache.get(last.path, last.content_hash) is last
    assert cache.get(cards[0].path, cards[0].content_hash) is None  # least recent went first
    clock.advance(1_001)
    assert cache.get(last.path, last.content_hash) is None  # idle for > 30 min (here 1 s)
    assert cache.stats().entries == 0


def test_cache_keeps_sections_with_the_card() -> None:
    cache = CardCache()
    item = parse_card("a.md", b"# A\n## B\ntext\n")
    first = cache.sections(item)
    assert cache.sections(item) is first
    assert [s.title for s in first] == ["A", "B"]
