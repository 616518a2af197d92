"""LLM errors, all under :class:`engine.errors.LLMError`::

    * LLMError (engine.errors)            LLM_ERROR
      + BudgetExceeded (engine.errors)    LLM_BUDGET_EXCEEDED: the call would pass the daily budget
      + CircuitOpen (engine.errors)       LLM_CIRCUIT_OPEN: the provider's breaker is open
      + ProviderNotConfigured             LLM_NOT_CONFIGURED: no provider/base URL/model set
      + ProviderError                     LLM_PROVIDER_ERROR: HTTP error, timeout, broken stream
      + RateLimited                       LLM_RATE_LIMITED: throttling would wait too long
      + InvalidModelOutput                LLM_INVALID_OUTPUT: the answer is not usable JSON
      + KeyringUnavailable                LLM_KEYRING_UNAVAILABLE: no OS keyring to keep a key in

Messages never contain an API key, request headers or prompt text.
"""

from __future__ import annotations

from engine.errors import BudgetExceeded, CircuitOpen, LLMError

__all__ = [
    "BudgetExceeded",
    "CircuitOpen",
    "InvalidModelOutput",
    "KeyringUnavailable",
    "LLMError",
    "ProviderError",
    "ProviderNotConfigured",
    "RateLimited",
]


class ProviderNotConfigured(LLMError):
    """No provider is configured (kind, base URL or model missing)."""

    code = "LLM_NOT_CONFIGURED"


class ProviderError(LLMError):
    """One provider call failed.

    Attributes:
        provider: Provider name.
        failure: ``http``, ``timeout``, ``connect``, ``protocol`` or ``truncated``.
        detail: The message without the provider/status prefix (scrubbed of the key).
        status: HTTP status, when there was one.
        retryable: Whether another attempt may succeed (429, 408, 5xx, timeouts, broken streams).
        retry_after_ms: The server's ``Retry-After`` in ms, when given.
        partial_output_tokens: Estimated tokens streamed before a stream broke (they cost money).
    """

    code = "LLM_PROVIDER_ERROR"

    def __init__(self, provider: str, failure: str, message: str, *, status: int | None = None,
                 retryable: bool = False, retry_after_ms: float | None = None,
                 partial_output_tokens: int = 0) -> None:
        where = f"{provider}: HTTP {status}" if status is not None else f"{provider}: {failure}"
        super().__init__(f"{where}: {message}")
        self.provider = provider
        self.failure = failure
        self.detail = message
        self.status = status
        self.retryable = retryable
        self.retry_after_ms = retry_after_ms
        self.partial_output_tokens = partial_output_tokens


class RateLimited(LLMError):
    """Token projection or the request limiter would make the call wait longer than allowed."""

    code = "LLM_RATE_LIMITED"


class InvalidModelOutput(LLMError):
    """The model answered, but the answer could not be repaired into the expected JSON."""

    code = "LLM_INVALID_OUTPUT"


class KeyringUnavailable(LLMError):
    """The OS keyring cannot keep or read a key (no backend, locked, refused).

    The message says what to do instead (an environment variable); it never holds the key.
    """

    code = "LLM_KEYRING_UNAVAILABLE"
