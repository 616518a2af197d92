"""The candidate path (docs/retrieval.md "How candidates are found") against exhaustive scoring.

Exhaustive scoring is the reference: on small stores and exact matches both must pack the same
records with the same scores; on a generated 20K store (clustered fake vectors, a Zipf
vocabulary: what real embeddings and texts look like, unlike uniform noise) the top five agree
at least as often as docs/retrieval.md states.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine.config import MemoryConfig, RetrievalConfig
from engine.errors import ConfigInvalid
from engine.records import Layer, MemoryRecord, NewMemory, Privacy
from engine.retrieval import RetrievalRequest, Retriever
from engine.retrieval.candidates import (
    FREQUENT_SHARE,
    StaticOrder,
    TermPostings,
    bm25_at,
    top_static,
)
from engine.retrieval.dense import IvfIndex
from engine.retrieval.retriever import _GATHER_BLOCK, BoundParts
from engine.retrieval.types import DropReason, RetrievedBundle
from engine.store.view import ColumnarView

NOW = 1_750_000_000_000.0
DIM = 384
STATED_AGREEMENT = 0.99  # docs/retrieval.md "How candidates are found"

EXHAUSTIVE = RetrievalConfig(candidate_threshold=10**12)
# widening as far as a request needs: these stores are small, so the cost cap
# (RetrievalConfig.widen_share, tested on its own below) would score every row after round one
UNCAPPED = 1e6
# forced on any store, with sources far smaller than the store so they cannot cover it
FORCED = RetrievalConfig(candidate_threshold=0, dense_candidates=8, lexical_candidates=8,
                         static_candidates=4, dense_probes=2, widen_share=UNCAPPED)
# made to prove every packed record (not only the first ``proven_records``), and probing
# every list of the dense index: its bound is then exact, not an approximation
PROVE_ALL = RetrievalConfig(candidate_threshold=0, dense_candidates=8, lexical_candidates=8,
                            static_candidates=4, dense_probes=10_000, proven_records=10_000,
                            widen_share=UNCAPPED)
# every list probed and nothing widened: the first candidate set and its bound as they are
ALL_LISTS = RetrievalConfig(candidate_threshold=0, dense_candidates=8, lexical_candidates=8,
                            static_candidates=4, dense_probes=10_000, proven_records=0,
                            widen_share=UNCAPPED)

# the query-time blend of each record's vector with its predecessor's (docs/retrieval.md
# "Third round"), in every layer; the generated records are hours apart, so a wider window
# gives them predecessors
BLENDED = {False: (dataclasses.replace(EXHAUSTIVE, semantic_blend=0.0),
                  dataclasses.replace(PROVE_ALL, semantic_blend=0.0)),
           True: (dataclasses.replace(EXHAUSTIVE, semantic_blend=0.3,
                                      semantic_blend_layers=frozenset(Layer),
                                      context_window_ms=86_400_000.0),
                  dataclasses.replace(PROVE_ALL, semantic_blend=0.3,
                                      semantic_blend_layers=frozenset(Layer),
                                      context_window_ms=86_400_000.0))}
UNWIDENED = RetrievalConfig(candidate_threshold=0, dense_candidates=8, lexical_candidates=8,
                            static_candidates=4, dense_probes=2, proven_records=0,
                            widen_share=UNCAPPED)


class Workload:
    """A generated store: clustered unit vectors and Zipf-distributed words."""

    def __init__(self, n: int, *, seed: int = 3, clusters: int = 64) -> None:
        self.rng = np.random.default_rng(seed)
        self.words = [f"w{i}" for i in range(3000)]
        weights = 1.0 / np.arange(1, len(self.words) + 1)
        self.p = weights / weights.sum()
        self.centres = self.rng.standard_normal((clusters, DIM)).astype(np.float32)
        labels = self.rng.integers(0, clusters, n)
        noise = self.rng.standard_normal((n, DIM)).astype(np.float32)
        self.vectors = self.centres[labels] + 0.9 * noise
        self.vectors /= np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self.view = ColumnarView(DIM, capacity=n)
        self.records = [self.record(i) for i in range(n)]
        for start in range(0, n, 5000):
            self.view.upsert(self.records[start:start + 5000],
                             self.vectors[start:start + 5000])

    def text(self, size: int) -> str:
        return " ".join(self.rng.choice(self.words, size=size, p=self.p))

    def record(self, i: int) -> MemoryRecord:
        new = NewMemory(f"{self.text(12)} item{i}", agent_id=f"agent{i % 3}",
                        layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                        importance=float(self.rng.random()),
                        created_at=NOW - float(self.rng.random()) * 60 * 86_400_000.0)
        return MemoryRecord.create(new, now_ms=NOW, record_id=f"id{i:06d}")

    def query_near(self, row: int) -> npt.NDArray[np.float32]:
        """A unit query close to record ``row``'s vector (a paraphrase of it)."""
        query = self.vectors[row] + 0.03 * self.rng.standard_normal(DIM).astype(np.float32)
        unit: npt.NDArray[np.float32] = (query / np.linalg.norm(query)).astype(np.float32)
        return unit


class Conversations(Workload):
    """A generated store like an agent's conversations: turns attributed to speakers, some
    flagged important, dated over two months, some public; accesses counted on a few. One
    speaker (Zed) is rare: few enough rows to be listed rather than read off the static order."""

    SPEAKERS = ("Tim", "Ada Lovelace", "Maria")

    def record(self, i: int) -> MemoryRecord:
        speaker = "Zed" if i % 101 == 1 else self.SPEAKERS[i % 4] if i % 4 < 3 else None
        text = f"{self.text(10)} item{i}"
        new = NewMemory(f"{speaker}: {text}" if speaker else text,
                        agent_id=f"agent{i % 3}", layer=(Layer.EPISODIC, Layer.SEMANTIC)[i % 2],
                        importance=float(self.rng.random()),
                        tags=("important",) if i % 17 == 0 else (),
                        privacy=Privacy.PUBLIC if i % 5 == 0 else Privacy.PRIVATE,
                        created_at=NOW - float(self.rng.random()) * 60 * 86_400_000.0)
        return MemoryRecord.create(new, now_ms=NOW, record_id=f"id{i:06d}")

    def touch_some(self, count: int, now_ms: float) -> None:
        rows = self.rng.choice(len(self.records), size=count, replace=False)
        for _ in range(3):
            self.view.touch([self.records[r].id for r in rows.tolist()], now_ms)


