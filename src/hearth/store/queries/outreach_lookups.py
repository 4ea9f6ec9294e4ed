"""What outreach (activations, their runs, voice sessions) reads of the thread's own tables
(``personas``, ``conversations``, ``messages``, ``events``)."""

from __future__ import annotations

from hearth.store import Connection, engine_of


def activation_reply(conn: Connection, conversation_id: int, run_id: int) -> int | None:
    """The assistant message an activation run already wrote (its id in the metadata), if any."""
    row = conn.execute("SELECT id FROM messages WHERE conversation_id = ? AND role = 'assistant'"
                       f" AND {engine_of(conn).json_get('metadata', 'activation_run')} = ?",
                       (conversation_id, run_id)).fetchone()
    return row[0] if row else None


def last_user_turn_at(conn: Connection, user_id: int, persona_id: int) -> str | None:
    """When the person last wrote to the persona, on any of their threads."""
    row = conn.execute(
        "SELECT max(m.created_at) FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " WHERE c.user_id = ? AND c.persona_id = ? AND m.role = 'user' AND m.kind = 'chat'",
        (user_id, persona_id)).fetchone()
    return row[0] if row and row[0] else None


def user_turns_after(conn: Connection, user_id: int, persona_id: int, after: int) -> list[tuple[int, int, str]]:
    """(message id, conversation id, text) of the person's turns to the persona after ``after``, 500 at most."""
    rows = conn.execute(
        "SELECT m.id, m.conversation_id, m.content FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " WHERE c.user_id = ? AND c.persona_id = ? AND m.role = 'user' AND m.kind = 'chat' AND m.id > ?"
        " ORDER BY m.id LIMIT 500", (user_id, persona_id, after)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def recent_turns(conn: Connection, conversation_id: int, after: int, limit: int) -> list[tuple[str, str]]:
    """(role, text) of the newest chat turns after message ``after``, newest first."""
    rows = conn.execute(
        "SELECT role, content FROM messages WHERE conversation_id = ? AND kind = 'chat' AND id > ?"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?",
        (conversation_id, after, limit),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def voice_turns_since_start(conn: Connection, conversation_id: int) -> int:
    """Voice messages since the conversation's latest ``voice.started`` event."""
    return int(conn.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND channel = 'voice' AND id > coalesce("
        "(SELECT max(id) FROM events WHERE conversation_id = ? AND kind = 'voice.started'), 0)",
        (conversation_id, conversation_id)).fetchone()[0])
