"""The records table on a Chroma server store before its view is read: pages, filters and the
text filter answered by the server (``MemoryEngine.server_rows``), checked against the view.

Metadata filters are read from the newest records in windows (``StoreSpec.scan_window``, small
here so that 600 records take many windows) and tested in the engine
(:mod:`engine.store.filtered_scan`); rare filters and the exact count go to Chroma's ``where``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import ValidationError
from engine.memory_engine import MemoryEngine
from engine.query import ALL_STATES, RecordQuery, SortKey
from engine.records import Layer, MemoryRecord, NewMemory, Privacy, RecordState
from engine.store import MemoryStore, StoreSpec
from engine.store.filtered_scan import matches

pytestmark = [pytest.mark.server, pytest.mark.slow]

NOW = 1_767_225_600_000.0
COUNT = 600
LAYERS = (Layer.SEMANTIC, Layer.EPISODIC, Layer.PROCEDURAL)
WORDS = ("Kettle", "garden", "Invoice", "harbour", "lantern")


def records(n: int) -> list[MemoryRecord]:
    """Record i: agent a{i%3}, layer by i%5, every 7th archived, every 11th public, and a word
    in a case that differs between records (the text filter ignores case)."""
    out = []
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        out.append(MemoryRecord.create(NewMemory(
            content=f"server memory {i} about the {word if i % 2 else word.upper()}",
            agent_id=f"a{i % 3}", layer=LAYERS[i % 5 % 3], importance=(i % 10) / 10,
            privacy=Privacy.PUBLIC if i % 11 == 0 else Privacy.PRIVATE,
            state=RecordState.ARCHIVED if i % 7 == 0 else RecordState.ACTIVE), now_ms=NOW + i))
    return out


def unit(n: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(7).standard_normal((n, 384)).astype(np.float32)
    normalized: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return normalized


@pytest.fixture(scope="module")
def written(chroma_server_url: str) -> tuple[StoreSpec, list[MemoryRecord]]:
    """A server collection of COUNT records, written in order (Chroma keeps that order)."""
    spec = StoreSpec(chroma_server_url, collection="server-pages")
    batch = records(COUNT)
    store = MemoryStore.open(spec, now_ms=NOW)
    vectors = unit(COUNT)
    for start in range(0, COUNT, 100):
        store.write(batch[start:start + 100], vectors[start:start + 100])
    store.close()
    return spec, batch


@pytest.fixture
def engine(written: tuple[StoreSpec, list[MemoryRecord]]) -> Iterator[MemoryEngine]:
    opened = MemoryEngine.open(written[0], defer_view=True)
    yield opened
    opened.close()


def every_page(engine: MemoryEngine, query: RecordQuery) -> tuple[list[str], int]:
    """The ids of every page of ``query`` from the server, in order, and the total."""
    ids: list[str] = []
    offset, total = 0, -1
    while True:
        page = engine.server_rows(dataclasses.replace(query, offset=offset, limit=97))
        total = page.total
        if not page.rows:
            return ids, total
        ids.extend(row.id for row in page.rows)
        offset += len(page.rows)


def newest_first(batch: list[MemoryRecord], keep: Callable[[MemoryRecord], bool]) -> list[str]:
    return [r.id for r in reversed(batch) if keep(r)]


def test_the_first_page_comes_from_the_server_before_the_view(
        engine: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = written[1]
    page = engine.server_rows(RecordQuery(limit=50))
    assert not engine.view_ready
    shown = newest_first(batch, lambda r: r.state is not RecordState.ARCHIVED)
    assert page.total == len(shown) == COUNT - (COUNT + 6) // 7
    assert [row.id for row in page.rows] == shown[:50]
    assert page.rows[0].content == next(r.content for r in batch if r.id == shown[0])
    assert len(page.decayed_importance) == 50
    everything = engine.server_rows(RecordQuery(states=ALL_STATES, limit=10))
    assert everything.total == COUNT and everything.rows[0].id == batch[-1].id
    assert not engine.view_ready


def test_a_filtered_page_comes_from_the_server_and_matches_the_view(
        engine: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = written[1]
    query = RecordQuery(agent_id="a1", layer=Layer.EPISODIC, privacy=Privacy.PRIVATE,
                        importance_min=0.3, limit=40)
    page = engine.server_rows(query)
    assert not engine.view_ready
    expected = newest_first(batch, lambda r: r.agent_id == "a1" and r.layer is Layer.EPISODIC
                            and r.privacy is Privacy.PRIVATE and r.importance >= 0.3
                            and r.state is not RecordState.ARCHIVED)
    assert page.total == len(expected) > 40
    assert [row.id for row in page.rows] == expected[:40]
    assert all(row.agent_id == "a1" and row.layer is Layer.EPISODIC for row in page.rows)
    archived = engine.server_rows(RecordQuery(states=frozenset({RecordState.ARCHIVED})))
    assert {row.id for row in archived.rows} == {r.id for r in batch
                                                 if r.state is RecordState.ARCHIVED}
    engine.load_view()
    assert set(expected) == {row.id for row in engine.list_rows(
        RecordQuery(agent_id="a1", layer=Layer.EPISODIC, privacy=Privacy.PRIVATE,
                    importance_min=0.3, limit=1000)).rows}


def test_the_text_filter_runs_on_the_documents_ignoring_case(
        engine: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = written[1]
    page = engine.server_rows(RecordQuery(text="kettle", states=ALL_STATES, limit=500))
    assert not engine.view_ready
    expected = newest_first(batch, lambda r: "kettle" in r.content.casefold())
    assert {"KETTLE", "Kettle"} <= {row.content.split()[-1] for row in page.rows}
    assert [row.id for row in page.rows] == expected and page.total == len(expected)
    # Characters a regular expression would read as syntax are matched as they are.
    assert engine.server_rows(RecordQuery(text="memory 1.", states=ALL_STATES)).total == 0
    engine.load_view()
    local = engine.list_rows(RecordQuery(text="kettle", states=ALL_STATES, limit=500))
    assert {row.id for row in local.rows} == set(expected)


def test_paging_through_the_server_returns_every_record_once(
        engine: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = written[1]
    ids, total = every_page(engine, RecordQuery(states=ALL_STATES))
    assert total == COUNT and len(ids) == COUNT and set(ids) == {r.id for r in batch}
    assert ids == [r.id for r in reversed(batch)]
    ids, total = every_page(engine, RecordQuery(agent_id="a2"))
    expected = newest_first(batch, lambda r: r.agent_id == "a2"
                            and r.state is not RecordState.ARCHIVED)
    assert total == len(expected) and ids == expected
    assert not engine.view_ready


def test_what_the_server_cannot_answer_is_named(engine: MemoryEngine) -> None:
    assert engine.server_answers(RecordQuery(agent_id="a0", text="x")) is None
    assert engine.server_answers(RecordQuery(sort_by=SortKey.IMPORTANCE)) == \
        "sorting by importance"
    assert engine.server_answers(RecordQuery(descending=False)) == "sorting oldest first"
    assert engine.server_answers(RecordQuery(tags=("work",))) == "the tag filter"
    with pytest.raises(ValidationError, match="the tag filter needs the full view"):
        engine.server_rows(RecordQuery(tags=("work",)))
    assert not engine.view_ready


def test_a_store_without_hidden_records_pages_without_selecting_ids(
        chroma_server_url: str) -> None:
    spec = StoreSpec(chroma_server_url, collection="server-pages-active")
    batch = [r for r in records(120) if r.state is RecordState.ACTIVE]
    store = MemoryStore.open(spec, now_ms=NOW)
    store.write(batch, unit(len(batch)))
    store.close()
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        assert not engine.store.any_match({"state": {"$in": ["archived"]}})
        page = engine.server_rows(RecordQuery(limit=30, offset=10))
        assert page.total == len(batch)
        assert [row.id for row in page.rows] == [r.id for r in reversed(batch)][10:40]
        assert page.rows == engine.preview_rows(10, 30).rows
        # no record was ever archived or paused: a filter of those states reads nothing
        hidden = engine.server_rows(RecordQuery(states=frozenset({RecordState.ARCHIVED})))
        assert hidden.rows == [] and hidden.total == 0 and hidden.counted
        assert engine.server_count(RecordQuery(states=frozenset({RecordState.ARCHIVED}))) == 0
        assert not engine.view_ready
    finally:
        engine.close()


WINDOW = 60
"""The scan window of the tests below: 600 records are ten windows."""


@pytest.fixture
def windowed(written: tuple[StoreSpec, list[MemoryRecord]]) -> Iterator[MemoryEngine]:
    opened = MemoryEngine.open(dataclasses.replace(written[0], scan_window=WINDOW, scan_from=0),
                               defer_view=True)
    yield opened
    opened.close()


def full_view_ids(written: tuple[StoreSpec, list[MemoryRecord]], query: RecordQuery) -> list[str]:
    """Every id of ``query`` from the full view (a separate engine that reads every record)."""
    engine = MemoryEngine.open(written[0])
    try:
        return [row.id for row in engine.list_rows(
            dataclasses.replace(query, offset=0, limit=10_000)).rows]
    finally:
        engine.close()


def test_a_common_filter_is_read_from_the_newest_records_then_counted(
        windowed: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = written[1]
    query = RecordQuery(agent_id="a1", limit=20)
    expected = newest_first(batch, lambda r: r.agent_id == "a1"
                            and r.state is not RecordState.ARCHIVED)
    first = windowed.server_rows(query)
    # Two windows of 60 hold the first 20 of one record in 3.5: the rest is not read yet.
    assert not first.counted and 20 <= first.total < len(expected)
    assert [row.id for row in first.rows] == expected[:20]
    assert windowed.server_count(query) == len(expected)
    second = windowed.server_rows(dataclasses.replace(query, offset=20))
    assert second.counted and second.total == len(expected)
    assert [row.id for row in second.rows] == expected[20:40]
    assert not windowed.view_ready
    # the same records in the same order as the full view's filter
    assert expected == full_view_ids(written, query)


def test_scrolling_a_scan_to_its_end_returns_every_match_once_and_the_exact_total(
        windowed: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    query = RecordQuery(layer=Layer.SEMANTIC, privacy=Privacy.PRIVATE,
                        states=frozenset({RecordState.ACTIVE, RecordState.ARCHIVED}))
    expected = full_view_ids(written, query)
    ids: list[str] = []
    counted = []
    while True:
        page = windowed.server_rows(dataclasses.replace(query, offset=len(ids), limit=30))
        counted.append(page.counted)
        ids.extend(row.id for row in page.rows)
        if len(page.rows) < 30:
            break
    assert ids == expected
    assert page.total == len(expected) and counted[-1] and not counted[0]
    assert windowed.server_count(query) == len(expected)


def test_a_rare_filter_is_selected_by_chroma_and_counted_at_once(
        windowed: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    query = RecordQuery(agent_id="a0", privacy=Privacy.PUBLIC, limit=10)
    expected = full_view_ids(written, query)
    # one record in 38: the first window of 60 finds one or two, 10 would take 5 more
    assert 10 < len(expected) < COUNT / 30
    page = windowed.server_rows(query)
    assert page.counted and page.total == len(expected)
    assert [row.id for row in page.rows] == expected[:10]
    rest = windowed.server_rows(dataclasses.replace(query, offset=10, limit=100))
    assert [row.id for row in rest.rows] == expected[10:] and rest.total == len(expected)


def test_the_engine_tests_metadata_as_chroma_filters_it(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    """Every record tested in the engine (one window holds them all) against the ids Chroma's
    own ``where`` selects, filter by filter."""
    spec = dataclasses.replace(written[0], read_only=True, scan_window=COUNT, scan_from=0)
    store = MemoryStore.open(spec, now_ms=NOW, defer_view=True)
    wheres: list[dict[str, Any]] = [
        {"agent_id": "a2"},
        {"agent_id": {"$eq": "a2"}},
        {"agent_id": {"$ne": "a2"}},
        {"state": {"$nin": ["archived", "paused"]}},
        {"state": {"$in": ["archived"]}},
        {"no_such_key": {"$nin": ["x"]}},  # a missing key matches $nin and $ne only
        {"no_such_key": {"$ne": "x"}},
        {"no_such_key": {"$eq": "x"}},
        {"importance": {"$gte": 0.3 - 1e-7}},
        {"importance": {"$lt": 0.5}},
        {"importance": {"$gt": 0.2}},
        {"importance": {"$lte": 0.2 + 1e-7}},
        {"importance": {"$eq": 0}},  # an int against stored floats: Chroma compares both
        {"agent_id": {"$eq": 1}},  # a number never equals a string
        {"$and": [{"agent_id": {"$in": ["a0", "a1"]}}, {"layer": {"$eq": "episodic"}},
                  {"$or": [{"expires_at": {"$eq": -1.0}}, {"expires_at": {"$gte": NOW}}]}]},
        {"$or": [{"privacy": {"$eq": "public"}}, {"layer": {"$ne": "semantic"}}]},
    ]
    try:
        for where in wheres:
            by_chroma, total = store.server_page(where, None, 0, COUNT, now_ms=NOW)
            by_engine, scanned, counted = store.server_scan(where, 0, COUNT, now_ms=NOW)
            assert counted and scanned == total, where
            assert [r.id for r in by_engine] == [r.id for r in by_chroma], where
        assert matches({"agent_id": "a2"}, None) is False
        with pytest.raises(ValidationError, match=r"\$like"):
            matches({"agent_id": {"$like": "a%"}}, {"agent_id": "a2"})
    finally:
        store.close()


def test_a_scan_window_must_be_a_positive_whole_number(chroma_server_url: str) -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValidationError, match="scan_window"):
            StoreSpec(chroma_server_url, scan_window=bad)  # type: ignore[arg-type]
    for wrong in (-1, 1.5, None):
        with pytest.raises(ValidationError, match="scan_from"):
            StoreSpec(chroma_server_url, scan_from=wrong)  # type: ignore[arg-type]


def test_a_small_store_is_filtered_by_chroma_and_counted_at_once(
        written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    # the same common filter as the scan above, on a store below scan_from (COUNT + 1)
    engine = MemoryEngine.open(dataclasses.replace(written[0], scan_window=WINDOW,
                                                   scan_from=COUNT + 1), defer_view=True)
    try:
        query = RecordQuery(agent_id="a1", limit=20)
        page = engine.server_rows(query)
        expected = full_view_ids(written, query)
        assert page.counted and page.total == len(expected)
        assert [row.id for row in page.rows] == expected[:20]
    finally:
        engine.close()


def test_hidden_states_are_selected_by_chroma_not_scanned(
        windowed: MemoryEngine, written: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    # one record in 21: two windows of 60 would fill a page of 4, but uncounted
    query = RecordQuery(agent_id="a2", states=frozenset({RecordState.ARCHIVED}), limit=4)
    expected = full_view_ids(written, query)
    page = windowed.server_rows(query)
    assert page.counted and page.total == len(expected) > 4
    assert [row.id for row in page.rows] == expected[:4]


def test_a_first_page_again_sees_the_records_written_since(chroma_server_url: str) -> None:
    spec = StoreSpec(chroma_server_url, collection="server-pages-reload", scan_window=50,
                     scan_from=0)
    batch = [r for r in records(150) if r.state is RecordState.ACTIVE]
    writer = MemoryStore.open(spec, now_ms=NOW)
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        writer.write(batch, unit(len(batch)))
        query = RecordQuery(agent_id="a1", limit=10)
        before = newest_first(batch, lambda r: r.agent_id == "a1")
        assert [row.id for row in engine.server_rows(query).rows] == before[:10]
        assert engine.server_count(query) == len(before)
        late = MemoryRecord.create(NewMemory(content="written after the first page",
                                             agent_id="a1"), now_ms=NOW + 1000)
        writer.write([late], unit(1))
        again = engine.server_rows(query)  # a reload: the first page again
        assert [row.id for row in again.rows] == [late.id, *before[:9]]
        assert engine.server_count(query) == len(before) + 1
        second = engine.server_rows(dataclasses.replace(query, offset=10))
        assert [row.id for row in second.rows] == before[9:19]
    finally:
        engine.close()
        writer.close()


def test_a_fault_of_the_engines_own_code_is_not_reported_as_the_server_failing(
        windowed: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only Chroma's calls are turned into "reading <server> failed": an error while testing
    # or decoding what the server returned is a bug, and must surface as itself (the crash
    # reporter), not send the user to check a server that answered fine.
    def broken(where: dict[str, Any], metadata: Any) -> bool:
        raise KeyError("a bug in matching")

    monkeypatch.setattr("engine.store.chroma_store.matches", broken)
    with pytest.raises(KeyError, match="a bug in matching"):
        windowed.server_rows(RecordQuery(agent_id="a1", limit=20))
