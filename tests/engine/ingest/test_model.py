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


@pytest.mark.parametrize(("stored", "paraphrase"), [
    # cosine 0.94, Jaccard 0.57 (STS-B train, score 5.0)
    ("A plane is taking off.", "An air plane is taking off."),
    # cosine 0.945: one speaker repeating a thank-you (LoCoMo)
    ("Maria: Thanks, John. I definitely will!",
     "Maria: Thanks, John! I definitely will. Speak to you soon!"),
])
def test_paraphrase_merges_at_human_tier_not_at_auto(
        make_engine: EngineFactory, model: SentenceTransformerEmbedder, stored: str,
        paraphrase: str) -> None:
    # merge points: human 0.90, auto 0.95; below them down to 0.50, the gray zone
    outcomes = {}
    for tier in (TrustTier.HUMAN, TrustTier.AUTO):
        engine = make_engine(embedder=model, name=f"store-{tier.value}")
        assert engine.ingest(NewMemory(stored)).action is Action.INSERTED
        outcomes[tier] = engine.ingest(NewMemory(paraphrase, source_tier=tier))
    assert outcomes[TrustTier.HUMAN].action is Action.MERGED
    assert (outcomes[TrustTier.AUTO].action, outcomes[TrustTier.AUTO].reason) == (
        Action.DEFERRED, Reason.GRAY_ZONE)
    assert outcomes[TrustTier.AUTO].semantic


def test_a_paraphrase_without_shared_words_is_stored_as_new(
        make_engine: EngineFactory, model: SentenceTransformerEmbedder) -> None:
    # cosine 0.94 but one word in eight in common (Jaccard 0.11 < min_jaccard 0.27): the loss
    # the lexical-support rule accepts (docs/ingest.md, "Quality on unseen data") -- the
    # memory is kept, linked to the record it resembles, not merged or queued
    engine = make_engine(embedder=model)
    first = engine.ingest(NewMemory("Alice is allergic to peanuts"))
    result = engine.ingest(NewMemory("Alice has a peanut allergy"))
    assert result.similarity is not None and 0.9 < result.similarity < 0.95
    assert (result.action, result.reason) == (Action.INSERTED, Reason.NOVEL)
    assert result.record is not None
    assert [link.id for link in result.record.related] == [first.record_id]


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
    assert result.similarity is not None and 0.50 <= result.similarity < 0.85
    assert (result.action, result.reason) == (Action.INSERTED, Reason.NOVEL)
    assert result.record is not None
    assert [link.id for link in result.record.related] == [first.record_id]
    assert engine.review_queue() == []


def test_consolidation_merges_what_the_jaccard_path_stored_apart(
        make_engine: EngineFactory, model: SentenceTransformerEmbedder) -> None:
    # stored side by side while the model was loading (token Jaccard 0.57 is below the
    # Jaccard path's 0.60); once the model is ready the pass merges the paraphrase by its real
    # cosine (0.94), and sends a contradicting pair stored side by side to review
    loading = make_engine(embedder=None, name="shared")
    loading.add(NewMemory("A plane is taking off.", importance=0.9))
    loading.add(NewMemory("An air plane is taking off.", importance=0.4))
    loading.add(NewMemory("The weekly standup is at 3pm", importance=0.6))
    loading.add(NewMemory("The weekly standup is at 5pm", importance=0.5))
    loading.close()
    ready = make_engine(embedder=model, name="shared")
    report = ready.consolidate()
    outcome = {(s.action, s.reason, s.semantic): (s.kept.content, s.other.content)
               for s in report.steps}
    assert outcome == {
        (Action.MERGED, Reason.NEAR_DUPLICATE, True): (
            "A plane is taking off.", "An air plane is taking off."),
        (Action.DEFERRED, Reason.POSSIBLE_CONTRADICTION, True): (
            "The weekly standup is at 3pm", "The weekly standup is at 5pm")}
    assert ready.count() == 3