_RETRIEVERS: dict[tuple[int, int], Retriever] = {}


def _retrieve(config: RetrievalConfig, work: Workload, query: str,
              vector: npt.NDArray[np.float32], *, agent: str | None = None,
              max_tokens: int = 300, now_ms: float = NOW,
              retriever: Retriever | None = None) -> RetrievedBundle:
    def fetch(ids: Sequence[str]) -> list[MemoryRecord]:
        return [work.records[int(i[2:])] for i in ids]

    # one retriever per workload and config: its text index is built once
    if retriever is None:
        retriever = _RETRIEVERS.setdefault((id(work), id(config)), Retriever(config))
    return retriever.retrieve(
        work.view.snapshot(), RetrievalRequest(max_tokens=max_tokens, query=query,
                                               agent_id=agent),
        now_ms=now_ms, memory=MemoryConfig(), query_vector=vector, fetch=fetch)


def _packed(bundle: RetrievedBundle) -> list[tuple[str, float]]:
    diagnostics = bundle.diagnostics
    rows = {diagnostics.ids[r]: r
            for r in np.flatnonzero(diagnostics.drop_codes == -1).tolist()}
    return [(r.id, float(diagnostics.scores[rows[r.id]])) for r in bundle.records]


@pytest.mark.parametrize("blend", [False, True])
@pytest.mark.parametrize("agent", [None, "agent1"])
def test_forced_candidates_pack_what_exhaustive_scoring_packs_on_a_small_store(
        agent: str | None, blend: bool) -> None:
    work = Workload(600)
    exhaustive, forced = BLENDED[blend]
    for row in (5, 77, 301, 599):
        query = " ".join(work.records[row].content.split()[:4])
        vector = work.query_near(row)
        reference = _retrieve(exhaustive, work, query, vector, agent=agent)
        candidate = _retrieve(forced, work, query, vector, agent=agent)
        assert candidate.diagnostics.candidate_sources  # the candidate path ran
        if blend:  # most rows have a predecessor, and the two paths blend the same rows
            assert np.count_nonzero(reference.diagnostics.blended >= 0) > 100
            np.testing.assert_array_equal(candidate.diagnostics.blended,
                                          reference.diagnostics.blended)
        assert candidate.diagnostics.scored_count < reference.diagnostics.scored_count
        assert _packed(candidate) == _packed(reference)
        assert candidate.total_tokens == reference.total_tokens


def test_an_exact_match_is_packed_first_both_ways() -> None:
    work = Workload(2000)
    row = 1234
    record = work.records[row]
    vector = work.vectors[row].copy()
    reference = _retrieve(EXHAUSTIVE, work, record.content, vector)
    candidate = _retrieve(FORCED, work, record.content, vector)
    assert reference.records[0].id == record.id == candidate.records[0].id
    proven = FORCED.proven_records  # the records the candidate path proves in order
    assert _packed(candidate)[:proven] == _packed(reference)[:proven]


def test_the_diagnostics_name_the_sources_and_the_unscored_records() -> None:
    work = Workload(1500)
    vector = work.query_near(10)
    bundle = _retrieve(UNWIDENED, work, "w1 w2 w40", vector, max_tokens=40)
    diagnostics = bundle.diagnostics
    sources = diagnostics.candidate_sources
    assert {"dense", "lexical", "static", "context"} <= set(sources)
    assert sources["dense"] == 8 and sources["lexical"] == 8 and sources["static"] == 4
    assert diagnostics.candidate_bound is not None
    counts = diagnostics.drop_counts()
    # every eligible record is packed, over the budget, or unscored — and all are explained
    assert counts[DropReason.UNSCORED.value] == 1500 - diagnostics.scored_count
    assert diagnostics.scored_count == int(diagnostics.eligible.sum())
    for line in diagnostics.candidates[:len(bundle.records)]:
        assert line.packed
    wire = diagnostics.to_json(candidates=False)
    assert wire["candidate_sources"] == dict(sources)
    assert wire["scored_count"] == diagnostics.scored_count

    exhaustive = _retrieve(EXHAUSTIVE, work, "w1 w2 w40", vector, max_tokens=40).diagnostics
    assert exhaustive.candidate_sources == {} and exhaustive.candidate_bound is None
    assert exhaustive.drop_counts()[DropReason.UNSCORED.value] == 0


def test_candidates_are_widened_until_they_fill_the_budget() -> None:
    work = Workload(600)
    vector = work.query_near(3)
    # 8 + 8 + 4 rows and their neighbours hold fewer records than the budget takes
    widened = _retrieve(FORCED, work, "w1 w7", vector)
    assert widened.diagnostics.candidate_sources["dense"] > 8
    proven = FORCED.proven_records
    reference = _retrieve(EXHAUSTIVE, work, "w1 w7", vector)
    assert len(widened.records) >= proven
    assert _packed(widened)[:proven] == _packed(reference)[:proven]
    bound = widened.diagnostics.candidate_bound
    assert bound is not None and _packed(widened)[proven - 1][1] > bound


