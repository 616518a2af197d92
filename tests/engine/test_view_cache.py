"""The persisted view: fast re-open, and never stale (invalidated before writes, fingerprinted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.records import MemoryRecord, NewMemory
from engine.store import MemoryStore, StoreSpec, close_client, view_cache

NOW = 1_767_225_600_000.0


def records(n: int, start: int = 0) -> list[MemoryRecord]:
    return [MemoryRecord.create(NewMemory(content=f"cached memory {i}", agent_id=f"a{i % 3}",
                                          tags=(f"t{i % 2}",)), now_ms=NOW + i)
            for i in range(start, start + n)]


def vectors(n: int, seed: int = 0) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
    unit: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def same_view(a: MemoryStore, b: MemoryStore) -> None:
    sa, sb = a.view.snapshot(), b.view.snapshot()
    order_a = {sa.ids[r]: r for r in sa.live_rows.tolist()}
    order_b = {sb.ids[r]: r for r in sb.live_rows.tolist()}
    assert order_a.keys() == order_b.keys()
    for record_id, ra in order_a.items():
        rb = order_b[record_id]
        assert sa.contents[ra] == sb.contents[rb] and sa.tags[ra] == sb.tags[rb]
        assert sa.agents[sa.agent[ra]] == sb.agents[sb.agent[rb]]
        assert sa.importance[ra] == sb.importance[rb] and sa.created_at[ra] == sb.created_at[rb]
        assert np.allclose(sa.vectors[ra], sb.vectors[rb], atol=1e-6)


def test_reopen_loads_the_saved_view_and_matches_chroma(store_dir: Path) -> None:
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    batch = records(40)
    store.write(batch, vectors(40))
    store.delete([batch[3].id])
    store.close()
    assert (store_dir / view_cache.CACHE_META).exists()
    cached = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert cached._view_from_cache and cached.count() == 39
    assert cached.view.ids_with_hash(batch[5].content_hash) == [batch[5].id]
    view_cache.invalidate(store_dir)
    fresh = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not fresh._view_from_cache
    same_view(cached, fresh)
    cached.close()
    fresh.close()


def test_first_write_invalidates_before_touching_the_store(store_dir: Path) -> None:
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(records(5), vectors(5))
    store.close()
    again = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    assert again._view_from_cache
    again.write(records(2, start=5), vectors(2, seed=1))
    # A crash from here on must not leave a cache that misses these records.
    assert not (store_dir / view_cache.CACHE_META).exists()
    again.close()
    third = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    assert third._view_from_cache and third.count() == 7
    third.close()


def test_another_writer_makes_the_cache_stale(store_dir: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(records(3), vectors(3))
    store.close()
    client = chromadb.PersistentClient(path=str(store_dir),
                                       settings=Settings(anonymized_telemetry=False))
    collection = client.get_collection("mnemoscope_memories", embedding_function=None)
    extra = records(1, start=100)[0]
    from engine.store.codec import record_to_chroma

    collection.add(ids=[extra.id], documents=[extra.content],
                   metadatas=[record_to_chroma(extra)], embeddings=vectors(1, seed=2))
    close_client(client)
    reopened = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    assert not reopened._view_from_cache and reopened.count() == 4
    reopened.close()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_cache_falls_back_to_chroma(store_dir: Path, damage: str) -> None:
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(records(6), vectors(6))
    store.close()
    target = store_dir / (view_cache.CACHE_ARRAYS if damage == "truncate"
                          else view_cache.CACHE_META)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"{not json")
    # Keep the fingerprint valid so only the damage can make the cache unusable.
    reopened = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not reopened._view_from_cache and reopened.count() == 6
    reopened.close()


def test_read_only_opens_keep_the_cache_usable(store_dir: Path) -> None:
    """chromadb touches chroma.sqlite3 on every open: the fingerprint must not depend on that."""
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(records(12), vectors(12))
    store.close()
    mtime = (store_dir / "chroma.sqlite3").stat().st_mtime_ns
    for _ in range(3):
        reader = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
        assert reader._view_from_cache and reader.count() == 12
        reader.close()
    writer = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)  # a writer that only reads
    assert writer._view_from_cache
    writer.close()
    assert MemoryStore.open(StoreSpec(str(store_dir), read_only=True))._view_from_cache
    assert view_cache.fingerprint(store_dir, "mnemoscope_memories") is not None
    assert mtime <= (store_dir / "chroma.sqlite3").stat().st_mtime_ns


def test_the_fingerprint_follows_every_kind_of_write(store_dir: Path) -> None:
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    stamps = [view_cache.fingerprint(store_dir, "mnemoscope_memories")]
    batch = records(4)
    store.write(batch, vectors(4))
    stamps.append(view_cache.fingerprint(store_dir, "mnemoscope_memories"))
    store.write([batch[0].replace(importance=0.9)])  # an update without a new vector
    stamps.append(view_cache.fingerprint(store_dir, "mnemoscope_memories"))
    store.delete([batch[1].id])
    stamps.append(view_cache.fingerprint(store_dir, "mnemoscope_memories"))
    store.close()
    seqs = [stamp["seq"] if stamp else None for stamp in stamps]
    assert seqs[0] is None and all(isinstance(s, int) for s in seqs[1:])
    assert seqs[1] < seqs[2] < seqs[3], seqs  # type: ignore[operator]
    assert view_cache.fingerprint(store_dir, "no_such_collection") is None
    assert view_cache.fingerprint(store_dir / "missing", "mnemoscope_memories") is None


def test_odd_strings_duplicates_and_tags_round_trip(store_dir: Path) -> None:
    odd = ["naïve café ☕ — 日本語", "emoji 🧠 in astral planes 𝄞",
           "line\nbreaks\tand \x00 nul", "x"]
    batch = [MemoryRecord.create(NewMemory(content=text, agent_id=agent, tags=tags),
                                 now_ms=NOW + i)
             for i, (text, agent, tags) in enumerate([
                 (odd[0], "a", ("ünï", "b")), (odd[1], "b", ()), (odd[2], "a", ("b", "ünï")),
                 (odd[3], "c", ("t",)), (odd[3], "d", ("t",))])]  # an exact duplicate pair
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(batch, vectors(len(batch)))
    store.close()
    cached = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert cached._view_from_cache
    assert sorted(cached.view.ids_with_hash(batch[3].content_hash)) == \
        sorted([batch[3].id, batch[4].id])
    view_cache.invalidate(store_dir)
    fresh = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not fresh._view_from_cache
    same_view(cached, fresh)
    cached.close()
    fresh.close()


@pytest.mark.parametrize("damage", ["vectors", "mixed saves"])
def test_vectors_that_do_not_belong_fall_back_to_chroma(store_dir: Path, damage: str) -> None:
    batch = records(6)
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(batch, vectors(6))
    store.close()
    if damage == "vectors":
        (store_dir / view_cache.CACHE_VECTORS).write_bytes(b"\x93NUMPY not really")
    else:  # the arrays of another save, same shape (a crash between renames could mix them)
        saved = (store_dir / view_cache.CACHE_ARRAYS).read_bytes()
        store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
        store.write([batch[0].replace(importance=0.77)])
        store.close()
        (store_dir / view_cache.CACHE_ARRAYS).write_bytes(saved)
    reopened = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not reopened._view_from_cache and reopened.count() == 6
    assert reopened.get(batch[0].id).importance == (0.77 if damage != "vectors"
                                                    else batch[0].importance)
    snapshot = reopened.view.snapshot()
    row = snapshot.ids.index(batch[0].id)
    assert float(snapshot.importance[row]) == pytest.approx(reopened.get(batch[0].id).importance)
    reopened.close()


def _saved_store(store_dir: Path, n: int = 6) -> None:
    store = MemoryStore.open(StoreSpec(str(store_dir)), now_ms=NOW)
    store.write(records(n), vectors(n))
    store.close()
    assert (store_dir / view_cache.CACHE_META).exists()


def test_a_crafted_arrays_file_is_refused_before_anything_is_decompressed(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cache's fingerprint comes from the same folder, so a crafted cache matches it. A
    # column that decompresses to far more than the meta's records can hold (zeros compress
    # about 1000:1: 1.5 MB on disk declaring 1.6 GB) is refused from the zip's directory;
    # the open reads Chroma instead and never decompresses the member.
    import zipfile

    _saved_store(store_dir)
    arrays = store_dir / view_cache.CACHE_ARRAYS
    with zipfile.ZipFile(arrays) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["importance.npy"] = bytes(4 * 1024 * 1024)  # 4 MiB for 6 records
    with zipfile.ZipFile(arrays, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)

    def no_decompressing(*args: object, **kwargs: object) -> object:
        raise AssertionError("the arrays file was decompressed")

    monkeypatch.setattr(np, "load", no_decompressing)  # the module the cache reads with
    reopened = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not reopened._view_from_cache and reopened.count() == 6
    reopened.close()


@pytest.mark.parametrize("meta", ["nested", "count"])
def test_a_crafted_meta_file_falls_back_to_chroma(store_dir: Path, meta: str) -> None:
    import json

    _saved_store(store_dir)
    path = store_dir / view_cache.CACHE_META
    if meta == "nested":  # past the JSON parser's recursion limit: was a RecursionError crash
        path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    else:  # more records than the database could hold
        saved = json.loads(path.read_text(encoding="utf-8"))
        saved["count"] = 10**12
        path.write_text(json.dumps(saved), encoding="utf-8")
    if meta == "nested":
        assert not view_cache.is_current(store_dir, "mnemoscope_memories", 384)
    reopened = MemoryStore.open(StoreSpec(str(store_dir), read_only=True), now_ms=NOW)
    assert not reopened._view_from_cache and reopened.count() == 6
    reopened.close()
