"""Conversation → validated memory candidates (seed 004 "Extractor", seed 000 §1/§5/§7/§8).

Pipeline: conversation → salience selection when long (seed 000 §1) → prompt (redacted by the
gateway) → LLM through :class:`~engine.llm.gateway.LLMGateway` → JSON repair (§7) → schema
validation → valid :class:`MemoryCandidate` s plus :class:`InvalidItem` s with reasons.

Schema ``v1``; only ``content`` is required (issue 23: small local models omit fields often,
and seed 000's own example memory is ``{"content": "test"}``)::

    {"schemaVersion": "v1",                        # missing: assumed "v1" (a repair)
     "memories": [{"content": str,                 # required, 1..32000 chars after trim
                   "category": "fact|preference|skill|episode|context",   # default fact
                   "importance": 0..1,             # default: left to the ingest pipeline
                   "confidence": 0..1,             # default 0.5 (seed 000 §5)
                   "emotionalContext": str|null,   # optional
                   "tags": [str],                  # optional
                   "sourceMessageIds": [str],      # optional: ids of the turns it came from
                   "rationale": str|null}]}        # optional

A missing (or null) ``category``, ``importance`` or ``confidence`` takes its default and is
reported as a :class:`FieldRepair`, as is a missing ``schemaVersion``; the answer and the item
are kept. A value that is present but wrong (a category outside the list, a confidence of 1.5,
another ``schemaVersion``) still rejects its item (or the answer), naming the field. The other
optional fields mean "none" when absent, which is not a guess, so they are not reported.

Never half a memory: a stream cut before its end is retried by the gateway, and when the JSON
itself was cut (repair had to close an unterminated item) the last item is reported invalid
(``truncated``) instead of being returned. Candidates with the same content hash are combined:
confidence through :func:`~engine.llm.confidence.merge_confidence`, importance = max.

Fallback (DESIGN; issue 5): with no provider, an open breaker, a spent budget, a throttle that
would wait too long or a provider failing after its retries, the local heuristic extracts
first-person statements instead, and an ``llm:fallback`` event says why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.clock import RNG, SystemRNG
from engine.errors import InputFormatError, LLMError
from engine.events import EventBus
from engine.llm.confidence import DEFAULT_CONFIDENCE, merge_confidence
from engine.llm.gateway import EVENT_FALLBACK, LLMGateway
from engine.llm.providers import ChatMessage, ChatRequest
from engine.llm.repair import repair_json_detailed
from engine.llm.salience import (
    Message,
    SalienceConfig,
    emotion_keyword_score,
    select_salient_messages,
)
from engine.records import MAX_CONTENT_CHARS, Category, Layer, NewMemory, TrustTier
from engine.text import content_hash, estimate_tokens

__all__ = [
    "EVENT_EXTRACTION",
    "SCHEMA_VERSION",
    "Conversation",
    "ConversationTurn",
    "ExtractionResult",
    "Extractor",
    "FieldRepair",
    "InvalidItem",
    "MemoryCandidate",
    "build_extraction_request",
    "heuristic_extract",
    "load_conversation",
    "parse_conversation",
    "validate_extraction",
]

SCHEMA_VERSION = "v1"
DEFAULT_CATEGORY = Category.FACT
EVENT_EXTRACTION = "llm:extraction"

_SYSTEM_PROMPT = """You extract long-term memories about the user from a conversation.
Answer with ONE JSON object and nothing else, exactly in this form:
{"schemaVersion": "v1", "memories": [{"content": "...", "category": "fact|preference|skill|episode|context", "importance": 0.0-1.0, "confidence": 0.0-1.0, "emotionalContext": "... or null", "tags": ["..."], "sourceMessageIds": ["..."]}]}
Rules: one self-contained statement per memory, written in the third person ("User prefers tea");
only information worth remembering across conversations; no greetings or small talk;
importance = how useful it is later; confidence = how sure the conversation makes it.
Placeholders like <REDACT:sha256-...> stand for hidden values: keep them as they are.
If nothing is worth remembering, answer {"schemaVersion": "v1", "memories": []}."""  # noqa: E501


# -- conversations --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn: ``role`` is user/assistant/system (or a speaker name for transcripts)."""

    id: str
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation to extract memories from."""

    turns: tuple[ConversationTurn, ...]
    agent_id: str = "default"
    conversation_id: str = ""


def _turn(item: object, index: int, source: str) -> ConversationTurn:
    if not isinstance(item, Mapping):
        raise InputFormatError(source, 0, f"messages[{index}]", "each message must be an object")
    text = item.get("content", item.get("text"))
    if not isinstance(text, str):
        raise InputFormatError(source, 0, f"messages[{index}].content", "must be a string")
    role = item.get("role", item.get("speaker", "user"))
    ident = item.get("id", item.get("dia_id", f"m{index + 1}"))
    return ConversationTurn(str(ident), str(role), text)


def parse_conversation(data: object, source: str = "<conversation>") -> Conversation:
    """Accept ``[{role, content, id?}]``, ``{"messages": [...], "agent_id"?, "id"?}`` or a
    LoCoMo-style sample (``{"conversation": {"session_1": [{speaker, dia_id, text}], ...}}``).

    Raises:
        InputFormatError: naming the source and the offending field.
    """
    agent, conv_id = "default", ""
    if isinstance(data, Mapping) and isinstance(data.get("conversation"), Mapping):
        sessions = data["conversation"]
        items: list[object] = []
        keys = sorted((k for k in sessions if re.fullmatch(r"session_\d+", str(k))),
                      key=lambda k: int(str(k).split("_")[1]))
        for key in keys:
            if isinstance(sessions[key], list):
                items.extend(sessions[key])
        conv_id = str(data.get("sample_id", ""))
    elif isinstance(data, Mapping):
        raw = data.get("messages")
        if not isinstance(raw, list):
            raise InputFormatError(source, 0, "messages", "expected a list of messages")
        items = list(raw)
        agent = str(data.get("agent_id", data.get("agentId", "default")) or "default")
        conv_id = str(data.get("id", ""))
    elif isinstance(data, list):
        items = list(data)
    else:
        raise InputFormatError(source, 0, "conversation",
                               "expected a list of messages or an object with 'messages'")
    turns = tuple(_turn(item, i, source) for i, item in enumerate(items))
    return Conversation(turns, agent, conv_id)


def load_conversation(path: str | Path) -> Conversation:
    """Read a conversation JSON file (see :func:`parse_conversation`).

    Raises:
        InputFormatError: the file is missing, not JSON, or not a conversation.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFormatError(str(file), 0, "file", f"cannot read: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFormatError(str(file), exc.lineno, "json", exc.msg) from exc
    return parse_conversation(data, str(file))


# -- candidates -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MemoryCandidate:
    """One validated memory proposed by the extractor (not yet stored)."""

    content: str
    category: Category
    importance: float | None
    confidence: float
    emotional_context: str | None = None
    tags: tuple[str, ...] = ()
    source_message_ids: tuple[str, ...] = ()
    rationale: str | None = None
    content_hash: str = ""

    def to_json(self) -> dict[str, Any]:
        """Schema ``v1`` form of the item (plus its content hash)."""
        return {
            "content": self.content,
            "category": self.category.value,
            "importance": self.importance,
            "confidence": self.confidence,
            "emotionalContext": self.emotional_context,
            "tags": list(self.tags),
            "sourceMessageIds": list(self.source_message_ids),
            "rationale": self.rationale,
            "contentHash": self.content_hash,
        }

    def to_new_memory(self, *, agent_id: str, source: str,
                      tier: TrustTier = TrustTier.AUTO,
                      layer: Layer = Layer.SEMANTIC) -> NewMemory:
        """The :class:`~engine.records.NewMemory` the ingest pipeline takes."""
        metadata: dict[str, Any] = {}
        if self.emotional_context:
            metadata["emotional_context"] = self.emotional_context
        if self.source_message_ids:
            metadata["source_message_ids"] = list(self.source_message_ids)
        return NewMemory(content=self.content, agent_id=agent_id, layer=layer,
                         importance=self.importance, confidence=self.confidence,
                         category=self.category, tags=self.tags, source=source,
                         source_tier=tier, metadata=metadata)


@dataclass(frozen=True, slots=True)
class InvalidItem:
    """An item (or the whole answer, ``index`` None) that failed validation, and why."""

    index: int | None
    reason: str
    field: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"index": self.index, "reason": self.reason, "field": self.field,
                "detail": self.detail}


