"""Idle checkpoints (E2): after the idle period, extract memories from new turns and close the span.

Opening a span queues a ``timeline.checkpoint`` job due one idle period later. When it runs:

- if the span saw activity since, or a reply of it is still streaming, the job queues itself again
  for one idle period after that activity and stops;
- otherwise the turns added since the previous checkpoint (per conversation, after the cursor
  ``timeline.checkpoint`` in ``layer_cursors``, and only those the span holds) go to the helper's
  memory extraction, outside any transaction;
- the same turns go to the helper's fact extraction (short statements citing their turns, for
  retrieval: rules offline, the model with a provider);
- each of the two is a task of its own (E13): an answer that cannot be read, even when asked
  once more, skips that task alone (a ``helper.skipped`` event); the other's results are written
  and the span still closes, so its turns are never extracted again;
- then ONE transaction re-checks that nothing moved, writes the facts (``retrieval/facts.py``;
  embedded by the background embedding job it queues), appends the ``checkpoint.created`` event,
  queues the extracted memories in the review queue (G4: suggestions, never applied silently),
  advances the cursors and closes the span.

A crash before that transaction commits leaves everything as it was (the job is claimed again
when its lease runs out); a crash after it leaves a span that already has its checkpoint, which
the rerun sees and skips. So a restart at any point neither loses nor repeats a checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hearth.continuity.timeline import spans as span_store
from hearth.continuity.timeline.spans import CHECKPOINT_JOB, Span, epoch
from hearth.errors import InvalidInput
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import FactSuggestion, HelperOutputError, MemorySuggestion, TurnText
from hearth.ops.jobs import cursor, enqueue, set_cursor
from hearth.records import ledger
from hearth.retrieval import facts as fact_store
from hearth.retrieval.embedding_job import EMBED_JOB, EMBED_JOB_SLICE
from hearth.store import Connection, utcnow
from hearth.store.queries import spans as span_rows
from hearth.store.queries import timeline as queries

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context

CURSOR_LAYER = "timeline.checkpoint"
MAX_TURNS = 400  # per checkpoint; a larger backlog is taken by the next one


def new_turns(conn: Connection, user_id: int, span: Span) -> list[tuple[int, TurnText]]:
    """(conversation id, turn) of chat turns this span holds that no checkpoint has read yet."""
    return [(t.conversation_id, TurnText(t.role, t.content, t.id))
            for t in queries.unread_span_turns(conn, user_id, span.id, CURSOR_LAYER, MAX_TURNS)]


def run(ctx: "Context", span_id: int, helper: "Helper") -> int | None:
    """Checkpoint one span if it is idle; returns the checkpoint event id, or None if not (yet) due."""
    store = ctx.store
    idle = ctx.settings.idle_checkpoint_minutes * 60
    with store.read() as conn:
        span = span_store.get(conn, ctx.user_id, span_id)
        if span.checkpoint_event_id is not None:
            return None  # done before (a rerun after a crash, or a duplicate job)
        now = ctx.clock()
        due_in = epoch(span.last_at) + idle - now if span.open else 0.0
        if span.open and ctx.activity.span_busy(span.id):
            due_in = max(due_in, idle)  # a reply is streaming: its save extends the span
        turns = new_turns(conn, ctx.user_id, span) if due_in <= 0 else []
    if due_in > 0:
        # Still active: come back one idle period after its last activity.
        with store.write() as conn:
            enqueue(conn, ctx.user_id, CHECKPOINT_JOB, {"span_id": span.id}, dedupe_key=f"span:{span.id}",
                    delay=due_in, now=now)
        return None
    # Outside any transaction; each task fails on its own (E13): an unreadable answer skips that
    # task alone, and the other's results are still written below.
    skipped: list[tuple[str, HelperOutputError]] = []
    suggestions: list[MemorySuggestion] = []
    found_facts: list[FactSuggestion] = []
    if turns:
        texts = [t for _c, t in turns]
        try:
            suggestions = helper.extract_memories(texts)
        except HelperOutputError as exc:
            skipped.append(("memories", exc))
        try:
            found_facts = helper.extract_facts(texts)
        except HelperOutputError as exc:
            skipped.append(("facts", exc))
    ctx.review().prepare([s.text for s in suggestions])
    with store.write() as conn:
        fresh = span_store.get(conn, ctx.user_id, span_id)
        if fresh.checkpoint_event_id is not None:
            return None
        if fresh.last_at != span.last_at or (fresh.open and ctx.activity.span_busy(span.id)):
            # New activity while extracting: try again one idle period after it.
            enqueue(conn, ctx.user_id, CHECKPOINT_JOB, {"span_id": span.id}, dedupe_key=f"span:{span.id}",
                    delay=idle, now=ctx.clock())
            return None
        at = max(utcnow(), _newest_event(conn, ctx.user_id))
        conversations = sorted({c for c, _t in turns})
        # A turn forgotten while the helper worked is not cited; a fact citing none of its turns any
        # more is not written (facts.add returns None).
        written = sum(1 for f in found_facts
                      if fact_store.add(conn, ctx.user_id, f.text, f.message_ids, source=f.source, span_id=span.id,
                                        created_at=at) is not None)
        if written:
            enqueue(conn, ctx.user_id, EMBED_JOB, {"limit": EMBED_JOB_SLICE}, dedupe_key="embed")
        for task, error in skipped:
            skips.record(conn, ctx.user_id, task, error, span_id=span.id, created_at=at)
        event_id = ledger.append(
            conn, user_id=ctx.user_id, kind="checkpoint.created", channel="inner", span_id=span.id,
            created_at=at,
            payload={"span_id": span.id, "turns": len(turns), "conversations": len(conversations),
                     "suggestions": len(suggestions), "facts": written, "skipped": len(skipped),
                     "through_message_id": turns[-1][1].message_id if turns else 0})
        conversation_of = {t.message_id: c for c, t in turns}
        evidence_conversation = conversations[-1] if conversations else None
        for s in suggestions:
            source_conversation = next((conversation_of[t.message_id] for _c, t in turns
                                        if s.evidence and s.evidence in t.text), evidence_conversation)
            ctx.review().propose("memory_add", {"text": s.text, "category": s.category}, s.reason,
                                        evidence=s.evidence, source=s.source, conversation_id=source_conversation,
                                        span_id=span.id)
        for conversation_id in conversations:
            last = max(t.message_id for c, t in turns if c == conversation_id)
            set_cursor(conn, ctx.user_id, conversation_id, CURSOR_LAYER, last)
        span_rows.set_checkpoint(conn, span.id, event_id)
        if fresh.open:
            span_store.close(conn, ctx.user_id, fresh, "idle", at=at, checkpoint_event_id=event_id)
    return event_id


def _newest_event(conn: Connection, user_id: int) -> str:
    """Events are only ever appended at the newest end of the timeline (E8), even if clocks differ."""
    return queries.newest_event_at(conn, user_id)


def checkpoint_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    span_id = payload.get("span_id")
    if not isinstance(span_id, int) or isinstance(span_id, bool):
        raise InvalidInput("a checkpoint job needs a span id")
    run(ctx, span_id, helper)


def pending_turns(ctx: "Context", conversation_id: int) -> int:
    """Chat turns of a conversation that no checkpoint has read yet (for status displays)."""
    with ctx.store.read() as conn:
        after = cursor(conn, conversation_id, CURSOR_LAYER)
        return queries.chat_turns_since(conn, conversation_id, after)
