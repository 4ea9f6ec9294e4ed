"""Continuity capsules (E3): the ``capsules`` rows and the turns a capsule is written from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.store.engine import Connection, Engine, Row
from hearth.store.migrations import TURN_VERSION_EVENTS
from hearth.store.sqlite import engine_of

HEADING = "=== CONTINUITY CAPSULE ==="
NOTE = ("Internal continuity notes about this relationship, written from earlier turns ({source}). They are "
        "reference, not a message from anyone; the turns after them are verbatim and newer.")


@dataclass(frozen=True)
class Capsule:
    id: int
    conversation_id: int
    text: str
    source: str
    through_message_id: int
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> "Capsule":
        return cls(row["id"], row["conversation_id"], row["text"], row["source"], row["through_message_id"],
                   row["created_at"])

    def render(self) -> str:
        source = "model-written" if self.source == "model" else "offline extractive"
        return f"{HEADING}\n{NOTE.format(source=source)}\n{self.text}"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CapsuleTurn:
    """A chat turn a capsule is written from."""

    id: int
    role: str
    content: str
    channel: str


def latest_sql(engine: Engine) -> str:
    """The newest capsule still current: its last turn is in the thread and no turn it covers took
    another version since it was written (the partial index of migration 18 answers the second)."""
    return ("SELECT * FROM capsules c WHERE c.conversation_id = ?"
            " AND EXISTS (SELECT 1 FROM messages m WHERE m.id = c.through_message_id)"
            " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.conversation_id = c.conversation_id AND e.id > c.id"
            f"  AND e.kind IN {TURN_VERSION_EVENTS}"
            f"  AND {engine.json_int('e.payload', 'message_id')} <= c.through_message_id)"
            " ORDER BY c.id DESC LIMIT 1")


def latest(conn: Connection, conversation_id: int) -> Capsule | None:
    """The newest capsule that still describes the thread: its last turn is in the thread and no
    turn it covers took another version since it was written (W2); an older one serves otherwise."""
    row = conn.execute(latest_sql(engine_of(conn)), (conversation_id,)).fetchone()
    return Capsule.from_row(row) if row else None


def boundary(conn: Connection, conversation_id: int, recent: int) -> int:
    """The newest chat turn before the newest ``recent`` ones (0 when there is none): the last turn
    a capsule covers."""
    row = conn.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND kind = 'chat' AND role IN ('user', 'assistant')"
        " ORDER BY id DESC LIMIT 1 OFFSET ?", (conversation_id, recent)).fetchone()
    return row[0] if row else 0


def turns_between(conn: Connection, conversation_id: int, since: int, through: int, limit: int) -> list[CapsuleTurn]:
    """The chat turns after ``since`` up to ``through``, newest first, at most ``limit``."""
    return [CapsuleTurn(r["id"], r["role"], r["content"], r["channel"]) for r in conn.execute(
        "SELECT id, role, content, channel FROM messages WHERE conversation_id = ? AND id > ? AND id <= ?"
        " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?",
        (conversation_id, since, through, limit)).fetchall()]


def insert(conn: Connection, event_id: int, user_id: int, conversation_id: int, text: str, source: str,
           through_message_id: int, created_at: str) -> None:
    """A capsule's text, under the id of its ``context.capsule`` event."""
    conn.execute("INSERT INTO capsules (id, user_id, conversation_id, text, source, through_message_id, created_at)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (event_id, user_id, conversation_id, text, source, through_message_id, created_at))
