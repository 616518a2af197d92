"""Words, not codes: how every view says times, numbers, decisions and record references.

The engine speaks in codes (``gray_zone``, ``merged_into``, ``memory:record:created``), epoch
milliseconds and full-precision floats, which is right for the wire and the ledger and wrong for
a person. This module is the one place that turns them into words, so the timeline, the
stepper, the review queue, the fate view and the import summary say the same thing the same
way (docs/gui.md, "Words, not codes"):

* **times** — local time, relative to now ("3 min ago", "yesterday 14:02"), with the exact
  local time and the UTC ISO form for the tool tip (:func:`relative_time`, :func:`exact_time`);
* **numbers** — rounded to what they mean: similarities and scores to 3 decimals (more only when
  3 would hide which side of a threshold a value is on, :func:`compare`), importance and
  confidence to 2, shares as percentages, never ``0.7000000000000001`` (:func:`number`);
* **codes** — every decision reason, action, stage, event kind, fate step and conflict kind the
  engine emits has a phrase (:data:`PHRASES`); an unknown code falls back to a humanized form,
  never raw snake_case (:func:`phrase`); a decision reads as a sentence naming the other record
  by its text (:func:`reason_sentence`);
* **fields** — an event's fields or a pipeline stage's data as labelled :class:`Field` rows
  (:func:`event_fields`, :func:`stage_fields`), the raw JSON kept for the "Raw" tab
  (:func:`raw_json`).

Records are named by their text, elided, with the id secondary (:func:`record_label`); a row
that names a record carries its id (:attr:`Field.record_id`) so views can open it. No Qt here:
these are plain functions the tests call with a fixed clock and time zone.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from engine import Event
from engine.errors import ValidationError
from engine.records import format_timestamp, parse_timestamp
from ui.shared.wording import count_of

__all__ = [
    "FINDINGS",
    "PHRASES",
    "Field",
    "compare",
    "conflict_phrase",
    "diff_value",
    "duration",
    "elide",
    "event_fields",
    "exact_time",
    "findings",
    "humanize",
    "label_for",
    "local_time",
    "number",
    "percent",
    "phrase",
    "quoted",
    "raw_json",
    "reason_sentence",
    "record_ids_in",
    "record_label",
    "relative_time",
    "sentence",
    "similarity_phrase",
    "stage_fields",
    "stage_title",
    "tag",
    "thresholds_phrase",
]

Texts = Mapping[str, str]
"""Record id → its text (as far as the view has fetched it; redacted if redaction is on)."""

# -- codes -------------------------------------------------------------------------------------

PHRASES: Mapping[str, str] = {
    # decision reasons (engine.ingest.kinds.Reason)
    "unique_hash": "stored as new: nothing like it was stored",
    "novel": "stored as new: similar records exist, none close enough to merge",
    "confidence_improved": "exact duplicate with a higher confidence: the stored record was "
                           "updated",
    "equal_confidence": "exact duplicate with the same confidence: not stored again",
    "lower_confidence": "exact duplicate with a lower confidence: not stored again",
    "near_duplicate": "near duplicate: merged",
    "gray_zone": "in the gray zone: held for review",
    "category_mismatch": "similar but of another category: held for review",
    "possible_contradiction": "held for review: may contradict the stored record",
    "low_overlap": "close in meaning but few words in common: held for review",
    "confidence_gap": "as close to another stored record: held for review",
    "not_novel": "not stored: too little new in it (low surprise)",
    "pending_review": "not stored: the same pair already waits for review",
    "review_approved": "approved in review: merged",
    "review_rejected": "rejected in review: kept as its own record",
    "invalid_input": "refused: invalid input",
    "failed": "failed",
    # actions (engine.ingest.kinds.Action)
    "inserted": "stored as new",
    "updated": "updated",
    "skipped": "not stored",
    "merged": "merged",
    "deferred": "held for review",
    "error": "error",
    # pipeline stages (engine.ingest.kinds.Stage)
    "ingest-start": "ingest started",
    "normalize+hash": "normalize and hash",
    "embed": "embed",
    "candidate-search": "candidate search",
    "decision": "decision",
    "merge/defer": "merge or defer",
    "persist": "persist",
    "events": "events",
    # event kinds (engine.ingest.kinds.EventKind and the engine's EVENT_* constants)
    "embed-request": "embedded",
    "candidate-match": "candidates found",
    "merge-applied": "merged",
    "merge-deferred": "held for review",
    "ingest-skipped": "not stored",
    "review-approved": "review approved",
    "review-rejected": "review rejected",
    "embedding-fallback": "embedding model unavailable: word overlap used",
    "memory:record:created": "record created",
    "memory:record:updated": "record updated",
    "memory:record:linked": "records linked",
    "memory:record:edited": "record edited",
    "memory:record:deleted": "record deleted",
    "memory:record:restored": "record restored",
    "memory:import:undone": "import undone",
    "memory:record:embedded": "record embedded",
    "memory:record:expired": "record expired",
    "memory:record:redacted": "record redacted in place",
    "memory:record:paused": "record paused (kept, not retrieved)",
    "memory:record:archived": "record archived (kept, hidden, not retrieved)",
    "memory:record:resumed": "record resumed (retrieved again)",
    "memory:retrieval": "retrieval",
    "memory:decay:applied": "decay applied",
    "memory:summarization:queued": "summarization queued",
    "memory:summarization:completed": "summarization completed",
    "memory:summarization:failed": "summarization failed",
    "memory:summarization:fallback": "summarized without an LLM (heuristic)",
    "memory:compaction": "compaction",
    "memory:lifecycle:run": "scheduled lifecycle run (expiry, compaction, retention caps)",
    "memory:episodic:rolled_off": "rolled off the episodic ring (the agent's oldest episode)",
    "memory:social:summary": "social summary written",
    "memory:procedural:pattern": "procedure pattern written",
    "llm:call": "LLM call",
    "llm:retry": "LLM call retried",
    "llm:breaker": "LLM circuit breaker changed",
    "llm:throttle": "LLM call throttled",
    "llm:budget-alert": "LLM budget alert",
    "llm:fallback": "LLM unavailable: fallback used",
    "llm:extraction": "LLM extraction",
    "llm:connection-test": "LLM connection test",
    # fate steps and statuses (engine.fate)
    "created": "created",
    "merged_into": "merged into another record",
    "absorbed": "absorbed an incoming memory",
    "skipped_duplicate": "not stored: a duplicate",
    "reviewed": "reviewed",
    "edited": "edited",
    "redacted": "redacted",
    "deleted": "deleted",
    "pruned": "pruned",
    "expired": "expired (its time to live ran out)",
    "retention": "removed by the retention cap",
    "compacted": "compacted into a summary",
    "restored": "restored",
    "alive": "alive",
    "unknown": "never seen by this store",
    # lifecycle selection and delete reasons (engine.lifecycle)
    "low_importance": "decayed importance below the floor",
    "bottom_decile": "in the least important tenth",
    "undo": "undone",
    "episodic-ring": "the episodic ring (its oldest episodes roll off)",
    "import undone": "taken back with its import",
    # embed path (the embed-request event's decision_reason)
    "embedding": "embedding model",
    "jaccard": "word overlap (Jaccard; model not ready)",
    # contradiction guard conflict kinds (engine.ingest.contradiction.CONFLICT_KINDS)
    "number": "numbers differ",
    "time": "times differ",
    "negation": "one says not",
    "antonym": "opposite words",
    "color": "colours differ",
    "name": "names differ",
    "mood": "question vs statement",
    # embedding model states (the embedding-fallback event's decision_reason)
    "idle": "model not loaded yet",
    "loading": "model still loading",
    "ready": "model ready",
    # retrieval drop reasons (engine.retrieval.types.DropReason)
    "budget": "over the token budget",
    "filter": "filtered out (agent or layer policy)",
    "ttl": "expired (time to live)",
    "privacy": "another privacy partition",
    "paused": "paused by the user (kept, not retrieved)",
    "archived": "archived by the user (kept, not retrieved)",
    "unscored": "not among the candidates (no candidate source proposed it)",
    # layers, LLM gateway
    "layer-cap": "over the layer's cap",
    "ok": "ok",
    "budget_exceeded": "over the LLM budget",
}
"""Every code the engine emits, as words (tests/ui/test_format.py checks none is missing)."""

TAGS: Mapping[str, str] = {
    "gray_zone": "gray zone", "possible_contradiction": "may contradict",
    "category_mismatch": "other category", "low_overlap": "few words in common",
    "confidence_gap": "two close records",
    "near_duplicate": "near duplicate", "pending_review": "already in review",
    "equal_confidence": "exact duplicate", "lower_confidence": "exact duplicate",
    "confidence_improved": "exact duplicate, updated", "not_novel": "not new enough",
    "unique_hash": "new", "novel": "new",
    "budget": "over budget", "filter": "filtered", "ttl": "expired",
    "privacy": "other privacy",
}
"""A few words for a reason where a row has room for little (the review queue, the retrieval
bars)."""


def tag(code: str | None) -> str:
    """A short tag for a reason code (its phrase when it has no tag)."""
    return TAGS.get(code or "") or phrase(code)


FINDINGS: Mapping[str, tuple[str, str]] = {
    "EMAIL": ("e-mail address", "e-mail addresses"), "UUID": ("UUID", "UUIDs"),
    "NUMSEQ16": ("16-digit number", "16-digit numbers"),
    "CARD": ("payment card number", "payment card numbers"),
    "SSN": ("social security number", "social security numbers"),
    "PHONE": ("phone number", "phone numbers"), "IBAN": ("IBAN", "IBANs"),
    "PRIVATE_KEY": ("private key", "private keys"), "AWS_KEY_ID": ("AWS key", "AWS keys"),
    "GCP_API_KEY": ("Google Cloud key", "Google Cloud keys"),
    "GITHUB_TOKEN": ("GitHub token", "GitHub tokens"),
    "SLACK_WEBHOOK": ("Slack webhook", "Slack webhooks"),
    "SLACK_TOKEN": ("Slack token", "Slack tokens"), "STRIPE_KEY": ("Stripe key", "Stripe keys"),
    "AI_API_KEY": ("AI API key", "AI API keys"), "JWT": ("web token (JWT)", "web tokens (JWT)"),
    "BEARER": ("authorization header", "authorization headers"),
    "ASSIGNMENT": ("password or key in code", "passwords or keys in code"),
    "PASSWORD": ("password or PIN", "passwords or PINs"),
    "HIGH_ENTROPY": ("random-looking secret", "random-looking secrets"),
    "CUSTOM": ("custom pattern", "custom patterns"),
}
"""What each kind of redaction finding is called (``engine.redaction``'s kinds): singular,
plural."""


def findings(kinds: Mapping[str, int]) -> str:
    """What a record holds, in words, most first: "2 e-mail addresses, 1 GitHub token".

    A kind without words (a custom pattern's own kind) is humanized."""
    parts = []
    for kind, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0])):
        one, many = FINDINGS.get(kind) or (humanize(kind.lower()),) * 2
        parts.append(count_of(count, one, many))
    return ", ".join(parts)


