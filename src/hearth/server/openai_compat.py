"""The OpenAI-compatible endpoint (X1): ``/v1/models`` and ``/v1/chat/completions``.

This module only translates between the Chat Completions wire format and ``scope.clients``
(``hearth.interop.client_chats``), which pins the client's chat to a conversation and runs Hearth's own send
path for the last user message. The API token in ``Authorization: Bearer`` decides the user (G2);
the auth middleware refuses these routes without one. Errors leave in OpenAI's error shape
(``server/errors.py``). Parameters Hearth does not use (temperature, max_tokens, tools, ...) are
accepted and ignored; docs/clients.md lists them. The fields Hearth does use are checked strictly:
``stream`` and ``stream_options.include_usage`` take only JSON booleans, and every message's content
meets the library's text rule, refused under its own name (``messages.N.content``) before anything
is saved.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Annotated, Any, Generator, Literal

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from hearth.interop.client_chats import ClientMessage, chat_id_from, unknown_model
from hearth.scope import Scope
from hearth.thread.send import Events

from ..errors import HearthError, InvalidInput, ProviderError
from ..text import estimate_tokens
from ..validation import text_problem
from .auth import current_scope, get_hearth
from .streams import SSE_MEDIA_TYPE, closing

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["openai"])

CONVERSATION_HEADER = "X-Hearth-Conversation-Id"
MAX_MESSAGES = 10_000


def _json_bool(value: Any) -> bool:
    # Lax parsing would read "yes", "off" or 1 as a boolean; a client sending those has a bug to see.
    if not isinstance(value, bool):
        raise ValueError("must be a JSON boolean, true or false")
    return value


JsonBool = Annotated[bool, BeforeValidator(_json_bool)]


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = Field(max_length=100)
    text: str | None = None


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, ...: accepted and not used
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    @field_validator("content")
    @classmethod
    def _storable(cls, content: str | list[ContentPart] | None) -> str | list[ContentPart] | None:
        # Checked here, not when the text becomes a title or instructions, so the error names this field.
        texts = {"": content} if isinstance(content, str) else {
            f"part {i} ": p.text for i, p in enumerate(content or ()) if p.text is not None}
        for where, text in texts.items():
            problem = text_problem(text)
            if problem:
                raise ValueError(where + problem)
        return content


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: JsonBool = False


class ChatCompletionIn(BaseModel):
    """A Chat Completions request. Unlisted parameters are accepted and ignored (docs/clients.md)."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=200, description="A persona name (GET /v1/models)")
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: JsonBool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="Only one choice is made")

    @field_validator("model")
    @classmethod
    def _storable_model(cls, model: str) -> str:
        problem = text_problem(model)  # a persona name could never hold it; say so instead of 404
        if problem:
            raise ValueError(problem)
        return model


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


class AssistantMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class ChoiceOut(BaseModel):
    index: int
    message: AssistantMessageOut
    logprobs: None = None
    finish_reason: str


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int]


class ChatCompletionOut(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut
    system_fingerprint: None = None


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    error: OpenAIErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIError, "description": description} for status, description in (
        (400, "Invalid request: malformed JSON or messages, no user message last, unsupported content"),
        (401, "Missing, invalid or revoked API token"),
        (404, "Unknown model (persona)"),
        (409, "The pinned conversation cannot take this turn"),
        (413, "Request body too large"),
        (502, "The model provider failed (non-streaming requests)"),
    )
}


def _text(message: MessageIn) -> str:
    content = message.content
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        parts = []
        for part in content:
            if part.type == "image_url" and message.role == "user":
                continue  # read by ``_images`` (W14)
            if part.type != "text" or part.text is None:
                if message.role == "user":
                    raise InvalidInput(f"only text content parts are supported, not {part.type!r}"
                                       if part.type != "text" else "a text content part has no text")
                continue
            parts.append(part.text)
        text = "\n".join(parts)
    return text  # storable: MessageIn checked it


def _images(message: MessageIn) -> list[dict[str, Any]]:
    """The ``image_url`` parts of the last user message as attachments (W14): data URLs only, since
    Hearth fetches nothing a client names; the send path checks them as it checks any attachment."""
    found: list[dict[str, Any]] = []
    if isinstance(message.content, str) or message.content is None:
        return found
    for n, part in enumerate(message.content):
        if part.type != "image_url":
            continue
        image = (part.model_extra or {}).get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url[:100]:
            raise InvalidInput("an image_url part must carry the image as a data: URL with base64 data")
        media_type, data = url[5:].split(";base64,", 1)
        found.append({"name": f"image-{n + 1}", "media_type": media_type[:100], "data": data})
    return found


