"""Opening with the view deferred: count and a first page at once, the view read afterwards."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import Cancelled, StoreUnavailable, ValidationError
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, RecordRow, SortKey
from engine.records import MemoryRecord, NewMemory
from engine.store import MemoryStore, StoreSpec, view_cache

NOW = 1_767_225_600_000.0
COUNT = 450


def records(n: int) -> list[MemoryRecord]:
    return [MemoryRecord.create(NewMemory(content=f"deferred memory {i}", agent_id=f"a{i % 3}",
                                          importance=(i % 10) / 10), now_ms=NOW + i)
            for i in range(n)]


def unit(n: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(5).standard_normal((n, 384)).astype(np.float32)
    normalized: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return normalized


@pytest.fixture(params=["embedded", "server"])
def written(request: pytest.FixtureRequest, tmp_path: Path,
            unique_collection: str) -> tuple[StoreSpec, list[MemoryRecord]]:
    """A store holding COUNT records, written in order, without a view cache."""
    if request.param == "embedded":
        spec = StoreSpec(str(tmp_path / "store"))
    else:
        spec = StoreSpec(request.getfixturevalue("chroma_server_url"),
                         collection=unique_collection)
    batch = records(COUNT)
    store = MemoryStore.open(spec, now_ms=NOW)
    for start in range(0, COUNT, 100):  # several writes: Chroma keeps them in this order
        store.write(batch[start:start + 100], unit(COUNT)[start:start + 100])
    store.close()
    if not spec.is_remote:
        view_cache.invalidate(Path(spec.location))
    return spec, batch


def test_count_and_pages_come_before_the_view(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        assert not engine.view_ready and engine.count() == COUNT
        first = engine.preview_rows(0, 200)
        assert first.total == COUNT
        assert [r.id for r in first.rows] == [r.id for r in reversed(batch)][:200]
        assert first.rows[0] == RecordRow.of(batch[-1])
        assert len(first.decayed_importance) == 200
        last = engine.preview_rows(400, 200)
        assert [r.id for r in last.rows] == [r.id for r in reversed(batch[:50])]
        assert engine.preview_rows(COUNT, 200).rows == []
        with pytest.raises(ValidationError, match="preview page"):
            engine.preview_rows(-1, 10)
        progress: list[tuple[int, int]] = []
        assert engine.load_view(progress=lambda done, total: progress.append((done, total))) \
            == COUNT
        assert engine.store.view_ready and progress[-1] == (COUNT, COUNT)
        page = engine.list_records(RecordQuery(sort_by=SortKey.IMPORTANCE, limit=5))
        assert page.total == COUNT and all(r.importance == 0.9 for r in page.records)
        rows = engine.list_rows(RecordQuery(sort_by=SortKey.IMPORTANCE, limit=5))
        assert [r.id for r in rows.rows] == [r.id for r in page.records]
        assert rows.decayed_importance == pytest.approx(page.decayed_importance)
        for row, record in zip(rows.rows, page.records, strict=True):  # the view's columns
            full = RecordRow.of(record)
            assert (row.content, row.layer, row.agent_id, row.tags, row.privacy, row.source,
                    row.access_count, row.created_at) == \
                (full.content, full.layer, full.agent_id, full.tags, full.privacy, full.source,
                 full.access_count, full.created_at)
            assert (row.importance, row.confidence) == (full.importance, full.confidence)
        assert engine.load_view() == COUNT  # a second call is a no-op
    finally:
        engine.close()


def test_calls_that_need_the_view_wait_for_it(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, _batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    answers: list[int] = []
    try:
        waiter = threading.Thread(
            target=lambda: answers.append(engine.list_records(RecordQuery(limit=10)).total))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not answers  # waiting: the view is not read yet
        engine.load_view()
        waiter.join(30)
        assert answers == [COUNT]
    finally:
        engine.close()


def test_cancel_stops_the_read_and_leaves_no_cache(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    seen: list[int] = []

    def cancelled() -> bool:
        return len(seen) > 0

    with pytest.raises(Cancelled, match="stopped after"):
        engine.load_view(progress=lambda done, _total: seen.append(done), cancelled=cancelled)
    assert not engine.view_ready
    with pytest.raises(StoreUnavailable, match="not indexed"):
        engine.list_records(RecordQuery(limit=10))
    assert engine.preview_rows(0, 5).total == COUNT  # Chroma itself is still readable
    engine.close()
    if not spec.is_remote:  # the half-read view was not saved as the cache
        assert not (Path(spec.location) / view_cache.CACHE_META).exists()
    again = MemoryEngine.open(spec)
    assert again.count() == COUNT and again.get(batch[0].id).content == batch[0].content
    again.close()


def test_a_cancelled_read_can_be_asked_for_again(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    """Issue 24: a server store reads its view when a feature asks; a person who cancelled
    may ask again, and the view then reads from the first record."""
    spec, batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        with pytest.raises(Cancelled):
            engine.load_view(cancelled=lambda: True)
        assert not engine.store.view_ready
        progress: list[tuple[int, int]] = []
        assert engine.load_view(progress=lambda done, total: progress.append((done, total))) \
            == COUNT
        assert engine.view_ready and progress[-1] == (COUNT, COUNT)
        assert engine.list_records(RecordQuery(limit=COUNT)).total == COUNT
        assert engine.get(batch[-1].id).content == batch[-1].content
    finally:
        engine.close()


def test_closing_before_the_view_is_read_releases_waiters(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, _batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    failures: list[BaseException] = []

    def wait() -> None:
        try:
            engine.store.view.snapshot()
        except StoreUnavailable as exc:
            failures.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    engine.close()
    waiter.join(10)
    assert not waiter.is_alive() and "closed before" in str(failures[0])
    with pytest.raises(StoreUnavailable):
        engine.load_view()


def test_a_usable_cache_makes_deferring_unnecessary(tmp_path: Path) -> None:
    spec = StoreSpec(str(tmp_path / "store"))
    store = MemoryStore.open(spec, now_ms=NOW)
    store.write(records(30), unit(30))
    store.close()
    engine = MemoryEngine.open(StoreSpec(spec.location, read_only=True), defer_view=True)
    assert engine.view_ready and engine.store._view_from_cache and engine.count() == 30
    engine.close()


def test_the_view_is_read_by_id_in_chroma_order_and_a_record_gone_meanwhile_is_left_out(
        written: tuple[StoreSpec, list[MemoryRecord]], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, batch = written
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        collection = engine.store._collection
        real_get = collection.get
        calls: list[dict[str, Any]] = []

        def get(**kwargs: Any) -> Any:
            calls.append(kwargs)
            if kwargs.get("include") == []:  # the ids: one of them deleted before it is read
                got = real_get(**kwargs)
                got["ids"] = [*got["ids"][:10], "deleted-meanwhile", *got["ids"][10:]]
                return got
            return real_get(**kwargs)

        monkeypatch.setattr(collection, "get", get)
        assert engine.load_view() == COUNT
        # Every record was read by id: Chroma's offset pages step over every earlier row,
        # which made a 1M store's read quadratic (14 minutes). Only the ids list by offset.
        reads = [call for call in calls if call.get("include") != []]
        assert reads and all("ids" in call and "offset" not in call for call in reads)
        assert sum(len(call["ids"]) for call in reads) == COUNT + 1
        view = engine.store.view
        assert len(view) == COUNT and all(r.id in view for r in batch)
    finally:
        engine.close()
