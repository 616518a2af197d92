"""Provider clients over httpx: OpenAI-compatible chat completions and Anthropic Messages.

One interface, :class:`LLMProvider`: ``complete`` (one JSON response) and ``stream`` (server-sent
events translated into seed 000 §8 :class:`~engine.llm.streaming.StreamEvent` s: ``start``,
``delta``, ``stop`` with usage metadata). A stream that ends without its terminal event
(``data: [DONE]`` / ``message_stop``) simply ends without ``stop``; the gateway treats that as a
truncated answer and retries — a half answer is never handed on.

Every transport failure becomes :class:`~engine.llm.errors.ProviderError` with ``retryable`` set
for 408, 429, 5xx, timeouts, connection errors and malformed bodies, and ``retry_after_ms`` from
``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``. Error messages carry at most a short
excerpt of the server's error body with the key scrubbed out; request headers never appear.
"""

from __future__ import annotations

import abc
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from engine.llm.errors import ProviderError
from engine.llm.settings import LLMSettings, ProviderKind
from engine.llm.streaming import StreamEvent

__all__ = [
    "AnthropicProvider",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "LLMProvider",
    "OpenAIProvider",
    "Usage",
    "build_provider",
    "endpoint_url",
]

log = logging.getLogger("engine.llm.providers")

PATHS = {ProviderKind.OPENAI: "/chat/completions", ProviderKind.ANTHROPIC: "/v1/messages"}
"""The endpoint of each wire protocol, under the base URL."""

