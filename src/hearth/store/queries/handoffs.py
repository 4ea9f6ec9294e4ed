"""Cross-thread continuity (H1-H10): handoff records (``conversation_summaries``), branch retry keys
(``branch_requests``) and the turns, labels and conversations a handoff is rendered from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from hearth.store.engine import Connection
from hearth.store.queries.conversations import ELIGIBLE_SQL
from hearth.store.sqlite import engine_of

T = TypeVar("T")


@dataclass(frozen=True)
class SourceMessage:
    """One stored message of the source conversation, as plain data (a handoff may quote it)."""

    id: int
    role: str
    kind: str
    content: str
    created_at: str


@dataclass(frozen=True)
class DocumentTurn:
    """A turn of an imported archive document a handoff may quote."""

    id: int
    role: str
    text: str
    created_at: str | None


@dataclass(frozen=True)
class HandoffSource:
    """Where a conversation's handoff came from and the ids of the turns it quotes."""

    source_conversation_id: int | None
    source_document_id: int | None
    source_message_ids: str  # JSON text, as stored


@dataclass(frozen=True)
class HandoffRecord:
    """A handoff record from a conversation, in the conversation it was handed to."""

    id: int
    conversation_id: int
    source_conversation_id: int | None
    source_message_ids: str  # JSON text, as stored


@dataclass(frozen=True)
class BranchRequest:
    destination_conversation_id: int
    source_conversation_id: int | None
    source_document_id: int | None


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def _first_kept(rows: Iterable[T], keep: Callable[[T], bool], count: int) -> list[T]:
    """The first ``count`` rows ``keep`` accepts, in reverse (oldest first for a newest-first read)."""
    chosen: list[T] = []
    for row in rows:
        if keep(row):
            chosen.append(row)
            if len(chosen) == count:
                break
    chosen.reverse()
    return chosen


# --- conversations and personas -------------------------------------------------------------------

def is_eligible(conn: Connection, user_id: int, conversation_id: int) -> bool:
    """Whether the conversation may feed automatic continuity now (V1, V2)."""
    return conn.execute(
        f"SELECT c.* FROM conversations c WHERE c.id = ? AND c.user_id = ? AND {ELIGIBLE_SQL}",
        (conversation_id, user_id),
    ).fetchone() is not None


def most_recent_eligible(conn: Connection, user_id: int, persona_id: int) -> int | None:
    """The most recently updated eligible conversation of the persona with a chat turn that is not a
    card's greeting."""
    row = conn.execute(
        f"SELECT c.id FROM conversations c WHERE c.user_id = ? AND c.persona_id = ? AND {ELIGIBLE_SQL}"
        " AND EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.kind = 'chat'"
        " AND m.role IN ('user', 'assistant') AND trim(m.content) != ''"
        f" AND {engine_of(conn).json_get('m.metadata', 'greeting')} IS NULL)"
        " ORDER BY c.updated_at DESC, c.id DESC LIMIT 1",
        (user_id, persona_id),
    ).fetchone()
    return row[0] if row else None


def conversation_labels(conn: Connection, user_id: int, conversation_id: int) -> tuple[str, str] | None:
    """(user label, assistant label) of the persona that holds the conversation."""
    row = conn.execute(
        "SELECT p.user_label, p.assistant_label FROM conversations c JOIN personas p ON p.id = c.persona_id"
        " WHERE c.id = ? AND c.user_id = ?", (conversation_id, user_id),
    ).fetchone()
    return (row[0], row[1]) if row is not None else None


def persona_labels(conn: Connection, user_id: int, persona_id: int) -> tuple[str, str] | None:
    """(user label, assistant label) of a persona."""
    row = conn.execute("SELECT user_label, assistant_label FROM personas WHERE id = ? AND user_id = ?",
                       (persona_id, user_id)).fetchone()
    return (row[0], row[1]) if row is not None else None


