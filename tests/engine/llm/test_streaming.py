"""Seed 000 §8: streaming assembly, mid-stream completion, repair on stop, errors, timeouts."""

from __future__ import annotations

import json

import pytest

from engine.errors import LLMError
from engine.llm import DeterministicClock, StreamingAssembler
from engine.llm.streaming import AssemblyState, StreamEvent, assemble_stream


def _events(*deltas: str) -> list[StreamEvent]:
    return [StreamEvent("start"), *(StreamEvent("delta", d) for d in deltas), StreamEvent("stop")]


def test_assembles_complete_json_from_chunks() -> None:
    result = assemble_stream(_events('{"schema', 'Version":"v1",', '"memories":[',
                                     '{"content":"test"}', "]}"))
    assert json.loads(result.buffer) == {"schemaVersion": "v1", "memories": [{"content": "test"}]}
    assert not result.was_repaired
    assert result.chunk_count == 7


def test_handles_incomplete_json_with_repair() -> None:
    result = assemble_stream(_events('{"memories":[{"content":"test"'))
    assert "}]}" in result.buffer
    assert result.was_repaired
    assert json.loads(result.buffer) == {"memories": [{"content": "test"}]}


def test_detects_structural_completion_mid_stream() -> None:
    assembler = StreamingAssembler()
    assembler.process_chunk(StreamEvent("start"))
    assembler.process_chunk(StreamEvent("delta", '{"test":'))
    result = assembler.process_chunk(StreamEvent("delta", "true}"))
    assert result.type == "complete_object"
    assert result.can_validate
    assert assembler.state is AssemblyState.AWAITING_CLOSE
    assert assembler.process_chunk(StreamEvent("stop")).type == "complete"


def test_braces_inside_strings_and_escapes_do_not_count() -> None:
    assembler = StreamingAssembler()
    assembler.process_chunk(StreamEvent("start"))
    result = assembler.process_chunk(StreamEvent("delta", '{"a": "x}\\"{"'))
    assert result.type == "continue"
    assert assembler.metrics().brace_depth == 1
    assert assembler.process_chunk(StreamEvent("delta", "}")).type == "complete_object"


def test_invalid_state_transitions_error() -> None:
    assembler = StreamingAssembler()
    assert assembler.process_chunk(StreamEvent("delta", "x")).type == "error"
    assert assembler.state is AssemblyState.ERROR
    again = StreamingAssembler()
    again.process_chunk(StreamEvent("start"))
    assert again.process_chunk(StreamEvent("start")).error.startswith("Unexpected start")


def test_unrepairable_and_error_events_and_missing_stop() -> None:
    with pytest.raises(LLMError, match="Invalid JSON"):
        assemble_stream(_events("not json at all"))
    with pytest.raises(LLMError, match="boom"):
        assemble_stream([StreamEvent("start"), StreamEvent("error", error="boom")])
    with pytest.raises(LLMError, match="without completion"):
        assemble_stream([StreamEvent("start"), StreamEvent("delta", '{"a": 1')])


def test_plain_text_mode_skips_json_validation() -> None:
    result = assemble_stream(_events("A summary ", "of events."), expect_json=False)
    assert result.buffer == "A summary of events."


def test_buffer_overflow() -> None:
    assembler = StreamingAssembler(max_buffer_size=10)
    assembler.process_chunk(StreamEvent("start"))
    result = assembler.process_chunk(StreamEvent("delta", "x" * 11))
    assert (result.type, result.error) == ("error", "Buffer overflow: exceeded max size")


def test_idle_timeout_uses_the_injected_clock() -> None:
    clock = DeterministicClock(0)
    assembler = StreamingAssembler(clock, idle_timeout_ms=1000)
    assembler.process_chunk(StreamEvent("start"))
    assembler.process_chunk(StreamEvent("delta", '{"a": 1}'))
    clock.advance(1000)
    assert assembler.check_timeout() is None
    clock.advance(1)
    result = assembler.check_timeout()
    assert result is not None
    assert "awaiting_close" in result.error
    assert assembler.state is AssemblyState.ERROR
