"""Record filtering and sorting over the columnar view (the records browser's engine side).

Filtering and sorting happen here, in numpy, never in a Qt proxy over all rows (STYLE §4: a proxy
sort of 100K rows took ~20 s). :func:`select_rows` returns the ordered row indices of a
:class:`~engine.store.view.ViewSnapshot`; the engine then fetches just one page of records.
Sorts are stable with the record id as the final tie-break, so paging is deterministic.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.decay import decayed_importance
from engine.errors import ValidationError
from engine.records import Category, Layer, MemoryRecord, Privacy, RecordState
from engine.store.view import CATEGORIES, LAYERS, PRIVACIES, STATES, ViewSnapshot

if TYPE_CHECKING:
    from engine.exits import Masking

__all__ = ["ALL_STATES", "SHOWN_STATES", "RecordPage", "RecordQuery", "RecordRow", "RowPage",
           "ServerFilter", "SortKey", "locate_row", "masked_rows", "page_rows", "parse_states",
           "select_rows", "server_filter"]

SHOWN_STATES: frozenset[RecordState] = frozenset({RecordState.ACTIVE, RecordState.PAUSED})
"""The states a listing shows unless asked otherwise: archived records are hidden by default."""
ALL_STATES: frozenset[RecordState] = frozenset(RecordState)


def parse_states(value: str, field_name: str = "state") -> frozenset[RecordState]:
    """The states a ``--state`` option or ``state=`` parameter names.

    ``all`` is every state; otherwise a comma-separated list of ``active``, ``paused`` and
    ``archived`` (case-insensitive).

    Raises:
        ValidationError: naming ``field_name`` and the unknown word.
    """
    words = [word.strip().lower() for word in value.split(",") if word.strip()]
    if words == ["all"]:
        return ALL_STATES
    choices = ", ".join([*(state.value for state in RecordState), "all"])
    if not words:
        raise ValidationError(field_name, value, f"must be one of {choices}")
    states = set()
    for word in words:
        try:
            states.add(RecordState(word))
        except ValueError:
            raise ValidationError(field_name, value,
                                  f"unknown state {word!r}; must be one of {choices}") from None
    return frozenset(states)


class SortKey(StrEnum):
    """Columns the browser can sort by."""

    CREATED = "created_at"
    LAST_ACCESSED = "last_accessed"
    IMPORTANCE = "importance"
    DECAYED_IMPORTANCE = "decayed_importance"
    CONFIDENCE = "confidence"
    ACCESS_COUNT = "access_count"
    LAYER = "layer"
    AGENT = "agent_id"
    SOURCE = "source"
    PRIVACY = "privacy"
    CONTENT = "content"
    ID = "id"


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """A filter, an order and a page over the records.

    Every filter narrows; None means "any". ``tags`` requires all listed tags. ``text`` is a
    case-insensitive substring of the content. Times are epoch ms, inclusive. ``states`` are
    the record states shown: by default active and paused (:data:`SHOWN_STATES`; archived
    records are hidden until asked for, :data:`ALL_STATES` shows every record).
    """

    agent_id: str | None = None
    layer: Layer | None = None
    privacy: Privacy | None = None
    tags: tuple[str, ...] = ()
    text: str | None = None
    category: Category | None = None
    importance_min: float | None = None
    importance_max: float | None = None
    created_from: float | None = None
    created_to: float | None = None
    include_expired: bool = True
    states: frozenset[RecordState] = SHOWN_STATES
    sort_by: SortKey = SortKey.CREATED
    descending: bool = True
    offset: int = 0
    limit: int = 100

    def __post_init__(self) -> None:
        if self.offset < 0:
            raise ValidationError("offset", self.offset, "must be >= 0")
        if not 1 <= self.limit <= 10_000:
            raise ValidationError("limit", self.limit, "must be in 1..10000")
        try:
            states = frozenset(RecordState(state) for state in self.states)
        except (TypeError, ValueError):
            raise ValidationError("states", self.states,
                                  "must be states among active, paused, archived") from None
        if not states:
            raise ValidationError("states", self.states, "must name at least one state")
        object.__setattr__(self, "states", states)
        for name in ("importance_min", "importance_max"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValidationError(name, value, "must be in 0..1")


@dataclass(frozen=True, slots=True)
class RecordPage:
    """One page of records and the size of the whole filtered result."""

    records: Sequence[MemoryRecord]
    total: int
    offset: int
    decayed_importance: Sequence[float] = ()


@dataclass(frozen=True, slots=True)
class RecordRow:
    """What the records browser's table shows of a record: the view's columns, no Chroma read.

    The attributes have the names and types of :class:`~engine.records.MemoryRecord`'s. The
    view keeps importance and confidence as float32; a row gives them in their shortest decimal
    form (0.96, not 0.9599999785), which is the record's value whenever that has at most about
    seven significant digits. The full record, with provenance, links and metadata, is
    ``engine.get(row.id)``.
    """

    id: str
    content: str
    layer: Layer
    agent_id: str
    importance: float
    confidence: float
    created_at: float
    last_accessed: float
    access_count: int
    tags: tuple[str, ...]
    privacy: Privacy
    source: str
    state: RecordState = RecordState.ACTIVE

    @classmethod
    def of(cls, record: MemoryRecord) -> RecordRow:
        """The row of a full record."""
        return cls(record.id, record.content, record.layer, record.agent_id, record.importance,
                   record.confidence, record.created_at, record.last_accessed,
                   record.access_count, tuple(record.tags), record.privacy, record.source,
                   record.state)


@dataclass(frozen=True, slots=True)
class RowPage:
    """One page of table rows, the size of the whole result and each row's decayed importance.

    ``masked`` is True when the engine masked the rows' text itself (content, agent, tags,
    source: :meth:`engine.memory_engine.MemoryEngine.server_rows` under redaction), so the
    text never left the engine unmasked; False when the rows are as stored and the exit that
    shows them masks them.

    ``counted`` is False when ``total`` is only the matches found so far (at least the rows up
    to this page): a filtered page of a large server store, read from its newest records
    before Chroma has counted the filter; :meth:`~engine.memory_engine.MemoryEngine.server_count`
    gives the exact total.
    """

    rows: Sequence[RecordRow]
    total: int
    offset: int
    decayed_importance: Sequence[float] = ()
    masked: bool = False
    counted: bool = True


def _decimal(value: np.float32) -> float:
    """A float32 as the double of its shortest decimal form (numpy prints it round-trip)."""
    return float(str(value))


def page_rows(snapshot: ViewSnapshot, rows: npt.NDArray[np.intp]) -> list[RecordRow]:
    """The table rows of view ``rows`` (a page), read from the snapshot's columns."""
    return [RecordRow(str(record_id), str(content), LAYERS[layer], snapshot.agents[agent],
                      _decimal(importance), _decimal(confidence), float(created),
                      float(accessed), int(count), tuple(tags), PRIVACIES[privacy],
                      snapshot.sources[source], STATES[state])
            for record_id, content, layer, agent, importance, confidence, created, accessed,
            count, tags, privacy, source, state in zip(
                snapshot.id_array[rows], snapshot.content_array[rows], snapshot.layer[rows],
                snapshot.agent[rows], snapshot.importance[rows], snapshot.confidence[rows],
                snapshot.created_at[rows], snapshot.last_accessed[rows],
                snapshot.access_count[rows], snapshot.tag_array[rows], snapshot.privacy[rows],
                snapshot.source[rows], snapshot.state[rows], strict=True)]


