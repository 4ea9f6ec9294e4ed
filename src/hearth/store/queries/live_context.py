"""Live context and nudges (LC1, LC2): one ``live_context`` row per thread, its ``nudges``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hearth.store.connection import inserted_id
from hearth.store.engine import Connection
from hearth.store.sqlite import engine_of


@dataclass(frozen=True)
class Nudge:
    id: int
    conversation_id: int
    text: str
    marker: str
    source: str
    status: str
    created_at: str
    used_at: str | None
    used_message_id: int | None

    @property
    def token(self) -> str:
        return f"[n:{self.marker}]"

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "token": self.token}


@dataclass(frozen=True)
class LiveState:
    conversation_id: int
    mood: str
    events: str
    needs: str
    summary: str
    source: str
    through_message_id: int
    updated_at: str
    nudges: tuple[Nudge, ...] = field(default=())

    @property
    def display_summary(self) -> str:
        """The side-panel line, offline output labelled as such (G3)."""
        return f"(offline) {self.summary}" if self.source == "offline" and self.summary else self.summary

    def to_dict(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "mood": self.mood, "events": self.events,
                "needs": self.needs, "summary": self.summary, "display_summary": self.display_summary,
                "source": self.source, "through_message_id": self.through_message_id,
                "updated_at": self.updated_at, "nudges": [n.to_dict() for n in self.nudges]}


_NUDGE_SQL = ("SELECT id, conversation_id, text, marker, source, status, created_at, used_at, used_message_id"
              " FROM nudges")


# --- the live context row -------------------------------------------------------------------------

def get(conn: Connection, conversation_id: int) -> LiveState | None:
    """A thread's live context row, without its nudges."""
    row = conn.execute("SELECT conversation_id, mood, events, needs, summary, source, through_message_id,"
                       " updated_at FROM live_context WHERE conversation_id = ?", (conversation_id,)).fetchone()
    return LiveState(*row) if row is not None else None


def through_message_id(conn: Connection, conversation_id: int) -> int | None:
    """The last message the thread's live context has read; None when it has none."""
    row = conn.execute("SELECT through_message_id FROM live_context WHERE conversation_id = ?",
                       (conversation_id,)).fetchone()
    return row[0] if row else None


def read_up_to(conn: Connection, conversation_id: int) -> tuple[int, str] | None:
    """(last message read, when) of the thread's live context; None when it has none."""
    row = conn.execute("SELECT through_message_id, updated_at FROM live_context WHERE conversation_id = ?",
                       (conversation_id,)).fetchone()
    return (row[0], row[1]) if row is not None else None


def save(conn: Connection, conversation_id: int, user_id: int, values: dict[str, str], source: str, through: int,
         updated_at: str) -> None:
    """Write the thread's live context (``values``: mood, events, needs and summary)."""
    conn.execute(
        "INSERT INTO live_context (conversation_id, user_id, mood, events, needs, summary, source,"
        " through_message_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE SET mood = excluded.mood, events = excluded.events,"
        " needs = excluded.needs, summary = excluded.summary, source = excluded.source,"
        " through_message_id = excluded.through_message_id, updated_at = excluded.updated_at",
        (conversation_id, user_id, values["mood"], values["events"], values["needs"], values["summary"],
         source, through, updated_at))


# --- nudges ---------------------------------------------------------------------------------------

def nudges(conn: Connection, conversation_id: int, status: str | None = "open") -> tuple[Nudge, ...]:
    """A thread's nudges with this status (any when None), oldest first."""
    sql = _NUDGE_SQL + " WHERE conversation_id = ?"
    args: list[Any] = [conversation_id]
    if status:
        sql += " AND status = ?"
        args.append(status)
    return tuple(Nudge(*r) for r in conn.execute(sql + " ORDER BY id", args))


def nudge(conn: Connection, nudge_id: int) -> Nudge | None:
    row = conn.execute(_NUDGE_SQL + " WHERE id = ?", (nudge_id,)).fetchone()
    return Nudge(*row) if row is not None else None


def nudge_texts(conn: Connection, conversation_id: int) -> list[str]:
    """The text of every nudge ever offered in a thread."""
    return [row[0] for row in conn.execute("SELECT text FROM nudges WHERE conversation_id = ?", (conversation_id,))]


def marker_taken(conn: Connection, conversation_id: int, marker: str) -> bool:
    return conn.execute("SELECT 1 FROM nudges WHERE conversation_id = ? AND marker = ?",
                        (conversation_id, marker)).fetchone() is not None


def insert_nudge(conn: Connection, user_id: int, conversation_id: int, text: str, marker: str, source: str,
                 created_at: str) -> int:
    cur = conn.execute(
        "INSERT INTO nudges (user_id, conversation_id, text, marker, source, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " RETURNING id",
        (user_id, conversation_id, text, marker, source, created_at))
    return inserted_id(cur)


def drop_open_nudge(conn: Connection, user_id: int, conversation_id: int, nudge_id: int) -> bool:
    """Drop one of the thread's open nudges; False when there is no such open nudge."""
    cur = conn.execute("UPDATE nudges SET status = 'dropped' WHERE id = ? AND conversation_id = ?"
                       " AND user_id = ? AND status = 'open'", (nudge_id, conversation_id, user_id))
    return cur.rowcount != 0


def open_nudge_ids(conn: Connection, conversation_id: int) -> list[int]:
    """The thread's open nudges, newest first."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM nudges WHERE conversation_id = ? AND status = 'open' ORDER BY id DESC",
        (conversation_id,))]


def drop_nudge(conn: Connection, nudge_id: int) -> None:
    conn.execute("UPDATE nudges SET status = 'dropped' WHERE id = ?", (nudge_id,))


def set_used(conn: Connection, nudge_id: int, used_at: str, message_id: int) -> None:
    conn.execute("UPDATE nudges SET status = 'used', used_at = ?, used_message_id = ? WHERE id = ?",
                 (used_at, message_id, nudge_id))


# --- the thread's messages ------------------------------------------------------------------------

def latest_chat_id(conn: Connection, conversation_id: int) -> int:
    """The thread's newest chat message id, 0 when it has none."""
    row = conn.execute("SELECT max(id) FROM messages WHERE conversation_id = ? AND kind = 'chat'",
                       (conversation_id,)).fetchone()
    return row[0] or 0


def recent_turns(conn: Connection, conversation_id: int, limit: int) -> list[tuple[int, str, str]]:
    """(id, role, content) of the thread's newest chat turns, newest first."""
    return [(r["id"], r["role"], r["content"]) for r in conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?", (conversation_id, limit),
    ).fetchall()]


def strip_reply(conn: Connection, message_id: int, content: str, nudges_used: str) -> None:
    """A reply's text without its echoed markers, and the nudges it used (JSON text) in its metadata."""
    conn.execute(f"UPDATE messages SET content = ?, metadata = {engine_of(conn).json_set('metadata', 'nudges_used')}"
                 " WHERE id = ?", (content, nudges_used, message_id))
