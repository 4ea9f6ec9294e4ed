"""Timeline routes (E1-E8): pages of the relationship timeline, live notices, resume, the chat
header's context figures, the capsule, and "Compact now".

A malformed cursor answers 400; an unknown cursor, or one naming another user's event, answers 404
exactly alike (G2). "Compact now" answers 409 while a reply or compaction of that conversation runs.
"""

from __future__ import annotations

import asyncio
import json
import queue
from typing import AsyncIterator

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from hearth.continuity.timeline import Context, Page
from hearth.continuity.timeline.capsules import Capsule
from hearth.continuity.timeline.chains import Compaction
from hearth.continuity.timeline.spans import Span
from hearth.scope import Scope
from hearth.thread.turns import ThreadTurn

from .auth import current_scope, get_hearth
from .conversations import ConversationOut
from .models import IdPath, RequestModel
from .streams import SSE_MEDIA_TYPE

router = APIRouter(tags=["timeline"])


# Answers are the core records themselves (one definition per record): Page (with its
# TimelineEvent and Span records), Context, Compaction, Capsule and ThreadTurn are dataclasses
# FastAPI serializes and describes directly.
class CapsuleOut(BaseModel):
    capsule: Capsule | None


class CompactIn(RequestModel):
    channel: str = Field(default="web", max_length=20)


class ResumeOut(BaseModel):
    conversation: ConversationOut | None
    turns: list[ThreadTurn] = Field(description="The newest turns, oldest first")
    capsule: Capsule | None
    span: Span | None


@router.get("/api/timeline", response_model=Page)
def timeline_page(
    scope: Scope = Depends(current_scope),
    before: str | None = Query(default=None, max_length=64,
                               description="Cursor from the previous page's `before`; omit for the newest"),
    limit: int | None = Query(default=None, ge=1, le=10_000,
                              description="Page size; TIMELINE_HISTORY_EVENT_LIMIT by default"),
) -> Page:
    """The newest events across every conversation, or the page before a cursor (E8)."""
    return scope.timeline.page(before, limit)


@router.get("/api/timeline/resume", response_model=ResumeOut)
def timeline_resume(request: Request, scope: Scope = Depends(current_scope)) -> dict:
    """Where to pick up (E4): the most recently active open conversation, its capsule and open span."""
    return get_hearth(request).resume(scope.user_id).to_dict()


@router.get("/api/timeline/live", response_class=StreamingResponse,
            responses={200: {"description": "Server-sent live notices (context.capsule started/failed/completed)",
                             "content": {SSE_MEDIA_TYPE: {"schema": {"type": "string"}}}}})
async def timeline_live(request: Request, scope: Scope = Depends(current_scope),
                        once: bool = Query(default=False, description="End after the first notice")) -> StreamingResponse:
    """Live-only notices (E6); nothing here is stored. Kinds, ids and numbers only."""
    bus = get_hearth(request).live
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

    return StreamingResponse(stream(), media_type=SSE_MEDIA_TYPE,
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/api/conversations/{conversation_id:int}/context", response_model=Context)
def conversation_context(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> Context:
    """The chat header's figures (E7): input usage as a percentage of the compaction threshold,
    whether a capsule is active, the last compaction time."""
    return scope.timeline.context(conversation_id)


@router.get("/api/conversations/{conversation_id:int}/capsule", response_model=CapsuleOut)
def conversation_capsule(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """The latest continuity capsule (E3), for the owner to inspect; null before the first."""
    return {"capsule": scope.timeline.capsule(conversation_id)}


@router.post("/api/conversations/{conversation_id:int}/compact", response_model=Compaction)
def compact_conversation(conversation_id: IdPath, body: CompactIn | None = None,
                         scope: Scope = Depends(current_scope)) -> Compaction:
    """Compact now (E7): the Responses compaction endpoint, then a capsule refresh. 409 while a
    reply or another compaction of this conversation runs."""
    return scope.timeline.compact(conversation_id, channel=body.channel if body else "web")
