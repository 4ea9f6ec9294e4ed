"""Statements of ``message_attachments``: the files and images of the person's messages (W14).

Rows come back as dicts of the ``Attachment`` fields: the dataclass stays in
``records/attachments.py`` because it hands an image to the providers, which sit above the store.
"""

from __future__ import annotations

from typing import Any

from hearth.store.connection import utcnow
from hearth.store.engine import Connection

_META = "id, message_id, conversation_id, position, kind, name, media_type, size, created_at"


def insert(conn: Connection, user_id: int, conversation_id: int, message_id: int,
           items: list[tuple[str, str, str, int, str | None, bytes | None]]) -> int:
    """Store a message's attachments, each (kind, name, media_type, size, text, data) in order; their count."""
    now = utcnow()
    for position, (kind, name, media_type, size, text, data) in enumerate(items):
        conn.execute(
            "INSERT INTO message_attachments (user_id, conversation_id, message_id, position, kind, name,"
            " media_type, size, text, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (user_id, conversation_id, message_id, position, kind, name, media_type, size, text, data, now))
    return len(items)


def _rows(conn: Connection, sql: str, args: tuple, content: bool) -> list[dict[str, Any]]:
    columns = _META + (", text, data" if content else "")
    out = []
    for r in conn.execute(f"SELECT {columns} FROM message_attachments WHERE {sql} ORDER BY message_id, position",
                          args):
        data = r[10] if content else None
        out.append({"id": r[0], "message_id": r[1], "conversation_id": r[2], "position": r[3], "kind": r[4],
                    "name": r[5], "media_type": r[6], "size": r[7], "created_at": r[8],
                    "text": r[9] if content else None, "data": bytes(data) if data is not None else None})
    return out


def in_range(conn: Connection, user_id: int, conversation_id: int, first_id: int, last_id: int, *,
             content: bool = False) -> list[dict[str, Any]]:
    """The attachments of a conversation's messages from ``first_id`` to ``last_id``, in order."""
    return _rows(conn, "user_id = ? AND conversation_id = ? AND message_id BETWEEN ? AND ?",
                 (user_id, conversation_id, first_id, last_id), content)


def of_conversation(conn: Connection, user_id: int, conversation_id: int, *,
                    content: bool = False) -> list[dict[str, Any]]:
    return _rows(conn, "user_id = ? AND conversation_id = ?", (user_id, conversation_id), content)


def get(conn: Connection, user_id: int, conversation_id: int, attachment_id: int) -> dict[str, Any] | None:
    """One attachment with its content, or None."""
    rows = _rows(conn, "id = ? AND user_id = ? AND conversation_id = ?", (attachment_id, user_id, conversation_id),
                 True)
    return rows[0] if rows else None


def totals(conn: Connection, user_id: int, conversation_id: int) -> tuple[int, int]:
    """(characters of text files, number of images) of a thread's messages that still exist."""
    row = conn.execute(
        "SELECT coalesce(sum(CASE WHEN kind = 'text' THEN length(text) ELSE 0 END), 0),"
        " coalesce(sum(CASE WHEN kind = 'image' THEN 1 ELSE 0 END), 0) FROM message_attachments a"
        " WHERE a.user_id = ? AND a.conversation_id = ?"
        " AND EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id)", (user_id, conversation_id)).fetchone()
    return int(row[0]), int(row[1])
