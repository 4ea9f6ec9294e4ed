"""The relationship timeline (E8): a user's ledger events across every conversation, newest first.

A page is the newest ``limit`` events before a cursor, in the ledger's global order
``(created_at, id)``. A page then grows backwards until it holds the start of every span it
touches, so no activity span is ever split across pages. The cursor of the next older page is the
page's oldest event, written ``<created_at>~<event id>``. Events are only ever appended at the
newest end, so events arriving between two page loads can never shift, duplicate or skip an older
page: the page before a cursor is a pure function of the (immutable) events older than it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hearth.continuity.timeline import spans as span_store
from hearth.errors import InvalidInput, NotFound
from hearth.store import Connection
from hearth.store.queries import timeline as queries
from hearth.store.queries.timeline import TimelineEvent

# Expansion stops here even if a span is longer (an import can be one huge span): a page is never
# unbounded. Documented in docs/timeline.md.
MAX_PAGE_EVENTS = 20_000
_CURSOR = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)~([1-9]\d{0,18})$")


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


# The HTTP API answers with this record (and TimelineEvent) as it is (one definition per record);
# the attribute docstrings are its field descriptions in the OpenAPI description.
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


def check_cursor(conn: Connection, user_id: int, cursor: Cursor) -> None:
    """A cursor names one of this user's events; anyone else's answers like an unknown one (G2)."""
    if not queries.is_event_of(conn, user_id, cursor.event_id, cursor.created_at):
        raise NotFound("unknown timeline cursor; reload the timeline")


def page(conn: Connection, user_id: int, *, before: Cursor | None = None, limit: int = 500,
         max_events: int = MAX_PAGE_EVENTS) -> Page:
    """The newest ``limit`` events before ``before`` (or the newest of all), grown to span starts."""
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be between 1 and 10000")
    if before is not None:
        check_cursor(conn, user_id, before)
    # Newest first while growing.
    events = queries.newest(conn, user_id, limit, before=(before.created_at, before.event_id) if before else None)
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
        more = queries.between(conn, user_id, oldest, earliest, max_events - len(events))
        events.extend(more)
        expanded += len(more)
    older = None
    if events:
        last = events[-1]
        if queries.has_older(conn, user_id, last.created_at, last.id):
            older = str(Cursor(last.created_at, last.id))
    events.reverse()
    return Page(events, sorted(spans.values(), key=lambda s: s.id), older, older is not None, expanded)
