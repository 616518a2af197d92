"""LoCoMo evaluation on a small generated file: splits, hits, merged records' dia_ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import InputFormatError
from engine.locomo import evaluate_locomo, split_of

TOPICS = ["pottery", "guitar", "sailing", "chess", "baking", "hiking", "painting"]


def _conversation(i: int) -> dict[str, object]:
    topic = TOPICS[i % len(TOPICS)]
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": f"I took up {topic} last week."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "The weather was grey all weekend."},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "My sister moved to a new flat in town."},
    ]
    return {
        "sample_id": f"conv-{i}",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                         "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
        "observation": {"session_1_observation": {
            "Ann": [[f"Ann took up {topic} last week.", "D1:1"],
                    ["Ann's sister moved to a new flat.", "D1:3"]],
            "Bob": [["Bob found the weekend weather grey.", "D1:2"]]}},
        "qa": [{"question": f"What hobby did Ann take up ({topic})?", "evidence": ["D1:1"],
                "category": 4},
               {"question": "Is this unanswerable?", "evidence": ["D1:2"], "category": 5}],
    }


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([_conversation(i) for i in range(7)]), encoding="utf-8")
    return path


def test_split_of_keeps_three_of_every_five_for_dev() -> None:
    assert [split_of(i) for i in range(10)] == ["dev"] * 3 + ["held-out"] * 2 + \
        ["dev"] * 3 + ["held-out"] * 2


@pytest.mark.parametrize("unit", ["turns", "observations"])
def test_a_split_selects_its_conversations(locomo_file: Path, unit: str) -> None:
    held = evaluate_locomo(locomo_file, unit=unit, embedder=None, split="held-out")
    assert held.conversations == ["conv-3", "conv-4"]
    assert held.questions == 2  # category 5 is left out
    assert held.ours[1] == 2  # the only record naming the topic is the evidence
    document = held.to_json()
    assert document["split"] == "held-out"
    assert set(document["by_split"]) == {"held-out"}


def test_all_reports_each_split(locomo_file: Path) -> None:
    every = evaluate_locomo(locomo_file, unit="observations", embedder=None)
    assert every.conversations == [f"conv-{i}" for i in range(7)]
    assert {k: v["questions"] for k, v in every.to_json()["by_split"].items()} == \
        {"dev": 5, "held-out": 2}


def test_an_unknown_split_is_an_input_error(locomo_file: Path) -> None:
    with pytest.raises(InputFormatError, match="split"):
        evaluate_locomo(locomo_file, unit="turns", embedder=None, split="test")


def _two_sessions() -> dict[str, object]:
    """Ann takes up a hobby in each of two sessions; the question names the second's date."""
    def turns(session: int, hobby: str, news: str) -> list[dict[str, str]]:
        return [{"speaker": "Ann", "dia_id": f"D{session}:1", "text": f"I took up {hobby}."},
                {"speaker": "Bob", "dia_id": f"D{session}:2", "text": news}]

    return {
        "sample_id": "conv-dated",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                         "session_1_date_time": "1:56 pm on 8 May, 2023",
                         "session_1": turns(1, "chess", "My bike got fixed."),
                         "session_2_date_time": "10:00 am on 20 June, 2023",
                         "session_2": turns(2, "golf", "I baked bread for the neighbours.")},
        "observation": {
            "session_1_observation": {"Ann": [["Ann took up chess.", "D1:1"]],
                                      "Bob": [["Bob's bike got fixed.", "D1:2"]]},
            "session_2_observation": {"Ann": [["Ann took up golf.", "D2:1"]],
                                      "Bob": [["Bob baked bread for the neighbours.",
                                               "D2:2"]]}},
        "qa": [{"question": "What did Ann take up on 20 June, 2023?", "evidence": ["D2:1"],
                "category": 4},
               {"question": "What did Ann take up in May 2023?", "evidence": ["D1:1"],
                "category": 4}],
    }


@pytest.mark.parametrize("unit", ["turns", "observations"])
def test_a_question_naming_a_date_finds_that_sessions_record(tmp_path: Path, unit: str) -> None:
    path = tmp_path / "dated.json"
    path.write_text(json.dumps([_two_sessions()]), encoding="utf-8")
    result = evaluate_locomo(path, unit=unit, embedder=None)
    assert result.questions == 2
    assert result.ours[1] == 2  # the record of the named session ranks first for both


def test_each_conversation_is_a_fold_with_mean_and_worst(tmp_path: Path) -> None:
    conversations = [_conversation(i) for i in range(3)]
    # the third cites a turn no record holds: its fold scores 0
    conversations[2]["qa"] = [{"question": "What hobby did Ann take up?",
                               "evidence": ["D9:9"], "category": 4}]
    path = tmp_path / "folds.json"
    path.write_text(json.dumps(conversations), encoding="utf-8")
    document = evaluate_locomo(path, unit="turns", embedder=None).to_json()
    folds = document["by_conversation"]
    assert list(folds) == ["conv-0", "conv-1", "conv-2"]
    assert [f["ours_hit@5"] for f in folds.values()] == [1.0, 1.0, 0.0]
    assert all(f["memories"] == 3 and f["questions"] == 1 for f in folds.values())
    assert sum(f["deferred"] for f in folds.values()) == document["ingest"].get("deferred", 0)
    summary = document["folds"]
    assert summary["count"] == 3
    assert summary["ours_hit@5"] == {"mean": round(2 / 3, 4), "worst": 0.0}
    assert set(summary["deferred_rate"]) == {"mean", "worst"}