def _usage(done: dict[str, Any], reply_chars: int) -> dict[str, Any]:
    usage = done.get("usage") or {}
    prompt, completion = int(usage.get("input") or 0), int(usage.get("output") or 0)
    if not prompt and not completion:  # the provider reported none: Hearth's own estimate
        prompt = int((done.get("size") or {}).get("total_tokens") or 0)
        completion = estimate_tokens(reply_chars)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(usage.get("cached") or 0)}}


@router.get("/models", response_model=ModelList, responses={401: ERRORS[401]})
def list_models(request: Request, scope: Scope = Depends(current_scope)) -> dict:
    """Each persona is a model named by its persona name."""
    provider_models = get_hearth(request).settings.v1_provider_models
    return {"object": "list", "data": [
        {"id": m.id, "object": "model", "created": m.created, "owned_by": m.owned_by}
        for m in scope.clients.models(provider_models=provider_models)]}


@router.get("/models/{model}", response_model=ModelOut, responses={401: ERRORS[401], 404: ERRORS[404]})
def get_model(model: Annotated[str, Path(min_length=1, max_length=300)], request: Request, scope: Scope = Depends(current_scope)) -> dict:
    provider_models = get_hearth(request).settings.v1_provider_models
    for m in scope.clients.models(provider_models=provider_models):
        if m.id == model:
            return {"id": m.id, "object": "model", "created": m.created, "owned_by": m.owned_by}
    raise unknown_model(model)


@router.post("/chat/completions", response_model=ChatCompletionOut, responses={
    200: {"description": "A chat completion, or with `stream: true` Chat Completions chunks as server-sent "
                         "events ending with `data: [DONE]`",
          "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}}},
    **ERRORS})
def chat_completions(body: ChatCompletionIn, request: Request, scope: Scope = Depends(current_scope)) -> Any:
    """Answer the client's last user message through Hearth's send path, in the conversation its
    chat is pinned to (header ``X-Hearth-Conversation``, else a fingerprint of its opening)."""
    messages = [ClientMessage(m.role, _text(m)) for m in body.messages]
    last_user = next((m for m in reversed(body.messages) if m.role == "user"), None)
    settings = get_hearth(request).settings
    pinned, events = scope.clients.send_stream(body.model, messages, chat_id=chat_id_from(dict(request.headers)),
                                               provider_models=settings.v1_provider_models,
                                               attached=_images(last_user) if last_user else [])
    completion_id = "chatcmpl-" + secrets.token_hex(12)
    created = int(time.time())
    headers = {CONVERSATION_HEADER: str(pinned.conversation.id), "Cache-Control": "no-store"}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(closing(stream_chunks(events, completion_id, created, body.model, include_usage)),
                                 media_type=SSE_MEDIA_TYPE, headers={**headers, "X-Accel-Buffering": "no"})
    parts: list[str] = []
    done: dict[str, Any] = {}
    try:
        for event in events:
            if event.type == "delta":
                parts.append(event.data["text"])
            elif event.type == "error":
                raise ProviderError(event.data["detail"], event.data.get("kind", "other"),
                                    event.data.get("retryable", False))
            elif event.type == "done":
                done = event.data
    finally:
        events.close()  # here, on this request's thread, not wherever the error is collected
    text = "".join(parts)
    payload = {"id": completion_id, "object": "chat.completion", "created": created, "model": body.model,
               "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                            "logprobs": None, "finish_reason": "stop"}],
               "usage": _usage(done, len(text)), "system_fingerprint": None}
    return JSONResponse(payload, headers=headers)


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"


def stream_chunks(events: Events, completion_id: str, created: int, model: str,
                  include_usage: bool) -> Generator[bytes, None, None]:
    """Chat Completions chunks: the role first, then content deltas, the finish reason, the usage
    chunk when asked for (``stream_options.include_usage``), then ``data: [DONE]``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                                   "model": model, "system_fingerprint": None,
                                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            payload["usage"] = None
        return _data(payload)

    def failure(message: str, code: str) -> bytes:
        return _data({"error": {"message": message, "type": "api_error", "param": None, "code": code}})

    done: dict[str, Any] = {}
    chars = 0
    try:
        yield chunk({"role": "assistant", "content": ""})
        for event in events:
            if event.type == "delta":
                chars += len(event.data["text"])
                yield chunk({"content": event.data["text"]})
            elif event.type == "error":
                # The user's message is saved; a client's regenerate answers it again.
                yield failure(event.data["detail"], event.data.get("error", "provider_error"))
                return
            elif event.type == "done":
                done = event.data
    except HearthError as exc:
        yield failure(str(exc), exc.code)
        return
    except Exception:
        log.exception("client reply stream failed")
        yield failure("the server failed while answering; the message is saved", "internal_error")
        return
    finally:
        events.close()
    yield chunk({}, "stop")
    if include_usage:
        yield _data({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                     "system_fingerprint": None, "choices": [], "usage": _usage(done, chars)})
    yield b"data: [DONE]\n\n"
