"""Collections written by other tools (issue 22): which layout they use, and how their fields
become a :class:`~engine.records.MemoryRecord`.

A collection without ``schema_version`` opens read-only. Before this module its records were
read with defaults only, so a mem0 store showed "(no document)", agent "default" and 1970 for
every record. Now a sample of its records decides the :class:`ForeignLayout` and a
:class:`ForeignReader` maps each record's fields, following what each tool writes:

mem0 (``mem0/vector_stores/chroma.py`` + ``mem0/memory/main.py``)
    ``collection.add(ids, embeddings, metadatas=payloads)``: no document; the memory text in
    metadata ``data``, its MD5 in ``hash``, ``created_at`` / ``updated_at`` as ISO-8601 strings,
    the session keys ``user_id`` / ``agent_id`` / ``run_id`` (and ``actor_id``, ``role``).
LangChain (``langchain_chroma`` / ``langchain_community.vectorstores.Chroma``)
    ``upsert(ids, embeddings, documents, metadatas)``: the documents and the caller's metadata
    as given (document loaders add ``source``, ``page``, ``start_index``, ``row``); the
    default collection name is ``langchain``.
LlamaIndex (``llama_index.vector_stores.chroma``)
    ``documents`` = the node text; metadata: the node's own metadata flattened, plus
    ``_node_content`` (the node as JSON, ``text`` emptied), ``_node_type``, ``document_id``,
    ``doc_id`` and ``ref_doc_id`` (the source document).
plain
    Anything else: the document is the text, well-known keys (:data:`AGENT_KEYS`,
    :data:`TIME_KEYS`, ...) are used when present.
custom
    A :class:`FieldMapping` saved for the collection (``mnemoscope map-collection``) names the
    metadata keys that hold the text, agent, time and importance; it wins over detection.

Every metadata key stays in the record's ``metadata["foreign"]``, so nothing of the original
is hidden. Times may be ISO-8601 text, epoch milliseconds or epoch seconds (a number below
1e11 is read as seconds: 1e11 ms is 1973, 1e11 s the year 5138).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.errors import ValidationError
from engine.records import (
    MAX_TIMESTAMP_MS,
    MIN_TIMESTAMP_MS,
    Category,
    Layer,
    MemoryRecord,
    Privacy,
    TrustTier,
    parse_timestamp,
)
from engine.text import content_hash

__all__ = ["AGENT_KEYS", "DETECT_SAMPLE", "MAPPED_FIELDS", "NO_DOCUMENT", "RUN_KEYS",
           "SOURCE_KEYS", "TIME_KEYS", "UPDATED_KEYS", "FieldMapping", "ForeignInfo",
           "ForeignLayout", "ForeignReader", "ForeignSample", "detect_layout"]

NO_DOCUMENT = "(no document)"
_MAX_CONTENT = 32_000
_SECONDS_BELOW = 1e11

AGENT_KEYS = ("agent_id", "agent", "user_id", "user", "actor_id", "speaker")
"""Where the agent (or, failing that, the user the memory is about) is looked for."""
RUN_KEYS = ("run_id", "session_id", "session", "thread_id", "conversation_id")
"""A run or session id: shown as a ``run:<id>`` tag, so a view can filter one session."""
TIME_KEYS = ("created_at", "timestamp", "created", "creation_date", "date", "time",
             "upload_timestamp")
"""Where the creation time is looked for."""
UPDATED_KEYS = ("updated_at", "last_accessed_at", "modified_at", "last_modified_date")
"""Where the last change is looked for (the record's ``last_accessed`` and recency anchor)."""
SOURCE_KEYS = ("source", "file_name", "file_path", "ref_doc_id")
"""What the record came from (LangChain loaders, LlamaIndex readers)."""
_LANGCHAIN_KEYS = frozenset({"source", "page", "start_index", "row", "page_label"})
_LLAMAINDEX_KEYS = frozenset({"_node_content", "_node_type"})
DETECT_SAMPLE = 20
"""How many records (the first ones) :func:`detect_layout` is shown."""
MAPPED_FIELDS = ("text", "agent", "time", "updated", "importance", "run")
"""The record fields a :class:`FieldMapping` can name a metadata key for."""


class ForeignLayout(StrEnum):
    """The tool a foreign collection was written by (see the module docstring)."""

    MEM0 = "mem0"
    LANGCHAIN = "langchain"
    LLAMAINDEX = "llamaindex"
    PLAIN = "plain"
    CUSTOM = "custom"


@dataclass(frozen=True, slots=True)
class FieldMapping:
    """Which metadata keys hold a foreign record's fields (a saved per-collection mapping).

    Attributes:
        text: The key holding the memory text (None: the Chroma document).
        agent: The key holding the agent (or user) id.
        time: The key holding the creation time (ISO-8601, epoch ms or epoch seconds).
        updated: The key holding the time of the last change (same forms).
        importance: The key holding an importance in 0..1.
        run: The key holding a run or session id (shown as a ``run:<id>`` tag).
    """

    text: str | None = None
    agent: str | None = None
    time: str | None = None
    updated: str | None = None
    importance: str | None = None
    run: str | None = None

    def __post_init__(self) -> None:
        for name in MAPPED_FIELDS:
            key = getattr(self, name)
            if key is not None and (not isinstance(key, str) or not key.strip()
                                    or len(key) > 256):
                raise ValidationError(name, key, "must be a metadata key (non-empty text)")

    @property
    def empty(self) -> bool:
        """True when no key is mapped."""
        return not any(getattr(self, name) for name in MAPPED_FIELDS)

    def to_json(self) -> dict[str, str]:
        """The settings-file form (mapped keys only)."""
        return {name: key for name in MAPPED_FIELDS
                if (key := getattr(self, name)) is not None}

    @classmethod
    def from_json(cls, data: object, where: str) -> FieldMapping:
        """Parse the settings-file form.

        Raises:
            ValidationError: naming ``where`` and the field when it is not a mapping of the
                four known names to keys.
        """
        if not isinstance(data, Mapping):
            raise ValidationError(where, data, "must be an object of " + "/".join(MAPPED_FIELDS))
        unknown = sorted(set(data) - set(MAPPED_FIELDS))
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", data[unknown[0]],
                                  "is not one of " + ", ".join(MAPPED_FIELDS))
        for name, key in data.items():
            if not isinstance(key, str) or not key.strip():
                raise ValidationError(f"{where}.{name}", key, "must be a metadata key")
        return cls(**{str(k): str(v) for k, v in data.items()})