_SECRETISH = re.compile(r"(sk-[A-Za-z0-9_\-*]{4,}|Bearer\s+\S+|x-api-key\S*)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message (``role`` is ``user`` or ``assistant``)."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What the gateway asks of a provider.

    Attributes:
        messages: The conversation.
        system: System prompt (sent as a system message or Anthropic's ``system`` field).
        max_tokens: Output cap; None uses the settings' value.
        temperature: None uses the settings' value.
        json_mode: Ask for a JSON object (OpenAI ``response_format`` when enabled in settings).
    """

    messages: tuple[ChatMessage, ...]
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    json_mode: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one call."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A completed answer.

    Attributes:
        text: The assembled text (repaired JSON when ``was_repaired``).
        usage: Token usage as reported (or estimated when ``usage_reported`` is False).
        model: Model that answered.
        finish_reason: ``stop``/``end_turn``, ``length``/``max_tokens``, ...
        streamed: Whether it arrived as a stream.
        was_repaired: The streaming assembler repaired the JSON on ``stop``.
        chunk_count: Stream events processed.
        usage_reported: The provider reported usage.
        attempts: Attempts the gateway needed.
        cost_usd: Cost charged to the budget.
        raw_text: The streamed text before the assembler's repair (None when not repaired),
            so a caller can tell where a cut-off answer ended.
    """

    text: str
    usage: Usage
    model: str
    finish_reason: str = ""
    streamed: bool = False
    was_repaired: bool = False
    chunk_count: int = 0
    usage_reported: bool = True
    attempts: int = 1
    cost_usd: float = 0.0
    raw_text: str | None = None

    @property
    def truncated_by_limit(self) -> bool:
        """The model stopped because it hit the output token cap."""
        return self.finish_reason in ("length", "max_tokens")


class LLMProvider(Protocol):
    """A chat provider. Implementations raise :class:`ProviderError` on every failure."""

    name: str
    kind: ProviderKind

    def complete(self, request: ChatRequest, model: str) -> ChatResponse:
        """One non-streamed answer."""
        ...

    def stream(self, request: ChatRequest, model: str) -> Iterator[StreamEvent]:
        """Stream events; ``stop`` carries ``input_tokens``, ``output_tokens``,
        ``finish_reason`` in its metadata. Ends without ``stop`` if the stream was cut."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def _retry_after_ms(headers: httpx.Headers) -> float | None:
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw) * 1000.0)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    from datetime import UTC, datetime

    return max(0.0, (moment - datetime.now(UTC)).total_seconds() * 1000.0)


class _HttpProvider(abc.ABC):
    """Shared HTTP plumbing: client, headers, error mapping, SSE parsing."""

    name: str
    kind: ProviderKind

    def __init__(self, settings: LLMSettings, api_key: Callable[[], str | None],
                 transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.name = settings.provider or (settings.kind.value if settings.kind else "llm")
        self._api_key = api_key
        timeout = httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s)
        self._client = httpx.Client(base_url=settings.base_url.rstrip("/"), timeout=timeout,
                                    transport=transport, follow_redirects=False)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    # -- hooks: each wire protocol (OpenAI, Anthropic) defines these -------------------------
    @abc.abstractmethod
    def _path(self) -> str:
        """The endpoint path under the base URL."""

    @abc.abstractmethod
    def _headers(self, key: str | None) -> dict[str, str]:
        """Request headers, with the API key if there is one."""

    @abc.abstractmethod
    def _body(self, request: ChatRequest, model: str, stream: bool) -> dict[str, Any]:
        """The JSON request body."""

    # -- shared ------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        key = self._api_key()
        if key:
            text = text.replace(key, "<key>")
        return _SECRETISH.sub("<key>", text)[:200]

    def _fail_for_status(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            excerpt = response.text
        except httpx.HTTPError:  # pragma: no cover - body unreadable after an error status
            excerpt = ""
        retryable = status in (408, 409, 425, 429) or status >= 500
        return ProviderError(self.name, "http", self._scrub(excerpt.strip()) or "no body",
                             status=status, retryable=retryable,
                             retry_after_ms=_retry_after_ms(response.headers))

    def _transport_error(self, exc: httpx.HTTPError, partial: int = 0) -> ProviderError:
        if isinstance(exc, httpx.TimeoutException):
            return ProviderError(self.name, "timeout", type(exc).__name__, retryable=True,
                                 partial_output_tokens=partial)
        if isinstance(exc, httpx.ConnectError):
            reason = self._scrub(str(exc)) or type(exc).__name__
            return ProviderError(self.name, "connect", f"cannot connect to "
                                 f"{self.settings.base_url} ({reason})", retryable=True)
        return ProviderError(self.name, "protocol", f"{type(exc).__name__}: "
                             f"{self._scrub(str(exc))}", retryable=True,
                             partial_output_tokens=partial)

    def _post_json(self, request: ChatRequest, model: str) -> dict[str, Any]:
        body = self._body(request, model, stream=False)
        try:
            response = self._client.post(self._path(), json=body,
                                         headers=self._headers(self._api_key()))
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc
        if response.status_code != 200:
            raise self._fail_for_status(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise ProviderError(self.name, "protocol", "response body is not JSON",
                                retryable=True) from exc
        if not isinstance(data, dict):
            raise ProviderError(self.name, "protocol", "response body is not a JSON object",
                                retryable=True)
        return data

    def _sse(self, request: ChatRequest, model: str) -> Iterator[tuple[str, Any]]:
        """POST with ``stream: true`` and yield ``(event_name, parsed_data)`` per SSE event."""
        body = self._body(request, model, stream=True)
        try:
            with self._client.stream("POST", self._path(), json=body,
                                     headers=self._headers(self._api_key())) as response:
                if response.status_code != 200:
                    response.read()
                    raise self._fail_for_status(response)
                event, data_lines = "", list[str]()
                for line in response.iter_lines():
                    if line == "":
                        if data_lines:
                            yield event, self._parse_data("\n".join(data_lines))
                        event, data_lines = "", []
                    elif line.startswith(":"):
                        continue  # SSE comment / keep-alive
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data_lines.append(line[5:].lstrip(" "))
                # An event not closed by a blank line at EOF is a cut stream: dropped.
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc

    def _parse_data(self, data: str) -> Any:
        if data == "[DONE]":
            return "[DONE]"
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ProviderError(self.name, "protocol", "stream event data is not JSON",
                                retryable=True) from exc


class OpenAIProvider(_HttpProvider):
    """OpenAI chat completions (``POST {base}/chat/completions``): OpenAI, Ollama, vLLM,
    llama.cpp server and LM Studio all speak it."""

    kind = ProviderKind.OPENAI

    def _path(self) -> str:
        return PATHS[ProviderKind.OPENAI]

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _body(self, request: ChatRequest, model: str, stream: bool) -> dict[str, Any]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": request.max_tokens or self.settings.max_tokens,
            "temperature": self.settings.temperature if request.temperature is None
            else request.temperature,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.json_mode and self.settings.json_response_format:
            body["response_format"] = {"type": "json_object"}
        return body

    def complete(self, request: ChatRequest, model: str) -> ChatResponse:
        """One non-streamed completion."""
        data = self._post_json(request, model)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            finish = choice.get("finish_reason") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProviderError(self.name, "protocol", "response has no choices[0].message",
                                retryable=True) from exc
        usage = data.get("usage") or {}
        return ChatResponse(
            text=str(text),
            usage=Usage(int(usage.get("prompt_tokens") or 0),
                        int(usage.get("completion_tokens") or 0)),
            model=str(data.get("model") or model),
            finish_reason=str(finish),
            usage_reported=bool(usage),
        )

    def stream(self, request: ChatRequest, model: str) -> Iterator[StreamEvent]:
        """Stream a completion as seed 000 §8 events."""
        started = False
        finish = ""
        usage: dict[str, Any] = {}
        for _event, data in self._sse(request, model):
            if not started:
                started = True
                yield StreamEvent("start")
            if data == "[DONE]":
                yield StreamEvent("stop", metadata={
                    "input_tokens": int(usage.get("prompt_tokens") or 0),
                    "output_tokens": int(usage.get("completion_tokens") or 0),
                    "usage_reported": bool(usage), "finish_reason": finish})
                return
            if not isinstance(data, dict):
                continue
            if "error" in data:
                yield StreamEvent("error", error=self._scrub(json.dumps(data["error"])))
                return
            if data.get("usage"):
                usage = data["usage"]
            for choice in data.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    yield StreamEvent("delta", content=str(delta))
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])


class AnthropicProvider(_HttpProvider):
    """Anthropic Messages (``POST {base}/v1/messages``), streamed or not."""

    kind = ProviderKind.ANTHROPIC

    def _path(self) -> str:
        return PATHS[ProviderKind.ANTHROPIC]

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.settings.anthropic_version,
                   "Accept": "application/json"}
        if key:
            headers["x-api-key"] = key
        return headers

    def _body(self, request: ChatRequest, model: str, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens or self.settings.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": self.settings.temperature if request.temperature is None
            else request.temperature,
            "stream": stream,
        }
        if request.system:
            body["system"] = request.system
        return body

    def complete(self, request: ChatRequest, model: str) -> ChatResponse:
        """One non-streamed message."""
        data = self._post_json(request, model)
        if data.get("type") == "error":
            raise ProviderError(self.name, "protocol",
                                self._scrub(json.dumps(data.get("error"))), retryable=True)
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ProviderError(self.name, "protocol", "response has no content blocks",
                                retryable=True)
        text = "".join(str(b.get("text", "")) for b in blocks
                       if isinstance(b, dict) and b.get("type") == "text")
        usage = data.get("usage") or {}
        return ChatResponse(
            text=text,
            usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
            model=str(data.get("model") or model),
            finish_reason=str(data.get("stop_reason") or ""),
            usage_reported=bool(usage),
        )

    def stream(self, request: ChatRequest, model: str) -> Iterator[StreamEvent]:
        """Stream a message as seed 000 §8 events."""
        input_tokens = output_tokens = 0
        reported = False
        finish = ""
        for event, data in self._sse(request, model):
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or event
            if kind == "message_start":
                usage = (data.get("message") or {}).get("usage") or {}
                input_tokens = int(usage.get("input_tokens") or 0)
                output_tokens = int(usage.get("output_tokens") or 0)
                reported = bool(usage)
                yield StreamEvent("start")
            elif kind == "content_block_delta":
                delta = data.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    yield StreamEvent("delta", content=str(delta["text"]))
            elif kind == "message_delta":
                usage = data.get("usage") or {}
                if "output_tokens" in usage:
                    output_tokens = int(usage["output_tokens"] or 0)
                    reported = True
                finish = str((data.get("delta") or {}).get("stop_reason") or finish)
            elif kind == "message_stop":
                yield StreamEvent("stop", metadata={
                    "input_tokens": input_tokens, "output_tokens": output_tokens,
                    "usage_reported": reported, "finish_reason": finish})
                return
            elif kind == "error":
                yield StreamEvent("error", error=self._scrub(json.dumps(data.get("error"))))
                return


def endpoint_url(settings: LLMSettings) -> str:
    """The URL a call to ``settings`` goes to (base URL + the protocol's path)."""
    path = PATHS.get(settings.kind, "") if settings.kind is not None else ""
    return settings.base_url.rstrip("/") + path


def build_provider(settings: LLMSettings, api_key: Callable[[], str | None],
                   transport: httpx.BaseTransport | None = None) -> LLMProvider:
    """The client for ``settings.kind``.

    Raises:
        ValueError: when no provider kind is set (check ``settings.configured`` first).
    """
    if settings.kind is ProviderKind.OPENAI:
        return OpenAIProvider(settings, api_key, transport)
    if settings.kind is ProviderKind.ANTHROPIC:
        return AnthropicProvider(settings, api_key, transport)
    raise ValueError("no LLM provider kind configured")
