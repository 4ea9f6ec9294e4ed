"""What came in and went out on a messaging channel (``channel_messages``)."""

from __future__ import annotations

from hearth.store import Connection


def seen_inbound(conn: Connection, channel: str, external_id: str) -> tuple[int, int] | None:
    """(conversation id, message id) of an inbound message already received under this external id."""
    row = conn.execute(
        "SELECT conversation_id, message_id FROM channel_messages"
        " WHERE channel = ? AND direction = 'in' AND external_id = ?", (channel, external_id),
    ).fetchone()
    return None if row is None else (row[0], row[1])


def record_inbound(conn: Connection, user_id: int, channel: str, external_id: str, conversation_id: int,
                   message_id: int, contact_id: int, created_at: str) -> None:
    conn.execute(
        "INSERT INTO channel_messages (user_id, channel, direction, external_id, conversation_id,"
        " message_id, contact_id, status, created_at) VALUES (?, ?, 'in', ?, ?, ?, ?, 'received', ?)",
        (user_id, channel, external_id, conversation_id, message_id, contact_id, created_at),
    )


def latest_inbound(conn: Connection, user_id: int, conversation_id: int, channel: str) -> tuple[int, int] | None:
    """(message id, contact id) of the thread's newest inbound message on ``channel``."""
    row = conn.execute(
        "SELECT message_id, contact_id FROM channel_messages WHERE user_id = ? AND conversation_id = ?"
        " AND channel = ? AND direction = 'in' ORDER BY id DESC LIMIT 1", (user_id, conversation_id, channel),
    ).fetchone()
    return None if row is None else (row["message_id"], row["contact_id"])


def sent_parts(conn: Connection, channel: str, reply_id: int) -> set[str]:
    """External ids of the parts of a reply already delivered."""
    return {r[0] for r in conn.execute(
        "SELECT external_id FROM channel_messages WHERE channel = ? AND direction = 'out' AND message_id = ?",
        (channel, reply_id))}


def record_sent(conn: Connection, user_id: int, channel: str, external_id: str, conversation_id: int,
                message_id: int, contact_id: int, provider_ref: str, created_at: str) -> None:
    conn.execute(
        "INSERT INTO channel_messages (user_id, channel, direction, external_id, conversation_id, message_id,"
        " contact_id, provider_ref, status, created_at) VALUES (?, ?, 'out', ?, ?, ?, ?, ?, 'sent', ?)",
        (user_id, channel, external_id, conversation_id, message_id, contact_id, provider_ref, created_at),
    )
