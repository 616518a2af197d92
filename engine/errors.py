"""The engine's one exception tree.

Every error the engine raises on purpose is an :class:`EngineError`. Its ``code`` attribute is
the seed 002 §11 taxonomy name (or, for the task graph, seed 003's numeric code) so that callers
can branch on it and the CLI and API can print it. The UI catches ``EngineError`` subclasses
only; anything else is a bug and is logged with a crash report.

The tree separates what the *environment* did (the user can act on it) from what the *input*
was (the user can fix it)::

    * EngineError                     code = seed 002 taxonomy
      + ConfigInvalid                 MEMORY_CONFIG_INVALID: names the field and the bad value
      + ValidationError               MEMORY_CONFIG_INVALID: a record field or request field is bad
        + InputFormatError            a line of an input file is malformed (file, line, reason)
      + RecordNotFound                MEMORY_RECORD_NOT_FOUND
      + CapacityExceeded              MEMORY_CAPACITY_EXCEEDED
      + RetentionViolation            MEMORY_RETENTION_VIOLATION
      + TokenBudgetUndefined          MEMORY_TOKEN_BUDGET_UNDEFINED
      + RetrievalEmpty                MEMORY_RETRIEVAL_EMPTY
      + RedactionPatternInvalid       MEMORY_REDACTION_PATTERN_INVALID
      + SummaryLocked                 MEMORY_SUMMARY_LOCKED (a compaction is already running)
      + SummaryFailed                 MEMORY_SUMMARY_FAILED
      + EmbeddingUnavailable          MEMORY_EMBEDDING_UNAVAILABLE: model missing or not loaded
      + EmbeddingFailed               MEMORY_EMBEDDING_FAILED: the model raised on a batch
      + StoreUnavailable              STORE_UNAVAILABLE: unreachable server, disk full, I/O error
        + StoreLocked                 STORE_LOCKED: another process holds an embedded store
        + StoreReadOnly               STORE_READ_ONLY: a write was attempted on a read-only store
      + EditConflict                  MEMORY_EDIT_CONFLICT: the record changed since it was read
      + SchemaMismatch                STORE_SCHEMA_MISMATCH: store written by a newer version
      + Cancelled                     OPERATION_CANCELLED: the caller cancelled long work
      + ImportStopped                 (its cause's code): an import failed part way; carries
                                      what was committed (engine.ingest.importer)
      + CycleDetected                 1002: carries the cycle path (seed 003)
      + LLMError                      LLM_ERROR: provider failures after retries
        + BudgetExceeded              LLM_BUDGET_EXCEEDED
        + CircuitOpen                 LLM_CIRCUIT_OPEN

``MEMORY_INPUT_INVALID`` is ours: seed 002's taxonomy has only ``MEMORY_CONFIG_INVALID``, and a
caller that branches on the code must tell "fix your settings" from "fix this record or line of
your file" (issue 18). Configuration keeps ``MEMORY_CONFIG_INVALID``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BudgetExceeded",
    "Cancelled",
    "CapacityExceeded",
    "CircuitOpen",
    "ConfigInvalid",
    "CycleDetected",
    "EditConflict",
    "EmbeddingFailed",
    "EmbeddingUnavailable",
    "EngineError",
    "InputFormatError",
    "LLMError",
    "RecordNotFound",
    "RedactionPatternInvalid",
    "RetentionViolation",
    "RetrievalEmpty",
    "SchemaMismatch",
    "StoreLocked",
    "StoreReadOnly",
    "StoreTimeout",
    "StoreUnavailable",
    "SummaryFailed",
    "SummaryLocked",
    "TokenBudgetUndefined",
    "ValidationError",
]


class EngineError(Exception):
    """Base of every error the engine raises on purpose.

    Attributes:
        code: The taxonomy code (seed 002 §11), e.g. ``"MEMORY_RECORD_NOT_FOUND"``.
    """

    code: str = "MEMORY_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigInvalid(EngineError):
    """A configuration value is invalid. The message names the field and the bad value."""

    code = "MEMORY_CONFIG_INVALID"

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}: {reason} (got {value!r})")
        self.field = field
        self.value = value
        self.reason = reason


class ValidationError(EngineError):
    """A record or request field is invalid. The message names the field and the bad value."""

    code = "MEMORY_INPUT_INVALID"

    def __init__(self, field: str, value: object, reason: str) -> None:
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        super().__init__(f"{field}: {reason} (got {shown!r})")
        self.field = field
        self.value = value
        self.reason = reason


class InputFormatError(ValidationError):
    """A line or item of an input file is malformed.

    Attributes:
        source: The file name (or ``"<stdin>"``).
        line: 1-based line number, or 0 when the whole file is at fault.
    """

    def __init__(self, source: str, line: int, field: str, reason: str) -> None:
        EngineError.__init__(self, f"{source}:{line}: {field}: {reason}" if line else
                             f"{source}: {field}: {reason}")
        self.source = source
        self.line = line
        self.field = field
        self.value = None
        self.reason = reason


class RecordNotFound(EngineError):
    """No record (or review item, import, …: ``kind``) with the given id exists in the store.

    Args:
        record_id: The id asked for.
        kind: What was looked for, as the message names it.
        hint: Words appended to the message (where to find the ids).
    """

    code = "MEMORY_RECORD_NOT_FOUND"

    def __init__(self, record_id: str, *, kind: str = "record", hint: str = "") -> None:
        super().__init__(f"no {kind} with id {record_id!r}{hint}")
        self.record_id = record_id


class CapacityExceeded(EngineError):
    """A hard capacity limit would be exceeded."""

    code = "MEMORY_CAPACITY_EXCEEDED"


class RetentionViolation(EngineError):
    """An operation would break a retention rule (e.g. retire a protected recent episode)."""

    code = "MEMORY_RETENTION_VIOLATION"


class TokenBudgetUndefined(EngineError):
    """A retrieval was requested without a token budget."""

    code = "MEMORY_TOKEN_BUDGET_UNDEFINED"


class RetrievalEmpty(EngineError):
    """Raised only by callers that demand a non-empty bundle; retrieval itself returns empty."""

    code = "MEMORY_RETRIEVAL_EMPTY"


class RedactionPatternInvalid(EngineError):
    """A configured redaction pattern does not compile or is unknown."""

    code = "MEMORY_REDACTION_PATTERN_INVALID"


class SummaryLocked(EngineError):
    """A compaction/summarization run is already in progress for this scope."""

    code = "MEMORY_SUMMARY_LOCKED"


class SummaryFailed(EngineError):
    """Summarization failed and no fallback could produce a summary."""

    code = "MEMORY_SUMMARY_FAILED"


class EmbeddingUnavailable(EngineError):
    """The embedding model is missing or not loaded; the engine falls back to Jaccard."""

    code = "MEMORY_EMBEDDING_UNAVAILABLE"


class EmbeddingFailed(EngineError):
    """The embedding model raised while encoding a batch."""

    code = "MEMORY_EMBEDDING_FAILED"


class StoreUnavailable(EngineError):
    """The store cannot be reached or written: unreachable server, disk full, I/O error.

    Attributes:
        committed: Set by a batch ingest that failed part way: memories it had committed
            (whole chunks) before this error; None otherwise.
        total: The memories that batch was given (None when ``committed`` is).
    """

    code = "STORE_UNAVAILABLE"
    committed: int | None = None
    total: int | None = None

    def note_committed(self, committed: int, total: int) -> None:
        """Add what a batch committed before this failure, and how to resume, to the message.

        A re-run of the same input resumes because the pipeline recognises the committed
        memories as exact duplicates and skips them (docs/reliability.md).
        """
        self.committed = committed
        self.total = total
        self.message += (f"; {committed} of {total} memories were committed before this "
                         "(whole chunks); re-running the same input resumes: the committed "
                         "ones are skipped as exact duplicates")
        self.args = (self.message,)


class StoreTimeout(StoreUnavailable):
    """A Chroma server did not answer within the store's connect or read timeout.

    Attributes:
        server: The server's URL.
        phase: ``"connect"`` (no connection) or ``"read"`` (connected, no answer in time; a
            write waiting for its answer is a read).
        timeout_s: The timeout that ran out.
        in_flight: Records a timed-out write had sent: the server may still store them when it
            resumes, so they count as neither written nor refused.
    """

    code = "STORE_TIMEOUT"

    def __init__(self, server: str, action: str, phase: str, timeout_s: float, *,
                 in_flight: int = 0) -> None:
        what = "the record" if in_flight == 1 else f"the {in_flight} records"
        pending = (f"; the server may still store {what} in flight if it resumes"
                   if in_flight else "")
        super().__init__(
            f"{action} failed: the Chroma server at {server} did not answer within "
            f"{timeout_s:g} s ({phase} timeout){pending}. Is the server stopped or overloaded? "
            "The store's timeouts are settings (store_connect_timeout_s, "
            "store_read_timeout_s)")
        self.server = server
        self.phase = phase
        self.timeout_s = timeout_s
        self.in_flight = in_flight


class StoreLocked(StoreUnavailable):
    """Another process holds the exclusive lock on an embedded store."""

    code = "STORE_LOCKED"

    def __init__(self, path: str, holder_pid: int | None, holder_info: str = "") -> None:
        who = f"PID {holder_pid}" if holder_pid else "another process"
        extra = f" ({holder_info})" if holder_info else ""
        super().__init__(
            f"store {path} is in use by {who}{extra}; close it there, open this store "
            "read-only, or use a Chroma server for several processes"
        )
        self.path = path
        self.holder_pid = holder_pid
        self.holder_info = holder_info


class StoreReadOnly(StoreUnavailable):
    """A write was attempted on a store opened read-only."""

    code = "STORE_READ_ONLY"


class EditConflict(EngineError):
    """Optimistic concurrency: the record's version is not the one the edit was based on.

    Two writers (two processes on one Chroma server, or a stale view in the app) edited the same
    record; the second edit is refused instead of silently overwriting the first.
    """

    code = "MEMORY_EDIT_CONFLICT"

    def __init__(self, record_id: str, expected: int, actual: int) -> None:
        super().__init__(f"record {record_id} changed since it was read (version {actual}, "
                         f"edit based on {expected}); reload it and apply the edit again")
        self.record_id = record_id
        self.expected = expected
        self.actual = actual


class SchemaMismatch(EngineError):
    """The store or ledger was written by a newer, incompatible version of Mnemoscope."""

    code = "STORE_SCHEMA_MISMATCH"


class Cancelled(EngineError):
    """Long work was cancelled by the caller; nothing was half-written."""

    code = "OPERATION_CANCELLED"


class CycleDetected(EngineError):
    """A dependency or reference cycle (seed 003 error 1002).

    Attributes:
        path: The ids along the cycle, first repeated last (``["A", "B", "A"]``).
    """

    code = "1002"

    def __init__(self, path: Sequence[str]) -> None:
        self.path = list(path)
        super().__init__(f"error 1002: cycle detected: {' -> '.join(self.path)}")


class LLMError(EngineError):
    """An LLM provider call failed after the resilience layer gave up."""

    code = "LLM_ERROR"


class BudgetExceeded(LLMError):
    """The call would exceed the daily LLM budget (seed 000 §6, strict ``>``)."""

    code = "LLM_BUDGET_EXCEEDED"


class CircuitOpen(LLMError):
    """The provider's circuit breaker is open (seed 000 §4)."""

    code = "LLM_CIRCUIT_OPEN"
