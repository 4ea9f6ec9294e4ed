"""OpenAI Responses API provider (PR1, E7 basics), streaming through the official ``openai`` SDK.

Mapping: every system message is joined, in order, into ``instructions`` (instructions are not
carried along a ``previous_response_id`` chain, so they are sent whole each turn); user and
assistant messages become input messages; an assistant's tool calls become ``function_call``
items and tool results ``function_call_output`` items. Tools are function tools.

Also holds the mapping from ``openai`` SDK exceptions to ``ProviderError`` shared with the
Chat Completions provider.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

import openai

from ..errors import ProviderError
from .base import (
    LIST_TIMEOUT,
    ChatMessage,
    CompactResult,
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

DEFAULT_MODEL = "gpt-4.1"


def make_openai_client(api_key: str, base_url: str, timeout: float) -> openai.OpenAI:
    # max_retries=0: Hearth reports a failure at once and the user retries (PR5).
    return openai.OpenAI(
        api_key=api_key or "not-needed",  # local servers ignore it, but the SDK requires one
        base_url=base_url or None,
        timeout=timeout,
        max_retries=0,
    )


def map_openai_error(exc: openai.OpenAIError, *, started: bool, timeout: float, base_url: str) -> ProviderError:
    """Translate an ``openai`` SDK exception into a content-free ProviderError."""
    if isinstance(exc, openai.APITimeoutError):
        return timeout_error(timeout)
    if isinstance(exc, openai.APIConnectionError):
        return stream_error() if started else unreachable_error(base_url)
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc.status_code)
    if isinstance(exc, openai.APIError):
        # An error event inside an otherwise successful stream.
        return ProviderError(
            "The model provider reported an error part-way through the reply; try again.", kind="stream"
        )
    return ProviderError("The model provider client failed before sending the request.", kind="bad_request",
                         retryable=False)


def list_openai_models(client: openai.OpenAI, *, timeout: float, base_url: str) -> list[str]:
    """The ids of ``GET /models`` through the SDK (OpenAI, and compatible servers: Ollama, vLLM,
    llama.cpp, LM Studio, OpenRouter), in the server's order."""
    wait = min(timeout, LIST_TIMEOUT)
    try:
        return listed_names(model.id for model in client.with_options(timeout=wait).models.list())
    except openai.OpenAIError as exc:
        log.info("openai model listing failed (%s)", type(exc).__name__)
        raise map_openai_error(exc, started=False, timeout=wait, base_url=base_url) from None
    except transport_errors() as exc:
        raise map_transport_error(exc, started=False, timeout=wait, base_url=base_url) from None


def to_responses_input(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """Split messages into (instructions, input items)."""
    instructions = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            items.append({"type": "function_call_output", "call_id": message.tool_call_id or "",
                          "output": message.content})
        elif message.role == "user" and message.images:
            # Responses input parts: input_text, then each image as input_image with a data URL (W14).
            parts: list[dict[str, Any]] = [{"type": "input_text", "text": message.content}] if message.content else []
            parts += [{"type": "input_image", "image_url": image.data_url(), "detail": "auto"}
                      for image in message.images]
            items.append({"role": "user", "content": parts})
        elif message.role in ("user", "assistant"):
            if message.content or not message.tool_calls:
                items.append({"role": message.role, "content": message.content})
            for call in message.tool_calls:
                items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                              "arguments": json.dumps(call.arguments)})
        else:
            raise ProviderError(f"Unknown message role {message.role!r} in a provider request.",
                                kind="bad_request", retryable=False)
    return instructions, items


