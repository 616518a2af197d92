"""Build a large store quickly, without the model: random unit vectors written in batches."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engine.records import Layer, MemoryRecord, NewMemory, Privacy
from engine.store import MemoryStore, StoreSpec, view_cache

AGENTS = ("alpha", "beta", "gamma", "delta")
LAYERS = tuple(Layer)


def build_store(path: Path | str, count: int, *, batch: int = 5000, seed: int = 7,
                collection: str | None = None) -> float:
    """Write ``count`` records to a new store at ``path``; returns seconds taken.

    ``path`` is an embedded store's directory, or a Chroma server's URL (then ``collection``
    names the collection; a new one).

    Record ``i`` has content ``"memory number {i:06d} …"``, agent ``AGENTS[i % 4]``, layer
    ``LAYERS[i % 6]``, importance ``(i % 100) / 100`` and created_at ``1e12 + i * 1000``.
    """
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    spec = StoreSpec(str(path)) if collection is None else StoreSpec(str(path),
                                                                     collection=collection)
    store = MemoryStore.open(spec)
    try:
        for start in range(0, count, batch):
            records = []
            for i in range(start, min(count, start + batch)):
                new = NewMemory(content=f"memory number {i:06d} about topic {i % 97}",
                                agent_id=AGENTS[i % 4], layer=LAYERS[i % 6],
                                importance=(i % 100) / 100, confidence=0.8,
                                privacy=Privacy.PUBLIC if i % 3 else Privacy.PRIVATE,
                                tags=(f"t{i % 5}",), source="bench",
                                created_at=1e12 + i * 1000.0)
                records.append(MemoryRecord.create(new, now_ms=1e12 + i * 1000.0,
                                                   record_id=f"r{i:06d}"))
            vectors = rng.standard_normal((len(records), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.write(records, vectors)
    finally:
        store.close()
    return time.perf_counter() - started


_ASIDE = "view-cache-aside-"


def restore_view_cache(store: Path) -> list[str]:
    """Move back the view cache files a killed :func:`view_cache_aside` left beside ``store``
    (a benchmark stopped by a signal during an uncached open runs no ``finally``); the names
    restored. A file the store has again is left where it is."""
    restored = []
    for aside in sorted(store.parent.glob(f"{_ASIDE}*")):
        for path in aside.iterdir():
            if path.name.startswith(".mnemoscope-view.") and not (store / path.name).exists():
                os.replace(path, store / path.name)
                restored.append(path.name)
        if not any(aside.iterdir()):
            aside.rmdir()
    return restored


@contextlib.contextmanager
def view_cache_aside(store: Path) -> Iterator[None]:
    """Move the store's view cache files away (opens must index it) and back afterwards."""
    restore_view_cache(store)
    aside = Path(tempfile.mkdtemp(prefix=_ASIDE, dir=store.parent))
    names = (view_cache.CACHE_META, view_cache.CACHE_ARRAYS, view_cache.CACHE_VECTORS)
    moved = [name for name in names if (store / name).exists()]
    try:
        for name in moved:
            os.replace(store / name, aside / name)
        yield
    finally:
        for name in moved:
            os.replace(aside / name, store / name)
        shutil.rmtree(aside, ignore_errors=True)


if __name__ == "__main__":
    import sys
    import tempfile

    target = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp()) / "big"
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(f"built {n} records in {build_store(target, n):.1f} s at {target}")
    t = time.perf_counter()
    s = MemoryStore.open(StoreSpec(str(target), read_only=True))
    print(f"opened in {time.perf_counter() - t:.1f} s, {s.count()} records")
    s.close()
