"""The contradiction guard: details that change meaning are found; paraphrases pass."""

from __future__ import annotations

import pytest

from engine.ingest.contradiction import find_conflicts


@pytest.mark.parametrize(("stored", "incoming", "kind"), [
    ("standup at 3pm", "standup at 5pm", "time"),
    ("The standup is at 15:00", "The standup is at 16:30", "time"),
    ("likes tea", "does not like tea", "negation"),
    ("User likes tea", "User doesn't like tea", "negation"),
    ("User likes tea", "User dislikes tea", "antonym"),
    ("The task is possible", "The task is impossible", "antonym"),
    ("Prices rose sharply", "Prices fell sharply", "antonym"),
    ("The meeting is on Monday", "The meeting is on Tuesday", "time"),
    ("Rent is $1,200 a month", "Rent is $1,500 a month", "number"),
    ("The flight leaves at gate 12", "The flight leaves at gate 21", "number"),
    ("She has three cats", "She has five cats", "number"),
    ("Alice owns the red car", "Bob owns the red car", "name"),
    ("The user's car is blue", "The user's car is red", "color"),
    ("Born in May 1990", "Born in June 1990", "time"),
    ("The user lives in Paris", "Does the user live in Paris?", "mood"),
    ("A man is playing the guitar", "A woman is playing the guitar", "antonym"),
])
def test_conflicting_details_are_found(stored: str, incoming: str, kind: str) -> None:
    kinds = {c.kind for c in find_conflicts(stored, incoming)}
    assert kind in kinds


@pytest.mark.parametrize(("stored", "incoming"), [
    ("The man is playing the guitar.", "A man is playing a guitar."),
    ("Standup is at 3pm.", "The standup is at 3 pm"),
    ("User prefers dark mode in every editor", "The user likes dark mode in all editors"),
    ("Rent is $1,200 a month", "Monthly rent: 1200 dollars"),
    ("Two blasts hit Syria capital", "Two blasts rock Syrian capital"),
    ("The dogs play in the snow", "The two dogs are playing fetch in the snow"),
    ("Shinzo Abe Selected as Japan's Prime Minister", "Shinzo Abe is Japan's prime minister"),
    # dialogue: discourse words, short names, sentence-initial verbs, multi-sentence turns
    ("Caroline: Thanks, Mel! My goal is a loving home.",
     "Caroline: Wow, Melanie! My goal is to give kids a loving home."),
    ("Melanie: That's great. How was the trip?", "Melanie: Taking the trip was great."),
])
def test_paraphrases_and_extra_details_pass(stored: str, incoming: str) -> None:
    assert find_conflicts(stored, incoming) == ()


def test_conflict_reports_both_sides() -> None:
    (conflict,) = find_conflicts("standup at 3pm", "standup at 5pm")
    assert conflict.to_json() == {"kind": "time", "existing": ["15:00"], "incoming": ["17:00"]}
