"""Memory-layer routes: household status and pending changes (HS1, HS2), live context and nudges
(LC1, LC2), rolling summaries (RS1), memory fragments (F1, F2), the review queue (F3, G4), layer
settings and job counts. Every route acts inside the caller's scope (G2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field, create_model

from hearth.memory.review import Proposal
from hearth.prompt.layers.fragments import MAX_CATEGORY, MAX_DEFINITION
from hearth.prompt.layers.household import MAX_NAME, MAX_VALUE, StatusFieldInfo, StatusValue
from hearth.prompt.layers.settings import SETTINGS, LayerSettings
from hearth.scope import Scope

from .auth import current_scope
from .models import IdPath, OptionalIdQuery, RequestModel, responses

router = APIRouter(tags=["memory layers"])

Term = Field(max_length=200)


# -- household status -------------------------------------------------------------------------------
class FieldIn(RequestModel):
    name: str = Field(min_length=1, max_length=MAX_NAME)
    options: list[str] = Field(default_factory=list, max_length=20)
    aliases: list[str] = Field(default_factory=list, max_length=20)
    value: str | None = Field(default=None, max_length=MAX_VALUE)


class FieldEdit(RequestModel):
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    options: list[str] | None = Field(default=None, max_length=20)
    aliases: list[str] | None = Field(default=None, max_length=20)


class ValueIn(RequestModel):
    value: str | None = Field(max_length=MAX_VALUE, description="The new value; null clears it")
    valid_from: str | None = Field(default=None, max_length=40,
                                   description="When the new value became true (ISO date or date-time; not future)")
    correction: bool = Field(default=False, description="Fix a wrongly entered value instead of recording a change")


# Status fields, status values and review proposals answer as the core records themselves
# (StatusFieldInfo, StatusValue, Proposal: one definition per record).


@router.get("/api/status", response_model=list[StatusFieldInfo])
def list_status(scope: Scope = Depends(current_scope)) -> list[StatusFieldInfo]:
    """Current household status, one entry per field."""
    return scope.layers.household.fields()


@router.post("/api/status", response_model=StatusFieldInfo, status_code=201)
def add_status_field(body: FieldIn, scope: Scope = Depends(current_scope)) -> StatusFieldInfo:
    return scope.layers.household.add_field(body.name, body.options, body.aliases, body.value)


@router.patch("/api/status/{field_id:int}", response_model=StatusFieldInfo)
def edit_status_field(field_id: IdPath, body: FieldEdit, scope: Scope = Depends(current_scope)) -> StatusFieldInfo:
    return scope.layers.household.edit_field(field_id, name=body.name, options=body.options,
                                             aliases=body.aliases)


@router.put("/api/status/{field_id:int}/value", response_model=StatusFieldInfo)
def set_status_value(field_id: IdPath, body: ValueIn, scope: Scope = Depends(current_scope)) -> StatusFieldInfo:
    """Set (toggle) a value; the previous value is retired into history, never overwritten."""
    return scope.layers.household.set(field_id, body.value, valid_from=body.valid_from,
                                      correction=body.correction)


@router.delete("/api/status/{field_id:int}", status_code=204)
def remove_status_field(field_id: IdPath, scope: Scope = Depends(current_scope)) -> None:
    scope.layers.household.remove_field(field_id)


@router.get("/api/status/as-of", response_model=dict[str, str])
def status_as_of(date: str = Query(max_length=40, description="ISO date or date-time, not in the future"),
                 mode: Literal["valid", "known"] = "valid", scope: Scope = Depends(current_scope)) -> dict:
    """What the household status said on a date: what was true then, or what Hearth knew then (B1)."""
    return scope.layers.household.as_of(date, mode)


@router.get("/api/status/history", response_model=list[StatusValue])
def status_history(field_id: OptionalIdQuery = None, scope: Scope = Depends(current_scope)) -> list[StatusValue]:
    return scope.layers.household.history(field_id)


@router.get("/api/status/pending", response_model=list[Proposal])
def pending_status_changes(scope: Scope = Depends(current_scope)) -> list[Proposal]:
    """Detected status changes waiting for approval (approve or dismiss them in the review queue)."""
    return scope.layers.review.list("pending", "status_change")


# -- live context, nudges and the rolling summary ----------------------------------------------------
class NudgeOut(BaseModel):
    id: int
    conversation_id: int
    text: str
    marker: str
    token: str
    source: str
    status: str
    created_at: str
    used_at: str | None
    used_message_id: int | None


class LiveContextOut(BaseModel):
    conversation_id: int
    mood: str
    events: str
    needs: str
    summary: str
    display_summary: str
    source: str
    through_message_id: int
    updated_at: str
    nudges: list[NudgeOut]


class LiveContextView(BaseModel):
    live_context: LiveContextOut | None
    refresh_queued: bool


class LiveContextIn(RequestModel):
    mood: str | None = Field(default=None, max_length=120)
    events: str | None = Field(default=None, max_length=400)
    needs: str | None = Field(default=None, max_length=300)
    summary: str | None = Field(default=None, max_length=160)


class NudgeIn(RequestModel):
    text: str = Field(min_length=1, max_length=200)


class SummaryOut(BaseModel):
    id: int
    conversation_id: int
    text: str
    display: str
    source: str
    through_message_id: int
    section_messages: int
    words: int
    created_at: str
    invalidated_at: str | None


@router.get("/api/conversations/{conversation_id:int}/live-context", response_model=LiveContextView)
def get_live_context(conversation_id: IdPath, opened: bool = Query(default=False, description=(
        "Set when the thread is opened or switched to: a stale state queues a refresh")),
        scope: Scope = Depends(current_scope)) -> dict:
    layers = scope.layers
    if opened:
        state, queued = layers.live_context.open(conversation_id, layers.settings.get("live_context.stale_minutes"))
    else:
        state, queued = layers.live_context.get(conversation_id), False
    return {"live_context": state.to_dict() if state else None, "refresh_queued": queued}


@router.put("/api/conversations/{conversation_id:int}/live-context", response_model=LiveContextOut)
def set_live_context(conversation_id: IdPath, body: LiveContextIn, scope: Scope = Depends(current_scope)) -> dict:
    """Edit by hand; omitted fields keep their value."""
    return scope.layers.live_context.set(conversation_id, **body.model_dump()).to_dict()


@router.post("/api/conversations/{conversation_id:int}/nudges", response_model=NudgeOut, status_code=201)
def add_nudge(conversation_id: IdPath, body: NudgeIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.live_context.add_nudge(conversation_id, body.text).to_dict()


@router.get("/api/conversations/{conversation_id:int}/nudges", response_model=list[NudgeOut])
def list_nudges(conversation_id: IdPath, status: Literal["open", "used", "dropped"] | None = None,
                scope: Scope = Depends(current_scope)) -> list[dict]:
    return [n.to_dict() for n in scope.layers.live_context.nudges(conversation_id, status)]


@router.delete("/api/conversations/{conversation_id:int}/nudges/{nudge_id:int}", status_code=204)
def drop_nudge(conversation_id: IdPath, nudge_id: IdPath, scope: Scope = Depends(current_scope)) -> None:
    scope.layers.live_context.drop_nudge(conversation_id, nudge_id)


@router.get("/api/conversations/{conversation_id:int}/summary", response_model=SummaryOut | None)
def get_summary(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> dict | None:
    """The rolling summary in force: the newest one still valid for the thread's history."""
    found = scope.layers.summaries.current(conversation_id)
    return found.to_dict() if found else None


