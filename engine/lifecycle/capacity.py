"""Write-time capacity: the seed 002 §12 episodic ring buffer and strict retention caps.

The scheduled lifecycle (:mod:`.scheduler`) keeps a store within its caps *between* runs; the
checks here hold at the moment of a write, so a fast writer cannot outrun the schedule:

* **Episodic ring buffer** (``episodic_ring_max`` > 0, ``MEMORY_EPISODIC_RING_MAX``): an agent
  holds at most that many active episodic records. A write that would go past it rolls the
  oldest off (by ``created_at``, then id; seed 002 §12 "O(1) overwrite when full"): they are
  deleted with edit history (undoable) and announced with ``memory:episodic:rolled_off``.
  Paused and archived records are kept outside the ring, as they are outside retention caps.
* **Strict retention** (``retention_strict``, ``MEMORY_RETENTION_STRICT``): a write that would
  take an agent's semantic, social or procedural layer past its retention cap is refused.

The two errors of seed 002 §11 that guard capacity are raised here, before anything is
written (the caller's write is all or nothing):

* :class:`~engine.errors.CapacityExceeded` (``MEMORY_CAPACITY_EXCEEDED``): a strict cap would
  be exceeded, or one write brings more episodic records for an agent than its whole ring holds
  (the write would roll off its own records);
* :class:`~engine.errors.RetentionViolation` (``MEMORY_RETENTION_VIOLATION``): making room in
  the ring would roll off an episode still inside the episodic window
  (``episodic_window_ms``), which seed 002 §8 keeps untouched for temporal fidelity; the agent
  writes episodes faster than its ring holds them.

Everything here is a pure function of a view snapshot; :func:`plan_capacity` costs nothing when
neither the ring nor strict caps are configured, and one vectorised pass over the agent's rows
otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.config import MemoryConfig
from engine.errors import CapacityExceeded, RetentionViolation
from engine.records import Layer, MemoryRecord, RecordState
from engine.store.view import ACTIVE_CODE, LAYERS, ViewSnapshot

if TYPE_CHECKING:
    from engine.store import MemoryStore

__all__ = ["EVENT_ROLLED_OFF", "RING_ACTOR", "CapacityPlan", "plan_capacity", "roll_off"]

EVENT_ROLLED_OFF = "memory:episodic:rolled_off"
RING_ACTOR = "episodic-ring"  # the edit-history actor and deletion reason of a roll-off

_CAP_VARS = {Layer.SEMANTIC: "MEMORY_RETENTION_SEMANTIC_MAX",
             Layer.SOCIAL: "MEMORY_RETENTION_SOCIAL_MAX",
             Layer.PROCEDURAL: "MEMORY_RETENTION_PROCEDURAL_MAX"}


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """What a write must do to stay within capacity.

    Attributes:
        roll_off: Ids of episodic records to retire with the write, oldest first.
        agents: The agent of each id in ``roll_off``.
    """

    roll_off: tuple[str, ...] = ()
    agents: tuple[str, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.roll_off)


def _active_rows(snapshot: ViewSnapshot, agent_id: str, layer: Layer,
                 now_ms: float) -> npt.NDArray[np.intp]:
    """Rows of the agent's live, active, unexpired records of ``layer``."""
    n = snapshot.n
    code = snapshot.agent_code(agent_id)
    if code < 0:
        return np.empty(0, dtype=np.intp)
    mask = snapshot.alive[:n] & (snapshot.agent[:n] == code) \
        & (snapshot.layer[:n] == LAYERS.index(layer)) & (snapshot.state[:n] == ACTIVE_CODE) \
        & (snapshot.expires_at[:n] >= now_ms)
    return np.flatnonzero(mask)