def masked_rows(rows: Sequence[RecordRow], shown: Masking) -> list[RecordRow]:
    """``rows`` with their text masked by ``shown``: content, agent, tags and source (the
    user's words; the id, numbers and enums stay). Contents go through one batch pass."""
    contents = shown.many([row.content for row in rows])
    return [dataclasses.replace(row, content=content, agent_id=shown(row.agent_id),
                                tags=tuple(shown(tag) for tag in row.tags),
                                source=shown(row.source))
            for row, content in zip(rows, contents, strict=True)]


def select_rows(snapshot: ViewSnapshot, query: RecordQuery, *, now_ms: float,
                half_life_days: float = 30.0,
                shown: Masking | None = None) -> npt.NDArray[np.intp]:
    """Ordered rows of ``snapshot`` matching ``query`` (all of them, not one page).

    Args:
        shown: With redaction on, the masking function of the exit that shows the result
            (:attr:`engine.exits.ExitPolicy.shown`): the text, agent and tag filters and the
            text sorts then compare with the masked values, never the raw ones, so a filter
            cannot confirm text that the response masks.
    """
    mask = snapshot.alive.copy()
    if query.agent_id is not None:
        if shown is None:
            mask &= snapshot.agent == snapshot.agent_code(query.agent_id)
        else:
            codes = [code for code, name in enumerate(snapshot.agents)
                     if shown(name) == query.agent_id]
            mask &= np.isin(snapshot.agent, codes)
    if query.layer is not None:
        mask &= snapshot.layer == LAYERS.index(Layer(query.layer))
    if query.privacy is not None:
        mask &= snapshot.privacy == PRIVACIES.index(Privacy(query.privacy))
    if query.category is not None:
        mask &= snapshot.category == CATEGORIES.index(Category(query.category))
    if query.states != ALL_STATES:
        mask &= np.isin(snapshot.state, [STATES.index(state) for state in query.states])
    if query.importance_min is not None:
        mask &= snapshot.importance >= np.float32(query.importance_min) - 1e-7
    if query.importance_max is not None:
        mask &= snapshot.importance <= np.float32(query.importance_max) + 1e-7
    if query.created_from is not None:
        mask &= snapshot.created_at >= query.created_from
    if query.created_to is not None:
        mask &= snapshot.created_at <= query.created_to
    if not query.include_expired:
        mask &= snapshot.expires_at >= now_ms
    rows = np.flatnonzero(mask)
    if query.tags:
        wanted = set(query.tags)
        rows = rows[[wanted.issubset(snapshot.tags[r] if shown is None else
                                     {shown(tag) for tag in snapshot.tags[r]})
                     for r in rows.tolist()]] if len(rows) else rows
    if query.text and len(rows):
        needle = query.text.casefold()
        texts = [snapshot.contents[r] for r in rows.tolist()]
        rows = rows[[needle in text.casefold()
                     for text in (texts if shown is None else shown.many(texts))]]
    return _order(snapshot, rows, query, now_ms, half_life_days, shown or _raw)