def after_last_assistant(messages: list[ChatMessage]) -> list[ChatMessage]:
    """System messages plus whatever follows the last assistant message (for a chained turn)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return [m for i, m in enumerate(messages) if m.role == "system" or i > last]


def to_function_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.parameters, "strict": False} for t in tools]


class OpenAIResponsesProvider:
    name = "openai"
    chains = True  # continues with previous_response_id and can compact (E7)

    def __init__(self, model: str = DEFAULT_MODEL, api_key: str = "", base_url: str = "",
                 timeout: float = 60.0) -> None:
        self.model = model or DEFAULT_MODEL
        self.base_url = base_url
        self.timeout = timeout
        self._client = make_openai_client(api_key, base_url, timeout)

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        messages = request.messages
        if request.previous_response_id or request.replacement_input:
            messages = after_last_assistant(messages)
        instructions, items = to_responses_input(messages)
        if request.replacement_input:
            # A compaction's output stands for the whole earlier chain (E7).
            items = [*request.replacement_input, *items]
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "input": items,
            "max_output_tokens": request.max_output_tokens,
            "stream": True,
        }
        if instructions:
            params["instructions"] = instructions
        if request.tools:
            params["tools"] = to_function_tools(request.tools)
        if request.previous_response_id and not request.replacement_input:
            params["previous_response_id"] = request.previous_response_id
        if request.compact_threshold:
            params["context_management"] = [{"type": "compaction", "compact_threshold": request.compact_threshold}]
        return params

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        started = False
        completed = False
        try:
            events = self._client.responses.create(**self.build_params(request))
            with events:
                for event in events:
                    started = True
                    kind = getattr(event, "type", "")
                    if kind == "response.output_text.delta":
                        if event.delta:
                            yield StreamEvent("text", text=event.delta)
                    elif kind == "response.output_item.done":
                        item = event.item
                        if getattr(item, "type", "") == "function_call":
                            yield StreamEvent("tool_call", tool_call=ToolCall(
                                id=item.call_id, name=item.name, arguments=parse_tool_arguments(item.arguments)))
                        elif getattr(item, "type", "") == "compaction":
                            yield StreamEvent("compacted")
                    elif kind == "response.completed":
                        completed = True
                        yield StreamEvent("usage", usage=_usage(event.response.usage),
                                          response_id=event.response.id or "")
                    elif kind in ("response.failed", "response.incomplete", "error"):
                        raise _ended_badly(event)
        except openai.OpenAIError as exc:
            log.info("openai responses request failed (%s)", type(exc).__name__)
            raise map_openai_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        except transport_errors() as exc:
            log.info("provider transport failed (%s)", type(exc).__name__)
            raise map_transport_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        if not completed:
            raise stream_error()


    def list_models(self) -> list[str]:
        return list_openai_models(self._client, timeout=self.timeout, base_url=self.base_url)

    def compact(self, *, instructions: str, items: list[dict[str, Any]],
                previous_response_id: str | None, model: str | None = None) -> CompactResult:
        """Call the Responses compaction endpoint; its output replaces the chain's input (E7)."""
        params: dict[str, Any] = {"model": model or self.model}
        if items:
            params["input"] = items
        if instructions:
            params["instructions"] = instructions
        if previous_response_id:
            params["previous_response_id"] = previous_response_id
        try:
            result = self._client.responses.compact(**params)
        except openai.OpenAIError as exc:
            log.info("openai responses compaction failed (%s)", type(exc).__name__)
            raise map_openai_error(exc, started=False, timeout=self.timeout, base_url=self.base_url) from None
        except transport_errors() as exc:
            raise map_transport_error(exc, started=False, timeout=self.timeout, base_url=self.base_url) from None
        # Exactly what the server sent (the SDK types user items as output messages; keep them raw).
        output = [item.to_dict(mode="json", warnings=False) for item in result.output]
        return CompactResult(output=output, usage=_usage(result.usage), id=result.id or "")


def _ended_badly(event: Any) -> ProviderError:
    kind = getattr(event, "type", "")
    if kind == "response.incomplete":
        details = getattr(event.response, "incomplete_details", None)
        reason = getattr(details, "reason", None) or "unknown"
        return ProviderError(f"The model provider stopped the reply early ({reason}).", kind="stream")
    return ProviderError("The model provider reported an error part-way through the reply; try again.",
                         kind="stream")


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "input_tokens_details", None)
    return Usage(
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
    )
