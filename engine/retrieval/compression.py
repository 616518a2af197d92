"""Pressure compression (seed 002 §9 step 5): first sentence + tags, capped by a token ratio."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from engine.text import estimate_tokens

__all__ = ["compress", "first_sentence"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
ELLIPSIS = "…"


def first_sentence(text: str) -> str:
    """The text up to the end of its first sentence (all of it if there is no boundary)."""
    parts = _SENTENCE_END.split(text.strip(), maxsplit=1)
    return parts[0] if parts else text


def compress(text: str, tags: Sequence[str], ratio: float) -> str:
    """Shorten ``text`` for a throttled context.

    The first sentence plus ``[tags: …]`` (seed 002 §9 step 5), cut with an ellipsis so that it
    costs at most ``ceil(ratio × tokens(text))`` tokens (seed 002 ``throttleCompressionRatio``).
    Never longer than the original.
    """
    original = estimate_tokens(text)
    cap = max(1, math.ceil(ratio * original))
    short = first_sentence(text)
    if tags:
        short = f"{short} [tags: {', '.join(tags)}]"
    if estimate_tokens(short) > cap:
        words = short.split()
        keep = max(1, min(len(words), cap * 4 // 5))
        short = " ".join(words[:keep])
        while len(short) > 1 and estimate_tokens(short + ELLIPSIS) > cap:
            short = short[: max(1, len(short) - max(1, len(short) // 10))].rstrip()
        short = short + ELLIPSIS
    if estimate_tokens(short) >= original:
        return text
    return short
