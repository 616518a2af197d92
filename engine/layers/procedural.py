"""The procedural pattern miner (seed 002 §17 item 14).

Evidence comes from an agent's *episodic* records whose ``metadata.episode`` describes what the
agent did. Two shapes are read, so an agent can log a whole episode at its end or each action as
it happens:

* a whole episode: ``{"id"?: str, "steps": [str, ...], "outcome"?: "success" | "failure" | bool}``
  (``id`` defaults to the record id);
* one action of an episode: ``{"id": str, "step": str, "index"?: number}``, and the outcome on
  any record of the episode: ``{"id": str, "outcome": ...}``.

Steps are compared after :func:`engine.text.normalize` (case, spacing, trailing punctuation);
a step may also be an object with an ``action`` (or ``name``) string.

Mining (:func:`mine_patterns`): a *pattern* is a contiguous run of at least ``min_steps`` steps
that occurs in at least ``min_support`` distinct episodes (its *support*). Only *closed*
patterns are kept — a run is dropped when a longer run containing it has the same support (it
adds nothing: ``a→b`` inside ``a→b→c`` seen in the same four episodes). A pattern's success rate
is ``successes / (successes + failures)`` over the supporting episodes with a known outcome
(None when none is known). Patterns are ranked by support, then length, then success rate, and
each agent keeps at most ``proceduralMax`` of them (seed 002 retentionPolicy).

Each kept pattern becomes a procedural record (``metadata.procedural = {"patternId",
"successRate", "steps", ...}``, seed 002 §6); its ``patternId`` is a hash of the normalized
steps, so it is stable across runs and agents. Every change of a pattern's support or success
rate is appended to the ledger's history for the pattern-list view.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.layers import wire
from engine.layers.derived import DERIVED_KEY, is_derived
from engine.records import Layer, MemoryRecord, format_timestamp
from engine.text import normalize

__all__ = [
    "DERIVED_BY",
    "Episode",
    "EpisodeEvidence",
    "Pattern",
    "SuccessPoint",
    "assemble_episodes",
    "evidence_from_record",
    "mine_patterns",
    "pattern_content",
    "pattern_id_for",
    "pattern_metadata",
    "pattern_record_id",
    "success_series",
]

DERIVED_BY = "pattern-miner"
_SUCCESS = frozenset({"success", "succeeded", "successful", "ok", "pass", "passed", "done",
                      "win", "won", "true", "yes"})
_FAILURE = frozenset({"failure", "failed", "fail", "error", "errored", "loss", "lost",
                      "false", "no", "aborted"})


@dataclass(frozen=True, slots=True)
class EpisodeEvidence:
    """What one episodic record says about one episode.

    Attributes:
        record_id: The record.
        agent_id: Its agent.
        episode_id: The episode it belongs to.
        ts: The record's ``created_at``.
        step_index: Position of a single step, if given.
        steps: Normalized steps (a whole episode, one step, or none).
        outcome: True (success), False (failure) or None (not stated here).
    """

    record_id: str
    agent_id: str
    episode_id: str
    ts: float
    step_index: float | None
    steps: tuple[str, ...]
    outcome: bool | None


@dataclass(frozen=True, slots=True)
class Episode:
    """One assembled episode: its steps in order, its outcome and the records it came from."""

    agent_id: str
    episode_id: str
    steps: tuple[str, ...]
    outcome: bool | None
    first_ts: float
    last_ts: float
    record_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"agent_id": self.agent_id, "episode_id": self.episode_id,
                "steps": list(self.steps), "outcome": self.outcome, "first_ts": self.first_ts,
                "last_ts": self.last_ts, "last_ts_iso": format_timestamp(self.last_ts),
                "record_ids": list(self.record_ids)}

    @classmethod
    def from_json(cls, data: object) -> Episode:
        """Parse :meth:`to_json` output. Raises ValidationError."""
        def build(d: Mapping[str, Any]) -> Episode:
            outcome = d.get("outcome")
            if outcome is not None and not isinstance(outcome, bool):
                raise TypeError(f"outcome must be true, false or null, got {outcome!r}")
            return cls(str(d["agent_id"]), str(d["episode_id"]), wire.texts(d["steps"]),
                       outcome, wire.number(d["first_ts"]), wire.number(d["last_ts"]),
                       wire.texts(d.get("record_ids", [])))

        return wire.parse("episode", data, build)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A recurring run of steps of one agent.

    Attributes:
        agent_id: The agent.
        pattern_id: Stable id from the steps (:func:`pattern_id_for`).
        steps: The steps, normalized.
        support: Number of distinct episodes containing the run.
        successes: Supporting episodes that succeeded.
        failures: Supporting episodes that failed.
        first_seen: Earliest supporting episode (epoch ms).
        last_seen: Latest supporting episode (epoch ms).
        episode_ids: The supporting episodes.
    """

    agent_id: str
    pattern_id: str
    steps: tuple[str, ...]
    support: int
    successes: int
    failures: int
    first_seen: float
    last_seen: float
    episode_ids: tuple[str, ...] = field(default=())

    @property
    def success_rate(self) -> float | None:
        """Successes over episodes with a known outcome (None when none is known)."""
        known = self.successes + self.failures
        return None if known == 0 else round(self.successes / known, 6)

    @property
    def record_id(self) -> str:
        """Id of the pattern's procedural record."""
        return pattern_record_id(self.agent_id, self.pattern_id)

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {
            "agent_id": self.agent_id, "pattern_id": self.pattern_id,
            "record_id": self.record_id, "steps": list(self.steps), "support": self.support,
            "successes": self.successes, "failures": self.failures,
            "success_rate": self.success_rate, "first_seen": self.first_seen,
            "first_seen_iso": format_timestamp(self.first_seen), "last_seen": self.last_seen,
            "last_seen_iso": format_timestamp(self.last_seen),
            "episode_ids": list(self.episode_ids),
        }

    @classmethod
    def from_json(cls, data: object) -> Pattern:
        """Parse :meth:`to_json` output (``success_rate`` is recomputed). Raises ValidationError."""
        return wire.parse("pattern", data, lambda d: cls(
            str(d["agent_id"]), str(d["pattern_id"]), wire.texts(d["steps"]),
            int(d["support"]), int(d["successes"]), int(d["failures"]),
            wire.number(d["first_seen"]), wire.number(d["last_seen"]),
            wire.texts(d.get("episode_ids", []))))


