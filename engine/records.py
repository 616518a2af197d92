"""The memory record and its value types.

One :class:`MemoryRecord` covers seed 002's record (six layers, agent, importance, recency
anchor, TTL, token estimate, metadata with tags/spatial/social/procedural, redacted flag, hash),
seed 004's category, access count and expiry, and seed 001's privacy partition, source instance,
trust tier, confidence, provenance, merged-from and related links.

Records are immutable; change one with :meth:`MemoryRecord.replace`, which re-validates. Times are
epoch milliseconds (UTC) as floats, matching :class:`engine.clock.Clock`. Wire/JSON names are
snake_case (:meth:`MemoryRecord.to_json` / :meth:`MemoryRecord.from_json`) with ISO-8601 UTC
timestamps.

Limits (documented in the README): content is 1 to :data:`MAX_CONTENT_CHARS` characters after
trimming; at most :data:`MAX_TAGS` tags of at most :data:`MAX_TAG_CHARS` characters each.

Hostile input is refused here, where every path (add, ingest, import-conversation, the API,
records read back from a store) passes, naming the field (issue 18): text with a lone surrogate
(``"\ud800"`` is valid JSON but not Unicode: it cannot be hashed, stored or printed as UTF-8),
times outside the years 1970..9999 (:data:`MIN_TIMESTAMP_MS` .. :data:`MAX_TIMESTAMP_MS`: what
an ISO-8601 time can show), metadata nested deeper than :data:`MAX_METADATA_DEPTH`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Self, TypeVar

from engine.errors import ValidationError
from engine.text import content_hash, estimate_tokens

__all__ = [
    "CATEGORY_WEIGHTS",
    "MAX_CONTENT_CHARS",
    "MAX_METADATA_DEPTH",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TIMESTAMP_MS",
    "MIN_TIMESTAMP_MS",
    "Category",
    "JSONValue",
    "Layer",
    "MemoryRecord",
    "NewMemory",
    "Privacy",
    "ProvenanceEntry",
    "RecordState",
    "RelatedLink",
    "TrustTier",
    "check_text",
    "check_timestamp",
    "format_timestamp",
    "new_record_id",
    "parse_timestamp",
]

MAX_CONTENT_CHARS = 32_000
"""Longest content accepted, in characters (about 8K tokens): one memory, not a document."""
MAX_TAGS = 64
_E = TypeVar("_E", bound=StrEnum)
MAX_TAG_CHARS = 64
MAX_METADATA_DEPTH = 32
"""Deepest nesting of objects and lists accepted in metadata (a memory's metadata is a few
flat fields; deeper input is a runaway or hostile file, and deep values cost recursion later)."""
MIN_TIMESTAMP_MS = 0.0
"""1970-01-01T00:00:00Z: the earliest time a record may carry."""
MAX_TIMESTAMP_MS = datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC).timestamp() * 1000.0
"""9999-12-31T23:59:59.999Z: the latest time :func:`format_timestamp` can write."""

JSONValue = Any
"""A value that survives ``json.dumps``; metadata values are checked at construction."""


class Layer(StrEnum):
    """Seed 002 memory layers."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    SOCIAL = "social"
    SPATIAL = "spatial"
    SYSTEM = "system"


class Privacy(StrEnum):
    """Seed 001 privacy partitions: PUBLIC never merges with PRIVATE."""

    PUBLIC = "PUBLIC"
    PRIVATE = "PRIVATE"


class RecordState(StrEnum):
    """Whether a record takes part in retrieval (issue 20, soft states; OpenMemory's states).

    Only ``active`` records are retrieved. A ``paused`` record is kept and listed but never
    retrieved; an ``archived`` one is kept, hidden from listings unless asked for, and never
    retrieved. Either comes back with :meth:`engine.MemoryEngine.resume`. Lifecycle pruning,
    retention caps and compaction leave paused and archived records alone (the user chose to
    keep them); TTL expiry still applies.
    """

    ACTIVE = "active"
    PAUSED = "paused"
    ARCHIVED = "archived"


class TrustTier(StrEnum):
    """Seed 001 source trust tiers; they pick the near-duplicate threshold."""

    HUMAN = "human"
    AGENT = "agent"
    AUTO = "auto"


class Category(StrEnum):
    """Seed 004 memory categories."""

    FACT = "fact"
    PREFERENCE = "preference"
    SKILL = "skill"
    EPISODE = "episode"
    CONTEXT = "context"


