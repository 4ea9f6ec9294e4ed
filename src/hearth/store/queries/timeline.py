"""The relationship timeline's reads of the ledger (E2, E4, E7, E8): pages of a user's events,
the turns a span holds, a conversation's context figures and what resuming shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store.engine import Connection

_SELECT = ("SELECT e.id, e.conversation_id, e.kind, e.channel, e.created_at, e.payload, e.span_id,"
           " m.role AS m_role, m.kind AS m_kind, m.content AS m_content"
           " FROM events e LEFT JOIN messages m ON m.id = e.id AND e.kind = 'message'")


# The HTTP API answers with this record as it is (one definition per record); the attribute
# docstrings are its field descriptions in the OpenAPI description.
@dataclass(slots=True)  # not frozen: a page builds hundreds of these, and frozen init is slower
class TimelineEvent:
    __pydantic_config__ = {"use_attribute_docstrings": True}

    id: int
    conversation_id: int | None
    kind: str
    channel: str
    created_at: str
    payload: dict[str, Any]
    span_id: int | None
    message: dict[str, Any] | None = None
    """role and kind of a message event; text for visible turns"""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "conversation_id": self.conversation_id, "kind": self.kind, "channel": self.channel,
                "created_at": self.created_at, "payload": self.payload, "span_id": self.span_id,
                "message": self.message}


@dataclass(frozen=True)
class SpanTurn:
    """A chat turn a span holds, in its conversation."""

    conversation_id: int
    id: int
    role: str
    content: str


def _events(rows: list) -> list[TimelineEvent]:
    # One JSON parse for the whole page instead of one per event: most of a page's cost.
    payloads = json.loads("[" + ",".join(r[5] for r in rows) + "]")
    out = []
    for (event_id, conversation_id, kind, channel, created_at, _p, span_id, role, m_kind, content), payload \
            in zip(rows, payloads):
        message = None
        if role is not None:
            message = {"role": role, "kind": m_kind}
            if m_kind in ("chat", "handoff_artifact"):  # stored prompts and tool results are not shown
                message["content"] = content
        out.append(TimelineEvent(event_id, conversation_id, kind, channel, created_at, payload, span_id, message))
    return out


def is_event_of(conn: Connection, user_id: int, event_id: int, created_at: str) -> bool:
    """Whether this user has an event with this id and timestamp."""
    return conn.execute("SELECT 1 FROM events WHERE id = ? AND user_id = ? AND created_at = ?",
                        (event_id, user_id, created_at)).fetchone() is not None


def newest(conn: Connection, user_id: int, limit: int, *,
           before: tuple[str, int] | None = None) -> list[TimelineEvent]:
    """The newest ``limit`` events (before the (timestamp, event id) ``before``), newest first."""
    if before is not None:
        rows = conn.execute(_SELECT + " WHERE e.user_id = ? AND (e.created_at, e.id) < (?, ?)"
                            " ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
                            (user_id, *before, limit)).fetchall()
    else:
        rows = conn.execute(_SELECT + " WHERE e.user_id = ? ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
                            (user_id, limit)).fetchall()
    return _events(rows)


def between(conn: Connection, user_id: int, older_than: tuple[str, int], earliest: tuple[str, int],
            limit: int) -> list[TimelineEvent]:
    """Events before ``older_than`` back to ``earliest`` included, newest first, at most ``limit``."""
    return _events(conn.execute(
        _SELECT + " WHERE e.user_id = ? AND (e.created_at, e.id) < (?, ?) AND (e.created_at, e.id) >= (?, ?)"
        " ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
        (user_id, *older_than, *earliest, limit)).fetchall())


def has_older(conn: Connection, user_id: int, created_at: str, event_id: int) -> bool:
    return conn.execute("SELECT 1 FROM events WHERE user_id = ? AND (created_at, id) < (?, ?) LIMIT 1",
                        (user_id, created_at, event_id)).fetchone() is not None


def newest_event_at(conn: Connection, user_id: int) -> str:
    """The timestamp of a user's newest event, ``""`` when there is none."""
    row = conn.execute("SELECT max(created_at) FROM events WHERE user_id = ?", (user_id,)).fetchone()
    return row[0] or ""


def unread_span_turns(conn: Connection, user_id: int, span_id: int, layer: str, limit: int) -> list[SpanTurn]:
    """Chat turns of a span after its conversation's ``layer`` cursor, oldest first, at most ``limit``."""
    return [SpanTurn(r[0], r[1], r[2], r[3]) for r in conn.execute(
        "SELECT m.conversation_id, m.id, m.role, m.content FROM events e JOIN messages m ON m.id = e.id"
        " WHERE e.user_id = ? AND e.span_id = ? AND e.kind = 'message' AND m.kind = 'chat'"
        " AND m.role IN ('user', 'assistant')"
        " AND m.id > coalesce((SELECT message_id FROM layer_cursors c WHERE c.conversation_id = m.conversation_id"
        "                      AND c.layer = ?), 0)"
        " ORDER BY m.id LIMIT ?", (user_id, span_id, layer, limit),
    ).fetchall()]


def chat_turns_since(conn: Connection, conversation_id: int, after_id: int) -> int:
    """How many chat turns a conversation has after ``after_id``."""
    return conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
                        " AND role IN ('user', 'assistant')", (conversation_id, after_id)).fetchone()[0]


def latest_usage(conn: Connection, conversation_id: int) -> str | None:
    """The payload (JSON text) of a conversation's newest ``context.usage`` event."""
    row = conn.execute("SELECT payload FROM events WHERE conversation_id = ? AND kind = 'context.usage'"
                       " ORDER BY created_at DESC, id DESC LIMIT 1", (conversation_id,)).fetchone()
    return row[0] if row else None


def last_compaction_at(conn: Connection, conversation_id: int) -> str | None:
    return conn.execute(
        "SELECT max(created_at) FROM events WHERE conversation_id = ? AND kind = 'context.compacted'",
        (conversation_id,)).fetchone()[0]


def resumable_conversation(conn: Connection, user_id: int) -> int | None:
    """The most recently active open conversation of a user, not trashed."""
    row = conn.execute(
        "SELECT id FROM conversations WHERE user_id = ? AND state = 'open' AND trashed_at IS NULL"
        " ORDER BY updated_at DESC, id DESC LIMIT 1", (user_id,)).fetchone()
    return row[0] if row else None


def newest_turns(conn: Connection, conversation_id: int, limit: int) -> list[tuple[int, str, str, str, str]]:
    """(id, role, kind, content, created_at) of a conversation's newest visible turns, newest first."""
    return [(r[0], r[1], r[2], r[3], r[4]) for r in conn.execute(
        "SELECT id, role, kind, content, created_at FROM messages WHERE conversation_id = ?"
        " AND role IN ('user', 'assistant') AND kind IN ('chat', 'handoff_artifact') ORDER BY id DESC LIMIT ?",
        (conversation_id, limit)).fetchall()]
