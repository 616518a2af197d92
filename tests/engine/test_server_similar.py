"""A Chroma server store before its full view (issue 24): Find similar through the server's HNSW
index (:func:`engine.browse.similar_records`), and redaction decided by the engine on the server
paths — a secret's text never leaves the engine unmasked through a page, a search or Find
similar, and no filter on the server matches the raw text a page masks."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest

from engine.browse import similar_records
from engine.errors import RecordNotFound, ValidationError
from engine.exits import ExitPolicy
from engine.memory_engine import MemoryEngine
from engine.query import ALL_STATES, RecordQuery, RecordRow
from engine.records import MemoryRecord, NewMemory
from engine.store import MemoryStore, StoreSpec

pytestmark = [pytest.mark.server, pytest.mark.slow]

NOW = 1_767_225_600_000.0
COUNT = 400
EMAIL = "dana.whitlock@example.org"
KEY = "AKIAIOSFODNN7EXAMPLE"


def texts() -> list[str]:
    """Record 0 and record 1 (its planted near-duplicate) hold secrets; every 50th mentions
    the e-mail address, every 60th the access key; the agent of every 70th is the e-mail."""
    out = []
    for i in range(COUNT):
        text = f"ordinary memory number {i}"
        if i % 50 == 0:
            text += f" mail {EMAIL} about the invoice"
        if i % 60 == 0:
            text += f" deploy key {KEY}"
        out.append(text)
    return out


@pytest.fixture(scope="module")
def planted(chroma_server_url: str) -> tuple[StoreSpec, list[MemoryRecord]]:
    """COUNT records with random unit vectors; record 1's vector is record 0's plus a little
    noise (cosine ~0.99), every other pair is near 0."""
    rng = np.random.default_rng(11)
    vectors: npt.NDArray[np.float32] = rng.standard_normal((COUNT, 384)).astype(np.float32)
    vectors[1] = vectors[0] + 0.1 * vectors[1]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    batch = [MemoryRecord.create(NewMemory(
        content=text, agent_id=EMAIL if i % 70 == 0 else f"agent{i % 4}",
        tags=(f"for {EMAIL}",) if i == 0 else ()), now_ms=NOW + i)
        for i, text in enumerate(texts())]
    spec = StoreSpec(chroma_server_url, collection="server-similar")
    store = MemoryStore.open(spec, now_ms=NOW)
    store.write(batch, vectors)
    store.close()
    return spec, batch


@pytest.fixture
def engine(planted: tuple[StoreSpec, list[MemoryRecord]]) -> Iterator[MemoryEngine]:
    opened = MemoryEngine.open(planted[0], defer_view=True)
    yield opened
    opened.close()


def leaks(rows: list[RecordRow]) -> list[str]:
    """Every raw secret found in the rows' text fields."""
    return [secret for row in rows
            for text in (row.content, row.agent_id, row.source, *row.tags)
            for secret in (EMAIL, KEY) if secret in text]


def test_find_similar_returns_the_planted_near_duplicate_before_the_view(
        engine: MemoryEngine, planted: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = planted[1]
    found = similar_records(engine, batch[0].id)
    assert not engine.view_ready  # the server's HNSW answered; nothing else was read
    assert found.record.id == batch[0].id and found.record.content == batch[0].content
    assert len(found.rows) == len(found.cosines) == 20
    assert found.rows[0].id == batch[1].id and found.rows[0].content == batch[1].content
    assert found.cosines[0] > 0.98
    assert all(c < 0.5 for c in found.cosines[1:])
    assert list(found.cosines) == sorted(found.cosines, reverse=True)
    assert batch[0].id not in {row.id for row in found.rows}
    assert not found.masked
    assert [row.id for row in similar_records(engine, batch[1].id, k=1).rows] == [batch[0].id]
    with pytest.raises(RecordNotFound):
        similar_records(engine, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(ValidationError, match="k"):
        similar_records(engine, batch[0].id, k=0)
    assert not engine.view_ready


def test_a_record_without_a_vector_says_so(chroma_server_url: str) -> None:
    spec = StoreSpec(chroma_server_url, collection="server-similar-pending")
    pending = MemoryRecord.create(NewMemory(content="stored while the model loaded"), now_ms=NOW)
    store = MemoryStore.open(spec, now_ms=NOW)
    store.write([pending], None)
    store.close()
    engine = MemoryEngine.open(spec, defer_view=True)
    try:
        with pytest.raises(ValidationError, match="no embedding yet"):
            similar_records(engine, pending.id)
    finally:
        engine.close()


def test_server_pages_with_redaction_on_never_carry_a_raw_secret(
        engine: MemoryEngine, planted: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    batch = planted[1]
    shown = ExitPolicy.for_config(engine.config, redaction=True).shown
    assert shown is not None
    raw = engine.server_rows(RecordQuery(states=ALL_STATES, limit=COUNT))
    assert leaks(list(raw.rows)) and not raw.masked  # the secrets are there, as stored
    offset, rows = 0, list[RecordRow]()
    while True:  # every page of the store, as the records table pages it
        page = engine.server_rows(RecordQuery(states=ALL_STATES, offset=offset, limit=97),
                                  shown=shown)
        assert page.masked
        if not page.rows:
            break
        rows.extend(page.rows)
        offset += len(page.rows)
    assert len(rows) == COUNT and {row.id for row in rows} == {r.id for r in batch}
    assert leaks(rows) == []
    masked = next(row for row in rows if row.id == batch[0].id)
    assert "<REDACT:sha256-" in masked.content and "<REDACT:sha256-" in masked.tags[0]
    assert "<REDACT:sha256-" in next(row for row in rows if row.id == batch[70].id).agent_id
    # A filter on the server would match the raw text the page masks: the engine refuses it.
    for query in (RecordQuery(text="dana.whitlock"), RecordQuery(text="invoice"),
                  RecordQuery(agent_id=EMAIL), RecordQuery(tags=(f"for {EMAIL}",))):
        assert engine.server_answers(query, shown=shown) is not None
        with pytest.raises(ValidationError, match="needs the full view"):
            engine.server_rows(query, shown=shown)
    assert engine.server_answers(RecordQuery(text="invoice"), shown=shown) == \
        "filtering while redaction is on"
    assert engine.server_answers(RecordQuery(text="invoice")) is None  # redaction off
    # Find similar's texts are masked by the engine too.
    found = similar_records(engine, batch[0].id, shown=shown)
    assert found.masked and found.rows[0].id == batch[1].id
    assert leaks([found.record, *found.rows]) == []
    assert not engine.view_ready
