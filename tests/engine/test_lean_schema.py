"""The lean Chroma layout (schema 3, issue 24) and the migration of flat stores (schema 1, 2):
the codec both ways, and stores written in the flat layout opened, migrated, killed midway and
resumed, on embedded Chroma (and a real `chroma run` server)."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import Cancelled, SchemaMismatch, ValidationError
from engine.query import ALL_STATES, RecordQuery, server_filter
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    ProvenanceEntry,
    RecordState,
    RelatedLink,
    TrustTier,
)
from engine.store import MemoryStore, StoreSpec, close_client
from engine.store.codec import (
    FILTER_KEYS,
    SCHEMA_VERSION,
    lean_metadata,
    record_from_chroma,
    record_to_chroma,
)
from tests.support.legacy_store import flat_metadata, write_flat_store

NOW = 1_767_225_600_000.0
ROOT = Path(__file__).resolve().parents[2]
COUNT = 620  # three pages of the migration (250 records each)


def sample_records(n: int) -> list[MemoryRecord]:
    """Records using every field: states, expiry, tags, provenance, related, merged ids,
    nested metadata, redaction, pending embeddings."""
    out = []
    states = (RecordState.ACTIVE, RecordState.PAUSED, RecordState.ARCHIVED)
    for i in range(n):
        record = MemoryRecord.create(NewMemory(
            content=f"memory {i} about the lantern — ünïcode {i % 7}", agent_id=f"a{i % 3}",
            layer=(Layer.SEMANTIC, Layer.EPISODIC, Layer.PROCEDURAL)[i % 3],
            importance=(i % 10) / 10, tags=("t", f"u{i}") if i % 2 else (),
            privacy=Privacy.PUBLIC if i % 11 == 0 else Privacy.PRIVATE,
            source_tier=(TrustTier.HUMAN, TrustTier.AGENT, TrustTier.AUTO)[i % 3],
            metadata={"n": i, "nested": {"list": [1, 2.5, None]}} if i % 4 else {},
            state=states[i % 3] if i % 5 == 0 else RecordState.ACTIVE),
            now_ms=NOW + i * 1000, embedding_model="" if i % 13 == 0 else "minilm",
            record_id=f"rec-{i:04d}")
        if i % 6 == 0:
            record = dataclasses.replace(
                record, expires_at=NOW + 9e9, merged_from=(f"m{i}", f"n{i}"), access_count=i,
                last_accessed=NOW + 5e6, confidence=0.625, redacted=i % 12 == 0, version=3,
                provenance=(ProvenanceEntry("chat", "ab" * 32, NOW + 2000, TrustTier.HUMAN,
                                            0.75),),
                related=(RelatedLink(f"r{i}", 0.91),))
        out.append(record)
    return out


def unit(n: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(3).standard_normal((n, 384)).astype(np.float32)
    normalized: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return normalized


def updated(meta: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """What Chroma's ``update`` makes of ``meta``: key by key, None deletes."""
    out = {**meta, **changes}
    return {k: v for k, v in out.items() if v is not None}


# -- the codec ---------------------------------------------------------------------------------


def test_a_lean_record_has_the_filter_keys_and_one_packed_field() -> None:
    for record in sample_records(40):
        meta = record_to_chroma(record)
        assert set(meta) == {"mnemo_schema", *FILTER_KEYS, "fields"}
        assert meta["mnemo_schema"] == SCHEMA_VERSION
        assert all(isinstance(v, str | int | float | bool) for v in meta.values())
        assert record_from_chroma(record.id, record.content, meta) == record


def test_every_server_filter_reads_keys_the_lean_layout_keeps() -> None:
    """The server store's filters (engine.query.server_filter) must find their keys."""
    query = RecordQuery(agent_id="a1", layer=Layer.EPISODIC, privacy=Privacy.PUBLIC,
                        category=Category.FACT, states=ALL_STATES - {RecordState.ARCHIVED},
                        importance_min=0.1, importance_max=0.9, created_from=NOW,
                        created_to=NOW + 1, include_expired=False)
    found = server_filter(query, now_ms=NOW)
    assert not isinstance(found, str)

    def keys(clause: Any) -> set[str]:
        if isinstance(clause, list):
            return set().union(*(keys(c) for c in clause))
        if isinstance(clause, dict):
            return set().union(*(({k} if not k.startswith("$") else set()) | keys(v)
                                 for k, v in clause.items()))
        return set()

    used = keys(found.where) | keys(found.hidden_only)
    assert used == {"agent_id", "layer", "privacy", "category", "state", "importance",
                    "created_at", "expires_at"}
    assert used <= set(FILTER_KEYS)


