"""Message salience selection for conversation import (seed 000 §1).

The algorithm lives once, in :mod:`engine.llm.salience`; this adapter gives the importer a list of
selected positions and scores. Without an LLM there are no mood scores, so mood deltas default to
0 and emotion keywords and position carry the score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.clock import RNG, DeterministicRNG
from engine.llm.salience import (
    Message,
    SalienceConfig,
    emotion_keyword_score,
    position_boost,
    select_salient_messages,
)

__all__ = ["SalienceConfig", "SalientMessage", "emotion_keyword_score", "position_boost",
           "select_salient"]


@dataclass(frozen=True, slots=True)
class SalientMessage:
    """A selected message: its position in the conversation and its score."""

    index: int
    score: float


def select_salient(contents: Sequence[str], *, mood_deltas: Sequence[float] | None = None,
                   config: SalienceConfig | None = None,
                   rng: RNG | None = None) -> list[SalientMessage]:
    """Select the salient messages of a conversation (seed 000 §1).

    A thin adapter over :func:`engine.llm.salience.select_salient_messages`, the one
    implementation. Ties are broken by ``rng``; the default is a fixed seed, so importing the
    same conversation twice selects the same messages.

    Returns:
        The selected messages in conversation order, with their scores.
    """
    messages = [Message(str(index), content) for index, content in enumerate(contents)]
    result = select_salient_messages(messages, mood_deltas, config,
                                     rng if rng is not None else DeterministicRNG(0))
    scores = dict(result.scores)
    return [SalientMessage(int(message_id), scores[message_id])
            for message_id in result.selected_ids]
