"""Attachment content (W14) and one conversation's export (W15).

An attachment answers with its own bytes: an image with the type its bytes were told to be, a text
file always as ``text/plain`` (never as the HTML or script its name or browser may have claimed),
both under a ``default-src 'none'`` policy and ``nosniff``, so nothing attached runs in the page.
A conversation exports as Markdown or as JSON, downloaded; the JSON imports again through
``POST /api/imports`` (format ``hearth-chat``) as a read-only thread.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from hearth.interop import chat_export
from hearth.records import attachments
from hearth.scope import Scope

from .auth import current_scope, get_hearth
from .models import IdPath

router = APIRouter(prefix="/api/conversations", tags=["conversations"])

SAFE = {"Content-Security-Policy": "default-src 'none'", "Cache-Control": "private, no-store"}


@router.get("/{conversation_id:int}/attachments/{attachment_id:int}", response_class=Response,
            responses={200: {"content": {"image/png": {}, "text/plain": {}}}})
def attachment_content(conversation_id: IdPath, attachment_id: IdPath, request: Request,
                       download: bool = Query(default=False, description="As a download rather than shown"),
                       scope: Scope = Depends(current_scope)) -> Response:
    """One attachment's content; another user's answers 404 like an unknown id."""
    scope.conversations.get(conversation_id)
    with get_hearth(request).store.read() as conn:
        found = attachments.get(conn, scope.user_id, conversation_id, attachment_id)
    disposition = "attachment" if download or found.kind == "text" else "inline"
    headers = {**SAFE, "Content-Disposition": f"{disposition}; filename*=UTF-8''{_quoted(found.name)}"}
    if found.data is not None:
        return Response(found.data, media_type=found.media_type, headers=headers)
    return Response((found.text or "").encode("utf-8"), media_type="text/plain; charset=utf-8", headers=headers)


@router.get("/{conversation_id:int}/export", response_class=Response,
            responses={200: {"content": {"text/markdown": {}, "application/json": {}}}})
def export_conversation(conversation_id: IdPath, request: Request,
                        format: Annotated[str, Query(pattern="^(md|json)$")] = "md",
                        scope: Scope = Depends(current_scope)) -> Response:
    """The conversation as Markdown (``md``) or JSON (``json``, which imports again), downloaded:
    its visible turns, the chosen version of each, with their attachments (W15)."""
    conversation = scope.conversations.get(conversation_id)
    persona = scope.personas.get(conversation.persona_id)
    hearth = get_hearth(request)
    with hearth.store.read() as conn:
        if format == "json":
            body = chat_export.dumps(chat_export.chat_json(conn, scope.user_id, conversation, persona))
            media = "application/json"
        else:
            person = hearth.users.get(scope.user_id).display_name or ""
            body = chat_export.chat_markdown(conn, scope.user_id, conversation, persona, person).encode("utf-8")
            media = "text/markdown; charset=utf-8"
    name = chat_export.filename(conversation, format)
    return Response(body, media_type=media,
                    headers={**SAFE, "Content-Disposition": f"attachment; filename=\"{name}\""})


def _quoted(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")
