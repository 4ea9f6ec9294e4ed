"""Activity spans (E1): the ``spans`` rows, the view of ``span.opened`` / ``span.closed`` events."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hearth.store.connection import inserted_id
from hearth.store.engine import Connection, Row

# The later of a span's last activity and a new one (twice the same ``?``), in SQL both engines read.
LATER = "CASE WHEN last_at > ? THEN last_at ELSE ? END"


@dataclass(frozen=True)
class Span:
    """One activity span; the HTTP API answers with this record as it is (one definition per record)."""

    id: int
    persona_id: int | None
    kind: str
    channel: str
    start_event_id: int
    started_at: str
    last_at: str
    closed_at: str | None
    close_reason: str | None
    checkpoint_event_id: int | None
    open: bool  # closed_at is None; a field rather than a property so that answers carry it

    @classmethod
    def from_row(cls, row: Row) -> "Span":
        return cls(row["id"], row["persona_id"], row["kind"], row["channel"], row["start_event_id"],
                   row["started_at"], row["last_at"], row["closed_at"], row["close_reason"],
                   row["checkpoint_event_id"], row["closed_at"] is None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def extend_fresh(conn: Connection, user_id: int, persona_id: int | None, kind: str, *, now: str,
                 idle_cutoff: str) -> int | None:
    """Extend the open span of this kind whose last activity is not older than ``idle_cutoff``;
    its id, or None when there is none."""
    row = conn.execute(
        f"UPDATE spans SET last_at = {LATER} WHERE user_id = ?"
        " AND persona_id IS NOT DISTINCT FROM ? AND closed_at IS NULL"
        " AND kind = ? AND last_at >= ? RETURNING id", (now, now, user_id, persona_id, kind, idle_cutoff),
    ).fetchone()
    return row[0] if row is not None else None


def extend(conn: Connection, user_id: int, span_id: int, *, now: str) -> bool:
    """Extend a span that is still open; False when it is closed (or not the user's)."""
    row = conn.execute(
        f"UPDATE spans SET last_at = {LATER} WHERE id = ? AND user_id = ? AND closed_at IS NULL RETURNING id",
        (now, now, span_id, user_id)).fetchone()
    return row is not None


def open_of(conn: Connection, user_id: int, persona_id: int | None) -> Span | None:
    """The open span of a user and companion (at most one; ``None`` is the companion-less one)."""
    row = conn.execute("SELECT * FROM spans WHERE user_id = ? AND persona_id IS NOT DISTINCT FROM ?"
                       " AND closed_at IS NULL",
                       (user_id, persona_id)).fetchone()
    return Span.from_row(row) if row is not None else None


def open_of_persona(conn: Connection, user_id: int, persona_id: int) -> Span | None:
    """The open span of a user and a companion."""
    row = conn.execute("SELECT * FROM spans WHERE user_id = ? AND persona_id = ? AND closed_at IS NULL",
                       (user_id, persona_id)).fetchone()
    return Span.from_row(row) if row is not None else None


def open_id_of_persona(conn: Connection, user_id: int, persona_id: int) -> int | None:
    row = conn.execute("SELECT id FROM spans WHERE user_id = ? AND persona_id = ? AND closed_at IS NULL",
                       (user_id, persona_id)).fetchone()
    return row[0] if row else None


def insert(conn: Connection, user_id: int, persona_id: int | None, kind: str, channel: str, *, now: str) -> int:
    """A new open span; its start event is set once the ``span.opened`` event exists."""
    cur = conn.execute(
        "INSERT INTO spans (user_id, persona_id, kind, channel, start_event_id, started_at, last_at)"
        " VALUES (?, ?, ?, ?, 0, ?, ?) RETURNING id", (user_id, persona_id, kind, channel, now, now),
    )
    return inserted_id(cur)


def set_start_event(conn: Connection, span_id: int, event_id: int) -> None:
    conn.execute("UPDATE spans SET start_event_id = ? WHERE id = ?", (event_id, span_id))


def set_closed(conn: Connection, span_id: int, *, at: str, reason: str) -> None:
    """Close a span unless it is closed already."""
    conn.execute("UPDATE spans SET closed_at = ?, close_reason = ? WHERE id = ? AND closed_at IS NULL",
                 (at, reason, span_id))


def set_checkpoint(conn: Connection, span_id: int, event_id: int) -> None:
    conn.execute("UPDATE spans SET checkpoint_event_id = ? WHERE id = ?", (event_id, span_id))


def get(conn: Connection, user_id: int, span_id: int) -> Span | None:
    row = conn.execute("SELECT * FROM spans WHERE id = ? AND user_id = ?", (span_id, user_id)).fetchone()
    return Span.from_row(row) if row is not None else None


def open_spans(conn: Connection, user_id: int) -> list[Span]:
    """A user's open spans, the most recently active first."""
    return [Span.from_row(r) for r in conn.execute(
        "SELECT * FROM spans WHERE user_id = ? AND closed_at IS NULL ORDER BY last_at DESC, id DESC", (user_id,))]


def by_ids(conn: Connection, user_id: int, ids: set[int]) -> dict[int, Span]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {r["id"]: Span.from_row(r) for r in conn.execute(
        f"SELECT * FROM spans WHERE user_id = ? AND id IN ({marks})", (user_id, *ids))}
