"""Statements reading what a reply remembered (W11): the snapshot's ids when the reply is saved,
and each source's current row when the person looks. Every read of a source names the owner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hearth.store import Connection


@dataclass(frozen=True)
class RememberedMemory:
    id: int
    text: str
    category: str


@dataclass(frozen=True)
class RememberedFragment:
    id: int
    category: str
    triggers: str  # as stored (JSON text)
    definition: str


@dataclass(frozen=True)
class RememberedTurn:
    id: int
    conversation_id: int
    role: str
    content: str
    created_at: str
    title: str  # its conversation's


@dataclass(frozen=True)
class RememberedChunk:
    id: int
    document_id: int
    text: str
    chunk_date: str | None
    title: str  # its document's


def _marks(n: int) -> str:
    return ",".join("?" * n)


def snapshot_ids(conn: Connection, conversation_id: int, limit: int) -> list[int]:
    """The ids of the thread's snapshot that a prompt shows, in id order, at most ``limit``: one
    indexed read that stops after ``limit`` rows however large the snapshot."""
    return [r[0] for r in conn.execute(
        "SELECT cm.memory_id FROM conversation_memories cm JOIN memories m ON m.id = cm.memory_id"
        " WHERE cm.conversation_id = ? AND m.eligible = 1 AND m.valid_until IS NULL ORDER BY cm.memory_id"
        " LIMIT ?", (conversation_id, limit)).fetchall()]


def message_of(conn: Connection, user_id: int, conversation_id: int, message_id: int) -> tuple[str, str] | None:
    """(role, metadata as stored JSON) of a message of the user's in this conversation."""
    row = conn.execute("SELECT role, metadata FROM messages WHERE id = ? AND conversation_id = ? AND user_id = ?",
                       (message_id, conversation_id, user_id)).fetchone()
    return None if row is None else (row["role"], row["metadata"])


def memories(conn: Connection, user_id: int, ids: Sequence[int]) -> list[RememberedMemory]:
    """The user's memories among ``ids``, in the memory list's own order."""
    return [RememberedMemory(r["id"], r["text"], r["category"]) for r in conn.execute(
        f"SELECT id, text, category FROM memories WHERE user_id = ? AND id IN ({_marks(len(ids))})"
        " ORDER BY position, id", (user_id, *ids))]


def fragments(conn: Connection, user_id: int, ids: Sequence[int]) -> dict[int, RememberedFragment]:
    return {r["id"]: RememberedFragment(r["id"], r["category"], r["triggers"], r["definition"]) for r in conn.execute(
        f"SELECT id, category, triggers, definition FROM fragments WHERE user_id = ? AND id IN ({_marks(len(ids))})",
        (user_id, *ids))}


def turns(conn: Connection, user_id: int, ids: Sequence[int]) -> dict[int, RememberedTurn]:
    """The user's messages among ``ids``, with their conversations' titles."""
    return {r["id"]: RememberedTurn(r["id"], r["conversation_id"], r["role"], r["content"], r["created_at"],
                                    r["title"]) for r in conn.execute(
        "SELECT m.id, m.conversation_id, m.role, m.content, m.created_at, c.title FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id"
        f" WHERE m.user_id = ? AND c.user_id = ? AND m.id IN ({_marks(len(ids))})", (user_id, user_id, *ids))}


def chunks(conn: Connection, user_id: int, ids: Sequence[int]) -> dict[int, RememberedChunk]:
    """The user's archive chunks among ``ids``, with their documents' titles."""
    return {r["id"]: RememberedChunk(r["id"], r["document_id"], r["text"], r["chunk_date"], r["title"])
            for r in conn.execute(
                "SELECT c.id, c.document_id, c.text, c.chunk_date, d.title FROM archive_chunks c"
                " JOIN archive_documents d ON d.id = c.document_id"
                f" WHERE c.user_id = ? AND c.id IN ({_marks(len(ids))})", (user_id, *ids))}


def conversation_title(conn: Connection, user_id: int, conversation_id: int) -> tuple[int, str] | None:
    """(id, title) of the user's conversation."""
    row = conn.execute("SELECT id, title FROM conversations WHERE id = ? AND user_id = ?",
                       (conversation_id, user_id)).fetchone()
    return None if row is None else (row["id"], row["title"])


def document_title(conn: Connection, user_id: int, document_id: int) -> tuple[int, str] | None:
    """(id, title) of the user's archive document."""
    row = conn.execute("SELECT id, title FROM archive_documents WHERE id = ? AND user_id = ?",
                       (document_id, user_id)).fetchone()
    return None if row is None else (row["id"], row["title"])
