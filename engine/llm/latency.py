"""Latency percentiles (seed 000 §11): the engine's one implementation, in :mod:`engine.metrics`.

Re-exported here so ``engine.llm`` offers the seed's names next to the other seed 000 pieces.
"""

from engine.metrics import LatencySummary, PercentileSummary

__all__ = ["LatencySummary", "PercentileSummary"]
