"""A scriptable fake model provider on 127.0.0.1 speaking the real streaming wire formats (PR4).

One Starlette app serves three endpoints, each in its provider's own server-sent-events format:

    POST /v1/responses          OpenAI Responses API (response.created ... response.completed)
    POST /v1/chat/completions   OpenAI-compatible Chat Completions (chunks, usage chunk, [DONE])
    POST /v1/messages           Anthropic Messages (message_start ... message_stop)
    POST /v1/responses/compact  OpenAI Responses compaction (a JSON ``response.compaction`` object)
    GET  /v1/models             the model list: OpenAI's ``{"object": "list", "data"}``, or, for a
                                request carrying ``anthropic-version``, Anthropic's paged
                                ``{"data", "has_more", "first_id", "last_id"}`` (``limit``, ``after_id``)

Tests queue what the next request gets with ``script(...)``: text chunks, tool calls, usage, an
error status, a delay before answering, or a stream that ends early / drops its connection. Every
request's JSON body is recorded in ``requests`` so tests can assert what the SDK actually sent.
The official SDKs talk to it over real HTTP; nothing in them is patched.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL_ECHO = "fake-model"


@dataclass
class Scripted:
    """What the fake answers to one request."""

    text: list[str] = field(default_factory=lambda: ["Hello", " from", " the fake."])
    # (call id, tool name, arguments object)
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 42
    output_tokens: int = 7
    cached_tokens: int = 5
    status: int | None = None  # answer with this HTTP error status instead of a stream
    delay: float = 0.0  # seconds to wait before sending anything
    end_after: int | None = None  # end the stream cleanly after this many events (no final event)
    abort_after: int | None = None  # drop the connection after this many events
    error_event: bool = False  # send an in-stream error event after the first events
    response_id: str = "resp_fake_1"
    # Responses API: the server compacted its chain during this response (an output item of type
    # "compaction", as with context_management enabled).
    compaction: bool = False


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: dict[str, str] = field(default_factory=dict)


# What GET /v1/models lists until a test sets ``models`` (or ``models_status`` for an error).
DEFAULT_MODELS = ("gpt-4.1", "gpt-4.1-mini", "text-embedding-3-small", "claude-sonnet-4-6", "llama3.1")


class _Abort(Exception):
    """Raised inside a streaming body so the server drops the connection mid-way."""


class FakeProviderServer:
    """Runs the fake in a background thread; ``base_url`` is the server root."""

    def __init__(self) -> None:
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.models: list[str] = list(DEFAULT_MODELS)
        self.models_status: int | None = None  # answer GET /v1/models with this error status
        self.models_page = 1000  # Anthropic: at most this many per page, so a test sees the SDK page on
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- scripting -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL in the OpenAI SDK's convention (it appends /responses, /chat/completions)."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL in the Anthropic SDK's convention (it appends /v1/messages)."""
        return self.base_url

    def script(self, **kwargs: Any) -> Scripted:
        """Queue the answer for the next request (one per call; unscripted requests get a default)."""
        item = Scripted(**kwargs)
        with self._lock:
            self._queue.append(item)
        return item

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.models = list(DEFAULT_MODELS)
            self.models_status = None
            self.models_page = 1000

    def _next(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if self._queue else Scripted()

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> "FakeProviderServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(), log_level="critical", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="fake-provider"
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake provider server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeProviderServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- HTTP ------------------------------------------------------------------------------
    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/responses/compact", self._compact_endpoint(), methods=["POST"]),
                Route("/v1/responses", self._endpoint(_responses_events, _openai_error), methods=["POST"]),
                Route("/v1/chat/completions", self._endpoint(_chat_events, _openai_error), methods=["POST"]),
                Route("/v1/messages", self._endpoint(_anthropic_events, _anthropic_error), methods=["POST"]),
                Route("/v1/models", self._models_endpoint, methods=["GET"]),
            ]
        )

    async def _models_endpoint(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        query = dict(request.query_params)
        anthropic = "anthropic-version" in headers
        with self._lock:
            self.requests.append(RecordedRequest(request.url.path, headers, {}, query))
            names, status, most = list(self.models), self.models_status, self.models_page
        if status is not None:
            error = _anthropic_error(status) if anthropic else _openai_error(status)
            return JSONResponse(error, status_code=status)
        if not anthropic:
            return JSONResponse({"object": "list", "data": [
                {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "fake"} for name in names]})
        start = names.index(query["after_id"]) + 1 if query.get("after_id") in names else 0
        page = names[start:start + min(int(query.get("limit", "20")), most)]
        return JSONResponse({
            "data": [{"type": "model", "id": name, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}
                     for name in page],
            "has_more": start + len(page) < len(names),
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        })

    def _compact_endpoint(self) -> Any:
        async def handle(request: Request) -> Response:
            body = json.loads(await request.body() or b"{}")
            headers = {k.lower(): v for k, v in request.headers.items()}
            plan = self._next(RecordedRequest(request.url.path, headers, body))
            if plan.delay:
                await asyncio.sleep(plan.delay)
            if plan.status is not None:
                return JSONResponse(_openai_error(plan.status), status_code=plan.status)
            return JSONResponse(_compacted(plan, body))

        return handle

    def _endpoint(self, events_for: Any, error_body: Any) -> Any:
        async def handle(request: Request) -> Response:
            body = json.loads(await request.body() or b"{}")
            headers = {k.lower(): v for k, v in request.headers.items()}
            plan = self._next(RecordedRequest(request.url.path, headers, body))
            if plan.delay:
                await asyncio.sleep(plan.delay)
            if plan.status is not None:
                return JSONResponse(error_body(plan.status), status_code=plan.status)
            events = list(events_for(plan, body))
            return StreamingResponse(_sse(events, plan), media_type="text/event-stream")

        return handle


async def _sse(events: list[tuple[str | None, Any]], plan: Scripted) -> AsyncIterator[bytes]:
    for count, (name, data) in enumerate(events):
        if plan.abort_after is not None and count >= plan.abort_after:
            raise _Abort("connection dropped on purpose")
        if plan.end_after is not None and count >= plan.end_after:
            return
        payload = data if isinstance(data, str) else json.dumps(data)
        prefix = f"event: {name}\n" if name else ""
        yield f"{prefix}data: {payload}\n\n".encode()
        await asyncio.sleep(0)  # let each event leave as its own chunk


# --- error bodies ---------------------------------------------------------------------------
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _openai_error(status: int) -> dict[str, Any]:
    return {
        "error": {
            "message": f"fake error {status}",
            "type": _ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": None,
        }
    }


def _anthropic_error(status: int) -> dict[str, Any]:
    error = {"type": _ERROR_TYPES.get(status, "api_error"), "message": f"fake error {status}"}
    return {"type": "error", "error": error}


# --- OpenAI Responses -----------------------------------------------------------------------
def _response_object(plan: Scripted, body: dict[str, Any], status: str, output: list[Any]) -> dict[str, Any]:
    usage = None
    if status == "completed":
        usage = {
            "input_tokens": plan.input_tokens,
            "input_tokens_details": {"cached_tokens": plan.cached_tokens},
            "output_tokens": plan.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": plan.input_tokens + plan.output_tokens,
        }
    return {
        "id": plan.response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": body.get("model", MODEL_ECHO),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools", []),
        "previous_response_id": body.get("previous_response_id"),
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "usage": usage,
    }


