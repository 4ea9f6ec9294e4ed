"""One way in and one way out for every messaging channel.

``receive`` stores what a known sender wrote on their current thread, in one transaction with its
external id (so a replayed webhook or a re-read mailbox is recognised) and the job that will answer
it. The message is durable before any model runs (the webhook answers at once); the ``channel.reply``
job answers through the ordinary send path and hands the reply to the channel's adapter. Switching
channel never opens a visible new thread: the person's most recently active open conversation with
that persona continues (E5).
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .. import activations, jobs
from ..errors import Forbidden, InvalidInput
from ..store import utcnow
from .contacts import Contact, answers, find

if TYPE_CHECKING:
    from ..engine import Hearth, Scope
    from ..helpers.base import Helper
    from ..ledger import Message

log = logging.getLogger(__name__)

REPLY_JOB = "channel.reply"


@dataclass(frozen=True)
class Inbound:
    """What arrived and what became of it; carries ids only."""

    status: str  # "accepted", "duplicate" (seen before) or "kept" (persona does not answer here)
    user_id: int
    conversation_id: int
    message_id: int
    job_id: int | None = None


def receive(hearth: "Hearth", channel: str, address: str, external_id: str, text: str, *,
            metadata: dict[str, Any] | None = None, user_id: int | None = None) -> Inbound:
    """Store an inbound message from ``address`` on ``channel``; refuse unknown senders.

    ``user_id`` limits the senders to one user's contacts (a mailbox belongs to one user).
    Raises ``Forbidden`` for a sender who is not a contact; nothing is stored then.
    """
    if not isinstance(external_id, str) or not external_id.strip() or len(external_id) > 998:
        raise InvalidInput("an inbound message needs its channel's message id")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the message has no text")
    with hearth.store.write() as conn:
        contact = find(conn, channel, address)
        if contact is None or (user_id is not None and contact.user_id != user_id):
            raise Forbidden(f"{channel} sender is not a contact")
        seen = conn.execute(
            "SELECT conversation_id, message_id FROM channel_messages"
            " WHERE channel = ? AND direction = 'in' AND external_id = ?", (channel, external_id),
        ).fetchone()
        if seen is not None:
            return Inbound("duplicate", contact.user_id, seen[0], seen[1])
        scope = hearth.scope(contact.user_id)
        persona_id = contact.persona_id or scope.personas.default().id
        current = scope.conversations.current(persona_id)
        conversation_id = current.id if current else scope.new_chat(persona_id, channel=channel).conversation.id
        message = scope.conversations.add_message(conversation_id, "user", text, channel=channel,
                                                  metadata=metadata)
        activations.note_user_message(conn, hearth.store, contact.user_id, text, channel)
        conn.execute(
            "INSERT INTO channel_messages (user_id, channel, direction, external_id, conversation_id,"
            " message_id, contact_id, status, created_at) VALUES (?, ?, 'in', ?, ?, ?, ?, 'received', ?)",
            (contact.user_id, channel, external_id, conversation_id, message.id, contact.id, utcnow()),
        )
        if not answers(conn, persona_id, channel):
            return Inbound("kept", contact.user_id, conversation_id, message.id)
        # One pending reply per thread: several texts in a row are answered together.
        job_id = jobs.enqueue(conn, contact.user_id, REPLY_JOB,
                              {"conversation_id": conversation_id, "channel": channel},
                              dedupe_key=f"{channel}:{conversation_id}")
        return Inbound("accepted", contact.user_id, conversation_id, message.id, job_id)


# channel -> deliver(scope, contact, reply, thread headers of what it answers)
Deliver = Callable[["Scope", Contact, "Message", dict[str, str]], None]


def _adapters() -> dict[str, Deliver]:
    from . import mail, sms

    return {"sms": sms.deliver, "email": mail.deliver}


def _latest_turn(conn: sqlite3.Connection, conversation_id: int) -> sqlite3.Row | None:
    return conn.execute(
        "SELECT id, role, channel FROM messages WHERE conversation_id = ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1", (conversation_id,),
    ).fetchone()


def reply_job(scope: "Scope", payload: dict[str, Any], helper: "Helper") -> None:
    """Answer the thread's unanswered channel message and deliver the reply on that channel."""
    conversation_id = int(payload["conversation_id"])
    channel = str(payload["channel"])
    deliver = _adapters()
    if channel not in deliver:
        raise InvalidInput(f"no adapter delivers on {channel!r}")
    conn = scope.store.connection()
    inbound = conn.execute(
        "SELECT message_id, contact_id FROM channel_messages WHERE user_id = ? AND conversation_id = ?"
        " AND channel = ? AND direction = 'in' ORDER BY id DESC LIMIT 1", (scope.user_id, conversation_id, channel),
    ).fetchone()
    if inbound is None:
        return
    latest = _latest_turn(conn, conversation_id)
    if latest is None:
        return
    if latest["role"] == "user":
        reply = scope.retry(conversation_id, channel=channel).assistant_message
    elif latest["channel"] == channel:
        reply = scope.conversations.message(latest["id"])  # answered before a crash: deliver it
    else:
        return  # answered on another channel meanwhile; nothing to send here
    contact = conn.execute("SELECT * FROM channel_contacts WHERE id = ? AND user_id = ?",
                           (inbound["contact_id"], scope.user_id)).fetchone()
    if contact is None:
        log.info("%s reply not delivered: the contact was removed", channel)
        return
    thread = scope.conversations.message(inbound["message_id"]).metadata.get("email", {})
    deliver[channel](scope, Contact(**dict(contact)), reply, thread)


def deliver_reply(scope: "Scope", channel: str, persona_id: int, message: "Message") -> None:
    """Send a message the companion started (E11) to the user's contact on ``channel``: the
    contact that talks to this persona, else the user's first on that channel."""
    row = scope.store.connection().execute(
        "SELECT * FROM channel_contacts WHERE user_id = ? AND channel = ?"
        " ORDER BY persona_id IS NOT ?, id LIMIT 1", (scope.user_id, channel, persona_id)).fetchone()
    if row is None:
        raise InvalidInput(f"there is no {channel} contact to deliver to")
    _adapters()[channel](scope, Contact(**dict(row)), message, {})


def sent_parts(conn: sqlite3.Connection, channel: str, reply_id: int) -> set[str]:
    """External ids of the parts of a reply already delivered (a retried job skips them)."""
    return {r[0] for r in conn.execute(
        "SELECT external_id FROM channel_messages WHERE channel = ? AND direction = 'out' AND message_id = ?",
        (channel, reply_id))}


def record_sent(scope: "Scope", channel: str, external_id: str, reply: "Message", provider_ref: str,
                contact: Contact) -> None:
    with scope.store.write() as conn:
        conn.execute(
            "INSERT INTO channel_messages (user_id, channel, direction, external_id, conversation_id, message_id,"
            " contact_id, provider_ref, status, created_at) VALUES (?, ?, 'out', ?, ?, ?, ?, ?, 'sent', ?)",
            (scope.user_id, channel, external_id, reply.conversation_id, reply.id, contact.id, provider_ref,
             utcnow()),
        )