def test_a_loose_dense_bound_widens_the_dense_source_alone_first() -> None:
    """Clusters of ~10 rows, 8 dense candidates: the 8th cosine is still inside the query's
    cluster, so the bound is above the first packed records although the budget is full.
    The dense source alone is doubled then (not the lexical or static ones), and what is
    packed first is still exhaustive scoring's, above the bound."""
    work = Workload(3000, clusters=300)
    config = dataclasses.replace(FORCED, dense_probes=8, proven_records=3)
    dense_first = 0
    for row in range(0, 3000, 29):
        vector = work.query_near(row)
        bundle = _retrieve(config, work, "w1 w7", vector, max_tokens=60)
        sources = bundle.diagnostics.candidate_sources
        reference = _retrieve(EXHAUSTIVE, work, "w1 w7", vector, max_tokens=60)
        assert _packed(bundle)[:3] == _packed(reference)[:3]
        if sources["dense"] == 16 and sources["lexical"] == 8 and sources["static"] == 4:
            dense_first += 1
            bound = bundle.diagnostics.candidate_bound
            assert bound is not None and _packed(bundle)[2][1] > bound
    assert dense_first >= 20


def test_candidates_that_run_out_before_the_budget_fall_back_to_every_row() -> None:
    work = Workload(300)
    vector = work.query_near(3)
    big = 300 * 40  # room for every record: packing would run through the candidates
    candidate = _retrieve(FORCED, work, "w1 w7", vector, max_tokens=big)
    reference = _retrieve(EXHAUSTIVE, work, "w1 w7", vector, max_tokens=big)
    assert candidate.diagnostics.candidate_sources == {}  # scored exhaustively
    assert _packed(candidate) == _packed(reference)


