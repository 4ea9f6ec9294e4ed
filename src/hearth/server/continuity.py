"""Cross-thread continuity routes: New Chat, Branch / Fresh Chat, shield, continuity cleanup.

New Chat and Branch answer the new conversation plus numbers about the carried handoff (never its
text). Shield changes go through the scope so affected stored prompts are refreshed before the
response (V1, V3). The cleanup endpoints are owner-only and unavailable until an owner password
is set (H11); they answer counts, dates and a scope token, never continuity text.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from hearth.continuity.branch import MAX_RETRY_KEY
from hearth.ops import cleanup
from hearth.records.context import Context
from hearth.records.conversations import MAX_TITLE
from hearth.scope import Scope

from .auth import current_scope, owner_context
from .conversations import ConversationOut
from .models import MAX_ID, IdPath, RequestModel, plain

router = APIRouter(tags=["continuity"])


class NewChatIn(RequestModel):
    persona_id: int | None = Field(default=None, ge=1, le=MAX_ID, description="Default persona when omitted")
    title: str = Field(default="", max_length=MAX_TITLE)
    folder_id: int | None = Field(default=None, ge=1, le=MAX_ID)
    continue_: bool = Field(default=True, alias="continue",
                            description="Carry the most recent eligible thread (personas with auto_continuity)")


class HandoffNumbers(BaseModel):
    selected: int = 0
    verbatim: int = 0
    markers: int = 0
    dropped: int = 0
    model_reference_chars: int = 0
    visible_chars: int = 0
    budget: int = 0
    per_message_limit: int = 0


class NewChatOut(BaseModel):
    conversation: ConversationOut
    source_conversation_id: int | None
    handoff: HandoffNumbers | None


class BranchIn(RequestModel):
    retry_key: str = Field(min_length=1, max_length=MAX_RETRY_KEY,
                           description="Chosen by the client once per branch action; repeats return the same thread")
    title: str | None = Field(default=None, max_length=MAX_TITLE)


class BranchOut(BaseModel):
    conversation: ConversationOut
    artifact_message_id: int | None
    source_conversation_id: int | None
    created: bool = Field(description="False when this retry key had already made the branch")
    handoff: HandoffNumbers | None


class ShieldIn(RequestModel):
    shielded: bool = True


class CleanupPreviewOut(BaseModel):
    candidates: int
    protected_handoffs: int
    oldest: str | None
    newest: str | None
    token: str


class CleanupDeleteIn(RequestModel):
    token: str = Field(min_length=1, max_length=200)
    backup_verified: bool
    phrase: str = Field(max_length=200)


class CleanupReceiptOut(BaseModel):
    removed: int


@router.post("/api/conversations/new-chat", response_model=NewChatOut, status_code=201)
def new_chat(body: NewChatIn | None = None, scope: Scope = Depends(current_scope)) -> dict:
    """Start a thread that continues the most recent eligible one (H6)."""
    body = body or NewChatIn()
    result = scope.new_chat(body.persona_id, title=body.title, folder_id=body.folder_id, continue_=body.continue_)
    data = result.to_dict()
    data["handoff"] = data["handoff"] or None
    return data


@router.post("/api/conversations/{conversation_id:int}/branch", response_model=BranchOut)
def branch(conversation_id: IdPath, body: BranchIn, scope: Scope = Depends(current_scope)) -> dict:
    """Branch / Fresh Chat from this conversation (H7); idempotent per retry key (H8)."""
    data = scope.branch(conversation_id, body.retry_key, body.title).to_dict()
    data["handoff"] = data["handoff"] or None
    return data


@router.post("/api/conversations/{conversation_id:int}/shield", response_model=ConversationOut)
def shield(conversation_id: IdPath, body: ShieldIn | None = None, scope: Scope = Depends(current_scope)) -> dict:
    """Shield from automatic continuity (default) or, with ``{"shielded": false}``, release (V2, V3)."""
    return plain(scope.conversations.set_shielded(conversation_id, body.shielded if body else True))


@router.post("/api/conversations/{conversation_id:int}/shield/release", response_model=ConversationOut)
def release_shield(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    """Explicit release; affected stored prompts are refreshed before this answers (V3)."""
    return plain(scope.conversations.set_shielded(conversation_id, False))


@router.get("/api/maintenance/continuity-cleanup/preview", response_model=CleanupPreviewOut)
def cleanup_preview(ctx: Context = Depends(owner_context)) -> dict:
    """Counts and dates of retired generated-summary-only rows, and the scope token (H11)."""
    return cleanup.preview(ctx).to_dict()


@router.post("/api/maintenance/continuity-cleanup/delete", response_model=CleanupReceiptOut)
def cleanup_delete(body: CleanupDeleteIn, ctx: Context = Depends(owner_context)) -> dict:
    """Remove them: token, verified-backup acknowledgement and the exact phrase required (H11)."""
    return cleanup.delete(ctx, token=body.token, backup_verified=body.backup_verified,
                          phrase=body.phrase).to_dict()