@dataclass(frozen=True, slots=True)
class SuccessPoint:
    """A pattern's running figures just after one of its episodes (the pattern-list plot).

    Attributes:
        ts: When the episode ended (epoch ms).
        episode_id: The episode.
        outcome: Its outcome (None: not stated).
        support: Episodes so far.
        success_rate: Successes over episodes with a known outcome so far (None: none known).
    """

    ts: float
    episode_id: str
    outcome: bool | None
    support: int
    success_rate: float | None


def success_series(episodes: Iterable[Episode]) -> list[SuccessPoint]:
    """The running success rate over ``episodes`` (a pattern's supporting ones) in time order.

    Unlike the ledger's pattern history, which records when the miner *noticed* a change, this
    is in episode time: a store imported in one go still shows how the procedure fared.
    """
    points: list[SuccessPoint] = []
    successes = failures = 0
    for number, episode in enumerate(sorted(episodes, key=lambda e: (e.last_ts,
                                                                      e.episode_id)), 1):
        successes += episode.outcome is True
        failures += episode.outcome is False
        known = successes + failures
        points.append(SuccessPoint(episode.last_ts, episode.episode_id, episode.outcome, number,
                                   None if known == 0 else round(successes / known, 6)))
    return points


def pattern_id_for(steps: Sequence[str]) -> str:
    """Stable pattern id of a normalized step sequence."""
    return "pat-" + hashlib.sha256("\x1f".join(steps).encode()).hexdigest()[:16]


def pattern_record_id(agent_id: str, pattern_id: str) -> str:
    """Id of the procedural record of ``pattern_id`` for ``agent_id``."""
    digest = hashlib.sha256(f"{agent_id}\x1f{pattern_id}".encode()).hexdigest()[:32]
    return f"procedural-pattern-{digest}"


def _step_text(step: object) -> str | None:
    if isinstance(step, Mapping):
        step = step.get("action", step.get("name"))
    if not isinstance(step, str):
        return None
    text = normalize(step)
    return text or None


