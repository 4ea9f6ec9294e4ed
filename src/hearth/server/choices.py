"""Choices a person makes about a conversation and a first run (W3, PR1, P5, U1).

- the models the provider offers (``GET /api/models``, read on demand and cached briefly) and a
  conversation's own model (``PUT /api/conversations/{id}/model``; 400 for a name the provider's
  list does not have; a name is accepted unchecked, and the answer says so, when the list cannot
  be read);
- a conversation's own custom instructions, and prompt presets: named texts saved per person and
  applied as those instructions (the stored prompt is rebuilt before the answer, P5);
- the first-run welcome (``GET`` / ``POST /api/onboarding``).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from hearth.prompt.presets import MAX_NAME
from hearth.records import onboarding
from hearth.records.context import Context
from hearth.records.onboarding import MAX_DISPLAY_NAME, Onboarding
from hearth.records.personas import MAX_TEXT
from hearth.scope import Scope

from ..errors import InvalidInput
from ..providers.base import MAX_MODEL_NAME
from ..providers.catalog import ModelList
from .auth import current_context, current_scope, get_hearth
from .conversations import ConversationOut
from .models import MAX_ID, IdPath, RequestModel, plain, responses
from .personas import PersonaOut, _out

router = APIRouter(tags=["choices"])


# -- models ------------------------------------------------------------------------------------------
class ModelIn(RequestModel):
    model: str | None = Field(max_length=MAX_MODEL_NAME, description=(
        "A model the provider offers (GET /api/models); null: the deployment's default again"))


class ModelSet(BaseModel):
    conversation: ConversationOut
    checked: bool = Field(description="The name was found in the provider's model list (true for null)")
    note: str | None = Field(default=None, description="Why the name could not be checked")


@router.get("/api/models", response_model=ModelList)
def list_models(request: Request, scope: Scope = Depends(current_scope),
                refresh: bool = Query(default=False, description="Read the provider's list again now")) -> ModelList:
    """The models a conversation may choose: the default first, then the provider's chat models."""
    return get_hearth(request).models_for(scope.user_id).get(refresh=refresh)


@router.put("/api/conversations/{conversation_id:int}/model", response_model=ModelSet,
            responses=responses(400, s400="The provider does not offer a model of that name (code unknown_model)"))
def set_model(conversation_id: IdPath, body: ModelIn, scope: Scope = Depends(current_scope)) -> dict:
    """Choose the model this conversation's requests ask for; its Responses chain restarts."""
    conversation, choice = scope.set_model(conversation_id, body.model)
    return {"conversation": plain(conversation), "checked": choice.checked if choice else True,
            "note": choice.note if choice else None}


# -- a conversation's instructions and prompt presets ----------------------------------------------------
class InstructionsIn(RequestModel):
    text: str | None = Field(max_length=MAX_TEXT, description="null: the persona's instructions again")


class InstructionsOut(BaseModel):
    text: str | None = Field(description="The conversation's own instructions; null: its persona's")
    preset_id: int | None = Field(default=None, description="The preset whose text they are, if any")
    changed: bool | None = Field(default=None, description="On a change: whether anything changed")


class PresetIn(RequestModel):
    name: str = Field(min_length=1, max_length=MAX_NAME + 20)  # surrounding spaces are trimmed
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class PresetPatch(RequestModel):
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME + 20)
    text: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)


class PresetOut(BaseModel):
    id: int
    name: str
    text: str
    created_at: str
    updated_at: str


class ApplyIn(RequestModel):
    conversation_id: int = Field(ge=1, le=MAX_ID)


def _instructions(scope: Scope, conversation_id: int, changed: bool | None = None) -> dict:
    text = scope.presets.conversation_instructions(conversation_id)
    preset = scope.presets.matching(text)
    return {"text": text, "preset_id": preset.id if preset else None, "changed": changed}


@router.get("/api/conversations/{conversation_id:int}/instructions", response_model=InstructionsOut)
def get_instructions(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return _instructions(scope, conversation_id)


@router.put("/api/conversations/{conversation_id:int}/instructions", response_model=InstructionsOut)
def set_instructions(conversation_id: IdPath, body: InstructionsIn, scope: Scope = Depends(current_scope)) -> dict:
    """The conversation's own custom instructions; its stored prompt is rebuilt first (P5)."""
    changed = scope.set_custom_instructions(conversation_id, body.text)
    return _instructions(scope, conversation_id, changed)


@router.get("/api/presets", response_model=list[PresetOut])
def list_presets(scope: Scope = Depends(current_scope)) -> list[dict]:
    return [plain(p) for p in scope.presets.list()]


@router.post("/api/presets", response_model=PresetOut, status_code=201)
def create_preset(body: PresetIn, scope: Scope = Depends(current_scope)) -> dict:
    """Save a named text; 409 when the name is taken."""
    return plain(scope.presets.create(body.name, body.text))


@router.get("/api/presets/{preset_id:int}", response_model=PresetOut)
def get_preset(preset_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return plain(scope.presets.get(preset_id))


@router.patch("/api/presets/{preset_id:int}", response_model=PresetOut)
def update_preset(preset_id: IdPath, body: PresetPatch, scope: Scope = Depends(current_scope)) -> dict:
    """Rename it or change its text; conversations it was applied to keep their copy."""
    return plain(scope.presets.update(preset_id, name=body.name, text=body.text))


@router.delete("/api/presets/{preset_id:int}", status_code=204, response_class=Response)
def delete_preset(preset_id: IdPath, scope: Scope = Depends(current_scope)) -> Response:
    scope.presets.delete(preset_id)
    return Response(status_code=204)


@router.post("/api/presets/{preset_id:int}/apply", response_model=InstructionsOut)
def apply_preset(preset_id: IdPath, body: ApplyIn, scope: Scope = Depends(current_scope)) -> dict:
    """Make the preset's text the conversation's custom instructions (rebuilt prompt, P5)."""
    changed = scope.presets.apply(preset_id, body.conversation_id)
    return _instructions(scope, body.conversation_id, changed)


# -- the first run ----------------------------------------------------------------------------------------
class OnboardingIn(RequestModel):
    name: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME + 20,
                             description="Create a companion of this name (with identity)")
    identity: str | None = Field(default=None, max_length=MAX_TEXT, description="Who the companion is, briefly")
    persona_id: int | None = Field(default=None, ge=1, le=MAX_ID,
                                   description="Or: the persona a card import just made")


class OnboardingDone(BaseModel):
    persona: PersonaOut
    archived: list[int] = Field(description="The untouched default persona, archived")


@router.get("/api/onboarding", response_model=Onboarding)
def onboarding_state(ctx: Context = Depends(current_context)) -> Onboarding:
    """Whether the page shows its first-run welcome (no conversation; no persona but an untouched default)."""
    return onboarding.state(ctx)


@router.post("/api/onboarding", response_model=OnboardingDone, status_code=201)
def finish_onboarding(body: OnboardingIn, scope: Scope = Depends(current_scope),
                      ctx: Context = Depends(current_context)) -> dict:
    """Give the person their companion: create one from ``name`` and ``identity``, or take the
    persona a card import made (``persona_id``); the untouched default is archived. 409 once set up."""
    if (body.name is None) == (body.persona_id is None):
        raise InvalidInput("give either a name (and identity) or the persona_id of an imported card")
    if body.persona_id is not None:
        if body.identity is not None:
            raise InvalidInput("identity goes with a name, not with persona_id")
        persona, archived = onboarding.adopt(ctx, body.persona_id)
    else:
        persona, archived = onboarding.create_companion(ctx, body.name, body.identity)
    return {"persona": _out(scope, persona), "archived": archived}
