"""Statements reading a thread's turns (``messages`` of kind chat, with the history's counters on
``conversations``): the history a request carries (T1), the send path's checks, the turns a
review reads."""

from __future__ import annotations

from hearth.store import Connection, engine_of
from hearth.store.queries.ledger import Message

# A history turn: (id, role, kind, content, created_at).
TurnRow = tuple[int, str, str, str, str]

_TURNS = ("SELECT id, role, kind, content, created_at FROM messages WHERE conversation_id = ? AND id > ? AND id < ?"
          " AND role IN ('user', 'assistant') AND kind IN ('chat', 'handoff_artifact')")


# -- the history (T1) --------------------------------------------------------------------------
def history_state(conn: Connection, conversation_id: int) -> tuple[int, int]:
    """(history_rev, turn_count) of a conversation: the revision cached windows are keyed by."""
    rev, total = conn.execute("SELECT history_rev, turn_count FROM conversations WHERE id = ?",
                              (conversation_id,)).fetchone()
    return rev, total


def between(conn: Connection, conversation_id: int, after_id: int, before_id: int) -> list[TurnRow]:
    """The history turns strictly between two ids, oldest first."""
    return [(r[0], r[1], r[2], r[3], r[4])
            for r in conn.execute(_TURNS + " ORDER BY id", (conversation_id, after_id, before_id))]


def newest(conn: Connection, conversation_id: int, after_id: int, before_id: int,
           budget_chars: int) -> tuple[list[TurnRow], int, bool]:
    """The newest history turns between two ids whose text fits ``budget_chars`` (at least one),
    oldest first, with their characters and whether they reach back to ``after_id``. Read newest
    first and stopped at the budget, so a long thread costs only the part that fits."""
    cursor = conn.execute(_TURNS + " ORDER BY id DESC", (conversation_id, after_id, before_id))
    turns: list[TurnRow] = []
    chars = 0
    complete = True
    for row in cursor:
        if turns and chars + len(row[3]) > budget_chars:
            complete = False
            break
        turns.append((row[0], row[1], row[2], row[3], row[4]))
        chars += len(row[3])
    cursor.close()
    turns.reverse()
    return turns, chars, complete


def count_between(conn: Connection, conversation_id: int, after_id: int, before_id: int) -> int:
    return conn.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND id > ? AND id < ?"
        " AND role IN ('user', 'assistant') AND kind IN ('chat', 'handoff_artifact')",
        (conversation_id, after_id, before_id)).fetchone()[0]


def count_from(conn: Connection, conversation_id: int, from_id: int) -> int:
    """History turns from ``from_id`` on (the message being answered and anything newer)."""
    return conn.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND id >= ?"
        " AND role IN ('user', 'assistant') AND kind IN ('chat', 'handoff_artifact')",
        (conversation_id, from_id),
    ).fetchone()[0]


# -- the send path -----------------------------------------------------------------------------
def last_id(conn: Connection, conversation_id: int) -> int:
    """The newest message id of a conversation (of any kind), 0 for none."""
    return conn.execute("SELECT coalesce(max(id), 0) FROM messages WHERE conversation_id = ?",
                        (conversation_id,)).fetchone()[0]


def last(conn: Connection, conversation_id: int) -> Message | None:
    """The newest chat turn of either side."""
    row = conn.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND kind = 'chat' AND role IN ('user', 'assistant')"
        " ORDER BY id DESC LIMIT 1", (conversation_id,),
    ).fetchone()
    return Message.from_row(row) if row is not None else None


def user_turn_before(conn: Connection, conversation_id: int, before_id: int) -> Message | None:
    """The person's newest chat turn before ``before_id``."""
    row = conn.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND kind = 'chat' AND role = 'user' AND id < ?"
        " ORDER BY id DESC LIMIT 1", (conversation_id, before_id)).fetchone()
    return Message.from_row(row) if row is not None else None


def user_turn_before_at(conn: Connection, conversation_id: int, before_id: int) -> str | None:
    """When the person's newest chat turn before ``before_id`` was written."""
    row = conn.execute("SELECT created_at FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                       " AND role = 'user' AND id < ? ORDER BY id DESC LIMIT 1",
                       (conversation_id, before_id)).fetchone()
    return row[0] if row else None


def user_turn(conn: Connection, conversation_id: int, message_id: int) -> Message | None:
    """A chat turn of the person's in this conversation."""
    row = conn.execute("SELECT * FROM messages WHERE id = ? AND conversation_id = ? AND role = 'user'"
                       " AND kind = 'chat'", (message_id, conversation_id)).fetchone()
    return Message.from_row(row) if row is not None else None


def has_reply(conn: Connection, conversation_id: int) -> bool:
    """Whether the companion replied in this thread (a card's greeting is not a reply)."""
    return bool(conn.execute(
        "SELECT 1 FROM messages WHERE conversation_id = ? AND role = 'assistant' AND kind = 'chat'"
        f" AND {engine_of(conn).json_get('metadata', 'greeting')} IS NULL LIMIT 1",
        (conversation_id,),
    ).fetchone())


def answered(conn: Connection, conversation_id: int, user_message_id: int) -> bool:
    """Whether a reply to this user message is stored."""
    return conn.execute(
        "SELECT 1 FROM messages WHERE conversation_id = ? AND id > ? AND role = 'assistant' AND kind = 'chat'"
        f" AND {engine_of(conn).json_get('metadata', 'reply_to')} = ? LIMIT 1",
        (conversation_id, user_message_id, user_message_id)).fetchone() is not None


# -- the review (F3) ---------------------------------------------------------------------------
def recent(conn: Connection, conversation_id: int, after_id: int, limit: int) -> list[tuple[int, str, str]]:
    """(id, role, content) of the newest chat turns after ``after_id``, newest first."""
    return [(r["id"], r["role"], r["content"]) for r in conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?",
        (conversation_id, after_id, limit)).fetchall()]
