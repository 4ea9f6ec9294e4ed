"""Memory where the person talks (W11): a thread's waiting suggestions and what a reply remembered.

The suggestions are the review queue's own (F3, G4), narrowed to one thread; they are approved,
edited or dismissed through ``/api/review/{id}/approve`` and ``/dismiss`` like any other, so the
same rules hold wherever the person decides. "What I remembered" reads the ids the send path
saved with the reply and answers with each source's current text and where it lives.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from hearth.memory.review import Proposal
from hearth.scope import Scope
from hearth.thread import remembered

from .auth import current_scope
from .models import IdPath

router = APIRouter(prefix="/api/conversations", tags=["memories"])


class SuggestionsOut(BaseModel):
    """The thread's suggestions waiting for a decision, newest first, and how many memories are kept."""

    suggestions: list[Proposal]
    memories_kept: int


class RememberedMemory(BaseModel):
    id: int
    text: str
    category: str


class RememberedFragment(BaseModel):
    id: int
    category: str
    triggers: list[str]
    text: str


class RememberedTurn(BaseModel):
    message_id: int
    conversation_id: int
    title: str
    this_conversation: bool
    role: str
    date: str
    text: str


class RememberedArchive(BaseModel):
    kind: str  # message | chunk
    message_id: int | None = None
    conversation_id: int | None = None
    this_conversation: bool | None = None
    role: str | None = None
    chunk_id: int | None = None
    document_id: int | None = None
    title: str
    date: str | None = None
    text: str


class RememberedHandoff(BaseModel):
    conversation_id: int | None
    document_id: int | None
    title: str


class RememberedOut(BaseModel):
    """What a reply's request carried, from the records saved with it; empty lists when it carried
    nothing (or was saved before these records existed: ``recorded`` false)."""

    message_id: int
    recorded: bool
    memories: list[RememberedMemory]
    memories_more: bool
    fragments: list[RememberedFragment]
    recall: list[RememberedTurn]
    archive: list[RememberedArchive]
    handoff: RememberedHandoff | None


@router.get("/{conversation_id:int}/suggestions", response_model=SuggestionsOut)
def thread_suggestions(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict[str, Any]:
    """Suggestions from this thread (checkpoints, extraction, status detection, reviews) waiting
    for the person: approve, edit or dismiss each through the review queue's own routes."""
    scope.conversations.get(conversation_id)  # another user's thread is unknown (G2)
    pending = scope.layers.review.list("pending", conversation_id=conversation_id, limit=50)
    return {"suggestions": pending, "memories_kept": scope.memories.count()}


@router.get("/{conversation_id:int}/messages/{message_id:int}/remembered", response_model=RememberedOut)
def what_i_remembered(conversation_id: IdPath, message_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """The memories, fragments, recalled turns, archive excerpts and handoff this reply's request
    carried, each with its source."""
    return remembered.read(scope.conversations, conversation_id, message_id)
