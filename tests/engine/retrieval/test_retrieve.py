"""Seed 002 §19 validation list and the bundle/diagnostics contract of MemoryEngine.retrieve."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from engine.clock import DeterministicClock
from engine.errors import TokenBudgetUndefined, ValidationError
from engine.memory_engine import MemoryEngine
from engine.records import Layer, Privacy
from engine.retrieval import (
    COMPONENTS,
    DropReason,
    PressureState,
    RetrievalRequest,
    ScoringWeights,
    SemanticMode,
)
from tests.engine.retrieval.conftest import (
    DAY,
    HashEmbedder,
    make_record,
    open_engine,
    write,
)

FACTS = [
    "User prefers TypeScript for frontend work. They dislike untyped code.",
    "User lives in San Francisco near the bay. They moved there in 2021.",
    "The deploy pipeline runs on GitHub Actions every night. It takes twenty minutes.",
    "User's cat is named Tom and likes tuna. Tom is seven years old.",
    "Team standup happens at nine every morning. It lasts fifteen minutes.",
    "User is allergic to peanuts. They carry an epipen.",
]


def _fill(engine: MemoryEngine) -> None:
    write(engine, [make_record(i, text, age_days=i + 1) for i, text in enumerate(FACTS)])


def test_deterministic_ordering_and_hash_across_identical_stores(tmp_path: Path) -> None:
    hashes = []
    for name in ("one", "two"):
        eng = open_engine(tmp_path / name, embedder=HashEmbedder())
        try:
            _fill(eng)
            request = RetrievalRequest(max_tokens=60, query="what does the user prefer",
                                       agent_id="a")
            first = eng.retrieve(request, inspect=True)
            again = eng.retrieve(request, inspect=True)
            assert first.retrieval_hash() == again.retrieval_hash()
            assert [r.id for r in first.records] == [r.id for r in again.records]
            hashes.append(first.retrieval_hash())
        finally:
            eng.close()
    assert hashes[0] == hashes[1]  # seed 002 QG2: same data and seed → same hash


def test_exceeding_the_budget_truncates(engine: MemoryEngine) -> None:
    _fill(engine)
    bundle = engine.retrieve(RetrievalRequest(max_tokens=20, query="user"), inspect=True)
    assert bundle.truncated
    assert bundle.total_tokens <= 20
    assert bundle.diagnostics.drop_counts()["budget"] >= 1
    roomy = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="user"), inspect=True)
    assert not roomy.truncated
    assert len(roomy.records) == len(FACTS)


def test_throttle_reduces_tokens_and_compresses(engine: MemoryEngine) -> None:
    _fill(engine)
    normal = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="user"), inspect=True)
    throttled = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="user",
                                                 pressure_state=PressureState.THROTTLE),
                                inspect=True)
    assert throttled.total_tokens < normal.total_tokens
    assert throttled.diagnostics.compression_applied
    assert throttled.strategy_applied == "balanced:throttle"
    assert all(". " not in r.content.rstrip(".") for r in throttled.records)  # first sentences
    stored = engine.get(throttled.records[0].id)
    assert stored.content in FACTS  # the store is unchanged


def test_exhausted_returns_the_minimum(engine: MemoryEngine) -> None:
    _fill(engine)
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="cat",
                                              pressure_state=PressureState.EXHAUSTED), inspect=True)
    assert len(bundle.records) == 1
    assert "Tom" in bundle.records[0].content
    assert bundle.truncated


def test_empty_candidate_set_returns_an_empty_bundle(engine: MemoryEngine) -> None:
    bundle = engine.retrieve(RetrievalRequest(max_tokens=100, query="anything"))
    assert bundle.records == ()
    assert bundle.total_tokens == 0
    assert not bundle.truncated
    assert bundle.diagnostics.candidate_count == 0
    assert bundle.to_json()["diagnostics"]["candidates"] == []


def test_all_expired_gives_an_empty_bundle_without_error(engine: MemoryEngine) -> None:
    write(engine, [make_record(i, text, age_days=2, expires_in_days=-1)
                   for i, text in enumerate(FACTS)])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=100, query="user"))
    assert bundle.records == ()
    assert bundle.diagnostics.filtered_count == len(FACTS)
    assert bundle.diagnostics.drop_counts()["ttl"] == len(FACTS)


def test_missing_budget_raises_token_budget_undefined(engine: MemoryEngine) -> None:
    _fill(engine)
    with pytest.raises(TokenBudgetUndefined) as info:
        engine.retrieve(RetrievalRequest(max_tokens=None, query="user"))
    assert info.value.code == "MEMORY_TOKEN_BUDGET_UNDEFINED"
    with pytest.raises(ValidationError, match="max_tokens"):
        RetrievalRequest(max_tokens=0)


def test_importance_boost_puts_a_flagged_record_on_top(engine: MemoryEngine) -> None:
    records = [make_record(i, text, importance=0.4) for i, text in enumerate(FACTS)]
    records[4] = make_record(4, FACTS[4], importance=0.4, tags=("important",))
    write(engine, records)
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000), inspect=True)
    assert bundle.records[0].id == "r004"
    assert bundle.diagnostics.semantic_mode is SemanticMode.NONE


def test_drop_reasons_for_filter_ttl_and_privacy(engine: MemoryEngine) -> None:
    write(engine, [
        make_record(0, "alpha fact about tea", agent="a"),
        make_record(1, "beta fact about tea", agent="b"),
        make_record(2, "gamma fact about tea", agent="a", expires_in_days=-0.5),
        make_record(3, "delta fact about tea", agent="a", privacy=Privacy.PUBLIC),
        make_record(4, "epsilon fact about tea", agent="a", layer=Layer.SPATIAL),
    ])
    request = RetrievalRequest(max_tokens=1000, query="tea", agent_id="a",
                               privacy=frozenset({Privacy.PRIVATE}),
                               layers=frozenset({Layer.SEMANTIC}))
    bundle = engine.retrieve(request, inspect=True)
    reasons = {c.id: c.drop_reason for c in bundle.diagnostics.candidates}
    assert reasons == {"r000": None, "r001": DropReason.FILTER, "r002": DropReason.TTL,
                       "r003": DropReason.PRIVACY, "r004": DropReason.FILTER}
    line = bundle.to_json()["diagnostics"]["candidates"][0]
    assert set(line) == {"id", "score", "components", "packed", "drop_reason", "tokens"}
    assert set(line["components"]) == {"importance", "recency", "semantic", "lexical", "layer",
                                       "access", "context", "speaker", "date"}
    assert bundle.diagnostics.filtered_count == 4


def test_inspection_has_no_side_effects_and_retrieval_counts_access(
        engine: MemoryEngine) -> None:
    _fill(engine)
    request = RetrievalRequest(max_tokens=15, query="cat Tom")
    seen = []
    engine.events.subscribe(lambda e: seen.append(e.kind))
    looked = engine.retrieve(request, inspect=True)
    assert engine.get(looked.records[0].id).access_count == 0
    assert "memory:retrieval" not in seen
    used = engine.retrieve(request)
    record = engine.get(used.records[0].id)
    assert record.access_count == 1
    assert record.last_accessed == engine.clock.now()
    assert "memory:retrieval" in seen
    assert engine.metrics()["aggregate"]["retrievals"] == 1


def test_semantic_falls_back_to_jaccard_without_a_model(tmp_path: Path) -> None:
    eng = open_engine(tmp_path / "nomodel")
    try:
        _fill(eng)
        bundle = eng.retrieve(RetrievalRequest(max_tokens=30, query="cat named Tom"),
                              inspect=True)
        assert bundle.diagnostics.semantic_mode is SemanticMode.JACCARD
        assert "Tom" in bundle.records[0].content
    finally:
        eng.close()


def test_rescore_reranks_without_the_store(engine: MemoryEngine) -> None:
    _fill(engine)
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="cat"), inspect=True)
    assert "Tom" in bundle.records[0].content
    engine.close()  # rescoring must not need the store
    by_age = engine.rescore(bundle, ScoringWeights.from_mapping({"recency": 1.0}))
    assert by_age.ids[0] == "r000"  # the newest record
    assert list(by_age.scores) == sorted(by_age.scores, reverse=True)
    same = engine.rescore(bundle, ScoringWeights.from_mapping(bundle.diagnostics.weights))
    assert same.ids[: len(bundle.records)] == tuple(r.id for r in bundle.records)


def test_partitioned_ranking_matches_the_full_sort(tmp_path: Path) -> None:
    eng = open_engine(tmp_path / "big", embedder=HashEmbedder())
    try:
        records = [make_record(i, f"note {i % 37} about topic {i % 11} and item {i}",
                               importance=(i % 10) / 10, age_days=(i % 50) + 1)
                   for i in range(600)]
        write(eng, records)
        request = RetrievalRequest(max_tokens=400, query="topic 3 item")
        full = eng.retrieve(request, inspect=True)
        eng.set_retrieval_config(dataclasses.replace(eng.retrieval_config, partition_min=8))
        sliced = eng.retrieve(request, inspect=True)
        assert [r.id for r in sliced.records] == [r.id for r in full.records]
        assert full.retrieval_hash() == sliced.retrieval_hash()
        np.testing.assert_allclose(full.diagnostics.scores, sliced.diagnostics.scores)
    finally:
        eng.close()


def test_context_component_lends_relevance_to_episodic_neighbours(engine: MemoryEngine) -> None:
    write(engine, [
        make_record(0, "Alice: what did you name the puppy?", layer=Layer.EPISODIC,
                    age_days=3.0),
        make_record(1, "Bob: we went with Biscuit in the end", layer=Layer.EPISODIC,
                    age_days=3.0 - 1e-6),
        make_record(2, "Bob: the weather was lovely", layer=Layer.EPISODIC, age_days=9.0),
    ])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=1000, query="puppy name"),
                             inspect=True)
    lines = {c.id: c for c in bundle.diagnostics.candidates}
    assert lines["r001"].components["context"] > 0.0
    assert lines["r002"].components["context"] == 0.0  # days apart: no shared context


def test_speaker_component_favours_the_named_speakers_turns(engine: MemoryEngine) -> None:
    write(engine, [
        make_record(0, "Caroline: I started a pottery class last week", layer=Layer.EPISODIC),
        make_record(1, "Melanie: Caroline told me about pottery", layer=Layer.EPISODIC,
                    age_days=5.0),
        make_record(2, "Caroline said the lake was cold", layer=Layer.EPISODIC, age_days=9.0),
    ])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=1000, query="What did Caroline start?"),
                             inspect=True)
    lines = {c.id: c.components["speaker"] for c in bundle.diagnostics.candidates}
    assert lines == {"r000": 1.0, "r001": 0.0, "r002": 0.0}
    assert bundle.records[0].id == "r000"


def test_date_component_favours_records_created_on_the_named_day(engine: MemoryEngine) -> None:
    # NOW is 2025-06-15 15:06 UTC: ages 10, 3 and 40 days are 5 June, 12 June and 6 May
    write(engine, [
        make_record(0, "Maria went to the shelter with her friends", age_days=10.0),
        make_record(1, "Maria went to the gym with her friends", age_days=3.0),
        make_record(2, "Maria went to the beach with her friends", age_days=40.0),
    ])

    def dates(query: str) -> tuple[dict[str, float], str]:
        bundle = engine.retrieve(RetrievalRequest(max_tokens=1000, query=query), inspect=True)
        lines = {c.id: c.components["date"] for c in bundle.diagnostics.candidates}
        return lines, bundle.records[0].id

    assert dates("Where did Maria go with her friends on 5 June, 2025?") == (
        {"r000": 1.0, "r001": 0.0, "r002": 0.0}, "r000")
    assert dates("Where did Maria go with her friends on May 6th 2025?") == (
        {"r000": 0.0, "r001": 0.0, "r002": 1.0}, "r002")
    assert dates("Where did Maria go with her friends in June 2025?")[0] == \
        {"r000": 1.0, "r001": 1.0, "r002": 0.0}
    assert set(dates("Where did Maria go with her friends?")[0].values()) == {0.0}
    # a day either side counts by default (time zones, notes written the day after)
    assert dates("Where did Maria go on 4 June 2025?")[0]["r000"] == 1.0
    engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config,
                                                    date_tolerance_ms=0.0))
    assert dates("Where did Maria go on 4 June 2025?")[0]["r000"] == 0.0


def test_a_query_without_a_date_ranks_as_without_the_date_weight(engine: MemoryEngine) -> None:
    _fill(engine)
    request = RetrievalRequest(max_tokens=10_000, query="where does the user live")
    with_date = engine.retrieve(request, inspect=True)
    weights = engine.retrieval_config.purpose_weights
    engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config, purpose_weights={
        p: dataclasses.replace(w, date=0.0) for p, w in weights.items()}))
    without = engine.retrieve(request, inspect=True)
    assert [c.id for c in with_date.diagnostics.candidates] == \
        [c.id for c in without.diagnostics.candidates]
    assert dict(with_date.diagnostics.scoring_breakdown)["date"] > 0.0
    assert dict(without.diagnostics.scoring_breakdown)["date"] == 0.0


def test_cached_view_data_follows_writes_touches_and_the_clock(engine: MemoryEngine) -> None:
    """What retrieval reuses per view state must not outlive the state it came from."""
    write(engine, [make_record(i, text, age_days=i + 1, expires_in_days=2.0 if i == 1 else None)
                   for i, text in enumerate(FACTS)])
    request = RetrievalRequest(max_tokens=10_000, query="cat Tom", agent_id="a")
    first = engine.retrieve(request)  # counts an access of every packed record
    assert first.diagnostics.candidate_count == len(FACTS)
    looked = engine.retrieve(request, inspect=True)
    # access counting changed only the access columns: the masks survive, the access
    # component is redone
    assert looked.diagnostics.eligible is first.diagnostics.eligible
    again = engine.retrieve(request, inspect=True)  # an unchanged view: reused
    assert again.diagnostics.eligible is looked.diagnostics.eligible
    access = {c.id: c.components["access"] for c in looked.diagnostics.candidates}
    assert set(access.values()) == {0.01}  # one access each, seen through the cache
    write(engine, [make_record(9, "Tom the cat sleeps on the red sofa", age_days=0.5)])
    grown = engine.retrieve(request, inspect=True)
    assert grown.diagnostics.eligible is not looked.diagnostics.eligible
    assert grown.diagnostics.candidate_count == len(FACTS) + 1
    assert "r009" in {r.id for r in grown.records}
    clock = engine.clock
    assert isinstance(clock, DeterministicClock)
    clock.advance(3 * DAY)  # r001 expires; the view itself did not change
    later = engine.retrieve(request, inspect=True)
    assert later.diagnostics.drop_counts()["ttl"] == 1
    assert {c.id: c for c in later.diagnostics.candidates}["r001"].drop_reason is DropReason.TTL
    recency = {c.id: c.components["recency"] for c in later.diagnostics.candidates}
    assert max(recency.values()) < max(c.components["recency"]
                                       for c in grown.diagnostics.candidates)


@pytest.mark.parametrize("sign", [1.0, -1.0])  # -1: records created after "now"
def test_decaying_components_match_the_direct_formulas(engine: MemoryEngine,
                                                        sign: float) -> None:
    from engine.decay import decayed_importance
    from engine.retrieval.scoring import recency

    write(engine, [make_record(i, text, age_days=sign * (i + 0.5))
                   for i, text in enumerate(FACTS)])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=10_000, query="user"), inspect=True)
    snapshot = engine.store.view.snapshot()
    n = snapshot.n
    memory = engine.config.memory
    expected_importance = decayed_importance(
        snapshot.importance[:n], snapshot.created_at[:n], snapshot.access_count[:n],
        engine.clock.now(), memory.importance_decay_half_life_days)
    expected_recency = recency(snapshot.recency_anchor[:n], engine.clock.now(),
                               float(memory.decay_half_life_ms))
    components = bundle.diagnostics.components
    np.testing.assert_allclose(components[:n, COMPONENTS.index("importance")],
                               expected_importance, rtol=1e-12)
    np.testing.assert_allclose(components[:n, COMPONENTS.index("recency")], expected_recency,
                               rtol=1e-12, atol=1e-300)


def test_context_comes_from_neighbours_of_the_same_layer(engine: MemoryEngine) -> None:
    write(engine, [
        make_record(0, "Maria ran a charity race for mental health", age_days=3.0),
        make_record(1, "She realised how much self-care matters", age_days=3.0 - 1e-6),
        make_record(2, "She realised the bus was late", layer=Layer.EPISODIC,
                    age_days=3.0 - 2e-6),
    ])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=1000, query="charity race"),
                             inspect=True)
    lines = {c.id: c.components["context"] for c in bundle.diagnostics.candidates}
    assert lines["r001"] > 0.0  # a semantic fact noted next to a relevant one
    assert lines["r002"] == 0.0  # another layer: not the same stream
    assert lines["r000"] == 0.0  # already relevant itself: nothing to lend


def test_semantic_centring_can_be_turned_off(engine: MemoryEngine) -> None:
    _fill(engine)
    request = RetrievalRequest(max_tokens=10_000, query="cat named Tom")
    centred = engine.retrieve(request, inspect=True).diagnostics
    engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config,
                                                    semantic_centering=0.0))
    plain = engine.retrieve(request, inspect=True).diagnostics
    snapshot = engine.store.view.snapshot()
    query = engine.embed_texts(["cat named Tom"])
    assert query is not None
    column = COMPONENTS.index("semantic")
    cosine = np.maximum(snapshot.vectors[: snapshot.n] @ query[0], 0.0)
    np.testing.assert_allclose(plain.components[:, column], cosine, rtol=1e-6)
    assert not np.allclose(centred.components[:, column], cosine)
    assert centred.ids[int(np.argmax(centred.scores))] == plain.ids[int(np.argmax(plain.scores))]
