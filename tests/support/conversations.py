"""Sample conversations, one per format :mod:`engine.ingest.conversations` reads, with the
turns each must yield (engine and CLI tests share them)."""

from __future__ import annotations

from typing import Any

from engine.ingest.conversations import ConversationFormat

OPENAI: dict[str, Any] = {"model": "gpt-4o", "messages": [
    {"role": "system", "content": "You are a travel assistant."},
    {"role": "user", "content": "I'm flying to Porto on January 9th with Alex."},
    {"role": "assistant", "content": [{"type": "text", "text": "Morning flights, aisle seats?"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "[]"},
    {"role": "user", "name": "Sam", "content": "Alex is vegetarian, note it for the hotel."},
]}

ANTHROPIC: dict[str, Any] = {"system": "You help with chores.", "messages": [
    {"role": "user", "content": "The boiler service is booked for March 3rd."},
    {"role": "assistant", "content": [
        {"type": "text", "text": "I'll remind you the day before."},
        {"type": "tool_use", "id": "t1", "name": "remind", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    {"role": "user", "content": [{"type": "text", "text": "Also, the plumber is called Ines."}]},
]}

LOCOMO: list[dict[str, Any]] = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I joined a pottery class!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Amazing, show me a bowl.",
             "blip_caption": "a blue bowl"}],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "We adopted a puppy named Oscar."}],
    },
    "qa": [],
}]

TRANSCRIPT = """\
[2026-03-01 09:00] Dana: The quarterly review moved to Thursday at 10:30.
[2026-03-01 09:01] Sam: Thanks, I'll tell the team.
It will be in room 4B this time.
Dana: Perfect, I love that room!
"""

LIST = [{"speaker": "Tia", "content": "I am so excited about Oslo", "ts": "2026-01-02T10:00:00Z"},
        {"role": "assistant", "content": "When do you leave?"}]


FORMATS: list[tuple[str, object, ConversationFormat, list[tuple[str, str]]]] = [
    ("openai.json", OPENAI, ConversationFormat.OPENAI_CHAT, [
        ("user", "I'm flying to Porto on January 9th with Alex."),
        ("assistant", "Morning flights, aisle seats?"),
        ("Sam", "Alex is vegetarian, note it for the hotel.")]),
    ("anthropic.json", ANTHROPIC, ConversationFormat.ANTHROPIC_MESSAGES, [
        ("user", "The boiler service is booked for March 3rd."),
        ("assistant", "I'll remind you the day before."),
        ("user", "Also, the plumber is called Ines.")]),
    ("locomo.json", LOCOMO, ConversationFormat.LOCOMO, [
        ("Caroline", "I joined a pottery class!"),
        ("Melanie", "Amazing, show me a bowl. [shares a photo of a blue bowl]"),
        ("Melanie", "We adopted a puppy named Oscar.")]),
    ("chat.txt", TRANSCRIPT, ConversationFormat.TRANSCRIPT, [
        ("Dana", "The quarterly review moved to Thursday at 10:30."),
        ("Sam", "Thanks, I'll tell the team.\nIt will be in room 4B this time."),
        ("Dana", "Perfect, I love that room!")]),
    ("list.json", LIST, ConversationFormat.MESSAGE_LIST, [
        ("Tia", "I am so excited about Oslo"), ("assistant", "When do you leave?")]),
]


_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "da", "fe", "gu",
              "ho", "ji", "ku", "ly", "mo", "ny", "pe")


def locomo_sample(turns: int, *, sessions: int = 2, sample_id: str = "conv-gui") -> dict[str, Any]:
    """A LoCoMo-style sample of ``turns`` turns of two speakers over ``sessions`` sessions.

    Each turn is a sentence of made-up words that shares almost no token with the others, so
    the pipeline stores every kept turn as new (no merges) and only the salience cut decides
    how many are kept (its default keeps 24 turns).
    """
    import random

    conversation: dict[str, Any] = {"speaker_a": "Caroline", "speaker_b": "Melanie"}
    per_session = -(-turns // sessions)
    for number in range(turns):
        session = number // per_session + 1
        rng = random.Random(number)
        words = " ".join(rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES)
                         for _ in range(9))
        conversation.setdefault(f"session_{session}_date_time", f"1:{session:02d} pm on "
                                f"{session} May, 2023")
        conversation.setdefault(f"session_{session}", []).append(
            {"speaker": ("Caroline", "Melanie")[number % 2], "dia_id": f"D{session}:{number}",
             "text": f"{words} {number}"})
    return {"sample_id": sample_id, "conversation": conversation, "qa": []}
