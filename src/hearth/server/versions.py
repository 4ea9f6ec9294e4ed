"""Version history and undo (B2) for fragments, personas and household status fields.

Memories have theirs under /api/memories/{id}/history and /restore. Restoring applies an older
version again as a new version; a deleted item's versions are gone, so restoring one is 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import Field

from hearth.records.versions import Version
from hearth.scope import Scope

from .auth import current_scope
from .models import MAX_ID, IdPath, RequestModel

router = APIRouter(tags=["versions"])

# Histories answer with the core Version records themselves (one definition per record).


class VersionIn(RequestModel):
    version: int = Field(ge=1, le=MAX_ID)


class ValueRestoreIn(RequestModel):
    value_id: int = Field(ge=1, le=MAX_ID, description="An id from /api/status/history")


@router.get("/api/fragments/{fragment_id:int}/history", response_model=list[Version])
def fragment_history(fragment_id: IdPath, scope: Scope = Depends(current_scope)) -> list[Version]:
    return scope.layers.fragments.history(fragment_id)


@router.post("/api/fragments/{fragment_id:int}/restore", response_model=dict[str, Any])
def fragment_restore(fragment_id: IdPath, body: VersionIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.fragments.restore(fragment_id, body.version).to_dict()


@router.get("/api/personas/{persona_id:int}/history", response_model=list[Version])
def persona_history(persona_id: IdPath, scope: Scope = Depends(current_scope)) -> list[Version]:
    return scope.personas.history(persona_id)


@router.post("/api/personas/{persona_id:int}/restore", response_model=dict[str, Any])
def persona_restore(persona_id: IdPath, body: VersionIn, scope: Scope = Depends(current_scope)) -> dict:
    """Apply an older version of the settings; the persona's stored prompts are rebuilt (P5)."""
    persona, rebuilt = scope.restore_persona(persona_id, body.version)
    return {"persona": persona.to_dict(), "prompts_rebuilt": rebuilt}


@router.get("/api/status/{field_id:int}/versions", response_model=list[Version])
def status_field_history(field_id: IdPath, scope: Scope = Depends(current_scope)) -> list[Version]:
    return scope.layers.household.field_history(field_id)


@router.post("/api/status/{field_id:int}/restore", response_model=dict[str, Any])
def status_field_restore(field_id: IdPath, body: VersionIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.household.restore_field(field_id, body.version).to_dict()


@router.post("/api/status/{field_id:int}/restore-value", response_model=dict[str, Any])
def status_value_restore(field_id: IdPath, body: ValueRestoreIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.household.restore_value(field_id, body.value_id).to_dict()