_KIND_REASONS = {"memory:retrieval": "{} retrieval strategy"}
"""Event kinds whose ``decision_reason`` is not a decision code (a retrieval's strategy)."""

_PREFIXED = {"retention:": "removed by the retention cap of the {} layer",
             "prune:": "pruned ({} mode)", "import:": "import of {}", "llm:": "LLM {}"}
_SEPARATORS = re.compile(r"[_\-:+/]+")
_BARE_CODE = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)+")


def humanize(code: str) -> str:
    """A code as words: separators become spaces (``partition_size`` → ``partition size``)."""
    return " ".join(_SEPARATORS.sub(" ", code).split())


def phrase(code: str | None) -> str:
    """The words for an engine code; an unknown code is humanized, never shown raw.

    Text with spaces is not a code (an error message): it is returned as it is.
    """
    if not code:
        return ""
    known = PHRASES.get(code)
    if known is not None:
        return known
    if " " in code.strip():
        return code
    for prefix, template in _PREFIXED.items():
        if code.startswith(prefix) and len(code) > len(prefix):
            return template.format(humanize(code[len(prefix):]))
    return humanize(code.removeprefix("memory:"))


STAGE_TITLES: Mapping[str, str] = {
    "ingest-start": "Start", "normalize+hash": "Normalize and hash", "embed": "Embed",
    "candidate-search": "Candidate search", "decision": "Decision",
    "merge/defer": "Merge or defer", "persist": "Persist", "events": "Events",
}
"""Pipeline stage names (``engine.ingest.kinds.Stage``) as titles."""


