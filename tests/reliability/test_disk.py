"""A full disk and a read-only store directory: a clear error, nothing lost.

The scenarios need a real filesystem that fills up or refuses writes: a small tmpfs (resized
afterwards to check nothing was lost) and a read-only bind mount. They need mount rights
(root in the build container); without them the tests FAIL with the reason — a scenario that
could not run is never reported as passing.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import EngineError, StoreReadOnly, StoreUnavailable
from engine.ingest import IngestPolicy
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from engine.text import content_hash
from tests.reliability.driver import texts
from tests.support.fakes import HashingEmbedder


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot run this scenario: `mount {' '.join(args)}` failed "
                    f"({done.stderr.strip() or done.returncode}); it needs mount rights")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs, unmounted after the test."""
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    _mount("-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mountpoint))
    try:
        yield mountpoint
    finally:
        _umount(mountpoint)


def _open(path: Path, *, read_only: bool = False) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(str(path), read_only=read_only),
                             embedder=HashingEmbedder())


@pytest.mark.slow
def test_full_disk_is_a_clear_error_and_loses_nothing(small_fs: Path) -> None:
    store = small_fs / "store"
    # long records of words no other record shares: every one is inserted, none merged
    items = [NewMemory(text + " " + " ".join(f"p{i}x{j}" for j in range(40)), agent_id="disk")
             for i, text in enumerate(texts(20_000))]
    engine = _open(store)
    engine.set_ingest_policy(IngestPolicy(batch_size=200))
    acknowledged: list[str] = []
    error: EngineError | None = None
    try:
        for start in range(0, len(items), 200):
            chunk = items[start:start + 200]
            try:
                result = engine.ingest_batch(chunk)
            except EngineError as exc:
                error = exc
                break
            assert result.counts["inserted"] == len(chunk)
            acknowledged.extend(item.content for item in chunk)
    finally:
        with contextlib.suppress(EngineError):
            engine.close()
    assert error is not None, "the 6 MiB filesystem never filled up"
    assert isinstance(error, StoreUnavailable), repr(error)
    message = str(error).lower()
    assert str(store) in str(error) and ("full" in message or "space" in message), str(error)
    assert acknowledged, "the disk filled before the first chunk"
    # make room, reopen: every acknowledged record is there, once; a retry completes
    _mount("-o", "remount,size=256m", str(small_fs))
    engine = _open(store)
    try:
        view = engine.store.view
        missing = [c for c in acknowledged if len(view.ids_with_hash(content_hash(c))) != 1]
        assert not missing, f"{len(missing)} acknowledged records lost or duplicated"
        failed_at = len(acknowledged)
        retry = engine.ingest_batch(items[failed_at:failed_at + 400])
        # The chunk that failed may have reached Chroma before the ledger refused its edit
        # history (the engine writes the store first): its records are then exact duplicates
        # on the retry. Either way each is stored exactly once.
        assert retry.counts["inserted"] + retry.counts["skipped"] == 400, retry.counts
        assert retry.counts["inserted"] >= 200, retry.counts
        retried = [i.content for i in items[failed_at:failed_at + 400]]
        assert all(len(view.ids_with_hash(content_hash(c))) == 1 for c in retried)
        print(f"full disk after {failed_at} records: {error}; retry {retry.counts}")
    finally:
        engine.close()


@pytest.mark.slow
def test_read_only_store_directory_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    engine = _open(store)
    contents = texts(50)
    engine.ingest_batch([NewMemory(c, agent_id="ro") for c in contents])
    engine.close()
    _mount("--bind", str(store), str(store))
    try:
        _mount("-o", "remount,bind,ro", str(store))
        with pytest.raises(StoreUnavailable) as caught:
            _open(store)
        assert str(store) in str(caught.value), str(caught.value)
        # A read-only open: chromadb 1.5 writes to chroma.sqlite3 while opening, so on a
        # read-only filesystem even that is refused — with the same clear error. If a later
        # Chroma opens it, every record must be visible and writes refused.
        refusal = ""
        try:
            reader = _open(store, read_only=True)
        except StoreUnavailable as exc:
            refusal = str(exc)
        if refusal:
            assert str(store) in refusal and "readonly" in refusal.replace("-", ""), refusal
        else:
            try:
                assert reader.count() == len(contents)
                with pytest.raises(StoreReadOnly):
                    reader.add(NewMemory("not written", agent_id="ro"))
            finally:
                reader.close()
    finally:
        _umount(store)
    engine = _open(store)
    try:
        assert engine.count() == len(contents)
        assert all(engine.store.view.ids_with_hash(content_hash(c)) for c in contents)
    finally:
        engine.close()
