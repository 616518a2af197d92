"""Streaming assembly state machine (seed 000 §8), with an injected clock for timeouts.

A provider stream is turned into :class:`StreamEvent` s (``start``, ``delta``, ``stop``,
``error``); :class:`StreamingAssembler` appends deltas, tracks structural balance outside strings,
reports a complete JSON object as soon as one is balanced and parses, and on ``stop`` validates
the buffer, repairing it when structurally close.

Differences from the seed's code, each because the seed contradicts its own diagram or tests:

* the diagram's ``awaiting_close`` state is entered when a complete object is seen (the code
  never entered it); further deltas are still accepted there;
* the basic repair closes structures in nesting order through :mod:`engine.llm.repair` (the
  seed's ``}`` -then- ``]`` order turns ``{"memories":[{"content":"test"`` into invalid JSON,
  yet its test expects ``}]}``);
* plain-text streams (``expect_json=False``, e.g. summaries) complete without JSON validation;
* :meth:`StreamingAssembler.check_timeout` implements ``awaiting_close --> error: timeout``
  (and an idle timeout in ``in_chunk``) against the injected clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.clock import Clock, SystemClock
from engine.errors import LLMError
from engine.llm.repair import repair_json_detailed

__all__ = [
    "AssemblyState",
    "ProcessResult",
    "StreamEvent",
    "StreamMetrics",
    "StreamingAssembler",
    "assemble_stream",
]

MAX_BUFFER_SIZE = 100_000
"""seed 000 §8 ``maxBufferSize`` in characters."""


class AssemblyState(StrEnum):
    """Seed 000 §8 states."""

    AWAITING_START = "awaiting_start"
    IN_CHUNK = "in_chunk"
    AWAITING_CLOSE = "awaiting_close"
    COMPLETE = "complete"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """Seed 000 §8 ``StreamEvent``: ``type`` is start, delta, stop or error."""

    type: str
    content: str = ""
    error: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """Seed 000 §8 ``ProcessResult``: ``type`` is continue, complete_object, complete, error."""

    type: str
    buffer: str = ""
    error: str = ""
    can_validate: bool = False
    was_repaired: bool = False
    chunk_count: int = 0


@dataclass(frozen=True, slots=True)
class StreamMetrics:
    """Seed 000 §8 ``StreamMetrics``."""

    state: str
    buffer_size: int
    chunk_count: int
    brace_depth: int
    bracket_depth: int
    in_string: bool


class StreamingAssembler:
    """Assemble one streamed response (seed 000 §8 ``StreamingAssemblyStateMachine``).

    Args:
        clock: Time source for timeout detection (seed 000 §10 injection point).
        expect_json: Validate (and repair) the buffer as JSON on ``stop``.
        max_buffer_size: Overflow limit in characters.
        idle_timeout_ms: :meth:`check_timeout` errors when no event arrived for this long.
    """

    def __init__(self, clock: Clock | None = None, *, expect_json: bool = True,
                 max_buffer_size: int = MAX_BUFFER_SIZE,
                 idle_timeout_ms: float = 30_000.0) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.expect_json = expect_json
        self.max_buffer_size = max_buffer_size
        self.idle_timeout_ms = idle_timeout_ms
        self._state = AssemblyState.AWAITING_START
        self._buffer: list[str] = []
        self._size = 0
        self._brace = 0
        self._bracket = 0
        self._in_string = False
        self._escape_next = False
        self._chunk_count = 0
        self._last_event_ms = self._clock.now()
        self.last_valid_boundary = 0

    @property
    def state(self) -> AssemblyState:
        """The current state."""
        return self._state

    @property
    def buffer(self) -> str:
        """Everything appended so far."""
        return "".join(self._buffer)

    def process_chunk(self, event: StreamEvent) -> ProcessResult:
        """Feed one event; see seed 000 §8 ``processChunk``."""
        self._chunk_count += 1
        self._last_event_ms = self._clock.now()
        if event.type == "start":
            return self._handle_start()
        if event.type == "delta":
            return self._handle_delta(event)
        if event.type == "stop":
            return self._handle_stop()
        if event.type == "error":
            self._state = AssemblyState.ERROR
            return ProcessResult("error", self.buffer, event.error or "Stream error",
                                 chunk_count=self._chunk_count)
        return ProcessResult("continue", self.buffer)

    def check_timeout(self) -> ProcessResult | None:
        """Error the stream when it has been idle longer than ``idle_timeout_ms``."""
        if self._state not in (AssemblyState.IN_CHUNK, AssemblyState.AWAITING_CLOSE):
            return None
        idle = self._clock.now() - self._last_event_ms
        if idle <= self.idle_timeout_ms:
            return None
        waiting = self._state.value
        self._state = AssemblyState.ERROR
        return ProcessResult("error", self.buffer,
                             f"Stream timed out after {idle:.0f} ms idle in state {waiting}",
                             chunk_count=self._chunk_count)

    def metrics(self) -> StreamMetrics:
        """Seed 000 §8 ``getMetrics``."""
        return StreamMetrics(self._state.value, self._size, self._chunk_count, self._brace,
                             self._bracket, self._in_string)

    # -- handlers ----------------------------------------------------------------------------
    def _handle_start(self) -> ProcessResult:
        if self._state is not AssemblyState.AWAITING_START:
            state = self._state.value
            self._state = AssemblyState.ERROR
            return ProcessResult("error", error=f"Unexpected start event in state: {state}")
        self._state = AssemblyState.IN_CHUNK
        self._buffer = []
        self._size = 0
        self._brace = self._bracket = 0
        self._in_string = self._escape_next = False
        self.last_valid_boundary = 0
        return ProcessResult("continue", "")

    def _handle_delta(self, event: StreamEvent) -> ProcessResult:
        if self._state not in (AssemblyState.IN_CHUNK, AssemblyState.AWAITING_CLOSE):
            state = self._state.value
            self._state = AssemblyState.ERROR
            return ProcessResult("error", error=f"Delta received in invalid state: {state}")
        chunk = event.content
        self._buffer.append(chunk)
        self._size += len(chunk)
        if self._size > self.max_buffer_size:
            self._state = AssemblyState.ERROR
            return ProcessResult("error", error="Buffer overflow: exceeded max size")
        if self._state is AssemblyState.AWAITING_CLOSE and chunk.strip():
            self._state = AssemblyState.IN_CHUNK  # more content after a complete object
        self._update_structural_balance(chunk)
        if self.expect_json and self._structurally_complete():
            self.last_valid_boundary = self._size
            buffer = self.buffer
            if _parses(buffer):
                self._state = AssemblyState.AWAITING_CLOSE
                return ProcessResult("complete_object", buffer, can_validate=True)
        return ProcessResult("continue", self.buffer)

    def _handle_stop(self) -> ProcessResult:
        if self._state not in (AssemblyState.IN_CHUNK, AssemblyState.AWAITING_CLOSE):
            state = self._state.value
            self._state = AssemblyState.ERROR
            return ProcessResult("error", error=f"Stop received in invalid state: {state}")
        self._state = AssemblyState.COMPLETE
        buffer = self.buffer
        if not self.expect_json or _parses(buffer):
            return ProcessResult("complete", buffer, chunk_count=self._chunk_count)
        repaired = repair_json_detailed(buffer)
        if repaired is not None:
            return ProcessResult("complete", repaired.text, was_repaired=True,
                                 chunk_count=self._chunk_count)
        self._state = AssemblyState.ERROR
        return ProcessResult("error", buffer, "Invalid JSON after streaming complete",
                             chunk_count=self._chunk_count)

    def _update_structural_balance(self, chunk: str) -> None:
        for char in chunk:
            if self._escape_next:
                self._escape_next = False
                continue
            if char == "\\" and self._in_string:
                self._escape_next = True
                continue
            if char == '"':
                self._in_string = not self._in_string
                continue
            if not self._in_string:
                if char == "{":
                    self._brace += 1
                elif char == "}":
                    self._brace -= 1
                elif char == "[":
                    self._bracket += 1
                elif char == "]":
                    self._bracket -= 1

    def _structurally_complete(self) -> bool:
        return (not self._in_string and self._brace == 0 and self._bracket == 0
                and self._size > 0 and bool(self.buffer.strip()))


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def assemble_stream(events: Iterable[StreamEvent], *, clock: Clock | None = None,
                    expect_json: bool = True) -> ProcessResult:
    """Seed 000 §8 ``assembleStreamedResponse``: run events through an assembler.

    Raises:
        LLMError: on an error event or result, or when the events end without ``stop``.
    """
    assembler = StreamingAssembler(clock, expect_json=expect_json)
    for event in events:
        result = assembler.process_chunk(event)
        if result.type == "complete":
            return result
        if result.type == "error":
            raise LLMError(f"stream assembly failed: {result.error}")
    raise LLMError("Stream ended without completion")
