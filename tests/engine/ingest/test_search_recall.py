"""The approximate paths of candidate search against exact numpy on the same real store.

Large partitions are searched through the in-process IVF index (``ivf``, the default) or
Chroma's HNSW index filtered to the partition in numpy (``hnsw``, ``partition_index`` off);
small ones exactly. Each must find the neighbours that decide — merge and review candidates,
related links — and so reach the same decisions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.config import DedupConfig
from engine.ingest import IngestPolicy, Stage
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import MemoryRecord, NewMemory
from tests.engine.ingest.conftest import (
    T0,
    EngineFactory,
    TableEmbedder,
    at_cosine,
    unit_rows,
)

DIM = 384
CLUSTERS = 60
F32 = npt.NDArray[np.float32]


def _store(engine: MemoryEngine, rng: np.random.Generator) -> tuple[list[MemoryRecord], F32]:
    """3,000 records of two agents in topical clusters (cosines 0.3-0.7 within a cluster)."""
    centers = unit_rows(rng.standard_normal((CLUSTERS, DIM)).astype(np.float32))
    members = rng.integers(CLUSTERS, size=3000)
    vectors = unit_rows(centers[members] + 0.9 * rng.standard_normal((3000, DIM)).astype(
        np.float32) / np.sqrt(DIM))
    records = [MemoryRecord.create(NewMemory(f"note {i} on topic {members[i]}",
                                             agent_id="alice" if i % 5 else "bob"),
                                   now_ms=T0, importance=0.5, embedding_model="table-test")
               for i in range(3000)]
    engine.store.write(records, vectors)
    return records, vectors


def _decide(engine: MemoryEngine, new: NewMemory) -> dict[str, Any]:
    run = engine.stepped(new)
    while run.next_stage is not Stage.APPLY:
        run.step()
    return run.state


@pytest.mark.parametrize("path", ["hnsw", "ivf"])
def test_approximate_search_finds_what_exact_search_finds(
        make_engine: EngineFactory, table: TableEmbedder, path: str) -> None:
    engine = make_engine(config=EngineConfig(sampling_rate=0.0))
    rng = np.random.default_rng(11)
    records, vectors = _store(engine, rng)
    queries: list[NewMemory] = []
    for q in range(240):  # near duplicates, paraphrases (merge and gray zone), new topics
        row = int(rng.integers(len(records)))
        cosine = (0.97, 0.86, 0.78, 0.4)[q % 4]  # 0.4: below the review floor (0.50)
        # the neighbour's words plus a tag of letters: a duplicate needs lexical support
        # (IngestPolicy.min_jaccard) as well as the cosine
        text = f"{records[row].content} {''.join(chr(97 + int(d)) for d in str(q))}"
        table.put(text, at_cosine(vectors[row], cosine, rng))
        queries.append(NewMemory(text, agent_id=records[row].agent_id))
    states = {}
    for name, limit in (("approx", 100), ("exact", 10**9)):
        engine.set_ingest_policy(IngestPolicy(dedup=DedupConfig(exact_search_max=limit),
                                              partition_index=path == "ivf"))
        states[name] = [_decide(engine, new) for new in queries]

    methods = [s[Stage.CANDIDATES.value]["method"] for s in states["approx"]]
    assert methods.count(path) >= 0.9 * len(queries)  # the approximate path is what is tested
    assert {s[Stage.CANDIDATES.value]["method"] for s in states["exact"]} == {"exact"}
    wanted = found = 0
    for approx, exact in zip(states["approx"], states["exact"], strict=True):
        got = {c["id"]: c["similarity"] for c in approx[Stage.CANDIDATES.value]["candidates"]}
        for candidate in exact[Stage.CANDIDATES.value]["candidates"]:
            if candidate["similarity"] >= 0.6:  # related links, gray zone, merges
                wanted += 1
                found += candidate["id"] in got and \
                    abs(got[candidate["id"]] - candidate["similarity"]) < 1e-4
    assert wanted >= 180 and found / wanted >= 0.99
    decisions = [(a[Stage.DECISION.value]["decision"], e[Stage.DECISION.value]["decision"])
                 for a, e in zip(states["approx"], states["exact"], strict=True)]
    same = sum((a["action"], a["reason"], a["target_id"]) ==
               (e["action"], e["reason"], e["target_id"]) for a, e in decisions)
    assert same >= 0.98 * len(queries)
    merged_or_deferred = [e for _, e in decisions if e["action"] in ("merged", "deferred")]
    assert len(merged_or_deferred) >= 100  # the decisive cases are well represented
