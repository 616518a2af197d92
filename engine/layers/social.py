"""The social layer handler (seed 002 §17 item 15): one summary per counterpart.

Records about other agents or people carry ``metadata.social = {"otherAgentId", "sentiment"}``
(seed 002 §6; sentiment in -1..1, optional). Each such record is one *observation* of an
interaction. The handler keeps the observations in the ledger (they outlive compaction of the
raw records) and derives, per (agent, counterpart):

* ``interactions`` (count), ``first_contact`` / ``last_contact`` (epoch ms),
* ``mean_sentiment`` and ``sentiment`` — an exponentially weighted moving average over the
  observations in time order (``alpha`` = :data:`EWMA_ALPHA`, so recent contacts weigh more),
* ``trend`` — ``rising`` / ``falling`` / ``steady`` from the least-squares slope of the last
  :data:`TREND_WINDOW` sentiments against their index (per interaction, not per hour: agents
  talk in bursts), ``unknown`` with fewer than two sentiments,
* ``series`` — every observation with its running EWMA, for the social-graph view.

A summary is also written to the store as a social-layer record with a stable id (see
:func:`summary_record_id`) so it shows in the records browser; those records carry
``metadata.derivedBy = "social-handler"`` and are never read back as observations.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.layers import wire
from engine.layers.derived import DERIVED_KEY, is_derived
from engine.records import MemoryRecord, format_timestamp

__all__ = [
    "DERIVED_BY",
    "EWMA_ALPHA",
    "TREND_SLOPE",
    "TREND_WINDOW",
    "SentimentPoint",
    "SocialObservation",
    "SocialSummary",
    "capped",
    "observation_from_record",
    "summarize",
    "summary_content",
    "summary_metadata",
    "summary_record_id",
]

DERIVED_BY = "social-handler"
EWMA_ALPHA = 0.3
TREND_WINDOW = 10
TREND_SLOPE = 0.02
"""Sentiment change per interaction above which a trend is rising (below minus it: falling)."""


@dataclass(frozen=True, slots=True)
class SocialObservation:
    """One interaction with a counterpart, taken from a record.

    Attributes:
        record_id: The record it came from.
        agent_id: The agent that remembers it.
        counterpart: ``metadata.social.otherAgentId``.
        sentiment: -1..1, or None when the record gave none.
        ts: When it happened (the record's ``created_at``), epoch ms.
        privacy: The record's privacy partition.
    """

    record_id: str
    agent_id: str
    counterpart: str
    sentiment: float | None
    ts: float
    privacy: str = "PRIVATE"


@dataclass(frozen=True, slots=True)
class SentimentPoint:
    """One point of a sentiment trend series."""

    ts: float
    record_id: str
    sentiment: float | None
    ewma: float | None

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"ts": self.ts, "ts_iso": format_timestamp(self.ts), "record_id": self.record_id,
                "sentiment": self.sentiment, "ewma": self.ewma}

    @classmethod
    def from_json(cls, data: object) -> SentimentPoint:
        """Parse :meth:`to_json` output. Raises ValidationError."""
        return wire.parse("sentiment point", data, lambda d: cls(
            wire.number(d["ts"]), str(d["record_id"]), wire.optional_number(d.get("sentiment")),
            wire.optional_number(d.get("ewma"))))


@dataclass(frozen=True, slots=True)
class SocialSummary:
    """What an agent knows about its relationship with one counterpart."""

    agent_id: str
    counterpart: str
    interactions: int
    first_contact: float
    last_contact: float
    sentiment: float | None
    mean_sentiment: float | None
    trend: str
    slope: float | None
    privacy: str
    series: tuple[SentimentPoint, ...] = ()

    @property
    def record_id(self) -> str:
        """Id of the summary record in the store."""
        return summary_record_id(self.agent_id, self.counterpart)

    def to_json(self, *, with_series: bool = True) -> dict[str, Any]:
        """Wire form (the series only when asked)."""
        out: dict[str, Any] = {
            "agent_id": self.agent_id, "counterpart": self.counterpart,
            "record_id": self.record_id, "interactions": self.interactions,
            "first_contact": self.first_contact,
            "first_contact_iso": format_timestamp(self.first_contact),
            "last_contact": self.last_contact,
            "last_contact_iso": format_timestamp(self.last_contact),
            "sentiment": self.sentiment, "mean_sentiment": self.mean_sentiment,
            "trend": self.trend, "slope": self.slope, "privacy": self.privacy,
        }
        if with_series:
            out["series"] = [p.to_json() for p in self.series]
        return out

    @classmethod
    def from_json(cls, data: object) -> SocialSummary:
        """Parse :meth:`to_json` output (the series is empty when it was left out).

        Raises:
            ValidationError: naming the missing or mistyped field.
        """
        return wire.parse("social summary", data, lambda d: cls(
            agent_id=str(d["agent_id"]), counterpart=str(d["counterpart"]),
            interactions=int(d["interactions"]), first_contact=wire.number(d["first_contact"]),
            last_contact=wire.number(d["last_contact"]),
            sentiment=wire.optional_number(d.get("sentiment")),
            mean_sentiment=wire.optional_number(d.get("mean_sentiment")),
            trend=str(d.get("trend", "unknown")), slope=wire.optional_number(d.get("slope")),
            privacy=str(d.get("privacy", "PRIVATE")),
            series=tuple(SentimentPoint.from_json(p) for p in d.get("series") or ())))


def summary_record_id(agent_id: str, counterpart: str) -> str:
    """Stable id of the summary record of (agent, counterpart)."""
    digest = hashlib.sha256(f"{agent_id}\x1f{counterpart}".encode()).hexdigest()[:32]
    return f"social-summary-{digest}"


def observation_from_record(record: MemoryRecord) -> SocialObservation | None:
    """The observation a record carries, or None (no ``social.otherAgentId``, or derived)."""
    if is_derived(record.metadata):
        return None
    social = record.metadata.get("social")
    if not isinstance(social, Mapping):
        return None
    other = social.get("otherAgentId")
    if not isinstance(other, str) or not other.strip():
        return None
    sentiment = social.get("sentiment")
    value = float(sentiment) if isinstance(sentiment, int | float) \
        and not isinstance(sentiment, bool) and math.isfinite(sentiment) else None
    return SocialObservation(record.id, record.agent_id, other.strip(), value,
                             record.created_at, record.privacy.value)


def _trend(sentiments: Sequence[float]) -> tuple[str, float | None]:
    window = np.asarray(sentiments[-TREND_WINDOW:], dtype=np.float64)
    if len(window) < 2:
        return "unknown", None
    index = np.arange(len(window), dtype=np.float64)
    slope = float(np.polyfit(index, window, 1)[0])
    if slope > TREND_SLOPE:
        return "rising", slope
    if slope < -TREND_SLOPE:
        return "falling", slope
    return "steady", slope


def summarize(observations: Iterable[SocialObservation]) -> list[SocialSummary]:
    """Summaries per (agent, counterpart), sorted by agent, then last contact (newest first).

    Observations are taken in time order (ties by record id), so the result does not depend on
    the order they are given in.
    """
    groups: dict[tuple[str, str], list[SocialObservation]] = {}
    for obs in observations:
        groups.setdefault((obs.agent_id, obs.counterpart), []).append(obs)
    out: list[SocialSummary] = []
    for (agent_id, counterpart), items in groups.items():
        items.sort(key=lambda o: (o.ts, o.record_id))
        ewma: float | None = None
        series: list[SentimentPoint] = []
        sentiments: list[float] = []
        for obs in items:
            if obs.sentiment is not None:
                sentiments.append(obs.sentiment)
                ewma = obs.sentiment if ewma is None else \
                    EWMA_ALPHA * obs.sentiment + (1.0 - EWMA_ALPHA) * ewma
            series.append(SentimentPoint(obs.ts, obs.record_id, obs.sentiment,
                                         None if ewma is None else round(ewma, 6)))
        trend, slope = _trend(sentiments)
        privacy = "PUBLIC" if all(o.privacy == "PUBLIC" for o in items) else "PRIVATE"
        out.append(SocialSummary(
            agent_id=agent_id, counterpart=counterpart, interactions=len(items),
            first_contact=items[0].ts, last_contact=items[-1].ts,
            sentiment=None if ewma is None else round(ewma, 6),
            mean_sentiment=round(float(np.mean(sentiments)), 6) if sentiments else None,
            trend=trend, slope=None if slope is None else round(slope, 6), privacy=privacy,
            series=tuple(series)))
    out.sort(key=lambda s: (s.agent_id, -s.last_contact, -s.interactions, s.counterpart))
    return out


def capped(summaries: Sequence[SocialSummary], cap: int | None) -> list[SocialSummary]:
    """The summaries kept under ``socialMax`` (seed 002 retentionPolicy), per agent.

    An agent keeps the ``cap`` counterparts it was in contact with most recently (ties: more
    interactions, then name); the others' summary records are dropped, their evidence stays.
    """
    if cap is None:
        return list(summaries)
    kept: list[SocialSummary] = []
    per_agent: dict[str, int] = {}
    for summary in sorted(summaries, key=lambda s: (s.agent_id, -s.last_contact,
                                                    -s.interactions, s.counterpart)):
        count = per_agent.get(summary.agent_id, 0)
        if count < cap:
            kept.append(summary)
            per_agent[summary.agent_id] = count + 1
    return kept


def summary_content(summary: SocialSummary) -> str:
    """The human-readable content of a summary record."""
    when = (format_timestamp(summary.last_contact) or "")[:10]
    plural = "interaction" if summary.interactions == 1 else "interactions"
    text = f"Relationship with {summary.counterpart}: {summary.interactions} {plural}, " \
           f"last contact {when}"
    if summary.sentiment is not None:
        text += f"; sentiment {summary.sentiment:+.2f} ({summary.trend})"
    return text


def summary_metadata(summary: SocialSummary) -> dict[str, Any]:
    """Metadata of a summary record: seed 002 ``social`` plus the summary's figures."""
    social: dict[str, Any] = {
        "otherAgentId": summary.counterpart, "interactionCount": summary.interactions,
        "firstContact": summary.first_contact, "lastContact": summary.last_contact,
        "trend": summary.trend,
    }
    if summary.sentiment is not None:
        social["sentiment"] = max(-1.0, min(1.0, summary.sentiment))
        social["meanSentiment"] = summary.mean_sentiment
        social["trendSlope"] = summary.slope
    return {"social": social, DERIVED_KEY: DERIVED_BY}