def stage_title(stage: str) -> str:
    """A pipeline stage's title ("Candidate search")."""
    return STAGE_TITLES.get(stage) or _capital(humanize(stage))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def sentence(text: str) -> str:
    """``text`` with a capital first letter (a phrase used as a sentence)."""
    return _capital(text)


# -- numbers -----------------------------------------------------------------------------------

_TWO_DECIMALS = ("importance", "confidence", "weight", "rate", "threshold",
                 "floor", "cross_category", "effective", "min_jaccard")
_THREE_DECIMALS = ("similarity", "surprise", "cosine", "max_jaccard", "novelty", "rarity",
                   "score", "decayed")


def number(value: float | int | None, *, decimals: int | None = None) -> str:
    """A number rounded to its meaning.

    Integers get thousands separators; a float gets ``decimals`` places when given, else 3
    below 10 and fewer above, trailing zeros dropped (``0.7000000000000001`` → ``0.7``).
    """
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if decimals is not None:
        return f"{value:,.{decimals}f}"
    magnitude = abs(value)
    places = 3 if magnitude < 10 else (2 if magnitude < 100 else (1 if magnitude < 1000 else 0))
    text = f"{value:,.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def percent(share: float) -> str:
    """A share of 1 as a percentage (``0.8412`` → ``84%``; one decimal below 10 %)."""
    value = share * 100.0
    return f"{value:.1f}%" if 0 < abs(value) < 10 else f"{value:.0f}%"


def duration(ms: float | None) -> str:
    """A duration in milliseconds as ``0.42 ms``, ``12 ms``, ``1.3 s`` or ``2 min 5 s``."""
    if ms is None:
        return "—"
    if ms < 0.01:
        return "under 0.01 ms"
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"
    seconds = ms / 1000.0
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def compare(value: float, limit: float, *, name: str = "threshold") -> str:
    """``value`` against ``limit`` with the comparison sign the numbers really have.

    Shows 3 decimals for the value and 2 for the limit, and more when that rounding would hide
    the side (0.8996 against 0.90 reads ``0.8996 < threshold 0.90``, not ``0.900 < 0.90``).
    """
    sign = "≥" if value >= limit else "<"
    places = 3
    while places < 6 and value != limit and (
            (round(value, places) >= limit) != (value >= limit)):
        places += 1
    limit_places = 2 if round(limit, 2) == limit else 3
    return f"{value:.{places}f} {sign} {name} {limit:.{limit_places}f}"


