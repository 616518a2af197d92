"""The columnar view's snapshots: shared until the view changes, never copied, and immutable in
their rows, alive mask and text columns (copy-on-write) while writers carry on."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from engine.records import MemoryRecord, NewMemory
from engine.store.view import ColumnarView, ViewSnapshot
from engine.text import content_hash

NOW = 1_767_225_600_000.0
DIM = 8


def record(i: int, *, agent: str = "a", tags: tuple[str, ...] = ()) -> MemoryRecord:
    return MemoryRecord.create(NewMemory(content=f"memory {i}", agent_id=agent, tags=tags),
                               now_ms=NOW + i)


def unit(n: int, seed: int = 0) -> npt.NDArray[np.float32]:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    normalized: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalized


def filled(n: int) -> tuple[ColumnarView, list[MemoryRecord]]:
    view = ColumnarView(DIM, capacity=16)
    records = [record(i, tags=(f"t{i % 3}",)) for i in range(n)]
    view.upsert(records, unit(n))
    return view, records


def test_snapshot_is_shared_until_the_view_changes() -> None:
    view, records = filled(10)
    first = view.snapshot()
    assert view.snapshot() is first and first.version == view.version
    changes: list[Callable[[], None]] = [
        lambda: view.touch([records[0].id], NOW + 1),
        lambda: view.upsert([records[1].replace(importance=0.9)]),
        lambda: view.remove([records[2].id]),
        lambda: view.upsert([record(99)]),
    ]
    for change in changes:
        before = view.snapshot()
        change()
        after = view.snapshot()
        assert after is not before and after.version > before.version
        assert view.snapshot() is after


def test_changes_that_change_nothing_keep_the_snapshot() -> None:
    view, _ = filled(5)
    first = view.snapshot()
    view.touch(["unknown"], NOW)
    view.remove(["unknown"])
    view.upsert([])
    assert view.snapshot() is first


def test_a_snapshot_takes_no_copy() -> None:
    view, records = filled(40)
    first = view.snapshot()
    ids = first.ids
    view.touch([records[3].id], NOW + 5)  # a scalar change: the text state is the same
    second = view.snapshot()
    assert second is not first
    assert second.ids is ids  # the list built for the first is reused, not rebuilt
    for column in ("alive", "vectors", "importance", "id_array", "content_array"):
        assert np.shares_memory(getattr(first, column), getattr(second, column)), column
    assert first.derived("k", lambda s: object()) is first.derived("k", lambda s: object())
    view.upsert([records[3].replace(importance=0.9)])  # not only access columns
    assert view.snapshot().derived("k", lambda s: 1) == 1


def test_appended_rows_are_beyond_an_earlier_snapshot() -> None:
    view, _ = filled(10)
    before = view.snapshot()
    ids = list(before.ids)
    appended = [record(i) for i in range(100, 130)]
    view.upsert(appended, unit(30, seed=1))  # grows the arrays too
    assert before.n == 10 and before.count == 10
    assert before.ids == ids and len(before.contents) == len(before.tag_array) == 10
    after = view.snapshot()
    assert after.n == 40 and after.ids[:10] == ids and after.ids[10] == appended[0].id


def test_text_changes_and_deletes_do_not_reach_an_earlier_snapshot() -> None:
    view, records = filled(10)
    before = view.snapshot()
    row = view.row_of(records[4].id)
    assert row is not None
    edited = records[4].replace(content="memory four, edited", tags=("new",), version=2)
    view.upsert([edited])
    view.remove([records[6].id])
    assert before.contents[row] == "memory 4" and before.tags[row] == ("t1",)
    assert before.hash_array[row] == records[4].content_hash
    assert before.alive.all() and before.count == 10
    after = view.snapshot()
    assert after.contents[row] == "memory four, edited" and after.tags[row] == ("new",)
    assert after.hashes[row] == edited.content_hash and after.count == 9
    assert view.ids_with_hash(edited.content_hash) == [records[4].id]
    assert view.ids_with_hash(records[4].content_hash) == []


def test_unchanged_text_is_not_copied() -> None:
    view, records = filled(10)
    before = view.snapshot()
    view.upsert([records[2].replace(importance=0.75, version=2)])  # same text, new scalar
    after = view.snapshot()
    assert np.shares_memory(after.content_array, before.content_array)  # nothing copied
    assert after.contents is before.contents
    view.upsert([records[2].replace(content="other text", version=3)])
    assert not np.shares_memory(view.snapshot().content_array, after.content_array)


def test_snapshot_arrays_are_read_only_and_the_view_stays_writable() -> None:
    view, records = filled(6)
    snapshot = view.snapshot()
    with pytest.raises(ValueError, match="read-only"):
        snapshot.alive[0] = False
    with pytest.raises(ValueError, match="read-only"):
        snapshot.vectors[0] = 0.0
    view.remove([records[0].id])
    view.upsert([record(50)], unit(1, seed=3))
    assert len(view) == 6 and view.snapshot().count == 6


def test_compaction_leaves_earlier_snapshots_whole() -> None:
    view = ColumnarView(DIM, capacity=16)
    records = [record(i) for i in range(1500)]
    view.upsert(records, unit(1500))
    before = view.snapshot()
    view.remove([r.id for r in records[:600]])  # more than a third dead: rebuilt
    after = view.snapshot()
    assert after.n == 900 and after.count == 900 and after.ids[0] == records[600].id
    assert before.n == 1500 and before.count == 1500
    assert before.ids[0] == records[0].id and before.contents[599] == "memory 599"
    assert view.row_of(records[600].id) == 0 and view.ids_with_hash(records[0].content_hash) == []
    vector = view.vector(records[700].id)
    assert vector is not None and np.allclose(vector, before.vectors[700])


def test_from_columns_round_trip() -> None:
    view, records = filled(12)
    snapshot = view.snapshot()
    live = snapshot.live_rows
    columns = {name: getattr(snapshot, name)[live] for name in (
        "agent", "source", "layer", "privacy", "tier", "category", "state", "importance",
        "confidence", "created_at", "last_accessed", "access_count", "expires_at", "recency_anchor",
        "token_estimate", "has_vector", "vectors")}
    rebuilt = ColumnarView.from_columns(
        DIM, columns, ids=list(snapshot.ids), contents=list(snapshot.contents),
        hashes=list(snapshot.hashes), tags=list(snapshot.tags), agents=list(snapshot.agents),
        sources=list(snapshot.sources))
    again = rebuilt.snapshot()
    assert again.ids == snapshot.ids and again.tags == snapshot.tags
    assert rebuilt.ids_with_hash(records[3].content_hash) == [records[3].id]
    rebuilt.upsert([record(77)])
    assert rebuilt.snapshot().n == 13


def _consistent(snapshot: ViewSnapshot, known: dict[str, str]) -> None:
    """Every row's text columns belong together, and the row set is what ``n`` says."""
    assert len(snapshot.ids) == len(snapshot.contents) == len(snapshot.hashes) == snapshot.n
    for row in snapshot.live_rows.tolist():
        assert snapshot.hashes[row] == content_hash(snapshot.contents[row])
        assert snapshot.ids[row] in known


