"""The pipeline with the real model (all-MiniLM-L6-v2): paraphrases and trust tiers."""

from __future__ import annotations

import pytest

from engine.embedding import SentenceTransformerEmbedder
from engine.ingest import Action, Reason
from engine.records import NewMemory, TrustTier
from tests.engine.ingest.conftest import EngineFactory

pytestmark = [pytest.mark.slow, pytest.mark.model]


@pytest.fixture(scope="module")
def model() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder()
    embedder.start_loading()
    assert embedder.wait_ready(300), embedder.status().reason
    return embedder


@pytest.mark.parametrize(("stored", "paraphrase", "auto_reason"), [
    # cosine 0.85: above the human threshold, in the auto tier's gray zone
    ("The team deploys to production on Fridays", "The team ships to production every Friday",
     Reason.GRAY_ZONE),
    # cosine 0.94 with little word overlap: merges from a person, reviewed from an importer
    ("Alice is allergic to peanuts", "Alice has a peanut allergy", Reason.LOW_OVERLAP),
])
def test_paraphrase_merges_at_human_tier_not_at_auto(
        make_engine: EngineFactory, model: SentenceTransformerEmbedder, stored: str,
        paraphrase: str, auto_reason: Reason) -> None:
    outcomes = {}
    for tier in (TrustTier.HUMAN, TrustTier.AUTO):
        engine = make_engine(embedder=model, name=f"store-{tier.value}")
        assert engine.ingest(NewMemory(stored)).action is Action.INSERTED
        outcomes[tier] = engine.ingest(NewMemory(paraphrase, source_tier=tier))
    assert outcomes[TrustTier.HUMAN].action is Action.MERGED
    assert (outcomes[TrustTier.AUTO].action, outcomes[TrustTier.AUTO].reason) == (
        Action.DEFERRED, auto_reason)
    assert outcomes[TrustTier.AUTO].semantic


def test_contradiction_with_the_real_model(make_engine: EngineFactory,
                                           model: SentenceTransformerEmbedder) -> None:
    engine = make_engine(embedder=model)
    engine.ingest(NewMemory("The weekly standup is at 3pm"))
    result = engine.ingest(NewMemory("The weekly standup is at 5pm"))
    assert result.similarity is not None and result.similarity > 0.9
    assert (result.action, result.reason) == (Action.DEFERRED, Reason.POSSIBLE_CONTRADICTION)


def test_distinct_dialogue_turns_are_not_review_items(make_engine: EngineFactory,
                                                      model: SentenceTransformerEmbedder) -> None:
    # Two turns of one speaker: cosine ~0.73 (the agent tier's gray zone) on shared speaker and
    # tone, but hardly a word in common -- distinct, so stored and linked, not queued.
    engine = make_engine(embedder=model)
    first = engine.ingest(NewMemory(
        "Nate: I'm always here for you! You've got so much talent, just keep going for it!",
        source_tier=TrustTier.AGENT))
    result = engine.ingest(NewMemory("Nate: You too, take care!", source_tier=TrustTier.AGENT))
    assert result.similarity is not None and 0.70 <= result.similarity < 0.85
    assert (result.action, result.reason) == (Action.INSERTED, Reason.NOVEL)
    assert result.record is not None
    assert [link.id for link in result.record.related] == [first.record_id]
    assert engine.review_queue() == []


def test_consolidation_merges_what_the_jaccard_path_stored_apart(
        make_engine: EngineFactory, model: SentenceTransformerEmbedder) -> None:
    # stored while the model was loading: token Jaccard (0.11) calls the paraphrase new; once
    # the model is ready the pass merges it by its real cosine, and sends a contradicting pair
    # stored side by side to review
    loading = make_engine(embedder=None, name="shared")
    kept = loading.ingest(NewMemory("Alice is allergic to peanuts", importance=0.9))
    other = loading.ingest(NewMemory("Alice has a peanut allergy", importance=0.4))
    assert (kept.action, other.action) == (Action.INSERTED, Action.INSERTED)
    loading.add(NewMemory("The weekly standup is at 3pm", importance=0.6))
    loading.add(NewMemory("The weekly standup is at 5pm", importance=0.5))
    loading.close()
    ready = make_engine(embedder=model, name="shared")
    report = ready.consolidate()
    outcome = {(s.action, s.reason, s.semantic): (s.kept.content, s.other.content)
               for s in report.steps}
    assert outcome == {
        (Action.MERGED, Reason.NEAR_DUPLICATE, True): (
            "Alice is allergic to peanuts", "Alice has a peanut allergy"),
        (Action.DEFERRED, Reason.POSSIBLE_CONTRADICTION, True): (
            "The weekly standup is at 3pm", "The weekly standup is at 5pm")}
    assert ready.count() == 3
