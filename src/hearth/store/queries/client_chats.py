"""Which Hearth conversation a chat client's chat was pinned to (``client_chats``)."""

from __future__ import annotations

from hearth.store import Connection


def candidates(conn: Connection, user_id: int, persona_id: int, key: str, limit: int) -> list[int]:
    """Conversation ids pinned under ``key``, newest first."""
    rows = conn.execute(
        "SELECT conversation_id FROM client_chats WHERE user_id = ? AND persona_id = ? AND key = ?"
        " ORDER BY id DESC LIMIT ?", (user_id, persona_id, key, limit)).fetchall()
    return [r[0] for r in rows]


def pin(conn: Connection, user_id: int, persona_id: int, key: str, conversation_id: int, created_at: str) -> None:
    conn.execute("INSERT INTO client_chats (user_id, persona_id, key, conversation_id, created_at)"
                 " VALUES (?, ?, ?, ?, ?)", (user_id, persona_id, key, conversation_id, created_at))
