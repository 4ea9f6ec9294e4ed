"""The relationship timeline (E8): a user's ledger events across every conversation, newest first.

A page is the newest ``limit`` events before a cursor, in the ledger's global order
``(created_at, id)``. A page then grows backwards until it holds the start of every span it
touches, so no activity span is ever split across pages. The cursor of the next older page is the
page's oldest event, written ``<created_at>~<event id>``. Events are only ever appended at the
newest end, so events arriving between two page loads can never shift, duplicate or skip an older
page: the page before a cursor is a pure function of the (immutable) events older than it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hearth.continuity.timeline import spans as span_store
from hearth.errors import InvalidInput, NotFound
from hearth.store import Connection

# Expansion stops here even if a span is longer (an import can be one huge span): a page is never
# unbounded. Documented in docs/timeline.md.
MAX_PAGE_EVENTS = 20_000
_CURSOR = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)~([1-9]\d{0,18})$")
_SELECT = ("SELECT e.id, e.conversation_id, e.kind, e.channel, e.created_at, e.payload, e.span_id,"
           " m.role AS m_role, m.kind AS m_kind, m.content AS m_content"
           " FROM events e LEFT JOIN messages m ON m.id = e.id AND e.kind = 'message'")


@dataclass(frozen=True)
class Cursor:
    created_at: str
    event_id: int

    def __str__(self) -> str:
        return f"{self.created_at}~{self.event_id}"

    @classmethod
    def parse(cls, text: str) -> "Cursor":
        match = _CURSOR.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise InvalidInput("malformed timeline cursor (expected <timestamp>~<event id>)")
        event_id = int(match.group(2))
        if event_id > 2**63 - 1:
            raise InvalidInput("malformed timeline cursor (event id out of range)")
        return cls(match.group(1), event_id)


# The HTTP API answers with these records as they are (one definition per record); the attribute
# docstrings are their field descriptions in the OpenAPI description.
@dataclass(slots=True)  # not frozen: a page builds hundreds of these, and frozen init is slower
class TimelineEvent:
    __pydantic_config__ = {"use_attribute_docstrings": True}

    id: int
    conversation_id: int | None
    kind: str
    channel: str
    created_at: str
    payload: dict[str, Any]
    span_id: int | None
    message: dict[str, Any] | None = None
    """role and kind of a message event; text for visible turns"""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "conversation_id": self.conversation_id, "kind": self.kind, "channel": self.channel,
                "created_at": self.created_at, "payload": self.payload, "span_id": self.span_id,
                "message": self.message}


@dataclass
class Page:
    __pydantic_config__ = {"use_attribute_docstrings": True}

    events: list[TimelineEvent]
    """Oldest first"""
    spans: list[span_store.Span] = field(default_factory=list)
    """Every span the page's events belong to, by id; each starts on the page"""
    before: str | None = None
    """Cursor of the next older page (?before=...), null at the oldest"""
    has_older: bool = False
    expanded: int = 0
    """Events beyond the limit added so that no span is split"""

    def to_dict(self) -> dict[str, Any]:
        return {"events": [e.to_dict() for e in self.events], "spans": [s.to_dict() for s in self.spans],
                "before": self.before, "has_older": self.has_older, "expanded": self.expanded}


def _events(rows: list) -> list[TimelineEvent]:
    # One JSON parse for the whole page instead of one per event: most of a page's cost.
    payloads = json.loads("[" + ",".join(r[5] for r in rows) + "]")
    out = []
    for (event_id, conversation_id, kind, channel, created_at, _p, span_id, role, m_kind, content), payload \
            in zip(rows, payloads):
        message = None
        if role is not None:
            message = {"role": role, "kind": m_kind}
            if m_kind in ("chat", "handoff_artifact"):  # stored prompts and tool results are not shown
                message["content"] = content
        out.append(TimelineEvent(event_id, conversation_id, kind, channel, created_at, payload, span_id, message))
    return out


def check_cursor(conn: Connection, user_id: int, cursor: Cursor) -> None:
    """A cursor names one of this user's events; anyone else's answers like an unknown one (G2)."""
    row = conn.execute("SELECT 1 FROM events WHERE id = ? AND user_id = ? AND created_at = ?",
                       (cursor.event_id, user_id, cursor.created_at)).fetchone()
    if row is None:
        raise NotFound("unknown timeline cursor; reload the timeline")


def page(conn: Connection, user_id: int, *, before: Cursor | None = None, limit: int = 500,
         max_events: int = MAX_PAGE_EVENTS) -> Page:
    """The newest ``limit`` events before ``before`` (or the newest of all), grown to span starts."""
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be between 1 and 10000")
    if before is not None:
        check_cursor(conn, user_id, before)
        rows = conn.execute(_SELECT + " WHERE e.user_id = ? AND (e.created_at, e.id) < (?, ?)"
                            " ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
                            (user_id, before.created_at, before.event_id, limit)).fetchall()
    else:
        rows = conn.execute(_SELECT + " WHERE e.user_id = ? ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
                            (user_id, limit)).fetchall()
    events = _events(rows)  # newest first while growing
    spans: dict[int, span_store.Span] = {}
    expanded = 0
    while events:
        wanted = {e.span_id for e in events if e.span_id is not None} - set(spans)
        if not wanted:
            break
        spans.update(span_store.by_ids(conn, user_id, wanted))
        oldest = (events[-1].created_at, events[-1].id)
        starts = [(s.started_at, s.start_event_id) for s in spans.values()]
        earliest = min(starts) if starts else oldest
        if earliest >= oldest or len(events) >= max_events:
            continue  # every span's start is on the page (or the page is as large as it may get)
        more = conn.execute(
            _SELECT + " WHERE e.user_id = ? AND (e.created_at, e.id) < (?, ?) AND (e.created_at, e.id) >= (?, ?)"
            " ORDER BY e.created_at DESC, e.id DESC LIMIT ?",
            (user_id, *oldest, *earliest, max_events - len(events))).fetchall()
        events.extend(_events(more))
        expanded += len(more)
    older = None
    if events:
        last = events[-1]
        if conn.execute("SELECT 1 FROM events WHERE user_id = ? AND (created_at, id) < (?, ?) LIMIT 1",
                        (user_id, last.created_at, last.id)).fetchone():
            older = str(Cursor(last.created_at, last.id))
    events.reverse()
    return Page(events, sorted(spans.values(), key=lambda s: s.id), older, older is not None, expanded)