@router.get("/api/conversations/{conversation_id:int}/summaries", response_model=list[SummaryOut])
def summary_history(conversation_id: IdPath, scope: Scope = Depends(current_scope)) -> list[dict]:
    return [s.to_dict() for s in scope.layers.summaries.history(conversation_id)]


# -- memory fragments ---------------------------------------------------------------------------------
class FragmentIn(RequestModel):
    triggers: list[str] = Field(min_length=1, max_length=50)
    definition: str = Field(min_length=1, max_length=MAX_DEFINITION)
    category: str = Field(default="", max_length=MAX_CATEGORY)
    all_of: list[str] = Field(default_factory=list, max_length=50)
    any_of: list[str] = Field(default_factory=list, max_length=50)
    none_of: list[str] = Field(default_factory=list, max_length=50)
    priority: int = Field(default=0, ge=-1000, le=1000)
    enabled: bool = True


class FragmentEdit(RequestModel):
    triggers: list[str] | None = Field(default=None, min_length=1, max_length=50)
    definition: str | None = Field(default=None, min_length=1, max_length=MAX_DEFINITION)
    category: str | None = Field(default=None, max_length=MAX_CATEGORY)
    all_of: list[str] | None = Field(default=None, max_length=50)
    any_of: list[str] | None = Field(default=None, max_length=50)
    none_of: list[str] | None = Field(default=None, max_length=50)
    priority: int | None = Field(default=None, ge=-1000, le=1000)
    enabled: bool | None = None


