"""Stop, regenerate, swipe and edit (W2): routes over the Scope's alternatives.

Any message of yours can be edited; the turns after it are kept as the branch of its earlier
version and come back when that version is chosen again.

Regenerating and editing answer server-sent events exactly like sending. A reply the person stopped
is not saved by the server (closing the stream ends it); the web page keeps what arrived through
``partial`` at once, and ``DELETE partial/{message_id}`` undoes that (W12).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from hearth.scope import Scope

from ..errors import NotFound
from .auth import current_scope
from .conversations import SSE_RESPONSES, MessageOut, RetryIn, _stream, plain_message
from .models import MAX_ID, IdPath, RequestModel

router = APIRouter(prefix="/api/conversations", tags=["conversations"])


class EditIn(RequestModel):
    text: str = Field(description="The new text of one of your messages; limited by max_message_chars")
    channel: str = Field(default="web", max_length=20)


class PartialIn(RequestModel):
    text: str = Field(description="What arrived of the stopped reply")


class AlternativeOut(BaseModel):
    message_id: int
    position: int
    content: str
    created_at: str
    chosen: bool


def _owned_message(scope: Scope, conversation_id: int, message_id: int) -> None:
    # A message of another thread answers exactly like an unknown one.
    if scope.conversations.message(message_id).conversation_id != scope.conversations.get(conversation_id).id:
        raise NotFound(f"no message {message_id}")


@router.post("/{conversation_id:int}/regenerate", response_class=StreamingResponse, responses=SSE_RESPONSES)
def regenerate(conversation_id: IdPath, body: RetryIn | None = None,
               scope: Scope = Depends(current_scope)) -> StreamingResponse:
    """Write another version of the last reply; the earlier versions stay to swipe back to."""
    return _stream(scope.regenerate_stream(conversation_id, channel=body.channel if body else "web"))


@router.post("/{conversation_id:int}/messages/{message_id:int}/edit", response_class=StreamingResponse,
             responses=SSE_RESPONSES)
def edit(conversation_id: IdPath, message_id: IdPath, body: EditIn,
         scope: Scope = Depends(current_scope)) -> StreamingResponse:
    """Replace one of your messages and continue from it: the original stays as version 0, and the
    turns that followed it as that version's branch (choosing version 0 brings them back)."""
    _owned_message(scope, conversation_id, message_id)
    return _stream(scope.edit_stream(conversation_id, message_id, body.text, channel=body.channel))


@router.post("/{conversation_id:int}/partial", response_model=MessageOut, status_code=201)
def keep_partial(conversation_id: IdPath, body: PartialIn, scope: Scope = Depends(current_scope)) -> dict:
    """Keep what arrived of a stopped reply, marked ``partial``."""
    return plain_message(scope.keep_partial_reply(conversation_id, body.text))


@router.delete("/{conversation_id:int}/partial/{message_id:int}", status_code=204)
def undo_partial(conversation_id: IdPath, message_id: Annotated[int, Path(ge=1, le=MAX_ID)],
                 scope: Scope = Depends(current_scope)) -> None:
    """Undo a kept partial reply: it is removed with everything derived from it (W12). Only the
    thread's last reply, marked partial and with no other version."""
    scope.undo_partial_reply(conversation_id, message_id)


@router.get("/{conversation_id:int}/messages/{message_id:int}/alternatives", response_model=list[AlternativeOut])
def alternatives(conversation_id: IdPath, message_id: IdPath, scope: Scope = Depends(current_scope)) -> list[dict]:
    _owned_message(scope, conversation_id, message_id)
    return [a.to_dict() for a in scope.alternatives(message_id)]


@router.post("/{conversation_id:int}/messages/{message_id:int}/alternatives/{position:int}/choose", response_model=MessageOut)
def choose(conversation_id: IdPath, message_id: IdPath, position: Annotated[int, Path(ge=0, le=MAX_ID)],
           scope: Scope = Depends(current_scope)) -> dict:
    """Swipe: this version is what the thread shows and what later requests read. For a message of
    yours, the turns that followed that version come back with it (and the present ones wait)."""
    _owned_message(scope, conversation_id, message_id)
    return plain_message(scope.choose_alternative(message_id, position))