# -- times -------------------------------------------------------------------------------------

def _moment(ms: float, tz: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, UTC).astimezone(tz)


def local_time(ms: float | None, *, tz: tzinfo | None = None) -> str:
    """``2026-11-25 14:02:33`` in local time (``tz`` for tests; None: the machine's)."""
    if ms is None:
        return "—"
    return _moment(ms, tz).strftime("%Y-%m-%d %H:%M:%S")


def exact_time(ms: float | None, *, tz: tzinfo | None = None) -> str:
    """The tool tip of a time: exact local time with its zone, then the UTC ISO form."""
    if ms is None:
        return ""
    moment = _moment(ms, tz)
    millis = f"{moment.microsecond // 1000:03d}"
    local = moment.strftime(f"%a %d %b %Y, %H:%M:%S.{millis} %Z").rstrip()
    return f"{local}\n{format_timestamp(ms)} (UTC)"


def relative_time(ms: float | None, *, now_ms: float | None = None,
                  tz: tzinfo | None = None) -> str:
    """How long ago (or ahead) ``ms`` is, in local time.

    ``just now``, ``3 min ago`` (under an hour), ``today 14:02``, ``yesterday 14:02``,
    ``Mon 14:02`` (this week), ``12 Nov 14:02`` (this year), ``12 Nov 2025``; the future reads
    ``in 3 min``, ``tomorrow 09:00`` and so on.
    """
    if ms is None:
        return "—"
    now = time.time() * 1000.0 if now_ms is None else now_ms
    delta = (now - ms) / 1000.0
    if abs(delta) < 45:
        return "just now"
    if abs(delta) < 3600:
        minutes = max(1, round(abs(delta) / 60))
        return f"{minutes} min ago" if delta > 0 else f"in {minutes} min"
    moment, today = _moment(ms, tz), _moment(now, tz)
    days = (moment.date() - today.date()).days
    clock = moment.strftime("%H:%M")
    if days == 0:
        return f"today {clock}"
    if days == -1:
        return f"yesterday {clock}"
    if days == 1:
        return f"tomorrow {clock}"
    if -7 < days < 7:
        return f"{moment.strftime('%a')} {clock}"
    if moment.year == today.year:
        return f"{moment.day} {moment.strftime('%b')} {clock}"
    return f"{moment.day} {moment.strftime('%b %Y')}"


# -- records -----------------------------------------------------------------------------------

