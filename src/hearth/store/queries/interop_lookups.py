"""What imports, exports and chat clients read of the thread's own tables (``messages``,
``conversations``, ``personas``)."""

from __future__ import annotations

from hearth.store import Connection, engine_of


def conversation_owned(conn: Connection, conversation_id: int, user_id: int) -> bool:
    return conn.execute("SELECT 1 FROM conversations WHERE id = ? AND user_id = ?",
                        (conversation_id, user_id)).fetchone() is not None


def chat_turns(conn: Connection, user_id: int, conversation_id: int) -> list[tuple[int, str, str, str, str]]:
    """(id, role, text, channel, created_at) of the thread's visible turns, in order."""
    rows = conn.execute(
        "SELECT id, role, content, channel, created_at FROM messages WHERE conversation_id = ? AND user_id = ?"
        " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id", (conversation_id, user_id)).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def first_reply(conn: Connection, conversation_id: int) -> str | None:
    """The text of the thread's first assistant turn that is not a greeting."""
    row = conn.execute("SELECT content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                       f" AND role = 'assistant' AND {engine_of(conn).json_get('metadata', 'greeting')} IS NULL"
                       " ORDER BY id LIMIT 1", (conversation_id,)).fetchone()
    return row[0] if row else None


def first_user_turns(conn: Connection, conversation_id: int, limit: int) -> list[str]:
    rows = conn.execute("SELECT content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                        " AND role = 'user' ORDER BY id LIMIT ?", (conversation_id, limit)).fetchall()
    return [r[0] for r in rows]


def last_user_turn(conn: Connection, conversation_id: int) -> tuple[int, str] | None:
    """(id, text) of the thread's newest user turn."""
    row = conn.execute("SELECT id, content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                       " AND role = 'user' ORDER BY id DESC LIMIT 1", (conversation_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def last_reply_after(conn: Connection, conversation_id: int, after: int) -> str | None:
    """The text of the thread's newest assistant turn after message ``after``."""
    row = conn.execute("SELECT content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                       " AND role = 'assistant' AND id > ? ORDER BY id DESC LIMIT 1",
                       (conversation_id, after)).fetchone()
    return row[0] if row else None
