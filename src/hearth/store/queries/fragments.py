"""Memory fragments (``fragments``), the per-user library version that every change bumps
(``fragment_library``) and the lorebook timers per conversation (``fragment_timers``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store import Connection, Row, inserted_id


@dataclass(frozen=True)
class Fragment:
    id: int
    category: str
    triggers: tuple[str, ...]
    definition: str
    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    priority: int = 0
    enabled: bool = True
    created_at: str = ""
    updated_at: str = ""
    controls: dict[str, Any] | None = None  # lorebook controls (X3); None for a plain fragment
    import_key: str | None = None  # where an imported fragment came from

    @classmethod
    def from_row(cls, row: Row) -> "Fragment":
        return cls(row["id"], row["category"], tuple(json.loads(row["triggers"])), row["definition"],
                   tuple(json.loads(row["all_of"])), tuple(json.loads(row["any_of"])),
                   tuple(json.loads(row["none_of"])), row["priority"], bool(row["enabled"]),
                   row["created_at"], row["updated_at"], json.loads(row["controls"]) or None, row["import_key"])

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


# -- the library version ----------------------------------------------------------------------------
def bump_version(conn: Connection, user_id: int) -> int:
    """Count one more change of the user's library; returns the new version."""
    conn.execute("INSERT INTO fragment_library (user_id, version) VALUES (?, 1)"
                 " ON CONFLICT (user_id) DO UPDATE SET version = fragment_library.version + 1", (user_id,))
    return library_version(conn, user_id)


def library_version(conn: Connection, user_id: int) -> int:
    row = conn.execute("SELECT version FROM fragment_library WHERE user_id = ?", (user_id,)).fetchone()
    return row[0] if row else 0


# -- fragments --------------------------------------------------------------------------------------
def get(conn: Connection, user_id: int, fragment_id: int) -> Fragment | None:
    row = conn.execute("SELECT * FROM fragments WHERE id = ? AND user_id = ?", (fragment_id, user_id)).fetchone()
    return Fragment.from_row(row) if row is not None else None


def list_for_user(conn: Connection, user_id: int, *, category: str | None = None,
                  enabled_only: bool = False) -> list[Fragment]:
    sql = "SELECT * FROM fragments WHERE user_id = ?"
    args: list[Any] = [user_id]
    if category is not None:
        sql += " AND category = ?"
        args.append(category)
    if enabled_only:
        sql += " AND enabled = 1"
    return [Fragment.from_row(r) for r in conn.execute(sql + " ORDER BY id", args)]


def enabled(conn: Connection, user_id: int) -> list[Fragment]:
    """The user's enabled fragments, the whole library, by id."""
    return [Fragment.from_row(r) for r in conn.execute(
        "SELECT * FROM fragments WHERE user_id = ? AND enabled = 1 ORDER BY id", (user_id,))]


def count_for_user(conn: Connection, user_id: int) -> int:
    return conn.execute("SELECT count(*) FROM fragments WHERE user_id = ?", (user_id,)).fetchone()[0]


def insert(conn: Connection, user_id: int, category: str, triggers: str, definition: str, all_of: str, any_of: str,
           none_of: str, priority: int, enabled: int, controls: str, import_key: str | None, now: str) -> int:
    """A new fragment (list fields and controls as JSON text); returns its id."""
    cur = conn.execute(
        "INSERT INTO fragments (user_id, category, triggers, definition, all_of, any_of, none_of, priority,"
        " enabled, controls, import_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " RETURNING id",
        (user_id, category, triggers, definition, all_of, any_of, none_of, priority, enabled, controls, import_key,
         now, now))
    return inserted_id(cur)


def update(conn: Connection, user_id: int, fragment_id: int, changes: dict[str, Any], updated_at: str) -> None:
    """Set the changed columns (named by the caller's checked keys) and ``updated_at``."""
    sets = ", ".join(f"{k} = ?" for k in changes)
    conn.execute(f"UPDATE fragments SET {sets}, updated_at = ? WHERE id = ? AND user_id = ?",
                 (*changes.values(), updated_at, fragment_id, user_id))


def delete(conn: Connection, user_id: int, fragment_id: int) -> None:
    conn.execute("DELETE FROM fragments WHERE id = ? AND user_id = ?", (fragment_id, user_id))


def category_counts(conn: Connection, user_id: int) -> dict[str, int]:
    """How many fragments each named category (book) holds."""
    return {r[0]: r[1] for r in conn.execute(
        "SELECT category, count(*) FROM fragments WHERE user_id = ? AND category <> '' GROUP BY category",
        (user_id,))}


def category_by_import(conn: Connection, user_id: int, like: str) -> str | None:
    """The category of the first fragment whose import key matches ``like`` (a LIKE pattern, ``\\``
    escaping), case-insensitively."""
    row = conn.execute("SELECT category FROM fragments WHERE user_id = ? AND lower(import_key) LIKE lower(?) ESCAPE '\\'"
                       " ORDER BY id LIMIT 1", (user_id, like)).fetchone()
    return None if row is None else str(row[0])


# -- lorebook timers --------------------------------------------------------------------------------
def timers(conn: Connection, conversation_id: int) -> dict[int, tuple[int, int]]:
    """fragment id -> (sticky until, cooldown until), in user turns of the conversation."""
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT fragment_id, sticky_until, cooldown_until FROM fragment_timers WHERE conversation_id = ?",
        (conversation_id,))}


def start_timers(conn: Connection, conversation_id: int, started: dict[int, tuple[int, int]]) -> None:
    """Set the timers of these fragments (id -> (sticky until, cooldown until)); a fragment deleted
    meanwhile gets none."""
    conn.executemany(
        "INSERT INTO fragment_timers (conversation_id, fragment_id, sticky_until, cooldown_until)"
        " SELECT ?, id, ?, ? FROM fragments WHERE id = ?"
        " ON CONFLICT (conversation_id, fragment_id) DO UPDATE SET sticky_until = excluded.sticky_until,"
        " cooldown_until = excluded.cooldown_until",
        [(conversation_id, s, c, fid) for fid, (s, c) in started.items()])
