"""The durable event ledger (S2).

Every message, activity span, checkpoint, memory action, tool call and context-management event is
an append-only row in ``events``, ordered by ``(created_at, id)``. A message is an event whose id is
also the id of its row in ``messages``; both are written in one transaction, so a crash can never
leave a message without its event. Event payloads carry ids, kinds and numbers; conversation text
lives in ``messages`` only, so the ledger can be shown and exported without repeating it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from hearth.errors import ConstraintError, InvalidInput
from hearth.store import Connection, Row, engine_of, inserted_id, utcnow
from hearth.store.queries.ledger import Message

CHANNELS = frozenset({"web", "cli", "api", "sms", "email", "voice", "inner", "import"})
MESSAGE_ROLES = frozenset({"system", "user", "assistant", "tool"})
MESSAGE_KINDS = frozenset({"chat", "static_prompt", "handoff_artifact", "tool_result"})


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


def check_channel(channel: str) -> str:
    if channel not in CHANNELS:
        raise InvalidInput(f"unknown channel {channel!r}; expected one of {', '.join(sorted(CHANNELS))}")
    return channel


def append(
    conn: Connection,
    *,
    user_id: int,
    kind: str,
    conversation_id: int | None = None,
    channel: str = "web",
    payload: dict[str, Any] | None = None,
    created_at: str | None = None,
    span_id: int | None = None,
) -> int:
    """Append one event; the caller holds the write transaction."""
    cur = conn.execute(
        "INSERT INTO events (user_id, conversation_id, kind, channel, created_at, payload, span_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, conversation_id, kind, check_channel(channel), created_at or utcnow(),
         json.dumps(payload or {}, separators=(",", ":")), span_id),
    )
    return inserted_id(cur)


def append_message(
    conn: Connection,
    *,
    user_id: int,
    conversation_id: int,
    role: str,
    content: str,
    kind: str = "chat",
    channel: str = "web",
    metadata: dict[str, Any] | None = None,
    created_at: str | None = None,
    span_id: int | None = None,
) -> int:
    """Append a message and its event in the caller's transaction; return the message id."""
    if role not in MESSAGE_ROLES:
        raise InvalidInput(f"unknown role {role!r}")
    if kind not in MESSAGE_KINDS:
        raise InvalidInput(f"unknown message kind {kind!r}")
    created_at = created_at or utcnow()
    meta = json.dumps(metadata or {}, ensure_ascii=False, separators=(",", ":"))
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
            (user_id, conversation_id, check_channel(channel), created_at,
             json.dumps({"role": role, "kind": kind, "chars": len(content)}, separators=(",", ":")), span_id,
             user_id, conversation_id, role, kind, content, channel, created_at, meta,
             created_at, conversation_id, created_at)).fetchone()
        if not row[1]:
            # As the one-row INSERT on its own reports it (see store/postgres.py): the caller's
            # transaction stays usable, as on SQLite.
            raise ConstraintError("UNIQUE constraint failed: messages")
        return int(row[0])
    event_id = append(
        conn,
        user_id=user_id,
        kind="message",
        conversation_id=conversation_id,
        channel=channel,
        payload={"role": role, "kind": kind, "chars": len(content)},
        created_at=created_at,
        span_id=span_id,
    )
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


def replay(conn: Connection, user_id: int, conversation_id: int) -> list[tuple[Event, Message | None]]:
    """Every event of one conversation in ledger order, each message event with its message."""
    events = conn.execute(
        "SELECT * FROM events WHERE user_id = ? AND conversation_id = ? ORDER BY created_at, id",
        (user_id, conversation_id),
    ).fetchall()
    messages = {row["id"]: Message.from_row(row) for row in conn.execute(
        "SELECT * FROM messages WHERE user_id = ? AND conversation_id = ?", (user_id, conversation_id))}
    return [(Event.from_row(row), messages.get(row["id"])) for row in events]


def events_for(conn: Connection, user_id: int, kinds: Iterable[str] | None = None,
               limit: int = 100) -> list[Event]:
    """The newest events of a user, oldest first."""
    sql = "SELECT * FROM events WHERE user_id = ?"
    args: list[Any] = [user_id]
    if kinds:
        kinds = list(kinds)
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        args += kinds
    sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
    rows = conn.execute(sql, (*args, limit)).fetchall()
    return [Event.from_row(r) for r in reversed(rows)]


@dataclass
class VerifyReport:
    events: int = 0
    messages: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(conn: Connection) -> VerifyReport:
    """Check the ledger: every message has its event and vice versa, owners agree, indexes agree.
    A message event may also have its row in ``branch_messages`` (a turn put away by an edit, W2).

    Every count and check reads one snapshot (one read transaction), so a writer committing
    meanwhile cannot produce a false mismatch; each check is one pass over its tables (deleted
    message ids are collected once, not looked up per event), so the cost grows linearly with the
    ledger. Problems are described with ids and counts only, never content.
    """
    engine = engine_of(conn)
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        report = VerifyReport(
            events=conn.execute("SELECT count(*) FROM events").fetchone()[0],
            messages=conn.execute("SELECT count(*) FROM messages").fetchone()[0],
        )
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
                report.problems.append(f"{label}: ids {ids}")
        # Zero where the engine checks every reference as each statement runs (PostgreSQL).
        fk = engine.foreign_key_violations(conn)
        if fk:
            report.problems.append(f"foreign key violations: {fk}")
        report.problems.extend(engine.index_problems(conn))
    finally:
        if own:
            conn.execute("COMMIT")
    # The index's own check (FTS5's is issued as a write statement) runs after the snapshot ends.
    report.problems.extend(engine.index_damage(conn))
    return report
