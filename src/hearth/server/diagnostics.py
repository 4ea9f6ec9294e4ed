"""Operational diagnostics: numbers and fixed names only (R3), for the owner and for monitoring."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from hearth.prompt import reconcile
from hearth.scope import Scope

from .auth import current_scope

router = APIRouter(tags=["diagnostics"])


@router.get("/api/diagnostics")
def diagnostics(request: Request, scope: Scope = Depends(current_scope)) -> dict[str, Any]:
    """Schema version, prompt reconciliation (P7: remaining failures) and job counts."""
    hearth = request.app.state.hearth
    state = reconcile.state(hearth.store.connection())
    return {
        "schema_version": hearth.store.schema_version(),
        "prompt_reconciliation": {
            "completed": "completed_policy_version" in state and not state.get("remaining_failures"),
            "remaining_failures": state.get("remaining_failures", 0),
            "policy_version": state.get("policy_version"),
        },
        "jobs": scope.jobs.counts(),
    }
