"""The statements that find what a forget covers (B4), before the registry's walk removes it
(``store/stored``): the ids a target names, their counts, the messages going with their text."""

from __future__ import annotations

import json
from typing import Any

from hearth.store.engine import Connection

# Whether an item of this user exists, by target.
_EXISTS = {
    "conversation": "SELECT 1 FROM conversations WHERE id = ? AND user_id = ?",
    "folder": "SELECT 1 FROM folders WHERE id = ? AND user_id = ?",
    "document": "SELECT 1 FROM archive_documents WHERE id = ? AND user_id = ?",
    "memory": "SELECT 1 FROM memories WHERE id = ? AND user_id = ?",
}


def _ids(rows: Any) -> list[int]:
    return [r[0] for r in rows]


def _in(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def message_kind(conn: Connection, user_id: int, message_id: int) -> str | None:
    row = conn.execute("SELECT kind FROM messages WHERE id = ? AND user_id = ?", (message_id, user_id)).fetchone()
    return row[0] if row else None


def exists(conn: Connection, user_id: int, target: str, ident: int) -> bool:
    """Whether the user has that conversation, folder, document or memory."""
    return conn.execute(_EXISTS[target], (ident, user_id)).fetchone() is not None


def conversations_in_folder(conn: Connection, user_id: int, folder_id: int) -> list[int]:
    return _ids(conn.execute(
        "SELECT id FROM conversations WHERE folder_id = ? AND user_id = ? ORDER BY id", (folder_id, user_id)))


def trashed_conversations(conn: Connection, user_id: int) -> list[int]:
    return _ids(conn.execute(
        "SELECT id FROM conversations WHERE user_id = ? AND trashed_at IS NOT NULL ORDER BY id", (user_id,)))


def in_range(conn: Connection, user_id: int, start: str, end: str) -> dict[str, list[int]]:
    """What a date range covers: conversations begun inside it go whole; elsewhere only the turns
    inside it. Keys: conversations, messages, documents, memories, search_log, proposals."""
    u = user_id
    conversations = _ids(conn.execute(
        "SELECT id FROM conversations WHERE user_id = ? AND created_at >= ? AND created_at < ? ORDER BY id",
        (u, start, end)))
    messages = _ids(conn.execute(
        f"SELECT id FROM messages WHERE user_id = ? AND created_at >= ? AND created_at < ?"
        f" AND kind != 'static_prompt' AND conversation_id NOT IN ({_in(conversations)}) ORDER BY id",
        (u, start, end, *conversations)))
    documents = _ids(conn.execute(
        "SELECT id FROM archive_documents WHERE user_id = ? AND created_at >= ? AND created_at < ?",
        (u, start, end)))
    memories = _ids(conn.execute(
        "SELECT id FROM memories WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
    search_log = _ids(conn.execute(
        "SELECT id FROM search_log WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
    proposals = _ids(conn.execute(
        "SELECT id FROM proposals WHERE user_id = ? AND created_at >= ? AND created_at < ?", (u, start, end)))
    return {"conversations": conversations, "messages": messages, "documents": documents, "memories": memories,
            "search_log": search_log, "proposals": proposals}


def thread_messages(conn: Connection, conversation_ids: list[int]) -> int:
    """How many messages (stored prompts aside) these conversations hold."""
    return conn.execute(
        f"SELECT count(*) FROM messages WHERE conversation_id IN ({_in(conversation_ids)})"
        " AND kind != 'static_prompt'", conversation_ids).fetchone()[0]


def document_chunks(conn: Connection, document_ids: list[int]) -> int:
    return conn.execute(f"SELECT count(*) FROM archive_chunks WHERE document_id IN ({_in(document_ids)})",
                        document_ids).fetchone()[0]


def threads_put_away(conn: Connection, conversation_ids: list[int]) -> int:
    """How many turns put away after edits (W2) these conversations hold."""
    return conn.execute(f"SELECT count(*) FROM branch_messages WHERE conversation_id IN ({_in(conversation_ids)})",
                        conversation_ids).fetchone()[0]


def last_turn(conn: Connection, user_id: int, conversation_id: int) -> tuple[int, str, dict[str, Any]] | None:
    """(id, role, metadata) of the thread's last chat turn."""
    last = conn.execute(
        "SELECT id, role, metadata FROM messages WHERE conversation_id = ? AND user_id = ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1",
        (conversation_id, user_id)).fetchone()
    if last is None:
        return None
    metadata = last["metadata"] if isinstance(last["metadata"], dict) else json.loads(last["metadata"] or "{}")
    return last["id"], last["role"], metadata


def doomed_messages(conn: Connection, user_id: int, whole: list[int],
                    single: list[int]) -> list[tuple[int, int, str, str]]:
    """(id, conversation_id, content, kind) of every message of ``whole`` threads and of the
    ``single`` messages, stored prompts aside, by id."""
    # Two lookups, not one with OR: each uses its own index, where the OR scanned all the user's messages.
    select = "SELECT id, conversation_id, content, kind FROM messages WHERE user_id = ? AND kind != 'static_prompt'"
    found: dict[int, tuple[int, int, str, str]] = {}
    if whole:
        found.update((r[0], (r[0], r[1], r[2], r[3]))
                     for r in conn.execute(f"{select} AND conversation_id IN ({_in(whole)})", (user_id, *whole)))
    if single:
        found.update((r[0], (r[0], r[1], r[2], r[3]))
                     for r in conn.execute(f"{select} AND id IN ({_in(single)})", (user_id, *single)))
    return [found[k] for k in sorted(found)]


def put_away(conn: Connection, user_id: int, message_ids: list[int]) -> list[tuple[int, str, str]]:
    """(id, content, kind) of the turns kept after these messages' versions (W2), and after theirs."""
    out: list[tuple[int, str, str]] = []
    parents = list(message_ids)
    while parents:
        rows = [(r[0], r[1], r[2]) for r in conn.execute(
            f"SELECT b.id, b.content, b.kind FROM branch_messages b JOIN message_branches r ON r.id = b.branch_id"
            f" WHERE r.user_id = ? AND r.message_id IN ({_in(parents)})", (user_id, *parents)).fetchall()]
        out += rows
        parents = [r[0] for r in rows]
    return out
