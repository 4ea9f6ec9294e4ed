"""Import and export routes (X3, X4, S8): one file per request, a report per file.

``POST /api/imports?name=FILE`` takes the file as the raw request body (binary allowed here:
card PNGs, export zips; limited by ``max_import_bytes``). It answers the file's report: 201 when
something was imported, 200 when everything was already there (a duplicate), and a 4xx
``{error, detail, report}`` when the file was refused, with nothing written. A card exported from
one of the user's own personas and changed since answers 409 ``card_exists`` (its report's
``ids.existing`` names the persona) unless ``on_match=update`` (update it in place) or
``on_match=new`` (import it as a new persona) says what to do. With
``Accept: application/x-ndjson`` it streams progress instead: ``{"type": "progress", "done", "total"}``
lines, then one ``{"type": "report", ...}`` line (a refusal is then the report's status).

Exports: ``GET /api/exports/personas/{id}/card`` (a V3 card PNG, or JSON with ``format=json``)
and ``GET /api/exports/lorebook`` (World Info JSON; ``book`` picks one book).
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Annotated, Any, Iterator

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from hearth.interop.imports import FORMATS, ON_MATCH, FileReport
from hearth.scope import Scope

from ..errors import HearthError, InvalidInput
from .auth import current_scope
from .errors import error_body
from .models import IdPath, OptionalIdQuery, responses

router = APIRouter(tags=["imports"])

NDJSON = "application/x-ndjson"
FormatQuery = Annotated[str, Query(pattern="^(" + "|".join(FORMATS) + ")$")]


def _status(report: FileReport) -> int:
    if report.status == "refused" and report.ids.get("existing"):
        return 409  # a changed card of one's own persona: the person chooses update or new
    if report.status == "refused":
        return 413 if "larger than" in report.reason or "more than" in report.reason else 422
    return 200 if report.status == "duplicate" else 201


@router.post("/api/imports", status_code=201)
async def import_route(
    request: Request,
    name: Annotated[str, Query(min_length=1, max_length=300)] = "upload",
    format: FormatQuery = "auto",
    persona_id: OptionalIdQuery = None,
    collection: Annotated[str, Query(min_length=1, max_length=100)] = "imports",
    mine: bool = False,
    on_match: Annotated[str, Query(pattern="^(" + "|".join(ON_MATCH) + ")$",
                                   description="A changed card of one of your personas: ask (409), update, new")] = "ask",
    scope: Scope = Depends(current_scope),
) -> Response:
    """Import one file (the request body); the response is its report."""
    data = await request.body()
    if not data:
        raise InvalidInput("the request body is empty: send the file as the body")
    persona = scope.personas.get(persona_id) if persona_id else None

    def run(progress: Any = None) -> FileReport:
        return scope.imports.file(data, name, fmt=format, persona=persona, collection=collection, mine=mine,
                                  progress=progress, on_match=on_match)

    if NDJSON in request.headers.get("accept", ""):
        return StreamingResponse(_streamed(run), media_type=NDJSON, headers={"Cache-Control": "no-store"})
    report = await run_in_threadpool(run)
    status = _status(report)
    if status >= 400:
        code = "card_exists" if status == 409 else "import_refused"
        return JSONResponse({**error_body(code, report.reason), "report": report.to_dict()}, status_code=status)
    return JSONResponse(report.to_dict(), status_code=status)


def _streamed(run: Any) -> Iterator[bytes]:
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    last = [-1]

    def progress(done: int, total: int) -> None:
        if done != last[0]:
            last[0] = done
            events.put({"type": "progress", "done": done, "total": total})

    def work() -> None:
        try:
            events.put({"type": "report", **run(progress).to_dict()})
        except HearthError as exc:
            events.put({"type": "error", **error_body(exc.code, str(exc))})
        finally:
            events.put(None)

    threading.Thread(target=work, name="hearth-import", daemon=True).start()
    while (event := events.get()) is not None:
        yield (json.dumps(event, separators=(",", ":")) + "\n").encode()


@router.get("/api/exports/personas/{persona_id:int}/card", response_class=Response,
            responses={200: {"content": {"image/png": {}, "application/json": {}}}})
def export_card(persona_id: IdPath, format: Annotated[str, Query(pattern="^(png|json)$")] = "png",
                scope: Scope = Depends(current_scope)) -> Response:
    """A persona as a character card V3: a PNG with ``chara`` and ``ccv3`` chunks, or the JSON."""
    persona = scope.personas.get(persona_id)
    if format == "json":
        return JSONResponse(scope.imports.card_json(persona_id),
                            headers={"Content-Disposition": f'attachment; filename="{persona.name}.json"'})
    return Response(scope.imports.card_png(persona_id), media_type="image/png",
                    headers={"Content-Disposition": f'attachment; filename="{persona.name}.png"'})


@router.get("/api/exports/lorebook", responses=responses(404, s404="No fragments in that book"))
def export_lorebook(book: Annotated[str | None, Query(min_length=1, max_length=60)] = None,
                    scope: Scope = Depends(current_scope)) -> JSONResponse:
    """Fragments as a SillyTavern World Info file: one book (a fragment category) or all."""
    return JSONResponse(scope.imports.lorebook_json(book),
                        headers={"Content-Disposition": 'attachment; filename="lorebook.json"'})