def elide(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (with …)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:  # keep whole words unless that throws away too much
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


def quoted(text: str, limit: int = 48) -> str:
    """``text`` elided and in quotes: how a sentence names a record (one style everywhere)."""
    return f"‘{elide(text, limit)}’"


def record_label(record_id: str, texts: Texts, *, limit: int = 60,
                 loading: Collection[str] = (), incoming: bool = False) -> tuple[str, str]:
    """A record named by its text (elided) with its id secondary, and the tool tip.

    Returns:
        (label, tooltip): ``'Alice likes green tea' · 3f2a9c1e`` and the full text with the
        full id. A record whose text is being read reads ``reading its text… · 3f2a9c1e``;
        one whose text is not known, ``a record no longer stored · 3f2a9c1e`` (``incoming``:
        the id of an incoming memory, which may never have been stored on its own).
    """
    short = record_id[:8]
    text = texts.get(record_id)
    if text is None and record_id in loading:
        return f"reading its text… · {short}", f"id {record_id}"
    if text is None and incoming:
        return (f"the incoming memory (not stored on its own) · {short}",
                f"An incoming memory that was merged, skipped or held for review.\n"
                f"id {record_id}")
    if text is None:
        return (f"a record no longer stored · {short}",
                f"No stored record has this id now (merged, deleted or not yet written).\n"
                f"id {record_id}")
    return f"{quoted(text, limit)} · {short}", f"{text}\n\nid {record_id}"


# -- sentences ---------------------------------------------------------------------------------

def conflict_phrase(conflict: Mapping[str, Any]) -> str:
    """One contradiction-guard conflict as words: ``9:30 vs 10:30``, ``long vs short``."""
    kind = str(conflict.get("kind", ""))
    existing = [str(v) for v in conflict.get("existing") or []]
    incoming = [str(v) for v in conflict.get("incoming") or []]
    if kind == "negation":
        return "one of the texts negates what the other says"
    stored = ", ".join(existing) or "—"
    new = ", ".join(incoming) or "—"
    return f"{stored} vs {new}"


def reason_sentence(reason: str | None, *, target: str | None = None,
                    conflicts: Sequence[Mapping[str, Any]] = (),
                    texts: Texts | None = None) -> str:
    """A decision reason as a sentence naming the other record by its text.

    ``possible_contradiction`` with target text "standup at 9:30" and a time conflict reads
    ``held for review: may contradict ‘standup at 9:30’ — 9:30 vs 10:30``.
    """
    if not reason:
        return ""
    other = ""
    if target is not None:
        text = (texts or {}).get(target)
        other = quoted(text, 50) if text is not None else "a record no longer stored"
    detail = "; ".join(conflict_phrase(c) for c in conflicts)
    sentence = phrase(reason)
    if other:
        sentence = {
            "near_duplicate": f"near duplicate: merged into {other}",
            "review_approved": f"approved in review: merged into {other}",
            "gray_zone": f"in the gray zone of {other}: held for review",
            "category_mismatch": f"similar to {other} but of another category: held for "
                                 "review",
            "possible_contradiction": f"held for review: may contradict {other}",
            "low_overlap": f"close in meaning to {other} but few words in common: held for "
                           "review",
            "confidence_gap": f"as close to another stored record as to {other}: held for "
                              "review",
            "confidence_improved": f"exact duplicate of {other} with a higher confidence: "
                                   "it was updated",
            "equal_confidence": f"exact duplicate of {other} with the same confidence: not "
                                "stored again",
            "lower_confidence": f"exact duplicate of {other} with a lower confidence: not "
                                "stored again",
            "pending_review": f"not stored: the pair with {other} already waits for review",
            "not_novel": f"not stored: too little new in it (nearest: {other})",
        }.get(reason, sentence)
    return f"{sentence} — {detail}" if detail else sentence


# -- fields ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Field:
    """One labelled row of an event's or a stage's fields.

    Attributes:
        label: What it is, in words ("Similarity").
        value: Its value as shown ("0.884 ≥ threshold 0.80").
        tooltip: More (the full text, the exact time, the raw code).
        record_id: The record the row names, if any (views open it on click).
        children: Rows under this one (a candidate list, the surprise components).
    """

    label: str
    value: str
    tooltip: str = ""
    record_id: str | None = None
    children: tuple[Field, ...] = ()


LABELS: Mapping[str, str] = {
    "incoming_id": "Incoming memory", "target_id": "Stored record", "record_id": "Record",
    "id": "Record", "result_id": "Resulting record", "review_id": "Review item",
    "memory_hash": "Content hash", "content_hash": "Content hash", "decision_reason": "Why",
    "reason": "Why", "kind": "What happened", "ts": "When", "agent_id": "Agent",
    "tier": "Trust tier", "source_tier": "Trust tier", "latency_ms": "Took",
    "threshold": "Merge threshold", "review_floor": "Gray zone from",
    "cross_category": "Threshold across categories", "surprise": "Surprise",
    "effective": "Threshold applied", "confirm_min_jaccard": "Words in common needed",
    "gray_min_jaccard": "Words in common for review", "hash_hit": "Exact duplicate",
    "min_jaccard": "Words in common to be a duplicate",
    "merge_margin": "Margin above the threshold",
    "contradiction_min_jaccard": "Words in common for a contradiction",
    "merged_from": "Merged from", "related": "Related records", "rejected": "Rejected pairs",
    "written": "Written", "staged": "Staged", "path": "Similarity by",
    "partition_size": "Records compared", "surprise_partition_size": "Records for surprise",
    "same_category_count": "Same category", "max_cosine": "Highest cosine",
    "max_jaccard": "Highest word overlap", "semantic_novelty": "Meaning novelty",
    "keyword_novelty": "Word novelty", "category_rarity": "Category rarity",
    "exact_duplicate": "Exact duplicate", "confidence_before": "Confidence before",
    "confidence_after": "Confidence after", "unique_sources": "Unique sources",
    "merge_weight": "Merge weight", "new_confidence": "New confidence",
    "found_by": "Found by", "via_alias": "Through an earlier merge", "dimension": "Dimensions",
    "precomputed": "Vector given", "normalized": "Normalized text", "events": "Events",
    "emitted": "Events emitted", "batched": "Batched", "next_stage": "Next stage",
    "content": "Text", "method": "Search method", "model": "Model", "action": "Outcome",
    "cost_usd": "Cost", "ts_ms": "When",
}
"""Field names as labels; any other name is humanized (``foo_bar`` → ``Foo bar``)."""

THRESHOLD_LABELS: Mapping[str, str] = {
    "threshold": "Merge threshold", "review_floor": "Gray zone from",
    "cross_category": "Merge across categories from", "surprise": "Surprise needed to store",
    "effective": "Threshold applied", "confirm_min_jaccard": "Words in common needed",
    "gray_min_jaccard": "Words in common for review",
    "min_jaccard": "Words in common to be a duplicate",
    "merge_margin": "Margin above the threshold",
    "contradiction_min_jaccard": "Words in common for a contradiction",
}
"""The names of a decision's thresholds (``Decision.thresholds``) as labels."""

_ID_KEYS = frozenset({"incoming_id", "target_id", "record_id", "id", "result_id",
                      "summaryRecordId"})
_ID_LISTS = frozenset({"merged_from", "related", "written", "staged", "rejected"})
_CODE_KEYS = frozenset({"action", "reason", "decision_reason", "kind", "stage", "path",
                        "tier", "source_tier", "layer", "privacy", "category", "status"})
_HASH_KEYS = frozenset({"memory_hash", "content_hash"})
_SKIP = frozenset({"event_id", "seq", "ts_iso", "thresholds", "conflicts", "vector"})


def label_for(key: str) -> str:
    """The label of field ``key``."""
    return LABELS.get(key) or _capital(humanize(key))


def record_ids_in(data: Mapping[str, Any]) -> list[str]:
    """Every record id a field tree names (to fetch their texts before showing it)."""
    found: list[str] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list | tuple):
            for v in value:
                if key in _ID_LISTS and isinstance(v, str):
                    found.append(v)
                else:
                    walk(v, key)
        elif key in _ID_KEYS and isinstance(value, str) and value:
            found.append(value)

    walk(data, "")
    return list(dict.fromkeys(found))