class FragmentOut(BaseModel):
    id: int
    category: str
    triggers: list[str]
    definition: str
    all_of: list[str]
    any_of: list[str]
    none_of: list[str]
    priority: int
    enabled: bool
    created_at: str
    updated_at: str


class MatchIn(RequestModel):
    text: str = Field(max_length=100_000)
    persona_id: int | None = Field(default=None, ge=1, le=2**63 - 1)


class MatchOut(BaseModel):
    fragment: FragmentOut
    trigger: str
    position: int


@router.get("/api/fragments", response_model=list[FragmentOut])
def list_fragments(category: str | None = Query(default=None, max_length=MAX_CATEGORY),
                   scope: Scope = Depends(current_scope)) -> list[dict]:
    return [f.to_dict() for f in scope.layers.fragments.list(category=category)]


@router.post("/api/fragments", response_model=FragmentOut, status_code=201)
def add_fragment(body: FragmentIn, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.fragments.add(body.triggers, body.definition, body.category, all_of=body.all_of,
                                      any_of=body.any_of, none_of=body.none_of, priority=body.priority,
                                      enabled=body.enabled).to_dict()


@router.get("/api/fragments/{fragment_id:int}", response_model=FragmentOut)
def get_fragment(fragment_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.fragments.get(fragment_id).to_dict()


@router.patch("/api/fragments/{fragment_id:int}", response_model=FragmentOut)
def edit_fragment(fragment_id: IdPath, body: FragmentEdit, scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.fragments.edit(fragment_id, **body.model_dump()).to_dict()


@router.delete("/api/fragments/{fragment_id:int}", status_code=204)
def remove_fragment(fragment_id: IdPath, scope: Scope = Depends(current_scope)) -> None:
    scope.layers.fragments.remove(fragment_id)


@router.post("/api/fragments/match", response_model=list[MatchOut])
def match_fragments(body: MatchIn, scope: Scope = Depends(current_scope)) -> list[dict]:
    """Which fragments a text would trigger (for the fragment editor's test box); with
    ``persona_id``, only from the books in scope for that persona."""
    if body.persona_id is not None:
        scope.personas.get(body.persona_id)
    return [{"fragment": f.to_dict(), "trigger": m.trigger, "position": m.position}
            for f, m in scope.layers.fragments.match(body.text, persona_id=body.persona_id)]


# -- fragment books and their scope (X3) ------------------------------------------------------------
class BookOut(BaseModel):
    name: str = Field(description="The book: a fragment category")
    scope: Literal["all", "character", "personas"] = Field(description=(
        "all: every persona; character: only the persona its card made; personas: the chosen ones"))
    character_id: int | None = Field(description="The persona whose card brought the book in, if any")
    persona_ids: list[int] = Field(description="Who it fires for, unless the scope is all")
    fragments: int


class BookScopeIn(RequestModel):
    book: str = Field(min_length=1, max_length=MAX_CATEGORY)
    scope: Literal["all", "character", "personas"]
    persona_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(default_factory=list, max_length=200, description=(
        "With scope personas: who the book fires for (at least one)"))


@router.get("/api/fragments/books", response_model=list[BookOut])
def list_books(scope: Scope = Depends(current_scope)) -> list[dict]:
    """Every book (fragment category) with its scope: which personas' conversations it fires in."""
    return [b.to_dict() for b in scope.layers.fragments.books.list()]


@router.put("/api/fragments/books/scope", response_model=BookOut,
            responses=responses(404, s404="No such book or persona"))
def set_book_scope(body: BookScopeIn, scope: Scope = Depends(current_scope)) -> dict:
    """Give a book to all personas, to its character only, or to chosen personas."""
    return scope.layers.fragments.books.set_scope(body.book, body.scope, body.persona_ids).to_dict()


# -- review queue -------------------------------------------------------------------------------------
class ApproveIn(RequestModel):
    edits: dict[str, Any] = Field(default_factory=dict, description=(
        "Optional changes before applying: status_change {to}; fragment {category, triggers, definition, "
        "all_of, any_of, none_of, priority}; memory {text, category, importance}"))


class ReviewRequest(RequestModel):
    conversation_id: int = Field(ge=1, le=2**63 - 1)


class Queued(BaseModel):
    job_id: int


@router.get("/api/review", response_model=list[Proposal])
def list_proposals(status: Literal["pending", "approved", "dismissed"] = "pending",
                   kind: Literal["fragment_add", "fragment_update", "status_change", "memory_add"] | None = None,
                   scope: Scope = Depends(current_scope)) -> list[Proposal]:
    return scope.layers.review.list(status, kind)


@router.post("/api/review/run", response_model=Queued, status_code=202)
def request_review(body: ReviewRequest, scope: Scope = Depends(current_scope)) -> dict:
    """Queue a review of a conversation; its suggestions appear in the queue when the worker ran it."""
    return {"job_id": scope.layers.review.request(body.conversation_id)}


@router.get("/api/review/{proposal_id:int}", response_model=Proposal)
def get_proposal(proposal_id: IdPath, scope: Scope = Depends(current_scope)) -> Proposal:
    return scope.layers.review.get(proposal_id)


@router.post("/api/review/{proposal_id:int}/approve", response_model=Proposal)
def approve_proposal(proposal_id: IdPath, body: ApproveIn | None = None, scope: Scope = Depends(current_scope)) -> Proposal:
    return scope.layers.review.approve(proposal_id, body.edits if body else None)


@router.post("/api/review/{proposal_id:int}/dismiss", response_model=Proposal)
def dismiss_proposal(proposal_id: IdPath, scope: Scope = Depends(current_scope)) -> Proposal:
    return scope.layers.review.dismiss(proposal_id)


# -- settings and jobs --------------------------------------------------------------------------------
class JobCounts(BaseModel):
    pending: int
    running: int
    done: int
    dead: int


@router.get("/api/layers/settings", response_model=dict[str, Any])
def get_layer_settings(scope: Scope = Depends(current_scope)) -> dict:
    return scope.layers.settings.all()


# One optional field per known setting, named as the setting ("summary.every"), so the OpenAPI
# document lists exactly what may be changed (U4).
_SETTING_FIELDS: dict[str, Any] = {
    key.replace(".", "__"): (kind | None, Field(default=None, alias=key))
    for key, (_default, kind, _low, _high) in SETTINGS.items()}
if TYPE_CHECKING:
    LayerSettingsIn = RequestModel  # built at run time from SETTINGS
else:
    LayerSettingsIn = create_model("LayerSettingsIn", __base__=RequestModel, **_SETTING_FIELDS)


@router.patch("/api/layers/settings", response_model=dict[str, Any])
def set_layer_settings(body: LayerSettingsIn, scope: Scope = Depends(current_scope)) -> dict:
    """Change cadences, budgets or auto-approve per kind (``auto_approve.*``, off by default)."""
    values = body.model_dump(by_alias=True, exclude_none=True)
    for key, value in values.items():
        LayerSettings.coerce(key, value)  # check every key before saving any
    for key, value in values.items():
        scope.layers.settings.set(key, value)
    return scope.layers.settings.all()


@router.get("/api/jobs/counts", response_model=JobCounts)
def job_counts(scope: Scope = Depends(current_scope)) -> dict:
    """The caller's background jobs by status."""
    return scope.jobs.counts()
