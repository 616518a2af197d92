"""``MemoryEngine.locate_row``: where a record sits in a filtered, sorted query (records browser
links page to it, and widen the filters when they hide it)."""

from __future__ import annotations

from pathlib import Path

from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.records import Layer, NewMemory
from engine.store import StoreSpec


def test_the_position_is_the_rows_index_in_the_query_order(tmp_path: Path) -> None:
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")))
    try:
        made = [engine.add(NewMemory(content=f"memory number {i}", agent_id=f"a{i % 2}",
                                     layer=Layer.EPISODIC if i % 3 else Layer.SEMANTIC,
                                     importance=(i % 7) / 10)).id
                for i in range(30)]
        queries = [RecordQuery(limit=10_000),
                   RecordQuery(sort_by=SortKey.IMPORTANCE, limit=10_000),
                   RecordQuery(sort_by=SortKey.CONTENT, descending=False, limit=10_000),
                   RecordQuery(agent_id="a1", sort_by=SortKey.IMPORTANCE, limit=10_000)]
        for query in queries:
            order = [row.id for row in engine.list_rows(query).rows]
            for record_id in made:
                expected = order.index(record_id) if record_id in order else None
                assert engine.locate_row(query, record_id) == expected
        # offset and limit do not matter: the position is in the whole result
        assert engine.locate_row(RecordQuery(offset=5, limit=1), made[0]) == \
            engine.locate_row(RecordQuery(limit=10_000), made[0])
        hidden = RecordQuery(agent_id="a0")
        assert engine.locate_row(hidden, made[1]) is None  # agent a1: the filter hides it
        assert engine.locate_row(RecordQuery(text="number 17"), made[17]) == 0
        assert engine.locate_row(RecordQuery(), "no-such-record") is None
        engine.delete([made[3]])
        assert engine.locate_row(RecordQuery(), made[3]) is None
    finally:
        engine.close()