@dataclass(frozen=True, slots=True)
class FieldRepair:
    """A field the model left out (or null) that took its default; the item was kept.

    Attributes:
        index: The memory's index in ``memories`` (None: the answer itself).
        field: The schema field (``schemaVersion``, ``category``, ``importance``,
            ``confidence``).
        value: The default used (None for importance: the ingest pipeline computes it).
        reason: ``missing`` (absent) or ``null``.
    """

    index: int | None
    field: str
    value: str | float | None
    reason: str = "missing"

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"index": self.index, "field": self.field, "value": self.value,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What one extraction produced.

    Attributes:
        candidates: Valid, de-duplicated memory candidates.
        invalid: Rejected items with reasons.
        source: ``llm`` or ``heuristic``.
        fallback_reason: Why the heuristic was used (``no_provider``, ``circuit_open``,
            ``budget_exceeded``, ``rate_limited``, ``provider_error``), else None.
        repairs: JSON repairs applied to the model's answer.
        field_repairs: Missing fields that took their defaults (answer and items kept).
        selected_message_ids: Turns sent to the model (after salience selection).
        provider, model: Who answered ("" for the heuristic).
        cost_usd: Charged to the budget.
        attempts: Provider attempts used.
    """

    candidates: tuple[MemoryCandidate, ...]
    invalid: tuple[InvalidItem, ...] = ()
    source: str = "llm"
    fallback_reason: str | None = None
    repairs: tuple[str, ...] = ()
    selected_message_ids: tuple[str, ...] = ()
    provider: str = ""
    model: str = ""
    cost_usd: float = 0.0
    attempts: int = 0
    schema_version: str = SCHEMA_VERSION
    detail: str = ""
    field_repairs: tuple[FieldRepair, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Wire form (``extract --json``)."""
        return {
            "schemaVersion": self.schema_version,
            "source": self.source,
            "fallback_reason": self.fallback_reason,
            "detail": self.detail,
            "provider": self.provider,
            "model": self.model,
            "attempts": self.attempts,
            "cost_usd": self.cost_usd,
            "repairs": list(self.repairs),
            "field_repairs": [r.to_json() for r in self.field_repairs],
            "selected_message_ids": list(self.selected_message_ids),
            "memories": [c.to_json() for c in self.candidates],
            "invalid": [i.to_json() for i in self.invalid],
        }


