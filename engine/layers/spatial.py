"""The spatial layer (seed 002 §17 item 16, §13 F06/F07): an index of positions and an adapter.

Records with ``metadata.spatial = {"x", "y", "z"}`` (any layer; seed 002 §6) are points.
:class:`SpatialIndex` keeps them in numpy columns (id, x/y/z, agent code, time, layer code) of
its own — the shared columnar view holds no metadata — and answers radius and nearest queries
vectorized (squared distances over the whole column, ``argpartition`` for k-nearest). It is
filled from the store on first use and then kept current by the layer service's event hook.

:class:`SpatialAdapter` turns physics/collision events into spatial memories, ingesting only
the flagged kinds of seed 002 §13: a movement that crosses a region boundary (or an explicit
boundary crossing) and a contact with a *class* of object the agent has not touched before.
Ordinary movement inside a region and repeated contacts are not memories.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import ValidationError
from engine.layers import wire
from engine.records import Category, Layer, MemoryRecord, NewMemory, TrustTier, format_timestamp

__all__ = [
    "SpatialAdapter",
    "SpatialEvent",
    "SpatialEventKind",
    "SpatialHit",
    "SpatialIndex",
    "point_from_record",
]

_LAYERS: tuple[Layer, ...] = tuple(Layer)


def point_from_record(record: MemoryRecord) -> tuple[float, float, float] | None:
    """The record's ``metadata.spatial`` position, or None."""
    spatial = record.metadata.get("spatial")
    if not isinstance(spatial, Mapping):
        return None
    try:
        xyz = tuple(float(spatial[axis]) for axis in ("x", "y", "z"))
    except (KeyError, TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in xyz):
        return None
    return xyz[0], xyz[1], xyz[2]


@dataclass(frozen=True, slots=True)
class SpatialHit:
    """One point answered by a spatial query."""

    record_id: str
    x: float
    y: float
    z: float
    agent_id: str
    layer: str
    ts: float
    distance: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"record_id": self.record_id, "x": self.x, "y": self.y, "z": self.z,
                "agent_id": self.agent_id, "layer": self.layer, "ts": self.ts,
                "ts_iso": format_timestamp(self.ts), "distance": self.distance}

    @classmethod
    def from_json(cls, data: object) -> SpatialHit:
        """Parse :meth:`to_json` output. Raises ValidationError."""
        return wire.parse("spatial point", data, lambda d: cls(
            str(d["record_id"]), wire.number(d["x"]), wire.number(d["y"]), wire.number(d["z"]),
            str(d["agent_id"]), str(d["layer"]), wire.number(d["ts"]),
            wire.optional_number(d.get("distance"))))


F64 = npt.NDArray[np.float64]


