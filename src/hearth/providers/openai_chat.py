"""OpenAI-compatible Chat Completions provider (PR1): Ollama, llama.cpp server, vLLM, LM Studio,
OpenRouter or OpenAI itself, chosen by base URL, streaming through the official ``openai`` SDK.

Messages map one to one (system messages stay in place); tool calls arrive as deltas keyed by
index and are assembled here, then yielded once the stream has finished. Usage comes from the final
usage chunk (``stream_options.include_usage``); servers that do not send one yield no usage event.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Iterator

import openai

from ..errors import ProviderError
from .base import (
    ChatMessage,
    ProviderRequest,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
    map_transport_error,
    parse_tool_arguments,
    stream_error,
    transport_errors,
)
from .openai_responses import list_openai_models, make_openai_client, map_openai_error

log = logging.getLogger(__name__)

DEFAULT_MODEL = "llama3.1"


def to_chat_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append({
                "role": "assistant",
                "content": message.content or None,
                "tool_calls": [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in message.tool_calls
                ],
            })
        elif message.role == "user" and message.images:
            # Chat Completions' content parts: the text, then each image as a data URL (W14).
            parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
            parts += [{"type": "image_url", "image_url": {"url": image.data_url()}} for image in message.images]
            out.append({"role": "user", "content": parts})
        elif message.role in ("system", "user", "assistant"):
            out.append({"role": message.role, "content": message.content})
        else:
            raise ProviderError(f"Unknown message role {message.role!r} in a provider request.",
                                kind="bad_request", retryable=False)
    return out


def to_chat_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function",
             "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class OpenAIChatProvider:
    name = "openai-chat"

    def __init__(self, model: str = DEFAULT_MODEL, api_key: str = "", base_url: str = "",
                 timeout: float = 60.0) -> None:
        self.model = model or DEFAULT_MODEL
        self.base_url = base_url
        self.timeout = timeout
        self._client = make_openai_client(api_key, base_url, timeout)

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": to_chat_messages(request.messages),
            # max_tokens rather than max_completion_tokens: the one every compatible server knows.
            "max_tokens": request.max_output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:  # some servers reject an empty list
            params["tools"] = to_chat_tools(request.tools)
        return params

    def list_models(self) -> list[str]:
        return list_openai_models(self._client, timeout=self.timeout, base_url=self.base_url)

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        started = False
        finished = False
        calls: dict[int, _PartialCall] = {}
        usage: Usage | None = None
        try:
            chunks = self._client.chat.completions.create(**self.build_params(request))
            with chunks:
                for chunk in chunks:
                    started = True
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    for choice in chunk.choices or ():
                        delta = choice.delta
                        if delta is not None and delta.content:
                            yield StreamEvent("text", text=delta.content)
                        for part in (delta.tool_calls or ()) if delta is not None else ():
                            call = calls.setdefault(part.index, _PartialCall())
                            call.id = part.id or call.id
                            if part.function is not None:
                                call.name = part.function.name or call.name
                                call.arguments += part.function.arguments or ""
                        if choice.finish_reason:
                            finished = True
        except openai.OpenAIError as exc:
            log.info("openai-compatible chat request failed (%s)", type(exc).__name__)
            raise map_openai_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        except transport_errors() as exc:
            log.info("provider transport failed (%s)", type(exc).__name__)
            raise map_transport_error(exc, started=started, timeout=self.timeout, base_url=self.base_url) from None
        if not finished:
            raise stream_error()
        for index in sorted(calls):
            call = calls[index]
            if not call.name:
                raise ProviderError("The model provider sent a tool call without a name.", kind="stream")
            yield StreamEvent("tool_call", tool_call=ToolCall(
                id=call.id or f"call_{index}", name=call.name, arguments=parse_tool_arguments(call.arguments)))
        if usage is not None:
            yield StreamEvent("usage", usage=usage)


def _usage(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
    )