def _unit(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and 0.0 <= float(value) <= 1.0)


def _strings(value: object, field_name: str, index: int) -> tuple[str, ...] | InvalidItem:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        return InvalidItem(index, "invalid_field", field_name, "must be a list of strings")
    return tuple(str(v).strip() for v in value if str(v).strip())


def _validate_item(item: object, index: int,
                   repairs: list[FieldRepair]) -> MemoryCandidate | InvalidItem:
    """One memory: a candidate (defaults noted in ``repairs``) or why it is rejected."""
    if not isinstance(item, Mapping):
        return InvalidItem(index, "not_an_object", None, type(item).__name__)
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        return InvalidItem(index, "missing_field" if content is None else "invalid_field",
                           "content", "must be a non-empty string")
    if len(content.strip()) > MAX_CONTENT_CHARS:
        return InvalidItem(index, "invalid_field", "content",
                           f"longer than {MAX_CONTENT_CHARS} characters")
    found: list[FieldRepair] = []

    def absent(name: str, default: str | float | None) -> bool:
        # seed 000 §5 treats a missing and a null value alike (``value ?? default``).
        if item.get(name) is not None:
            return False
        found.append(FieldRepair(index, name, default,
                                 "null" if name in item else "missing"))
        return True

    parsed_category = DEFAULT_CATEGORY
    if not absent("category", DEFAULT_CATEGORY.value):
        try:
            parsed_category = Category(str(item["category"]).strip().lower())
        except ValueError:
            return InvalidItem(index, "invalid_field", "category",
                               f"must be one of {', '.join(c.value for c in Category)}")
    # No importance: the ingest pipeline computes it (surprise × category weight, DESIGN 5).
    importance: float | None = None
    confidence = DEFAULT_CONFIDENCE
    for name in ("importance", "confidence"):
        if absent(name, None if name == "importance" else DEFAULT_CONFIDENCE):
            continue
        value = item[name]
        if not _unit(value):
            return InvalidItem(index, "invalid_field", name, "must be a number in 0..1")
        if name == "importance":
            importance = float(value)
        else:
            confidence = float(value)
    emotional = item.get("emotionalContext")
    if emotional is not None and not isinstance(emotional, str):
        return InvalidItem(index, "invalid_field", "emotionalContext", "must be a string or null")
    tags = _strings(item.get("tags"), "tags", index)
    if isinstance(tags, InvalidItem):
        return tags
    sources = _strings(item.get("sourceMessageIds"), "sourceMessageIds", index)
    if isinstance(sources, InvalidItem):
        return sources
    rationale = item.get("rationale")
    text = content.strip()
    # Reported only for items that are kept: a rejected item's defaults were never used.
    repairs.extend(found)
    return MemoryCandidate(
        content=text,
        category=parsed_category,
        importance=importance,
        confidence=confidence,
        emotional_context=emotional.strip() or None if isinstance(emotional, str) else None,
        tags=tuple(t for t in tags if len(t) <= 64 and "," not in t),
        source_message_ids=sources,
        rationale=rationale if isinstance(rationale, str) else None,
        content_hash=content_hash(text),
    )


