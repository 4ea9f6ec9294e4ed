"""Thread titles (W4): every untitled thread is named after its first exchange.

Offline the title is the opening of the person's first message (no model involved). When a model
provider is configured, a background job then asks it for a short title, which replaces the
offline one unless the person renamed the thread meanwhile. A title the person gave is never
changed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from hearth.errors import InvalidInput
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError
from hearth.ops import jobs
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import titles

if TYPE_CHECKING:
    from hearth.memory.helpers import Helper
    from hearth.records.context import Context
    from hearth.records.conversations import Conversation
    from hearth.records.ledger import Message

JOB_KIND = "title"
MAX_CHARS = 60
_MARKUP = re.compile(r"[*_`#>\[\]~|]+")


def offline_title(text: str) -> str:
    """The first line of ``text`` without Markdown marks, cut at a word within MAX_CHARS."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(_MARKUP.sub("", line).split())
    if len(line) <= MAX_CHARS:
        return line
    cut = line[:MAX_CHARS].rsplit(" ", 1)[0] or line[:MAX_CHARS]
    return cut.rstrip(",;:.-") + "…"


def after_reply(conn: Connection, conversation: "Conversation", user_message: "Message",
                reply: "Message", *, model_titles: bool) -> None:
    """The hook run after each saved reply: titles an untitled thread after its first exchange."""
    if titles.get(conn, conversation.id) or user_message.role != "user":
        return
    auto = offline_title(user_message.content)
    if not auto:
        return
    titles.set_automatic(conn, conversation.id, auto, utcnow())
    ledger.append(conn, user_id=conversation.user_id, conversation_id=conversation.id, kind="conversation.titled",
                  payload={"source": "first_exchange", "chars": len(auto)})
    if model_titles:
        jobs.enqueue(conn, conversation.user_id, JOB_KIND,
                     {"conversation_id": conversation.id, "user_message_id": user_message.id, "reply_id": reply.id},
                     dedupe_key=f"title:{conversation.id}")


def title_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Ask the model for a short title; keep the offline one if the answer is unusable."""
    conversation_id = payload.get("conversation_id")
    if not isinstance(conversation_id, int):
        raise InvalidInput("a title job needs a conversation id")
    write_title = getattr(helper, "write_title", None)
    if write_title is None:  # the offline helper: the offline title stays
        return
    conversation = ctx.conversations.get(conversation_id)
    user_message = ctx.conversations.message(int(payload["user_message_id"]))
    reply = ctx.conversations.message(int(payload["reply_id"]))
    if conversation.title != offline_title(user_message.content):
        return  # renamed by the person meanwhile
    try:
        title = write_title(user_message.content, reply.content)[:MAX_CHARS * 2]
    except HelperOutputError as exc:
        # Skipped (E13): the offline title stays, and the job is done.
        with ctx.store.write() as conn:
            skips.record(conn, ctx.user_id, "title", exc, conversation_id=conversation_id)
        return
    if not title:
        return
    with ctx.store.write() as conn:
        current = titles.of_user(conn, ctx.user_id, conversation_id)
        if current is None or current != conversation.title:
            return
        titles.set_from_model(conn, conversation_id, title)
        ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation_id, kind="conversation.titled",
                      payload={"source": "model", "chars": len(title)})
