"""The records table on a Chroma server store before its view is read: pages, filters and the
text filter answered by the server (``MemoryEngine.server_rows``), checked against the view."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import ValidationError
from engine.memory_engine import MemoryEngine
from engine.query import ALL_STATES, RecordQuery, SortKey
from engine.records import Layer, MemoryRecord, NewMemory, Privacy, RecordState
from engine.store import MemoryStore, StoreSpec

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
        assert not engine.view_ready
    finally:
        engine.close()