class SpatialIndex:
    """Positions of spatial records, queryable by radius and nearest neighbours.

    Thread-safe: updates happen under a lock and allocate new arrays, so a query works on a
    consistent set of columns.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._xyz: F64 = np.zeros((3, 0), dtype=np.float64)  # rows x, y, z: contiguous axes
        self._ts: F64 = np.zeros(0, dtype=np.float64)
        self._agent: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._layer: npt.NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._agents: list[str] = []
        self._agent_code: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    def __contains__(self, record_id: object) -> bool:
        with self._lock:
            return record_id in self._row

    def update(self, records: Iterable[MemoryRecord]) -> None:
        """Add or move the points of ``records``; records without a position are removed."""
        with self._lock:
            gone: list[str] = []
            fresh: list[tuple[str, tuple[float, float, float], float, int, int]] = []
            for record in records:
                xyz = point_from_record(record)
                if xyz is None:
                    gone.append(record.id)
                    continue
                code = self._agent_code.setdefault(record.agent_id, len(self._agents))
                if code == len(self._agents):
                    self._agents.append(record.agent_id)
                row = self._row.get(record.id)
                if row is not None:
                    self._xyz = self._xyz.copy()
                    self._xyz[:, row] = xyz
                    self._ts = self._ts.copy()
                    self._ts[row] = record.created_at
                    self._agent = self._agent.copy()
                    self._agent[row] = code
                    self._layer = self._layer.copy()
                    self._layer[row] = _LAYERS.index(record.layer)
                else:
                    fresh.append((record.id, xyz, record.created_at, code,
                                  _LAYERS.index(record.layer)))
            if fresh:
                start = len(self._ids)
                for offset, (record_id, *_rest) in enumerate(fresh):
                    self._row[record_id] = start + offset
                    self._ids.append(record_id)
                self._xyz = np.hstack([self._xyz, np.asarray([f[1] for f in fresh]).T])
                self._ts = np.concatenate([self._ts, np.asarray([f[2] for f in fresh])])
                self._agent = np.concatenate([self._agent, np.asarray([f[3] for f in fresh],
                                                                      dtype=np.int32)])
                self._layer = np.concatenate([self._layer, np.asarray([f[4] for f in fresh],
                                                                      dtype=np.int8)])
            if gone:
                self.remove(gone)

    def remove(self, record_ids: Iterable[str]) -> None:
        """Drop the points of ``record_ids`` (unknown ids are ignored)."""
        with self._lock:
            rows = {self._row[i] for i in record_ids if i in self._row}
            if not rows:
                return
            keep = np.asarray([r for r in range(len(self._ids)) if r not in rows],
                              dtype=np.intp)
            self._ids = [self._ids[r] for r in keep.tolist()]
            self._row = {record_id: row for row, record_id in enumerate(self._ids)}
            self._xyz = self._xyz[:, keep]
            self._ts = self._ts[keep]
            self._agent = self._agent[keep]
            self._layer = self._layer[keep]

    def clear(self) -> None:
        """Forget every point."""
        with self._lock:
            self._reset()

    def _columns(self) -> tuple[list[str], F64, F64, npt.NDArray[np.int32],
                                npt.NDArray[np.int8], list[str]]:
        with self._lock:
            return (list(self._ids), self._xyz, self._ts, self._agent, self._layer,
                    list(self._agents))

    def _mask(self, n: int, ts: F64, agent: npt.NDArray[np.int32], agents: list[str],
              layer: npt.NDArray[np.int8], agent_id: str | None, layers: Sequence[Layer] | None,
              since: float | None, until: float | None) -> npt.NDArray[np.bool_]:
        mask = np.ones(n, dtype=bool)
        if agent_id is not None:
            code = agents.index(agent_id) if agent_id in agents else -1
            mask &= agent == code
        if layers:
            mask &= np.isin(layer, [_LAYERS.index(Layer(x)) for x in layers])
        if since is not None:
            mask &= ts >= since
        if until is not None:
            mask &= ts <= until
        return mask

    @staticmethod
    def _squared(xyz: F64, point: F64) -> F64:
        # Three contiguous passes; summing an (n, 3) array over axis 1 is several times slower.
        dx = xyz[0] - point[0]
        dy = xyz[1] - point[1]
        dz = xyz[2] - point[2]
        squared: F64 = dx * dx + dy * dy + dz * dz
        return squared

    @staticmethod
    def _center(center: Sequence[float]) -> F64:
        point = np.asarray(center, dtype=np.float64)
        if point.shape != (3,) or not np.all(np.isfinite(point)):
            raise ValidationError("center", list(center), "must be three finite numbers x, y, z")
        return point

    def within(self, center: Sequence[float], radius: float, *, agent_id: str | None = None,
               layers: Sequence[Layer] | None = None, since: float | None = None,
               until: float | None = None, limit: int | None = None) -> list[SpatialHit]:
        """Points within ``radius`` (inclusive) of ``center``, nearest first (ties by id)."""
        if not isinstance(radius, int | float) or not math.isfinite(radius) or radius < 0:
            raise ValidationError("radius", radius, "must be a finite number >= 0")
        point = self._center(center)
        ids, xyz, ts, agent, layer, agents = self._columns()
        mask = self._mask(len(ids), ts, agent, agents, layer, agent_id, layers, since, until)
        squared = self._squared(xyz, point)
        rows = np.flatnonzero(mask & (squared <= radius * radius))
        return self._hits(rows, squared, ids, xyz, ts, agent, layer, agents, limit)

    def nearest(self, center: Sequence[float], k: int, *, agent_id: str | None = None,
                layers: Sequence[Layer] | None = None, since: float | None = None,
                until: float | None = None) -> list[SpatialHit]:
        """The ``k`` points nearest to ``center``, nearest first (ties by id)."""
        if not isinstance(k, int) or k < 0:
            raise ValidationError("k", k, "must be an integer >= 0")
        point = self._center(center)
        ids, xyz, ts, agent, layer, agents = self._columns()
        mask = self._mask(len(ids), ts, agent, agents, layer, agent_id, layers, since, until)
        rows = np.flatnonzero(mask)
        if k == 0 or len(rows) == 0:
            return []
        squared = self._squared(xyz, point)
        if len(rows) > k:
            # Keep every row tied with the k-th distance so the id tie-break is exact.
            kth = np.partition(squared[rows], k - 1)[k - 1]
            rows = rows[squared[rows] <= kth]
        return self._hits(rows, squared, ids, xyz, ts, agent, layer, agents, k)

    def points(self, *, agent_id: str | None = None, layers: Sequence[Layer] | None = None,
               since: float | None = None, until: float | None = None,
               limit: int | None = None) -> list[SpatialHit]:
        """Every point (for the scatter view), oldest first."""
        ids, xyz, ts, agent, layer, agents = self._columns()
        mask = self._mask(len(ids), ts, agent, agents, layer, agent_id, layers, since, until)
        rows = np.flatnonzero(mask)
        order = np.lexsort((np.asarray([ids[r] for r in rows.tolist()], dtype=object)
                            if len(rows) else np.zeros(0), ts[rows]))
        rows = rows[order][:limit] if limit is not None else rows[order]
        return [SpatialHit(ids[r], float(xyz[0, r]), float(xyz[1, r]), float(xyz[2, r]),
                           agents[agent[r]], _LAYERS[layer[r]].value, float(ts[r]))
                for r in rows.tolist()]

    @staticmethod
    def _hits(rows: npt.NDArray[np.intp], squared: F64, ids: list[str], xyz: F64, ts: F64,
              agent: npt.NDArray[np.int32], layer: npt.NDArray[np.int8], agents: list[str],
              limit: int | None) -> list[SpatialHit]:
        if len(rows) == 0:
            return []
        keyed = sorted(rows.tolist(), key=lambda r: (float(squared[r]), ids[r]))
        if limit is not None:
            keyed = keyed[:limit]
        return [SpatialHit(ids[r], float(xyz[0, r]), float(xyz[1, r]), float(xyz[2, r]),
                           agents[agent[r]], _LAYERS[layer[r]].value, float(ts[r]),
                           round(math.sqrt(float(squared[r])), 9)) for r in keyed]


class SpatialEventKind(StrEnum):
    """Physics/collision events the adapter understands (seed 002 §13 F06/F07)."""

    MOVE = "move"  # a position update, with the region the agent is in
    BOUNDARY = "boundary"  # an explicit boundary crossing reported by the physics system
    CONTACT = "contact"  # a collision with an object of some class


@dataclass(frozen=True, slots=True)
class SpatialEvent:
    """One event from the physics or collision system.

    Attributes:
        kind: What happened.
        agent_id: The agent it happened to.
        position: Where (x, y, z).
        region: The region the agent is in (MOVE) or entered (BOUNDARY).
        previous_region: The region it left (BOUNDARY; MOVE works it out itself).
        contact_class: The class of object touched (CONTACT), e.g. ``"door"``.
        other: The specific object or agent touched, if known.
        ts: Epoch ms; None = the engine's clock.
        extra: Any other JSON-compatible detail, kept in the record's metadata.
    """

    kind: SpatialEventKind
    agent_id: str
    position: tuple[float, float, float]
    region: str | None = None
    previous_region: str | None = None
    contact_class: str | None = None
    other: str | None = None
    ts: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class SpatialAdapter:
    """Turns physics events into spatial memories, keeping only the flagged ones.

    Args:
        ingest: Stores a memory (the engine's ingest pipeline, or its plain ``add``).
        known_contacts: Contact classes each agent has already met (rebuilt from the store).
        last_regions: The region each agent was last seen in.
        source: Source instance recorded on the memories.
    """

    def __init__(self, ingest: Callable[[NewMemory], Any], *,
                 known_contacts: Mapping[str, Iterable[str]] | None = None,
                 last_regions: Mapping[str, str] | None = None,
                 source: str = "physics") -> None:
        self._ingest = ingest
        self._lock = threading.Lock()
        self._contacts: dict[str, set[str]] = {a: {c.casefold() for c in cs}
                                               for a, cs in (known_contacts or {}).items()}
        self._regions: dict[str, str] = dict(last_regions or {})
        self._source = source

    @staticmethod
    def state_from_records(records: Iterable[MemoryRecord]
                           ) -> tuple[dict[str, set[str]], dict[str, str]]:
        """Known contact classes and last regions per agent, from stored spatial memories."""
        contacts: dict[str, set[str]] = {}
        regions: dict[str, tuple[float, str]] = {}
        for record in records:
            event = record.metadata.get("spatialEvent")
            if not isinstance(event, Mapping):
                continue
            if isinstance(event.get("contactClass"), str):
                contacts.setdefault(record.agent_id, set()).add(event["contactClass"].casefold())
            if isinstance(event.get("region"), str):
                seen = regions.get(record.agent_id)
                if seen is None or record.created_at >= seen[0]:
                    regions[record.agent_id] = (record.created_at, event["region"])
        return contacts, {agent: region for agent, (_, region) in regions.items()}

    def handle(self, event: SpatialEvent) -> NewMemory | None:
        """Ingest ``event`` if it is flagged; returns the memory submitted, else None.

        What the ingest pipeline decided about it (inserted, merged into an earlier crossing of
        the same boundary, ...) is on the event stream like for any other memory.
        """
        x, y, z = (float(v) for v in event.position)
        if not all(math.isfinite(v) for v in (x, y, z)):
            raise ValidationError("position", list(event.position), "must be finite numbers")
        with self._lock:
            new = self._memory_for(event, (x, y, z))
        if new is None:
            return None
        self._ingest(new)
        return new

    def _memory_for(self, event: SpatialEvent, xyz: tuple[float, float, float]
                    ) -> NewMemory | None:
        where = f"({xyz[0]:g}, {xyz[1]:g}, {xyz[2]:g})"
        details: dict[str, Any] = {"kind": event.kind.value}
        if event.kind in (SpatialEventKind.MOVE, SpatialEventKind.BOUNDARY):
            if not event.region:
                raise ValidationError("region", event.region, f"a {event.kind} event needs one")
            before = event.previous_region if event.kind is SpatialEventKind.BOUNDARY \
                else self._regions.get(event.agent_id)
            self._regions[event.agent_id] = event.region
            if event.kind is SpatialEventKind.MOVE and before == event.region:
                return None  # seed 002 §13: movement inside a region is not flagged
            details.update({"kind": "boundary", "region": event.region,
                            "previousRegion": before})
            text = (f"Crossed from {before} into {event.region} at {where}" if before
                    else f"Entered {event.region} at {where}")
            importance, tags = 0.4, ("spatial", "boundary", event.region)
        else:
            if not event.contact_class:
                raise ValidationError("contact_class", event.contact_class,
                                      "a contact event needs one")
            klass = event.contact_class.casefold()
            known = self._contacts.setdefault(event.agent_id, set())
            if klass in known:
                return None  # seed 002 §13: only a *new* contact class is flagged
            known.add(klass)
            details.update({"contactClass": event.contact_class, "other": event.other})
            what = f"{event.contact_class} {event.other}" if event.other else event.contact_class
            text = f"First contact with a {what} at {where}"
            importance, tags = 0.6, ("spatial", "contact", event.contact_class)
        metadata: dict[str, Any] = {"spatial": {"x": xyz[0], "y": xyz[1], "z": xyz[2]},
                                    "spatialEvent": {**details, **dict(event.extra)}}
        return NewMemory(content=text, agent_id=event.agent_id, layer=Layer.SPATIAL,
                         importance=importance, category=Category.EPISODE,
                         tags=tuple(t[:64].replace(",", " ") for t in tags),
                         source=self._source, source_tier=TrustTier.AUTO,
                         created_at=event.ts, metadata=metadata)
