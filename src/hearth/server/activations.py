"""Activation routes (E11): the companion's own messages, off unless the owner adds one."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from hearth.outreach.activations import Prefs
from hearth.scope import Scope

from .auth import current_scope
from .models import MAX_ID, IdPath, RequestModel, plain

router = APIRouter(prefix="/api/activations", tags=["activations"])


class ActivationIn(RequestModel):
    persona_id: int = Field(ge=1, le=MAX_ID)
    kind: Literal["morning", "reflection", "checkins"]
    at: str | None = Field(default=None, max_length=5, description="morning: local HH:MM")
    rule: str | None = Field(default=None, max_length=300, description="morning: an RFC 5545 RRULE")
    idle_minutes: int | None = Field(default=None, ge=30, le=20_160, description="reflection")
    channel: Literal["web", "sms", "email"] = "web"


class ActivationOut(BaseModel):
    id: int
    persona_id: int
    kind: str
    rule: str | None
    idle_minutes: int | None
    note: str
    channel: str
    enabled: bool
    next_run_at: str | None
    created_at: str
    updated_at: str


class EnabledIn(RequestModel):
    enabled: bool


class PrefsIn(RequestModel):
    timezone: str | None = Field(default=None, max_length=64)
    quiet_start: str | None = Field(default=None, max_length=5)
    quiet_end: str | None = Field(default=None, max_length=5)
    daily_limit: int | None = Field(default=None, ge=0, le=24)


class RunOut(BaseModel):
    id: int
    activation_id: int
    kind: str
    due_at: str
    status: str
    conversation_id: int | None
    message_id: int | None


@router.get("", response_model=list[ActivationOut])
def list_activations(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(a) for a in scope.activations.list()]


@router.post("", response_model=ActivationOut, status_code=201)
def add_activation(body: ActivationIn, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.activations.add(body.persona_id, body.kind, at=body.at, rule=body.rule,
                                       idle_minutes=body.idle_minutes, channel=body.channel))


@router.get("/prefs", response_model=Prefs)
def get_prefs(scope: Scope = Depends(current_scope)) -> Prefs:
    return scope.activations.prefs()


@router.put("/prefs", response_model=Prefs)
def set_prefs(body: PrefsIn, scope: Scope = Depends(current_scope)) -> Prefs:
    return scope.activations.set_prefs(timezone_name=body.timezone, quiet_start=body.quiet_start,
                                       quiet_end=body.quiet_end, daily_limit=body.daily_limit)


@router.get("/runs", response_model=list[RunOut])
def list_runs(scope: Scope = Depends(current_scope)) -> list[dict]:
    return scope.activations.runs()


@router.patch("/{activation_id:int}", response_model=ActivationOut)
def set_enabled(activation_id: IdPath, body: EnabledIn, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.activations.set_enabled(activation_id, body.enabled))


@router.delete("/{activation_id:int}", status_code=204)
def remove_activation(activation_id: IdPath, scope: Scope = Depends(current_scope)) -> Response:
    scope.activations.remove(activation_id)
    return Response(status_code=204)
