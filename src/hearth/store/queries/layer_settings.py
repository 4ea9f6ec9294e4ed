"""The memory layers' settings per user (``layer_settings``): JSON text under a key."""

from __future__ import annotations

from hearth.store import Connection


def get(conn: Connection, user_id: int, key: str) -> str | None:
    """The stored JSON text of one setting, None when never set."""
    row = conn.execute("SELECT value FROM layer_settings WHERE user_id = ? AND key = ?", (user_id, key)).fetchone()
    return row[0] if row else None


def all_for_user(conn: Connection, user_id: int) -> dict[str, str]:
    """Every setting this user has set: key -> JSON text."""
    return dict(conn.execute("SELECT key, value FROM layer_settings WHERE user_id = ?", (user_id,)).fetchall())


def put(conn: Connection, user_id: int, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO layer_settings (user_id, key, value) VALUES (?, ?, ?)"
        " ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value",
        (user_id, key, value),
    )