def _combine(candidates: Sequence[MemoryCandidate]) -> tuple[MemoryCandidate, ...]:
    by_hash: dict[str, MemoryCandidate] = {}
    for candidate in candidates:
        seen = by_hash.get(candidate.content_hash)
        if seen is None:
            by_hash[candidate.content_hash] = candidate
            continue
        # seed 000 §5/§9: confidences of one fact from several statements merge pairwise.
        by_hash[candidate.content_hash] = MemoryCandidate(
            content=seen.content,
            category=seen.category,
            importance=None if seen.importance is None and candidate.importance is None
            else max(seen.importance or 0.0, candidate.importance or 0.0),
            confidence=merge_confidence(seen.confidence, candidate.confidence),
            emotional_context=seen.emotional_context or candidate.emotional_context,
            tags=tuple(dict.fromkeys(seen.tags + candidate.tags)),
            source_message_ids=tuple(dict.fromkeys(seen.source_message_ids
                                                   + candidate.source_message_ids)),
            rationale=seen.rationale or candidate.rationale,
            content_hash=seen.content_hash,
        )
    return tuple(by_hash.values())


def validate_extraction(payload: object, *, truncated_item: bool = False
                        ) -> tuple[tuple[MemoryCandidate, ...], tuple[InvalidItem, ...],
                                   tuple[FieldRepair, ...]]:
    """Validate a parsed answer against schema ``v1`` (only ``content`` is required).

    Args:
        payload: The parsed JSON.
        truncated_item: The answer was cut inside its last memory: report that item as
            ``truncated`` instead of validating it.

    Returns:
        (valid candidates, combined by content hash; invalid items with reasons; the missing
        fields of kept items and answer that took their defaults).
    """
    if not isinstance(payload, Mapping):
        return (), (InvalidItem(None, "not_an_object", None, type(payload).__name__),), ()
    repairs: list[FieldRepair] = []
    version = payload.get("schemaVersion")
    if version is None:
        repairs.append(FieldRepair(None, "schemaVersion", SCHEMA_VERSION,
                                   "null" if "schemaVersion" in payload else "missing"))
    elif version != SCHEMA_VERSION:
        return (), (InvalidItem(None, "schema_version_mismatch", "schemaVersion",
                                f"expected {SCHEMA_VERSION!r}, got {version!r}"),), ()
    memories = payload.get("memories")
    if not isinstance(memories, list):
        return (), (InvalidItem(None, "missing_field" if memories is None else "invalid_field",
                                "memories", "must be a list"),), ()
    valid: list[MemoryCandidate] = []
    invalid: list[InvalidItem] = []
    for index, item in enumerate(memories):
        if truncated_item and index == len(memories) - 1:
            invalid.append(InvalidItem(index, "truncated", None,
                                       "the answer was cut off inside this memory"))
            continue
        checked = _validate_item(item, index, repairs)
        if isinstance(checked, InvalidItem):
            invalid.append(checked)
        else:
            valid.append(checked)
    return _combine(valid), tuple(invalid), tuple(repairs)