# seed 004 "Category Importance Weights"
CATEGORY_WEIGHTS: Mapping[Category, float] = {
    Category.FACT: 0.8,
    Category.PREFERENCE: 0.9,
    Category.SKILL: 0.7,
    Category.EPISODE: 0.6,
    Category.CONTEXT: 0.5,
}


def new_record_id() -> str:
    """Return a fresh record id (UUID4 hex with dashes)."""
    return str(uuid.uuid4())


def check_text(value: str, field_name: str) -> str:
    """Return ``value`` if it is valid Unicode (no lone surrogate), else refuse it.

    JSON's ``\\ud800`` escape decodes to a lone surrogate: a Python string, but not text that can
    be encoded as UTF-8 (hashing, storing or printing it raises deep in the pipeline).

    Raises:
        ValidationError: naming ``field_name``, the surrogate and its 1-based position.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            field_name, value,
            f"lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start + 1} "
            "is not valid Unicode") from None
    return value


def check_timestamp(value: float, field_name: str) -> float:
    """Return ``value`` (epoch ms) if it lies in the years 1970..9999, else refuse it.

    Raises:
        ValidationError: naming ``field_name``.
    """
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or not MIN_TIMESTAMP_MS <= value <= MAX_TIMESTAMP_MS):
        raise ValidationError(field_name, value, _TIME_RANGE)
    return float(value)


_TIME_RANGE = (f"must be a time in the years 1970..9999 (epoch milliseconds "
               f"0..{MAX_TIMESTAMP_MS:.0f})")


def format_timestamp(ms: float | None) -> str | None:
    """Epoch milliseconds → ISO-8601 UTC with millisecond precision and a ``Z`` suffix."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: object, field_name: str) -> float | None:
    """Accept ISO-8601 text (``Z`` or offset; a naive time is taken as UTC) or epoch ms.

    Raises:
        ValidationError: naming ``field_name`` when the value is neither.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(field_name, value, "expected an ISO-8601 time or epoch milliseconds")
    if isinstance(value, int | float):
        return check_timestamp(value, field_name)
    if isinstance(value, str):
        text = check_text(value, field_name).strip()
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text else "x")
        except ValueError:
            raise ValidationError(
                field_name, value, "expected an ISO-8601 time such as 2026-01-31T12:00:00Z"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        ms = moment.timestamp() * 1000.0
        if not MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS:
            raise ValidationError(field_name, value, _TIME_RANGE)
        return ms
    raise ValidationError(field_name, value, "expected an ISO-8601 time or epoch milliseconds")


@dataclass(frozen=True, slots=True)
class ProvenanceEntry:
    """One source that contributed to a record (seed 001: append source_instance + hash)."""

    source: str
    content_hash: str
    at: float
    tier: TrustTier = TrustTier.AGENT
    confidence: float | None = None

    def to_json(self) -> dict[str, JSONValue]:
        """Return the wire form."""
        return {
            "source": self.source,
            "content_hash": self.content_hash,
            "at": format_timestamp(self.at),
            "tier": self.tier.value,
            "confidence": self.confidence,
        }

    @classmethod
    def from_json(cls, data: object, field_name: str = "provenance") -> ProvenanceEntry:
        """Parse the wire form, naming ``field_name`` on error."""
        if not isinstance(data, Mapping):
            raise ValidationError(field_name, data, "each entry must be an object")
        source = data.get("source")
        digest = data.get("content_hash", "")
        if not isinstance(source, str) or not isinstance(digest, str):
            raise ValidationError(field_name, data, "needs string 'source' and 'content_hash'")
        at = parse_timestamp(data.get("at", 0.0), f"{field_name}.at") or 0.0
        confidence = data.get("confidence")
        if confidence is not None and not _is_unit(confidence):
            raise ValidationError(f"{field_name}.confidence", confidence, "must be in 0..1")
        return cls(source, digest, at, _enum(TrustTier, data.get("tier", "agent"),
                                             f"{field_name}.tier"),
                   None if confidence is None else float(confidence))


@dataclass(frozen=True, slots=True)
class RelatedLink:
    """A symmetric ``related`` edge to another record with the similarity that made it."""

    id: str
    similarity: float

    def to_json(self) -> dict[str, JSONValue]:
        """Return the wire form."""
        return {"id": self.id, "similarity": round(self.similarity, 6)}

    @classmethod
    def from_json(cls, data: object) -> RelatedLink:
        """Parse the wire form (an object, or a bare id string with similarity 0)."""
        if isinstance(data, str):
            return cls(data, 0.0)
        if isinstance(data, Mapping) and isinstance(data.get("id"), str):
            similarity = data.get("similarity", 0.0)
            if not isinstance(similarity, int | float) or not math.isfinite(similarity):
                raise ValidationError("related.similarity", similarity, "must be a number")
            return cls(data["id"], float(similarity))
        raise ValidationError("related", data, "each entry must be an id or {id, similarity}")


def _is_unit(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def _enum(kind: type[_E], value: object, field_name: str) -> _E:
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        for member in kind:
            if value.strip().lower() == member.value.lower():
                return member
    choices = ", ".join(m.value for m in kind)
    raise ValidationError(field_name, value, f"must be one of {choices}")


def _check_json_text(value: JSONValue, path: str, depth: int) -> None:
    """Refuse lone surrogates in keys and strings and nesting past :data:`MAX_METADATA_DEPTH`,
    naming the path (``metadata.notes[2].text``). Stops at the limit, so it never recurses
    deeper than that whatever the caller built."""
    if isinstance(value, str):
        check_text(value, path)
    elif isinstance(value, Mapping | list | tuple):
        if depth >= MAX_METADATA_DEPTH:
            raise ValidationError(path, "<nested value>",
                                  f"nested deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str):
                    check_text(key, f"{path} key")
                _check_json_text(item, f"{path}.{key}", depth + 1)
        else:
            for index, item in enumerate(value):
                _check_json_text(item, f"{path}[{index}]", depth + 1)


def _check_metadata(metadata: Mapping[str, JSONValue]) -> None:
    # Every record passes here, so the common case stays cheap (measured: the full walk added
    # ~30 us to a record with a few metadata fields): flat metadata needs no depth walk, and
    # one encode of its JSON finds a lone surrogate anywhere; the walk runs to name the path.
    nested = any(isinstance(v, Mapping | list | tuple) for v in metadata.values())
    if nested:
        _check_json_text(metadata, "metadata", 0)  # bounded: before json recurses into it
    try:
        text = json.dumps(metadata, allow_nan=False, ensure_ascii=False)
        if not nested:
            text.encode("utf-8")
    except UnicodeEncodeError:
        _check_json_text(metadata, "metadata", 0)  # raises, naming the key or value
        raise
    except (TypeError, ValueError) as exc:
        raise ValidationError("metadata", metadata, f"must be JSON-serializable: {exc}") from exc
    for key, kind in (("spatial", "x y z"), ("social", ""), ("procedural", "")):
        value = metadata.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise ValidationError(f"metadata.{key}", value, "must be an object")
        if key == "spatial" and value is not None:
            for axis in kind.split():
                coordinate = value.get(axis)
                if not isinstance(coordinate, int | float) or isinstance(coordinate, bool):
                    raise ValidationError(f"metadata.spatial.{axis}", coordinate,
                                          "must be a number")
    social = metadata.get("social")
    if isinstance(social, Mapping) and "sentiment" in social:
        sentiment = social["sentiment"]
        if (not isinstance(sentiment, int | float) or isinstance(sentiment, bool)
                or not -1.0 <= sentiment <= 1.0):
            raise ValidationError("metadata.social.sentiment", sentiment, "must be in -1..1")


def _clean_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if not isinstance(tags, list | tuple | set | frozenset):
        raise ValidationError("tags", tags, "must be a list of strings")
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise ValidationError("tags", tag, "each tag must be a string")
        cleaned = check_text(tag, "tags").strip()
        if not cleaned:
            continue
        if len(cleaned) > MAX_TAG_CHARS:
            raise ValidationError("tags", tag, f"a tag is at most {MAX_TAG_CHARS} characters")
        if "," in cleaned:
            raise ValidationError("tags", tag, "a tag may not contain a comma")
        seen.setdefault(cleaned, None)
    if len(seen) > MAX_TAGS:
        raise ValidationError("tags", len(seen), f"at most {MAX_TAGS} tags")
    return tuple(seen)


def _clean_metadata(metadata: object) -> dict[str, JSONValue]:
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata", metadata, "must be an object")
    if not all(isinstance(key, str) for key in metadata):
        raise ValidationError("metadata", metadata, "keys must be strings")
    return dict(metadata)


def _clean_content(content: object) -> str:
    if not isinstance(content, str):
        raise ValidationError("content", content, "must be a string")
    stripped = check_text(content, "content").strip()
    if not stripped:
        raise ValidationError("content", content, "must not be empty")
    if len(stripped) > MAX_CONTENT_CHARS:
        raise ValidationError("content", f"<{len(stripped)} characters>",
                              f"is longer than {MAX_CONTENT_CHARS} characters")
    return stripped


@dataclass(frozen=True, slots=True)
class NewMemory:
    """What a caller supplies to add a memory; the engine fills in the rest.

    ``importance=None`` lets the ingest pipeline derive it (surprise × category weight, DESIGN 5).
    ``state`` is the new record's state when it is inserted (an import of an exported paused
    record); a merge or update keeps the stored target's state instead.
    """

    content: str
    agent_id: str = "default"
    layer: Layer = Layer.SEMANTIC
    importance: float | None = None
    confidence: float = 0.8
    category: Category = Category.FACT
    tags: tuple[str, ...] = ()
    privacy: Privacy = Privacy.PRIVATE
    source: str = "user"
    source_tier: TrustTier = TrustTier.HUMAN
    created_at: float | None = None
    expires_at: float | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    state: RecordState = RecordState.ACTIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _clean_content(self.content))
        object.__setattr__(self, "state", _enum(RecordState, self.state, "state"))
        object.__setattr__(self, "layer", _enum(Layer, self.layer, "layer"))
        object.__setattr__(self, "category", _enum(Category, self.category, "category"))
        object.__setattr__(self, "privacy", _enum(Privacy, self.privacy, "privacy"))
        object.__setattr__(self, "source_tier", _enum(TrustTier, self.source_tier, "source_tier"))
        object.__setattr__(self, "tags", _clean_tags(self.tags))
        object.__setattr__(self, "metadata", _clean_metadata(self.metadata))
        _check_agent(self.agent_id)
        _check_source(self.source)
        if self.importance is not None and not _is_unit(self.importance):
            raise ValidationError("importance", self.importance, "must be a number in 0..1")
        if not _is_unit(self.confidence):
            raise ValidationError("confidence", self.confidence, "must be a number in 0..1")
        _check_metadata(self.metadata)
        for name in ("created_at", "expires_at"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_timestamp(getattr(self, name), name))
        if (self.expires_at is not None and self.created_at is not None
                and self.expires_at < self.created_at):
            raise ValidationError("expires_at", format_timestamp(self.expires_at),
                                  "is before created_at")

    @property
    def content_hash(self) -> str:
        """The canonical content hash (DESIGN decision 1)."""
        return content_hash(self.content)


def _check_agent(agent_id: object) -> None:
    if not isinstance(agent_id, str) or not agent_id.strip() or len(agent_id) > 128:
        raise ValidationError("agent_id", agent_id, "must be a non-empty string of <= 128 chars")
    check_text(agent_id, "agent_id")


def _check_source(source: object) -> None:
    if not isinstance(source, str) or not source.strip() or len(source) > 256:
        raise ValidationError("source", source, "must be a non-empty string of <= 256 chars")
    check_text(source, "source")


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A stored memory. Immutable; use :meth:`replace` to derive a changed copy.

    Attributes:
        id: Stable identifier.
        content: The memory text (raw, never redacted in storage; views redact on display).
        layer: Seed 002 layer.
        agent_id: The agent the memory belongs to.
        importance: 0..1 as stored (undecayed; decay is applied at scoring time, seed 004).
        confidence: 0..1; exact duplicates combine it with ``merge_confidence`` (seed 000 §5).
        category: Seed 004 category.
        tags: Unique tags, in first-seen order.
        privacy: PUBLIC or PRIVATE partition.
        source: Source instance that created it (seed 001 ``source_instance``).
        source_tier: Trust tier of that source.
        created_at: Epoch ms; merges keep the earliest.
        last_accessed: Epoch ms of the last retrieval or merge.
        access_count: Times retrieved (sums on merge).
        expires_at: Epoch ms after which the record is expired (TTL), or None.
        recency_anchor: Epoch ms (or logical tick) recency is measured from (seed 002).
        content_hash: Canonical hash of ``content``.
        token_estimate: Estimated LLM tokens of ``content``.
        provenance: Every source that contributed, in order.
        merged_from: Ids of records merged into this one.
        related: Symmetric related links, top-k by similarity.
        redacted: True when ``content`` was redacted in place by the user.
        embedding_model: Name of the model that embedded ``content``; "" while pending.
        metadata: Free JSON metadata, incl. seed 002's spatial/social/procedural objects.
        version: Incremented on every stored change (optimistic concurrency, edit history).
        state: Active, paused or archived (:class:`RecordState`); only active records are
            retrieved.
    """

    id: str
    content: str
    layer: Layer
    agent_id: str
    importance: float
    confidence: float
    category: Category
    tags: tuple[str, ...]
    privacy: Privacy
    source: str
    source_tier: TrustTier
    created_at: float
    last_accessed: float
    access_count: int = 0
    expires_at: float | None = None
    recency_anchor: float | None = None
    content_hash: str = ""
    token_estimate: int = 0
    provenance: tuple[ProvenanceEntry, ...] = ()
    merged_from: tuple[str, ...] = ()
    related: tuple[RelatedLink, ...] = ()
    redacted: bool = False
    embedding_model: str = ""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    version: int = 1
    state: RecordState = RecordState.ACTIVE

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or len(self.id) > 128:
            raise ValidationError("id", self.id, "must be a non-empty string of <= 128 chars")
        object.__setattr__(self, "content", _clean_content(self.content))
        object.__setattr__(self, "layer", _enum(Layer, self.layer, "layer"))
        object.__setattr__(self, "category", _enum(Category, self.category, "category"))
        object.__setattr__(self, "privacy", _enum(Privacy, self.privacy, "privacy"))
        object.__setattr__(self, "source_tier", _enum(TrustTier, self.source_tier, "source_tier"))
        object.__setattr__(self, "state", _enum(RecordState, self.state, "state"))
        object.__setattr__(self, "tags", _clean_tags(self.tags))
        object.__setattr__(self, "metadata", _clean_metadata(self.metadata))
        object.__setattr__(self, "provenance", tuple(self.provenance))
        object.__setattr__(self, "merged_from", tuple(self.merged_from))
        object.__setattr__(self, "related", tuple(self.related))
        _check_agent(self.agent_id)
        _check_source(self.source)
        for name in ("importance", "confidence"):
            if not _is_unit(getattr(self, name)):
                raise ValidationError(name, getattr(self, name), "must be a number in 0..1")
        if not isinstance(self.access_count, int) or self.access_count < 0:
            raise ValidationError("access_count", self.access_count, "must be an integer >= 0")
        for name in ("created_at", "last_accessed"):
            check_timestamp(getattr(self, name), name)
        if self.expires_at is not None and (
            check_timestamp(self.expires_at, "expires_at") < self.created_at
        ):
            raise ValidationError("expires_at", format_timestamp(self.expires_at),
                                  "must be after created_at")
        _check_metadata(self.metadata)
        if not self.content_hash:
            object.__setattr__(self, "content_hash", content_hash(self.content))
        if not self.token_estimate:
            object.__setattr__(self, "token_estimate", estimate_tokens(self.content))
        if self.recency_anchor is None:
            object.__setattr__(self, "recency_anchor", self.created_at)

    # -- derived ---------------------------------------------------------------------------

    @property
    def ttl_ms(self) -> float | None:
        """Time to live from creation, in ms (seed 002 ``ttl``), or None."""
        return None if self.expires_at is None else self.expires_at - self.created_at

    def is_expired(self, now_ms: float) -> bool:
        """True when the record has an expiry that lies before ``now_ms`` (seed 004 gentle)."""
        return self.expires_at is not None and self.expires_at < now_ms

    @property
    def unique_sources(self) -> int:
        """Count of distinct sources in provenance (seed 001)."""
        return len({entry.source for entry in self.provenance}) or 1

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def create(cls, new: NewMemory, *, now_ms: float, record_id: str | None = None,
               importance: float | None = None, embedding_model: str = "") -> MemoryRecord:
        """Build a fresh record from a :class:`NewMemory` at time ``now_ms``."""
        created = new.created_at if new.created_at is not None else now_ms
        chosen = importance if importance is not None else new.importance
        return cls(
            id=record_id or new_record_id(),
            content=new.content,
            layer=new.layer,
            agent_id=new.agent_id,
            importance=0.5 if chosen is None else chosen,
            confidence=new.confidence,
            category=new.category,
            tags=new.tags,
            privacy=new.privacy,
            source=new.source,
            source_tier=new.source_tier,
            created_at=created,
            last_accessed=created,
            expires_at=new.expires_at,
            provenance=(ProvenanceEntry(new.source, new.content_hash, now_ms, new.source_tier,
                                        new.confidence),),
            embedding_model=embedding_model,
            metadata=new.metadata,
            state=new.state,
        )

    def replace(self, **changes: Any) -> Self:
        """Return a validated copy with ``changes`` applied.

        Changing ``content`` recomputes the hash and token estimate and clears the embedding
        model (the engine re-embeds).
        """
        if "content" in changes and changes["content"] != self.content:
            changes.setdefault("content_hash", "")
            changes.setdefault("token_estimate", 0)
            changes.setdefault("embedding_model", "")
        return dataclasses.replace(self, **changes)

    # -- wire form -------------------------------------------------------------------------

    def to_json(self) -> dict[str, JSONValue]:
        """Return the snake_case JSON object used by the CLI, exports and the API."""
        return {
            "id": self.id,
            "content": self.content,
            "layer": self.layer.value,
            "agent_id": self.agent_id,
            "importance": self.importance,
            "confidence": self.confidence,
            "category": self.category.value,
            "tags": list(self.tags),
            "privacy": self.privacy.value,
            "source": self.source,
            "source_tier": self.source_tier.value,
            "created_at": format_timestamp(self.created_at),
            "last_accessed": format_timestamp(self.last_accessed),
            "access_count": self.access_count,
            "expires_at": format_timestamp(self.expires_at),
            "content_hash": self.content_hash,
            "token_estimate": self.token_estimate,
            "provenance": [entry.to_json() for entry in self.provenance],
            "unique_sources": self.unique_sources,
            "merged_from": list(self.merged_from),
            "related": [link.to_json() for link in self.related],
            "redacted": self.redacted,
            "embedding_model": self.embedding_model,
            "metadata": dict(self.metadata),
            "version": self.version,
            "state": self.state.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> MemoryRecord:
        """Parse :meth:`to_json` output. Unknown keys raise; use the importer for lenient input.

        Raises:
            ValidationError: naming the first bad field.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        extra = set(data) - known - {"unique_sources"}
        if extra:
            raise ValidationError(sorted(extra)[0], data[sorted(extra)[0]], "unknown field")
        for required in ("id", "content", "created_at"):
            if required not in data:
                raise ValidationError(required, None, "is required")
        created = parse_timestamp(data["created_at"], "created_at") or 0.0
        tags = data.get("tags", ())
        if not isinstance(tags, list | tuple):
            raise ValidationError("tags", tags, "must be a list of strings")
        provenance = data.get("provenance", ())
        merged = data.get("merged_from", ())
        related = data.get("related", ())
        for name, value in (("provenance", provenance), ("merged_from", merged),
                            ("related", related)):
            if not isinstance(value, list | tuple):
                raise ValidationError(name, value, "must be a list")
        metadata = data.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise ValidationError("metadata", metadata, "must be an object")
        access_count = data.get("access_count", 0)
        if isinstance(access_count, bool) or not isinstance(access_count, int):
            raise ValidationError("access_count", access_count, "must be an integer >= 0")
        return cls(
            id=data["id"],
            content=data["content"],
            layer=data.get("layer", Layer.SEMANTIC),
            agent_id=data.get("agent_id", "default"),
            importance=data.get("importance", 0.5),
            confidence=data.get("confidence", 0.8),
            category=data.get("category", Category.FACT),
            tags=tuple(tags),
            privacy=data.get("privacy", Privacy.PRIVATE),
            source=data.get("source", "import"),
            source_tier=data.get("source_tier", TrustTier.AUTO),
            created_at=created,
            last_accessed=parse_timestamp(data.get("last_accessed"), "last_accessed") or created,
            access_count=access_count,
            expires_at=parse_timestamp(data.get("expires_at"), "expires_at"),
            recency_anchor=parse_timestamp(data.get("recency_anchor"), "recency_anchor"),
            content_hash="",
            token_estimate=0,
            provenance=tuple(ProvenanceEntry.from_json(p) for p in provenance),
            merged_from=tuple(str(m) for m in merged),
            related=tuple(RelatedLink.from_json(r) for r in related),
            redacted=bool(data.get("redacted", False)),
            embedding_model=str(data.get("embedding_model", "")),
            metadata=metadata,
            version=int(data.get("version", 1)),
            state=data.get("state", RecordState.ACTIVE),
        )
