"""Ingest throughput with the real model, as a ratio to the raw model's encode rate.

The same texts (LoCoMo dialogue turns) are encoded raw (``encode_raw``: no cache, no hashing,
no pipeline) and ingested through ``MemoryEngine.ingest_batch`` into a fresh embedded store
(embedding, dedup decision, merge rules, Chroma writes, edit history, events), each with its own
freshly loaded model so no cache is shared. Raw runs are done before and after the ingest and
averaged, to cancel drift on a shared machine. A second ingest with event sampling 0 shows what
the event log costs.

Usage: ``python benchmarks/bench_ingest.py [--turns 2000] [--data PATH]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from engine.embedding import SentenceTransformerEmbedder
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Category, Layer, NewMemory, TrustTier
from engine.store import StoreSpec

_DATA = Path("shared/data/locomo/locomo_dev.json")  # ../shared beside the checkout
DEFAULT_DATA = next((p / _DATA for p in Path(__file__).resolve().parents if (p / _DATA).is_file()),
                    _DATA)


def load_turns(path: Path, limit: int) -> list[tuple[str, str]]:
    """(agent, "speaker: text") for the first ``limit`` turns of the LoCoMo conversations."""
    turns: list[tuple[str, str]] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        sessions = sorted((k for k in conversation if k.startswith("session_")
                           and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1]))
        for key in sessions:
            for turn in conversation[key]:
                turns.append((sample["sample_id"], f"{turn['speaker']}: {turn['text']}"))
                if len(turns) >= limit:
                    return turns
    return turns


def model() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder()
    embedder.start_loading()
    if not embedder.wait_ready(600):
        raise SystemExit(f"model not available: {embedder.status().reason}")
    embedder.encode_raw(["warm up"] * 64)
    return embedder


def raw_rate(texts: list[str]) -> float:
    embedder = model()
    began = time.perf_counter()
    embedder.encode_raw(texts)
    return len(texts) / (time.perf_counter() - began)


def ingest_rate(turns: list[tuple[str, str]], sampling: float) -> tuple[float, dict[str, int]]:
    directory = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    engine = MemoryEngine.open(StoreSpec(str(directory / "store")), embedder=model(),
                               config=EngineConfig(sampling_rate=sampling))
    items = [NewMemory(text, agent_id=agent, layer=Layer.EPISODIC, category=Category.EPISODE,
                       source="locomo", source_tier=TrustTier.AGENT) for agent, text in turns]
    try:
        began = time.perf_counter()
        result = engine.ingest_batch(items)
        elapsed = time.perf_counter() - began
    finally:
        engine.close()
        shutil.rmtree(directory, ignore_errors=True)
    return len(items) / elapsed, result.counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    turns = load_turns(args.data, args.turns)
    texts = [text for _, text in turns]
    before = raw_rate(texts)
    with_events, counts = ingest_rate(turns, 1.0)
    without_events, _ = ingest_rate(turns, 0.0)
    after = raw_rate(texts)
    raw = statistics.mean([before, after])
    print(f"{len(texts)} LoCoMo turns; decisions: "
          + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    print(f"{'run':<28}{'texts/s':>10}{'ratio to raw':>14}")
    print(f"{'raw encode (before)':<28}{before:>10.1f}{before / raw:>14.3f}")
    print(f"{'raw encode (after)':<28}{after:>10.1f}{after / raw:>14.3f}")
    print(f"{'ingest_batch, events on':<28}{with_events:>10.1f}{with_events / raw:>14.3f}")
    print(f"{'ingest_batch, sampling 0':<28}{without_events:>10.1f}"
          f"{without_events / raw:>14.3f}")


if __name__ == "__main__":
    main()