def test_a_query_far_from_every_record_stops_widening_once_scoring_every_row_is_cheaper(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A random query vector over unclustered vectors: every cosine is small and alike, so no
    # round proves the first packed records. The request widens while the rows it touched,
    # doubled for the next round, stay within widen_share of the store, then scores every row
    # (the same records and scores as exhaustive scoring, and fewer rounds than uncapped).
    # The query's words are the commonest, so the lexical source would give up first (the
    # next test): here it reads on, as far as it needs, to leave the rounds to the cap.
    work = Workload(6000, seed=11, clusters=6000)
    vector = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    vector /= np.linalg.norm(vector)
    touched: list[int] = []
    real = Retriever._score_candidates

    def counted(self: Retriever, *args: Any, **kwargs: Any) -> Any:
        scored = real(self, *args, **kwargs)
        picked = None if scored is None else scored.picked
        assert picked is not None
        touched.append(len(picked.need) + len(picked.probed[1]))
        return scored

    lexical_source = Retriever._lexical_source

    def reading_on(self: Retriever, snapshot: Any, candidates: Any, postings: Any, size: int,
                   limit: float) -> Any:
        return lexical_source(self, snapshot, candidates, postings, size, math.inf)

    monkeypatch.setattr(Retriever, "_score_candidates", counted)
    monkeypatch.setattr(Retriever, "_lexical_source", reading_on)
    reference = _packed(_retrieve(EXHAUSTIVE, work, "w1 w2 w3", vector))
    capped = dataclasses.replace(FORCED, widen_share=0.25)
    bundle = _retrieve(capped, work, "w1 w2 w3", vector)
    assert bundle.diagnostics.candidate_sources == {} and _packed(bundle) == reference
    limit = 0.25 * len(work.records)
    assert all(2 * rows <= limit for rows in touched[:-1]) and 2 * touched[-1] > limit
    capped_rounds = len(touched)
    touched.clear()
    uncapped = _retrieve(FORCED, work, "w1 w2 w3", vector)
    assert uncapped.diagnostics.candidate_sources == {} and _packed(uncapped) == reference
    assert len(touched) > capped_rounds


def test_a_query_of_common_words_is_scored_on_every_row_once_its_postings_prove_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The three commonest words are each in about half of the rows, and a row holds each
    # about once: their BM25 weights are flat, so reading their postings deeper does not
    # bring the rows left out under the ones read. The lexical source gives up once the
    # rows it read, doubled by its next read, pass widen_share of the store, and the request
    # is scored on every row at once (the same records and scores as exhaustive scoring);
    # without the limit it reads past that point.
    work = Workload(6000, seed=11, clusters=6000)
    vector = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    vector /= np.linalg.norm(vector)
    gave_up: list[bool] = []
    rounds: list[int] = []
    lexical_source = Retriever._lexical_source
    score_candidates = Retriever._score_candidates

    def watched(self: Retriever, *args: Any) -> Any:
        found = lexical_source(self, *args)
        gave_up.append(found is None)
        return found

    def counted(self: Retriever, *args: Any, **kwargs: Any) -> Any:
        rounds.append(1)
        return score_candidates(self, *args, **kwargs)

    monkeypatch.setattr(Retriever, "_lexical_source", watched)
    monkeypatch.setattr(Retriever, "_score_candidates", counted)
    reference = _packed(_retrieve(EXHAUSTIVE, work, "w1 w2 w3", vector))
    capped = dataclasses.replace(FORCED, lexical_candidates=64, widen_share=0.25)
    bundle = _retrieve(capped, work, "w1 w2 w3", vector)
    assert gave_up == [True] and rounds == [1]  # in the first round, before any widening
    assert bundle.diagnostics.candidate_sources == {} and _packed(bundle) == reference
    gave_up.clear()
    uncapped = _retrieve(dataclasses.replace(capped, widen_share=UNCAPPED), work, "w1 w2 w3",
                         vector)
    assert gave_up and not any(gave_up)
    assert _packed(uncapped)[:10] == reference[:10]


def test_widen_share_is_checked() -> None:
    for wrong in (0, -0.5, float("nan"), "a quarter"):
        with pytest.raises(ConfigInvalid, match="widen_share"):
            RetrievalConfig(widen_share=wrong)  # type: ignore[arg-type]


# the default sources; the cost rules (widen_share) are lifted: on a store this small a query
# of the Zipf vocabulary's commonest words would be scored on every row (the lexical source
# gives up), which agrees trivially and is not what this measures
AGREEMENT_CONFIGS = {False: (dataclasses.replace(EXHAUSTIVE, semantic_blend=0.0),
                             RetrievalConfig(candidate_threshold=0, semantic_blend=0.0,
                                             widen_share=UNCAPPED)),
                     True: (dataclasses.replace(EXHAUSTIVE, semantic_blend=0.3,
                                                semantic_blend_layers=frozenset(Layer)),
                            RetrievalConfig(candidate_threshold=0, semantic_blend=0.3,
                                            semantic_blend_layers=frozenset(Layer),
                                            widen_share=UNCAPPED))}


@pytest.mark.parametrize("blend", [False, True])
def test_top_five_agreement_on_a_generated_20k_store_meets_the_stated_figure(
        blend: bool) -> None:
    work = Workload(20_000, clusters=200)  # ~3,300 records per agent and layer: minutes apart
    exhaustive, config = AGREEMENT_CONFIGS[blend]
    agreements = []
    for _ in range(25):
        row = int(work.rng.integers(0, 20_000))
        query, vector = work.text(5), work.query_near(row)
        reference = [i for i, _ in _packed(_retrieve(exhaustive, work, query, vector))][:5]
        candidate = _retrieve(config, work, query, vector)
        assert candidate.diagnostics.candidate_sources
        blended = int(np.count_nonzero(candidate.diagnostics.blended >= 0))
        assert (blended > 3000) if blend else blended == 0
        top = [i for i, _ in _packed(candidate)][:5]
        agreements.append(len(set(top) & set(reference)) / len(reference))
    assert float(np.mean(agreements)) >= STATED_AGREEMENT


def test_the_dense_index_holds_every_vector_once_through_appends() -> None:
    work = Workload(3000)
    vectors, has = work.vectors, np.ones(3000, dtype=bool)
    has[7] = False  # a record still waiting for its vector is not indexed
    index = IvfIndex.build(vectors[:1000], has[:1000])
    for end in (1050, 1100, 3000):  # a small tail, then one that is merged into the lists
        index = index.extended(vectors[:end], has[:end])
    everything = index.probe(vectors[0], index.lists)
    assert everything.tolist() == [r for r in range(3000) if r != 7]
    assert index.n == 3000 and index.nbytes > 0
    nearest = index.probe(vectors[2500], 4)
    assert 2500 in nearest.tolist()


def test_the_dense_index_bounds_every_probed_rows_dot_product() -> None:
    """The int8 codes' bounds are upper bounds of the float32 dot products, for rows probed
    in a list, in the tail and looked up one by one; a bound that ignored what the codes lose
    (a bare approximate dot) fails this on the queries that are stored vectors themselves."""
    work = Workload(3000, seed=11)
    vectors = work.vectors.copy()
    vectors[5] = 0.0  # spiky and sparse vectors: the widest and the narrowest code steps
    vectors[5, 3] = 1.0
    vectors[6, :2] = np.float32(np.sqrt(0.5))
    vectors[6, 2:] = 0.0
    has = np.ones(3000, dtype=bool)
    index = IvfIndex.build(vectors[:2900], has[:2900]).extended(vectors, has)  # a tail
    assert len(index.tail_rows) == 100
    queries = [vectors[r] for r in (0, 5, 6, 1500, 2950)] + [work.query_near(r)
                                                              for r in range(40)]
    slack = []
    for query in queries:
        rows, bounds = index.probe_bounds(query, index.lists)
        exact = np.einsum("ij,j->i", vectors[rows], query).astype(np.float64)
        assert sorted(rows.tolist()) == list(range(3000))
        assert (bounds >= exact).all()
        assert (index.dot_bounds(query, rows[::7]) >= exact[::7]).all()
        slack.append(float((bounds - exact).max()))
    # and tight: what the codes lose is about 1 % of a unit vector
    assert max(slack) < 0.05


@pytest.mark.parametrize("blend", [False, True])
def test_the_dense_source_picks_what_scoring_every_probed_row_picks(blend: bool) -> None:
    """Scoring exactly only the probed rows whose bound can reach the best ``size`` gives the
    same dense candidates and the same bound as scoring every probed row (the second
    version), with the blend and the centring, for all agents and for one."""
    work = Conversations(6000, seed=13)
    config = dataclasses.replace(BLENDED[blend][1], dense_candidates=32, dense_probes=12)
    retriever = Retriever(config)
    snapshot = work.view.snapshot()
    index = retriever.dense_index(snapshot)
    scored_share = []
    for number, row in enumerate(range(0, 6000, 400)):
        request = RetrievalRequest(max_tokens=300, query=work.text(4),
                                   agent_id=None if number % 2 else "agent1")
        candidates = retriever._candidates(snapshot, request, NOW)
        query = work.query_near(row)
        dense, least, (computed, cosines), probe = retriever._dense_source(
            snapshot, candidates, query, config.dense_probes, config.dense_candidates, None)
        # widened, reading only the lists after the first probe's: as a fresh probe
        wide = retriever._dense_source(snapshot, candidates, query, 2 * config.dense_probes,
                                       2 * config.dense_candidates, None, probe)
        fresh = retriever._dense_source(snapshot, candidates, query, 2 * config.dense_probes,
                                        2 * config.dense_candidates, None)
        assert set(wide[0].tolist()) == set(fresh[0].tolist()) and wide[1] == fresh[1]
        assert sorted(wide[3][1].tolist()) == sorted(fresh[3][1].tolist())
        probed = index.probe(query, config.dense_probes)
        probed = probed[candidates.eligible[probed]]
        exact = retriever._cosine(snapshot, query, candidates, probed)
        best = np.argsort(-exact, kind="stable")[:config.dense_candidates]
        assert set(dense.tolist()) == set(probed[best].tolist())
        assert least == float(exact[best].min())
        # the cosines handed on are the exact ones, of rows ascending
        assert (np.diff(computed) > 0).all()
        np.testing.assert_array_equal(cosines, exact[np.searchsorted(probed, computed)])
        scored_share.append(len(computed) / len(probed))
        # every probed row's bound (blended, centred) is at least its exact cosine
        grouped, dots = index.probe_bounds(query, config.dense_probes)
        grouped, dots = grouped[candidates.eligible[grouped]], dots[candidates.eligible[grouped]]
        bounds = retriever._semantic_bounds(snapshot, query, candidates, grouped, dots)
        assert (bounds >= retriever._cosine(snapshot, query, candidates, grouped)).all()
    assert float(np.median(scored_share)) < 0.5  # the codes spared most exact cosines


def test_stores_up_to_the_threshold_and_requests_without_a_vector_score_every_row() -> None:
    work = Workload(400)
    vector = work.query_near(1)
    default = _retrieve(RetrievalConfig(), work, "w1 w3", vector)  # threshold 50,000
    assert default.diagnostics.candidate_sources == {}
    assert default.diagnostics.scored_count == 400
    at_threshold = RetrievalConfig(candidate_threshold=400)
    assert _retrieve(at_threshold, work, "w1 w3", vector).diagnostics.candidate_sources == {}
    just_under = RetrievalConfig(candidate_threshold=399)
    assert _retrieve(just_under, work, "w1 w3", vector).diagnostics.candidate_sources
    retriever = Retriever(FORCED)  # the Jaccard path (model not ready): no dense index to ask
    jaccard = retriever.retrieve(work.view.snapshot(), RetrievalRequest(max_tokens=300,
                                                                        query="w1 w3"),
                                 now_ms=NOW, memory=MemoryConfig(), query_vector=None,
                                 fetch=lambda ids: [])
    assert jaccard.diagnostics.candidate_sources == {}


HOUR = 3_600_000.0
DAY = 86_400_000.0
# a speaker and a day (~1 % of the rows: listed), a month (~half of them: read off the static
# order), plain words; NOW is 2025-06-15
QUERIES = ("what did Tim say about w1 w2 on 20 May 2025", "Ada Lovelace w3 w7 in May 2025",
           "w1 w5 w9 w30", "Maria w2 in April 2025 or on 1 June 2025")


@pytest.mark.parametrize("later_ms", [0.0, 3 * HOUR, 20 * DAY])
def test_every_scored_row_has_its_exhaustive_score_and_no_other_row_beats_the_bound(
        later_ms: float) -> None:
    """The union's scores are exhaustive scoring's, bit for bit, and the bound holds for every
    row left out: before the decay epoch (its scale above 1), hours after (recency decayed,
    importance not), weeks after; with accesses counted, flagged records, dates, speakers."""
    work = Conversations(4000, seed=5)
    work.touch_some(40, NOW)
    now = NOW + later_ms
    for number, query in enumerate(QUERIES):
        vector = work.query_near(97 * number + 11)
        for agent in (None, "agent2"):
            reference = _retrieve(EXHAUSTIVE, work, query, vector, agent=agent, now_ms=now)
            candidate = _retrieve(ALL_LISTS, work, query, vector, agent=agent, now_ms=now,
                                  max_tokens=60)
            _assert_exact_with_a_bound(candidate, reference)


def _assert_exact_with_a_bound(candidate: RetrievedBundle, reference: RetrievedBundle) -> None:
    """``candidate``'s scored rows have ``reference``'s (exhaustive) scores, bit for bit, and
    no row it left out scores above its bound."""
    diagnostics = candidate.diagnostics
    assert diagnostics.candidate_sources and diagnostics.candidate_bound is not None
    scored = np.flatnonzero(diagnostics.eligible)
    assert len(scored) == diagnostics.scored_count < reference.diagnostics.scored_count
    assert diagnostics.scores[scored].tolist() == reference.diagnostics.scores[scored].tolist()
    left_out = reference.diagnostics.eligible & ~diagnostics.eligible
    assert left_out.any()
    assert float(reference.diagnostics.scores[left_out].max()) <= diagnostics.candidate_bound


@pytest.mark.parametrize("query", [*QUERIES, "Zed w1 w4 on 20 May 2025"])
def test_listed_date_and_speaker_rows_are_exact_too(query: str) -> None:
    """With 64 static candidates a day's rows (~200) and a rare speaker's (~40) are listed
    (up to 8 × 64), a month's and a common speaker's read off the static order: both exact."""
    work = Conversations(4000, seed=5)
    config = RetrievalConfig(candidate_threshold=0, dense_candidates=8, lexical_candidates=8,
                             static_candidates=64, dense_probes=10_000, proven_records=0,
                             widen_share=UNCAPPED)
    vector = work.query_near(21)
    reference = _retrieve(EXHAUSTIVE, work, query, vector)
    candidate = _retrieve(config, work, query, vector, max_tokens=60)
    _assert_exact_with_a_bound(candidate, reference)


def test_date_and_speaker_sources_take_the_best_matching_rows() -> None:
    work = Conversations(4000, seed=5)
    vector = work.query_near(3)
    for query, source in ((QUERIES[0], "date"), (QUERIES[1], "date"), (QUERIES[0], "speaker")):
        bundle = _retrieve(ALL_LISTS, work, query, vector, max_tokens=60)
        assert bundle.diagnostics.candidate_sources[source] == ALL_LISTS.static_candidates
    packed = _packed(_retrieve(PROVE_ALL, work, QUERIES[0], vector))
    assert packed == _packed(_retrieve(EXHAUSTIVE, work, QUERIES[0], vector))


def test_the_candidate_path_follows_access_counting_and_appends() -> None:
    """One retriever across view states (its static order updated, not re-sorted; a frequent
    term's postings positions extended) gives what a fresh retriever and exhaustive scoring
    give."""
    work = Conversations(3000, seed=9)
    retriever = Retriever(ALL_LISTS)
    for step in range(4):
        query, vector = QUERIES[step % len(QUERIES)], work.query_near(50 * step + 1)
        kept = _retrieve(ALL_LISTS, work, query, vector, retriever=retriever, max_tokens=60)
        fresh = _retrieve(ALL_LISTS, work, query, vector, retriever=Retriever(ALL_LISTS),
                          max_tokens=60)
        reference = _retrieve(EXHAUSTIVE, work, query, vector, retriever=Retriever(EXHAUSTIVE))
        _assert_exact_with_a_bound(kept, reference)
        assert _packed(kept) == _packed(fresh)
        assert kept.diagnostics.candidate_bound == fresh.diagnostics.candidate_bound
        # access counting, as the engine does after a retrieval; then two new records
        work.view.touch([record.id for record in kept.records], NOW)
        start = len(work.records)
        added = [work.record(start), work.record(start + 1)]
        work.records.extend(added)
        vectors = work.vectors[[start % 3000, (start + 1) % 3000]]
        work.view.upsert(added, vectors)


def test_the_threshold_algorithm_finds_the_top_rows_for_any_decay() -> None:
    rng = np.random.default_rng(1)
    n = 5000
    fixed = np.round(rng.random(n) * 4) / 10  # few distinct values, many ties
    importance, recency = rng.random(n), rng.random(n) ** 4
    order = StaticOrder.of(fixed, importance, recency, (0.3, 0.5), lineage=1)
    accepted = rng.random(n) < 0.4
    for a, r in ((0.3, 0.5), (0.6, 0.7), (0.2, 0.01), (0.0, 0.4), (0.3, 0.0)):
        def value(rows: npt.NDArray[np.intp], a: float = a, r: float = r
                  ) -> npt.NDArray[np.float64]:
            return fixed[rows] + a * importance[rows] + r * recency[rows]

        found = top_static(order, order.scale((a, r)), 50,
                           lambda rows: accepted[rows], value)
        every = np.flatnonzero(accepted)
        best = np.sort(value(every))[::-1][:50]
        assert np.sort(found.values)[::-1].tolist() == best.tolist()
        assert accepted[found.rows].all() and not found.complete


def test_the_static_order_moves_changed_and_appended_rows_into_place() -> None:
    rng = np.random.default_rng(2)
    n = 3100  # 100 appended and 40 changed: moved, fewer than an eighth of the rows
    fixed, importance, recency = rng.random(n), rng.random(n), rng.random(n)
    order = StaticOrder.of(fixed[:3000], importance[:3000], recency[:3000], (1.0, 0.5), 7)
    changed = rng.choice(3000, 40, replace=False)
    fixed[changed] += 0.25
    importance[changed] = rng.random(40)
    moved = order.updated(fixed, importance, recency, (9.0, 9.0), 7)
    assert moved.coefficients == (1.0, 0.5)  # moved, not sorted again
    assert sorted(moved.order.tolist()) == list(range(n))
    decaying = importance + 0.5 * recency
    assert (np.diff(decaying[moved.order]) <= 0).all()
    assert moved.suffix_fixed[0] == fixed.max() and moved.suffix_fixed[-1] == -np.inf
    assert order.updated(fixed, importance, recency, (2.0, 1.0), 8).coefficients == (2.0, 1.0)


def test_the_bound_parts_add_up_and_a_target_raises_the_lenders_threshold() -> None:
    """``BoundParts.total`` is the sum the candidate path's bound always was while lenders
    are the rows over the relevance bound; a target it can reach raises their threshold until
    the bound meets it, one it cannot leaves the threshold where it was."""
    parts = BoundParts(rest=0.03, semantic_weight=0.3, semantic=0.5, lexical=0.06, lift=0.7,
                       threshold=0.21)
    assert parts.relevance == pytest.approx(0.21)
    assert parts.total() == pytest.approx(0.03 + 0.21)  # max(w_s + w_l, w_c) / (w_s + w_l)
    raised = parts.lender_threshold(0.26)
    assert raised > parts.relevance
    # an outside row's own relevance up to 0.21, a neighbour's up to the threshold
    assert dataclasses.replace(parts, threshold=raised).total() == pytest.approx(0.26)
    assert raised == pytest.approx(0.21 + (0.26 - 0.03 - 0.21) / 0.7)
    assert parts.lender_threshold(0.2) == parts.relevance  # out of reach
    # context weighs more than relevance: an irrelevant row with a lender beside it is the
    # best outside row (lift × threshold)
    heavy = dataclasses.replace(parts, lift=2.0)
    assert heavy.total() == pytest.approx(0.03 + 2.0 * 0.21)
    assert dataclasses.replace(heavy, threshold=heavy.lender_threshold(0.6)).total() \
        == pytest.approx(0.6)
    # the last dense cosine that would bring the bound (lenders at the relevance bound) to
    # a target, and none when the other terms alone are over it
    assert parts.semantic_for(0.24) == pytest.approx(0.5)
    assert parts.semantic_for(0.2) == pytest.approx((0.17 - 0.06) / 0.3)
    assert parts.semantic_for(0.08) == -math.inf


@pytest.mark.parametrize("later_ms", [0.0, 20 * DAY])
def test_a_widened_rounds_target_keeps_fewer_lenders_and_its_bound_holds(
        later_ms: float) -> None:
    """A widened round aims its bound just under the score it must prove: only rows more
    relevant than the raised threshold lend context, and the bound counts what every other
    row can lend (up to that threshold). Every scored row keeps its exhaustive score and no
    row left out scores above the bound — which a bound leaving the raised threshold out
    (the relevance bound alone) does not satisfy here."""
    work = Conversations(4000, seed=5)
    window = 6 * HOUR  # records are ~20 min apart per agent and layer: most have neighbours
    config = dataclasses.replace(ALL_LISTS, context_window_ms=window, dense_candidates=64,
                                 lexical_candidates=32)
    reference_config = dataclasses.replace(EXHAUSTIVE, context_window_ms=window)
    retriever = Retriever(config)
    memory = MemoryConfig()
    now = NOW + later_ms
    too_tight = fewer = aimed_at = 0
    # no dates or speakers: their weights would put the bound over any score
    for number, query in enumerate(("w1 w5 w9 w30", "w3 w7", "w2 w11 w40") * 3):
        vector = work.query_near(97 * number + 11)
        request = RetrievalRequest(max_tokens=60, query=query)
        snapshot = work.view.snapshot()
        retriever.index.sync(snapshot)
        candidates = retriever._candidates(snapshot, request, now)
        weights = config.weights_for(request.purpose, request.strategy, request.pressure_state)
        first = retriever._score(snapshot, request, candidates, weights, now, memory,
                                 vector, narrow=True)
        plain = first.picked
        assert plain is not None
        # a high target (the first round's best score): many rows over the relevance bound
        # do not lend, and their neighbours are left out
        target = float(first.scores.max())
        if target <= plain.bound:
            continue  # out of reach: nothing to raise
        aimed_at += 1
        aimed = retriever._score(snapshot, request, candidates, weights, now, memory, vector,
                                 narrow=True, target=target)
        picked = aimed.picked
        assert picked is not None and picked.parts.threshold > plain.parts.threshold
        assert picked.bound == pytest.approx(target)
        fewer += picked.sources.get("context", 0) < plain.sources.get("context", 0)
        reference = _retrieve(reference_config, work, query, vector, max_tokens=60,
                              now_ms=now).diagnostics
        rows = picked.rows
        assert aimed.scores[rows].tolist() == reference.scores[rows].tolist()
        left_out = reference.eligible.copy()
        left_out[rows] = False
        best_left_out = float(reference.scores[left_out].max())
        assert best_left_out <= picked.bound
        too_tight += best_left_out > dataclasses.replace(
            picked.parts, threshold=picked.parts.relevance).total()
    assert aimed_at >= 5 and fewer >= aimed_at - 1 and too_tight >= 1


def test_a_widened_round_takes_the_dense_width_its_target_implies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Clusters of ~100 rows, 8 dense candidates: the dense source's last cosine stays inside
    the query's cluster until it reads most of it. Doubling took five rounds for nearly every
    request here; widening the dense source by the factor its probe's bounds imply for the
    record to prove (up to 4× at a time) settles every one in at most four and most in three,
    and what is packed first is still exhaustive scoring's."""
    rounds = [0]
    score_candidates = Retriever._score_candidates

    def counted(self: Retriever, *args: object, **kwargs: object) -> object:
        rounds[0] += 1
        return score_candidates(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Retriever, "_score_candidates", counted)
    work = Workload(3000, clusters=30)
    config = dataclasses.replace(FORCED, dense_probes=8, proven_records=3)
    settled = []
    for row in range(0, 3000, 75):
        vector = work.query_near(row)
        rounds[0] = 0
        bundle = _retrieve(config, work, "w1 w7", vector, max_tokens=60)
        settled.append(rounds[0])
        reference = _retrieve(EXHAUSTIVE, work, "w1 w7", vector, max_tokens=60)
        assert _packed(bundle)[:3] == _packed(reference)[:3]
        bound = bundle.diagnostics.candidate_bound
        assert bound is not None and _packed(bundle)[2][1] > bound
    assert max(settled) <= 4 and sum(count <= 3 for count in settled) >= 20, settled


def test_bm25_at_has_the_bits_of_the_postings_sum_whichever_way_it_looks_a_term_up() -> None:
    """``bm25_at`` looks a frequent term up by its positions, a term shorter than the rows by
    searching its postings in them, a longer one by searching the rows in it: every way gives
    each row
    the sum exhaustive scoring adds up (``bm25[rows] += weights``, term after term), bit for
    bit (docs/retrieval.md "First-round cost")."""
    rng = np.random.default_rng(5)
    n = 4000
    postings = []
    for size in (3000, 1200, 40, 7, 1):  # longer and shorter than the rows looked up
        rows = np.sort(rng.choice(n, size=size, replace=False)).astype(np.intp)
        postings.append((rows, rng.random(size) * 7.3))
    expected = np.zeros(n)
    for rows, weights in postings:
        expected[rows] += weights
    asked = np.sort(rng.choice(n, size=600, replace=False)).astype(np.intp)
    for frequent in ((), (0,), (0, 1), (0, 1, 2, 3, 4)):
        terms = []
        for t, (rows, weights) in enumerate(postings):
            positions = None
            if t in frequent:
                positions = np.full(n, -1, dtype=np.int32)
                positions[rows] = np.arange(len(rows), dtype=np.int32)
            terms.append(TermPostings(rows, weights, positions))
        got = bm25_at(terms, asked)
        assert got.tobytes() == expected[asked].tobytes(), frequent


def test_a_frequent_terms_positions_are_kept_for_the_candidate_path() -> None:
    """A term held by at least FREQUENT_SHARE of the rows gets each row's position in its
    postings (kept: the same array for the next request), a rare one does not; the candidate
    path's scores with them are exhaustive scoring's. (Appends, which extend the positions:
    test_the_candidate_path_follows_access_counting_and_appends.)"""
    work = Workload(3000, seed=17)
    retriever = Retriever(FORCED)
    snapshot = work.view.snapshot()
    retriever.index.sync(snapshot)
    request = RetrievalRequest(max_tokens=300, query="w0 w200")
    candidates = retriever._candidates(snapshot, request, NOW)
    first = retriever._query_postings(snapshot, candidates, ["w0", "w200"])
    frequent, rare = first
    assert len(frequent.rows) >= FREQUENT_SHARE * snapshot.n > len(rare.rows) > 0
    assert frequent.positions is not None and rare.positions is None
    np.testing.assert_array_equal(np.flatnonzero(frequent.positions >= 0), frequent.rows)
    np.testing.assert_array_equal(frequent.positions[frequent.rows],
                                  np.arange(len(frequent.rows)))
    again = retriever._query_postings(snapshot, candidates, ["w0"])
    assert again[0].positions is frequent.positions
    vector = work.query_near(7)
    bundle = _retrieve(FORCED, work, "w0 w200", vector)
    reference = _retrieve(EXHAUSTIVE, work, "w0 w200", vector)
    scored = np.flatnonzero(bundle.diagnostics.eligible)
    assert bundle.diagnostics.candidate_sources and len(scored) < snapshot.n
    assert bundle.diagnostics.scores[scored].tobytes() == \
        reference.diagnostics.scores[scored].tobytes()
    assert _packed(bundle) == _packed(reference)


@pytest.mark.parametrize("blend", [False, True])
def test_cosines_gathered_in_blocks_have_every_rows_bits(blend: bool) -> None:
    """The candidate path's cosines of many scattered rows (gathered a block at a time) are
    those of every row computed at once, bit for bit, blended or not."""
    work = Workload(3000, seed=19)
    retriever = Retriever(BLENDED[blend][1])
    snapshot = work.view.snapshot()
    candidates = retriever._candidates(snapshot, RetrievalRequest(max_tokens=300, query="x"),
                                       NOW)
    query = work.query_near(11)
    every = retriever._cosine(snapshot, query, candidates, None)
    rows = np.sort(work.rng.choice(3000, size=1000, replace=False)).astype(np.intp)
    assert len(rows) > 3 * _GATHER_BLOCK
    assert retriever._cosine(snapshot, query, candidates, rows).tobytes() == \
        every[rows].tobytes()
    shuffled = work.rng.permutation(rows)  # the dense source asks in no particular order
    assert retriever._cosine(snapshot, query, candidates, shuffled).tobytes() == \
        every[shuffled].tobytes()


def test_weights_follow_a_replaced_config() -> None:
    """The retriever computes a request shape's weights once per config: a config put in its
    place (the engine's retrieval settings changed) is used from the next request on."""
    work = Workload(500, seed=23)
    retriever = Retriever(FORCED)
    first = _retrieve(FORCED, work, "w1", work.query_near(3), retriever=retriever)
    heavier = dataclasses.replace(FORCED, purpose_weights={
        purpose: dataclasses.replace(weights, importance=weights.importance + 1.0)
        for purpose, weights in FORCED.purpose_weights.items()})
    retriever.config = heavier
    second = _retrieve(heavier, work, "w1", work.query_near(3), retriever=retriever)
    request = RetrievalRequest(max_tokens=300, query="w1")
    expected = heavier.weights_for(request.purpose, request.strategy, request.pressure_state)
    assert dict(second.diagnostics.scoring_breakdown)["importance"] == expected.importance
    assert second.diagnostics.scoring_breakdown != first.diagnostics.scoring_breakdown


def test_a_widened_round_reads_fewer_lists_and_takes_an_unread_one_at_the_bar(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A widened round reads further lists of the dense index only while a step of them holds
    a row over the cosine its target needs (docs/retrieval.md "Sixth version: fewer lists in
    widened rounds"), not every list its width allows; a row in a list it did not read is then
    taken to have that cosine at most, so the dense term of the bound is never below it —
    even where the last dense candidate's cosine, among fewer rows, is. What is packed first
    is still exhaustive scoring's, and no row left out scores above the bound."""
    reads: list[tuple[int, int, float, float, float]] = []
    dense_source = Retriever._dense_source

    def traced(self: Retriever, *args: Any) -> Any:
        found = dense_source(self, *args)
        dense, least, (rows, cosines), probe = found
        probes, bar = args[3], args[7] if len(args) > 7 else -math.inf
        reads.append((probes, probe.lists, bar, least,
                      float(cosines[np.isin(rows, dense)].min())))
        return found

    monkeypatch.setattr(Retriever, "_dense_source", traced)
    work = Workload(3000, clusters=30)
    config = dataclasses.replace(FORCED, dense_probes=8, proven_records=3)
    fewer = floored = widened = 0
    for row in range(0, 3000, 75):
        vector = work.query_near(row)
        reads.clear()
        bundle = _retrieve(config, work, "w1 w7", vector, max_tokens=60)
        reference = _retrieve(EXHAUSTIVE, work, "w1 w7", vector, max_tokens=60)
        assert _packed(bundle)[:3] == _packed(reference)[:3]
        diagnostics = bundle.diagnostics
        if diagnostics.candidate_bound is not None:
            left_out = reference.diagnostics.eligible & ~diagnostics.eligible
            assert (reference.diagnostics.scores[left_out] <= diagnostics.candidate_bound).all()
        widened += len(reads) > 1
        for probes, lists, bar, least, last in reads[1:]:
            assert least >= last
            if lists < probes:  # stopped on the rule: an unread row is taken at the bar
                assert least == max(last, bar)
                fewer += 1
                floored += bar > last
    assert widened >= 30 and fewer >= widened and floored >= widened // 4, (widened, fewer, floored)
