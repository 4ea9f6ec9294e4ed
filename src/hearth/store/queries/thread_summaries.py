"""Rolling thread summaries (``thread_summaries``), one row per refresh of a conversation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.store import Connection, inserted_id

OFFLINE_LABEL = "(offline summary)"


@dataclass(frozen=True)
class ThreadSummary:
    id: int
    conversation_id: int
    text: str
    source: str
    through_message_id: int
    section_messages: int
    created_at: str
    invalidated_at: str | None

    @property
    def display(self) -> str:
        """The text for people and the model, offline output labelled as such (G3)."""
        return f"{OFFLINE_LABEL} {self.text}" if self.source == "offline" else self.text

    def to_dict(self) -> dict[str, Any]:
        # Words split on any whitespace, as the helpers' ``word_count`` counts them.
        return {**self.__dict__, "display": self.display, "words": len(self.text.split())}


_SQL = ("SELECT id, conversation_id, text, source, through_message_id, section_messages, created_at,"
        " invalidated_at FROM thread_summaries")


def latest_valid(conn: Connection, conversation_id: int) -> ThreadSummary | None:
    row = conn.execute(_SQL + " WHERE conversation_id = ? AND invalidated_at IS NULL"
                       " ORDER BY through_message_id DESC, id DESC LIMIT 1", (conversation_id,)).fetchone()
    return ThreadSummary(*row) if row else None


def history(conn: Connection, conversation_id: int) -> list[ThreadSummary]:
    """Every summary of the conversation, newest first, invalidated ones included."""
    rows = conn.execute(_SQL + " WHERE conversation_id = ? ORDER BY id DESC", (conversation_id,)).fetchall()
    return [ThreadSummary(*r) for r in rows]


def insert(conn: Connection, user_id: int, conversation_id: int, text: str, source: str, through_message_id: int,
           section_messages: int, created_at: str) -> int:
    cur = conn.execute(
        "INSERT INTO thread_summaries (user_id, conversation_id, text, source, through_message_id,"
        " section_messages, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, conversation_id, text, source, through_message_id, section_messages, created_at))
    return inserted_id(cur)
