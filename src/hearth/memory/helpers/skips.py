"""Skipped helper tasks (E13): a task whose answer could not be read is given up, and the ledger says so.

Every helper task fails on its own. ``ModelHelper.answer`` shows an unreadable answer back to the
model once with the reason; a second unreadable answer raises ``HelperOutputError``, and the job
that asked records a ``helper.skipped`` event with ``record`` and carries on with what succeeded
(a checkpoint still writes the other task's results and closes its span). The event holds the
task's fixed name, the error kind and numbers, never the answer or the material. The timeline
shows it as one plain line (``plain``; the web UI's words are in static/labels.js).
"""

from __future__ import annotations

from typing import Any

from hearth.errors import InvalidInput
from hearth.memory.helpers.base import HelperOutputError
from hearth.records import ledger
from hearth.store import Connection

EVENT_KIND = "helper.skipped"

# task name -> the words the timeline uses for what could not be read
TASKS = {
    "memories": "memories",
    "facts": "facts",
    "capsule": "the continuity capsule",
    "summary": "the summary",
    "live_context": "the live context",
    "household": "household changes",
    "fragments": "fragment suggestions",
    "title": "the title",
    "mining": "memories from the import",
}


def payload(task: str, error: HelperOutputError) -> dict[str, Any]:
    if task not in TASKS:
        raise InvalidInput(f"unknown helper task {task!r}")
    return {"task": task, "error": error.kind, "attempts": error.attempts, "chars": error.chars}


def record(conn: Connection, user_id: int, task: str, error: HelperOutputError, *,
           conversation_id: int | None = None, span_id: int | None = None, created_at: str | None = None) -> int:
    """Append the ``helper.skipped`` event in the caller's write transaction."""
    return ledger.append(conn, user_id=user_id, kind=EVENT_KIND, channel="inner", conversation_id=conversation_id,
                         span_id=span_id, created_at=created_at, payload=payload(task, error))


def plain(task: str) -> str:
    """The timeline's line for a skipped task: "facts could not be read this time"."""
    return f"{TASKS.get(task, 'a helper answer')} could not be read this time"
