"""Owner-only removal of retired generated-summary rows (H10, H11).

Older deployments stored model-written summaries in ``conversation_summaries.summary`` and
``recent_raw``. They are kept by default and never injected (only a non-empty ``handoff`` is).
An owner may remove the rows that hold *only* such text, in two steps:

1. :func:`preview` counts the candidates (summary or recent_raw non-empty, handoff empty) and the
   protected handoff rows, with their date range, and returns a scope token: a SHA-256 digest of
   the candidate ids and counts. It never returns continuity text.
2. :func:`delete` needs that token, the acknowledgement that a verified restorable backup exists
   (and a backup verified by :mod:`hearth.ops.backup` that still verifies), and the exact phrase
   ``DELETE RETIRED GENERATED SUMMARIES``. Inside the deleting transaction the scope is computed
   again; if it differs from the token, nothing is removed. The receipt holds only the number
   removed.

Both steps are refused unless an owner password is configured and the acting user is the owner.
The scope is deployment-wide: the owner maintains the whole database, and only counts leave it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hearth.errors import Conflict, Forbidden, HearthError, InvalidInput
from hearth.ops.backup import last_verified, verify_backup
from hearth.records import ledger
from hearth.records.users import Users
from hearth.store import Connection
from hearth.store.queries import retired_summaries

if TYPE_CHECKING:
    from hearth.records.context import Context

CONFIRMATION_PHRASE = "DELETE RETIRED GENERATED SUMMARIES"


@dataclass(frozen=True)
class CleanupPreview:
    """Counts and dates only (H11)."""

    candidates: int
    protected_handoffs: int
    oldest: str | None
    newest: str | None
    token: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CleanupReceipt:
    removed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _require_owner(ctx: "Context") -> None:
    users = Users(ctx.store)
    if not users.password_configured():
        raise Forbidden("continuity cleanup is available only once an owner password is configured")
    if not users.get(ctx.user_id).is_owner:
        raise Forbidden("only the owner can run continuity cleanup")


def _scope(conn: Connection) -> tuple[list[int], int, str | None, str | None]:
    return retired_summaries.scope(conn)


def _token(ids: list[int], protected: int) -> str:
    material = json.dumps({"v": 1, "ids": ids, "candidates": len(ids), "protected": protected},
                          separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest()


def preview(ctx: "Context") -> CleanupPreview:
    """Count-only preview with the scope token the deletion must present."""
    _require_owner(ctx)
    with ctx.store.read() as conn:
        ids, protected, oldest, newest = _scope(conn)
    return CleanupPreview(candidates=len(ids), protected_handoffs=protected, oldest=oldest, newest=newest,
                          token=_token(ids, protected))


def _require_backup(ctx: "Context") -> None:
    record = last_verified(ctx.store)
    if record is None:
        raise Conflict("no verified backup is recorded; run a backup first (hearth backup DEST)")
    try:
        verify_backup(record["path"])
    except HearthError as exc:
        raise Conflict(f"the last verified backup can no longer be verified ({exc}); make a new backup") from None


def delete(ctx: "Context", *, token: str, backup_verified: bool, phrase: str) -> CleanupReceipt:
    """Remove the previewed generated-summary-only rows, or nothing at all (H11)."""
    _require_owner(ctx)
    if phrase != CONFIRMATION_PHRASE:
        raise InvalidInput(f"type the exact phrase {CONFIRMATION_PHRASE!r} to confirm")
    if backup_verified is not True:
        raise InvalidInput("confirm that a verified restorable backup exists before deleting")
    if not isinstance(token, str) or not token:
        raise InvalidInput("the preview's scope token is required")
    _require_backup(ctx)
    with ctx.store.write() as conn:
        ids, protected, _, _ = _scope(conn)
        if not hmac.compare_digest(_token(ids, protected), token):
            raise Conflict("the cleanup scope changed since the preview; nothing was removed. "
                           "Review the new preview and confirm again.")
        # Same write transaction as the check, so the rows matched here are exactly ``ids``; the
        # candidate condition itself keeps every non-empty handoff out of reach.
        removed = retired_summaries.delete(conn)
        ledger.append(conn, user_id=ctx.user_id, kind="maintenance.continuity_cleanup",
                      payload={"removed": removed})
    return CleanupReceipt(removed=removed)
