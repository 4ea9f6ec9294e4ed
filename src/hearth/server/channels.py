"""Channel routes: the Twilio SMS webhook (signed, not session-authenticated), contacts, and which
channels each persona answers on (E5, E10)."""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from hearth.outreach.channels import receive, sms
from hearth.outreach.channels.contacts import ANSWERABLE
from hearth.records.context import Context
from hearth.scope import Scope

from ..errors import Forbidden
from .auth import current_context, current_scope
from .models import IdPath, RequestModel, plain

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/channels", tags=["channels"])
webhooks = APIRouter(prefix="/channels", tags=["channels"])

MessagingChannel = Literal["sms", "email"]


class ContactIn(RequestModel):
    channel: MessagingChannel
    address: str = Field(min_length=3, max_length=320)
    persona_id: int | None = Field(default=None, ge=1, le=2**63 - 1)


class ContactOut(BaseModel):
    id: int
    channel: str
    address: str
    persona_id: int | None
    created_at: str
    verified_at: str | None


class ClaimOut(BaseModel):
    """An address waiting for its code. The same for every address (U9): it never says whether
    another user has it."""

    channel: str
    address: str
    persona_id: int | None
    verified: bool
    detail: str


class AddressIn(RequestModel):
    channel: MessagingChannel
    address: str = Field(min_length=3, max_length=320)


class VerifyIn(AddressIn):
    code: str = Field(min_length=1, max_length=20, description="the six-digit code sent to the address")


class AnswersIn(RequestModel):
    channel: str = Field(min_length=1, max_length=20, description=f"one of {', '.join(ANSWERABLE)}")
    answers: bool


@router.get("/contacts", response_model=list[ContactOut])
def list_contacts(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(c) for c in scope.contacts.list()]


@router.post("/contacts", response_model=ClaimOut, status_code=201)
def add_contact(body: ContactIn, scope: Scope = Depends(current_scope)) -> dict:
    """Add an address: a six-digit code is sent to it, and it routes messages only once verified
    (U9). Every address gets this same answer, whoever else has it."""
    return scope.contacts.add(body.channel, body.address, body.persona_id).to_dict()


@router.get("/contacts/pending", response_model=list[ClaimOut])
def pending_contacts(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [c.to_dict() for c in scope.contacts.pending()]


@router.post("/contacts/code", response_model=ClaimOut, status_code=201)
def send_contact_code(body: AddressIn, scope: Scope = Depends(current_scope)) -> dict:
    """Send a new code to an address this user added (429 past the hourly limit)."""
    return scope.contacts.send_code(body.channel, body.address).to_dict()


@router.post("/contacts/verify", response_model=ContactOut, status_code=201)
def verify_contact(body: VerifyIn, scope: Scope = Depends(current_scope)) -> dict:
    """Enter the code: the address becomes a contact that routes inbound messages (422 for a wrong,
    used-up or expired code; five wrong tries void it)."""
    return plain(scope.contacts.verify(body.channel, body.address, body.code))


@router.delete("/contacts/{contact_id:int}", status_code=204)
def remove_contact(contact_id: IdPath, scope: Scope = Depends(current_scope)) -> Response:
    scope.contacts.remove(contact_id)
    return Response(status_code=204)


class CallOut(BaseModel):
    call_sid: str


@router.post("/contacts/{contact_id:int}/call", response_model=CallOut, status_code=201)
def call_contact(contact_id: IdPath, ctx: Context = Depends(current_context)) -> dict:
    """Ring a phone contact (E10); the answered call becomes a voice session in the same thread."""
    from hearth.outreach.voice import call

    return {"call_sid": call(ctx, contact_id)}


@router.get("/personas/{persona_id:int}", response_model=dict[str, bool])
def persona_channels(persona_id: IdPath, scope: Scope = Depends(current_scope)) -> dict[str, bool]:
    return scope.persona_channels.get(persona_id)


@router.put("/personas/{persona_id:int}", response_model=dict[str, bool])
def set_persona_channel(persona_id: IdPath, body: AnswersIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.persona_channels.set(persona_id, body.channel, body.answers)


def public_base(request: Request) -> str:
    """The address Twilio reaches this server by (``public_url``; else the one the server sees)."""
    settings = request.app.state.hearth.settings
    return settings.public_url.rstrip("/") if settings.public_url else str(request.base_url).rstrip("/")


async def signed_form(request: Request) -> dict[str, str]:
    """A Twilio webhook's form, once its signature checks out for the public URL (else 403)."""
    signature = request.headers.get("X-Twilio-Signature")
    if not signature:
        raise Forbidden("the request signature is missing or wrong")
    params = sms.parse_form(await request.body())
    url = public_base(request) + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    sms.verify(request.app.state.hearth.settings, url, params, signature)
    return params


@webhooks.post("/sms/twilio", responses={200: {"content": {"application/xml": {}}}},
               response_class=Response)
async def twilio_sms(request: Request) -> Response:
    """Twilio's inbound SMS webhook. The reply is sent later through the REST API, so the answer
    here is an empty TwiML document."""
    hearth = request.app.state.hearth
    params = await signed_form(request)
    try:
        await run_in_threadpool(receive, hearth, "sms", params.get("From", ""), params.get("MessageSid", ""),
                                params.get("Body", ""))
    except Forbidden:
        log.info("sms from a number that is not a contact refused")  # no number, no text
        raise
    return Response('<?xml version="1.0" encoding="UTF-8"?><Response></Response>', media_type="application/xml")
