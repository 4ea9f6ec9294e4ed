"""Rolling thread summary (RS1): the compact spine of one conversation.

About every ``summary.every`` chat messages (30 by default) a background job asks the helper for
one plain sentence of at most 45 words, made from the newest section of the transcript plus the
previous summary. Each summary is tied to the id of the newest message it covers
(``through_message_id``). Database triggers invalidate a summary when a chat message at or before
that point is edited or deleted, so the layer falls back to the last summary that is still valid
and the next refresh rebuilds from there.

The layer renders the summary as its own system message, "Rolling thread summary for this
conversation only" (see ``prompt.dynamic``): thread continuity, not global truth. Offline
summaries are labelled "(offline summary)".
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from hearth.errors import Conflict, InvalidInput
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import (
    SUMMARY_MAX_WORDS,
    HelperOutputError,
    TurnText,
    clamp_words,
    one_line,
    word_count,
)
from hearth.prompt.dynamic import Block, Turn
from hearth.prompt.layers.settings import LayerSettings
from hearth.records.conversations import chat_turns_after
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import layer_messages, thread_summaries
from hearth.store.queries.layer_messages import SectionTurn
from hearth.store.queries.thread_summaries import ThreadSummary, latest_valid

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context
    from hearth.records.conversations import Conversations

JOB_KIND = "summary.refresh"
SECTION_LIMIT = 60  # at most this many newest messages feed one refresh
LABEL = "ROLLING THREAD SUMMARY"


def is_due(conn: Connection, conversation_id: int, every: int) -> bool:
    previous = latest_valid(conn, conversation_id)
    return chat_turns_after(conn, conversation_id, previous.through_message_id if previous else 0, every) >= every


def _fingerprint(rows: list[SectionTurn]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(f"{row.id}:{row.role}:".encode())
        digest.update(row.content.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class Summaries:
    def __init__(self, store: Store, user_id: int, conversations: "Conversations"):
        self.store = store
        self.user_id = user_id
        self.conversations = conversations

    def current(self, conversation_id: int) -> ThreadSummary | None:
        self.conversations.get(conversation_id)
        return latest_valid(self.store.connection(), conversation_id)

    def history(self, conversation_id: int) -> list[ThreadSummary]:
        self.conversations.get(conversation_id)
        return thread_summaries.history(self.store.connection(), conversation_id)

    def refresh(self, conversation_id: int, helper: "Helper", *, every: int | None = None,
                force: bool = False) -> ThreadSummary | None:
        """Make the next summary if one is due (or ``force``); returns it, or None if nothing to do.

        The helper runs outside any transaction; the section is checked again before saving, so an
        edit made meanwhile is never summarised over.
        """
        self.conversations.get(conversation_id)
        with self.store.read() as conn:
            previous = latest_valid(conn, conversation_id)
            after = previous.through_message_id if previous else 0
            if not force and every is not None and chat_turns_after(conn, conversation_id, after) < every:
                return None
            rows = layer_messages.section_after(conn, conversation_id, after, SECTION_LIMIT)
        if not rows:
            return None
        section = [TurnText(r.role, r.content, r.id) for r in rows]
        try:
            result = helper.summarise(previous.text if previous else "", section, SUMMARY_MAX_WORDS)
            text = one_line(result.text)
            if result.source == "offline":
                text = clamp_words(text, SUMMARY_MAX_WORDS)
            if not text:
                raise HelperOutputError("the summary is empty", "empty")
            if word_count(text) > SUMMARY_MAX_WORDS:
                raise HelperOutputError(f"the summary is longer than {SUMMARY_MAX_WORDS} words", "too_long")
        except HelperOutputError as exc:
            # Skipped (E13): nothing is stored, the previous summary stays, and the next refresh
            # reads this section again with the turns after it.
            with self.store.write() as conn:
                skips.record(conn, self.user_id, "summary", exc, conversation_id=conversation_id)
            return None
        with self.store.write() as conn:
            again = layer_messages.section_between(conn, conversation_id, rows[0].id, rows[-1].id)
            still = latest_valid(conn, conversation_id)
            if _fingerprint(again) != _fingerprint(rows) or (still and still.id != (previous.id if previous else None)):
                raise Conflict("the conversation changed while its summary was being written")
            summary_id = thread_summaries.insert(conn, self.user_id, conversation_id, text, result.source,
                                                 rows[-1].id, len(rows), utcnow())
            from hearth.records import ledger

            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="summary.refreshed",
                          channel="inner", payload={"summary_id": summary_id, "through_message_id": rows[-1].id,
                                                    "section_messages": len(rows), "source": result.source,
                                                    "words": word_count(text)})
            return latest_valid(conn, conversation_id)


class SummaryLayer:
    name = "summary"

    def blocks(self, turn: Turn) -> list[Block]:
        found = latest_valid(turn.conn, turn.conversation.id)
        if found is None:
            return []
        return [Block(layer=self.name, label=LABEL, text=found.display,
                      trust="Local continuity for this thread only; not global truth, not recalled memory.",
                      source_ids=(found.id,), numbers={"words": word_count(found.text),
                                                       "through_message_id": found.through_message_id})]


def refresh_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    conversation_id = payload.get("conversation_id")
    if not isinstance(conversation_id, int):
        raise InvalidInput("summary job needs a conversation id")
    every = None if payload.get("force") else LayerSettings(ctx.store, ctx.user_id).get("summary.every")
    Summaries(ctx.store, ctx.user_id, ctx.conversations).refresh(conversation_id, helper, every=every, force=bool(payload.get("force")))
