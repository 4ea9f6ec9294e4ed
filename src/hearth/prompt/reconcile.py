"""Legacy reconciliation (P7, M6): bring dormant stored prompts up to the current policy.

Prompts built under an older prompt-policy version are rebuilt in bounded batches, each batch its
own short write transaction so a send is never held up for long. A candidate that fails is
retried; completion is recorded durably only when every candidate succeeded, so a later start can
skip the scan, and the remaining failure count is kept for diagnostics. The server runs this in a
background thread once its port is open; a legacy prompt met on a send is rebuilt before use
anyway (``prompt.stored.ensure``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable

from hearth.errors import ConstraintError, StoreError
from hearth.memory.memories import backfill
from hearth.prompt import stored
from hearth.prompt.static import POLICY_VERSION
from hearth.store import Connection, DriverError, utcnow
from hearth.store import state as app_state
from hearth.store.queries import stored_prompts

if TYPE_CHECKING:
    from hearth.records.context import Context, Deployment

log = logging.getLogger(__name__)

STATE_KEY = "prompt_reconciliation"
BATCH_SIZE = 50
MAX_ATTEMPTS = 3

# Rebuild one conversation's prompt in the caller's transaction: (conn, user_id, conversation_id).
RebuildOne = Callable[[Connection, int, int], None]


@dataclass(frozen=True)
class ReconcileResult:
    candidates: int
    rebuilt: int
    failed: int
    backfilled: int
    completed: bool

    def to_dict(self) -> dict:
        return asdict(self)


def candidates(conn: Connection) -> list[tuple[int, int]]:
    """(user_id, conversation_id) of every stored prompt built under an older policy."""
    return stored_prompts.older_than(conn, POLICY_VERSION)


def state(conn: Connection) -> dict:
    return app_state.get(conn, STATE_KEY, {})


def _save_state(conn: Connection, value: dict) -> None:
    app_state.put(conn, STATE_KEY, value)


def reconcile(hearth: "Deployment", *, batch_size: int = BATCH_SIZE, max_attempts: int = MAX_ATTEMPTS,
              rebuild_one: RebuildOne | None = None) -> ReconcileResult:
    store = hearth.store
    conn = store.connection()
    if state(conn).get("completed_policy_version") == POLICY_VERSION:
        return ReconcileResult(0, 0, 0, 0, True)
    with store.write() as w:
        users = stored_prompts.user_ids(w)
        backfilled = sum(backfill(w, user_id) for user_id in users)

    if rebuild_one is None:
        contexts: dict[int, Context] = {}

        def rebuild_one(c: Connection, user_id: int, conversation_id: int) -> None:
            ctx = contexts.setdefault(user_id, hearth.context(user_id))
            stored.rebuild(c, user_id, [conversation_id], ctx.handoff_text)

    pending = candidates(conn)
    total, rebuilt = len(pending), 0
    for attempt in range(1, max_attempts + 1):
        failures: list[tuple[int, int]] = []
        for start in range(0, len(pending), batch_size):
            for user_id, conversation_id in pending[start:start + batch_size]:
                try:
                    with store.write() as w:
                        rebuild_one(w, user_id, conversation_id)
                    rebuilt += 1
                except (StoreError, ConstraintError, DriverError, ValueError, KeyError) as exc:
                    log.warning("prompt reconciliation failed for conversation %d (attempt %d): %s",
                                conversation_id, attempt, type(exc).__name__)
                    failures.append((user_id, conversation_id))
        pending = failures
        if not pending:
            break
    completed = not pending
    with store.write() as w:
        value = {"remaining_failures": len(pending), "checked_at": utcnow(), "policy_version": POLICY_VERSION}
        if completed:
            value["completed_policy_version"] = POLICY_VERSION
        _save_state(w, value)
    return ReconcileResult(total, rebuilt, len(pending), backfilled, completed)