def _value(key: str, value: Any) -> str:
    """A scalar field value in words."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and key == "latency_ms":
        return duration(float(value))
    if isinstance(value, int | float) and key.endswith("_usd"):
        return f"${value:,.4f}".rstrip("0").rstrip(".") if value else "$0"
    if isinstance(value, int | float):
        places = 3 if any(part in key for part in _THREE_DECIMALS) else (
            2 if any(part in key for part in _TWO_DECIMALS) else None)
        return number(value, decimals=places if isinstance(value, float) else None)
    text = str(value)
    if key in _CODE_KEYS or _BARE_CODE.fullmatch(text):
        # a bare snake_case token is a code whatever the field (an LLM test's outcome, …)
        return phrase(text.lower() if text.isupper() else text)
    if key in _HASH_KEYS:
        return text[:12] + "…" if len(text) > 12 else text
    return text


class _Builder:
    """Turns a JSON-like mapping into :class:`Field` rows with the view's record texts."""

    def __init__(self, texts: Texts, show: Callable[[str], str],
                 loading: Collection[str] = ()) -> None:
        self.texts = texts
        self.show = show
        self.loading = loading

    def record(self, label: str, record_id: str, *, incoming: bool = False) -> Field:
        value, tip = record_label(record_id, self.texts, loading=self.loading,
                                  incoming=incoming)
        return Field(label, value, tip, record_id)

    def rows(self, data: Mapping[str, Any], skip: Iterable[str] = ()) -> list[Field]:
        skipped = _SKIP | set(skip)
        return [row for key, value in data.items() if key not in skipped
                for row in [self.row(str(key), value)] if row is not None]

    def row(self, key: str, value: Any) -> Field | None:
        label = label_for(key)
        if value is None:
            return None  # an absent optional field: nothing to say (the Raw tab shows it)
        if key in _ID_KEYS and isinstance(value, str) and value:
            return self.record(label, value, incoming=key == "incoming_id")
        if key == "review_id" and isinstance(value, str):
            return Field(label, f"queued for review · {value[:8]}", f"id {value}")
        if key in _ID_LISTS and isinstance(value, list | tuple):
            ids = [v if isinstance(v, str) else str(v.get("id", "")) for v in value
                   if isinstance(v, str | Mapping)]
            children = tuple(self.record(f"{i + 1}.", rid) for i, rid in enumerate(ids) if rid)
            return Field(label, "none" if not children else
                         count_of(len(children), "record"),
                         children=children)
        if key == "candidates" and isinstance(value, list):
            return self.candidates(value)
        if key == "conflicts" and isinstance(value, list):
            return self.conflicts(value)
        if key in ("content", "normalized", "text") and isinstance(value, str):
            shown = self.show(value)
            return Field(label, elide(shown, 200), shown)
        if key == "events" and isinstance(value, list):
            return Field(label, ", ".join(phrase(str(v)) for v in value) or "none",
                         "\n".join(str(v) for v in value))
        if isinstance(value, Mapping):
            children = tuple(self.rows(value))
            return Field(label, "" if children else "none", children=children)
        if isinstance(value, list | tuple):
            if all(isinstance(v, str | int | float) for v in value):
                return Field(label, ", ".join(_value(key, v) for v in value) or "none")
            children = tuple(Field(f"{i + 1}.", "", children=tuple(self.rows(v)))
                             if isinstance(v, Mapping) else Field(f"{i + 1}.", _value(key, v))
                             for i, v in enumerate(value))
            return Field(label, f"{len(children)}", children=children)
        tooltip = str(value) if key in _CODE_KEYS | _HASH_KEYS else ""
        return Field(label, _value(key, value), tooltip)

    def candidates(self, value: list[Any]) -> Field:
        children: list[Field] = []
        for c in value:
            if not isinstance(c, Mapping) or not isinstance(c.get("id"), str):
                continue
            text, tip = record_label(c["id"], self.texts, loading=self.loading)
            similarity = c.get("similarity")
            extra = [phrase(str(c[k])) if k == "category" else f"found by {c[k]}"
                     for k in ("category", "found_by") if c.get(k)]
            head = (f"similarity {number(float(similarity), decimals=3)}"
                    if isinstance(similarity, int | float) else f"{len(children) + 1}.")
            children.append(Field(head, text + (f" ({', '.join(extra)})" if extra else ""),
                                  tip, c["id"]))
        count = len(children)
        return Field("Candidates", "none" if not count else
                     count_of(count, "candidate"),
                     children=tuple(children))

    def conflicts(self, value: list[Any]) -> Field:
        children = tuple(Field(_capital(phrase(str(c.get("kind", "")))), conflict_phrase(c))
                         for c in value if isinstance(c, Mapping))
        count = len(children)
        return Field("Contradiction check", "none found" if not count else
                     "1 detail differs" if count == 1 else f"{count} details differ",
                     children=children)

    def thresholds(self, thresholds: Mapping[str, Any], tier: str | None) -> list[Field]:
        rows = []
        for key, value in thresholds.items():
            if not isinstance(value, int | float):
                continue
            label = THRESHOLD_LABELS.get(key) or label_for(key)
            shown = number(float(value), decimals=2)
            if key == "threshold" and tier:
                shown += f" ({phrase(tier)} tier)"
            rows.append(Field(label, shown, f"{key} = {value}"))
        return rows


