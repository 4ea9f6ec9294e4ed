"""Key-value state of the whole deployment (``app_state``): one reader and one writer.

Small facts the code keeps between runs (the newest verified backup, where backups were made,
prompt reconciliation's progress, the login limiter's counts on a shared database, channel and
check-in markers). Values are text; ``get_json``/``put_json`` keep a JSON value. Writes join the
caller's transaction when given a connection inside ``store.write()``.
"""

from __future__ import annotations

import json
from typing import Any

from .engine import Connection


def get(conn: Connection, key: str) -> str | None:
    """The value stored under ``key``, or None."""
    row = conn.execute("SELECT value FROM app_state WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def put(conn: Connection, key: str, value: str) -> None:
    """Store ``value`` under ``key``, replacing any value there (inside the caller's write)."""
    conn.execute("INSERT INTO app_state (key, value) VALUES (?, ?)"
                 " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))


def delete(conn: Connection, key: str) -> None:
    conn.execute("DELETE FROM app_state WHERE key = ?", (key,))


def get_json(conn: Connection, key: str, default: Any = None) -> Any:
    """The JSON value stored under ``key``, or ``default`` when there is none."""
    value = get(conn, key)
    return default if value is None else json.loads(value)


def put_json(conn: Connection, key: str, value: Any) -> None:
    put(conn, key, json.dumps(value))
