"""Child process for the kill -9 trials: ingests generated records and acknowledges each chunk.

    python -m tests.reliability.driver STORE COUNT [--batch 256]

Records are generated deterministically (:func:`texts`): record ``i`` is "item i" plus eight
random hex words seeded by ``i``, so their hashed-bag-of-words embeddings are near-orthogonal and
every one is new. The engine gets :class:`~tests.support.fakes.HashingEmbedder` through the
``Embedder`` protocol, so every stored record has a vector that can be recomputed and checked.

After ``engine.ingest_batch`` returns for a chunk (Chroma write, edit history, events all done)
the driver prints ``ack <end> <inserted> <skipped>`` and flushes: items ``[0, end)`` are then
acknowledged as committed. At the end it prints ``done <count>``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

__all__ = ["texts"]


def texts(count: int) -> list[str]:
    """The ``count`` generated record texts (the same in every process)."""
    out = []
    for i in range(count):
        rng = random.Random(i * 7919 + 17)
        words = " ".join(f"w{rng.getrandbits(40):010x}" for _ in range(8))
        out.append(f"item {i} {words}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Ingest ``COUNT`` generated records into ``STORE`` in acknowledged chunks."""
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("count", type=int)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args(argv)

    from engine.memory_engine import MemoryEngine
    from engine.records import NewMemory
    from engine.store import StoreSpec
    from tests.support.fakes import HashingEmbedder

    items = [NewMemory(text, agent_id="trial", source="kill-trial") for text in texts(args.count)]
    engine = MemoryEngine.open(StoreSpec(str(args.store)), embedder=HashingEmbedder())
    print(f"open {engine.count()}", flush=True)
    try:
        for start in range(0, len(items), args.batch):
            result = engine.ingest_batch(items[start:start + args.batch])
            counts = result.counts
            inserted = counts.get("inserted", 0)
            print(f"ack {start + len(result.results)} {inserted} "
                  f"{len(result.results) - inserted}", flush=True)
    finally:
        engine.close()
    print(f"done {len(items)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