def similarity_phrase(similarity: float | None, thresholds: Mapping[str, Any]) -> str:
    """A decision's similarity against the threshold it was held to (``0.884 < threshold
    0.90``), or alone when the decision had none; ``—`` when there is no similarity."""
    if similarity is None:
        return "—"
    limit = thresholds.get("effective", thresholds.get("threshold"))
    if isinstance(limit, int | float) and not isinstance(limit, bool):
        return compare(float(similarity), float(limit))
    return number(float(similarity), decimals=3)


def thresholds_phrase(thresholds: Mapping[str, Any]) -> str:
    """A decision's thresholds inline: ``merge threshold 0.80 · gray zone from 0.70 · …``."""
    return " · ".join(f"{(THRESHOLD_LABELS.get(k) or label_for(k)).lower()} "
                      f"{number(float(v), decimals=2)}" for k, v in thresholds.items()
                      if isinstance(v, int | float) and not isinstance(v, bool))


def _similarity_row(similarity: float | None, thresholds: Mapping[str, Any]) -> Field | None:
    if similarity is None:
        return None
    return Field("Similarity", similarity_phrase(similarity, thresholds), str(similarity))


def event_fields(event: Event, texts: Texts, *, show: Callable[[str], str] = str,
                 loading: Collection[str] = (), now_ms: float | None = None,
                 tz: tzinfo | None = None) -> list[Field]:
    """An event's fields as labelled rows (what happened, when, why, to which record, …).

    Args:
        event: The event.
        texts: Record texts by id (records the event names; missing ones read "no longer
            stored").
        show: Applied to every memory text shown (the redactor when redaction is on).
        loading: Ids whose texts are being read (they say so instead of "no longer stored").
        now_ms: "Now" for relative times (tests); None: the wall clock.
        tz: Time zone for local times (tests); None: the machine's.
    """
    payload = dict(event.payload)
    build = _Builder(_with_incoming(texts, payload, show), show, loading)
    thresholds = dict(event.thresholds)
    rows = [Field("What happened", _capital(phrase(event.kind)), event.kind),
            Field("When", relative_time(event.ts, now_ms=now_ms, tz=tz),
                  exact_time(event.ts, tz=tz))]
    if event.decision_reason and event.kind in _KIND_REASONS:
        rows.append(Field("Why", _capital(_KIND_REASONS[event.kind].format(
            humanize(event.decision_reason))), event.decision_reason))
    elif event.decision_reason:
        found = payload.get("conflicts")
        conflicts: list[Any] = found if isinstance(found, list) else []
        rows.append(Field("Why", _capital(reason_sentence(
            event.decision_reason, target=event.record_id if event.kind in (
                "merge-applied", "merge-deferred", "ingest-skipped") else None,
            conflicts=conflicts, texts=build.texts)), event.decision_reason))
    if event.record_id:
        rows.append(build.record("Record", event.record_id))
    similarity = _similarity_row(event.similarity, thresholds)
    if similarity is not None:
        rows.append(similarity)
    if thresholds:
        rows.append(Field("Thresholds", "", children=tuple(build.thresholds(
            thresholds, payload.get("tier") if isinstance(payload.get("tier"), str) else None))))
    for key, value in (("stage", event.stage), ("source", event.source),
                       ("agent_id", event.agent_id), ("latency_ms", event.latency_ms)):
        if value is not None and value != "":
            rows.append(Field(label_for(key), _value(key, value),
                              str(value) if key == "stage" else ""))
    if event.memory_hash:
        rows.append(Field("Content hash", _value("memory_hash", event.memory_hash),
                          event.memory_hash))
    envelope = {"id": event.record_id, "record_id": event.record_id, "source": event.source,
                "agent_id": event.agent_id, "stage": event.stage,
                "similarity": event.similarity}
    skip = {key for key, value in envelope.items() if payload.get(key) == value}
    if isinstance(payload.get("incoming_id"), str):
        skip.add("content")  # the incoming memory's row names it by this text (tool tip: all)
    rows.extend(build.rows(payload, skip))
    if isinstance(payload.get("conflicts"), list):
        rows.append(build.conflicts(payload["conflicts"]))
    return rows