def _raw(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class ServerFilter:
    """A :class:`RecordQuery` as Chroma filters, answered by Chroma without the view.

    ``where`` and ``where_document`` are Chroma's ``get`` arguments (None: no filter). The
    order is Chroma's own, insertion order, shown newest written first: the one order Chroma
    keeps without reading every record.
    """

    where: dict[str, Any] | None
    where_document: dict[str, Any] | None
    hidden_only: dict[str, Any] | None = None
    """When the state filter is the only filter: the ``where`` of the records it hides. If
    Chroma finds none, the page is the unfiltered one (no id selection: the first page of a
    store without archived records reads 200 records, not 100K ids)."""


_SERVER_SORT = (SortKey.CREATED, True)
"""The sort the server path stands in for: the default, newest first, shown as newest written
first (records are written in creation order except imports of older memories)."""
_NO_EXPIRY = -1.0  # the codec's stored value of expires_at = None


def server_filter(query: RecordQuery, *, now_ms: float) -> ServerFilter | str:
    """``query`` as Chroma ``where`` / ``where_document`` filters, or why it needs the view.

    Agent, layer, privacy, category, state, importance, created time and expiry are metadata
    of our schema (:mod:`engine.store.codec`); the text filter is a case-insensitive
    ``$regex`` on the document (Chroma's ``$contains`` is case-sensitive, the browser's text
    filter is not). Tags are one JSON string in the metadata, and every sort but the default
    orders by a column Chroma cannot sort by: those need the full view.

    Returns:
        The filters, or a sentence naming what needs the full view (for the window to show).
    """
    if query.sort_by is SortKey.CREATED and not query.descending:
        return "sorting oldest first"
    if (query.sort_by, query.descending) != _SERVER_SORT:
        return f"sorting by {query.sort_by.value.removesuffix('_id').replace('_', ' ')}"
    if query.tags:
        return "the tag filter"
    clauses: list[dict[str, Any]] = []
    hidden_only: dict[str, Any] | None = None
    for key, value in (("agent_id", query.agent_id),
                       ("layer", None if query.layer is None else Layer(query.layer).value),
                       ("privacy", None if query.privacy is None
                        else Privacy(query.privacy).value),
                       ("category", None if query.category is None
                        else Category(query.category).value)):
        if value is not None:
            clauses.append({key: {"$eq": value}})
    if query.states != ALL_STATES:
        # $nin, not $in: a record written before soft states has no state key and reads as
        # active (engine.store.codec); Chroma's $nin matches a missing key, $in does not.
        # Without active among them, $in leaves those keyless records out, as it should.
        if RecordState.ACTIVE in query.states:
            hidden = sorted(state.value for state in ALL_STATES - query.states)
            clauses.append({"state": {"$nin": hidden}})
            hidden_only = {"state": {"$in": hidden}}
        else:
            clauses.append({"state": {"$in": sorted(state.value for state in query.states)}})
    # float32 in the view, float64 in Chroma: the same 1e-7 slack as select_rows.
    if query.importance_min is not None:
        clauses.append({"importance": {"$gte": query.importance_min - 1e-7}})
    if query.importance_max is not None:
        clauses.append({"importance": {"$lte": query.importance_max + 1e-7}})
    if query.created_from is not None:
        clauses.append({"created_at": {"$gte": query.created_from}})
    if query.created_to is not None:
        clauses.append({"created_at": {"$lte": query.created_to}})
    if not query.include_expired:
        clauses.append({"$or": [{"expires_at": {"$eq": _NO_EXPIRY}},
                                {"expires_at": {"$gte": now_ms}}]})
    where = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
    document = {"$regex": "(?i)" + re.escape(query.text)} if query.text else None
    alone = len(clauses) == 1 and document is None
    return ServerFilter(where, document, hidden_only if alone else None)


def locate_row(snapshot: ViewSnapshot, query: RecordQuery, record_id: str, *, now_ms: float,
               half_life_days: float = 30.0, shown: Masking | None = None) -> int | None:
    """Position of ``record_id`` among the rows :func:`select_rows` orders for ``query``.

    None when the record is not in ``snapshot`` or ``query``'s filters leave it out. The records
    browser uses this to page to a linked record, and to widen its filters when they hide it.
    ``shown``: as for :func:`select_rows`.
    """
    ids = snapshot.id_array[: snapshot.n]
    found = np.flatnonzero(ids == record_id)
    if not len(found):
        return None
    rows = select_rows(snapshot, query, now_ms=now_ms, half_life_days=half_life_days,
                       shown=shown)
    position = np.flatnonzero(np.isin(rows, found))
    return int(position[0]) if len(position) else None


def _id_rank(snapshot: ViewSnapshot) -> npt.NDArray[np.intp]:
    """Each row's position in id order (kept with the snapshot: ``derived``).

    Sorted as fixed-width unicode, not Python objects: numpy then sorts without the GIL
    (17 ms at 100K) where an object sort held it for 78 ms, freezing the GUI thread on every
    page of the records browser.
    """
    ids = snapshot.id_array[: snapshot.n]
    order = np.argsort(np.where(ids == None, "", ids).astype(str), kind="stable")  # noqa: E711
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order), dtype=np.intp)
    return rank


