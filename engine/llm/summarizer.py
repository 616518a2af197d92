"""Summaries for compaction through the same gateway (seed 002 §8 phases 3-4, §13).

Prompt assembly lists the events (the records to compact) and asks for a thematic synthesis
plus key facts; the LLM answers in plain text. When the LLM is unavailable — no provider, open
breaker, spent budget, throttled, failing — the local heuristic (first sentence of each record,
de-duplicated, up to a character budget) is used and an ``llm:fallback`` event says why
(seed 002 §8 step 4: "fallback local heuristics if LLM unavailable").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import LLMError
from engine.events import EventBus
from engine.llm.gateway import EVENT_FALLBACK, LLMGateway
from engine.llm.providers import ChatMessage, ChatRequest
from engine.text import normalize

__all__ = ["Summarizer", "SummaryResult", "heuristic_summary"]

_SYSTEM = ("You compact an agent's episodic memories into one semantic memory. Write a short "
           "thematic synthesis (2-4 sentences) followed by the key facts as '- ' bullet lines. "
           "Keep names, dates and numbers; keep <REDACT:...> placeholders exactly; plain text "
           "only.")
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary and where it came from (``llm`` or ``heuristic``, with the reason)."""

    text: str
    source: str
    fallback_reason: str | None = None
    cost_usd: float = 0.0
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"text": self.text, "source": self.source,
                "fallback_reason": self.fallback_reason, "cost_usd": self.cost_usd,
                "detail": self.detail}


def heuristic_summary(texts: Sequence[str], max_chars: int = 600) -> str:
    """First sentence of each text, de-duplicated by normalized form, joined up to
    ``max_chars`` (always at least the first sentence)."""
    seen: set[str] = set()
    parts: list[str] = []
    length = 0
    for text in texts:
        stripped = " ".join(text.split())
        if not stripped:
            continue
        match = _FIRST_SENTENCE.match(stripped)
        sentence = match.group(1) if match else stripped
        key = normalize(sentence)
        if key in seen:
            continue
        if parts and length + len(sentence) + 1 > max_chars:
            break
        seen.add(key)
        parts.append(sentence)
        length += len(sentence) + 1
    return " ".join(parts)[: max(max_chars, len(parts[0]) if parts else 0)]


@dataclass
class Summarizer:
    """Summarizes groups of memories, through the gateway or the heuristic."""

    gateway: LLMGateway | None
    events: EventBus | None = None
    max_chars: int = 600
    max_output_tokens: int = 400

    def summarize(self, texts: Sequence[str], *, agent_id: str | None = None,
                  model: str | None = None) -> SummaryResult:
        """One summary of ``texts`` (the records being compacted), oldest first."""
        if self.gateway is None or not self.gateway.configured:
            return self._fallback(texts, agent_id, "no_provider", "no LLM provider configured")
        events = "\n".join(f"{i + 1}. {t.strip()}" for i, t in enumerate(texts))
        request = ChatRequest((ChatMessage("user", f"Memories to compact:\n{events}"),),
                              system=_SYSTEM, max_tokens=self.max_output_tokens)
        try:
            response = self.gateway.complete(request, purpose="summarize", model=model)
        except LLMError as exc:
            reason = {"LLM_CIRCUIT_OPEN": "circuit_open", "LLM_BUDGET_EXCEEDED":
                      "budget_exceeded", "LLM_RATE_LIMITED": "rate_limited",
                      "LLM_NOT_CONFIGURED": "no_provider"}.get(exc.code, "provider_error")
            return self._fallback(texts, agent_id, reason, str(exc))
        text = response.text.strip()
        if not text:
            return self._fallback(texts, agent_id, "empty_answer", "the model returned nothing")
        return SummaryResult(text, "llm", None, response.cost_usd)

    def _fallback(self, texts: Sequence[str], agent_id: str | None, reason: str,
                  detail: str) -> SummaryResult:
        if self.events is not None:
            self.events.emit(EVENT_FALLBACK, decision_reason=reason, agent_id=agent_id,
                             source="llm:summarizer",
                             payload={"component": "summarizer", "detail": detail,
                                      "records": len(texts)}, force=True)
        return SummaryResult(heuristic_summary(texts, self.max_chars), "heuristic", reason,
                             detail=detail)