def _with_incoming(texts: Texts, data: Mapping[str, Any], show: Callable[[str], str]) -> Texts:
    """``texts`` plus the incoming memory's own text (it names itself before it is stored)."""
    incoming, content = data.get("incoming_id"), data.get("content")
    if isinstance(incoming, str) and isinstance(content, str) and incoming not in texts:
        return {**texts, incoming: show(content)}
    return texts


def stage_fields(stage: str, data: Mapping[str, Any], texts: Texts, *,
                 show: Callable[[str], str] = str, loading: Collection[str] = (),
                 tier: str | None = None) -> list[Field]:
    """One pipeline stage's data as labelled rows (``StageReport.data`` of the stepper).

    Args:
        stage: The stage name (``engine.ingest.kinds.Stage`` value).
        data: The stage's data.
        texts: Record texts by id, including the incoming memory's.
        show: Applied to every memory text shown.
        loading: Ids whose texts are being read.
        tier: The incoming memory's trust tier (names the tier of the merge threshold).
    """
    texts = _with_incoming(texts, data, show)
    build = _Builder(texts, show, loading)
    if stage == "decision" and isinstance(data.get("decision"), Mapping):
        decision: Mapping[str, Any] = data["decision"]
        thresholds = decision.get("thresholds") or {}
        conflicts: list[Any] = list(decision.get("conflicts") or [])
        rows = [Field("Outcome", _capital(phrase(str(decision.get("action", "")))),
                      str(decision.get("action", ""))),
                Field("Why", _capital(reason_sentence(
                    str(decision.get("reason", "")), target=decision.get("target_id"),
                    conflicts=conflicts, texts=texts)), str(decision.get("reason", "")))]
        if isinstance(decision.get("target_id"), str):
            rows.append(build.record("Stored record", decision["target_id"]))
        similarity = _similarity_row(decision.get("similarity"), thresholds)
        if similarity is not None:
            rows.append(similarity)
        rows.append(build.conflicts(list(conflicts)))
        rows.append(Field("Thresholds", "", children=tuple(build.thresholds(thresholds, tier))))
        if decision.get("new_confidence") is not None:
            rows.append(build.row("new_confidence", decision["new_confidence"])
                        or Field("New confidence", ""))
        surprise = data.get("surprise")
        if isinstance(surprise, Mapping):
            rows.append(Field("Surprise", number(surprise.get("surprise"), decimals=3),
                              children=tuple(build.rows(surprise, {"surprise"}))))
        return rows
    skip: set[str] = set()
    if stage == "merge/defer":
        skip = {"before", "after"}  # the diff table shows them field by field
    if stage == "ingest-start":
        skip = {"content"}  # the incoming memory's row names it by this text
    rows = build.rows(data, skip)
    if stage == "ingest-start" and data.get("importance") is None:
        rows.append(Field("Importance", "from surprise (none given)"))
    return rows


def diff_value(key: str, value: Any, texts: Texts, *, tz: tzinfo | None = None) -> str:
    """One field of a record's JSON form (``MemoryRecord.to_json``) in words, for a diff."""
    if value is None:
        return "—"
    if key.endswith("_at") or key == "last_accessed":
        try:
            at = parse_timestamp(value, key)
        except ValidationError:
            return str(value)
        return local_time(at, tz=tz)
    if key in ("merged_from", "related") and isinstance(value, list):
        ids = [v if isinstance(v, str) else str(v.get("id", "")) for v in value
               if isinstance(v, str | Mapping)]
        return "; ".join(record_label(i, texts, limit=30)[0] for i in ids) or "none"
    if key == "provenance" and isinstance(value, list):
        return count_of(len(value), "source")
    if key == "tags" and isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, Mapping | list):
        return elide(json.dumps(value, ensure_ascii=False, default=str), 160)
    return elide(_value(key, value), 160) if isinstance(value, str) else _value(key, value)


def raw_json(data: Any, show: Callable[[str], str] | None = None) -> str:
    """Indented JSON of ``data`` with every string passed through ``show`` (the raw view)."""
    def clean(value: Any) -> Any:
        if show is None:
            return value
        if isinstance(value, str):
            return show(value)
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(data), indent=2, ensure_ascii=False, default=str)
