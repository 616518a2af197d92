"""A real, scriptable LLM HTTP server on 127.0.0.1 for tests.

It speaks both protocols the gateway uses, streamed and not:

* ``POST /v1/chat/completions`` — OpenAI chat completions (``stream: true`` → ``data: {...}``
  lines ending with ``data: [DONE]``, usage in a final chunk when ``stream_options`` asks);
* ``POST /v1/messages`` — Anthropic Messages (``message_start`` / ``content_block_delta`` /
  ``message_delta`` with usage / ``message_stop``).

Each request takes the next :class:`Behaviour` from a queue (or the default one): ``ok``,
``status`` (any HTTP error, e.g. 429 with ``Retry-After`` or 500), ``hang`` (answer only after
``delay_s``, past the client's timeout), ``truncate`` (stream only the first ``cut_after`` chunks
and close the connection without the terminal event), ``invalid_body`` (HTTP 200 with a body or
stream data that is not JSON), ``drip`` (stream chunks ``delay_s`` apart). With ``api_key`` set,
a request without that key (``Authorization: Bearer`` / ``x-api-key``) gets a 401 whose body
echoes the key it was sent, as some real servers do. Requests are recorded
(path, headers, parsed body) for assertions. The server runs in a daemon thread on port 0 and
stops itself on ``__exit__`` (waking any hanging handler).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Behaviour", "LLMTestServer", "RecordedRequest"]


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one request.

    Attributes:
        kind: ok, status, hang, truncate, invalid_body or drip.
        content: The model's text (split into ``chunks`` pieces when streamed).
        status: HTTP status for ``status``.
        retry_after: ``Retry-After`` header value for ``status`` (seconds as text).
        delay_s: Hang time (``hang``) or the gap between chunks (``drip``).
        chunks: Number of stream pieces.
        cut_after: ``truncate``: pieces sent before the connection is closed.
        input_tokens: Reported prompt tokens (None: counted from the request words).
        output_tokens: Reported output tokens (None: counted from ``content`` words).
        finish_reason: OpenAI finish reason (Anthropic's stop reason is mapped from it).
    """

    kind: str = "ok"
    content: str = '{"schemaVersion": "v1", "memories": []}'
    status: int = 200
    retry_after: str | None = None
    delay_s: float = 0.0
    chunks: int = 4
    cut_after: int = 2
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str = "stop"