@pytest.mark.parametrize("mnemo_schema", [1, 2])
def test_a_flat_record_rewritten_lean_reads_back_identical(mnemo_schema: int) -> None:
    for record in sample_records(60):
        flat = flat_metadata(record, mnemo_schema=mnemo_schema)
        before = record_from_chroma(record.id, record.content, flat)
        lean = updated(flat, lean_metadata(flat))
        assert set(lean) == {"mnemo_schema", *FILTER_KEYS, "fields"} - (
            {"state"} if mnemo_schema == 1 else set())
        assert record_from_chroma(record.id, record.content, lean) == before
        if mnemo_schema == 2:
            assert before == record


def test_damaged_flat_fields_read_the_same_after_the_rewrite() -> None:
    """What the flat reader turned into defaults stays defaults, whatever was stored."""
    record = sample_records(7)[6]
    flat = flat_metadata(record)
    flat.update(tags="not json", provenance='"[1]"', related="42", metadata='"text"',
                importance=7.0, source_tier="nonsense", hand_added="kept")
    del flat["confidence"]
    before = record_from_chroma(record.id, record.content, flat)
    lean = updated(flat, lean_metadata(flat))
    assert lean["hand_added"] == "kept"
    assert record_from_chroma(record.id, record.content, lean) == before


def test_json_nested_past_the_parser_reads_as_unreadable_json() -> None:
    """A store from someone else: a ``fields`` (or flat ``metadata``) value nested deeper than
    the JSON parser's recursion limit raised RecursionError on every read of the store (each
    command ended in a crash report); it reads as unreadable JSON does, as its default."""
    record = sample_records(7)[6]
    nested = "[" * 100_000 + "]" * 100_000
    lean = {**record_to_chroma(record), "fields": '{"metadata": ' + nested + "}"}
    got = record_from_chroma(record.id, record.content, lean, lenient=True)
    assert got.content == record.content and got.metadata == {} and got.confidence == 0.5
    flat = {**flat_metadata(record), "metadata": nested, "tags": nested}
    got = record_from_chroma(record.id, record.content, flat, lenient=True)
    assert got.metadata == {} and got.tags == ()
    rewritten = lean_metadata(flat)  # the migration of a flat store reads them the same way
    assert record_from_chroma(record.id, record.content, updated(flat, rewritten)) == got


def test_a_stored_record_that_does_not_validate_is_named() -> None:
    record = sample_records(1)[0]
    deep = {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}
    meta = {**record_to_chroma(record), "fields": json.dumps({"metadata": deep})}
    with pytest.raises(ValidationError, match=f"^stored record {record.id}: metadata"):
        record_from_chroma(record.id, record.content, meta, lenient=True)


def test_a_foreign_key_named_fields_is_not_unpacked() -> None:
    got = record_from_chroma("x", "text", {"fields": '{"a": 1}', "user": "u"}, lenient=True)
    assert got.metadata == {"foreign": {"fields": '{"a": 1}', "user": "u"}}


# -- stores ------------------------------------------------------------------------------------


def _client(directory: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(directory),
                                     settings=Settings(anonymized_telemetry=False))


