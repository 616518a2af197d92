"""Summaries for compaction through the same gateway (seed 002 §8 phases 3-4, §13).

Prompt assembly lists the events (the records to compact) and asks for a thematic synthesis
plus key facts; the LLM answers in plain text. When the LLM is unavailable — no provider, open
breaker, spent budget, throttled, failing — the local heuristic (first sentence of each record,
de-duplicated, up to a character budget) is used and an ``llm:fallback`` event says why
(seed 002 §8 step 4: "fallback local heuristics if LLM unavailable").

Compaction (:mod:`engine.lifecycle.compaction`) takes a summarizer through its own protocol
(``name`` + ``summarize(records, prompt) -> str``, raising to fall back), and runs its own
heuristic fallback with a ``memory:summarization:fallback`` event.
:class:`CompactionSummarizer` adapts :class:`Summarizer` to that protocol: the lifecycle's
assembled prompt goes through the gateway, and when the gateway says no (no provider, open
breaker, spent budget, throttled, failing, empty answer) the adapter emits ``llm:fallback``
with the reason and raises, so the lifecycle falls back to its heuristic (issue 23).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import LLMError
from engine.events import EventBus
from engine.llm.errors import InvalidModelOutput, ProviderNotConfigured
from engine.llm.gateway import EVENT_FALLBACK, LLMGateway
from engine.llm.providers import ChatMessage, ChatRequest
from engine.records import MemoryRecord
from engine.text import normalize

__all__ = ["CompactionSummarizer", "Summarizer", "SummaryResult", "heuristic_summary"]

_SYSTEM = ("You compact an agent's episodic memories into one semantic memory. Write a short "
           "thematic synthesis (2-4 sentences) followed by the key facts as '- ' bullet lines. "
           "Keep names, dates and numbers; keep <REDACT:...> placeholders exactly; plain text "
           "only.")
# The lifecycle's prompt (seed 002 §8 phase 3) carries the task; the system part only fixes the
# form of the answer.
_COMPACTION_SYSTEM = ("You compact an agent's episodic memories into one semantic memory. "
                      "Answer with the summary only, in plain text. Keep names, dates and "
                      "numbers; keep <REDACT:...> placeholders exactly.")
_REASONS = {"LLM_CIRCUIT_OPEN": "circuit_open", "LLM_BUDGET_EXCEEDED": "budget_exceeded",
            "LLM_RATE_LIMITED": "rate_limited", "LLM_NOT_CONFIGURED": "no_provider",
            "LLM_INVALID_OUTPUT": "empty_answer"}
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
        events = "\n".join(f"{i + 1}. {t.strip()}" for i, t in enumerate(texts))
        request = ChatRequest((ChatMessage("user", f"Memories to compact:\n{events}"),),
                              system=_SYSTEM, max_tokens=self.max_output_tokens)
        try:
            text, cost = self._ask(request, model)
        except LLMError as exc:
            reason = _REASONS.get(exc.code, "provider_error")
            return self._fallback(texts, agent_id, reason, str(exc))
        return SummaryResult(text, "llm", None, cost)

    def summarize_prompt(self, prompt: str, *, agent_id: str | None = None,
                         records: int = 0, model: str | None = None) -> str:
        """The summary the model writes for an assembled compaction ``prompt``.

        Unlike :meth:`summarize`, this makes no heuristic summary: the caller has its own
        fallback. The ``llm:fallback`` event (with the reason) is emitted before raising.

        Raises:
            LLMError: no provider, open breaker, spent budget, throttled, provider failure
                (the gateway's error), or :class:`InvalidModelOutput` for an empty answer.
        """
        request = ChatRequest((ChatMessage("user", prompt),), system=_COMPACTION_SYSTEM,
                              max_tokens=self.max_output_tokens)
        try:
            return self._ask(request, model)[0]
        except LLMError as exc:
            self._announce(agent_id, _REASONS.get(exc.code, "provider_error"), str(exc),
                           records)
            raise

    def _ask(self, request: ChatRequest, model: str | None) -> tuple[str, float]:
        """(text, cost) of one call through the gateway; an empty answer is an error."""
        if self.gateway is None or not self.gateway.configured:
            raise ProviderNotConfigured("no LLM provider configured")
        response = self.gateway.complete(request, purpose="summarize", model=model)
        text = response.text.strip()
        if not text:
            raise InvalidModelOutput("the model returned nothing")
        return text, response.cost_usd

    def _announce(self, agent_id: str | None, reason: str, detail: str, records: int) -> None:
        if self.events is not None:
            self.events.emit(EVENT_FALLBACK, decision_reason=reason, agent_id=agent_id,
                             source="llm:summarizer",
                             payload={"component": "summarizer", "detail": detail,
                                      "records": records}, force=True)

    def _fallback(self, texts: Sequence[str], agent_id: str | None, reason: str,
                  detail: str) -> SummaryResult:
        self._announce(agent_id, reason, detail, len(texts))
        return SummaryResult(heuristic_summary(texts, self.max_chars), "heuristic", reason,
                             detail=detail)


@dataclass
class CompactionSummarizer:
    """:class:`Summarizer` as the compaction summarizer (``engine.lifecycle.Summarizer``).

    Args:
        summarizer: Calls the configured provider through the gateway.
        model: Model override for the compaction calls (default: the provider's model).
    """

    summarizer: Summarizer
    model: str | None = None

    @property
    def name(self) -> str:
        """``llm:<provider>``: recorded on the task and the summary record."""
        gateway = self.summarizer.gateway
        provider = gateway.provider_name if gateway is not None else ""
        return f"llm:{provider}" if provider else "llm"

    def summarize(self, records: Sequence[MemoryRecord], prompt: str) -> str:
        """The model's summary of ``records`` from the lifecycle's ``prompt``.

        Raises:
            LLMError: the provider could not be used; compaction then falls back to its
                heuristic summarizer.
        """
        agent_id = records[0].agent_id if records else None
        return self.summarizer.summarize_prompt(prompt, agent_id=agent_id,
                                                records=len(records), model=self.model)
