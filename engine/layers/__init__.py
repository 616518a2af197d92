"""Layer handlers: social summaries, procedural pattern mining, the spatial index and adapter.

* :mod:`.social`     one summary per counterpart (sentiment trend, last contact, count)
* :mod:`.procedural` the pattern miner over episodic records (steps, success rate)
* :mod:`.spatial`    positions: radius / nearest queries, the physics-event adapter
* :mod:`.service`    the event hook that keeps them current and writes the derived records
* :mod:`.schema`     the ledger tables holding the evidence

``docs/layers.md`` describes the metadata conventions and where each thing is stored.
"""

from engine.layers.procedural import (
    Episode,
    EpisodeEvidence,
    Pattern,
    SuccessPoint,
    mine_patterns,
    success_series,
)
from engine.layers.service import (
    EVENT_PATTERN,
    EVENT_SOCIAL_SUMMARY,
    LayerContext,
    LayerService,
    PatternDetail,
    PatternHistoryPoint,
)
from engine.layers.social import SentimentPoint, SocialObservation, SocialSummary, summarize
from engine.layers.spatial import (
    SpatialAdapter,
    SpatialEvent,
    SpatialEventKind,
    SpatialHit,
    SpatialIndex,
)

__all__ = [
    "EVENT_PATTERN",
    "EVENT_SOCIAL_SUMMARY",
    "Episode",
    "EpisodeEvidence",
    "LayerContext",
    "LayerService",
    "Pattern",
    "PatternDetail",
    "PatternHistoryPoint",
    "SentimentPoint",
    "SocialObservation",
    "SocialSummary",
    "SpatialAdapter",
    "SpatialEvent",
    "SpatialEventKind",
    "SpatialHit",
    "SpatialIndex",
    "SuccessPoint",
    "mine_patterns",
    "success_series",
    "summarize",
]
