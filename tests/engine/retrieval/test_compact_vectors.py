"""Compact vectors (docs/retrieval.md "Compact vectors"): the view's int8 codes choose, the
exact float32 vectors score.

A view whose exact vectors are spilled to a memory-mapped file packs exactly what a view holding
them in memory packs (same records, same scores, on the candidate path and exhaustively); the
shortlist the codes make of the probed rows keeps every row whose exact cosine is among the
best; on a generated 20K store the candidate path over a spilled view agrees with exhaustive
scoring at least as often as docs/retrieval.md states.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.config import MemoryConfig, RetrievalConfig
from engine.records import MemoryRecord
from engine.retrieval import RetrievalRequest, Retriever
from engine.retrieval.dense import approximate_cosines, rounding_bound
from engine.retrieval.retriever import Candidates
from engine.retrieval.types import RetrievedBundle
from engine.store.view import ColumnarView
from tests.engine.retrieval.test_candidates import (
    DIM,
    EXHAUSTIVE,
    FORCED,
    NOW,
    PROVE_ALL,
    STATED_AGREEMENT,
    Workload,
    _packed,
)


def spilled_twin(work: Workload, directory: Path) -> ColumnarView:
    """The workload's records and vectors in a view whose exact vectors are in a file."""
    view = ColumnarView(DIM, capacity=len(work.records), spill=directory)
    for start in range(0, len(work.records), 5000):
        view.upsert(work.records[start:start + 5000], work.vectors[start:start + 5000])
    assert view.spilled
    return view


def retrieve(retriever: Retriever, view: ColumnarView, work: Workload, query: str,
             vector: npt.NDArray[np.float32], *, agent: str | None = None) -> RetrievedBundle:
    def fetch(ids: Sequence[str]) -> list[MemoryRecord]:
        return [work.records[int(i[2:])] for i in ids]

    return retriever.retrieve(
        view.snapshot(), RetrievalRequest(max_tokens=300, query=query, agent_id=agent),
        now_ms=NOW, memory=MemoryConfig(), query_vector=vector, fetch=fetch)


@pytest.mark.parametrize("config", [EXHAUSTIVE, FORCED, PROVE_ALL],
                         ids=["exhaustive", "forced", "prove-all"])
def test_a_spilled_view_packs_what_an_in_memory_view_packs(config: RetrievalConfig,
                                                           tmp_path: Path) -> None:
    work = Workload(1500)
    spilled = spilled_twin(work, tmp_path)
    in_memory, in_file = Retriever(config), Retriever(config)
    for row, agent in ((5, None), (77, "agent2"), (901, None), (1499, "agent2")):
        query = " ".join(work.records[row].content.split()[:4])
        vector = work.query_near(row)
        reference = retrieve(in_memory, work.view, work, query, vector, agent=agent)
        compact = retrieve(in_file, spilled, work, query, vector, agent=agent)
        assert _packed(compact) == _packed(reference)  # same records, same score bits
        assert compact.diagnostics.candidate_sources == reference.diagnostics.candidate_sources
        assert work.records[row].id in [r.id for r in compact.records[:5]]


@pytest.mark.parametrize("centring", [0.0, 0.5])
def test_the_shortlist_keeps_every_row_whose_exact_cosine_is_among_the_best(
        centring: float) -> None:
    work = Workload(6000, clusters=40)
    # the shortlist serves the plain (centred) cosine: with the query-time blend on, the
    # candidate path computes every probed row exactly (Retriever._dense_source)
    retriever = Retriever(RetrievalConfig(candidate_threshold=0, semantic_centering=centring,
                                          semantic_blend=0.0))
    snapshot = work.view.snapshot()
    candidates = retriever._candidates(snapshot, RetrievalRequest(max_tokens=300, query="w1"),
                                       NOW)
    assert isinstance(candidates, Candidates)
    sizes = []
    for k in (1, 8, 64):
        for row in range(0, 6000, 500):
            query = work.query_near(row)
            probed = retriever.dense_index(snapshot).probe(query, 12)
            exact = retriever._cosine(snapshot, query, candidates, probed)
            best = set(probed[np.argsort(-exact, kind="stable")[:k]].tolist())
            kept = retriever._dense_shortlist(snapshot, query, candidates, probed, k)
            assert best <= set(kept.tolist())
            sizes.append(len(kept) / len(probed))
    assert float(np.median(sizes)) < 0.5  # it narrows: most probed rows are never read


def test_the_rounding_bound_holds_for_every_row() -> None:
    work = Workload(3000, clusters=40)
    snapshot = work.view.snapshot()
    rows = np.arange(3000, dtype=np.intp)
    for row in range(0, 3000, 300):
        query = work.query_near(row)
        exact = np.einsum("ij,j->i", snapshot.vectors, query)
        error = np.abs(approximate_cosines(snapshot.codes, snapshot.scales, rows, query) - exact)
        bound = rounding_bound(snapshot.scales, rows, query)
        assert bool((error <= bound).all())
        assert float(np.median(error)) < 0.01  # and the codes are close in practice


def test_top_five_agreement_of_a_spilled_20k_store_meets_the_stated_figure(
        tmp_path: Path) -> None:
    work = Workload(20_000, clusters=200)
    spilled = spilled_twin(work, tmp_path)
    exhaustive, candidates = Retriever(EXHAUSTIVE), Retriever(
        RetrievalConfig(candidate_threshold=0))
    agreements = []
    for _ in range(25):
        row = int(work.rng.integers(0, 20_000))
        query, vector = work.text(5), work.query_near(row)
        reference = [i for i, _ in _packed(retrieve(exhaustive, work.view, work, query,
                                                    vector))][:5]
        candidate = retrieve(candidates, spilled, work, query, vector)
        assert candidate.diagnostics.candidate_sources
        top = [i for i, _ in _packed(candidate)][:5]
        agreements.append(len(set(top) & set(reference)) / len(reference))
    assert float(np.mean(agreements)) >= STATED_AGREEMENT