def _outcome(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _SUCCESS:
            return True
        if word in _FAILURE:
            return False
    return None


def evidence_from_record(record: MemoryRecord) -> EpisodeEvidence | None:
    """The episode evidence of an episodic record, or None when it has none."""
    if record.layer is not Layer.EPISODIC or is_derived(record.metadata):
        return None
    episode = record.metadata.get("episode")
    if not isinstance(episode, Mapping):
        return None
    raw_id = episode.get("id")
    episode_id = raw_id.strip() if isinstance(raw_id, str) and raw_id.strip() else record.id
    steps: list[str] = []
    raw_steps = episode.get("steps")
    if isinstance(raw_steps, list):
        steps = [s for s in (_step_text(x) for x in raw_steps) if s is not None]
    single = _step_text(episode.get("step"))
    if single is not None:
        steps.append(single)
    index = episode.get("index")
    step_index = float(index) if isinstance(index, int | float) and \
        not isinstance(index, bool) and math.isfinite(index) else None
    outcome = _outcome(episode.get("outcome"))
    if not steps and outcome is None:
        return None
    return EpisodeEvidence(record.id, record.agent_id, episode_id, record.created_at,
                           step_index, tuple(steps), outcome)


def assemble_episodes(evidence: Iterable[EpisodeEvidence]) -> list[Episode]:
    """Group evidence into episodes: steps by (index, time, record id); last stated outcome."""
    groups: dict[tuple[str, str], list[EpisodeEvidence]] = {}
    for item in evidence:
        groups.setdefault((item.agent_id, item.episode_id), []).append(item)
    episodes = []
    for (agent_id, episode_id), items in groups.items():
        ordered = sorted(items, key=lambda e: (e.step_index is None,
                                               e.step_index if e.step_index is not None else 0.0,
                                               e.ts, e.record_id))
        steps = tuple(step for item in ordered for step in item.steps)
        outcome: bool | None = None
        for item in sorted(items, key=lambda e: (e.ts, e.record_id)):
            if item.outcome is not None:
                outcome = item.outcome
        episodes.append(Episode(agent_id, episode_id, steps, outcome,
                                min(e.ts for e in items), max(e.ts for e in items),
                                tuple(item.record_id for item in ordered)))
    episodes.sort(key=lambda e: (e.agent_id, e.first_ts, e.episode_id))
    return episodes


@dataclass(slots=True)
class _Tally:
    episodes: list[str] = field(default_factory=list)
    successes: int = 0
    failures: int = 0
    first: float = math.inf
    last: float = -math.inf


def mine_patterns(episodes: Iterable[Episode], *, min_support: int = 2, min_steps: int = 2,
                  max_steps: int = 12, cap: int | None = None) -> list[Pattern]:
    """Closed recurring step runs per agent, ranked; at most ``cap`` per agent.

    Args:
        min_support: Distinct episodes a run must occur in.
        min_steps: Shortest run considered.
        max_steps: Longest run considered (bounds the work per episode).
        cap: ``proceduralMax``; None keeps every pattern.
    """
    tallies: dict[tuple[str, tuple[str, ...]], _Tally] = {}
    for episode in episodes:
        steps = episode.steps
        runs: set[tuple[str, ...]] = set()
        for length in range(min_steps, min(max_steps, len(steps)) + 1):
            for start in range(len(steps) - length + 1):
                runs.add(steps[start:start + length])
        for run in runs:
            tally = tallies.setdefault((episode.agent_id, run), _Tally())
            tally.episodes.append(episode.episode_id)
            tally.successes += episode.outcome is True
            tally.failures += episode.outcome is False
            tally.first = min(tally.first, episode.first_ts)
            tally.last = max(tally.last, episode.last_ts)
    frequent = {key: t for key, t in tallies.items() if len(t.episodes) >= min_support}
    # Closed patterns only: drop a run whose longer super-run has the same support.
    redundant: set[tuple[str, tuple[str, ...]]] = set()
    for (agent_id, run), tally in frequent.items():
        support = len(tally.episodes)
        for length in range(min_steps, len(run)):
            for start in range(len(run) - length + 1):
                sub = (agent_id, run[start:start + length])
                other = frequent.get(sub)
                if other is not None and len(other.episodes) == support:
                    redundant.add(sub)
    patterns = [
        Pattern(agent_id, pattern_id_for(run), run, len(t.episodes), t.successes, t.failures,
                t.first, t.last, tuple(sorted(t.episodes)))
        for (agent_id, run), t in frequent.items() if (agent_id, run) not in redundant
    ]
    patterns.sort(key=lambda p: (p.agent_id, -p.support, -len(p.steps),
                                 -(p.success_rate if p.success_rate is not None else -1.0),
                                 p.pattern_id))
    if cap is None:
        return patterns
    kept: list[Pattern] = []
    per_agent: dict[str, int] = {}
    for pattern in patterns:
        count = per_agent.get(pattern.agent_id, 0)
        if count < cap:
            kept.append(pattern)
            per_agent[pattern.agent_id] = count + 1
    return kept


def pattern_content(pattern: Pattern) -> str:
    """Human-readable content of a pattern's record."""
    rate = pattern.success_rate
    known = "outcome unknown" if rate is None else f"{round(rate * 100)}% success"
    return f"Procedure ({known} over {pattern.support} episodes): " + " → ".join(pattern.steps)


def pattern_metadata(pattern: Pattern) -> dict[str, Any]:
    """Metadata of a pattern record (seed 002 §6 ``procedural`` plus support figures)."""
    procedural: dict[str, Any] = {
        "patternId": pattern.pattern_id, "steps": list(pattern.steps),
        "support": pattern.support, "successes": pattern.successes,
        "failures": pattern.failures, "firstSeen": pattern.first_seen,
        "lastSeen": pattern.last_seen,
    }
    if pattern.success_rate is not None:
        procedural["successRate"] = pattern.success_rate
    return {"procedural": procedural, DERIVED_KEY: DERIVED_BY}