# -- prompt ---------------------------------------------------------------------------------
def build_extraction_request(turns: Sequence[ConversationTurn], max_tokens: int = 1500
                             ) -> ChatRequest:
    """The extraction prompt: the schema in the system prompt, the transcript as the message."""
    lines = [f"[{t.id}] {t.role}: {t.content}" for t in turns]
    transcript = "Conversation:\n" + "\n".join(lines)
    return ChatRequest((ChatMessage("user", transcript),), system=_SYSTEM_PROMPT,
                       max_tokens=max_tokens, temperature=0.0, json_mode=True)


# -- heuristic fallback ---------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FIRST_PERSON = re.compile(
    r"\b(i am|i'm|i'd|i'll|i would|i will|i was|i have|i've|i had|i like|i love|i hate|"
    r"i prefer|i enjoy|i work|"
    r"i live|i moved|i went|i started|i can|i know how|i don't like|i do not like|i want|"
    r"i need|i plan|i usually|i always|i never|my )", re.IGNORECASE)
_PREFERENCE = re.compile(r"\b(like|love|hate|prefer|enjoy|favou?rite|don't like|dislike)\b",
                         re.IGNORECASE)
_SKILL = re.compile(r"\b(can|know how|skilled|good at|fluent|learned|learning)\b", re.IGNORECASE)
_EPISODE = re.compile(r"\b(yesterday|last (week|month|year|night)|went|visited|met|moved|"
                      r"started|finished|was|had)\b", re.IGNORECASE)
_ASSISTANT_ROLES = frozenset({"assistant", "system", "tool", "model"})


