"""Live context and nudges (LC1, LC2): what is going on in one thread right now.

A small per-thread state: mood, events, needs and a short summary for the side panel. A background
job refreshes it after ``live_context.every`` new chat messages (6 by default); opening or switching
to a thread whose state is older than ``live_context.stale_minutes`` and has unread messages queues a
refresh too; the person can edit it by hand at any time (the next refresh reads that edit as its
starting point).

Nudges are optional follow-ups the companion may use later if they fit. Each carries a hidden
marker such as ``[n:3f2a]`` that the model is told it may echo. After a reply, a nudge is marked
used when its marker was echoed or the reply clearly covers its words; a used nudge is never
offered again, and echoed markers are stripped from the saved reply.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from hearth.errors import InvalidInput, NotFound
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, LiveContextResult, TurnText, clip, content_words
from hearth.prompt.dynamic import Block, Turn
from hearth.records import ledger
from hearth.records.conversations import chat_turns_after
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import live_context as queries
from hearth.store.queries.live_context import LiveState, Nudge
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context
    from hearth.records.conversations import Conversations
    from hearth.records.ledger import Message

JOB_KIND = "live_context.refresh"
RECENT_MESSAGES = 12
MAX_OPEN_NUDGES = 3
FIELD_LIMITS = {"mood": 120, "events": 400, "needs": 300, "summary": 160}
MARKER_RE = re.compile(r"[ \t]?\[n:([0-9a-f]{4})\]")
# Words that say nothing about a nudge's subject, so they never count as overlap.
_NUDGE_FILLER = frozenset({"ask", "went", "how", "check", "later", "follow", "see", "whether", "about"})

LABEL = "LIVE CONTEXT FOR THIS THREAD"
TRUST = {
    "offline": "What is going on in this thread right now, noted by simple offline rules (offline notes; may "
               "be incomplete). Lighter than memory: present mood and pressures, not permanent facts.",
    "model": "What is going on in this thread right now, noted by a helper model. Lighter than memory: "
             "present mood and pressures, not permanent facts.",
    "manual": "What is going on in this thread right now, written by the person. Lighter than memory: "
              "present mood and pressures, not permanent facts.",
}
NUDGE_HEADING = ("Check-in prompts (optional; use at most one, only if it fits naturally; if you use one, "
                 "you may include its marker, e.g. [n:0000], and it will be hidden):")


def _nudges(conn: Connection, conversation_id: int, status: str | None = "open") -> tuple[Nudge, ...]:
    return queries.nudges(conn, conversation_id, status)


def state(conn: Connection, conversation_id: int) -> LiveState | None:
    found = queries.get(conn, conversation_id)
    nudges = _nudges(conn, conversation_id)
    if found is None:
        if not nudges:
            return None
        return LiveState(conversation_id, "", "", "", "", "manual", 0, nudges[0].created_at, nudges)
    return replace(found, nudges=nudges)


def _latest_chat_id(conn: Connection, conversation_id: int) -> int:
    return queries.latest_chat_id(conn, conversation_id)


def is_due(conn: Connection, conversation_id: int, every: int) -> bool:
    through = queries.through_message_id(conn, conversation_id)
    return chat_turns_after(conn, conversation_id, through if through is not None else 0, every) >= every


def is_stale(conn: Connection, conversation_id: int, stale_minutes: int, now: datetime | None = None) -> bool:
    """Unread messages exist and the state is older than the stale age (or there is no state yet)."""
    row = queries.read_up_to(conn, conversation_id)
    if chat_turns_after(conn, conversation_id, row[0] if row else 0, 1) == 0:
        return False
    if row is None:
        return True
    updated = datetime.strptime(row[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (now or datetime.now(timezone.utc)) - updated >= timedelta(minutes=stale_minutes)


def _new_marker(conn: Connection, conversation_id: int) -> str:
    for _ in range(50):
        marker = secrets.token_hex(2)
        if not queries.marker_taken(conn, conversation_id, marker):
            return marker
    raise InvalidInput("this conversation has too many nudges")


def _add_nudge(conn: Connection, user_id: int, conversation_id: int, text: str, source: str) -> int | None:
    """Insert a nudge unless the same text was ever offered in this thread (used ones never return)."""
    text = clip(text, 200)
    for offered in queries.nudge_texts(conn, conversation_id):
        if offered.casefold() == text.casefold():
            return None
    return queries.insert_nudge(conn, user_id, conversation_id, text, _new_marker(conn, conversation_id), source,
                                utcnow())


def _used_by(nudge: Nudge, reply: str, markers: set[str]) -> bool:
    if nudge.marker in markers:
        return True
    wanted = {w for w in content_words(nudge.text) if w not in _NUDGE_FILLER}
    if len(wanted) < 2:
        return False
    hit = wanted & set(content_words(reply))
    return len(hit) >= 2 and len(hit) * 2 >= len(wanted)


def strip_markers(text: str) -> str:
    """Remove echoed nudge markers (faces may call this on streamed text too)."""
    return MARKER_RE.sub("", text)


_PARTIAL_MARKER_RE = re.compile(r"[ \t]?\[(?:n(?::[0-9a-f]{0,4})?)?$")


class MarkerFilter:
    """Strips nudge markers from a streamed reply, holding back a marker split across deltas."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        text = self._held + delta
        partial = _PARTIAL_MARKER_RE.search(text)
        self._held = partial.group() if partial else ""
        return strip_markers(text[: partial.start()] if partial else text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


class LiveContext:
    def __init__(self, store: Store, user_id: int, conversations: "Conversations"):
        self.store = store
        self.user_id = user_id
        self.conversations = conversations

    def get(self, conversation_id: int) -> LiveState | None:
        self.conversations.get(conversation_id)
        with self.store.read() as conn:
            return state(conn, conversation_id)

    def nudges(self, conversation_id: int, status: str | None = None) -> list[Nudge]:
        self.conversations.get(conversation_id)
        if status not in (None, "open", "used", "dropped"):
            raise InvalidInput("status must be open, used or dropped")
        return list(_nudges(self.store.connection(), conversation_id, status))

    def set(self, conversation_id: int, **values: str | None) -> LiveState:
        """Edit by hand; fields left out keep their value. The state counts as read up to now."""
        unknown = set(values) - set(FIELD_LIMITS)
        if unknown:
            raise InvalidInput(f"unknown live context field {sorted(unknown)[0]!r}")
        for name, value in values.items():
            if value is not None and (not isinstance(value, str) or len(value) > FIELD_LIMITS[name]):
                raise InvalidInput(f"{name} must be text of at most {FIELD_LIMITS[name]} characters")
            if value is not None:
                check_text(value, name)
        with self.store.write() as conn:
            self.conversations.get(conversation_id)
            before = state(conn, conversation_id)
            merged: dict[str, str] = {}
            for name in FIELD_LIMITS:
                value = values.get(name)
                merged[name] = value if value is not None else (getattr(before, name) if before else "")
            self._save(conn, conversation_id, merged, "manual", _latest_chat_id(conn, conversation_id))
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="live_context.edited",
                          payload={"fields": sorted(k for k, v in values.items() if v is not None)})
            saved = state(conn, conversation_id)
            assert saved is not None, "the live context was written in this transaction"
            return saved

    def add_nudge(self, conversation_id: int, text: str) -> Nudge:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("a nudge needs text")
        check_text(text, "a nudge")
        with self.store.write() as conn:
            self.conversations.get(conversation_id)
            nudge_id = _add_nudge(conn, self.user_id, conversation_id, text, "manual")
            if nudge_id is None:
                raise InvalidInput("this nudge was already offered in this conversation")
            added = queries.nudge(conn, nudge_id)
            assert added is not None, "the nudge was written in this transaction"
            return added

    def drop_nudge(self, conversation_id: int, nudge_id: int) -> None:
        with self.store.write() as conn:
            self.conversations.get(conversation_id)
            if not queries.drop_open_nudge(conn, self.user_id, conversation_id, nudge_id):
                raise NotFound(f"no open nudge {nudge_id}")

    def open(self, conversation_id: int, stale_minutes: int) -> tuple[LiveState | None, bool]:
        """On opening or switching to a thread: queue a refresh when the state is stale."""
        from hearth.ops.jobs import enqueue

        with self.store.write() as conn:
            self.conversations.get(conversation_id)
            queued = is_stale(conn, conversation_id, stale_minutes)
            if queued:
                enqueue(conn, self.user_id, JOB_KIND, {"conversation_id": conversation_id},
                        dedupe_key=f"conversation:{conversation_id}")
            return state(conn, conversation_id), queued

    def refresh(self, conversation_id: int, helper: "Helper") -> LiveState | None:
        """Recompute from the newest messages (the helper runs outside any transaction)."""
        self.conversations.get(conversation_id)
        with self.store.read() as conn:
            before = state(conn, conversation_id)
            rows = queries.recent_turns(conn, conversation_id, RECENT_MESSAGES)
        if not rows:
            return before
        recent = [TurnText(role, content, message_id) for message_id, role, content in reversed(rows)]
        previous = None
        if before is not None:
            previous = LiveContextResult(before.mood, before.events, before.needs, before.summary, (), before.source)
        try:
            result = helper.live_context(previous, recent)
        except HelperOutputError as exc:
            # Skipped (E13): the previous live context stays until the next refresh.
            with self.store.write() as conn:
                skips.record(conn, self.user_id, "live_context", exc, conversation_id=conversation_id)
            return before
        with self.store.write() as conn:
            values = {name: clip(getattr(result, name), limit) for name, limit in FIELD_LIMITS.items()}
            self._save(conn, conversation_id, values, result.source, recent[-1].message_id)
            added = [n for n in (_add_nudge(conn, self.user_id, conversation_id, text, result.source)
                                 for text in result.nudges) if n is not None]
            open_ids = queries.open_nudge_ids(conn, conversation_id)
            for old in open_ids[MAX_OPEN_NUDGES:]:  # keep the newest few on offer
                queries.drop_nudge(conn, old)
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="live_context.refreshed",
                          channel="inner", payload={"source": result.source, "nudges_added": len(added),
                                                    "through_message_id": recent[-1].message_id})
            return state(conn, conversation_id)

    def _save(self, conn: Connection, conversation_id: int, values: dict[str, str], source: str,
              through: int) -> None:
        queries.save(conn, conversation_id, self.user_id, values, source, through, utcnow())


