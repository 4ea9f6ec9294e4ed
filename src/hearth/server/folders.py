"""Folder routes (C3): list, create, read, hide and show."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from hearth.records.conversations import MAX_FOLDER_NAME
from hearth.scope import Scope

from .auth import current_scope, get_hearth
from .models import IdPath, RequestModel, plain

router = APIRouter(prefix="/api/folders", tags=["folders"])


class FolderCreate(RequestModel):
    name: str = Field(min_length=1, max_length=MAX_FOLDER_NAME)
    hidden: bool = False


class FolderUpdate(RequestModel):
    hidden: bool | None = None
    name: str | None = Field(default=None, min_length=1, max_length=MAX_FOLDER_NAME)


class FolderDeleted(BaseModel):
    conversations: int = Field(description="How many threads the folder held")


class FolderOut(BaseModel):
    id: int
    name: str
    hidden: bool
    created_at: str


@router.get("", response_model=list[FolderOut])
def list_folders(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(f) for f in scope.folders.list()]


@router.post("", response_model=FolderOut, status_code=201)
def create_folder(body: FolderCreate, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.folders.create(body.name, hidden=body.hidden))


@router.get("/{folder_id:int}", response_model=FolderOut)
def get_folder(folder_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.folders.get(folder_id))


@router.patch("/{folder_id:int}", response_model=FolderOut)
def update_folder(folder_id: IdPath, body: FolderUpdate, request: Request,
                  scope: Scope = Depends(current_scope)) -> dict:
    """Rename, hide or show a folder; conversations in a hidden folder leave automatic continuity (V1)."""
    with get_hearth(request).store.write():
        if body.name is not None:
            scope.folders.rename(folder_id, body.name)
        if body.hidden is not None:
            scope.folders.set_hidden(folder_id, body.hidden)
        return plain(scope.folders.get(folder_id))


@router.delete("/{folder_id:int}", response_model=FolderDeleted)
def delete_folder(folder_id: IdPath, scope: Scope = Depends(current_scope),
                  threads: Literal["keep", "trash"] = Query(description=(
                      "keep: its threads leave the folder; trash: they go to the trash"))) -> dict:
    """Delete a folder (W4); the caller says what happens to its threads."""
    return {"conversations": scope.folders.delete(folder_id, threads=threads)}
