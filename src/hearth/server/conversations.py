"""Conversation routes (C2-C4): threads, their messages, sending with SSE, and diagnostics.

Shielding, New Chat and Branch live with the continuity routes.

Sending answers ``text/event-stream``. The send generator is run up to its ``saved`` event before
the response starts, so a bad request (empty or too long text, an ended or trashed conversation,
an unknown id) is still answered as an ordinary 4xx JSON error and nothing is saved. After that,
every outcome, including a provider failure (PR5), arrives as an event.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Generator

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from hearth.records import attachments, ledger
from hearth.records.conversations import MAX_TITLE
from hearth.scope import Scope
from hearth.thread.search import MAX_TAG, MAX_TAGS
from hearth.thread.send import Events, SendEvent

from ..errors import HearthError
from .auth import current_scope, get_hearth
from .models import MAX_ID, Estimate, IdPath, OptionalIdQuery, RequestModel, plain
from .streams import SSE_MEDIA_TYPE, closing

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/conversations", tags=["conversations"])


class ConversationCreate(RequestModel):
    persona_id: int | None = Field(default=None, ge=1, le=MAX_ID, description="Default persona when omitted")
    title: str = Field(default="", max_length=MAX_TITLE)
    folder_id: int | None = Field(default=None, ge=1, le=MAX_ID)


class Rename(RequestModel):
    title: str = Field(max_length=MAX_TITLE)


class Move(RequestModel):
    folder_id: int | None = Field(ge=1, le=MAX_ID, description="null moves it out of any folder")


class Restore(RequestModel):
    shielded: bool | None = Field(default=True, description=(
        "Keep it out of automatic continuity until released (V2); false releases at once, "
        "null leaves the flag as it is"))


class AttachmentIn(RequestModel):
    name: str = Field(max_length=1000, description="The file's name (a path is cut to its last part)")
    media_type: str = Field(default="", max_length=100, description="As the browser reports it; images are told by their bytes")
    text: str | None = Field(default=None, description="A text file's content")
    data: str | None = Field(default=None, description="An image's bytes, base64 (PNG, JPEG, GIF or WebP)")


class SendIn(RequestModel):
    text: str = Field(description="The message; limited by max_message_chars")
    channel: str = Field(default="web", max_length=20)
    pin_characters: list[str] = Field(default_factory=list, max_length=50)
    attachments: list[AttachmentIn] = Field(default_factory=list, max_length=100, description=(
        "Text files and images (W14); at most attachment_max_count, each at most attachment_max_bytes (413), "
        "text files together at most attachment_text_chars characters (413). Images are refused (422) when "
        "the conversation's model cannot see them. Saved with the message before the model is asked."))


class RetryIn(RequestModel):
    channel: str = Field(default="web", max_length=20)


class TagIn(RequestModel):
    tag: str = Field(max_length=MAX_TAG + 4, description="Letters, digits, '_', '-' or '.'; stored lower-cased")


class TagsIn(RequestModel):
    tags: list[str] = Field(max_length=MAX_TAGS, description="Replaces the thread's tags")


class TagCount(BaseModel):
    tag: str
    count: int = Field(description="Threads outside the trash that carry it")


class MatchOut(BaseModel):
    message_id: int
    role: str
    created_at: str
    snippet: str = Field(description="Plain text around the first matching word; never HTML")


class ConversationOut(BaseModel):
    id: int
    persona_id: int
    folder_id: int | None
    title: str
    state: str
    visibility: str
    continuity_shielded: bool
    created_at: str
    updated_at: str
    ended_at: str | None
    trashed_at: str | None
    pinned_at: str | None = Field(default=None, description="Set while the thread is pinned (listed first)")
    tags: list[str] = Field(default_factory=list)
    imported: bool = Field(default=False, description="Made by an import: read only; continue it with Branch")
    match: MatchOut | None = Field(default=None, description="In a search with words: the newest matching message")
    model: str | None = Field(default=None, description=(
        "The model this conversation's requests ask for; null: the deployment's default (PUT .../model)"))


class AttachmentOut(BaseModel):
    id: int
    kind: str = Field(description="text or image")
    name: str
    media_type: str
    size: int = Field(description="Bytes")


class MessageOut(BaseModel):
    id: int
    role: str
    kind: str
    content: str
    channel: str
    created_at: str
    metadata: dict[str, Any]
    attachments: list[AttachmentOut] = Field(default_factory=list, description=(
        "Files attached to this message (W14); their content is at .../attachments/{id}"))


class MessagesOut(BaseModel):
    messages: list[MessageOut]
    estimate: Estimate


class RequestSizeOut(BaseModel):
    size: dict[str, Any] | None = Field(description="Numbers of the last request, null before the first send")


class EventOut(BaseModel):
    id: int
    conversation_id: int | None = None
    kind: str
    channel: str
    created_at: str
    payload: dict[str, Any]


SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: saved, diagnostics, delta, tool, done, error",
        "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
}


# -- threads -------------------------------------------------------------------------------------
@router.get("", response_model=list[ConversationOut])
def list_conversations(
    scope: Scope = Depends(current_scope),
    include_trashed: bool = False,
    folder_id: OptionalIdQuery = None,
    limit: int = Query(default=200, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=MAX_ID),
    q: str = Query(default="", max_length=MAX_TITLE, description=(
        "The search box: threads whose title contains the words or with a message holding every word "
        "(the last word may be the start of one); each tag:NAME keeps only threads with that tag")),
    persona_id: OptionalIdQuery = None,
    loose: bool = Query(default=False, description="Only threads outside folders"),
    trashed: bool = Query(default=False, description="Only threads in the trash"),
    before_updated_at: str | None = Query(default=None, max_length=40, description=(
        "Cursor: updated_at of the last thread of the previous page (with before_id)")),
    before_id: OptionalIdQuery = None,
    pinned: bool | None = Query(default=None, description="Only pinned (true) or unpinned (false) threads"),
) -> list[dict]:
    """Threads, newest first; page with the cursor (the last thread's updated_at and id)."""
    before = (before_updated_at, before_id) if before_updated_at is not None and before_id is not None else None
    return [plain(c) for c in scope.conversations.list(
        include_trashed=include_trashed, folder_id=folder_id, limit=limit, offset=offset, text=q.strip(),
        persona_id=persona_id, loose=loose, trashed_only=trashed, before=before, pinned=pinned)]


@router.get("/tags", response_model=list[TagCount])
def list_tags(scope: Scope = Depends(current_scope)) -> list[dict]:
    """The caller's tags, most used first (the tag field's suggestions)."""
    return scope.conversations.tags()


@router.post("", response_model=ConversationOut, status_code=201)
def create_conversation(body: ConversationCreate, scope: Scope = Depends(current_scope)) -> dict:
    """Start a thread; its memory snapshot is captured now (P1)."""
    return plain(scope.conversations.create(body.persona_id, title=body.title, folder_id=body.folder_id))


@router.get("/{conversation_id:int}", response_model=ConversationOut)
def get_conversation(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.conversations.get(conversation_id))


@router.post("/{conversation_id:int}/rename", response_model=ConversationOut)
def rename_conversation(conversation_id: IdPath, body: Rename, scope: Scope = Depends(current_scope)) -> dict:
    """Titles are stored as given; the web UI always shows them as plain text."""
    return plain(scope.conversations.rename(conversation_id, body.title))


@router.post("/{conversation_id:int}/move", response_model=ConversationOut)
def move_conversation(conversation_id: IdPath, body: Move, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.conversations.move(conversation_id, body.folder_id))


@router.post("/{conversation_id:int}/trash", response_model=ConversationOut)
def trash_conversation(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.conversations.trash(conversation_id))


@router.post("/{conversation_id:int}/restore", response_model=ConversationOut)
def restore_conversation(conversation_id: IdPath, body: Restore | None = None,
                         scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.conversations.restore(conversation_id, shielded=body.shielded if body else True))


@router.post("/{conversation_id:int}/pin", response_model=ConversationOut)
def pin_conversation(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """Pinned threads are listed first, in their own group (W4)."""
    return plain(scope.conversations.pin(conversation_id))


@router.post("/{conversation_id:int}/unpin", response_model=ConversationOut)
def unpin_conversation(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.conversations.unpin(conversation_id))


@router.put("/{conversation_id:int}/tags", response_model=ConversationOut)
def set_tags(conversation_id: IdPath, body: TagsIn, scope: Scope = Depends(current_scope)) -> dict:
    """Replace the thread's tags."""
    return plain(scope.conversations.set_tags(conversation_id, body.tags))


@router.post("/{conversation_id:int}/tags", response_model=ConversationOut)
def add_tag(conversation_id: IdPath, body: TagIn, scope: Scope = Depends(current_scope)) -> dict:
    """Add one tag (adding one it has changes nothing)."""
    return plain(scope.conversations.add_tag(conversation_id, body.tag))


@router.delete("/{conversation_id:int}/tags/{tag}", response_model=ConversationOut)
def remove_tag(conversation_id: IdPath, tag: str = Path(max_length=MAX_TAG + 4),
               scope: Scope = Depends(current_scope)) -> dict:
    """Remove one tag (removing one it does not have changes nothing)."""
    return plain(scope.conversations.remove_tag(conversation_id, tag))


@router.post("/{conversation_id:int}/end", response_model=ConversationOut)
def end_conversation(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """An explicit boundary (C4): history stays readable, new messages are refused."""
    return plain(scope.conversations.end(conversation_id))


# -- messages and sending ------------------------------------------------------------------------
@router.get("/{conversation_id:int}/messages", response_model=MessagesOut)
def list_messages(
    conversation_id: IdPath,
    request: Request,
    scope: Scope = Depends(current_scope),
    after_id: int = Query(default=0, ge=0, le=MAX_ID),
    limit: int | None = Query(default=None, ge=1, le=10_000),
    before_id: OptionalIdQuery = None,
    newest: int | None = Query(default=None, ge=1, le=10_000, description=(
        "Only the last this many (before before_id): how the page opens a long thread at its end")),
) -> dict:
    """Visible messages only (never the stored prompt) and the header estimate (R4)."""
    messages = scope.conversations.messages(conversation_id, after_id=after_id, limit=limit, before_id=before_id,
                                            newest=newest)
    attached = message_attachments(request, scope, conversation_id, [m.id for m in messages if m.role == "user"])
    return {"messages": [plain_message(m, attached.get(m.id, ())) for m in messages],
            "estimate": scope.visible_estimate(conversation_id)}


def message_attachments(request: Request, scope: Scope, conversation_id: int, ids: list[int]) -> dict[int, list]:
    """The attachments of these messages (W14), their names and sizes only."""
    if not ids:
        return {}
    with get_hearth(request).store.read() as conn:
        return attachments.in_range(conn, scope.user_id, conversation_id, min(ids), max(ids))


def plain_message(message: Any, attached: Any = ()) -> dict:
    return {"id": message.id, "role": message.role, "kind": message.kind, "content": message.content,
            "channel": message.channel, "created_at": message.created_at, "metadata": message.metadata,
            "attachments": [a.to_dict() for a in attached]}


@router.post("/{conversation_id:int}/messages", response_class=StreamingResponse, responses=SSE_RESPONSES)
def send_message(conversation_id: IdPath, body: SendIn, scope: Scope = Depends(current_scope)) -> StreamingResponse:
    """Save the message and stream the reply as server-sent events."""
    events = scope.send_stream(conversation_id, body.text, channel=body.channel,
                               pin_characters=tuple(body.pin_characters),
                               attached=[a.model_dump() for a in body.attachments])
    return _stream(events)


@router.post("/{conversation_id:int}/retry", response_class=StreamingResponse, responses=SSE_RESPONSES)
def retry_reply(conversation_id: IdPath, body: RetryIn | None = None,
                scope: Scope = Depends(current_scope)) -> StreamingResponse:
    """Answer the last unanswered user message again, e.g. after a provider error (PR5)."""
    return _stream(scope.retry_stream(conversation_id, channel=body.channel if body else "web"))


def _stream(events: Events) -> StreamingResponse:
    # Prime: validation and the durable save happen here, so their errors are plain 4xx JSON.
    first = next(events)
    return StreamingResponse(closing(_sse(first, events)), media_type=SSE_MEDIA_TYPE,
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def sse_frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _sse(first: SendEvent, events: Events) -> Generator[bytes, None, None]:
    yield sse_frame(first.type, first.data)
    try:
        for event in events:
            yield sse_frame(event.type, event.data)
    except HearthError as exc:
        # The user's message is saved; say clearly what stopped the reply.
        yield sse_frame("error", {"error": exc.code, "detail": str(exc), "retryable": False})
    except Exception:
        # The response has started, so a status code can no longer say it; log and tell the page.
        log.exception("reply stream failed")
        yield sse_frame("error", {"error": "internal_error", "retryable": True,
                                  "detail": "the server failed while answering; the message is saved"})
    finally:
        events.close()


# -- diagnostics ---------------------------------------------------------------------------------
@router.get("/{conversation_id:int}/request-size", response_model=RequestSizeOut)
def request_size(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """The last request-size details (R2): numbers only."""
    return {"size": scope.request_size(conversation_id)}


@router.get("/{conversation_id:int}/estimate", response_model=Estimate)
def estimate(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return scope.visible_estimate(conversation_id)


@router.get("/{conversation_id:int}/events", response_model=list[EventOut])
def conversation_events(conversation_id: IdPath, request: Request,
                        scope: Scope = Depends(current_scope)) -> list[dict]:
    """The conversation's ledger events (kinds, ids and numbers; message text is not repeated)."""
    scope.conversations.get(conversation_id)
    with get_hearth(request).store.read() as conn:
        rows = ledger.replay(conn, scope.user_id, conversation_id)
    return [_event(e) for e, _message in rows]


def _event(event: ledger.Event) -> dict:
    return {"id": event.id, "conversation_id": event.conversation_id, "kind": event.kind,
            "channel": event.channel, "created_at": event.created_at, "payload": event.payload}


events_router = APIRouter(prefix="/api/events", tags=["events"])


@events_router.get("", response_model=list[EventOut])
def recent_events(request: Request, scope: Scope = Depends(current_scope),
                  limit: int = Query(default=100, ge=1, le=1000)) -> list[dict]:
    """The caller's newest ledger events, oldest first."""
    with get_hearth(request).store.read() as conn:
        return [_event(e) for e in ledger.events_for(conn, scope.user_id, limit=limit)]