@dataclass
class RecordedRequest:
    """One request as received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)
    raw: str = ""


def _pieces(text: str, count: int) -> list[str]:
    count = max(1, min(count, len(text) or 1))
    size = -(-len(text) // count) if text else 1
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class LLMTestServer:
    """Context manager running the server; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, default: Behaviour | None = None, api_key: str | None = None) -> None:
        self.default = default or Behaviour()
        self.api_key = api_key
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LLMTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        """Root URL (Anthropic base); the OpenAI base is ``base_url + "/v1"``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for the next requests, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    def _next(self) -> Behaviour:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- protocol bodies ---------------------------------------------------------------------
    @staticmethod
    def _usage(request: dict[str, Any], b: Behaviour) -> tuple[int, int]:
        words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
        words += len(str(request.get("system", "")).split())
        inp = b.input_tokens if b.input_tokens is not None else words
        out = b.output_tokens if b.output_tokens is not None else len(b.content.split())
        return inp, out

    def _openai_events(self, request: dict[str, Any], b: Behaviour) -> Iterator[str]:
        inp, out = self._usage(request, b)
        for piece in _pieces(b.content, b.chunks):
            chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                     "model": request.get("model"),
                     "choices": [{"index": 0, "delta": {"content": piece},
                                  "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
        final = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {}, "finish_reason": b.finish_reason}]}
        yield f"data: {json.dumps(final)}\n\n"
        if (request.get("stream_options") or {}).get("include_usage"):
            usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                     "usage": {"prompt_tokens": inp, "completion_tokens": out,
                               "total_tokens": inp + out}}
            yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"

    def _anthropic_events(self, request: dict[str, Any], b: Behaviour) -> Iterator[str]:
        inp, out = self._usage(request, b)
        stop = "max_tokens" if b.finish_reason == "length" else "end_turn"

        def event(name: str, data: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        yield event("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": request.get("model"), "stop_reason": None,
            "usage": {"input_tokens": inp, "output_tokens": 1}}})
        yield event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
        yield event("ping", {"type": "ping"})
        for piece in _pieces(b.content, b.chunks):
            yield event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}})
        yield event("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": out}})
        yield event("message_stop", {"type": "message_stop"})

    def _json_body(self, path: str, request: dict[str, Any], b: Behaviour) -> dict[str, Any]:
        inp, out = self._usage(request, b)
        if path.endswith("/messages"):
            return {"id": "msg_1", "type": "message", "role": "assistant",
                    "model": request.get("model"),
                    "content": [{"type": "text", "text": b.content}],
                    "stop_reason": "max_tokens" if b.finish_reason == "length" else "end_turn",
                    "usage": {"input_tokens": inp, "output_tokens": out}}
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": request.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": b.content},
                             "finish_reason": b.finish_reason}],
                "usage": {"prompt_tokens": inp, "completion_tokens": out,
                          "total_tokens": inp + out}}

    def _refused_key(self, path: str, headers: Any) -> dict[str, Any] | None:
        """The 401 body when ``api_key`` is set and the request did not send it, else None."""
        if self.api_key is None:
            return None
        bearer = str(headers.get("Authorization") or "").removeprefix("Bearer ")
        sent = str(headers.get("x-api-key") or "") or bearer
        if sent == self.api_key:
            return None
        if path.endswith("/messages"):
            return {"type": "error", "error": {"type": "authentication_error",
                                               "message": f"invalid x-api-key {sent}"}}
        return {"error": {"message": f"Incorrect API key provided: {sent}.",
                          "type": "invalid_request_error", "code": "invalid_api_key"}}

    @staticmethod
    def _error_body(path: str, status: int) -> dict[str, Any]:
        kind = "rate_limit_error" if status == 429 else "api_error"
        if path.endswith("/messages"):
            return {"type": "error", "error": {"type": kind, "message": f"scripted {status}"}}
        return {"error": {"message": f"scripted {status}", "type": kind}}

    # -- HTTP --------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # close after each response: EOF ends a cut stream

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep test output quiet

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                server._record(RecordedRequest(self.path, dict(self.headers.items()), body, raw))
                if self.path not in ("/v1/chat/completions", "/v1/messages"):
                    self._send_json(404, {"error": {"message": "unknown path"}})
                    return
                refused = server._refused_key(self.path, self.headers)
                if refused is not None:
                    self._send_json(401, refused)
                    return
                behaviour = server._next()
                try:
                    self._answer(behaviour, body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (timeout); nothing to do

            def _send_json(self, status: int, data: dict[str, Any],
                           headers: dict[str, str] | None = None) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def _answer(self, b: Behaviour, body: dict[str, Any]) -> None:
                if b.kind == "hang" and server._stop.wait(b.delay_s):
                    return
                if b.kind == "status":
                    extra = {"Retry-After": b.retry_after} if b.retry_after else {}
                    self._send_json(b.status, server._error_body(self.path, b.status), extra)
                    return
                streamed = bool(body.get("stream"))
                if b.kind == "invalid_body":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream" if streamed
                                     else "application/json")
                    self.end_headers()
                    self.wfile.write(b"data: {not json\n\n" if streamed else b"{not json")
                    return
                if not streamed:
                    self._send_json(200, server._json_body(self.path, body, b))
                    return
                events = list(server._anthropic_events(body, b)
                              if self.path.endswith("/messages")
                              else server._openai_events(body, b))
                if b.kind == "truncate":
                    # Keep the opening event(s), then only cut_after content pieces.
                    first_delta = next(i for i, e in enumerate(events)
                                       if "text_delta" in e or '"delta": {"content"' in e)
                    events = events[:first_delta + b.cut_after]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                    if b.kind == "drip" and server._stop.wait(b.delay_s):
                        return

        return Handler
