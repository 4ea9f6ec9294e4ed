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
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from hearth.errors import InvalidInput, NotFound
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, LiveContextResult, TurnText, clip, content_words
from hearth.prompt.dynamic import Block, Turn
from hearth.records import ledger
from hearth.records.conversations import chat_turns_after
from hearth.store import Connection, Store, engine_of, inserted_id, utcnow
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


@dataclass(frozen=True)
class Nudge:
    id: int
    conversation_id: int
    text: str
    marker: str
    source: str
    status: str
    created_at: str
    used_at: str | None
    used_message_id: int | None

    @property
    def token(self) -> str:
        return f"[n:{self.marker}]"

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "token": self.token}


@dataclass(frozen=True)
class LiveState:
    conversation_id: int
    mood: str
    events: str
    needs: str
    summary: str
    source: str
    through_message_id: int
    updated_at: str
    nudges: tuple[Nudge, ...] = field(default=())

    @property
    def display_summary(self) -> str:
        """The side-panel line, offline output labelled as such (G3)."""
        return f"(offline) {self.summary}" if self.source == "offline" and self.summary else self.summary

    def to_dict(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "mood": self.mood, "events": self.events,
                "needs": self.needs, "summary": self.summary, "display_summary": self.display_summary,
                "source": self.source, "through_message_id": self.through_message_id,
                "updated_at": self.updated_at, "nudges": [n.to_dict() for n in self.nudges]}


_NUDGE_SQL = ("SELECT id, conversation_id, text, marker, source, status, created_at, used_at, used_message_id"
              " FROM nudges")


def _nudges(conn: Connection, conversation_id: int, status: str | None = "open") -> tuple[Nudge, ...]:
    sql = _NUDGE_SQL + " WHERE conversation_id = ?"
    args: list[Any] = [conversation_id]
    if status:
        sql += " AND status = ?"
        args.append(status)
    return tuple(Nudge(*r) for r in conn.execute(sql + " ORDER BY id", args))


def state(conn: Connection, conversation_id: int) -> LiveState | None:
    row = conn.execute("SELECT conversation_id, mood, events, needs, summary, source, through_message_id,"
                       " updated_at FROM live_context WHERE conversation_id = ?", (conversation_id,)).fetchone()
    nudges = _nudges(conn, conversation_id)
    if row is None:
        if not nudges:
            return None
        return LiveState(conversation_id, "", "", "", "", "manual", 0, nudges[0].created_at, nudges)
    return replace(LiveState(*row), nudges=nudges)


def _latest_chat_id(conn: Connection, conversation_id: int) -> int:
    row = conn.execute("SELECT max(id) FROM messages WHERE conversation_id = ? AND kind = 'chat'",
                       (conversation_id,)).fetchone()
    return row[0] or 0


def is_due(conn: Connection, conversation_id: int, every: int) -> bool:
    row = conn.execute("SELECT through_message_id FROM live_context WHERE conversation_id = ?",
                       (conversation_id,)).fetchone()
    return chat_turns_after(conn, conversation_id, row[0] if row else 0, every) >= every


