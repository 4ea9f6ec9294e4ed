"""What an import created from each source (``import_sources``), so a source is not imported twice."""

from __future__ import annotations

from hearth.store import Connection


def target(conn: Connection, user_id: int, kind: str, key: str) -> tuple[int | None] | None:
    """The id the source became, as a one-value tuple (it may be None), or None for an unseen source."""
    row = conn.execute("SELECT target_id FROM import_sources WHERE user_id = ? AND kind = ? AND source_key = ?",
                       (user_id, kind, key)).fetchone()
    return None if row is None else (row[0],)


def record(conn: Connection, user_id: int, kind: str, key: str, target_id: int | None, created_at: str) -> None:
    conn.execute("INSERT INTO import_sources (user_id, kind, source_key, target_id, created_at)"
                 " VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, kind, source_key)"
                 " DO UPDATE SET target_id = excluded.target_id", (user_id, kind, key, target_id, created_at))
