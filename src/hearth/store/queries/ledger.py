"""Statements of the ledger (S2): ``events``, and ``messages``, each message an event of its own id."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hearth.errors import ConstraintError
from hearth.store.connection import inserted_id
from hearth.store.engine import Connection, Row
from hearth.store.sqlite import engine_of


@dataclass(frozen=True)
class Event:
    id: int
    user_id: int
    conversation_id: int | None
    kind: str
    channel: str
    created_at: str
    payload: dict[str, Any]
    span_id: int | None = None  # the activity span it happened in (E1)

    @classmethod
    def from_row(cls, row: Row) -> "Event":
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            conversation_id=row["conversation_id"],
            kind=row["kind"],
            channel=row["channel"],
            created_at=row["created_at"],
            payload=json.loads(row["payload"]),
            span_id=row["span_id"],
        )


@dataclass(frozen=True)
class Message:
    id: int
    user_id: int
    conversation_id: int
    role: str
    kind: str
    content: str
    channel: str
    created_at: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Row) -> "Message":
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            conversation_id=row["conversation_id"],
            role=row["role"],
            kind=row["kind"],
            content=row["content"],
            channel=row["channel"],
            created_at=row["created_at"],
            metadata=json.loads(row["metadata"]),
        )

    @property
    def visible(self) -> bool:
        """Shown as a chat bubble: everything except stored prompts and tool results (P6)."""
        return self.kind in ("chat", "handoff_artifact")


def insert_event(conn: Connection, *, user_id: int, kind: str, conversation_id: int | None, channel: str,
                 payload: dict[str, Any], created_at: str, span_id: int | None) -> int:
    cur = conn.execute(
        "INSERT INTO events (user_id, conversation_id, kind, channel, created_at, payload, span_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, conversation_id, kind, channel, created_at, json.dumps(payload, separators=(",", ":")), span_id),
    )
    return inserted_id(cur)


def insert_message(conn: Connection, *, user_id: int, conversation_id: int, role: str, content: str, kind: str,
                   channel: str, metadata: dict[str, Any], created_at: str, span_id: int | None) -> int:
    """A message, its event and its conversation's time; the message id (its event's)."""
    meta = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
    payload = {"role": role, "kind": kind, "chars": len(content)}
    if engine_of(conn).chained_writes:
        # One round trip instead of three (imports write messages by the hundred thousand): the
        # event, its message and the conversation's time in one statement.
        row = conn.execute(
            "WITH e AS (INSERT INTO events (user_id, conversation_id, kind, channel, created_at, payload, span_id)"
            " VALUES (?, ?, 'message', ?, ?, ?, ?) RETURNING id),"
            " m AS (INSERT INTO messages (id, user_id, conversation_id, role, kind, content, channel, created_at,"
            " metadata) SELECT id, ?, ?, ?, ?, ?, ?, ?, ? FROM e ON CONFLICT DO NOTHING RETURNING id),"
            " u AS (UPDATE conversations SET updated_at = ? WHERE id = ? AND updated_at < ?"
            " AND EXISTS (SELECT 1 FROM m))"
            " SELECT (SELECT id FROM e), (SELECT count(*) FROM m)",
            (user_id, conversation_id, channel, created_at, json.dumps(payload, separators=(",", ":")), span_id,
             user_id, conversation_id, role, kind, content, channel, created_at, meta,
             created_at, conversation_id, created_at)).fetchone()
        if not row[1]:
            # As the one-row INSERT on its own reports it (see store/postgres.py): the caller's
            # transaction stays usable, as on SQLite.
            raise ConstraintError("UNIQUE constraint failed: messages")
        return int(row[0])
    event_id = insert_event(conn, user_id=user_id, kind="message", conversation_id=conversation_id,
                            channel=channel, payload=payload, created_at=created_at, span_id=span_id)
    conn.execute(
        "INSERT INTO messages (id, user_id, conversation_id, role, kind, content, channel, created_at, metadata)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (event_id, user_id, conversation_id, role, kind, content, channel, created_at, meta),
    )
    conn.execute(
        "UPDATE conversations SET updated_at = ? WHERE id = ? AND updated_at < ?",
        (created_at, conversation_id, created_at),
    )
    return event_id


def events_of_conversation(conn: Connection, user_id: int, conversation_id: int) -> list[Event]:
    """Every event of one conversation in ledger order."""
    rows = conn.execute(
        "SELECT * FROM events WHERE user_id = ? AND conversation_id = ? ORDER BY created_at, id",
        (user_id, conversation_id),
    ).fetchall()
    return [Event.from_row(r) for r in rows]


def messages_of_conversation(conn: Connection, user_id: int, conversation_id: int) -> dict[int, Message]:
    """Every message of one conversation, by id."""
    return {row["id"]: Message.from_row(row) for row in conn.execute(
        "SELECT * FROM messages WHERE user_id = ? AND conversation_id = ?", (user_id, conversation_id))}


def newest_events(conn: Connection, user_id: int, *, kinds: list[str] | None = None, limit: int = 100) -> list[Event]:
    """The newest events of a user, oldest first."""
    sql = "SELECT * FROM events WHERE user_id = ?"
    args: list[Any] = [user_id]
    if kinds is not None:
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        args += kinds
    sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
    rows = conn.execute(sql, (*args, limit)).fetchall()
    return [Event.from_row(r) for r in reversed(rows)]


def verify(conn: Connection) -> tuple[int, int, list[str]]:
    """(events, messages, problems) of the whole ledger, read in one snapshot; see ``records.ledger.verify``."""
    engine = engine_of(conn)
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    problems: list[str] = []
    try:
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        checks = {
            "message events without a message row": f"""
                SELECT e.id FROM events e LEFT JOIN messages m ON m.id = e.id
                WHERE e.kind = 'message' AND m.id IS NULL
                  AND e.id NOT IN (SELECT CAST({engine.json_int('d.payload', 'message_id')} AS INTEGER) FROM events d
                                   WHERE d.kind = 'message.deleted')
                  AND e.id NOT IN (SELECT id FROM branch_messages)""",
            # The foreign key forbids this on both engines; a copy, a restore or a disabled check
            # can still plant one, so it is looked for rather than assumed.
            "message rows without their event (a broken foreign key)": """
                SELECT m.id FROM messages m LEFT JOIN events e ON e.id = m.id WHERE e.id IS NULL""",
            "messages whose event is not a message event": """
                SELECT m.id FROM messages m JOIN events e ON e.id = m.id WHERE e.kind != 'message'""",
            "messages whose event has another owner or conversation": """
                SELECT m.id FROM messages m JOIN events e ON e.id = m.id
                WHERE e.user_id != m.user_id OR e.conversation_id IS DISTINCT FROM m.conversation_id""",
            "events whose conversation belongs to another user": """
                SELECT e.id FROM events e JOIN conversations c ON c.id = e.conversation_id
                WHERE c.user_id != e.user_id""",
            "events with an unreadable timestamp": f"""
                SELECT id FROM events WHERE {engine.not_timestamp("created_at")}""",
        }
        for label, sql in checks.items():
            ids = [r[0] for r in conn.execute(sql + " LIMIT 20").fetchall()]
            if ids:
                problems.append(f"{label}: ids {ids}")
        # Zero where the engine checks every reference as each statement runs (PostgreSQL).
        fk = engine.foreign_key_violations(conn)
        if fk:
            problems.append(f"foreign key violations: {fk}")
        problems.extend(engine.index_problems(conn))
    finally:
        if own:
            conn.execute("COMMIT")
    # The index's own check (FTS5's is issued as a write statement) runs after the snapshot ends.
    problems.extend(engine.index_damage(conn))
    return events, messages, problems


def chat_turns_after(conn: Connection, conversation_id: int, after_id: int, cap: int | None = None) -> int:
    """The thread's chat turns after ``after_id``, counted up to ``cap`` (None: all). A due check
    needs only to know whether the count reached its threshold, and it runs in the reply's write
    transaction, where counting a 100k-turn thread would hold the lock for 100 ms."""
    limit = " LIMIT ?" if cap is not None else ""
    return conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        f" AND role IN ('user', 'assistant'){limit}) AS t",
        (conversation_id, after_id, *([cap] if cap is not None else []))).fetchone()[0]


def message(conn: Connection, user_id: int, message_id: int) -> Message | None:
    row = conn.execute("SELECT * FROM messages WHERE id = ? AND user_id = ?", (message_id, user_id)).fetchone()
    return Message.from_row(row) if row else None


def messages_of(conn: Connection, user_id: int, conversation_id: int, *, after_id: int = 0,
                before_id: int | None = None, visible_only: bool = True, limit: int | None = None,
                newest: int | None = None) -> list[Message]:
    """A conversation's messages in stored order, after ``after_id`` (and before ``before_id``);
    ``visible_only``: chat bubbles only (P6); ``newest``: only the last that many."""
    sql = "SELECT * FROM messages WHERE conversation_id = ? AND user_id = ? AND id > ?"
    args: list[Any] = [conversation_id, user_id, after_id]
    if before_id is not None:
        sql += " AND id < ?"
        args.append(before_id)
    if visible_only:
        sql += " AND kind IN ('chat', 'handoff_artifact')"
    sql += " ORDER BY id DESC" if newest is not None else " ORDER BY id"
    if newest is not None or limit is not None:
        sql += " LIMIT ?"
        args.append(newest if newest is not None else limit)
    rows = conn.execute(sql, args).fetchall()
    if newest is not None:
        rows.reverse()
    return [Message.from_row(r) for r in rows]


def matches(conn: Connection, user_id: int, message_ids: list[int]) -> dict[int, tuple[str, str, str]]:
    """{id: (role, created_at, content)} of these messages of the user."""
    if not message_ids:
        return {}
    return {r["id"]: (r["role"], r["created_at"], r["content"]) for r in conn.execute(
        f"SELECT id, role, created_at, content FROM messages WHERE user_id = ? AND id IN ({','.join('?' * len(message_ids))})",
        (user_id, *message_ids))}


def static_prompt(conn: Connection, conversation_id: int) -> str | None:
    """The conversation's stored static prompt text, or None before the first send."""
    row = conn.execute(
        "SELECT content FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
        (conversation_id,),
    ).fetchone()
    return row[0] if row else None


def visible_size(conn: Connection, user_id: int, conversation_id: int) -> tuple[int, int]:
    """(count, characters) of a conversation's visible messages, in one aggregate."""
    count, chars = conn.execute(
        "SELECT count(*), coalesce(sum(length(content)), 0) FROM messages WHERE conversation_id = ?"
        " AND user_id = ? AND kind IN ('chat', 'handoff_artifact')", (conversation_id, user_id)).fetchone()
    return int(count), int(chars)


def last_request_size(conn: Connection, conversation_id: int) -> dict[str, Any] | None:
    """The payload of the conversation's last ``context.request_size`` event (R2)."""
    row = conn.execute(
        "SELECT payload FROM events WHERE conversation_id = ? AND kind = 'context.request_size'"
        " ORDER BY created_at DESC, id DESC LIMIT 1", (conversation_id,),
    ).fetchone()
    return json.loads(row[0]) if row else None
