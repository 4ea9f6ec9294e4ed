"""One way out for every messaging channel: the ``channel.reply`` job and companion-started
messages, handed to the channel's adapter (``sms.deliver``, ``mail.deliver``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from hearth.errors import Conflict, InvalidInput
from hearth.outreach.channels import mail, sms
from hearth.outreach.channels.contacts import Contact
from hearth.store.queries import channel_messages, contacts
from hearth.thread.send import answer, last_turn

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context
    from hearth.records.ledger import Message

log = logging.getLogger(__name__)


# channel -> deliver(context, contact, reply, thread headers of what it answers)
Deliver = Callable[["Context", Contact, "Message", dict[str, str]], None]


def _adapters() -> dict[str, Deliver]:
    return {"sms": sms.deliver, "email": mail.deliver}


def reply_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Answer the thread's unanswered channel message and deliver the reply on that channel."""
    conversation_id = int(payload["conversation_id"])
    channel = str(payload["channel"])
    deliver = _adapters()
    if channel not in deliver:
        raise InvalidInput(f"no adapter delivers on {channel!r}")
    conn = ctx.store.connection()
    inbound = channel_messages.latest_inbound(conn, ctx.user_id, conversation_id, channel)
    if inbound is None:
        return
    inbound_message_id, contact_id = inbound
    latest = last_turn(conn, conversation_id)
    if latest is None:
        return
    if latest.role == "user":
        try:
            reply = answer(ctx, conversation_id, channel=channel).assistant_message
        except Conflict:
            # Another reply (a web send, another job) answered this turn meanwhile (U6): what is
            # newest now decides, as if this job had started after it.
            latest = last_turn(ctx.store.connection(), conversation_id)
            if latest is None or latest.role == "user":
                raise
            reply = latest
    else:
        reply = latest  # answered before a crash, or by a racing reply: deliver it (sent parts are skipped)
    if reply.channel != channel:
        return  # answered on another channel meanwhile; nothing to send here
    contact = contacts.get(conn, contact_id, ctx.user_id)
    if contact is None:
        log.info("%s reply not delivered: the contact was removed", channel)
        return
    thread = ctx.conversations.message(inbound_message_id).metadata.get("email", {})
    deliver[channel](ctx, contact, reply, thread)


def deliver_reply(ctx: "Context", channel: str, persona_id: int, message: "Message") -> None:
    """Send a message the companion started (E11) to the user's contact on ``channel``: the
    contact that talks to this persona, else the user's first on that channel."""
    contact = contacts.for_persona_first(ctx.store.connection(), ctx.user_id, channel, persona_id)
    if contact is None:
        raise InvalidInput(f"there is no {channel} contact to deliver to")
    _adapters()[channel](ctx, contact, message, {})