def plan_capacity(snapshot: ViewSnapshot, incoming: Sequence[MemoryRecord],
                  config: MemoryConfig, now_ms: float, *,
                  keep: Collection[str] = ()) -> CapacityPlan:
    """Check ``incoming`` new records against the ring and strict caps (see the module doc).

    Args:
        snapshot: The store as it is before the write.
        incoming: The records the write creates (updates of stored records are not counted).
        config: Where the ring size, the caps and the episodic window come from.
        now_ms: The time of the write.
        keep: Ids the same write updates; they are never rolled off.

    Returns:
        The episodic records to roll off with the write (empty when there is room).

    Raises:
        CapacityExceeded: a strict cap would be exceeded, or the write alone overflows a ring.
        RetentionViolation: making room would roll off an episode inside the episodic window.
    """
    ring = config.episodic_ring_max
    if not incoming or (ring <= 0 and not config.retention_strict):
        return CapacityPlan()
    counts = Counter((r.agent_id, r.layer) for r in incoming if r.state is RecordState.ACTIVE)
    if config.retention_strict:
        _check_caps(snapshot, counts, config, now_ms)
    if ring <= 0:
        return CapacityPlan()
    roll_off: list[str] = []
    agents: list[str] = []
    for (agent_id, layer), count in sorted(counts.items()):
        if layer is not Layer.EPISODIC:
            continue
        if count > ring:
            raise CapacityExceeded(
                f"agent {agent_id!r}: one write of {count} episodic records is more than its "
                f"episodic ring holds (MEMORY_EPISODIC_RING_MAX={ring}); it would roll off its "
                "own records. Nothing was written: write fewer at a time or raise the ring")
        rows = _active_rows(snapshot, agent_id, Layer.EPISODIC, now_ms)
        if keep:
            rows = np.asarray([r for r in rows.tolist() if snapshot.id_array[r] not in keep],
                              dtype=np.intp)
        excess = len(rows) + count - ring
        if excess <= 0:
            continue
        oldest = sorted(rows.tolist(), key=lambda r: (float(snapshot.created_at[r]),
                                                      str(snapshot.id_array[r])))[:excess]
        window_start = now_ms - config.episodic_window_ms
        inside = [r for r in oldest if float(snapshot.created_at[r]) > window_start]
        if inside:
            # seed 002 §8 safety: recent episodes stay untouched for temporal fidelity
            raise RetentionViolation(
                f"agent {agent_id!r}: its episodic ring (MEMORY_EPISODIC_RING_MAX={ring}) is "
                f"full and making room would roll off {len(inside)} episode(s) still inside "
                f"the episodic window (MEMORY_EPISODIC_WINDOW_MS={config.episodic_window_ms}), "
                f"e.g. {snapshot.id_array[inside[0]]}. Nothing was written: raise the ring or "
                "shorten the window")
        roll_off.extend(str(snapshot.id_array[r]) for r in oldest)
        agents.extend([agent_id] * len(oldest))
    return CapacityPlan(tuple(roll_off), tuple(agents))


def _check_caps(snapshot: ViewSnapshot, counts: Counter[tuple[str, Layer]],
                config: MemoryConfig, now_ms: float) -> None:
    policy = config.retention_policy
    caps = {Layer.SEMANTIC: policy.semantic_max, Layer.SOCIAL: policy.social_max,
            Layer.PROCEDURAL: policy.procedural_max}
    for (agent_id, layer), count in sorted(counts.items()):
        cap = caps.get(layer)
        if cap is None:
            continue
        held = len(_active_rows(snapshot, agent_id, layer, now_ms))
        if held + count > cap:
            raise CapacityExceeded(
                f"agent {agent_id!r}: {count} new {layer.value} record(s) would make "
                f"{held + count}, over its retention cap of {cap} ({_CAP_VARS[layer]}) with "
                "MEMORY_RETENTION_STRICT on. Nothing was written: raise the cap, retire "
                "records, or turn strict retention off to let the lifecycle retire the least "
                "important ones")


def roll_off(store: MemoryStore, plan: CapacityPlan, ring: int,
             record_edits: Callable[[str, Sequence[tuple[MemoryRecord | None,
                                                          MemoryRecord | None]], str, str],
                                    object],
             batch_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Retire the records of ``plan`` (the caller holds the write lock and has just written).

    They are deleted with edit history in ``batch_id`` (so undoing the write's batch — an
    import — brings them back) by actor :data:`RING_ACTOR`; records that linked to them drop
    those ``related`` links (same batch), so no link dangles.

    Returns:
        The events to emit, ``(kind, fields)`` for :meth:`EventBus.emit_many`: a
        ``memory:record:deleted`` (reason :data:`RING_ACTOR`) and a ``memory:episodic:rolled_off``
        per record.
    """
    if not plan:
        return []
    gone = store.get_many(list(plan.roll_off))
    store.delete(list(plan.roll_off))
    record_edits("delete", [(r, None) for r in gone], RING_ACTOR, batch_id)
    # ``related`` links are symmetric (seed 001): the records a rolled-off one links to are
    # those that link back to it; they drop the link rather than keep one that dangles
    ids = set(plan.roll_off)
    linkers = sorted({link.id for r in gone for link in r.related} - ids)
    present = store.get_many([i for i in linkers if i in store.view]) if linkers else []
    unlinked = [(r, r.replace(related=tuple(link for link in r.related if link.id not in ids),
                              version=r.version + 1))
                for r in present if any(link.id in ids for link in r.related)]
    if unlinked:
        store.write([after for _, after in unlinked])  # metadata only: vectors stay
        record_edits("update", unlinked, RING_ACTOR, batch_id)
    events: list[tuple[str, dict[str, Any]]] = []
    for record in gone:
        common = {"record_id": record.id, "memory_hash": record.content_hash,
                  "agent_id": record.agent_id, "source": RING_ACTOR,
                  "decision_reason": RING_ACTOR}
        events.append(("memory:record:deleted", common))
        events.append((EVENT_ROLLED_OFF, {**common, "payload": {
            "id": record.id, "agentId": record.agent_id, "layer": record.layer.value,
            "ringMax": ring}}))
    return events