def conversation_title(conn: Connection, conversation_id: int) -> str | None:
    row = conn.execute("SELECT title FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    return row[0] if row else None


def conversation_persona(conn: Connection, user_id: int, conversation_id: int) -> int | None:
    row = conn.execute("SELECT persona_id FROM conversations WHERE id = ? AND user_id = ?",
                       (conversation_id, user_id)).fetchone()
    return row[0] if row is not None else None


# --- the turns a handoff quotes -------------------------------------------------------------------

def last_chat_turns(conn: Connection, user_id: int, conversation_id: int, *, count: int,
                    keep: Callable[[SourceMessage], bool]) -> list[SourceMessage]:
    """The last ``count`` chat turns of a conversation that ``keep`` accepts, oldest first.

    Reads newest first and stops once enough are found, so a long conversation is not loaded whole."""
    cursor = conn.execute(
        "SELECT id, role, kind, content, created_at FROM messages WHERE conversation_id = ? AND user_id = ?"
        " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id DESC",
        (conversation_id, user_id),
    )
    try:
        return _first_kept((SourceMessage(r["id"], r["role"], r["kind"], r["content"], r["created_at"])
                            for r in cursor), keep, count)
    finally:
        cursor.close()


def last_document_turns(conn: Connection, user_id: int, document_id: int, *, count: int,
                        keep: Callable[[DocumentTurn], bool]) -> list[DocumentTurn]:
    """The last ``count`` turns of an archive document that ``keep`` accepts, oldest first, read newest first."""
    cursor = conn.execute(
        "SELECT id, role, text, created_at FROM archive_turns WHERE document_id = ? AND user_id = ?"
        " AND role IN ('user', 'assistant') ORDER BY position DESC", (document_id, user_id))
    try:
        return _first_kept((DocumentTurn(r["id"], r["role"], r["text"], r["created_at"]) for r in cursor),
                           keep, count)
    finally:
        cursor.close()


def conversation_messages(conn: Connection, user_id: int, conversation_id: int, ids: list[int]) -> list[SourceMessage]:
    """The messages of a conversation among ``ids`` (not empty) that still exist, by id."""
    return [SourceMessage(r["id"], r["role"], r["kind"], r["content"], r["created_at"]) for r in conn.execute(
        f"SELECT id, role, kind, content, created_at FROM messages WHERE conversation_id = ? AND user_id = ?"
        f" AND id IN ({_marks(ids)}) ORDER BY id",
        (conversation_id, user_id, *ids),
    ).fetchall()]


def messages(conn: Connection, user_id: int, ids: list[int]) -> list[SourceMessage]:
    """A user's messages among ``ids`` (not empty) that still exist, by id."""
    return [SourceMessage(r["id"], r["role"], r["kind"], r["content"], r["created_at"]) for r in conn.execute(
        f"SELECT id, role, kind, content, created_at FROM messages WHERE user_id = ?"
        f" AND id IN ({_marks(ids)}) ORDER BY id", (user_id, *ids)).fetchall()]


def document_turns(conn: Connection, user_id: int, document_id: int, ids: list[int]) -> list[DocumentTurn]:
    """The turns of an archive document among ``ids`` (not empty) that still exist, by id."""
    return [DocumentTurn(r["id"], r["role"], r["text"], r["created_at"]) for r in conn.execute(
        f"SELECT id, role, text, created_at FROM archive_turns WHERE document_id = ? AND user_id = ?"
        f" AND id IN ({_marks(ids)}) ORDER BY id", (document_id, user_id, *ids)).fetchall()]


def has_document_turns(conn: Connection, document_id: int) -> bool:
    return conn.execute("SELECT 1 FROM archive_turns WHERE document_id = ? LIMIT 1",
                        (document_id,)).fetchone() is not None


# --- handoff records ------------------------------------------------------------------------------

def handoff_of(conn: Connection, user_id: int, conversation_id: int) -> HandoffSource | None:
    """Where the conversation's handoff came from, when its record holds a handoff."""
    row = conn.execute(
        "SELECT source_conversation_id, source_document_id, source_message_ids FROM conversation_summaries"
        " WHERE conversation_id = ? AND user_id = ? AND handoff != ''", (conversation_id, user_id),
    ).fetchone()
    if row is None:
        return None
    return HandoffSource(row["source_conversation_id"], row["source_document_id"], row["source_message_ids"])


def insert_handoff(conn: Connection, user_id: int, conversation_id: int, source_conversation_id: int | None,
                   source_document_id: int | None, source_message_ids: str, handoff: str, created_at: str) -> None:
    conn.execute(
        "INSERT INTO conversation_summaries (user_id, conversation_id, source_conversation_id, source_document_id,"
        " source_message_ids, handoff, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (user_id, conversation_id, source_conversation_id, source_document_id, source_message_ids, handoff,
         created_at),
    )


