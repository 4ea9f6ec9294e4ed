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
from dataclasses import dataclass
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
from hearth.store import Connection, Row, Store, inserted_id, utcnow

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context
    from hearth.records.conversations import Conversations

JOB_KIND = "summary.refresh"
OFFLINE_LABEL = "(offline summary)"
SECTION_LIMIT = 60  # at most this many newest messages feed one refresh
LABEL = "ROLLING THREAD SUMMARY"


@dataclass(frozen=True)
class ThreadSummary:
    id: int
    conversation_id: int
    text: str
    source: str
    through_message_id: int
    section_messages: int
    created_at: str
    invalidated_at: str | None

    @property
    def display(self) -> str:
        """The text for people and the model, offline output labelled as such (G3)."""
        return f"{OFFLINE_LABEL} {self.text}" if self.source == "offline" else self.text

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "display": self.display, "words": word_count(self.text)}


_SQL = ("SELECT id, conversation_id, text, source, through_message_id, section_messages, created_at,"
        " invalidated_at FROM thread_summaries")


def latest_valid(conn: Connection, conversation_id: int) -> ThreadSummary | None:
    row = conn.execute(_SQL + " WHERE conversation_id = ? AND invalidated_at IS NULL"
                       " ORDER BY through_message_id DESC, id DESC LIMIT 1", (conversation_id,)).fetchone()
    return ThreadSummary(*row) if row else None


def is_due(conn: Connection, conversation_id: int, every: int) -> bool:
    previous = latest_valid(conn, conversation_id)
    return chat_turns_after(conn, conversation_id, previous.through_message_id if previous else 0, every) >= every


def _fingerprint(rows: list[Row]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(f"{row['id']}:{row['role']}:".encode())
        digest.update(row["content"].encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _section(conn: Connection, conversation_id: int, after_id: int) -> list[Row]:
    rows = conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?", (conversation_id, after_id, SECTION_LIMIT),
    ).fetchall()
    rows.reverse()
    return rows


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
        rows = self.store.connection().execute(_SQL + " WHERE conversation_id = ? ORDER BY id DESC",
                                               (conversation_id,)).fetchall()
        return [ThreadSummary(*r) for r in rows]

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
            rows = _section(conn, conversation_id, after)
        if not rows:
            return None
        section = [TurnText(r["role"], r["content"], r["id"]) for r in rows]
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
            again = [r for r in conn.execute(
                "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id >= ? AND id <= ?"
                " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id",
                (conversation_id, rows[0]["id"], rows[-1]["id"]))]
            still = latest_valid(conn, conversation_id)
            if _fingerprint(again) != _fingerprint(rows) or (still and still.id != (previous.id if previous else None)):
                raise Conflict("the conversation changed while its summary was being written")
            cur = conn.execute(
                "INSERT INTO thread_summaries (user_id, conversation_id, text, source, through_message_id,"
                " section_messages, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (self.user_id, conversation_id, text, result.source, rows[-1]["id"], len(rows), utcnow()))
            summary_id = inserted_id(cur)
            from hearth.records import ledger

            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="summary.refreshed",
                          channel="inner", payload={"summary_id": summary_id, "through_message_id": rows[-1]["id"],
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
