"""Layer types and events read back from their JSON: exact round trips, clear refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.errors import ValidationError
from engine.events import Event
from engine.layers import (
    Episode,
    Pattern,
    PatternHistoryPoint,
    SentimentPoint,
    SocialSummary,
    SpatialHit,
    success_series,
)


def _through_json(document: object) -> object:
    return json.loads(json.dumps(document))


def test_round_trips_are_exact() -> None:
    summary = SocialSummary("robot", "mia", 2, 1.0, 2.0, 0.25, 0.1, "rising", 0.3, "PRIVATE",
                            (SentimentPoint(1.0, "r1", -0.2, -0.2),
                             SentimentPoint(2.0, "r2", None, -0.2)))
    assert SocialSummary.from_json(_through_json(summary.to_json())) == summary
    assert SocialSummary.from_json(_through_json(summary.to_json(with_series=False))) == \
        SocialSummary("robot", "mia", 2, 1.0, 2.0, 0.25, 0.1, "rising", 0.3, "PRIVATE")
    pattern = Pattern("bot", "pat-1", ("a", "b"), 4, 3, 1, 1.0, 9.0, ("e1", "e2", "e3", "e4"))
    assert Pattern.from_json(_through_json(pattern.to_json())) == pattern
    episode = Episode("bot", "e1", ("a", "b"), None, 1.0, 2.0, ("r1", "r2"))
    assert Episode.from_json(_through_json(episode.to_json())) == episode
    point = PatternHistoryPoint(5.0, 4, 0.75)
    assert PatternHistoryPoint.from_json(_through_json(point.to_json())) == point
    hit = SpatialHit("r1", 1.0, 2.0, 3.0, "robot", "spatial", 7.0, 0.5)
    assert SpatialHit.from_json(_through_json(hit.to_json())) == hit
    event = Event("e" * 32, "merge-applied", 12.5, seq=3, record_id="r1", similarity=0.9,
                  thresholds={"agent": 0.85}, payload={"incoming_id": "x"})
    assert Event.from_json(_through_json(event.to_json())) == event


@pytest.mark.parametrize(("kind", "document", "named"), [
    (SocialSummary, {"agent_id": "a", "interactions": 1}, "social summary.counterpart"),
    (Pattern, {"agent_id": "a", "pattern_id": "p", "steps": "a b", "support": 2,
               "successes": 1, "failures": 0, "first_seen": 1, "last_seen": 2}, "pattern"),
    (SpatialHit, {"record_id": "r", "x": "1", "y": 2, "z": 3, "agent_id": "a",
                  "layer": "spatial", "ts": 1}, "spatial point"),
    (Episode, {"agent_id": "a", "episode_id": "e", "steps": [], "outcome": "yes",
               "first_ts": 1, "last_ts": 2}, "episode"),
    (Event, {"event_id": "e", "kind": "k", "ts": True}, "ts"),
    (SocialSummary, ["not", "an", "object"], "social summary"),
])
def test_malformed_documents_name_what_is_wrong(kind: Any, document: object,
                                                named: str) -> None:
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        kind.from_json(document)


def test_success_series_runs_in_episode_time() -> None:
    episodes = [Episode("bot", f"e{i}", ("a", "b"), outcome, float(ts), float(ts))
                for i, (outcome, ts) in enumerate([(True, 30), (None, 10), (False, 20),
                                                   (True, 40)])]
    series = success_series(episodes)
    assert [p.episode_id for p in series] == ["e1", "e2", "e0", "e3"]  # sorted by time
    assert [p.support for p in series] == [1, 2, 3, 4]
    assert [p.success_rate for p in series] == [None, 0.0, 0.5, pytest.approx(2 / 3, abs=1e-6)]
