"""Timeline routes (E1-E8): pages of the relationship timeline, live notices, resume, the chat
header's context figures, the capsule, and "Compact now".

A malformed cursor answers 400; an unknown cursor, or one naming another user's event, answers 404
exactly alike (G2). "Compact now" answers 409 while a reply or compaction of that conversation runs.
"""

from __future__ import annotations

import asyncio
import json
import queue
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from ..engine import Scope
from .auth import current_scope
from .models import IdPath, RequestModel, plain

router = APIRouter(tags=["timeline"])


class SpanOut(BaseModel):
    id: int
    persona_id: int | None
    kind: str
    channel: str
    start_event_id: int
    started_at: str
    last_at: str
    closed_at: str | None
    close_reason: str | None
    checkpoint_event_id: int | None
    open: bool


class TimelineEventOut(BaseModel):
    id: int
    conversation_id: int | None
    kind: str
    channel: str
    created_at: str
    payload: dict[str, Any]
    span_id: int | None
    message: dict[str, Any] | None = Field(description="role and kind of a message event; text for visible turns")


class PageOut(BaseModel):
    events: list[TimelineEventOut] = Field(description="Oldest first")
    spans: list[SpanOut] = Field(description="Every span the page's events belong to; each starts on the page")
    before: str | None = Field(description="Cursor of the next older page (?before=...), null at the oldest")
    has_older: bool
    expanded: int = Field(description="Events beyond the limit added so that no span is split")


class ContextOut(BaseModel):
    conversation_id: int
    input_tokens: int
    threshold_tokens: int
    threshold_kind: str
    percent: float
    capsule_active: bool
    capsule_source: str | None
    capsule_at: str | None
    last_compaction_at: str | None
    replacement_input_pending: bool
    compaction_available: bool
    running: str


class CapsuleOut(BaseModel):
    capsule: dict[str, Any] | None


class CompactIn(RequestModel):
    channel: str = Field(default="web", max_length=20)


class CompactOut(BaseModel):
    conversation_id: int
    compacted_at: str
    items: int
    capsule_id: int | None


class ResumeOut(BaseModel):
    conversation: dict[str, Any] | None
    turns: list[dict[str, Any]]
    capsule: dict[str, Any] | None
    span: SpanOut | None


@router.get("/api/timeline", response_model=PageOut)
def timeline_page(
    scope: Scope = Depends(current_scope),
    before: str | None = Query(default=None, max_length=64,
                               description="Cursor from the previous page's `before`; omit for the newest"),
    limit: int | None = Query(default=None, ge=1, le=10_000,
                              description="Page size; TIMELINE_HISTORY_EVENT_LIMIT by default"),
) -> dict:
    """The newest events across every conversation, or the page before a cursor (E8)."""
    return scope.timeline.page(before, limit).to_dict()


@router.get("/api/timeline/resume", response_model=ResumeOut)
def timeline_resume(scope: Scope = Depends(current_scope)) -> dict:
    """Where to pick up (E4): the most recently active open conversation, its capsule and open span."""
    return scope.hearth.resume(scope.user_id).to_dict()


@router.get("/api/timeline/live", response_class=StreamingResponse,
            responses={200: {"description": "Server-sent live notices (context.capsule started/failed/completed)",
                             "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
async def timeline_live(request: Request, scope: Scope = Depends(current_scope),
                        once: bool = Query(default=False, description="End after the first notice")) -> StreamingResponse:
    """Live-only notices (E6); nothing here is stored. Kinds, ids and numbers only."""
    bus = scope.hearth.live
    user_id = scope.user_id
    listener = bus.subscribe(user_id)

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b": live\n\n"
            while not await request.is_disconnected():
                try:
                    notice = listener.get_nowait()
                except queue.Empty:
                    await asyncio.sleep(0.1)
                    continue
                yield f"event: {notice['kind']}\ndata: {json.dumps(notice, separators=(',', ':'))}\n\n".encode()
                if once:
                    return
        finally:
            bus.unsubscribe(user_id, listener)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/api/conversations/{conversation_id:int}/context", response_model=ContextOut)
def conversation_context(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """The chat header's figures (E7): input usage as a percentage of the compaction threshold,
    whether a capsule is active, the last compaction time."""
    return scope.timeline.context(conversation_id)


@router.get("/api/conversations/{conversation_id:int}/capsule", response_model=CapsuleOut)
def conversation_capsule(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """The latest continuity capsule (E3), for the owner to inspect; null before the first."""
    capsule = scope.timeline.capsule(conversation_id)
    return {"capsule": plain(capsule) if capsule else None}


@router.post("/api/conversations/{conversation_id:int}/compact", response_model=CompactOut)
def compact_conversation(conversation_id: IdPath, body: CompactIn | None = None,
                         scope: Scope = Depends(current_scope)) -> dict:
    """Compact now (E7): the Responses compaction endpoint, then a capsule refresh. 409 while a
    reply or another compaction of this conversation runs."""
    return scope.timeline.compact(conversation_id, channel=body.channel if body else "web")
