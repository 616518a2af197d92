"""Message salience selection, seed 000 §1 (a minimal, faithful version for conversation import).

``score = weightDelta·|moodDelta| + weightEmotion·emotionKeywordScore(content) + positionBoost``;
sort by score (stable), keep the top K, add one message of context on each side, prune the
lowest-scored while over 90 % of the token budget (keeping at least ``min_messages``), and
return the selection in conversation order. Without an LLM there are no mood scores, so mood
deltas default to 0 and emotion keywords and position carry the score. The LLM helper's
``engine.llm`` version is the same algorithm; the integrator keeps one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.text import estimate_tokens

__all__ = ["SalienceConfig", "SalientMessage", "emotion_keyword_score", "position_boost",
           "select_salient"]

# seed 000 §1 getEmotionKeywordScore
_HIGH = ("love", "hate", "amazing", "terrible", "excited", "devastated")
_MEDIUM = ("happy", "sad", "worried", "pleased", "frustrated")
_LOW = ("okay", "fine", "good", "bad")


@dataclass(frozen=True, slots=True)
class SalienceConfig:
    """seed 000 §1 ``DEFAULT_SALIENCE_CONFIG``."""

    weight_delta: float = 0.5
    weight_emotion: float = 0.3
    top_k: int = 24
    min_messages: int = 5
    max_tokens: int = 3000


@dataclass(frozen=True, slots=True)
class SalientMessage:
    """A selected message: its position in the conversation and its score."""

    index: int
    score: float


def emotion_keyword_score(content: str) -> float:
    """seed 000 §1: 1.0 / 0.5 / 0.2 for high / medium / low emotion keywords (substring)."""
    normalized = content.lower()
    if any(k in normalized for k in _HIGH):
        return 1.0
    if any(k in normalized for k in _MEDIUM):
        return 0.5
    if any(k in normalized for k in _LOW):
        return 0.2
    return 0.0


def position_boost(index: int, total: int) -> float:
    """seed 000 §1: +0.2 for the first and last 20 % of the conversation."""
    position = index / total
    return 0.2 if position < 0.2 or position > 0.8 else 0.0


def select_salient(contents: Sequence[str], *, mood_deltas: Sequence[float] | None = None,
                   config: SalienceConfig | None = None) -> list[SalientMessage]:
    """Select the salient messages of a conversation (seed 000 §1 steps 1-6).

    Args:
        contents: Message texts in conversation order.
        mood_deltas: Mood-delta magnitudes per message (default 0: no mood model).
        config: Weights and limits.

    Returns:
        The selected messages in conversation order, with their scores.
    """
    config = config or SalienceConfig()
    total = len(contents)
    if total == 0:
        return []
    scores = []
    for index, content in enumerate(contents):
        delta = abs(mood_deltas[index]) if mood_deltas is not None and index < len(mood_deltas) \
            else 0.0
        scores.append(config.weight_delta * delta
                      + config.weight_emotion * emotion_keyword_score(content)
                      + position_boost(index, total))
    # Step 2-3: sort by score descending (stable, like Array.prototype.sort), keep top K
    ranked = sorted(range(total), key=lambda i: -scores[i])[: config.top_k]
    # Step 4: add one message of context before and after each selected message
    chosen: dict[int, None] = {}
    for index in ranked:
        for neighbour in (index - 1, index, index + 1):
            if 0 <= neighbour < total:
                chosen.setdefault(neighbour, None)
    selected = list(chosen)
    # Step 5: prune the lowest-scored while over 90 % of the budget
    cap = config.max_tokens * 0.9

    def tokens() -> int:
        return sum(estimate_tokens(contents[i]) for i in selected)

    while tokens() > cap and len(selected) > config.min_messages:
        lowest = min(range(len(selected)), key=lambda j: scores[selected[j]])
        selected.pop(lowest)
    # Step 6: original order
    selected.sort()
    return [SalientMessage(i, scores[i]) for i in selected]
