"""The procedural pattern miner on hand-built episodes."""

from __future__ import annotations

import pytest

from engine.clock import DeterministicClock
from engine.layers import Episode, mine_patterns
from engine.layers.procedural import pattern_id_for
from engine.memory_engine import MemoryEngine
from engine.records import Layer, NewMemory

STEPS = ["Open the toolbox", "pick the wrench", "tighten the bolt"]


def _episode(steps: list[str], outcome: bool | None, name: str, t: float) -> Episode:
    return Episode("bot", name, tuple(s.lower() for s in steps), outcome, t, t)


def test_three_successes_one_failure_gives_075() -> None:
    episodes = [_episode(STEPS, ok, f"e{i}", float(i))
                for i, ok in enumerate([True, True, False, True])]
    patterns = mine_patterns(episodes)
    assert len(patterns) == 1  # sub-runs with the same support are not closed
    [pattern] = patterns
    assert pattern.steps == tuple(s.lower() for s in STEPS)
    assert pattern.support == 4 and pattern.success_rate == 0.75
    assert pattern.pattern_id == pattern_id_for(pattern.steps)


def test_shared_prefix_is_its_own_pattern_and_single_runs_are_not() -> None:
    a = ["walk to door", "open door", "enter room"]
    b = ["walk to door", "open door", "close door"]
    episodes = [_episode(a, True, "1", 1), _episode(a, True, "2", 2),
                _episode(b, False, "3", 3), _episode(["x", "y"], True, "4", 4)]
    found = {p.steps: (p.support, p.success_rate) for p in mine_patterns(episodes)}
    assert found == {("walk to door", "open door", "enter room"): (2, 1.0),
                     ("walk to door", "open door"): (3, pytest.approx(2 / 3, abs=1e-6))}


def test_miner_in_the_engine_updates_success_rate(engine: MemoryEngine,
                                                  clock: DeterministicClock) -> None:
    service = engine.layers
    for i, ok in enumerate([True, True, False]):
        clock.advance(1000)
        service.record_episode("bot", STEPS, outcome=ok, episode_id=f"ep{i}")
    service.flush()
    [pattern] = service.patterns("bot")
    assert pattern.support == 3 and pattern.success_rate == pytest.approx(2 / 3, abs=1e-6)
    # One more success arrives: 3 of 4.
    clock.advance(1000)
    service.record_episode("bot", STEPS, outcome=True, episode_id="ep3")
    service.flush()
    record = engine.get(pattern.record_id)
    assert record.layer is Layer.PROCEDURAL
    meta = record.metadata["procedural"]
    assert meta["patternId"] == pattern.pattern_id and meta["successRate"] == 0.75
    assert meta["steps"] == [s.lower() for s in STEPS]
    assert "75% success over 4 episodes" in record.content
    history = service.pattern_history("bot", pattern.pattern_id)
    assert [(h.support, h.success_rate) for h in history] == \
        [(3, pytest.approx(2 / 3, abs=1e-6)), (4, 0.75)]


def test_step_by_step_episodes_assemble(engine: MemoryEngine, clock: DeterministicClock) -> None:
    for episode, ok in (("a", True), ("b", False)):
        for index, step in reversed(list(enumerate(STEPS))):  # logged out of order
            clock.advance(10)
            engine.add(NewMemory(f"{episode}: {step}", agent_id="bot", layer=Layer.EPISODIC,
                                 metadata={"episode": {"id": episode, "step": step,
                                                       "index": index}}))
        engine.add(NewMemory(f"{episode} done", agent_id="bot", layer=Layer.EPISODIC,
                             metadata={"episode": {"id": episode,
                                                   "outcome": "success" if ok else "failed"}}))
    engine.layers.flush()
    [pattern] = engine.layers.patterns("bot")
    assert pattern.steps == tuple(s.lower() for s in STEPS)
    assert pattern.success_rate == 0.5 and pattern.support == 2


def test_procedural_cap(capped_engine: MemoryEngine, clock: DeterministicClock) -> None:
    service = capped_engine.layers
    for i in range(3):
        service.record_episode("bot", ["a", "b", "c"], outcome=True, episode_id=f"x{i}")
    for i in range(2):
        service.record_episode("bot", ["p", "q"], outcome=False, episode_id=f"y{i}")
    service.flush()
    patterns = service.patterns("bot")
    assert [p.steps for p in patterns] == [("a", "b", "c")]  # the better supported one
    procedural = [r for r in capped_engine.list_records().records
                  if r.layer is Layer.PROCEDURAL]
    assert len(procedural) == 1
