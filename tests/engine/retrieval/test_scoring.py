"""Seed 004 tables and ranking example; weights by purpose/strategy/pressure; lexical index."""

from __future__ import annotations

import types

import numpy as np
import pytest

from engine.decay import access_boost, decay_factor
from engine.errors import ConfigInvalid
from engine.retrieval import (
    COMPONENTS,
    PressureState,
    Purpose,
    RetrievalConfig,
    ScoringWeights,
    Strategy,
    TextIndex,
    compress,
    stem,
    terms,
)
from engine.retrieval.scoring import (
    access_frequency,
    combine,
    lexsort_rank,
    linear_recency,
    recency,
)

DAY = 86_400_000.0


@pytest.mark.parametrize(("days", "expected"), [(0, 1.0), (30, 0.5), (60, 0.25), (90, 0.125)])
def test_seed004_decay_table(days: float, expected: float) -> None:
    assert round(float(decay_factor(days * DAY, 30.0)), 3) == expected


@pytest.mark.parametrize(("count", "expected"),
                         [(0, 1.0), (1, 1.1), (3, 1.2), (7, 1.3), (15, 1.4), (100, 1.666)])
def test_seed004_access_boost_table(count: int, expected: float) -> None:
    # the seed prints 1.67 for 100 accesses (2 dp); 1 + log2(101) × 0.1 = 1.6658
    assert round(float(access_boost(count)), 3) == expected


@pytest.mark.parametrize(("count", "expected"), [(0, 0.0), (10, 0.1), (50, 0.5), (100, 1.0),
                                                 (200, 1.0)])
def test_seed004_access_frequency_table(count: int, expected: float) -> None:
    assert float(access_frequency(count)) == expected


@pytest.mark.parametrize(("days", "expected"), [(0, 1.0), (30, 0.667), (60, 0.333), (90, 0.0)])
def test_seed004_linear_recency_table(days: float, expected: float) -> None:
    assert round(float(linear_recency(days)), 3) == expected


def test_seed004_full_ranking_example() -> None:
    # Query "user preferences", weights relevance 0.5, importance 0.3, recency 0.2, access 0.
    weights = ScoringWeights.from_mapping({"semantic": 0.5, "importance": 0.3, "recency": 0.2})
    memory_a = dict.fromkeys(COMPONENTS, 0.0) | {"semantic": 0.8, "importance": 0.7,
                                                 "recency": 0.78}
    memory_b = dict.fromkeys(COMPONENTS, 0.0) | {"semantic": 0.2, "importance": 0.9,
                                                 "recency": 0.95}
    matrix = np.asarray([[m[c] for c in COMPONENTS] for m in (memory_a, memory_b)])
    scores = combine(matrix, weights)
    assert round(float(scores[0]), 3) == 0.766
    assert round(float(scores[1]), 3) == 0.560
    assert list(lexsort_rank(scores, ["A", "B"], np.arange(2))) == [0, 1]


def test_recency_is_exp_of_minus_delta_over_half_life() -> None:
    # seed 002 §7: exp(-Δt/halfLife); a future anchor counts as now
    values = recency(np.asarray([1000.0, 0.0, 2000.0]), 1000.0, 1000.0)
    assert values[0] == 1.0
    assert round(float(values[1]), 6) == round(float(np.exp(-1.0)), 6)
    assert values[2] == 1.0


def test_ties_break_by_id_ascending() -> None:
    scores = np.asarray([0.5, 0.9, 0.5, 0.5])
    ids = ["c", "z", "a", "b"]
    assert list(lexsort_rank(scores, ids, np.arange(4))) == [1, 2, 3, 0]


def test_weights_per_purpose_strategy_and_pressure() -> None:
    config = RetrievalConfig()
    base = config.weights_for(Purpose.REASONING, Strategy.BALANCED, PressureState.NORMAL)
    assert round(base.total(), 9) == 1.0
    recency_first = config.weights_for(Purpose.REASONING, Strategy.RECENCY, PressureState.NORMAL)
    assert round(recency_first.recency, 9) == config.strategy_share
    semantic = config.weights_for(Purpose.REASONING, Strategy.SEMANTIC, PressureState.NORMAL)
    relevance = ("semantic", "lexical", "context", "speaker", "date")  # the strategy's group
    assert sum(getattr(semantic, c) for c in relevance) >= \
        max(config.strategy_share, sum(getattr(base, c) for c in relevance)) - 1e-9
    soft = config.weights_for(Purpose.REASONING, Strategy.BALANCED, PressureState.SOFT)
    assert soft.importance > base.importance
    dialog = config.layer_weights[Purpose.DIALOG]
    assert dialog[next(k for k in dialog if k.value == "semantic")] > \
        dialog[next(k for k in dialog if k.value == "episodic")]  # seed 002 §7