def _literal(value: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that inserts ``value`` verbatim (names may hold backslashes)."""
    return lambda _match: value


def _third_person(sentence: str, subject: str = "User") -> str:
    """Rewrite a first-person sentence about ``subject`` ("I am" -> "User is")."""
    text = sentence.strip()
    owner = f"{subject}'s"
    replacements = ((r"\bI am\b", f"{subject} is"), (r"\bI'm\b", f"{subject} is"),
                    (r"\bI was\b", f"{subject} was"), (r"\bI've\b", f"{subject} has"),
                    (r"\bI have\b", f"{subject} has"), (r"\bMy\b", owner),
                    (r"\bmy\b", owner if subject != "User" else "user's"),
                    (r"\bI'd\b", f"{subject} would"), (r"\bI'll\b", f"{subject} will"),
                    (r"\bI\b", subject),
                    (r"\bme\b", "the user" if subject == "User" else subject))
    for pattern, repl in replacements:
        text = re.sub(pattern, _literal(repl), text)
    return text


def heuristic_extract(conversation: Conversation, *, confidence: float = 0.5,
                      limit: int = 50) -> tuple[MemoryCandidate, ...]:
    """Local extraction: first-person statements of non-assistant turns, one memory each.

    The subject is "User" for ``user``/``human`` turns and the speaker's name for transcripts
    whose roles are names (LoCoMo: "Caroline is swamped with the kids & work.").

    Category by keywords (preference / skill / episode, else fact); importance left to the
    ingest pipeline (surprise × category weight, DESIGN 5); a fixed, modest confidence.
    """
    found: list[MemoryCandidate] = []
    for turn in conversation.turns:
        if turn.role.lower() in _ASSISTANT_ROLES:
            continue
        for sentence in _SENTENCE.split(turn.content.strip()):
            if not _FIRST_PERSON.search(sentence) or len(sentence.split()) < 3:
                continue
            if sentence.rstrip().endswith("?"):
                continue
            if _PREFERENCE.search(sentence):
                category = Category.PREFERENCE
            elif _SKILL.search(sentence):
                category = Category.SKILL
            elif _EPISODE.search(sentence):
                category = Category.EPISODE
            else:
                category = Category.FACT
            emotion = emotion_keyword_score(sentence)
            subject = "User" if turn.role.lower() in ("user", "human") else turn.role.strip()
            text = _third_person(sentence, subject or "User")[:MAX_CONTENT_CHARS]
            found.append(MemoryCandidate(
                content=text, category=category, importance=None, confidence=confidence,
                emotional_context={1.0: "strong", 0.5: "moderate", 0.2: "mild"}.get(emotion),
                source_message_ids=(turn.id,), rationale="heuristic: first-person statement",
                content_hash=content_hash(text)))
            if len(found) >= limit:
                return _combine(found)
    return _combine(found)


# -- the extractor --------------------------------------------------------------------------
@dataclass
class Extractor:
    """Extracts memory candidates through the gateway, falling back to the heuristic.

    Args:
        gateway: The LLM gateway (None: always heuristic).
        events: Where ``llm:fallback`` and ``llm:extraction`` go.
        rng: Salience tie-breaking.
        salience: Selection config for long conversations (seed 000 §1).
        max_output_tokens: Output cap of the extraction call.
    """

    gateway: LLMGateway | None
    events: EventBus | None = None
    rng: RNG = field(default_factory=SystemRNG)
    salience: SalienceConfig = field(default_factory=SalienceConfig)
    max_output_tokens: int = 1500

    def _select(self, conversation: Conversation) -> tuple[ConversationTurn, ...]:
        turns = conversation.turns
        tokens = sum(estimate_tokens(t.content) for t in turns)
        if len(turns) <= self.salience.top_k and tokens <= self.salience.max_tokens * 0.9:
            return turns
        by_id = {t.id: t for t in turns}
        result = select_salient_messages([Message(t.id, t.content, t.role) for t in turns],
                                         config=self.salience, rng=self.rng)
        return tuple(by_id[i] for i in result.selected_ids)

    def _fallback(self, conversation: Conversation, reason: str, detail: str
                  ) -> ExtractionResult:
        if self.events is not None:
            self.events.emit(EVENT_FALLBACK, decision_reason=reason,
                             agent_id=conversation.agent_id, source="llm:extractor",
                             payload={"component": "extractor", "detail": detail,
                                      "turns": len(conversation.turns)}, force=True)
        candidates = heuristic_extract(conversation)
        return ExtractionResult(candidates, (), "heuristic", reason,
                                selected_message_ids=tuple(t.id for t in conversation.turns),
                                detail=detail)

    def extract(self, conversation: Conversation, *, model: str | None = None
                ) -> ExtractionResult:
        """Extract validated candidates from ``conversation``; nothing is stored here."""
        gateway = self.gateway
        if not conversation.turns:
            return ExtractionResult((), (), "llm" if gateway else "heuristic")
        if gateway is None or not gateway.configured:
            return self._fallback(conversation, "no_provider", "no LLM provider configured")
        turns = self._select(conversation)
        request = build_extraction_request(turns, self.max_output_tokens)
        try:
            response = gateway.complete(request, purpose="extract", expect_json=True,
                                        model=model)
        except LLMError as exc:
            reason = {"LLM_CIRCUIT_OPEN": "circuit_open", "LLM_BUDGET_EXCEEDED":
                      "budget_exceeded", "LLM_NOT_CONFIGURED": "no_provider",
                      "LLM_RATE_LIMITED": "rate_limited"}.get(exc.code, "provider_error")
            return self._fallback(conversation, reason, str(exc))
        # Repair the raw text: the assembler may already have closed a cut-off answer, and
        # only the raw text shows whether the cut fell inside a memory.
        raw = response.raw_text if response.raw_text is not None else response.text
        repaired = repair_json_detailed(raw)
        if repaired is None:
            candidates: tuple[MemoryCandidate, ...] = ()
            invalid: tuple[InvalidItem, ...] = (
                InvalidItem(None, "unrepairable_json", None, f"{len(raw)} characters"),)
            repairs: tuple[str, ...] = ()
            field_repairs: tuple[FieldRepair, ...] = ()
        else:
            # Cut inside the last memory: more than object > memories open, or a string.
            cut_inside_item = repaired.closed_string or len(repaired.unclosed) > 2
            candidates, invalid, field_repairs = validate_extraction(
                repaired.value, truncated_item=cut_inside_item)
            repairs = repaired.repairs
        result = ExtractionResult(candidates, invalid, "llm", None, repairs,
                                  tuple(t.id for t in turns), gateway.provider_name,
                                  response.model, response.cost_usd, response.attempts,
                                  field_repairs=field_repairs)
        if self.events is not None:
            self.events.emit(EVENT_EXTRACTION, agent_id=conversation.agent_id,
                             source="llm:extractor",
                             decision_reason="ok" if result.candidates or not result.invalid
                             else "rejected",
                             payload={"valid": len(result.candidates),
                                      "invalid": [i.reason for i in result.invalid],
                                      "repairs": list(result.repairs),
                                      "field_repairs": [r.to_json() for r in result.field_repairs],
                                      "turns_sent": len(turns)}, force=True)
        return result