def _responses_events(plan: Scripted, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    seq = iter(range(10_000))
    out: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append((kind, {"type": kind, "sequence_number": next(seq), **fields}))

    emit("response.created", response=_response_object(plan, body, "in_progress", []))
    emit("response.in_progress", response=_response_object(plan, body, "in_progress", []))
    if plan.error_event:
        emit("error", code="server_error", message="fake in-stream error", param=None)
    output: list[dict[str, Any]] = []
    if plan.text:
        index, item_id = len(output), "msg_fake_1"
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []})
        emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
             part={"type": "output_text", "text": "", "annotations": []})
        for chunk in plan.text:
            emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                 delta=chunk, logprobs=[])
        full = "".join(plan.text)
        emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
             text=full, logprobs=[])
        part = {"type": "output_text", "text": full, "annotations": []}
        emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    for call_id, name, args in plan.tool_calls:
        index, item_id = len(output), f"fc_{call_id}"
        arguments = json.dumps(args)
        emit("response.output_item.added", output_index=index,
             item={"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                   "arguments": "", "status": "in_progress"})
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
        emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                "arguments": arguments, "status": "completed"}
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    if plan.compaction:
        index = len(output)
        item = {"id": "cmp_auto_1", "type": "compaction", "encrypted_content": "gAAAA-fake-auto-compacted"}
        emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
    emit("response.completed", response=_response_object(plan, body, "completed", output))
    return iter(out)


def _compacted(plan: Scripted, body: dict[str, Any]) -> dict[str, Any]:
    """The compaction endpoint's answer: every user message of the input, then one opaque
    compaction item standing for everything else (the real API's ``response.compaction``)."""
    items = body.get("input") or []
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    output = [{"id": f"msg_user_{n}", "type": "message", "role": "user", "status": "completed",
               "content": [{"type": "input_text", "text": u["content"] if isinstance(u.get("content"), str)
                            else json.dumps(u.get("content"))}]} for n, u in enumerate(users)]
    output.append({"id": "cmp_fake_1", "type": "compaction", "encrypted_content": "gAAAA-fake-compacted-state"})
    return {
        "id": plan.response_id.replace("resp_", "cmp_resp_"),
        "object": "response.compaction",
        "created_at": 1_700_000_100,
        "output": output,
        "usage": {
            "input_tokens": plan.input_tokens,
            "input_tokens_details": {"cached_tokens": plan.cached_tokens},
            "output_tokens": plan.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": plan.input_tokens + plan.output_tokens,
        },
    }


# --- OpenAI Chat Completions ----------------------------------------------------------------
def _chat_events(plan: Scripted, body: dict[str, Any]) -> Iterator[tuple[None, Any]]:
    model = body.get("model", MODEL_ECHO)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if plan.error_event:
        yield None, {"error": {"message": "fake in-stream error", "type": "server_error"}}
    for piece in plan.text:
        yield chunk({"content": piece})
    for index, (call_id, name, args) in enumerate(plan.tool_calls):
        arguments = json.dumps(args)
        half = len(arguments) // 2
        # The first delta names the call; argument text follows in later deltas, as servers do.
        yield chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if plan.tool_calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield None, {
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "choices": [],
            "usage": {
                "prompt_tokens": plan.input_tokens,
                "completion_tokens": plan.output_tokens,
                "total_tokens": plan.input_tokens + plan.output_tokens,
                "prompt_tokens_details": {"cached_tokens": plan.cached_tokens},
            },
        }
    yield None, "[DONE]"


# --- Anthropic Messages ---------------------------------------------------------------------
def _anthropic_events(plan: Scripted, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    uncached = max(plan.input_tokens - plan.cached_tokens, 0)
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_fake_1", "type": "message", "role": "assistant", "content": [],
        "model": body.get("model", MODEL_ECHO), "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": uncached, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": plan.cached_tokens},
    }}
    yield "ping", {"type": "ping"}
    if plan.error_event:
        yield "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    index = 0
    if plan.text:
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {"type": "text", "text": ""}}
        for piece in plan.text:
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    for call_id, name, args in plan.tool_calls:
        arguments = json.dumps(args)
        half = len(arguments) // 2
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}
        for piece in (arguments[:half], arguments[half:]):
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": "tool_use" if plan.tool_calls else "end_turn",
                                      "stop_sequence": None},
                            "usage": {"output_tokens": plan.output_tokens}}
    yield "message_stop", {"type": "message_stop"}