def _order(snapshot: ViewSnapshot, rows: npt.NDArray[np.intp], query: RecordQuery,
           now_ms: float, half_life_days: float,
           shown: Callable[[str], str] = _raw) -> npt.NDArray[np.intp]:
    if len(rows) == 0:
        return rows
    # Tie-break by id ascending: sort by id first, then stable-sort by the key.
    rank = snapshot.derived("query.id_rank", _id_rank)
    rows = rows[np.argsort(rank[rows], kind="stable")]
    key = query.sort_by
    column: npt.NDArray[np.generic]
    if key is SortKey.ID:
        ordered = rows[::-1] if query.descending else rows
        return ordered
    if key is SortKey.DECAYED_IMPORTANCE:
        column = decayed_importance(snapshot.importance[rows], snapshot.created_at[rows],
                                    snapshot.access_count[rows], now_ms, half_life_days)
    elif key is SortKey.AGENT:
        column = np.asarray([shown(snapshot.agents[c]) for c in snapshot.agent[rows]],
                            dtype=object)
    elif key is SortKey.SOURCE:
        column = np.asarray([shown(snapshot.sources[c]) for c in snapshot.source[rows]],
                            dtype=object)
    elif key is SortKey.CONTENT:
        column = np.asarray([shown(snapshot.contents[r]).casefold() for r in rows.tolist()],
                            dtype=object)
    elif key is SortKey.LAYER:
        column = np.asarray([LAYERS[c].value for c in snapshot.layer[rows]], dtype=object)
    elif key is SortKey.PRIVACY:
        column = snapshot.privacy[rows]
    else:
        columns: dict[SortKey, npt.NDArray[np.generic]] = {
            SortKey.CREATED: snapshot.created_at,
            SortKey.LAST_ACCESSED: snapshot.last_accessed,
            SortKey.IMPORTANCE: snapshot.importance,
            SortKey.CONFIDENCE: snapshot.confidence,
            SortKey.ACCESS_COUNT: snapshot.access_count,
        }
        column = columns[key][rows]
    if query.descending:
        if column.dtype == object:
            # Stable descending on strings: rank ascending, then negate the rank.
            _, ranks = np.unique(column, return_inverse=True)
            order = np.argsort(-ranks, kind="stable")
        else:
            order = np.argsort(-column.astype(np.float64), kind="stable")
    else:
        order = np.argsort(column, kind="stable")
    result: npt.NDArray[np.intp] = rows[order]
    return result
