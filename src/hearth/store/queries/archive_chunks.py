"""Archive chunks (``archive_chunks``): what the prompt layers ask of them."""

from __future__ import annotations

from hearth.store import Connection


def any_for_user(conn: Connection, user_id: int) -> bool:
    """Whether the user has any archive chunk."""
    return conn.execute("SELECT 1 FROM archive_chunks WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None