def test_readers_see_consistent_snapshots_while_a_writer_changes_the_view() -> None:
    view, records = filled(200)
    known = {r.id: r.content for r in records}
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            rng = np.random.default_rng(5)
            for step in range(300):
                fresh = record(1000 + step)
                known[fresh.id] = fresh.content
                view.upsert([fresh], unit(1, seed=step))
                target = records[int(rng.integers(len(records)))]
                if target.id in view:
                    view.upsert([target.replace(content=f"edit {step} of {target.id}",
                                                version=step + 2)])
                if step % 7 == 0:
                    view.remove([records[step % len(records)].id])
                view.touch([fresh.id], NOW + step)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            done.set()

    def read() -> None:
        try:
            while not done.is_set():
                snapshot = view.snapshot()
                _consistent(snapshot, known)
                assert snapshot.count == int(snapshot.alive.sum())
        except BaseException as exc:
            failures.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    writer = threading.Thread(target=write)
    for thread in (*readers, writer):
        thread.start()
    for thread in (writer, *readers):
        thread.join(timeout=120)
    assert not failures, failures[0]
    _consistent(view.snapshot(), known)


def test_an_access_only_change_keeps_derived_data_that_does_not_read_access() -> None:
    view, records = filled(20)
    calls: list[str] = []

    def masks(s: ViewSnapshot) -> object:
        calls.append("masks")
        return object()

    def access(s: ViewSnapshot) -> int:
        calls.append("access")
        return int(s.access_count.sum())

    first = view.snapshot()
    kept = first.derived("masks", masks)
    assert first.derived("access", access, reads_access=True) == 0
    view.touch([records[0].id, records[1].id], NOW + 1)
    touched = view.snapshot()
    assert touched.version == first.version + 1
    assert touched.access_version == first.access_version + 1
    assert touched.layout == first.layout
    assert touched.derived("masks", masks) is kept
    assert touched.derived("access", access, reads_access=True) == 2
    view.set_access([records[2].replace(access_count=5, last_accessed=NOW + 2)])
    again = view.snapshot()
    assert again.derived("masks", masks) is kept
    assert again.derived("access", access, reads_access=True) == 7
    assert calls == ["masks", "access", "access", "access"]
    assert first.derived("access", access, reads_access=True) == 0  # stays with its snapshot
    view.upsert([records[3].replace(importance=0.9)])  # any other change: a new scope
    assert view.snapshot().access_version == again.access_version
    assert view.snapshot().derived("masks", masks) is not kept


def test_set_access_names_an_unknown_record_and_changes_nothing() -> None:
    view, records = filled(3)
    before = view.snapshot()
    with pytest.raises(KeyError, match="nope"):
        view.set_access([records[0].replace(access_count=9), record(50).replace(id="nope")])
    assert view.snapshot() is before and int(before.access_count[0]) == 0


def test_resident_bytes_count_the_rows_not_the_capacity() -> None:
    view = ColumnarView(DIM, capacity=4096)
    assert view.resident_bytes() == {"vectors": 0, "columns": 0}
    view.upsert([record(i) for i in range(10)], unit(10))
    resident = view.resident_bytes()
    assert resident["vectors"] == 10 * DIM * 4  # float32
    # 7 one-byte, 6 four-byte and 4 eight-byte scalar columns
    assert resident["columns"] == 10 * (7 * 1 + 6 * 4 + 4 * 8)
