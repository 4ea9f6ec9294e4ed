"""Ops: the durable job queue, schema versions, deployment state."""

from __future__ import annotations

from ..engine import Connection
from ..sqlite import engine_of
from .base import THREADS, Doomed, Entry, Exempt, Kept, Plain, Step, Stored, marks

AREA = "ops"


def _jobs(conn: Connection, d: Doomed) -> int:
    """Jobs waiting on a forgotten thread (or given up on) go with it; one running finds it gone."""
    if d.conversations:
        conn.execute(f"DELETE FROM jobs WHERE user_id = ? AND status IN ('pending', 'dead')"
                     f" AND {engine_of(conn).json_int('payload', 'conversation_id')} IN ({marks(d.conversations)})",
                     (d.user_id, *d.conversations))
    return 0


STORED: list[Entry] = [
    # A job's payload names rows by id and its error carries numbers, never conversation text.
    Stored("jobs", AREA, ("payload", "last_error"),
           plain=(Plain("a job's kind, dedupe key and status", "kind", "dedupe_key", "status"),
                  Plain("timestamps", "run_after", "lease_until")),
           on_conversation=Step(THREADS, "delete", _jobs),
           on_message=Kept("a job names its turns by id; run after the turn is gone, it finds nothing to do")),
    Exempt("schema_migrations", AREA, (Plain("a migration's name", "name"),)),
    Exempt("app_state", AREA, (Plain("deployment state: a key and its JSON value (claims, versions), no user's"
                                     " content", "key", "value"),)),
]
