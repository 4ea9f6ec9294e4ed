"""Delete-forever routes (B4, B5): preview with counts and a scope token, then confirm with the
token and the exact phrase; clearing the search log; the owner's verification of a canary."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from hearth.records.forget import CONFIRMATION_PHRASE, compact, verify
from hearth.scope import Scope

from ..errors import Forbidden
from .auth import current_scope, get_hearth
from .models import MAX_ID, RequestModel

router = APIRouter(prefix="/api/forget", tags=["forget"])

Target = Literal["message", "conversation", "folder", "document", "memory", "trash", "range"]


class ForgetIn(RequestModel):
    target: Target
    id: int | None = Field(default=None, ge=1, le=MAX_ID, description="The item's id (not for trash or range)")
    start: str | None = Field(default=None, max_length=40, description="range: first day (ISO date or date-time)")
    end: str | None = Field(default=None, max_length=40, description="range: last day (ISO date or date-time)")


class ForgetConfirmIn(ForgetIn):
    token: str = Field(min_length=1, max_length=128, description="The scope token from the preview")
    phrase: str = Field(max_length=100, description=f"Exactly {CONFIRMATION_PHRASE!r}")


class PhraseIn(RequestModel):
    phrase: str = Field(max_length=100, description=f"Exactly {CONFIRMATION_PHRASE!r}")


class CanaryIn(RequestModel):
    canary: str = Field(min_length=6, max_length=500)


class PreviewOut(BaseModel):
    target: str
    counts: dict[str, int]
    token: str


class ReceiptOut(BaseModel):
    target: str
    counts: dict[str, int]


class VerificationOut(BaseModel):
    canary_chars: int
    files_checked: int
    found_in: list[str]
    fts_terms: int
    clean: bool


@router.post("/preview", response_model=PreviewOut)
def preview(body: ForgetIn, scope: Scope = Depends(current_scope)) -> dict:
    """Counts of what delete-forever would remove, and the token that confirms exactly that."""
    return scope.forget.preview(body.target, body.id, start=body.start, end=body.end).to_dict()


@router.post("", response_model=ReceiptOut)
def apply(body: ForgetConfirmIn, scope: Scope = Depends(current_scope)) -> dict:
    """Delete forever, with everything derived from it, or nothing if the scope changed."""
    return scope.forget.apply(body.target, body.id, token=body.token, phrase=body.phrase,
                              start=body.start, end=body.end).to_dict()


@router.post("/search-log", response_model=ReceiptOut)
def clear_search_log(body: PhraseIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.forget.clear_search_log(phrase=body.phrase).to_dict()


@router.post("/verify", response_model=VerificationOut)
def verify_route(body: CanaryIn, request: Request, scope: Scope = Depends(current_scope)) -> dict:
    """Owner only: the check reads the whole database file, every user's rows included."""
    if not get_hearth(request).users.get(scope.user_id).is_owner:
        raise Forbidden("only the owner may verify forgetting")
    store = get_hearth(request).store
    compact(store)  # pending index merges first, so the check sees the settled state (as the CLI)
    return verify(store, body.canary).to_dict()
