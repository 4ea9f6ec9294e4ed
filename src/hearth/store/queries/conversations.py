"""Statements of ``conversations``, ``folders`` and ``conversation_tags`` (C2, C3, C4)."""

from __future__ import annotations

from hearth.store.engine import Connection


def any_for_user(conn: Connection, user_id: int) -> bool:
    """Whether the user has a conversation at all (trashed ones count)."""
    return conn.execute("SELECT 1 FROM conversations WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None
