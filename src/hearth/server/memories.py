"""Memory routes (M1-M5): the long-term list, edits, order, imports and per-thread snapshots.

New memories reach future threads only; edits and deletions rebuild the stored prompts that hold
them (M2). Snapshot routes report provenance and timestamps (M5) and refresh one thread (M4).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ..engine import Scope
from ..memories import MAX_IMPORT, MAX_MEMORY_TEXT
from .auth import current_scope
from .models import MAX_ID, Count, IdPath, RequestModel, plain

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


class MemoryOut(BaseModel):
    id: int
    text: str
    category: str
    importance: int
    position: int
    eligible: bool
    created_at: str
    updated_at: str
    version: int
    valid_from: str | None
    valid_until: str | None
    recorded_at: str | None
    retired_at: str | None


class VersionOut(BaseModel):
    memory_id: int
    version: int
    text: str
    category: str
    importance: int
    eligible: bool
    valid_from: str
    valid_until: str | None
    recorded_at: str
    retired_at: str | None
    superseded_at: str | None
    change: str
    actor: str
    proposal_id: int | None


class MemorySaved(BaseModel):
    memory: MemoryOut
    prompts_rebuilt: int


class SnapshotInfoOut(BaseModel):
    provenance: str
    captured_at: str | None
    refreshed_at: str | None


class SnapshotOut(BaseModel):
    info: SnapshotInfoOut
    memories: list[MemoryOut]


@router.get("", response_model=list[MemoryOut])
def list_memories(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(m) for m in scope.memories.list()]


class QueuedOut(BaseModel):
    """A new memory that repeats or contradicts one already kept waits in the review queue (B3)."""

    queued_for_review: dict[str, Any]


class ImportOut(BaseModel):
    added: list[MemoryOut]
    queued_for_review: list[dict[str, Any]]


@router.post("", response_model=MemoryOut, status_code=201,
             responses={202: {"model": QueuedOut, "description": "It repeats or contradicts a memory: in review"}})
def add_memory(body: MemoryIn, scope: Scope = Depends(current_scope)) -> Any:
    """A new memory reaches threads created from now on (M2). One that repeats or contradicts an
    existing memory is not added: it waits in the review queue as merge / supersede / keep both."""
    added, queued = scope.layers.review.remember([body.model_dump()])
    if queued:
        return JSONResponse(status_code=202, content={"queued_for_review": queued[0].to_dict()})
    return plain(added[0])


@router.post("/import", response_model=ImportOut, status_code=201)
def import_memories(body: ImportIn, scope: Scope = Depends(current_scope)) -> dict:
    """Add a batch in one transaction: all or nothing (M1); repeats and contradictions go to review (B3)."""
    added, queued = scope.layers.review.remember([item.model_dump() for item in body.items], actor="import")
    return {"added": [plain(m) for m in added], "queued_for_review": [p.to_dict() for p in queued]}


@router.get("/as-of", response_model=list[VersionOut])
def memories_as_of(date: str = Query(max_length=40, description="ISO date or date-time, not in the future"),
                   mode: Literal["valid", "known"] = "valid", scope: Scope = Depends(current_scope)) -> list[dict]:
    """What was true on a date (``valid``) or what Hearth knew on that date (``known``) (B1)."""
    return [plain(v) for v in scope.memories.as_of(date, mode)]


@router.get("/{memory_id:int}", response_model=MemoryOut)
def get_memory(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.memories.get(memory_id))


@router.patch("/{memory_id:int}", response_model=MemorySaved)
def edit_memory(memory_id: IdPath, body: MemoryEdit, scope: Scope = Depends(current_scope)) -> dict:
    memory, rebuilt = scope.memories.edit(memory_id, **body.model_dump(exclude_unset=True))
    return {"memory": plain(memory), "prompts_rebuilt": rebuilt}


@router.post("/{memory_id:int}/end", response_model=MemorySaved)
def end_memory(memory_id: IdPath, body: EndIn, scope: Scope = Depends(current_scope)) -> dict:
    """It stopped being true: it leaves every prompt that holds it; its history stays (B1)."""
    memory, rebuilt = scope.memories.end(memory_id, body.valid_until)
    return {"memory": plain(memory), "prompts_rebuilt": rebuilt}


@router.get("/{memory_id:int}/history", response_model=list[VersionOut])
def memory_history(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> list[dict]:
    """Every version, newest first, with what changed, when and by whom (B2)."""
    return [plain(v) for v in scope.memories.history(memory_id)]


@router.post("/{memory_id:int}/restore", response_model=MemorySaved)
def restore_memory(memory_id: IdPath, body: RestoreIn, scope: Scope = Depends(current_scope)) -> dict:
    """Make an older version current again, as a new version (B2 undo)."""
    memory, rebuilt = scope.memories.restore(memory_id, body.version)
    return {"memory": plain(memory), "prompts_rebuilt": rebuilt}


@router.delete("/{memory_id:int}", response_model=Count)
def delete_memory(memory_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """Gone from every snapshot and stored prompt (M2)."""
    return {"prompts_rebuilt": scope.memories.delete(memory_id)}


@router.post("/{memory_id:int}/move", response_model=list[MemoryOut])
def move_memory(memory_id: IdPath, body: MoveIn, scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(m) for m in scope.memories.move(memory_id, body.position)]


@snapshots.get("/{conversation_id:int}/snapshot", response_model=SnapshotOut)
def snapshot(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    info = scope.memories.snapshot_info(conversation_id)
    return {"info": plain(info), "memories": [plain(m) for m in scope.memories.snapshot(conversation_id)]}


@snapshots.post("/{conversation_id:int}/snapshot/refresh", response_model=SnapshotInfoOut)
def refresh_snapshot(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """Replace the thread's snapshot with the current eligible memories (M4)."""
    return plain(scope.memories.refresh(conversation_id))