def mark_used(conn: Connection, user_id: int, conversation_id: int, reply: "Message") -> list[int]:
    """After a reply (inside its transaction): mark the nudges it used, strip echoed markers."""
    markers = set(MARKER_RE.findall(reply.content))
    used = [n for n in _nudges(conn, conversation_id) if _used_by(n, reply.content, markers)]
    now = utcnow()
    for nudge in used:
        queries.set_used(conn, nudge.id, now, reply.id)
        ledger.append(conn, user_id=user_id, conversation_id=conversation_id, kind="nudge.used",
                      channel=reply.channel, payload={"nudge_id": nudge.id, "message_id": reply.id})
    if markers:
        queries.strip_reply(conn, reply.id, strip_markers(reply.content), json.dumps([n.id for n in used]))
    return [n.id for n in used]


class LiveContextLayer:
    name = "live_context"

    def blocks(self, turn: Turn) -> list[Block]:
        found = state(turn.conn, turn.conversation.id)
        if found is None:
            return []
        lines = [f"{label}: {value}" for label, value in
                 (("Mood", found.mood), ("Events", found.events), ("Needs", found.needs)) if value]
        if found.nudges:
            lines.append(NUDGE_HEADING)
            lines.extend(f"- {n.text} {n.token}" for n in found.nudges)
        if not lines:
            return []
        return [Block(layer=self.name, label=LABEL, trust=TRUST.get(found.source, TRUST["model"]),
                      text="\n".join(lines), source_ids=tuple(n.id for n in found.nudges),
                      numbers={"nudges": len(found.nudges)})]


def refresh_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    conversation_id = payload.get("conversation_id")
    if not isinstance(conversation_id, int):
        raise InvalidInput("live context job needs a conversation id")
    LiveContext(ctx.store, ctx.user_id, ctx.conversations).refresh(conversation_id, helper)
