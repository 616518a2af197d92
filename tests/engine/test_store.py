"""Store contract: the same tests against an embedded store and a real `chroma run` server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import (
    RecordNotFound,
    SchemaMismatch,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    ValidationError,
)
from engine.records import MemoryRecord, NewMemory
from engine.store import MemoryStore, StoreSpec, list_collections

NOW = 1_767_225_600_000.0


def records(n: int, agent: str = "a") -> list[MemoryRecord]:
    return [MemoryRecord.create(NewMemory(content=f"memory number {i}", agent_id=agent,
                                          tags=(f"t{i % 3}",), importance=(i % 10) / 10),
                                now_ms=NOW + i)
            for i in range(n)]


def unit(n: int, seed: int = 0) -> npt.NDArray[np.float32]:
    vectors = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
    normalized: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalized


@pytest.fixture(params=["embedded", "server"])
def spec(request: pytest.FixtureRequest, tmp_path: Path, unique_collection: str) -> StoreSpec:
    if request.param == "embedded":
        return StoreSpec(str(tmp_path / "store"))
    url = request.getfixturevalue("chroma_server_url")
    return StoreSpec(url, collection=unique_collection)


def test_write_read_update_delete(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        batch = records(30)
        vectors = unit(30)
        store.write(batch, vectors)
        assert store.count() == 30
        assert store.get(batch[3].id) == batch[3]
        assert [r.id for r in store.get_many([batch[5].id, batch[1].id])] == [batch[5].id,
                                                                              batch[1].id]
        stored = store.view.vector(batch[2].id)
        assert stored is not None and np.allclose(stored, vectors[2], atol=1e-6)
        changed = batch[0].replace(importance=0.99, version=2)
        store.write([changed])
        assert store.get(batch[0].id).importance == 0.99
        assert store.view.vector(batch[0].id) is not None  # same content keeps its vector
        store.delete([batch[1].id])
        assert store.count() == 29
        with pytest.raises(RecordNotFound):
            store.get(batch[1].id)
        with pytest.raises(RecordNotFound, match="nope"):
            store.delete([batch[2].id, "nope"])
        assert store.count() == 29  # nothing deleted when one id is unknown
        neighbours = store.nearest(vectors[4], 3)
        assert neighbours[0][0] == batch[4].id and neighbours[0][1] == pytest.approx(1.0, abs=1e-4)
    finally:
        store.close()


def test_reopen_rebuilds_the_view(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    batch = records(12, agent="bob")
    store.write(batch, unit(12))
    store.close()
    again = MemoryStore.open(spec, now_ms=NOW)
    try:
        snapshot = again.view.snapshot()
        assert snapshot.count == 12
        assert set(snapshot.ids) == {r.id for r in batch}
        assert snapshot.has_vector.all()
        assert snapshot.agents == ["bob"]
        assert again.view.ids_with_hash(batch[0].content_hash) == [batch[0].id]
    finally:
        again.close()


def test_batches_larger_than_chroma_max(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        store._max_batch = 7  # force several batches through the public write path
        batch = records(50)
        store.write(batch, unit(50))
        assert store.count() == 50
        assert [r.id for r in store.get_many([r.id for r in batch])] == [r.id for r in batch]
    finally:
        store.close()


class FailingCollection:
    """A real Chroma collection whose ``upsert`` raises on its ``fail_on``-th call (1-based)."""

    def __init__(self, inner: Any, fail_on: int) -> None:
        self._inner = inner
        self._fail_on = fail_on
        self.upserts = 0

    def upsert(self, **batch: Any) -> None:
        self.upserts += 1
        if self.upserts == self._fail_on:
            raise OSError("No space left on device (injected)")
        self._inner.upsert(**batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_failed_batch_rolls_back_the_batches_written_before_it(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        stored = records(12)
        stored_vectors = unit(12, seed=1)
        store.write(stored, stored_vectors)
        # 15 records in batches of 5: updates and inserts in every batch; the third batch fails
        updates = [r.replace(content=f"{r.content}, changed", importance=0.95, version=2)
                   for r in stored[:8]]
        fresh = records(7, agent="b")
        batch = [updates[0], fresh[0], updates[1], updates[2], fresh[1],
                 updates[3], fresh[2], updates[4], fresh[3], updates[5],
                 fresh[4], updates[6], fresh[5], updates[7], fresh[6]]
        store._max_batch = 5
        failing = FailingCollection(store._collection, fail_on=3)
        store._collection = failing
        before = store.view.snapshot()
        with pytest.raises(StoreUnavailable, match="nothing was changed"):
            store.write(batch, unit(15, seed=2))
        assert failing.upserts == 5  # three batches tried, then each of the two written restored
        # Chroma holds exactly what it held before: the inserted records are gone again and the
        # updated ones have their old document, metadata and embedding back
        assert store.read_by_id([r.id for r in fresh]) == []
        assert store.read_by_id([r.id for r in stored]) == stored
        page = store._collection.get(ids=[r.id for r in stored], include=["embeddings"])
        by_id = dict(zip(page["ids"], page["embeddings"], strict=True))
        for record, vector in zip(stored, stored_vectors, strict=True):
            assert np.allclose(by_id[record.id], vector, atol=1e-6)
        # and the view never saw the failed write
        assert store.view.snapshot() is before and store.count() == 12
        store._collection = failing._inner
        store.write(batch, unit(15, seed=2))  # the same write succeeds once the disk is back
        assert store.count() == 19 and store.get(updates[7].id).content.endswith("changed")
    finally:
        store.close()


class RecordingCollection:
    """A real Chroma collection that records which ids each ``update`` and ``upsert`` got, and
    makes the ``fail_upsert``-th upsert raise (0: none)."""

    def __init__(self, inner: Any, fail_upsert: int = 0) -> None:
        self._inner = inner
        self._fail_upsert = fail_upsert
        self.calls: list[tuple[str, list[str]]] = []

    def update(self, **batch: Any) -> None:
        self.calls.append(("update", list(batch["ids"])))
        self._inner.update(**batch)

    def upsert(self, **batch: Any) -> None:
        self.calls.append(("upsert", list(batch["ids"])))
        if sum(kind == "upsert" for kind, _ in self.calls) == self._fail_upsert:
            raise OSError("No space left on device (injected)")
        self._inner.upsert(**batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_record_stored_with_the_same_text_and_vector_gets_a_metadata_update(
        spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        stored, vectors = records(6), unit(6)
        store.write(stored, vectors)
        relinked = stored[0].replace(importance=0.97, version=2)  # what a back-link write is
        reworded = stored[1].replace(content="memory number one, reworded", version=2)
        fresh = records(1, agent="b")[0]
        recording = RecordingCollection(store._collection)
        store._collection = recording
        # the first keeps its stored vector (given again, or not at all); the second has a new
        # text and vector; the third is new
        store.write([relinked, reworded, fresh], np.stack([vectors[0], unit(1, 7)[0],
                                                            unit(1, 8)[0]]))
        assert recording.calls == [("update", [relinked.id]),
                                   ("upsert", [reworded.id, fresh.id])]
        assert store.get(relinked.id) == relinked and store.get(reworded.id) == reworded
        page = recording.get(ids=[relinked.id], include=["embeddings", "documents"])
        assert page["documents"] == [relinked.content]
        assert np.allclose(page["embeddings"][0], vectors[0], atol=1e-6)
        assert store.nearest(vectors[0], 1)[0][0] == relinked.id
        recording.calls.clear()
        store.write([relinked.replace(importance=0.5, version=3)])  # no vector: the stored one
        assert recording.calls == [("update", [relinked.id])]
    finally:
        store.close()


def test_a_write_in_small_batches_is_still_one_all_or_nothing_write(spec: StoreSpec) -> None:
    # batch_size caps each Chroma call (the app's undo: Chroma holds the GIL for a whole call)
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        batch = records(10)
        counting = FailingCollection(store._collection, fail_on=0)  # never fails
        store._collection = counting
        store.write(batch, unit(10), batch_size=4)
        assert counting.upserts == 3  # 4 + 4 + 2
        assert store.count() == 10
        failing = FailingCollection(counting._inner, fail_on=3)
        store._collection = failing
        before = store.view.snapshot()
        others = records(10, agent="b")
        with pytest.raises(StoreUnavailable, match="nothing was changed"):
            store.write(others, unit(10, seed=3), batch_size=4)
        assert failing.upserts == 3  # the third call failed; the two before it were deleted again
        assert store.view.snapshot() is before and store.count() == 10
        assert store.read_by_id([r.id for r in others]) == []
    finally:
        store.close()


def test_a_failed_upsert_rolls_back_the_metadata_update_before_it(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        stored, vectors = records(4), unit(4)
        store.write(stored, vectors)
        relinked = stored[0].replace(importance=0.97, version=2)
        recording = RecordingCollection(store._collection, fail_upsert=1)
        store._collection = recording
        before = store.view.snapshot()
        with pytest.raises(StoreUnavailable, match="nothing was changed"):
            store.write([relinked, *records(2, agent="b")],
                        np.concatenate([vectors[:1], unit(2, 9)]))
        assert [kind for kind, _ in recording.calls] == ["update", "upsert", "update"]
        assert store.read_by_id([r.id for r in stored]) == stored  # the old metadata is back
        assert store.view.snapshot() is before and store.count() == 4
    finally:
        store.close()


def test_bad_vectors_write_nothing(spec: StoreSpec) -> None:
    store = MemoryStore.open(spec, now_ms=NOW)
    try:
        with pytest.raises(ValidationError, match="vectors"):
            store.write(records(3), unit(2))
        assert store.count() == 0
    finally:
        store.close()


def test_read_only_refuses_writes(spec: StoreSpec) -> None:
    writer = MemoryStore.open(spec, now_ms=NOW)
    writer.write(records(2), unit(2))
    writer.close()
    reader = MemoryStore.open(StoreSpec(spec.location, read_only=True,
                                        collection=spec.collection), now_ms=NOW)
    try:
        assert reader.read_only and reader.count() == 2
        with pytest.raises(StoreReadOnly, match="read-only"):
            reader.write(records(1))
        with pytest.raises(StoreReadOnly):
            reader.delete([])
    finally:
        reader.close()


def test_unreachable_server_is_a_clear_error() -> None:
    from tests.support.chroma_server import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailable) as refused:
        MemoryStore.open(StoreSpec(url))
    assert str(refused.value).startswith(
        f"Could not connect to the Chroma server at {url.removeprefix('http://')} — connection "
        "refused. Is `chroma run` running")
    assert "Errno" not in str(refused.value)


def test_second_process_gets_the_lock_error_and_nothing_is_damaged(tmp_path: Path) -> None:
    location = tmp_path / "store"
    store = MemoryStore.open(StoreSpec(str(location)), now_ms=NOW)
    batch = records(5)
    store.write(batch, unit(5))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path.cwd())!r})
        from engine.errors import StoreLocked
        from engine.store import MemoryStore, StoreSpec
        try:
            MemoryStore.open(StoreSpec({str(location)!r}))
        except StoreLocked as exc:
            print("LOCKED", exc.holder_pid, exc)
            reader = MemoryStore.open(StoreSpec({str(location)!r}, read_only=True))
            print("READONLY", reader.count())
            sys.exit(0)
        sys.exit(1)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    import os

    assert f"LOCKED {os.getpid()} store {location} is in use by PID {os.getpid()}" \
        in result.stdout
    assert "use a Chroma server for several processes" in result.stdout
    assert "READONLY 5" in result.stdout
    assert store.count() == 5
    store.write(records(1, agent="later"))
    store.close()
    again = MemoryStore.open(StoreSpec(str(location)), now_ms=NOW)
    assert again.count() == 6
    assert {again.get(r.id).content for r in batch} == {r.content for r in batch}
    again.close()


@pytest.mark.parametrize("planted", [".mnemoscope.lock", "chroma.sqlite3"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_folder_with_a_link_out_of_it_is_refused_and_the_target_untouched(
        tmp_path: Path, planted: str, read_only: bool) -> None:
    # A store folder from someone else: a link in it pointed the writer's lock file at any
    # file the user can write (truncated, then overwritten with the holder's PID), or Chroma's
    # database at another one (written on every open, even read-only).
    location = tmp_path / "store"
    store = MemoryStore.open(StoreSpec(str(location)), now_ms=NOW)
    store.write(records(2), unit(2))
    store.close()
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    if planted == "chroma.sqlite3":
        (location / planted).replace(victim)  # the database now lives outside the folder
    else:
        victim.write_bytes(b"the user's own file\n")
        (location / planted).unlink(missing_ok=True)
    before = victim.read_bytes()
    (location / planted).symlink_to(victim)
    with pytest.raises(StoreUnavailable) as refused:
        MemoryStore.open(StoreSpec(str(location), read_only=read_only), now_ms=NOW)
    assert f"{location / planted} is a symbolic link (to {victim})" in str(refused.value)
    assert "remove the link" in str(refused.value)
    assert victim.read_bytes() == before


def test_the_lock_file_is_never_opened_through_a_link(tmp_path: Path) -> None:
    # The folder check runs first; a link made after it is still not followed (O_NOFOLLOW).
    from engine.store.lock import LOCK_FILENAME, StoreLock

    victim = tmp_path / "precious.txt"
    victim.write_text("the user's own file", encoding="utf-8")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / LOCK_FILENAME).symlink_to(victim)
    with pytest.raises(StoreUnavailable, match="cannot lock store"):
        StoreLock(tmp_path / "store").acquire()
    assert victim.read_text(encoding="utf-8") == "the user's own file"


def test_same_process_second_open_is_refused(tmp_path: Path) -> None:
    store = MemoryStore.open(StoreSpec(str(tmp_path / "s")), now_ms=NOW)
    with pytest.raises(StoreLocked):
        MemoryStore.open(StoreSpec(str(tmp_path / "s")), now_ms=NOW)
    store.close()
    MemoryStore.open(StoreSpec(str(tmp_path / "s")), now_ms=NOW).close()  # released on close


def test_foreign_collection_opens_read_only_with_its_documents(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "foreign"
    client = chromadb.PersistentClient(path=str(path),
                                       settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection("notes", embedding_function=None)
    collection.add(ids=["n1", "n2"], documents=["Buy milk", "Call mum on Sunday"],
                   metadatas=[{"author": "me", "rating": 3}, {"author": "you"}],
                   embeddings=unit(2))
    del client, collection
    infos = {i.name: i for i in list_collections(StoreSpec(str(path)))}
    assert infos["notes"].count == 2 and not infos["notes"].ours
    store = MemoryStore.open(StoreSpec(str(path), read_only=True, collection="notes"), now_ms=NOW)
    try:
        assert store.foreign and store.read_only
        record = store.get("n1")
        assert record.content == "Buy milk"
        assert record.metadata["foreign"] == {"author": "me", "rating": 3}
        with pytest.raises(StoreReadOnly, match="written by another tool"):
            store.write([record])
    finally:
        store.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "future"
    client = chromadb.PersistentClient(path=str(path),
                                       settings=Settings(anonymized_telemetry=False))
    client.create_collection("mnemoscope_memories", metadata={"schema_version": 99},
                             embedding_function=None)
    del client
    with pytest.raises(SchemaMismatch, match="schema version 99"):
        MemoryStore.open(StoreSpec(str(path)), now_ms=NOW)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_store_timeouts_must_be_positive_seconds(bad: object) -> None:
    with pytest.raises(ValidationError, match="read_timeout_s: must be a positive number"):
        StoreSpec("http://127.0.0.1:8000", read_timeout_s=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="connect_timeout_s"):
        StoreSpec("/tmp/store", connect_timeout_s=bad)  # type: ignore[arg-type]


def test_a_file_or_a_folder_of_other_files_is_not_made_a_store(tmp_path: Path) -> None:
    # A mistyped --store must not become a Chroma store among the user's files (nor say
    # "cannot lock store …: [Errno 17] File exists").
    document = tmp_path / "notes.txt"
    document.write_text("mine", encoding="utf-8")
    with pytest.raises(StoreUnavailable, match=r"notes\.txt is a file, not a store folder"):
        MemoryStore.open(StoreSpec(str(document)), now_ms=NOW)
    documents = tmp_path / "documents"
    documents.mkdir()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (documents / name).write_text(name, encoding="utf-8")
    for read_only in (False, True):
        with pytest.raises(StoreUnavailable,
                           match=r"holds other files \(a\.txt, b\.txt, c\.txt and 1 more\)"):
            MemoryStore.open(StoreSpec(str(documents), read_only=read_only), now_ms=NOW)
    assert sorted(p.name for p in documents.iterdir()) == ["a.txt", "b.txt", "c.txt", "d.txt"]
    # a new folder, an empty one (hidden files aside) and a store's own folder are fine
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".DS_Store").write_bytes(b"")
    for folder in (tmp_path / "new" / "store", empty):
        store = MemoryStore.open(StoreSpec(str(folder)), now_ms=NOW)
        store.write(records(1), unit(1))
        store.close()
        MemoryStore.open(StoreSpec(str(folder)), now_ms=NOW).close()


def test_a_new_store_folder_and_a_server_ledger_folder_are_private(tmp_path: Path) -> None:
    # They hold the memories, review items and edit history in clear; made with the default
    # umask (0755 folders, 0644 files) any user of the machine could read every memory.
    import os
    import stat

    from engine.ledger import Ledger

    previous = os.umask(0o022)
    try:
        MemoryStore.open(StoreSpec(str(tmp_path / "deep" / "store")), now_ms=NOW).close()
        Ledger(tmp_path / "servers" / "host_8000_default" / "ledger.sqlite3").close()
    finally:
        os.umask(previous)
    for folder in (tmp_path / "deep" / "store", tmp_path / "servers" / "host_8000_default"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