def detect_layout(name: str, documents: Sequence[str | None],
                  metadatas: Sequence[Mapping[str, Any] | None]) -> ForeignLayout:
    """The layout of a foreign collection, judged from a sample of its records.

    Args:
        name: The collection name (LangChain's default is ``langchain``).
        documents: The sample's documents.
        metadatas: The sample's metadata.
    """
    metas = [m or {} for m in metadatas]
    keys = set().union(*(m.keys() for m in metas)) if metas else set()
    if keys & _LLAMAINDEX_KEYS:
        return ForeignLayout.LLAMAINDEX
    has_documents = any(d and d.strip() for d in documents)
    if "data" in keys and "hash" in keys and not has_documents:
        return ForeignLayout.MEM0
    if has_documents and (name == "langchain" or keys & _LANGCHAIN_KEYS):
        return ForeignLayout.LANGCHAIN
    return ForeignLayout.PLAIN


def _time(value: object, field: str) -> float | None:
    """Epoch ms from ISO text, epoch ms or epoch seconds; None when absent or unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        ms = float(value) * 1000.0 if abs(value) < _SECONDS_BELOW else float(value)
        return ms if MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS else None
    try:
        return parse_timestamp(value, field)
    except ValidationError:
        return None  # a tool's own date format: the record still opens, with the open time


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    return None


def _first(meta: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    for key in keys:
        if key in meta and meta[key] not in (None, ""):
            return key, meta[key]
    return None


@dataclass(frozen=True, slots=True)
class ForeignReader:
    """Turns one foreign record into a :class:`MemoryRecord` for a detected layout.

    Attributes:
        layout: The detected layout (``custom`` when ``mapping`` is set).
        collection: The collection name (the default ``source`` names it).
        mapping: The saved per-collection mapping, if any.
    """

    layout: ForeignLayout
    collection: str
    mapping: FieldMapping | None = None

    def record(self, record_id: str, document: str | None,
               metadata: Mapping[str, Any] | None, *, now_ms: float) -> MemoryRecord:
        """The record shown for ``record_id`` (read-only; every metadata key kept under
        ``metadata["foreign"]``)."""
        meta = dict(metadata or {})
        mapping = self.mapping or FieldMapping()
        content = self._content(document, meta, mapping)
        agent = self._agent(meta, mapping)
        created = self._created(meta, mapping)
        created = now_ms if created is None else created
        changed = self._updated(meta, mapping)
        changed = created if changed is None or changed < created else changed
        tags: tuple[str, ...] = ()
        run = _first(meta, (mapping.run, *RUN_KEYS) if mapping.run else RUN_KEYS)
        if run is not None and isinstance(run[1], str | int) and not isinstance(run[1], bool):
            tags = (f"run:{run[1]}"[:64],)
        source = _first(meta, SOURCE_KEYS)
        return MemoryRecord(
            id=record_id, content=content[:_MAX_CONTENT], layer=Layer.SEMANTIC,
            agent_id=agent, importance=self._importance(meta, mapping), confidence=0.5,
            category=Category.FACT, tags=tags, privacy=Privacy.PRIVATE,
            source=str(source[1])[:256] if source is not None else self.layout.value,
            source_tier=TrustTier.AUTO, created_at=created, last_accessed=changed,
            recency_anchor=changed, content_hash=content_hash(content),
            metadata={"foreign": meta},
        )

    def _content(self, document: str | None, meta: Mapping[str, Any],
                 mapping: FieldMapping) -> str:
        if mapping.text is not None:
            mapped = _text(meta.get(mapping.text))
            if mapped is not None:
                return mapped
        if self.layout is ForeignLayout.MEM0:
            mem0 = _text(meta.get("data"))
            if mem0 is not None:
                return mem0
        if document is not None and document.strip():
            return document
        if self.layout is ForeignLayout.LLAMAINDEX:
            node = meta.get("_node_content")
            try:
                parsed = json.loads(node) if isinstance(node, str) else None
            except (ValueError, RecursionError):  # not JSON, or nested past the parser
                parsed = None
            text = _text(parsed.get("text")) if isinstance(parsed, dict) else None
            if text is not None:
                return text
        return NO_DOCUMENT

    @staticmethod
    def _agent(meta: Mapping[str, Any], mapping: FieldMapping) -> str:
        keys = (mapping.agent, *AGENT_KEYS) if mapping.agent else AGENT_KEYS
        found = _first(meta, keys)
        if found is None or not isinstance(found[1], str | int) or isinstance(found[1], bool):
            return "default"
        agent = str(found[1]).strip()[:128]
        return agent or "default"

    @staticmethod
    def _created(meta: Mapping[str, Any], mapping: FieldMapping) -> float | None:
        keys = (mapping.time, *TIME_KEYS) if mapping.time else TIME_KEYS
        for key in keys:
            if key in meta:
                moment = _time(meta[key], key)
                if moment is not None:
                    return moment
        return None

    @staticmethod
    def _updated(meta: Mapping[str, Any], mapping: FieldMapping) -> float | None:
        keys = (mapping.updated, *UPDATED_KEYS) if mapping.updated else UPDATED_KEYS
        for key in keys:
            if key in meta and meta[key] not in (None, ""):
                moment = _time(meta[key], key)
                if moment is not None:
                    return moment
        return None

    @staticmethod
    def _importance(meta: Mapping[str, Any], mapping: FieldMapping) -> float:
        key = mapping.importance or "importance"
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            return 0.5
        return min(1.0, max(0.0, float(value)))


@dataclass(frozen=True, slots=True)
class ForeignInfo:
    """What ``stats``, ``doctor`` and the API snapshot say about a foreign collection.

    Attributes:
        layout: The detected layout (``custom`` under a saved mapping).
        mapping: The saved mapping, if any.
        vector_dimension: The length of the collection's own vectors (None: it has none).
        vectors_used: False when that length differs from the model's: those vectors are not
            comparable with a query embedded by our model, so search ranks these records by
            their words (token Jaccard and BM25) and the map cannot place them; adopting the
            collection embeds the texts with our model.
    """

    layout: ForeignLayout
    mapping: FieldMapping | None
    vector_dimension: int | None
    vectors_used: bool

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"layout": self.layout.value,
                "mapping": self.mapping.to_json() if self.mapping is not None else None,
                "vector_dimension": self.vector_dimension, "vectors_used": self.vectors_used}

    def describe(self) -> str:
        """One line for people (``stats``, ``doctor``)."""
        text = f"{self.layout.value} layout"
        if self.mapping is not None:
            text += " (" + ", ".join(f"{k}={v}" for k, v in self.mapping.to_json().items()) + ")"
        if self.vector_dimension is not None and not self.vectors_used:
            text += (f"; its {self.vector_dimension}-d vectors do not fit the model: "
                     "search uses words only, adopt to embed")
        return text


@dataclass(frozen=True, slots=True)
class ForeignSample:
    """The first records of a foreign collection as Chroma holds them, for choosing a mapping.

    Attributes:
        collection: The collection name.
        detected: The layout detection found (never ``custom``): what a mapping falls back
            to for the fields it leaves out.
        ids: The sample's record ids.
        documents: Their Chroma documents (None: the record has none).
        metadatas: Their metadata, as written.
    """

    collection: str
    detected: ForeignLayout
    ids: tuple[str, ...]
    documents: tuple[str | None, ...]
    metadatas: tuple[Mapping[str, Any], ...]

    def keys(self) -> list[tuple[str, list[str]]]:
        """Every metadata key of the sample (sorted) with up to three distinct values as text
        (each at most 80 characters), the order they first appear in."""
        values: dict[str, list[str]] = {}
        for meta in self.metadatas:
            for key, value in meta.items():
                shown = values.setdefault(str(key), [])
                text = str(value)
                text = text if len(text) <= 80 else text[:79] + "…"
                if len(shown) < 3 and text not in shown:
                    shown.append(text)
        return sorted(values.items())

    @property
    def has_documents(self) -> bool:
        """True when some record of the sample has a non-empty document."""
        return any(d is not None and d.strip() for d in self.documents)

    def preview(self, mapping: FieldMapping | None, *, now_ms: float) -> list[MemoryRecord]:
        """The sample's records as ``mapping`` (None: detection alone) would show them."""
        reader = ForeignReader(self.detected, self.collection,
                               mapping if mapping is not None and not mapping.empty else None)
        return [reader.record(record_id, document, meta, now_ms=now_ms)
                for record_id, document, meta in zip(self.ids, self.documents, self.metadatas,
                                                     strict=True)]
