"""Statements of a turn's versions and branches (W2): ``message_alternatives``,
``message_branches`` and ``branch_messages``, and the thread's turns they move."""

from __future__ import annotations

import json
from typing import Any, Sequence

from hearth.store.engine import Connection
from hearth.store.queries.ledger import Message

# One stored version: (position, content, metadata as stored JSON, created_at).
Version = tuple[int, str, str, str]


def message(conn: Connection, user_id: int, message_id: int) -> Message | None:
    row = conn.execute("SELECT * FROM messages WHERE id = ? AND user_id = ?", (message_id, user_id)).fetchone()
    return None if row is None else Message.from_row(row)


def keep_original(conn: Connection, message: Message) -> None:
    """The message's own text as position 0, unless it has one."""
    conn.execute(
        "INSERT INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
        " VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT DO NOTHING",
        (message.user_id, message.id, message.content, json.dumps(message.metadata), message.created_at))


def next_position(conn: Connection, message_id: int) -> int:
    return conn.execute("SELECT max(position) + 1 FROM message_alternatives WHERE message_id = ?",
                        (message_id,)).fetchone()[0]


def insert(conn: Connection, user_id: int, message_id: int, position: int, content: str, metadata: str,
           created_at: str) -> None:
    """One version; ``metadata`` as stored (JSON text)."""
    conn.execute(
        "INSERT INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)", (user_id, message_id, position, content, metadata, created_at))


def insert_many(conn: Connection, user_id: int, message_id: int, versions: Sequence[tuple[int, str, str]],
                created_at: str) -> None:
    """Several versions at once: (position, content, metadata as JSON text)."""
    conn.executemany(
        "INSERT INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(user_id, message_id, position, text, metadata, created_at) for position, text, metadata in versions])


def version(conn: Connection, message_id: int, position: int) -> tuple[str, str] | None:
    """(content, metadata as JSON text) of one version, or None."""
    row = conn.execute("SELECT content, metadata FROM message_alternatives WHERE message_id = ? AND position = ?",
                       (message_id, position)).fetchone()
    return None if row is None else (row[0], row[1])


def versions(conn: Connection, message_id: int) -> list[Version]:
    """Every version of a message, by position."""
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute(
        "SELECT position, content, metadata, created_at FROM message_alternatives WHERE message_id = ?"
        " ORDER BY position", (message_id,)).fetchall()]


def count(conn: Connection, message_id: int) -> int:
    return conn.execute("SELECT count(*) FROM message_alternatives WHERE message_id = ?", (message_id,)).fetchone()[0]


def show(conn: Connection, message_id: int, content: str, metadata: dict[str, Any]) -> None:
    """The chosen version's text and metadata on the message row itself."""
    conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
                 (content, json.dumps(metadata), message_id))


def stash(conn: Connection, message: Message, position: int, kinds: Sequence[str], now: str) -> list[int]:
    """Move the turns of ``kinds`` after ``message`` from ``messages`` into ``branch_messages``,
    as the branch of its version ``position``, each with its versions. Returns their ids."""
    marks = ", ".join("?" * len(kinds))
    rows = conn.execute(f"SELECT * FROM messages WHERE conversation_id = ? AND id > ? AND kind IN ({marks})"
                        " ORDER BY id", (message.conversation_id, message.id, *kinds)).fetchall()
    if not rows:
        return []
    conn.execute("INSERT INTO message_branches (user_id, conversation_id, message_id, position, created_at)"
                 " VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id, position) DO NOTHING",
                 (message.user_id, message.conversation_id, message.id, position, now))
    branch_id = conn.execute("SELECT id FROM message_branches WHERE message_id = ? AND position = ?",
                             (message.id, position)).fetchone()[0]
    for row in rows:
        kept = [{"position": r[0], "content": r[1], "metadata": r[2], "created_at": r[3]} for r in conn.execute(
            "SELECT position, content, metadata, created_at FROM message_alternatives WHERE message_id = ?"
            " ORDER BY position", (row["id"],))]
        conn.execute(
            "INSERT INTO branch_messages (id, branch_id, user_id, conversation_id, role, kind, content, channel,"
            " created_at, metadata, alternatives) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["id"], branch_id, row["user_id"], row["conversation_id"], row["role"], row["kind"], row["content"],
             row["channel"], row["created_at"], row["metadata"], json.dumps(kept, ensure_ascii=False)))
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" * len(ids))
    # Their versions and vectors go with the rows (cascade); the triggers take them out of the
    # keyword index and the turn count, and retire summaries that covered them.
    conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", ids)
    return ids


def restore(conn: Connection, message_id: int, position: int) -> list[int]:
    """Bring the branch of version ``position`` back into ``messages`` (nothing if it has none).
    Returns the ids brought back."""
    row = conn.execute("SELECT id FROM message_branches WHERE message_id = ? AND position = ?",
                       (message_id, position)).fetchone()
    if row is None:
        return []
    ids = []
    for turn in conn.execute("SELECT * FROM branch_messages WHERE branch_id = ? ORDER BY id", (row[0],)).fetchall():
        conn.execute(
            "INSERT INTO messages (id, user_id, conversation_id, role, kind, content, channel, created_at, metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (turn["id"], turn["user_id"], turn["conversation_id"], turn["role"], turn["kind"], turn["content"],
             turn["channel"], turn["created_at"], turn["metadata"]))
        for kept in json.loads(turn["alternatives"]):
            conn.execute(
                "INSERT INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)", (turn["user_id"], turn["id"], kept["position"], kept["content"],
                                               kept["metadata"], kept["created_at"]))
        ids.append(turn["id"])
    conn.execute("DELETE FROM message_branches WHERE id = ?", (row[0],))  # its rows go with it (cascade)
    return ids


def next_turn(conn: Connection, conversation_id: int, after_id: int) -> int | None:
    """The id of the first chat turn after ``after_id``."""
    row = conn.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat' AND role IN ('user', 'assistant')"
        " ORDER BY id LIMIT 1", (conversation_id, after_id)).fetchone()
    return None if row is None else row[0]


def drop_vectors(conn: Connection, message_ids: Sequence[int]) -> None:
    marks = ", ".join("?" * len(message_ids))
    conn.execute(f"DELETE FROM message_embeddings WHERE message_id IN ({marks})", list(message_ids))


def bump_history(conn: Connection, conversation_id: int) -> None:
    """Move the thread's ``history_rev``: cached history windows keyed by it are read afresh."""
    conn.execute("UPDATE conversations SET history_rev = history_rev + 1 WHERE id = ?", (conversation_id,))
