"""Recall routes: the owner's search (V2), the search log (A3), archive documents and imports (A5),
and an imported conversation read as a thread, page by page, and continued in a new chat (X4).

Search answers every result with its per-signal score breakdown; include-shielded is off unless
the request turns it on for that one search. Imports take the file as the raw request body (the
body guard has already refused non-UTF-8 bodies); a parse error answers 400 and writes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from hearth.continuity.branch import MAX_RETRY_KEY
from hearth.interop.imports import FORMATS
from hearth.retrieval.embedding_job import EMBED_JOB, EMBED_JOB_SLICE
from hearth.scope import Scope

from ..errors import InvalidInput
from ..retrieval.archive import MAX_TURN_PAGE, TURN_PAGE, Document
from ..retrieval.semantic import model_id, pending_count, shared_embedder
from .auth import current_scope, get_hearth
from .continuity import HandoffNumbers
from .conversations import ConversationOut
from .models import MAX_ID, IdPath, RequestModel

router = APIRouter(tags=["recall"])

DateQuery = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD")]


class ResultOut(BaseModel):
    kind: str
    id: int
    source_id: int
    title: str
    date: str | None
    text: str
    scores: dict[str, Any]


class SearchOut(BaseModel):
    query: str
    reliability: str
    log_id: int | None
    candidates: int
    results: list[ResultOut]


class LogEntryOut(BaseModel):
    id: int
    conversation_id: int | None
    origin: str
    query: str
    variants: list[str]
    filters: dict[str, Any]
    results: list[dict[str, Any]]
    candidate_count: int
    result_count: int
    reliability: str
    duration_ms: int
    created_at: str


class DocumentOut(BaseModel):
    id: int
    collection: str
    title: str
    source: str
    document_date: str | None
    chunk_count: int
    created_at: str
    turns: int | None = Field(default=None, description="Turns of an imported conversation, when known")


class TurnOut(BaseModel):
    position: int
    role: str = Field(description="user, assistant, or empty when the label named neither")
    speaker: str = Field(description="The name the label speaks for ('Elion Voicefire said:' -> 'Elion Voicefire')")
    label: str
    text: str = Field(description="Markdown, as it was written")
    created_at: str | None


class TurnPageOut(BaseModel):
    document: DocumentOut
    turns: list[TurnOut] = Field(description="Oldest first")
    total: int
    has_earlier: bool
    has_later: bool
    passages: bool = Field(description="True for a document added before turns were kept: its chunks stand in")


class ContinueIn(RequestModel):
    retry_key: str = Field(min_length=1, max_length=MAX_RETRY_KEY,
                           description="Chosen by the client once per action; repeats return the same chat")
    persona_id: int | None = Field(default=None, ge=1, le=MAX_ID,
                                   description="The persona to continue with; else the one the import used")


class ContinueOut(BaseModel):
    conversation: ConversationOut
    artifact_message_id: int | None
    source_document_id: int | None
    created: bool = Field(description="False when this retry key had already made the chat")
    handoff: HandoffNumbers | None


def _document(d: Document) -> dict[str, Any]:
    turns = d.metadata.get("turns")
    return {**d.to_dict(), "turns": turns if isinstance(turns, int) and not isinstance(turns, bool) else None}


class ImportOut(BaseModel):
    file: str
    format: str
    status: str  # imported, updated or duplicate (a refused file answers 400)
    reason: str
    counts: dict[str, int]
    ids: dict[str, list[int]]


class ReindexOut(BaseModel):
    pending_messages: int
    pending_chunks: int
    queued: bool


@router.get("/api/search", response_model=SearchOut)
def search_route(
    q: Annotated[str, Query(min_length=1, max_length=1_000)],
    include_shielded: bool = False,
    archive: bool = True,
    conversations: bool = True,
    date_from: DateQuery = None,
    date_to: DateQuery = None,
    collection: Annotated[list[str], Query(max_length=20)] = [],  # noqa: B006  (FastAPI copies defaults)
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    scope: Scope = Depends(current_scope),
) -> dict:
    """Search conversations and the archive; shielded conversations only when asked (V2)."""
    outcome = scope.search(q, include_shielded=include_shielded, archive=archive, messages=conversations,
                           date_from=date_from, date_to=date_to, collections=tuple(collection), limit=limit)
    return {"query": outcome.query, "reliability": outcome.reliability, "log_id": outcome.log_id,
            "candidates": outcome.candidates, "results": [r.log_record() for r in outcome.results]}


@router.get("/api/search-log", response_model=list[LogEntryOut])
def search_log_route(
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    origin: Annotated[str | None, Query(max_length=64)] = None,
    scope: Scope = Depends(current_scope),
) -> list[dict]:
    """Newest first; page with ``before_id``."""
    return [e.to_dict() for e in scope.search_log(limit=limit, before_id=before_id, origin=origin)]


@router.get("/api/search-log/{entry_id:int}", response_model=LogEntryOut)
def search_log_entry_route(entry_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return scope.search_log_entry(entry_id).to_dict()


@router.get("/api/archive/documents", response_model=list[DocumentOut])
def documents_route(collection: Annotated[str | None, Query(max_length=100)] = None,
                    source: Annotated[list[str], Query(max_length=10, description="e.g. chatgpt, claude")] = [],  # noqa: B006
                    limit: Annotated[int, Query(ge=1, le=500)] = 200,
                    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
                    scope: Scope = Depends(current_scope)) -> list[dict]:
    """Newest first; ``source=chatgpt&source=claude`` lists imported conversations."""
    return [_document(d) for d in scope.archive.list(collection, limit, offset, tuple(source))]


@router.get("/api/archive/documents/{document_id:int}", response_model=DocumentOut)
def document_route(document_id: IdPath, scope: Scope = Depends(current_scope)) -> dict:
    return _document(scope.archive.get(document_id))


@router.get("/api/archive/documents/{document_id:int}/turns", response_model=TurnPageOut)
def turns_route(document_id: IdPath,
                limit: Annotated[int, Query(ge=1, le=MAX_TURN_PAGE)] = TURN_PAGE,
                before: Annotated[int | None, Query(ge=0, le=MAX_ID, description="Turns before this position")] = None,
                start: Annotated[int | None, Query(ge=0, le=MAX_ID, description="Turns from this position on")] = None,
                scope: Scope = Depends(current_scope)) -> dict:
    """An imported conversation read as a thread: the newest ``limit`` turns, those before a
    position, or those from a position on (read only; another user's document answers 404)."""
    page = scope.archive.turns(document_id, limit=limit, before=before, start=start)
    return {**page.to_dict(), "document": _document(page.document)}


@router.post("/api/archive/documents/{document_id:int}/continue", response_model=ContinueOut)
def continue_route(document_id: IdPath, body: ContinueIn, scope: Scope = Depends(current_scope)) -> dict:
    """Continue an imported conversation in a new chat whose handoff carries its last turns (H1-H9);
    idempotent per retry key (H8)."""
    data = scope.continue_document(document_id, body.retry_key, persona_id=body.persona_id).to_dict()
    data["handoff"] = data["handoff"] or None
    return data


@router.get("/api/archive/documents/{document_id:int}/chunks")
def chunks_route(document_id: IdPath, scope: Scope = Depends(current_scope)) -> list[dict]:
    return scope.archive.chunks(document_id)


@router.delete("/api/archive/documents/{document_id:int}", status_code=204)
def delete_document_route(document_id: IdPath, scope: Scope = Depends(current_scope)) -> None:
    """The document, its chunks, their index rows and vectors, and search-log entries citing it (B4)."""
    scope.forget.delete_document(document_id)


@router.post("/api/archive/import", response_model=ImportOut, status_code=201)
async def import_route(
    request: Request,
    format: Annotated[str, Query(pattern=f"^({'|'.join(FORMATS)})$")] = "auto",
    collection: Annotated[str, Query(min_length=1, max_length=100)] = "imports",
    name: Annotated[str, Query(min_length=1, max_length=300)] = "upload",
    document_date: DateQuery = None,
    scope: Scope = Depends(current_scope),
) -> dict:
    """The file is the request body: any format ``hearth import`` reads (a ChatGPT or Claude
    export, labelled text, a Hearth export, ...), imported exactly as the CLI imports it."""
    data = await request.body()

    def run() -> dict:
        report = scope.imports.file(data, name, fmt=format, collection=collection, document_date=document_date)
        if report.status == "refused":
            raise InvalidInput(report.reason)
        return report.to_dict()

    return await run_in_threadpool(run)


@router.post("/api/archive/reindex", response_model=ReindexOut, status_code=202)
def reindex_route(request: Request, scope: Scope = Depends(current_scope)) -> dict:
    """Queue background embedding of whatever has no vector yet (progress: the pending counts)."""
    hearth = get_hearth(request)
    counts = pending_count(hearth.store.connection(), model_id(shared_embedder(hearth)), scope.user_id)
    queued = bool(counts["messages"] or counts["chunks"]) and _queue_embedding(scope)
    return {"pending_messages": counts["messages"], "pending_chunks": counts["chunks"], "queued": queued}


def _queue_embedding(scope: Scope) -> bool:
    scope.jobs.enqueue(EMBED_JOB, {"limit": EMBED_JOB_SLICE}, dedupe_key="embed")
    return True
