"""TTL expiry, seed 004 pruning modes and seed 002 retention caps, as pure selections.

Each function looks at a :class:`~engine.store.view.ViewSnapshot` and returns a
:class:`Selection` (which records to retire and why); the engine applies it (or, for a dry run,
only reports it). Nothing here writes.

Paused and archived records (issue 20, soft states) are kept by the user's choice: pruning by
importance and retention caps never select them, nor count them against a cap. TTL expiry
still applies to them: an expiry is a choice made for the record too, and pausing is "stop
retrieving", not "keep past its end" (resume does not bring back what expired meanwhile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from engine.config import RetentionPolicy
from engine.decay import decayed_importance
from engine.records import Layer
from engine.store.view import ACTIVE_CODE, LAYERS, ViewSnapshot

__all__ = [
    "AGGRESSIVE_FRACTION",
    "LOW_IMPORTANCE",
    "PruneMode",
    "Selection",
    "select_expired",
    "select_prune",
    "select_retention",
]

LOW_IMPORTANCE = 0.01  # seed 004 normal mode: keep only 1%+ decayed importance
AGGRESSIVE_FRACTION = 0.10  # seed 004 aggressive mode: also the bottom 10%


class PruneMode(StrEnum):
    """Seed 004 pruning modes."""

    GENTLE = "gentle"  # expired only
    NORMAL = "normal"  # expired + decayed importance < 0.01
    AGGRESSIVE = "aggressive"  # + the bottom 10% by decayed importance


@dataclass(frozen=True, slots=True)
class Selection:
    """Records chosen for retirement, with a reason each (``expired``, ``low_importance``...)."""

    ids: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def by_reason(self) -> dict[str, int]:
        """How many records per reason."""
        counts: dict[str, int] = {}
        for reason in self.reasons.values():
            counts[reason] = counts.get(reason, 0) + 1
        return counts


def _scope(snapshot: ViewSnapshot, agent_id: str | None, *,
           active_only: bool = False) -> npt.NDArray[np.bool_]:
    """Live rows (of ``agent_id``); with ``active_only``, not paused or archived."""
    mask = snapshot.alive[: snapshot.n].copy()
    if agent_id is not None:
        mask &= snapshot.agent[: snapshot.n] == snapshot.agent_code(agent_id)
    if active_only:
        mask &= snapshot.state[: snapshot.n] == ACTIVE_CODE
    return mask


def _selection(snapshot: ViewSnapshot, rows_reasons: list[tuple[npt.NDArray[np.intp], str]]
               ) -> Selection:
    reasons: dict[str, str] = {}
    for rows, reason in rows_reasons:
        for row in rows.tolist():
            reasons.setdefault(snapshot.ids[row], reason)
    ordered = tuple(sorted(reasons))
    return Selection(ordered, {i: reasons[i] for i in ordered})


def select_expired(snapshot: ViewSnapshot, now_ms: float, agent_id: str | None = None
                   ) -> Selection:
    """Records whose expiry lies before ``now_ms`` (seed 004 gentle; seed 002 TTL)."""
    mask = _scope(snapshot, agent_id) & (snapshot.expires_at[: snapshot.n] < now_ms)
    return _selection(snapshot, [(np.flatnonzero(mask), "expired")])


def decayed(snapshot: ViewSnapshot, now_ms: float, half_life_days: float) -> npt.NDArray[
        np.float64]:
    """Seed 004 decayed importance of every row."""
    n = snapshot.n
    return decayed_importance(snapshot.importance[:n], snapshot.created_at[:n],
                              snapshot.access_count[:n], now_ms, half_life_days)


def select_prune(snapshot: ViewSnapshot, mode: PruneMode, now_ms: float, *,
                 half_life_days: float, agent_id: str | None = None) -> Selection:
    """Seed 004 pruning.

    * gentle: expired records;
    * normal: + decayed importance below :data:`LOW_IMPORTANCE`;
    * aggressive: + the bottom :data:`AGGRESSIVE_FRACTION` (floor) of the remaining records of
      each agent by decayed importance (ties: older first, then id).

    Paused and archived records are only ever selected as expired (see the module doc).
    """
    mode = PruneMode(mode)
    n = snapshot.n
    expired = _scope(snapshot, agent_id) & (snapshot.expires_at[:n] < now_ms)
    chosen: list[tuple[npt.NDArray[np.intp], str]] = [(np.flatnonzero(expired), "expired")]
    if mode is PruneMode.GENTLE:
        return _selection(snapshot, chosen)
    scope = _scope(snapshot, agent_id, active_only=True)
    value = decayed(snapshot, now_ms, half_life_days)
    low = scope & ~expired & (value < LOW_IMPORTANCE)
    chosen.append((np.flatnonzero(low), "low_importance"))
    if mode is PruneMode.AGGRESSIVE:
        remaining = scope & ~expired & ~low
        for code in np.unique(snapshot.agent[:n][scope]).tolist():
            agent_rows = scope & (snapshot.agent[:n] == code)
            rows = np.flatnonzero(remaining & agent_rows)
            # seed 004: floor(count × 0.1) of the agent's memories, lowest decayed importance
            count = min(int(np.floor(int(agent_rows.sum()) * AGGRESSIVE_FRACTION)), len(rows))
            if count <= 0:
                continue
            keyed = sorted(rows.tolist(), key=lambda r: (float(value[r]),
                                                         float(snapshot.created_at[r]),
                                                         snapshot.ids[r]))
            chosen.append((np.asarray(keyed[:count], dtype=np.intp), "bottom_decile"))
    return _selection(snapshot, chosen)


def select_retention(snapshot: ViewSnapshot, policy: RetentionPolicy, now_ms: float, *,
                     half_life_days: float, agent_id: str | None = None) -> Selection:
    """Records over the per-layer caps (seed 002 ``retentionPolicy``), per agent.

    Each agent keeps its ``cap`` records of a capped layer with the highest decayed importance
    (ties: newer first, then id); the rest are selected with reason ``retention:<layer>``.
    Expired records are left to :func:`select_expired`; paused and archived ones are neither
    selected nor counted (they are kept outside the caps).
    """
    caps: dict[Layer, int | None] = {Layer.SEMANTIC: policy.semantic_max,
                                     Layer.SOCIAL: policy.social_max,
                                     Layer.PROCEDURAL: policy.procedural_max}
    n = snapshot.n
    scope = _scope(snapshot, agent_id, active_only=True) & (snapshot.expires_at[:n] >= now_ms)
    value = decayed(snapshot, now_ms, half_life_days)
    chosen: list[tuple[npt.NDArray[np.intp], str]] = []
    for layer, cap in caps.items():
        if cap is None:
            continue
        in_layer = scope & (snapshot.layer[:n] == LAYERS.index(layer))
        for code in np.unique(snapshot.agent[:n][in_layer]).tolist():
            rows = np.flatnonzero(in_layer & (snapshot.agent[:n] == code))
            if len(rows) <= cap:
                continue
            keyed = sorted(rows.tolist(), key=lambda r: (-float(value[r]),
                                                         -float(snapshot.created_at[r]),
                                                         snapshot.ids[r]))
            chosen.append((np.asarray(keyed[cap:], dtype=np.intp), f"retention:{layer.value}"))
    return _selection(snapshot, chosen)
