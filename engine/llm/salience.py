"""Message salience selection (seed 000 §1) with RNG tie-breaking (§10).

Each message scores ``weight_delta * mood_delta + weight_emotion * keyword_score +
position_boost``; the top-K are taken (equal scores ordered by the injected RNG), one message of
context is added on each side, the lowest-scored messages are pruned while the estimate exceeds
90 % of the token budget (never below ``min_messages``), and the result is returned in
conversation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.clock import RNG, SystemRNG
from engine.text import estimate_tokens

__all__ = [
    "EMOTION_KEYWORDS",
    "Message",
    "SalienceConfig",
    "ScoredMessage",
    "SelectionResult",
    "emotion_keyword_score",
    "position_boost",
    "select_salient_messages",
]

# seed 000 §1 getEmotionKeywordScore (substring match on the lower-cased text, as specified).
EMOTION_KEYWORDS: dict[str, tuple[str, ...]] = {
    "high": ("love", "hate", "amazing", "terrible", "excited", "devastated"),
    "medium": ("happy", "sad", "worried", "pleased", "frustrated"),
    "low": ("okay", "fine", "good", "bad"),
}


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message."""

    id: str
    content: str
    role: str = "user"


@dataclass(frozen=True, slots=True)
class SalienceConfig:
    """Seed 000 §1 ``DEFAULT_SALIENCE_CONFIG``."""

    weight_delta: float = 0.5
    weight_emotion: float = 0.3
    top_k: int = 24
    min_messages: int = 5
    max_tokens: int = 3000


@dataclass(frozen=True, slots=True)
class ScoredMessage:
    """A message with its salience score and position in the conversation."""

    message: Message
    score: float
    index: int


@dataclass(frozen=True, slots=True)
class SelectionResult:
    """Seed 000 §1 ``SelectionResult``."""

    selected_messages: tuple[Message, ...]
    selected_ids: tuple[str, ...]
    pruned_count: int
    estimated_tokens: int
    scores: tuple[tuple[str, float], ...]


def emotion_keyword_score(content: str) -> float:
    """1.0 / 0.5 / 0.2 for a high / medium / low emotion keyword anywhere in ``content``."""
    normalized = content.lower()
    if any(k in normalized for k in EMOTION_KEYWORDS["high"]):
        return 1.0
    if any(k in normalized for k in EMOTION_KEYWORDS["medium"]):
        return 0.5
    if any(k in normalized for k in EMOTION_KEYWORDS["low"]):
        return 0.2
    return 0.0


def position_boost(index: int, total: int) -> float:
    """0.2 for messages in the first or last 20 % of the conversation (seed 000 §1)."""
    position = index / total
    return 0.2 if position < 0.2 or position > 0.8 else 0.0


def _estimate(items: Sequence[ScoredMessage]) -> int:
    return sum(estimate_tokens(item.message.content) for item in items)


def select_salient_messages(
    messages: Sequence[Message],
    mood_deltas: Sequence[float | None] | None = None,
    config: SalienceConfig | None = None,
    rng: RNG | None = None,
    mood_scores: Sequence[float] | None = None,
) -> SelectionResult:
    """Seed 000 §1 ``selectSalientMessages``.

    Args:
        messages: The conversation in order.
        mood_deltas: Per-message mood delta magnitude (missing or None counts as 0).
        config: Weights and limits; defaults to the seed's.
        rng: Breaks ties between equal scores (seed 000 §10 ``SalienceSelector`` injection).
        mood_scores: Accepted for parity with the seed's signature; the seed's formula does not
            use them.

    Returns:
        The selected messages in conversation order, with scores and the token estimate.
    """
    del mood_scores  # seed 000 §1 takes them but its score formula never reads them
    cfg = config if config is not None else SalienceConfig()
    source: RNG = rng if rng is not None else SystemRNG()
    total = len(messages)
    if total == 0:
        return SelectionResult((), (), 0, 0, ())
    deltas = list(mood_deltas or [])
    scored: list[ScoredMessage] = []
    for index, message in enumerate(messages):
        delta = deltas[index] if index < len(deltas) and deltas[index] is not None else 0.0
        score = (cfg.weight_delta * float(delta or 0.0)
                 + cfg.weight_emotion * emotion_keyword_score(message.content)
                 + position_boost(index, total))
        scored.append(ScoredMessage(message, score, index))
    # Step 2: score descending; equal scores in an order drawn from the injected RNG.
    tie_keys = {item.index: source.next_float() for item in scored}
    rank = sorted(scored, key=lambda item: (-item.score, tie_keys[item.index]))
    position_in_rank = {item.index: pos for pos, item in enumerate(rank)}
    selected = rank[: cfg.top_k]
    # Step 4: one message of context before and after each selected message.
    chosen: dict[int, ScoredMessage] = {}
    for item in selected:
        for neighbour in (item.index - 1, item.index, item.index + 1):
            if 0 <= neighbour < total:
                chosen.setdefault(neighbour, scored[neighbour])
    with_context = list(chosen.values())
    # Step 5: prune the lowest-scored (latest in rank order on ties) while over 90 % of budget.
    estimated = _estimate(with_context)
    token_cap = cfg.max_tokens * 0.9
    while estimated > token_cap and len(with_context) > cfg.min_messages:
        lowest = max(range(len(with_context)),
                     key=lambda k: (-with_context[k].score,
                                    position_in_rank[with_context[k].index]))
        del with_context[lowest]
        estimated = _estimate(with_context)
    # Step 6: back to conversation order.
    with_context.sort(key=lambda item: item.index)
    return SelectionResult(
        tuple(item.message for item in with_context),
        tuple(item.message.id for item in with_context),
        total - len(with_context),
        estimated,
        tuple((item.message.id, item.score) for item in with_context),
    )
