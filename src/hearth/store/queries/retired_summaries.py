"""Retired generated-summary rows of ``conversation_summaries``: rows holding only model-written
``summary`` or ``recent_raw`` text, never a handoff (H10, H11)."""

from __future__ import annotations

from hearth.store import Connection

_CANDIDATE = "handoff = '' AND (summary != '' OR recent_raw != '')"


def scope(conn: Connection) -> tuple[list[int], int, str | None, str | None]:
    """The candidate ids, the number of rows with a handoff, and the candidates' oldest and newest stamps."""
    ids = [r[0] for r in conn.execute(f"SELECT id FROM conversation_summaries WHERE {_CANDIDATE} ORDER BY id")]
    protected = conn.execute("SELECT count(*) FROM conversation_summaries WHERE handoff != ''").fetchone()[0]
    oldest, newest = conn.execute(
        f"SELECT min(created_at), max(created_at) FROM conversation_summaries WHERE {_CANDIDATE}").fetchone()
    return ids, protected, oldest, newest


def delete(conn: Connection) -> int:
    """Remove every candidate row; the condition itself keeps every non-empty handoff out of reach."""
    return conn.execute(f"DELETE FROM conversation_summaries WHERE {_CANDIDATE}").rowcount