def test_bad_weights_are_rejected() -> None:
    with pytest.raises(ConfigInvalid, match=r"weights\.semantic"):
        ScoringWeights(semantic=-1.0)
    with pytest.raises(ConfigInvalid, match="unknown component"):
        ScoringWeights.from_mapping({"novelty": 1.0})
    with pytest.raises(ConfigInvalid, match="strategy_share"):
        RetrievalConfig(strategy_share=2.0)


def test_stemming_and_terms() -> None:
    assert stem("painted") == stem("painting") == stem("paints") == "paint"
    assert stem("running") == "run"
    assert stem("stories") == "story"
    assert terms("What did Caroline paint?") == ["caroline", "paint"]


def _snapshot(contents: list[str], tags: list[tuple[str, ...]] | None = None) -> object:
    hashes = [f"h{i}-{c}" for i, c in enumerate(contents)]
    tags = tags or [() for _ in contents]
    return types.SimpleNamespace(n=len(contents), contents=contents, hashes=hashes, tags=tags,
                                 content_array=np.array(contents, dtype=object),
                                 hash_array=np.array(hashes, dtype=object),
                                 tag_array=np.fromiter(tags, dtype=object, count=len(tags)))


def test_bm25_incremental_sync_matches_a_rebuild() -> None:
    docs = ["the cat sat on the mat", "dogs chase cats", "a bird sings", "cats and cats"]
    grown = TextIndex()
    grown.sync(_snapshot(docs[:2]))  # type: ignore[arg-type]  # duck-typed snapshot
    grown.sync(_snapshot(docs))  # type: ignore[arg-type]  # appended rows only
    fresh = TextIndex()
    fresh.sync(_snapshot(docs))  # type: ignore[arg-type]
    mask = np.ones(4, dtype=bool)
    query = terms("cat")
    np.testing.assert_allclose(grown.bm25(query, mask), fresh.bm25(query, mask))
    assert grown.rebuilds == 0
    assert grown.incremental_rows == 4
    assert fresh.bm25(query, mask)[2] == 0.0
    assert fresh.bm25(query, mask)[3] > fresh.bm25(query, mask)[1]  # tf 2 beats tf 1
    edited = list(docs)
    edited[2] = "a cat sings"
    fresh.sync(_snapshot(edited))  # type: ignore[arg-type]  # one row rewritten in place
    assert fresh.bm25(query, mask)[2] > 0.0
    assert fresh.rebuilds == 0  # built by appending, then one row re-indexed


def test_postings_read_between_appends_and_edits_match_a_rebuild() -> None:
    rng = np.random.default_rng(4)
    words = ["cat", "dog", "tea", "lake", "jazz", "cats", "sings"]
    docs = [" ".join(rng.choice(words, size=5)) for _ in range(60)]
    grown = TextIndex()
    query = terms("cat dog jazz sings")
    for size, edit in ((20, None), (21, None), (21, 3), (35, None), (35, 21), (60, None)):
        current = list(docs[:size])
        if edit is not None:
            docs[edit] = current[edit] = f"lake cat cat {edit}"  # an existing row rewritten
        grown.sync(_snapshot(current))  # type: ignore[arg-type]
        fresh = TextIndex()
        fresh.sync(_snapshot(current))  # type: ignore[arg-type]
        mask = rng.random(size) < 0.8
        for word in query:  # read each time: the cached arrays are extended, not rebuilt
            ours, theirs = grown.term_postings(word, mask), fresh.term_postings(word, mask)
            assert dict(zip(ours[0].tolist(), ours[1].tolist(), strict=True)) == \
                dict(zip(theirs[0].tolist(), theirs[1].tolist(), strict=True)), (size, word)
        np.testing.assert_allclose(grown.bm25(query, mask), fresh.bm25(query, mask))
        np.testing.assert_array_equal(grown.jaccard(query, size), fresh.jaccard(query, size))
    assert grown.rebuilds == 0


