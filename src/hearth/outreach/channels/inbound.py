"""One way in for every messaging channel, and the record of what went out.

``receive`` stores what a known sender wrote on their current thread (``send.save_turn``, as the
chat saves a typed message), in one transaction with its external id (so a replayed webhook or a
re-read mailbox is recognised) and the job that will answer it. The message is durable before any
model runs (the webhook answers at once); the ``channel.reply`` job (``outbound.reply_job``) answers
it with the ordinary send path (``send.answer``) and hands the reply to the channel's adapter. Switching channel never opens a visible new thread: the person's most recently
active open conversation with that persona continues (E5).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from hearth.continuity.branch import new_chat
from hearth.continuity.timeline import spans
from hearth.errors import Forbidden, InvalidInput
from hearth.outreach.channels.contacts import Contact, answers, find
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import channel_messages
from hearth.thread.send import save_turn

if TYPE_CHECKING:
    from hearth.records.context import Context, Deployment
    from hearth.records.ledger import Message

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


def receive(deployment: "Deployment", channel: str, address: str, external_id: str, text: str, *,
            metadata: dict[str, Any] | None = None, user_id: int | None = None) -> Inbound:
    """Store an inbound message from ``address`` on ``channel``; refuse unknown senders.

    ``user_id`` limits the senders to one user's contacts (a mailbox belongs to one user).
    Raises ``Forbidden`` for a sender who is not a contact; nothing is stored then.
    """
    return _receive(deployment.store, deployment.context, channel, address, external_id, text, metadata=metadata,
                    user_id=user_id)


def receive_for(ctx: "Context", channel: str, address: str, external_id: str, text: str, *,
                metadata: dict[str, Any] | None = None) -> Inbound:
    """``receive`` limited to one user's contacts (a mailbox belongs to one user)."""
    return _receive(ctx.store, lambda _user_id: ctx, channel, address, external_id, text, metadata=metadata,
                    user_id=ctx.user_id)


def _receive(store: Store, context: Callable[[int], "Context"], channel: str, address: str, external_id: str,
             text: str, *, metadata: dict[str, Any] | None, user_id: int | None) -> Inbound:
    if not isinstance(external_id, str) or not external_id.strip() or len(external_id) > 998:
        raise InvalidInput("an inbound message needs its channel's message id")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the message has no text")
    with store.write() as conn:
        contact = find(conn, channel, address)
        if contact is None or (user_id is not None and contact.user_id != user_id):
            raise Forbidden(f"{channel} sender is not a contact")
        seen = channel_messages.seen_inbound(conn, channel, external_id)
        if seen is not None:
            return Inbound("duplicate", contact.user_id, seen[0], seen[1])
        ctx = context(contact.user_id)
        persona_id = contact.persona_id or ctx.personas.default().id
        current = ctx.conversations.current(persona_id)
        conversation_id = current.id if current else new_chat(ctx, persona_id, channel=channel).conversation.id
        span_id, now = spans.touch_now(conn, ctx, persona_id, channel, conversation_id=conversation_id)
        message = save_turn(ctx, conn, conversation_id, text, channel=channel, metadata=metadata, created_at=now,
                            span_id=span_id)
        channel_messages.record_inbound(conn, contact.user_id, channel, external_id, conversation_id, message.id,
                                        contact.id, utcnow())
        if not answers(conn, persona_id, channel):
            return Inbound("kept", contact.user_id, conversation_id, message.id)
        # One pending reply per thread: several texts in a row are answered together.
        job_id = ctx.enqueue(conn, REPLY_JOB, {"conversation_id": conversation_id, "channel": channel},
                             dedupe_key=f"{channel}:{conversation_id}")
        return Inbound("accepted", contact.user_id, conversation_id, message.id, job_id)


def sent_parts(conn: Connection, channel: str, reply_id: int) -> set[str]:
    """External ids of the parts of a reply already delivered (a retried job skips them)."""
    return channel_messages.sent_parts(conn, channel, reply_id)


def record_sent(ctx: "Context", channel: str, external_id: str, reply: "Message", provider_ref: str,
                contact: Contact) -> None:
    with ctx.store.write() as conn:
        channel_messages.record_sent(conn, ctx.user_id, channel, external_id, reply.conversation_id, reply.id,
                                     contact.id, provider_ref, utcnow())
