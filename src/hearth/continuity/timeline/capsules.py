"""Continuity capsules (E3): a compact account of the relationship for a new or recycled session.

A capsule holds established facts, commitments, unresolved work, corrections, preferences and
cross-channel context. It is written by the helper (the model when one is configured, otherwise
the offline extractive version, labelled as such) from the previous capsule and the turns since,
and covers every turn of the conversation except the newest ``capsule_recent_turns``. It is
persisted as a ``context.capsule`` event (status ``completed``) with its text in ``capsules``;
started and failed refreshes are live notices only (E6).

On the send path the latest capsule travels as its own system message, followed by the verbatim
turns it does not cover; it is never a user or assistant message, and the request-size report
shows it as its own section. A refresh is queued when a reply's input usage crosses
``capsule_threshold`` of the input limit, and after every compaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hearth.errors import InvalidInput
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, TurnText
from hearth.ops.jobs import enqueue
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import capsules as queries
from hearth.store.queries import spans as span_rows
from hearth.store.queries.capsules import HEADING, NOTE, Capsule, latest, latest_sql

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context

__all__ = ["HEADING", "JOB_KIND", "MAX_INPUT_TURNS", "NOTE", "Capsule", "capsule_job", "crossed", "latest",
           "latest_sql", "open_span_of", "refresh", "schedule"]

JOB_KIND = "timeline.capsule"
MAX_INPUT_TURNS = 400


def schedule(conn: Connection, user_id: int, conversation_id: int, reason: str) -> int:
    return enqueue(conn, user_id, JOB_KIND, {"conversation_id": conversation_id, "reason": reason},
                   dedupe_key=f"conversation:{conversation_id}")


def crossed(input_tokens: int, input_limit: int, threshold: float) -> bool:
    return input_limit > 0 and input_tokens >= threshold * input_limit


def refresh(ctx: "Context", conversation_id: int, helper: "Helper", *, reason: str = "threshold") -> Capsule | None:
    """Write a new capsule for a conversation; None when it has no turns to cover yet, or when
    the helper's answer could not be read (skipped, E13).

    Announces ``started`` and, on failure, ``failed`` live only; the completed capsule is an event.
    """
    recent = ctx.settings.capsule_recent_turns
    live = ctx.live
    with ctx.store.read() as conn:
        conversation = ctx.conversations.get(conversation_id)
        previous = latest(conn, conversation.id)
        # The newest `recent` turns stay verbatim; everything before them is what the capsule covers.
        through = queries.boundary(conn, conversation.id, recent)
        since = previous.through_message_id if previous else 0
        if through <= since:
            return None
        rows = queries.turns_between(conn, conversation.id, since, through, MAX_INPUT_TURNS)
    if reason == "threshold" and previous is not None and len(rows) < recent:
        return None  # usage stays high between refreshes: at most one per `recent` new turns
    turns = [TurnText(r.role, r.content, r.id) for r in reversed(rows)]
    channels = sorted({r.channel for r in rows})
    live.publish(ctx.user_id, {"kind": "context.capsule", "status": "started", "conversation_id": conversation.id,
                                 "reason": reason})
    try:
        result = helper.write_capsule(previous.text if previous else "", turns, channels)  # outside a transaction
        if not result.text.strip():
            raise HelperOutputError("the capsule helper wrote nothing", "empty")
    except HelperOutputError as exc:
        # Unreadable even when asked once more (E13): skipped, recorded, not retried by the job;
        # the next threshold crossing or compaction asks again.
        live.publish(ctx.user_id, {"kind": "context.capsule", "status": "failed",
                                   "conversation_id": conversation.id, "error": exc.kind})
        with ctx.store.write() as conn:
            skips.record(conn, ctx.user_id, "capsule", exc, conversation_id=conversation.id,
                         span_id=open_span_of(conn, ctx.user_id, conversation.persona_id))
        return None
    except Exception as exc:
        # Live only (E6); the job records the failure kind and retries (a provider that is down).
        live.publish(ctx.user_id, {"kind": "context.capsule", "status": "failed",
                                     "conversation_id": conversation.id, "error": type(exc).__name__})
        raise
    with ctx.store.write() as conn:
        now = utcnow()
        span_id = open_span_of(conn, ctx.user_id, conversation.persona_id)
        event_id = ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation.id, kind="context.capsule",
                                 channel="inner", created_at=now, span_id=span_id,
                                 payload={"status": "completed", "source": result.source,
                                          "through_message_id": through, "turns": len(turns),
                                          "chars": len(result.text), "reason": reason})
        queries.insert(conn, event_id, ctx.user_id, conversation.id, result.text, result.source, through, now)
        capsule = latest(conn, conversation.id)
    assert capsule is not None
    live.publish(ctx.user_id, {"kind": "context.capsule", "status": "completed", "conversation_id": conversation.id,
                                 "capsule_id": capsule.id})
    return capsule


def open_span_of(conn: Connection, user_id: int, persona_id: int) -> int | None:
    """Capsule refreshes belong to the span whose activity caused them, when it is still open."""
    return span_rows.open_id_of_persona(conn, user_id, persona_id)


def capsule_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    conversation_id = payload.get("conversation_id")
    if not isinstance(conversation_id, int) or isinstance(conversation_id, bool):
        raise InvalidInput("a capsule job needs a conversation id")
    refresh(ctx, conversation_id, helper, reason=str(payload.get("reason", "threshold"))[:20])