def _stored(directory: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The collection's metadata and each record's metadata, as Chroma holds them."""
    client = _client(directory)
    try:
        collection = client.get_collection("mnemoscope_memories")
        got = collection.get(include=["metadatas"])
        return dict(collection.metadata or {}), dict(zip(got["ids"], got["metadatas"],
                                                         strict=True))
    finally:
        close_client(client)


def _read_all(spec: StoreSpec) -> tuple[list[MemoryRecord], npt.NDArray[np.float32], int]:
    """Every record (by id order), its vector from the view, and the schema version; read-only."""
    store = MemoryStore.open(dataclasses.replace(spec, read_only=True), now_ms=NOW)
    try:
        snapshot = store.view.snapshot()
        ids = sorted(i for i, alive in zip(snapshot.ids, snapshot.alive, strict=True) if alive)
        records = store.get_many(ids)
        vectors = np.stack([store.view.vector(i) for i in ids])  # type: ignore[misc]  # all stored
        return records, vectors, store.schema_version
    finally:
        store.close()


@pytest.fixture
def flat_store(store_dir: Path) -> tuple[StoreSpec, list[MemoryRecord]]:
    """An embedded store written in the flat layout by the last flat build (schema 1, with
    paused and archived records kept within version 1 as an older build did)."""
    records = sample_records(COUNT)
    client = _client(store_dir)
    write_flat_store(client, records, unit(COUNT), schema_version=1)
    close_client(client)
    return StoreSpec(str(store_dir)), records  # ids sort in creation order


def test_a_flat_store_opens_read_only_unchanged(
        flat_store: tuple[StoreSpec, list[MemoryRecord]], store_dir: Path) -> None:
    spec, records = flat_store
    got, vectors, version = _read_all(spec)
    assert got == records
    assert version == 1
    meta, rows = _stored(store_dir)
    assert meta["schema_version"] == 1
    assert all(m["mnemo_schema"] == 2 for m in rows.values())  # nothing rewritten
    assert np.allclose(vectors, unit(COUNT), atol=1e-6)  # ids sort in creation order


@pytest.mark.parametrize("deferred", [False, True], ids=["open", "deferred-view"])
def test_a_flat_store_is_migrated_when_opened_for_writing(
        flat_store: tuple[StoreSpec, list[MemoryRecord]], store_dir: Path,
        deferred: bool) -> None:
    spec, records = flat_store
    _, before_vectors, _ = _read_all(spec)
    seen: list[tuple[int, int]] = []
    store = MemoryStore.open(spec, now_ms=NOW, defer_view=deferred,
                             progress=lambda done, total: seen.append((done, total)))
    try:
        if deferred:
            assert store.schema_version == 1  # the migration runs in load_view
            store.load_view(NOW, lambda done, total: seen.append((done, total)))
        assert store.schema_version == SCHEMA_VERSION and not store.needs_migration
        assert seen[:3] == [(250, COUNT), (500, COUNT), (COUNT, COUNT)]  # the migration's pages
        assert store.get_many([r.id for r in records]) == records
        paused = dataclasses.replace(records[1], state=RecordState.PAUSED, version=2)
        store.write([paused])  # writes go on in the lean layout
    finally:
        store.close()
    meta, rows = _stored(store_dir)
    assert meta["schema_version"] == SCHEMA_VERSION
    assert "migrating_to" not in meta
    assert meta["soft_states"] is True  # paused records were kept within version 1
    assert all(set(m) == {"mnemo_schema", *FILTER_KEYS, "fields"} for m in rows.values())
    got, vectors, _ = _read_all(spec)
    assert got == [paused if r.id == paused.id else r for r in records]
    assert np.array_equal(vectors, before_vectors)  # no vector was rewritten


def test_a_flat_store_with_a_view_cache_is_migrated_and_cached_again(
        flat_store: tuple[StoreSpec, list[MemoryRecord]], store_dir: Path) -> None:
    """The last flat build left a view cache beside its store: the open takes the view from
    it, migrates Chroma, and the cache saved at close matches the migrated store."""
    from engine.store.view import ColumnarView
    from engine.store.view_cache import is_current, save_view

    spec, records = flat_store
    view = ColumnarView(384)
    view.upsert(records, unit(COUNT))
    save_view(view, store_dir, "mnemoscope_memories", arrays_current=False)
    assert is_current(store_dir, "mnemoscope_memories", 384)
    seen: list[tuple[int, int]] = []
    store = MemoryStore.open(spec, now_ms=NOW, progress=lambda d, t: seen.append((d, t)))
    try:
        assert seen == [(250, COUNT), (500, COUNT), (COUNT, COUNT), (COUNT, COUNT)]
        assert not is_current(store_dir, "mnemoscope_memories", 384)  # dropped first
        assert store.get_many([r.id for r in records]) == records
    finally:
        store.close()
    assert is_current(store_dir, "mnemoscope_memories", 384)
    assert {m["mnemo_schema"] for m in _stored(store_dir)[1].values()} == {SCHEMA_VERSION}
    got, vectors, version = _read_all(spec)
    assert (got, version) == (records, SCHEMA_VERSION)
    assert np.allclose(vectors, unit(COUNT), atol=1e-6)


def test_a_migrated_store_is_refused_by_a_flat_build(
        flat_store: tuple[StoreSpec, list[MemoryRecord]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.store import chroma_store

    spec, _ = flat_store
    MemoryStore.open(spec, now_ms=NOW).close()
    monkeypatch.setattr(chroma_store, "SCHEMA_VERSION", 2)  # the last flat build
    with pytest.raises(SchemaMismatch, match="schema version 3; this Mnemoscope reads up to 2"):
        MemoryStore.open(dataclasses.replace(spec, read_only=True), now_ms=NOW)


def test_a_new_store_is_lean_from_the_start(store_dir: Path) -> None:
    records = sample_records(30)
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    try:
        assert store.schema_version == SCHEMA_VERSION and not store.needs_migration
        store.write(records, unit(30))
    finally:
        store.close()
    meta, rows = _stored(store_dir)
    assert meta["schema_version"] == SCHEMA_VERSION and "migrating_to" not in meta
    assert meta["soft_states"] is True  # the sample holds paused and archived records
    assert all(set(m) == {"mnemo_schema", *FILTER_KEYS, "fields"} for m in rows.values())
    got, _, _ = _read_all(StoreSpec(str(store_dir)))
    assert got == sorted(records, key=lambda r: r.id)


_KILLED_MIDWAY = """
import os, signal, sys
from engine.store import MemoryStore, StoreSpec, close_client

def progress(done, total):
    if done >= 250:  # the first page is rewritten: die before the next
        os.kill(os.getpid(), signal.SIGKILL)

MemoryStore.open(StoreSpec(sys.argv[1]), now_ms=0.0, progress=progress)
"""


def test_a_migration_killed_midway_leaves_a_readable_store_that_resumes(
        flat_store: tuple[StoreSpec, list[MemoryRecord]], store_dir: Path) -> None:
    spec, records = flat_store
    _, before_vectors, _ = _read_all(spec)
    done = subprocess.run([sys.executable, "-c", _KILLED_MIDWAY, str(store_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    meta, rows = _stored(store_dir)
    assert meta["schema_version"] == SCHEMA_VERSION and meta["migrating_to"] == SCHEMA_VERSION
    layouts = [m["mnemo_schema"] for m in rows.values()]
    assert layouts.count(SCHEMA_VERSION) == 250 and layouts.count(2) == COUNT - 250
    got, vectors, _ = _read_all(spec)  # both layouts read back identical
    assert got == records
    assert np.array_equal(vectors, before_vectors)
    store = MemoryStore.open(spec, now_ms=NOW)  # resumes
    try:
        assert not store.needs_migration
    finally:
        store.close()
    meta, rows = _stored(store_dir)
    assert "migrating_to" not in meta
    assert {m["mnemo_schema"] for m in rows.values()} == {SCHEMA_VERSION}
    assert _read_all(spec)[0] == records


def test_a_cancelled_migration_resumes(
        flat_store: tuple[StoreSpec, list[MemoryRecord]], store_dir: Path) -> None:
    spec, records = flat_store
    store = MemoryStore.open(spec, now_ms=NOW, defer_view=True)
    pages: list[int] = []
    try:
        with pytest.raises(Cancelled, match="stopped after 250 of 620 records; it resumes"):
            store.load_view(NOW, lambda done, total: pages.append(done),
                            cancelled=lambda: len(pages) >= 1)
    finally:
        store.close()
    assert _stored(store_dir)[0]["migrating_to"] == SCHEMA_VERSION
    assert _read_all(spec)[0] == records
    MemoryStore.open(spec, now_ms=NOW).close()
    meta, rows = _stored(store_dir)
    assert "migrating_to" not in meta
    assert {m["mnemo_schema"] for m in rows.values()} == {SCHEMA_VERSION}


@pytest.mark.server
@pytest.mark.slow
def test_a_flat_server_store_is_migrated_and_filtered_on_the_server(
        chroma_server_url: str, unique_collection: str) -> None:
    from urllib.parse import urlparse

    import chromadb
    from chromadb.config import Settings

    url = urlparse(chroma_server_url)
    assert url.hostname is not None and url.port is not None
    client: Any = chromadb.HttpClient(host=url.hostname, port=url.port,
                                      settings=Settings(anonymized_telemetry=False))
    try:
        records = sample_records(300)
        write_flat_store(client, records, unit(300), schema_version=2,
                         collection=unique_collection)
        spec = StoreSpec(chroma_server_url, collection=unique_collection)
        query = RecordQuery(agent_id="a1", states=ALL_STATES - {RecordState.ARCHIVED})
        found = server_filter(query, now_ms=NOW)
        assert not isinstance(found, str)
        reader = MemoryStore.open(dataclasses.replace(spec, read_only=True), now_ms=NOW,
                                  defer_view=True)
        try:  # flat, read-only: pages and filters answered by the server
            flat_page, flat_total = reader.server_page(found.where, None, 0, 50, now_ms=NOW)
        finally:
            reader.close()
        store = MemoryStore.open(spec, now_ms=NOW, defer_view=True)
        try:
            store.load_view(NOW)
            assert store.schema_version == SCHEMA_VERSION
            page, total = store.server_page(found.where, None, 0, 50, now_ms=NOW)
            assert (page, total) == (flat_page, flat_total)
            assert total == sum(1 for r in records if r.agent_id == "a1"
                                and r.state is not RecordState.ARCHIVED)
            ids = sorted(r.id for r in records)
            assert store.get_many(ids) == sorted(records, key=lambda r: r.id)
        finally:
            store.close()
        lean: list[Any] = client.get_collection(unique_collection).get(
            include=["metadatas"])["metadatas"] or []
        assert len(lean) == 300
        assert {m["mnemo_schema"] for m in lean} == {SCHEMA_VERSION}
        assert all(set(m) == {"mnemo_schema", *FILTER_KEYS, "fields"} for m in lean)
        assert all(isinstance(json.loads(m["fields"]), dict) for m in lean)
    finally:  # its HTTP connections: left to the GC they warn in a later test
        close_client(client)
