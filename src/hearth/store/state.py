"""Key-value state of the whole deployment (``app_state``): its one reader and writer.

Small facts the code keeps between runs (the newest verified backup, where backups were made,
prompt reconciliation's progress, the login limiter's counts on a shared database, channel and
check-in cursors). Each value is JSON (the table checks it). Writes join the caller's
transaction: pass the connection of a ``store.write()``.
"""

from __future__ import annotations

import json
from typing import Any

from .engine import Connection


def get(conn: Connection, key: str, default: Any = None) -> Any:
    """The value stored under ``key``, or ``default`` when there is none."""
    row = conn.execute("SELECT value FROM app_state WHERE key = ?", (key,)).fetchone()
    return default if row is None else json.loads(row[0])


def put(conn: Connection, key: str, value: Any) -> None:
    """Store ``value`` under ``key``, replacing any value there (inside the caller's write)."""
    conn.execute("INSERT INTO app_state (key, value) VALUES (?, ?)"
                 " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, json.dumps(value)))


def delete(conn: Connection, key: str) -> None:
    conn.execute("DELETE FROM app_state WHERE key = ?", (key,))


def put_new(conn: Connection, key: str, value: Any) -> bool:
    """Store ``value`` under ``key`` unless a value is there already; True when this call stored it."""
    return conn.execute("INSERT INTO app_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, json.dumps(value))).fetchone() is not None