def message_handoffs(conn: Connection, user_id: int) -> list[HandoffRecord]:
    """Every handoff record of a user whose source is a conversation (not an archive document)."""
    return [HandoffRecord(r["id"], r["conversation_id"], r["source_conversation_id"], r["source_message_ids"])
            for r in conn.execute(
                "SELECT id, conversation_id, source_conversation_id, source_message_ids FROM conversation_summaries"
                " WHERE user_id = ? AND source_document_id IS NULL", (user_id,)).fetchall()]


def rewrite_handoff(conn: Connection, record_id: int, source_message_ids: str, handoff: str) -> None:
    """A handoff rendered again; the retired columns are emptied (H10)."""
    conn.execute(
        "UPDATE conversation_summaries SET source_message_ids = ?, handoff = ?, summary = '', recent_raw = ''"
        " WHERE id = ?", (source_message_ids, handoff, record_id))


# --- the visible handoff bubble -------------------------------------------------------------------

def first_artifact(conn: Connection, conversation_id: int) -> int | None:
    """The id of a conversation's first handoff bubble."""
    row = conn.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND kind = 'handoff_artifact' ORDER BY id LIMIT 1",
        (conversation_id,),
    ).fetchone()
    return row[0] if row else None


def artifacts(conn: Connection, conversation_id: int) -> list[tuple[int, str]]:
    """(id, metadata JSON text) of a conversation's handoff bubbles."""
    return [(r["id"], r["metadata"]) for r in conn.execute(
        "SELECT id, metadata FROM messages WHERE conversation_id = ? AND kind = 'handoff_artifact'",
        (conversation_id,)).fetchall()]


def delete_artifact(conn: Connection, message_id: int) -> None:
    """Remove a handoff bubble: its event goes, and the message with it by cascade."""
    conn.execute("DELETE FROM events WHERE id = ?", (message_id,))


def set_artifact(conn: Connection, message_id: int, content: str, metadata: str) -> None:
    conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?", (content, metadata, message_id))


# --- branch retry keys (H8) -----------------------------------------------------------------------

def branch_request(conn: Connection, user_id: int, retry_key: str) -> BranchRequest | None:
    row = conn.execute(
        "SELECT destination_conversation_id, source_conversation_id, source_document_id FROM branch_requests"
        " WHERE user_id = ? AND retry_key = ?", (user_id, retry_key),
    ).fetchone()
    if row is None:
        return None
    return BranchRequest(row["destination_conversation_id"], row["source_conversation_id"],
                         row["source_document_id"])


def insert_branch_request(conn: Connection, user_id: int, retry_key: str, destination_conversation_id: int,
                          created_at: str, *, source_conversation_id: int | None = None,
                          source_document_id: int | None = None) -> None:
    """The retry key's destination; its source is a conversation, or an archive document when one is given."""
    column, source_id = (("source_conversation_id", source_conversation_id) if source_document_id is None
                         else ("source_document_id", source_document_id))
    conn.execute(  # the column is one of two fixed names, never input
        f"INSERT INTO branch_requests (user_id, retry_key, {column}, destination_conversation_id, created_at)"
        " VALUES (?, ?, ?, ?, ?)", (user_id, retry_key, source_id, destination_conversation_id, created_at))
