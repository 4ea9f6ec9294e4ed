"""Alternatives of a turn (W2): regenerated replies to swipe between, and edits of a sent message.

A message row always holds the chosen version, so everything that reads the thread (history,
handoffs, summaries, search) sees what the person chose without knowing about alternatives. Every
version, the original included, is kept in ``message_alternatives`` (numbered from 0, never
deleted or changed), and each new version or choice is a ledger event that carries numbers only.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from . import ledger
from .errors import InvalidInput, NotFound
from .ledger import Message
from .store.connection import utcnow


@dataclass(frozen=True)
class Alternative:
    message_id: int
    position: int
    content: str
    created_at: str
    chosen: bool
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "position": self.position, "content": self.content,
                "created_at": self.created_at, "chosen": self.chosen, "metadata": self.metadata}


def _message(conn: sqlite3.Connection, user_id: int, message_id: int) -> Message:
    row = conn.execute("SELECT * FROM messages WHERE id = ? AND user_id = ?", (message_id, user_id)).fetchone()
    if row is None:
        raise NotFound(f"no message {message_id}")
    return Message.from_row(row)


def _keep_original(conn: sqlite3.Connection, message: Message) -> None:
    """The first time a message gets an alternative, its original version becomes position 0."""
    conn.execute(
        "INSERT OR IGNORE INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
        " VALUES (?, ?, 0, ?, ?, ?)",
        (message.user_id, message.id, message.content, json.dumps(message.metadata), message.created_at))


def add(conn: sqlite3.Connection, user_id: int, message_id: int, content: str, *, metadata: dict[str, Any] | None = None,
        channel: str = "web", reason: str = "regenerated") -> int:
    """Store a new version of a message and make it the chosen one (in the caller's transaction).

    Returns its position. ``reason`` is ``regenerated`` (a reply) or ``edited`` (the person's message).
    """
    message = _message(conn, user_id, message_id)
    _keep_original(conn, message)
    position = conn.execute("SELECT max(position) + 1 FROM message_alternatives WHERE message_id = ?",
                            (message_id,)).fetchone()[0]
    meta = dict(metadata or {})
    conn.execute(
        "INSERT INTO message_alternatives (user_id, message_id, position, content, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)", (user_id, message_id, position, content, json.dumps(meta), utcnow()))
    _show(conn, message, position, content, meta)
    ledger.append(conn, user_id=user_id, conversation_id=message.conversation_id, kind=f"message.{reason}",
                  channel=channel, payload={"message_id": message_id, "position": position, "chars": len(content)})
    return position


def choose(conn: sqlite3.Connection, user_id: int, message_id: int, position: int, *, channel: str = "web") -> Message:
    """Make the version at ``position`` the one the thread shows and later requests read."""
    message = _message(conn, user_id, message_id)
    row = conn.execute("SELECT content, metadata FROM message_alternatives WHERE message_id = ? AND position = ?",
                       (message_id, position)).fetchone()
    if row is None:
        raise InvalidInput(f"message {message_id} has no alternative {position}")
    _show(conn, message, position, row[0], json.loads(row[1]))
    ledger.append(conn, user_id=user_id, conversation_id=message.conversation_id, kind="message.alternative_chosen",
                  channel=channel, payload={"message_id": message_id, "position": position})
    return _message(conn, user_id, message_id)


def _show(conn: sqlite3.Connection, message: Message, position: int, content: str, metadata: dict[str, Any]) -> None:
    count = conn.execute("SELECT count(*) FROM message_alternatives WHERE message_id = ?", (message.id,)).fetchone()[0]
    shown = {k: v for k, v in message.metadata.items() if k not in ("alternatives", "chosen")}
    shown.update({k: v for k, v in metadata.items() if k not in ("alternatives", "chosen")})
    shown.update({"alternatives": count, "chosen": position})
    conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
                 (content, json.dumps(shown), message.id))


def listing(conn: sqlite3.Connection, user_id: int, message_id: int) -> list[Alternative]:
    """Every version of a message, oldest first; a message never changed has just its own."""
    message = _message(conn, user_id, message_id)
    chosen = message.metadata.get("chosen", 0)
    rows = conn.execute("SELECT position, content, metadata, created_at FROM message_alternatives"
                        " WHERE message_id = ? ORDER BY position", (message_id,)).fetchall()
    if not rows:
        return [Alternative(message.id, 0, message.content, message.created_at, True, {})]
    return [Alternative(message.id, r[0], r[1], r[3], r[0] == chosen, json.loads(r[2])) for r in rows]
