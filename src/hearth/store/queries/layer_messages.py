"""The prompt layers' reads of a thread's messages (``messages``): recall tiers, summary
sections, lorebook turn numbers, and whether recall has another conversation to search.

Whole message rows come back as dicts of their columns (the ledger's ``Message.from_row`` reads
them); the summary's sections as ``SectionTurn``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from hearth.store import Connection
from hearth.store.queries.ledger import Message


@dataclass(frozen=True)
class SectionTurn:
    """One chat turn of a summary's section."""

    id: int
    role: str
    content: str


def chat_turns(conn: Connection, conversation_id: int, *, before_id: int | None = None,
               newest: int | None = None) -> list[Message]:
    """The thread's user and assistant chat turns in order; only the ``newest`` ones when given
    (read newest first, so no more are read)."""
    sql = ("SELECT * FROM messages WHERE conversation_id = ? AND kind = 'chat' AND role IN ('user', 'assistant')")
    args: list[Any] = [conversation_id]
    if before_id is not None:
        sql += " AND id < ?"
        args.append(before_id)
    if newest is None:
        return [Message.from_row(r) for r in conn.execute(sql + " ORDER BY id", args)]
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, newest)).fetchall()
    return [Message.from_row(r) for r in reversed(rows)]


def newest_user_turn(conn: Connection, conversation_id: int) -> int | None:
    """The id of the thread's newest user chat message."""
    row = conn.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND role = 'user' AND kind = 'chat'"
        " ORDER BY id DESC LIMIT 1", (conversation_id,)).fetchone()
    return row[0] if row else None


def user_turn_count(conn: Connection, conversation_id: int, up_to: int | None = None) -> int:
    """User chat turns in the thread, up to and including message ``up_to`` when given."""
    sql = "SELECT count(*) FROM messages WHERE conversation_id = ? AND role = 'user' AND kind = 'chat'"
    args: list[Any] = [conversation_id]
    if up_to is not None:
        sql += " AND id <= ?"
        args.append(up_to)
    return conn.execute(sql, args).fetchone()[0]


def section_after(conn: Connection, conversation_id: int, after_id: int, limit: int) -> list[SectionTurn]:
    """The newest ``limit`` chat turns after ``after_id``, in thread order."""
    rows = conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?", (conversation_id, after_id, limit),
    ).fetchall()
    rows.reverse()
    return [SectionTurn(r[0], r[1], r[2]) for r in rows]


def section_between(conn: Connection, conversation_id: int, first_id: int, last_id: int) -> list[SectionTurn]:
    """The chat turns from ``first_id`` to ``last_id`` as they are now, in thread order."""
    return [SectionTurn(r[0], r[1], r[2]) for r in conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id >= ? AND id <= ?"
        " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id",
        (conversation_id, first_id, last_id))]


def other_conversation_has_turns(conn: Connection, user_id: int, persona_id: int, exclude: Sequence[int], *,
                                 eligible: str, chat_turn: str) -> bool:
    """Whether another conversation of the persona, outside ``exclude``, holds a turn. ``eligible``
    is the condition on ``c`` that makes a conversation eligible for recall, ``chat_turn`` the one
    on ``m`` that makes a message a chat turn (their areas define them)."""
    outside = f" AND c.id NOT IN ({','.join('?' * len(exclude))})" if exclude else ""
    row = conn.execute(
        f"SELECT 1 FROM conversations c WHERE c.user_id = ? AND c.persona_id = ? AND {eligible}{outside}"
        f" AND EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND {chat_turn})"
        " ORDER BY c.updated_at DESC LIMIT 1",
        (user_id, persona_id, *exclude)).fetchone()
    return row is not None