def test_speaker_terms_and_match() -> None:
    from engine.retrieval.lexical import speaker_terms

    assert speaker_terms("Caroline: hi") == ("caroline",)
    assert speaker_terms("Dr. Ada Lovelace: notes") == ("dr", "ada", "lovelace")
    assert speaker_terms("the deploy: failed") == ()
    index = TextIndex()
    index.sync(_snapshot(["Caroline: hi", "Melanie: hi Caroline", "Caroline rests"]))  # type: ignore[arg-type]
    assert index.speaker_match(terms("did Caroline say hi"), 3).tolist() == [1.0, 0.0, 0.0]


def test_jaccard_on_index_terms() -> None:
    index = TextIndex()
    index.sync(_snapshot(["user prefers typescript", "user likes typescript"]))  # type: ignore[arg-type]
    values = index.jaccard(terms("user prefers typescript"), 2)
    assert values[0] == 1.0
    assert round(float(values[1]), 3) == 0.5  # seed 004 Jaccard example


def test_compression_keeps_first_sentence_and_tags_within_ratio() -> None:
    text = ("The deploy failed on Friday because the database migration locked the users "
            "table. We rolled back at 18:00. Nobody was paged.")
    short = compress(text, ("ops",), 0.55)
    assert short.startswith("The deploy failed on Friday")
    assert "Nobody was paged" not in short
    from engine.text import estimate_tokens

    assert estimate_tokens(short) <= np.ceil(0.55 * estimate_tokens(text))
    assert compress("Short.", (), 0.55) == "Short."


def test_centring_measures_cosine_from_part_of_the_mean() -> None:
    from engine.retrieval.scoring import Centring, mean_rows

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((300, 384)).astype(np.float32) + 0.4  # a shared direction
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[7] + 0.1 * rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    rows = rng.random(300) < 0.6
    got = Centring.of(vectors, rows, 0.5).cosine(vectors @ query, query)
    chosen = np.flatnonzero(rows)
    assert 0.94 * len(chosen) <= mean_rows(len(chosen)) < len(chosen)
    m = 0.5 * vectors[chosen[:mean_rows(len(chosen))]].astype(np.float64).mean(axis=0)
    centred, q = vectors - m, query - m
    expected = centred @ q / (np.linalg.norm(centred, axis=1) * np.linalg.norm(q))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    plain = vectors @ query
    assert np.std(got) > np.std(plain)  # the shared direction no longer compresses them
    assert int(np.argmax(got)) == int(np.argmax(plain)) == 7


def test_context_lift_lends_only_what_a_record_lacks() -> None:
    from engine.retrieval.scoring import context_lift

    relevance = np.array([0.9, 0.2, 0.95, 0.0])
    neighbours = np.array([[-1, 1], [0, 2], [1, -1], [-1, -1]], dtype=np.int32)
    np.testing.assert_allclose(context_lift(relevance, neighbours), [0.0, 0.75, 0.0, 0.0])


def test_a_time_order_extended_by_appended_rows_is_the_sorted_one() -> None:
    from engine.records import Layer, MemoryRecord, NewMemory
    from engine.retrieval.scoring import TimeOrder, neighbour_matrix
    from engine.store.view import ColumnarView

    rng = np.random.default_rng(3)
    view = ColumnarView(4)

    def batch(start: int, count: int) -> list[MemoryRecord]:
        # few distinct times, so many ties; three agents, two layers
        return [MemoryRecord.create(NewMemory(
            f"note {i}", agent_id=f"a{int(rng.integers(3))}",
            layer=(Layer.EPISODIC, Layer.SEMANTIC)[int(rng.integers(2))],
            created_at=1e12 + 60_000.0 * int(rng.integers(12))), now_ms=2e12,
            record_id=f"r{i:04d}") for i in range(start, start + count)]

    view.upsert(batch(0, 300))
    view.remove(["r0007", "r0100"])  # dead rows are left out of both
    order = TimeOrder.of(view.snapshot())
    for start, count in ((300, 1), (301, 17), (318, 5)):
        view.upsert(batch(start, count))
        snapshot = view.snapshot()
        order = order.extended(snapshot)
        fresh = TimeOrder.of(snapshot)
        assert order.n == fresh.n == snapshot.n
        np.testing.assert_array_equal(order.rows, fresh.rows)
        np.testing.assert_array_equal(order.times, fresh.times)
        np.testing.assert_array_equal(order.groups, fresh.groups)
        np.testing.assert_array_equal(neighbour_matrix(snapshot, 2, 90_000.0, order),
                                      neighbour_matrix(snapshot, 2, 90_000.0))
    assert order.extended(view.snapshot()).rows is order.rows  # nothing appended
