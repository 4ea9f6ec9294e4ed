"""The relationship timeline: spans, idle checkpoints, capsules, context events, chains, resume.

One layer over the ledger (events stay the source of truth):

    spans.py        activity spans (E1), touched in the message's own write transaction
    checkpoints.py  idle checkpoints (E2): memory extraction into the review queue, span closed
    capsules.py     continuity capsules (E3) and their place on the send path
    chains.py       the Responses API working chain and "Compact now" (E7)
    pages.py        the timeline itself (E8): pages with a (timestamp, event id) cursor
    live.py         live-only notices (E6: capsule started / failed)
    activity.py     what runs in a conversation now (a reply, a compaction)

``scope.timeline`` is the front door for one user; ``Hearth.resume()`` is startup (E4).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hearth.continuity.timeline import capsules, chains, checkpoints, pages, spans
from hearth.continuity.timeline.pages import Cursor, Page
from hearth.store.queries import spans as span_rows
from hearth.store.queries import timeline as queries

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context as UserContext
    from hearth.records.conversations import Conversation
    from hearth.thread.turns import ThreadTurn

__all__ = ["Context", "Cursor", "Page", "Resumed", "Timeline", "resume"]

RESUME_TURNS = 20


@dataclass(frozen=True)
class Context:
    """The chat header's figures (E7) for one conversation."""

    conversation_id: int
    input_tokens: int
    threshold_tokens: int
    threshold_kind: str  # compaction | input_limit
    percent: float
    capsule_active: bool
    capsule_source: str | None
    capsule_at: str | None
    last_compaction_at: str | None
    replacement_input_pending: bool
    compaction_available: bool
    running: str  # what runs in the conversation now (see activity.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Timeline:
    """Everything about one user's relationship timeline (``scope.timeline``)."""

    def __init__(self, ctx: "UserContext"):
        self._ctx = ctx
        self.store = ctx.store
        self.user_id = ctx.user_id

    # -- E8 ------------------------------------------------------------------------------------
    def page(self, before: str | Cursor | None = None, limit: int | None = None) -> Page:
        """The newest events (the first page), or the page before a cursor from an earlier page."""
        cursor = Cursor.parse(before) if isinstance(before, str) else before
        size = limit if limit is not None else self._ctx.settings.timeline_history_event_limit
        with self.store.read() as conn:
            return pages.page(conn, self.user_id, before=cursor, limit=size)

    # -- E1 ------------------------------------------------------------------------------------
    def span(self, span_id: int) -> spans.Span:
        with self.store.read() as conn:
            return spans.get(conn, self.user_id, span_id)

    def _touch(self, conn, conversation_id: int, channel: str, *, now: str) -> int:
        """The span a live activity in a conversation belongs to, opened when needed; for other
        activity than the send path (a voice session, an autonomous activation). Runs in the
        caller's write transaction; ``now`` is the activity's own timestamp."""
        conversation = self._ctx.conversations.get(conversation_id)
        idle = self._ctx.settings.idle_checkpoint_minutes * 60
        return spans.touch(conn, self.user_id, conversation.persona_id, channel, now=now,
                           idle_cutoff=spans.stamp(self._ctx.clock() - idle), idle_seconds=idle,
                           conversation_id=conversation.id)

    def open_spans(self) -> list[spans.Span]:
        with self.store.read() as conn:
            return spans.open_spans(conn, self.user_id)

    # -- E2 ------------------------------------------------------------------------------------
    def checkpoint(self, span_id: int, helper: "Helper | None" = None) -> int | None:
        """Run a span's idle checkpoint now if it is due (the worker does this by itself)."""
        return checkpoints.run(self._ctx, span_id, helper or self._helper())

    # -- E3 ------------------------------------------------------------------------------------
    def capsule(self, conversation_id: int) -> capsules.Capsule | None:
        self._ctx.conversations.get(conversation_id)
        with self.store.read() as conn:
            return capsules.latest(conn, conversation_id)

    def refresh_capsule(self, conversation_id: int, helper: "Helper | None" = None) -> capsules.Capsule | None:
        return capsules.refresh(self._ctx, conversation_id, helper or self._helper(), reason="manual")

    # -- E7 ------------------------------------------------------------------------------------
    def compact(self, conversation_id: int, *, channel: str = "web") -> chains.Compaction:
        """Compact now: the Responses compaction endpoint, then a capsule refresh (409 while busy)."""
        return chains.compact(self._ctx, conversation_id, channel=channel)

    def context(self, conversation_id: int) -> "Context":
        """The chat header's figures: input usage against the compaction threshold, capsule, compaction."""
        ctx = self._ctx
        conversation = ctx.conversations.get(conversation_id)
        model = ctx.model_for(conversation)  # the limit follows the conversation's model
        limit = ctx.input_token_limit(model)
        with self.store.read() as conn:
            usage = queries.latest_usage(conn, conversation.id)
            capsule = capsules.latest(conn, conversation.id)
            chain = chains.get(conn, conversation.id)
            compacted = queries.last_compaction_at(conn, conversation.id)
        input_tokens = json.loads(usage).get("input", 0) if usage is not None else 0
        compaction = chains.compaction_threshold_tokens(ctx, model)
        threshold = compaction or limit
        provider = ctx.provider
        return Context(
            conversation_id=conversation.id,
            input_tokens=input_tokens,
            threshold_tokens=threshold,
            threshold_kind="compaction" if compaction else "input_limit",
            percent=round(100 * input_tokens / threshold, 1) if threshold else 0.0,
            capsule_active=capsule is not None,
            capsule_source=capsule.source if capsule else None,
            capsule_at=capsule.created_at if capsule else None,
            last_compaction_at=compacted,
            replacement_input_pending=bool(chain and chain.replacement_input),
            compaction_available=bool(getattr(provider, "chains", False)),
            running=ctx.activity.state(conversation.id),
        )

    def _helper(self) -> "Helper":
        from hearth.memory.helpers import helper_for

        return helper_for(self._ctx)


# -- E4 --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resumed:
    conversation: "Conversation | None"
    turns: list["ThreadTurn"]  # the newest turns, oldest first, rebuilt from the ledger
    capsule: capsules.Capsule | None
    span: spans.Span | None

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation.to_dict() if self.conversation else None,
                "turns": [asdict(t) for t in self.turns],
                "capsule": self.capsule.to_dict() if self.capsule else None,
                "span": self.span.to_dict() if self.span else None}


def resume(ctx: "UserContext", turns: int = RESUME_TURNS) -> Resumed:
    """The most recently active open conversation, its newest turns, latest capsule and open span."""
    from hearth.thread.turns import ThreadTurn

    with ctx.store.read() as conn:
        conversation_id = queries.resumable_conversation(conn, ctx.user_id)
        if conversation_id is None:
            return Resumed(None, [], None, None)
        conversation = ctx.conversations.get(conversation_id)
        recent = queries.newest_turns(conn, conversation.id, turns)
        capsule = capsules.latest(conn, conversation.id)
        span = span_rows.open_of_persona(conn, ctx.user_id, conversation.persona_id)
    return Resumed(conversation, [ThreadTurn(*r) for r in reversed(recent)], capsule, span)
