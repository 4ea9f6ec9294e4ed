"""Persona routes (C1): list, create, read and edit; a settings save rebuilds stored prompts (P5)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from hearth.records import avatars
from hearth.records.personas import MAX_TEXT
from hearth.scope import Scope

from ..errors import NotFound
from .auth import current_scope
from .models import IdPath, RequestModel, plain

router = APIRouter(prefix="/api/personas", tags=["personas"])

Text = Field(default=None, max_length=MAX_TEXT)


class Character(RequestModel):
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=MAX_TEXT)


class PersonaFields(RequestModel):
    display_name: str | None = Field(default=None, max_length=200)
    identity: str | None = Text
    user_label: str | None = Field(default=None, max_length=200)
    assistant_label: str | None = Field(default=None, max_length=200)
    legacy_labels: list[str] | None = None
    tone: str | None = Field(default=None, max_length=200)
    custom_instructions: str | None = Text
    sections: dict[str, str] | None = None
    characters: list[Character] | None = None
    auto_continuity: bool | None = None
    archive_access: bool | None = None
    web_search: bool | None = None

    def values(self) -> dict:
        return {k: v for k, v in self.model_dump(exclude_unset=True).items() if v is not None}


class PersonaCreate(PersonaFields):
    name: str = Field(min_length=1, max_length=64, description="Short name: letters, digits, '.', '_' or '-'")


class PersonaOut(BaseModel):
    id: int
    name: str
    display_name: str
    identity: str
    user_label: str
    assistant_label: str
    legacy_labels: list[str]
    tone: str
    custom_instructions: str
    sections: dict[str, str]
    characters: list[dict[str, str]]
    auto_continuity: bool
    archive_access: bool
    web_search: bool
    card: dict[str, Any] = {}  # character card fields (X3); see docs/import.md
    created_at: str
    updated_at: str
    archived_at: str | None = None
    avatar_version: str | None = Field(default=None, description=(
        "Tag of the persona's avatar, or null without one: GET avatar?v=TAG may be cached for good"))


class PersonaSaved(BaseModel):
    persona: PersonaOut
    prompts_rebuilt: int


class Archive(RequestModel):
    archived: bool = Field(default=True, description="false brings an archived persona back")


def _out(scope: Scope, persona: Any, tags: dict[int, str] | None = None) -> dict:
    """A persona for the client, with its avatar's tag (one query for a whole list)."""
    tags = scope.personas.avatar_versions() if tags is None else tags
    return {**plain(persona), "avatar_version": tags.get(persona.id)}


@router.get("", response_model=list[PersonaOut])
def list_personas(scope: Scope = Depends(current_scope), include_archived: bool = False) -> list[dict]:
    tags = scope.personas.avatar_versions()
    return [_out(scope, p, tags) for p in scope.personas.list(include_archived=include_archived)]


@router.post("", response_model=PersonaOut, status_code=201)
def create_persona(body: PersonaCreate, scope: Scope = Depends(current_scope)) -> dict:
    values = body.values()
    name = values.pop("name")
    return _out(scope, scope.personas.create(name, values.pop("display_name", None), **values))


@router.get("/{persona_id:int}", response_model=PersonaOut)
def get_persona(persona_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return _out(scope, scope.personas.get(persona_id))


@router.patch("/{persona_id:int}", response_model=PersonaSaved)
def update_persona(persona_id: IdPath, body: PersonaFields, scope: Scope = Depends(current_scope)) -> dict:
    persona, rebuilt = scope.update_persona(persona_id, **body.values())
    return {"persona": _out(scope, persona), "prompts_rebuilt": rebuilt}


@router.post("/{persona_id:int}/archive", response_model=PersonaOut)
def archive_persona(persona_id: IdPath, body: Archive | None = None, scope: Scope = Depends(current_scope)) -> dict:
    """Archive a persona (W3): its threads stay readable; it leaves the pickers and New Chat."""
    return _out(scope, scope.personas.archive(persona_id, body.archived if body else True))


@router.put("/{persona_id:int}/avatar", status_code=204, openapi_extra={"requestBody": {
    "required": True, "content": {m: {"schema": {"type": "string", "format": "binary"}}
                                  for m in avatars.FORMATS.values()}}})
async def put_avatar(persona_id: IdPath, request: Request, scope: Scope = Depends(current_scope)) -> Response:
    """Upload an avatar as the raw image body (PNG, JPEG, WebP or GIF; checked by opening it)."""
    data = await request.body()
    mime = avatars.checked_image(data, request.headers.get("content-type"))
    scope.personas.set_avatar(persona_id, data, mime)
    return Response(status_code=204)


@router.get("/{persona_id:int}/avatar", response_class=Response,
            responses={200: {"content": {"image/png": {}}, "description": "The avatar image"},
                       304: {"description": "The copy the client holds (If-None-Match) is current"}})
def get_avatar(request: Request, persona_id: IdPath, scope: Scope = Depends(current_scope),
               v: Annotated[str | None, Query(max_length=64, description="The persona's avatar_version")] = None,
               ) -> Response:
    """The avatar image. With ``v`` equal to the persona's ``avatar_version`` the answer may be
    cached for good (the tag changes with the image, so the URL does); without it, revalidated
    by its ETag. Either way a list of many threads fetches each image once."""
    found = scope.personas.avatar(persona_id)
    if found is None:
        raise NotFound(f"persona {persona_id} has no avatar")
    tag = scope.personas.avatar_versions().get(persona_id, "")
    etag = f'"{tag}"'
    cache = "private, max-age=31536000, immutable" if v == tag else "private, no-cache"
    headers = {"Cache-Control": cache, "ETag": etag, "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": "default-src 'none'"}
    if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    data, mime = found
    return Response(data, media_type=mime, headers=headers)
