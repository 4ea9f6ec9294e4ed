"""Backup and export from the web UI (W7): the caller's full Hearth export as a download, and a
verified online backup of the database (owner only, with a password set)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel

from hearth.interop.export import export_user
from hearth.ops.backup import backup
from hearth.scope import Scope

from .auth import current_scope, get_hearth, require_owner_with_password

router = APIRouter(tags=["maintenance"])


class BackupOut(BaseModel):
    file: str
    bytes: int
    sha256: str
    created_at: str


@router.get("/api/exports/hearth", response_class=Response,
            responses={200: {"content": {"application/json": {}}, "description": "The caller's full export"}})
def export_hearth(request: Request, scope: Scope = Depends(current_scope)) -> Response:
    """Everything of the caller's, as the Hearth export that ``hearth import`` restores (one user only)."""
    body = json.dumps(export_user(get_hearth(request).store, scope.user_id), ensure_ascii=False).encode()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Response(body, media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="hearth-export-{stamp}.json"', "Cache-Control": "no-store"})


@router.post("/api/maintenance/backup", response_model=BackupOut, status_code=201)
def make_backup(request: Request, scope: Scope = Depends(require_owner_with_password)) -> dict:
    """A verified copy of the whole database into ``backups/`` under the Hearth home (S4)."""
    hearth = get_hearth(request)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    report = backup(hearth.store, hearth.settings.home / "backups" / f"hearth-{stamp}.db")
    return {"file": report.path.rsplit("/", 1)[-1], "bytes": report.bytes, "sha256": report.sha256,
            "created_at": report.created_at}
