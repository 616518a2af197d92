"""Seed 000 §1 salience selection (RNG tie-break) and §11 latency percentiles."""

from __future__ import annotations

from engine.llm import DeterministicRNG, select_salient_messages
from engine.llm.latency import LatencySummary
from engine.llm.salience import Message, SalienceConfig, emotion_keyword_score, position_boost


def test_keyword_and_position_scores() -> None:
    assert emotion_keyword_score("I LOVE this") == 1.0
    assert emotion_keyword_score("rather sad") == 0.5
    assert emotion_keyword_score("goodbye") == 0.2  # substring match, as the seed specifies
    assert emotion_keyword_score("the weather") == 0.0
    assert [position_boost(i, 10) for i in range(10)] == [0.2, 0.2] + [0.0] * 7 + [0.2]


def _conversation(n: int) -> list[Message]:
    return [Message(f"m{i}", f"message number {i} with some ordinary words") for i in range(n)]


def test_small_conversation_is_kept_whole_in_order() -> None:
    messages = _conversation(6)
    result = select_salient_messages(messages, rng=DeterministicRNG(1))
    assert result.selected_ids == tuple(m.id for m in messages)
    assert result.pruned_count == 0


def test_top_k_with_context_and_order() -> None:
    messages = _conversation(40)
    messages[20] = Message("m20", "I was devastated by the news")
    deltas: list[float | None] = [0.0] * 40
    deltas[30] = 1.0
    result = select_salient_messages(messages, deltas, SalienceConfig(top_k=2),
                                     DeterministicRNG(3))
    assert result.selected_ids == ("m19", "m20", "m21", "m29", "m30", "m31")
    assert dict(result.scores)["m30"] == 0.5
    assert dict(result.scores)["m20"] == 0.3
    assert result.pruned_count == 34


def test_token_pruning_respects_min_messages() -> None:
    messages = [Message(f"m{i}", "word " * 200) for i in range(30)]
    result = select_salient_messages(messages, config=SalienceConfig(max_tokens=100),
                                     rng=DeterministicRNG(5))
    assert len(result.selected_ids) == 5
    assert result.estimated_tokens == 5 * 250


def test_ties_are_broken_by_the_rng_deterministically() -> None:
    messages = [Message(f"m{i}", "plain") for i in range(50)]
    config = SalienceConfig(top_k=1)
    a = select_salient_messages(messages, config=config, rng=DeterministicRNG(11))
    b = select_salient_messages(messages, config=config, rng=DeterministicRNG(11))
    others = {select_salient_messages(messages, config=config, rng=DeterministicRNG(s)).selected_ids
              for s in range(12, 30)}
    assert a.selected_ids == b.selected_ids
    assert len(others) > 1


def test_empty_conversation() -> None:
    assert select_salient_messages([], rng=DeterministicRNG(0)).selected_ids == ()


def test_percentiles_nearest_rank() -> None:
    summary = LatencySummary()
    for value in range(100, 0, -1):
        summary.record(float(value))
    assert summary.get_percentile(50) == 50
    assert summary.get_percentile(90) == 90
    assert summary.get_percentile(99) == 99
    assert summary.get_percentile(0) == 1
    result = summary.get_summary()
    assert (result.p95, result.min, result.max, result.count) == (95, 1, 100, 100)
    assert LatencySummary().get_percentile(50) == 0
    single = LatencySummary()
    single.record(7.5)
    assert single.get_summary().p99 == 7.5
