"""Anthropic Messages provider (PR1), streaming through the official ``anthropic`` SDK.

Mapping: system messages become the ``system`` parameter, one text block each, in order; the first
(the stored static prompt) carries a cache marker so repeated turns can reuse it. Assistant tool
calls become ``tool_use`` blocks and tool results ``tool_result`` blocks in a user message;
consecutive messages of the same role are merged, as the API expects parallel tool results together.
Usage: input from ``message_start`` (uncached + cache reads + cache writes, so it means the same as
OpenAI's input count), output from the last ``message_delta``.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import anthropic

from ..errors import ProviderError
from .base import (
    LIST_TIMEOUT,
    ChatMessage,
    ProviderRequest,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
    listed_names,
    map_transport_error,
    parse_tool_arguments,
    status_error,
    stream_error,
    timeout_error,
    transport_errors,
    unreachable_error,
)

log = logging.getLogger(__name__)

DEFAULT_MODEL = "claude-sonnet-4-6"


def to_anthropic(messages: list[ChatMessage]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split messages into (system blocks, messages with content blocks)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append({"type": "text", "text": message.content})
            continue
        if message.role == "tool":
            role = "user"
            blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                                             "content": message.content}]
        elif message.role in ("user", "assistant"):
            role = message.role
            # The API rejects empty text blocks.
            # Image blocks (base64 source), then the text block (W14).
            blocks = [{"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                                   "data": image.base64()}} for image in message.images]
            blocks += [{"type": "text", "text": message.content}] if message.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                       for c in message.tool_calls]
        else:
            raise ProviderError(f"Unknown message role {message.role!r} in a provider request.",
                                kind="bad_request", retryable=False)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if system:
        system[0]["cache_control"] = {"type": "ephemeral"}
    return system, out


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, model: str = DEFAULT_MODEL, api_key: str = "", base_url: str = "",
                 timeout: float = 60.0) -> None:
        self.model = model or DEFAULT_MODEL
        self.base_url = base_url
        self.timeout = timeout
        # max_retries=0: Hearth reports a failure at once and the user retries (PR5).
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url or None,
                                           timeout=timeout, max_retries=0)

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        system, messages = to_anthropic(request.messages)
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": messages,
            "max_tokens": request.max_output_tokens,
            "stream": True,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools)
        return params

    def list_models(self) -> list[str]:
        """The ids of ``GET /v1/models`` through the SDK, every page (the SDK follows ``has_more``)."""
        wait = min(self.timeout, LIST_TIMEOUT)
        try:
            return listed_names(m.id for m in self._client.with_options(timeout=wait).models.list(limit=1000))
        except anthropic.AnthropicError as exc:
            log.info("anthropic model listing failed (%s)", type(exc).__name__)
            raise _map_error(exc, started=False, timeout=wait, base_url=self.base_url) from None
        except transport_errors() as exc:
            raise map_transport_error(exc, started=False, timeout=wait, base_url=self.base_url) from None

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        started = False
        stopped = False
        input_tokens = cached = output_tokens = 0
        tool_blocks: dict[int, dict[str, str]] = {}
        try:
            events = self._client.messages.create(**self.build_params(request))
            with events:
                for event in events:
                    started = True
                    kind = getattr(event, "type", "")
                    if kind == "message_start":
                        usage = event.message.usage
                        cached = int(usage.cache_read_input_tokens or 0)
                        input_tokens = int(usage.input_tokens or 0) + cached + int(
                            usage.cache_creation_input_tokens or 0)
                        output_tokens = int(usage.output_tokens or 0)
                    elif kind == "content_block_start":
                        block = event.content_block
                        if getattr(block, "type", "") == "tool_use":
                            tool_blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and delta.text:
                            yield StreamEvent("text", text=delta.text)
                        elif delta.type == "input_json_delta" and event.index in tool_blocks:
                            tool_blocks[event.index]["json"] += delta.partial_json
                    elif kind == "content_block_stop" and event.index in tool_blocks:
                        block = tool_blocks.pop(event.index)
                        yield StreamEvent("tool_call", tool_call=ToolCall(
                            id=block["id"], name=block["name"], arguments=parse_tool_arguments(block["json"])))
                    elif kind == "message_delta":
                        # Cumulative counts; newer API versions may restate the input side here too.
                        output_tokens = int(event.usage.output_tokens or output_tokens)
                        if getattr(event.usage, "input_tokens", None) is not None:
                            cached = int(event.usage.cache_read_input_tokens or cached)
                            input_tokens = int(event.usage.input_tokens) + cached + int(
                                event.usage.cache_creation_input_tokens or 0)
                    elif kind == "message_stop":
                        stopped = True
        except anthropic.AnthropicError as exc:
            log.info("anthropic request failed (%s)", type(exc).__name__)
            raise _map_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        except transport_errors() as exc:
            log.info("provider transport failed (%s)", type(exc).__name__)
            raise map_transport_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        if not stopped:
            raise stream_error()
        yield StreamEvent("usage", usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                               cached_tokens=cached))


def _map_error(exc: anthropic.AnthropicError, *, started: bool, timeout: float, base_url: str) -> ProviderError:
    if isinstance(exc, anthropic.APITimeoutError):
        return timeout_error(timeout)
    if isinstance(exc, anthropic.APIConnectionError):
        return stream_error() if started else unreachable_error(base_url)
    if isinstance(exc, anthropic.APIStatusError):
        if started and exc.status_code < 400:
            # An error event inside a stream that began with 200 (e.g. overloaded part-way).
            body = exc.body if isinstance(exc.body, dict) else {}
            error = body.get("error")
            if not isinstance(error, dict):
                error = {}
            if error.get("type") == "overloaded_error":
                return ProviderError("The model provider became overloaded part-way through the reply; "
                                     "try again shortly.", kind="server")
            return ProviderError("The model provider reported an error part-way through the reply; try again.",
                                 kind="stream")
        return status_error(exc.status_code)
    return ProviderError("The model provider client failed before sending the request.", kind="bad_request",
                         retryable=False)