def is_stale(conn: Connection, conversation_id: int, stale_minutes: int, now: datetime | None = None) -> bool:
    """Unread messages exist and the state is older than the stale age (or there is no state yet)."""
    row = conn.execute("SELECT through_message_id, updated_at FROM live_context WHERE conversation_id = ?",
                       (conversation_id,)).fetchone()
    if chat_turns_after(conn, conversation_id, row[0] if row else 0, 1) == 0:
        return False
    if row is None:
        return True
    updated = datetime.strptime(row[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (now or datetime.now(timezone.utc)) - updated >= timedelta(minutes=stale_minutes)


def _new_marker(conn: Connection, conversation_id: int) -> str:
    for _ in range(50):
        marker = secrets.token_hex(2)
        if not conn.execute("SELECT 1 FROM nudges WHERE conversation_id = ? AND marker = ?",
                            (conversation_id, marker)).fetchone():
            return marker
    raise InvalidInput("this conversation has too many nudges")


def _add_nudge(conn: Connection, user_id: int, conversation_id: int, text: str, source: str) -> int | None:
    """Insert a nudge unless the same text was ever offered in this thread (used ones never return)."""
    text = clip(text, 200)
    for row in conn.execute("SELECT text FROM nudges WHERE conversation_id = ?", (conversation_id,)):
        if row[0].casefold() == text.casefold():
            return None
    cur = conn.execute(
        "INSERT INTO nudges (user_id, conversation_id, text, marker, source, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " RETURNING id",
        (user_id, conversation_id, text, _new_marker(conn, conversation_id), source, utcnow()))
    return inserted_id(cur)


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
            return Nudge(*conn.execute(_NUDGE_SQL + " WHERE id = ?", (nudge_id,)).fetchone())

    def drop_nudge(self, conversation_id: int, nudge_id: int) -> None:
        with self.store.write() as conn:
            self.conversations.get(conversation_id)
            cur = conn.execute("UPDATE nudges SET status = 'dropped' WHERE id = ? AND conversation_id = ?"
                               " AND user_id = ? AND status = 'open'", (nudge_id, conversation_id, self.user_id))
            if cur.rowcount == 0:
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
            rows = conn.execute(
                "SELECT id, role, content FROM messages WHERE conversation_id = ? AND kind = 'chat'"
                " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT ?", (conversation_id, RECENT_MESSAGES),
            ).fetchall()
        if not rows:
            return before
        recent = [TurnText(r["role"], r["content"], r["id"]) for r in reversed(rows)]
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
            open_ids = [r[0] for r in conn.execute(
                "SELECT id FROM nudges WHERE conversation_id = ? AND status = 'open' ORDER BY id DESC",
                (conversation_id,))]
            for old in open_ids[MAX_OPEN_NUDGES:]:  # keep the newest few on offer
                conn.execute("UPDATE nudges SET status = 'dropped' WHERE id = ?", (old,))
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind="live_context.refreshed",
                          channel="inner", payload={"source": result.source, "nudges_added": len(added),
                                                    "through_message_id": recent[-1].message_id})
            return state(conn, conversation_id)

    def _save(self, conn: Connection, conversation_id: int, values: dict[str, str], source: str,
              through: int) -> None:
        conn.execute(
            "INSERT INTO live_context (conversation_id, user_id, mood, events, needs, summary, source,"
            " through_message_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE SET mood = excluded.mood, events = excluded.events,"
            " needs = excluded.needs, summary = excluded.summary, source = excluded.source,"
            " through_message_id = excluded.through_message_id, updated_at = excluded.updated_at",
            (conversation_id, self.user_id, values["mood"], values["events"], values["needs"], values["summary"],
             source, through, utcnow()))


def mark_used(conn: Connection, user_id: int, conversation_id: int, reply: "Message") -> list[int]:
    """After a reply (inside its transaction): mark the nudges it used, strip echoed markers."""
    markers = set(MARKER_RE.findall(reply.content))
    used = [n for n in _nudges(conn, conversation_id) if _used_by(n, reply.content, markers)]
    now = utcnow()
    for nudge in used:
        conn.execute("UPDATE nudges SET status = 'used', used_at = ?, used_message_id = ? WHERE id = ?",
                     (now, reply.id, nudge.id))
        ledger.append(conn, user_id=user_id, conversation_id=conversation_id, kind="nudge.used",
                      channel=reply.channel, payload={"nudge_id": nudge.id, "message_id": reply.id})
    if markers:
        conn.execute(f"UPDATE messages SET content = ?, metadata = {engine_of(conn).json_set('metadata', 'nudges_used')}"
                     " WHERE id = ?", (strip_markers(reply.content), json.dumps([n.id for n in used]), reply.id))
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
