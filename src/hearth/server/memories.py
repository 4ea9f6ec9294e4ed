"""Memory routes (M1-M5): the long-term list, edits, order, imports and per-thread snapshots.

New memories reach future threads only; edits and deletions rebuild the stored prompts that hold
them (M2). Snapshot routes report provenance and timestamps (M5) and refresh one thread (M4).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from hearth.memory.memories import MAX_IMPORT, MAX_MEMORY_TEXT, Memory, MemoryVersion, SnapshotInfo
from hearth.scope import Scope

from .auth import current_scope
from .models import MAX_ID, Count, IdPath, RequestModel

router = APIRouter(prefix="/api/memories", tags=["memories"])
snapshots = APIRouter(prefix="/api/conversations", tags=["memories"])


class MemoryIn(RequestModel):
    text: str = Field(min_length=1, max_length=MAX_MEMORY_TEXT)
    category: str = Field(default="", max_length=100)
    importance: int = Field(default=0, ge=0, le=10)
    eligible: bool = True


class MemoryEdit(RequestModel):
    text: str | None = Field(default=None, min_length=1, max_length=MAX_MEMORY_TEXT)
    category: str | None = Field(default=None, max_length=100)
    importance: int | None = Field(default=None, ge=0, le=10)
    eligible: bool | None = None
    correction: bool = Field(default=False, description="A typo fix of the same version, not a change of meaning")
    valid_from: str | None = Field(default=None, max_length=40,
                                   description="When the new text became true (ISO date or date-time; not future)")


class EndIn(RequestModel):
    valid_until: str | None = Field(default=None, max_length=40, description="When it stopped being true")


class RestoreIn(RequestModel):
    version: int = Field(ge=1, le=MAX_ID)


class MoveIn(RequestModel):
    position: int = Field(ge=1, le=MAX_ID, description="1-based place in the manual global order")


class ImportIn(RequestModel):
    items: list[MemoryIn] = Field(min_length=1, max_length=MAX_IMPORT)


# Answers are the core records themselves (one definition per record): Memory, MemoryVersion and
# SnapshotInfo are dataclasses FastAPI serializes and describes directly.
class MemorySaved(BaseModel):
    memory: Memory
    prompts_rebuilt: int


class SnapshotOut(BaseModel):
    info: SnapshotInfo
    memories: list[Memory]
    kept: int = Field(description="Memories kept in all (a new thread starts with these)")
    waiting: int = Field(description="Suggestions from this thread waiting for review (W11)")


@router.get("", response_model=list[Memory])
def list_memories(scope: Scope = Depends(current_scope)) -> list[Memory]:
    return scope.memories.list()


class QueuedOut(BaseModel):
    """A new memory that repeats or contradicts one already kept waits in the review queue (B3)."""

    queued_for_review: dict[str, Any]


class ImportOut(BaseModel):
    added: list[Memory]
    queued_for_review: list[dict[str, Any]]


@router.post("", response_model=Memory, status_code=201,
             responses={202: {"model": QueuedOut, "description": "It repeats or contradicts a memory: in review"}})
def add_memory(body: MemoryIn, scope: Scope = Depends(current_scope)) -> Any:
    """A new memory reaches threads created from now on (M2). One that repeats or contradicts an
    existing memory is not added: it waits in the review queue as merge / supersede / keep both."""
    added, queued = scope.layers.review.remember([body.model_dump()])
    if queued:
        return JSONResponse(status_code=202, content={"queued_for_review": queued[0].to_dict()})
    return added[0]


@router.post("/import", response_model=ImportOut, status_code=201)
def import_memories(body: ImportIn, scope: Scope = Depends(current_scope)) -> dict:
    """Add a batch in one transaction: all or nothing (M1); repeats and contradictions go to review (B3)."""
    added, queued = scope.layers.review.remember([item.model_dump() for item in body.items], actor="import")
    return {"added": added, "queued_for_review": [p.to_dict() for p in queued]}


@router.get("/as-of", response_model=list[MemoryVersion])
def memories_as_of(date: str = Query(max_length=40, description="ISO date or date-time, not in the future"),
                   mode: Literal["valid", "known"] = "valid", scope: Scope = Depends(current_scope)) -> list[MemoryVersion]:
    """What was true on a date (``valid``) or what Hearth knew on that date (``known``) (B1)."""
    return scope.memories.as_of(date, mode)


@router.get("/{memory_id:int}", response_model=Memory)
def get_memory(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> Memory:
    return scope.memories.get(memory_id)


@router.patch("/{memory_id:int}", response_model=MemorySaved)
def edit_memory(memory_id: IdPath, body: MemoryEdit, scope: Scope = Depends(current_scope)) -> dict:
    memory, rebuilt = scope.memories.edit(memory_id, **body.model_dump(exclude_unset=True))
    return {"memory": memory, "prompts_rebuilt": rebuilt}


@router.post("/{memory_id:int}/end", response_model=MemorySaved)
def end_memory(memory_id: IdPath, body: EndIn, scope: Scope = Depends(current_scope)) -> dict:
    """It stopped being true: it leaves every prompt that holds it; its history stays (B1)."""
    memory, rebuilt = scope.memories.end(memory_id, body.valid_until)
    return {"memory": memory, "prompts_rebuilt": rebuilt}


@router.get("/{memory_id:int}/history", response_model=list[MemoryVersion])
def memory_history(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> list[MemoryVersion]:
    """Every version, newest first, with what changed, when and by whom (B2)."""
    return scope.memories.history(memory_id)


@router.post("/{memory_id:int}/restore", response_model=MemorySaved)
def restore_memory(memory_id: IdPath, body: RestoreIn, scope: Scope = Depends(current_scope)) -> dict:
    """Make an older version current again, as a new version (B2 undo)."""
    memory, rebuilt = scope.memories.restore(memory_id, body.version)
    return {"memory": memory, "prompts_rebuilt": rebuilt}


@router.delete("/{memory_id:int}", response_model=Count)
def delete_memory(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """Gone from every snapshot and stored prompt (M2)."""
    return {"prompts_rebuilt": scope.memories.delete(memory_id)}


@router.post("/{memory_id:int}/move", response_model=list[Memory])
def move_memory(memory_id: IdPath, body: MoveIn, scope: Scope = Depends(current_scope)) -> list[Memory]:
    return scope.memories.move(memory_id, body.position)


@snapshots.get("/{conversation_id:int}/snapshot", response_model=SnapshotOut)
def snapshot(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    info = scope.memories.snapshot_info(conversation_id)
    # The counts beside the snapshot keep "0 memories" honest while suggestions wait or kept
    # memories wait for new threads (M2, W11).
    waiting = scope.layers.review.list("pending", conversation_id=conversation_id, limit=1000)
    return {"info": info, "memories": scope.memories.snapshot(conversation_id), "kept": scope.memories.count(),
            "waiting": len(waiting)}


@snapshots.post("/{conversation_id:int}/snapshot/refresh", response_model=SnapshotInfo)
def refresh_snapshot(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> SnapshotInfo:
    """Replace the thread's snapshot with the current eligible memories (M4)."""
    return scope.memories.refresh(conversation_id)
