"""The model connection from the app (W10): what answers this person's chats, changed without a restart.

- ``GET /api/connection``: which provider and model answer now, and why (the environment, the
  person's own connection, the owner's, or none: offline); the person's own saved connection with
  only a hint of its key (``sk-…abcd``).
- ``PUT /api/connection``: save it; the next request uses it. ``DELETE``: use the owner's again.
- ``POST /api/connection/models``: the provider's own model list, through its SDK.
- ``POST /api/connection/test``: one real small request through the SDK; success or the reason.

A key is accepted in a request body and never sent back; a body without one reuses the person's
stored key only for the same provider and address (``records.connections``). Environment variables
and the config file win over every stored connection.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from hearth.providers import connect
from hearth.providers.select import DEFAULT_MODELS, choose_provider_name, environment_chooses
from hearth.records.connections import MAX_KEY, MAX_MODEL, MAX_URL, Connections, check_connection
from hearth.scope import Scope

from ..errors import ConfigError, ProviderError
from .auth import current_scope, get_hearth
from .models import RequestModel

router = APIRouter(prefix="/api/connection", tags=["connection"])

Source = Literal["environment", "own", "owner", "none"]
ProviderName = Literal["offline", "openai", "openai-chat", "anthropic"]


class SavedOut(BaseModel):
    provider: str
    model: str
    base_url: str
    key_hint: str = Field(description="The key's kind and last four characters; the key itself never leaves the server")
    updated_at: str


class ConnectionOut(BaseModel):
    provider: str = Field(description="The provider answering this person's chats now")
    model: str = Field(description="The model their chats use unless a chat chose its own")
    source: Source = Field(description=(
        "Why: the server's environment or config file (wins over the app), this person's saved connection,"
        " the owner's (the household default), or none (offline)"))
    environment: list[str] = Field(description="The environment variables that choose the provider, if any")
    saved: SavedOut | None = Field(description="This person's own saved connection")
    is_owner: bool
    problem: str | None = Field(default=None, description="Why the configured provider cannot work, in plain words")


class ConnectionIn(RequestModel):
    provider: ProviderName
    model: str = Field(default="", max_length=MAX_MODEL)
    base_url: str = Field(default="", max_length=MAX_URL, description="An OpenAI-compatible server's address, e.g. http://localhost:11434/v1")
    api_key: str | None = Field(default=None, max_length=MAX_KEY, description=(
        "The key; omitted: the stored one, while provider and address stay the same"))


class ModelsOut(BaseModel):
    ok: bool
    models: list[str]
    detail: str | None = None


class TestOut(BaseModel):
    ok: bool
    provider: str
    model: str
    seconds: float
    reply: str = Field(description="The first words of the model's answer (not stored)")
    detail: str = Field(description="Why it failed, in plain words")


def _state(request: Request, scope: Scope) -> ConnectionOut:
    hearth = get_hearth(request)
    user = hearth.users.get(scope.user_id)
    connections = Connections(hearth.store)
    own = connections.get(scope.user_id)
    env = environment_chooses(hearth.settings)
    settings = hearth.settings_for(scope.user_id)
    source: Source
    if env:
        source = "environment"
    elif own:
        source = "own"
    elif not user.is_owner and connections.get(hearth.users.owner().id):
        source = "owner"
    else:
        source = "none"
    problem = None
    try:
        name = choose_provider_name(settings)
        hearth.provider_for(scope.user_id)
    except ConfigError as exc:
        name, problem = settings.provider or "offline", str(exc)
    saved = SavedOut(provider=own.provider, model=own.model, base_url=own.base_url, key_hint=own.key_hint,
                     updated_at=own.updated_at) if own else None
    return ConnectionOut(provider=name, model=settings.model or DEFAULT_MODELS.get(name, ""), source=source,
                         environment=env, saved=saved, is_owner=user.is_owner, problem=problem)


def _candidate(request: Request, scope: Scope, body: ConnectionIn, *, need_model: bool = False):
    hearth = get_hearth(request)
    key = body.api_key
    if key is None:
        key = Connections(hearth.store).stored_key(scope.user_id, body.provider, body.base_url)
    provider, model, base_url, key = check_connection(body.provider, body.model, body.base_url, key,
                                                    need_model=need_model)
    return connect.candidate(hearth.settings, provider, model, base_url, key)


@router.get("", response_model=ConnectionOut)
def current(request: Request, scope: Scope = Depends(current_scope)) -> ConnectionOut:
    """Which provider and model answer this person's chats now, and why."""
    return _state(request, scope)


@router.put("", response_model=ConnectionOut)
def save(body: ConnectionIn, request: Request, scope: Scope = Depends(current_scope)) -> ConnectionOut:
    """Save this person's connection; their next request uses it (no restart)."""
    Connections(get_hearth(request).store).save(scope.user_id, body.provider, body.model, body.base_url, body.api_key)
    return _state(request, scope)


@router.delete("", status_code=204, response_class=Response)
def clear(request: Request, scope: Scope = Depends(current_scope)) -> Response:
    """Forget this person's own connection (and its key): the owner's answers again."""
    Connections(get_hearth(request).store).clear(scope.user_id)
    return Response(status_code=204)


@router.post("/models", response_model=ModelsOut)
def models(body: ConnectionIn, request: Request, scope: Scope = Depends(current_scope)) -> ModelsOut:
    """The provider's own chat models, read through its SDK (nothing is saved)."""
    try:
        return ModelsOut(ok=True, models=connect.list_models(_candidate(request, scope, body)))
    except (ProviderError, ConfigError) as exc:
        return ModelsOut(ok=False, models=[], detail=str(exc))


@router.post("/test", response_model=TestOut)
def test_connection(body: ConnectionIn, request: Request, scope: Scope = Depends(current_scope)) -> TestOut:
    """Send one small real request through the provider's SDK (nothing is saved, the reply neither)."""
    tried = connect.try_connection(_candidate(request, scope, body, need_model=True))
    return TestOut(ok=tried.ok, provider=tried.provider, model=tried.model, seconds=tried.seconds,
                   reply=tried.reply, detail=tried.detail)
