"""Activity spans (E1): bursts of activity grouped as containers in the relationship timeline.

A span is a text exchange, a voice session, an autonomous activation or an import. It is an
observability container, never a chat: conversations go on across spans and a span may touch
several conversations of the same companion. At most one span per user and companion is open (a
partial unique index holds it). Opening and closing are ledger events (``span.opened``,
``span.closed``); the ``spans`` row is the view kept in the same transaction, and every event that
happens inside a span carries its id.

The send path pays for this with one indexed ``UPDATE ... RETURNING`` in the message's existing
write transaction. Only when no fresh span of the same kind is open does it do more: close a stale
one (the idle checkpoint job may not have run yet, e.g. while the server was down), open a new one
and queue its checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from hearth.errors import NotFound
from hearth.ops.jobs import enqueue
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import spans as queries
from hearth.store.queries.spans import Span

if TYPE_CHECKING:
    from hearth.records.context import Context

CHECKPOINT_JOB = "timeline.checkpoint"
KIND_OF_CHANNEL = {"voice": "voice", "inner": "inner", "import": "import"}  # every other channel: text


def span_kind(channel: str) -> str:
    return KIND_OF_CHANNEL.get(channel, "text")


def stamp(epoch: float) -> str:
    """The sortable UTC form of every timestamp column (see ``store.utcnow``)."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(stamp_text: str) -> float:
    return datetime.strptime(stamp_text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def touch(conn: Connection, user_id: int, persona_id: int | None, channel: str, *, now: str,
          idle_cutoff: str, idle_seconds: float, conversation_id: int | None = None) -> int:
    """The id of the open span this activity belongs to, opening one when needed.

    ``now`` is the activity's timestamp; a span whose last activity is older than ``idle_cutoff``
    is stale and is closed instead of extended. Runs in the caller's write transaction.
    """
    kind = span_kind(channel)
    fresh = queries.extend_fresh(conn, user_id, persona_id, kind, now=now, idle_cutoff=idle_cutoff)
    if fresh is not None:
        return fresh
    stale = queries.open_of(conn, user_id, persona_id)
    if stale is not None:
        reason = "idle" if stale.last_at < idle_cutoff else "switched"
        close(conn, user_id, stale, reason, at=now)
        # Its turns still go to memory extraction: the checkpoint job runs at once.
        enqueue(conn, user_id, CHECKPOINT_JOB, {"span_id": stale.id}, dedupe_key=f"span:{stale.id}")
    return open_span(conn, user_id, persona_id, channel, now=now, idle_seconds=idle_seconds,
                     conversation_id=conversation_id, checkpoint=kind != "import")


def keep_open(conn: Connection, ctx: "Context", span_id: int, persona_id: int | None, channel: str, *,
              conversation_id: int | None = None) -> int:
    """The span for a turn of an exchange already under way (its reply, a tool round): the send's
    own span, kept open and extended however long the reply streamed. If a checkpoint closed it
    meanwhile (another process's worker), the turn joins the span open now, or a new one, so the
    next checkpoint still reads it (E2)."""
    if queries.extend(conn, ctx.user_id, span_id, now=utcnow()):
        return span_id
    return touch_now(conn, ctx, persona_id, channel, conversation_id=conversation_id)[0]


def touch_now(conn: Connection, ctx: "Context", persona_id: int | None, channel: str, *,
              conversation_id: int | None = None) -> tuple[int, str]:
    """``touch`` for activity happening now, judged by the deployment's clock and idle setting;
    returns the span id and the timestamp used."""
    idle = ctx.settings.idle_checkpoint_minutes * 60
    now = utcnow()
    span_id = touch(conn, ctx.user_id, persona_id, channel, now=now, idle_cutoff=stamp(ctx.clock() - idle),
                    idle_seconds=idle, conversation_id=conversation_id)
    return span_id, now


def open_span(conn: Connection, user_id: int, persona_id: int | None, channel: str, *, now: str,
              idle_seconds: float, conversation_id: int | None = None, checkpoint: bool = True) -> int:
    span_id = queries.insert(conn, user_id, persona_id, span_kind(channel), channel, now=now)
    event_id = ledger.append(conn, user_id=user_id, conversation_id=conversation_id, kind="span.opened",
                             channel=channel, created_at=now, span_id=span_id,
                             payload={"span_id": span_id, "kind": span_kind(channel)})
    queries.set_start_event(conn, span_id, event_id)
    if not checkpoint:
        return span_id
    # The idle checkpoint (E2) is a durable job; it reschedules itself while the span stays busy.
    enqueue(conn, user_id, CHECKPOINT_JOB, {"span_id": span_id}, dedupe_key=f"span:{span_id}",
            delay=idle_seconds)
    return span_id


@contextmanager
def burst(conn: Connection, ctx: "Context", persona_id: int | None, channel: str, *,
          reason: str) -> Iterator[int]:
    """A span that opens and closes inside the caller's transaction: activity that happens all at
    once (an import). It queues no checkpoint: what it brought is not a conversation that went idle."""
    span_id, _now = touch_now(conn, ctx, persona_id, channel)
    yield span_id
    close(conn, ctx.user_id, get(conn, ctx.user_id, span_id), reason, at=utcnow())


def close(conn: Connection, user_id: int, span: Span, reason: str, *, at: str,
          checkpoint_event_id: int | None = None) -> None:
    queries.set_closed(conn, span.id, at=max(at, span.last_at), reason=reason)
    ledger.append(conn, user_id=user_id, kind="span.closed", channel=span.channel, span_id=span.id,
                  created_at=max(at, span.last_at),
                  payload={"span_id": span.id, "reason": reason, "checkpoint_event_id": checkpoint_event_id})


def get(conn: Connection, user_id: int, span_id: int) -> Span:
    span = queries.get(conn, user_id, span_id)
    if span is None:
        raise NotFound(f"no span {span_id}")
    return span


def open_spans(conn: Connection, user_id: int) -> list[Span]:
    return queries.open_spans(conn, user_id)


def by_ids(conn: Connection, user_id: int, ids: set[int]) -> dict[int, Span]:
    return queries.by_ids(conn, user_id, ids)
