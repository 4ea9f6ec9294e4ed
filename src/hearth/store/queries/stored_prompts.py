"""Stored static prompts: each conversation's single ``static_prompt`` system message
(``messages``), and what a prompt is made from that the conversation holds (its persona, its own
custom instructions, its start)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hearth.store import Connection, Row, engine_of, versions
from hearth.store.queries.personas import Persona


@dataclass(frozen=True)
class StoredPrompt:
    message_id: int
    text: str
    handoff_chars: int
    policy_version: int
    section_chars: dict[str, int] = field(default_factory=dict)  # per static section (R2)


def _row(conn: Connection, conversation_id: int, columns: str = "id, content, metadata") -> Row | None:
    return conn.execute(
        f"SELECT {columns} FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
        (conversation_id,),
    ).fetchone()


def _stored(row: Row) -> StoredPrompt:
    meta = json.loads(row["metadata"])
    return StoredPrompt(row["id"], row["content"], meta.get("handoff_chars", 0), meta.get("policy_version", 0),
                        dict(meta.get("section_chars") or {}))


def get(conn: Connection, conversation_id: int) -> StoredPrompt | None:
    row = _row(conn, conversation_id)
    return _stored(row) if row is not None else None


def message_id(conn: Connection, conversation_id: int) -> int | None:
    """The id of the conversation's stored prompt, None before its first send."""
    row = _row(conn, conversation_id, "id")
    return row["id"] if row is not None else None


def current(conn: Connection, conversation_id: int) -> StoredPrompt | None:
    """The stored prompt as it is now. Where the engine names a row's version (PostgreSQL) the
    version is read first and a prompt this process read at that version is used again: every
    send reads its thread's prompt, up to hundreds of KB, and its transfer was most of a
    millisecond there."""
    engine = engine_of(conn)
    if not engine.row_version:
        return get(conn, conversation_id)
    head = _row(conn, conversation_id, f"id, {engine.row_version}")
    if head is None:
        return None
    key = ("static_prompt", engine.database_key(conn), head[0])
    stored = versions.held(key, head[1])
    if stored is None:
        row = _row(conn, conversation_id, f"id, content, metadata, {engine.row_version} AS version")
        if row is None:
            return None
        stored = _stored(row)
        versions.keep(key, row["version"], stored)
    return stored


def set_text(conn: Connection, message_id: int, text: str, metadata: dict[str, Any]) -> None:
    conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?", (text, json.dumps(metadata), message_id))


def older_than(conn: Connection, policy_version: int) -> list[tuple[int, int]]:
    """(user_id, conversation_id) of every stored prompt built under an older policy."""
    rows = conn.execute(
        "SELECT user_id, conversation_id FROM messages WHERE kind = 'static_prompt'"
        f" AND coalesce({engine_of(conn).json_int('metadata', 'policy_version')}, 0) < ? ORDER BY conversation_id",
        (policy_version,),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def user_ids(conn: Connection) -> list[int]:
    """Every user's id (reconciliation walks them all)."""
    return [r[0] for r in conn.execute("SELECT id FROM users")]


# -- what the conversation holds of a prompt's inputs ------------------------------------------------
def persona(conn: Connection, conversation_id: int) -> Persona:
    """The conversation's persona."""
    return Persona.from_row(conn.execute("SELECT p.* FROM conversations c JOIN personas p ON p.id = c.persona_id"
                                         " WHERE c.id = ?", (conversation_id,)).fetchone())


def instructions(conn: Connection, conversation_id: int, *, user_id: int | None = None) -> str | None:
    """The conversation's own custom instructions, None while it uses its persona's."""
    if user_id is None:
        return conn.execute("SELECT custom_instructions FROM conversations WHERE id = ?",
                            (conversation_id,)).fetchone()[0]
    return conn.execute("SELECT custom_instructions FROM conversations WHERE id = ? AND user_id = ?",
                        (conversation_id, user_id)).fetchone()[0]


def set_instructions(conn: Connection, user_id: int, conversation_id: int, text: str | None) -> None:
    conn.execute("UPDATE conversations SET custom_instructions = ? WHERE id = ? AND user_id = ?",
                 (text, conversation_id, user_id))


def started(conn: Connection, conversation_id: int) -> tuple[int, str]:
    """(user_id, created_at) of the conversation."""
    user_id, created_at = conn.execute("SELECT user_id, created_at FROM conversations WHERE id = ?",
                                       (conversation_id,)).fetchone()
    return user_id, created_at
