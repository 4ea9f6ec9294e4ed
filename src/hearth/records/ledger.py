"""The durable event ledger (S2).

Every message, activity span, checkpoint, memory action, tool call and context-management event is
an append-only row in ``events``, ordered by ``(created_at, id)``. A message is an event whose id is
also the id of its row in ``messages``; both are written in one transaction, so a crash can never
leave a message without its event. Event payloads carry ids, kinds and numbers; conversation text
lives in ``messages`` only, so the ledger can be shown and exported without repeating it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from hearth.errors import InvalidInput
from hearth.store import Connection, utcnow
from hearth.store.queries import ledger as stored
from hearth.store.queries.ledger import Event, Message

CHANNELS = frozenset({"web", "cli", "api", "sms", "email", "voice", "inner", "import"})
MESSAGE_ROLES = frozenset({"system", "user", "assistant", "tool"})
MESSAGE_KINDS = frozenset({"chat", "static_prompt", "handoff_artifact", "tool_result"})


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
    return stored.insert_event(conn, user_id=user_id, kind=kind, conversation_id=conversation_id,
                               channel=check_channel(channel), payload=payload or {},
                               created_at=created_at or utcnow(), span_id=span_id)


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
    return stored.insert_message(conn, user_id=user_id, conversation_id=conversation_id, role=role,
                                 content=content, kind=kind, channel=check_channel(channel), metadata=metadata or {},
                                 created_at=created_at or utcnow(), span_id=span_id)


def replay(conn: Connection, user_id: int, conversation_id: int) -> list[tuple[Event, Message | None]]:
    """Every event of one conversation in ledger order, each message event with its message."""
    events = stored.events_of_conversation(conn, user_id, conversation_id)
    messages = stored.messages_of_conversation(conn, user_id, conversation_id)
    return [(event, messages.get(event.id)) for event in events]


def events_for(conn: Connection, user_id: int, kinds: Iterable[str] | None = None,
               limit: int = 100) -> list[Event]:
    """The newest events of a user, oldest first."""
    return stored.newest_events(conn, user_id, kinds=list(kinds) if kinds else None, limit=limit)


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
    events, messages, problems = stored.verify(conn)
    return VerifyReport(events=events, messages=messages, problems=problems)
