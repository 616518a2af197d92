"""The timeline's data: events as numpy columns, filter masks and binned counts (no Qt).

Events are kept in arrays sorted by time (history comes sorted from the ledger; live events are
appended and the arrays re-sorted only when one arrives out of order). Rendering never draws
one symbol per event: :meth:`TimelineData.bins` counts the visible, filtered events per lane
per time bucket with one ``np.bincount`` over the visible slice (``searchsorted`` bounds), so
the cost of a frame is proportional to the events on screen, never to a scatter of 100K items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine import Event
from ui.shared.format import phrase

__all__ = ["LANES", "TimelineData", "TimelineFilter", "lane_of"]

# Lanes by stage / kind, in pipeline order; every other kind goes to "other".
LANES: tuple[str, ...] = (
    "ingest-start", "embed-request", "candidate-match", "merge-applied", "merge-deferred",
    "ingest-skipped", "memory:record:created", "memory:record:updated", "review-approved",
    "review-rejected", "memory:retrieval", "memory:record:edited", "memory:record:deleted",
    "error", "other",
)
_LANE_INDEX = {name: i for i, name in enumerate(LANES)}
OTHER = len(LANES) - 1


def lane_of(kind: str) -> int:
    """The lane index of an event kind."""
    return _LANE_INDEX.get(kind, OTHER)


@dataclass(frozen=True, slots=True)
class TimelineFilter:
    """What the timeline shows; empty fields do not filter."""

    kinds: frozenset[str] = frozenset()
    record_id: str = ""
    source: str = ""
    decision: str = ""

    @property
    def active(self) -> bool:
        """True when any field filters."""
        return bool(self.kinds or self.record_id or self.source or self.decision)


class _Codes:
    """Interns strings to small integer codes (for vectorized filters)."""

    def __init__(self) -> None:
        self.values: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def code(self, value: str | None) -> int:
        key = value or ""
        found = self.index.get(key)
        if found is None:
            found = len(self.values)
            self.values.append(key)
            self.index[key] = found
        return found


class TimelineData:
    """Events of the timeline as columns (sorted by time) plus the event objects for details."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.events: list[Event] = []
        self.t = np.zeros(0)  # seconds (pyqtgraph's DateAxisItem unit)
        self.lane = np.zeros(0, np.int32)
        self._sources = _Codes()
        self._decisions = _Codes()
        self._records = _Codes()
        self._kinds = _Codes()
        self.source = np.zeros(0, np.int32)
        self.decision = np.zeros(0, np.int32)
        self.record = np.zeros(0, np.int32)
        self.kind = np.zeros(0, np.int32)
        self.mask = np.zeros(0, bool)
        self.filter = TimelineFilter()
        self._seen: set[str] = set()

    def __len__(self) -> int:
        return len(self.events)

    # -- loading -----------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every event."""
        self._reset()

    def extend(self, events: Sequence[Event]) -> int:
        """Add events (duplicates by ``event_id`` ignored); returns how many were new."""
        fresh: list[Event] = []
        for event in events:
            if event.event_id not in self._seen:
                self._seen.add(event.event_id)
                fresh.append(event)
        if not fresh:
            return 0
        t = np.fromiter((e.ts / 1000.0 for e in fresh), np.float64, len(fresh))
        columns = (
            np.fromiter((lane_of(e.kind) for e in fresh), np.int32, len(fresh)),
            np.fromiter((self._sources.code(e.source) for e in fresh), np.int32, len(fresh)),
            np.fromiter((self._decisions.code(e.decision_reason) for e in fresh), np.int32,
                        len(fresh)),
            np.fromiter((self._records.code(e.record_id) for e in fresh), np.int32, len(fresh)),
            np.fromiter((self._kinds.code(e.kind) for e in fresh), np.int32, len(fresh)),
        )
        in_order = not len(self.t) or t[0] >= self.t[-1]
        in_order = in_order and bool(np.all(np.diff(t) >= 0))
        self.events.extend(fresh)
        self.t = np.concatenate([self.t, t])
        self.lane = np.concatenate([self.lane, columns[0]])
        self.source = np.concatenate([self.source, columns[1]])
        self.decision = np.concatenate([self.decision, columns[2]])
        self.record = np.concatenate([self.record, columns[3]])
        self.kind = np.concatenate([self.kind, columns[4]])
        if not in_order:
            order = np.argsort(self.t, kind="stable")
            self.t = self.t[order]
            self.lane = self.lane[order]
            self.source = self.source[order]
            self.decision = self.decision[order]
            self.record = self.record[order]
            self.kind = self.kind[order]
            self.events = [self.events[int(i)] for i in order]
        self._refilter()
        return len(fresh)

    def set_arrays(self, t_seconds: npt.NDArray[np.float64], lanes: npt.NDArray[np.int32],
                   events: Sequence[Event]) -> None:
        """Load pre-built columns (the benchmark's synthetic events); ``t`` must be sorted."""
        self.clear()
        self.events = list(events)
        self.t = np.asarray(t_seconds, np.float64)
        self.lane = np.asarray(lanes, np.int32)
        n = len(self.t)
        self.source = np.zeros(n, np.int32)
        self.decision = np.zeros(n, np.int32)
        self.record = np.zeros(n, np.int32)
        self.kind = np.zeros(n, np.int32)
        self._refilter()

    # -- filters -----------------------------------------------------------------------------

    def set_filter(self, flt: TimelineFilter) -> None:
        """Show only events matching ``flt``."""
        self.filter = flt
        self._refilter()

    def _refilter(self) -> None:
        flt = self.filter
        mask = np.ones(len(self.t), bool)
        if flt.kinds:
            kind_codes = [self._kinds.index[k] for k in flt.kinds if k in self._kinds.index]
            mask &= np.isin(self.kind, kind_codes)
        for text, codes, column in ((flt.record_id, self._records, self.record),
                                    (flt.source, self._sources, self.source),
                                    (flt.decision, self._decisions, self.decision)):
            if text:  # substring match over the (few) distinct values, then one isin
                wanted = [i for i, v in enumerate(codes.values) if v and text in v]
                if codes is self._decisions:  # the words a person reads, or the code
                    words = text.casefold()
                    wanted = [i for i, v in enumerate(codes.values)
                              if v and (text in v or words in phrase(v).casefold())]
                mask &= np.isin(column, wanted)
        self.mask = mask

    def choices(self) -> dict[str, list[str]]:
        """Distinct kinds, sources and decisions seen (for the filter boxes)."""
        return {"kind": sorted(v for v in self._kinds.values if v),
                "source": sorted(v for v in self._sources.values if v),
                "decision": sorted(v for v in self._decisions.values if v)}

    # -- rendering and picking ---------------------------------------------------------------

    def span(self) -> tuple[float, float]:
        """First and last event time in seconds ((0, 1) when empty)."""
        if not len(self.t):
            return 0.0, 1.0
        return float(self.t[0]), float(max(self.t[-1], self.t[0] + 1e-3))

    def bins(self, x0: float, x1: float, nbins: int) -> tuple[npt.NDArray[np.float64],
                                                              npt.NDArray[np.int64]]:
        """Counts of visible filtered events per lane per bucket over ``[x0, x1)``.

        Returns:
            (edges ``(nbins + 1,)``, counts ``(len(LANES), nbins)``).
        """
        nbins = max(1, int(nbins))
        if x1 <= x0:
            x1 = x0 + 1e-3
        edges = np.linspace(x0, x1, nbins + 1)
        lo, hi = np.searchsorted(self.t, [x0, x1], side="left")
        t = self.t[lo:hi]
        lanes = self.lane[lo:hi]
        if self.filter.active:
            keep = self.mask[lo:hi]
            t, lanes = t[keep], lanes[keep]
        if not len(t):
            return edges, np.zeros((len(LANES), nbins), np.int64)
        bucket = ((t - x0) * (nbins / (x1 - x0))).astype(np.int64)
        np.clip(bucket, 0, nbins - 1, out=bucket)
        flat = np.bincount(lanes.astype(np.int64) * nbins + bucket,
                           minlength=len(LANES) * nbins)
        return edges, flat.reshape(len(LANES), nbins)

    def nearest(self, x: float, lane: int, tolerance: float) -> int | None:
        """Index of the visible event of ``lane`` closest to time ``x`` within ``tolerance``."""
        lo, hi = np.searchsorted(self.t, [x - tolerance, x + tolerance])
        if hi <= lo:
            return None
        idx = np.arange(lo, hi)
        keep = (self.lane[lo:hi] == lane) & self.mask[lo:hi]
        idx = idx[keep]
        if not len(idx):
            return None
        return int(idx[np.argmin(np.abs(self.t[idx] - x))])

    def matching(self, incoming_id: str) -> npt.NDArray[np.intp]:
        """Indices of the events of the pipeline run of ``incoming_id``.

        Events that name the run (``payload.incoming_id`` or ``record_id``) plus the events
        between the first and last of them that carry the same ``memory_hash`` (stage events
        such as ``embed-request`` name only the hash).
        """
        named = [i for i, e in enumerate(self.events)
                 if e.payload.get("incoming_id") == incoming_id or e.record_id == incoming_id]
        if not named:
            return np.zeros(0, np.intp)
        hashes = {self.events[i].memory_hash for i in named} - {None}
        lo, hi = min(named), max(named)
        return np.asarray([i for i in range(lo, hi + 1)
                           if i in set(named) or self.events[i].memory_hash in hashes], np.intp)
