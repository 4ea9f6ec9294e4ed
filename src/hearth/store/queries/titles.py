"""Statements of a thread's title (W4): the automatic title after the first exchange and the
model's title that replaces it."""

from __future__ import annotations

from hearth.store.engine import Connection


def get(conn: Connection, conversation_id: int) -> str:
    return conn.execute("SELECT title FROM conversations WHERE id = ?", (conversation_id,)).fetchone()[0]


def set_automatic(conn: Connection, conversation_id: int, title: str, now: str) -> None:
    """The offline title, with the thread's ``updated_at``."""
    conn.execute("UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?", (title, now, conversation_id))


def of_user(conn: Connection, user_id: int, conversation_id: int) -> str | None:
    """The title of the user's conversation; None when it is gone (or another user's)."""
    row = conn.execute("SELECT title FROM conversations WHERE id = ? AND user_id = ?",
                       (conversation_id, user_id)).fetchone()
    return None if row is None else row[0]


def set_from_model(conn: Connection, conversation_id: int, title: str) -> None:
    conn.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
