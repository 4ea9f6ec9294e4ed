"""One user's rows of every table, read for an export and written back by its import (S5).

A table belongs to the user when it has a ``user_id`` column, or when it references such a table;
``owner_filter`` writes the condition that selects the user's rows, with ``:user_id`` for the user.
"""

from __future__ import annotations

from typing import Any, Sequence

from hearth.store import Connection, catalog


def owner_filter(conn: Connection, table: str, scoped: dict[str, str]) -> str | None:
    """A WHERE clause selecting the user's rows of ``table`` (``scoped`` holds the clauses of the
    tables before it), or None if the table is not the user's."""
    if "user_id" in [name for name, _ in catalog.columns(conn, table)]:
        return "user_id = :user_id"
    for parent, pairs in catalog.parents(conn, table).items():
        if parent in scoped and parent != "users":
            column, parent_column = pairs[0]
            return f'"{column}" IN (SELECT "{parent_column}" FROM "{parent}" WHERE {scoped[parent]})'
    return None


def rows(conn: Connection, table: str, where: str, user_id: int, width: int) -> list[tuple[Any, ...]]:
    """The table's rows matching ``where`` (from ``owner_filter``), in the order of their ``width`` columns."""
    order = ", ".join(str(i) for i in range(1, width + 1))  # WITHOUT ROWID tables too
    return [tuple(r) for r in conn.execute(f'SELECT * FROM "{table}" WHERE {where} ORDER BY {order}',
                                           {"user_id": user_id}).fetchall()]


def holds_threads(conn: Connection) -> bool:
    """Whether the store holds any conversation or persona."""
    return bool(conn.execute("SELECT 1 FROM conversations LIMIT 1").fetchone() or conn.execute(
        "SELECT 1 FROM personas LIMIT 1").fetchone())


def insert_rows(conn: Connection, table: str, columns: list[str], values: Sequence[Sequence[Any]]) -> None:
    """Insert the rows as they are, one statement each (a broken one raises ``ConstraintError``)."""
    placeholders = ", ".join("?" * len(columns))
    quoted = ", ".join(f'"{c}"' for c in columns)
    sql = f'INSERT INTO "{table}" ({quoted}) VALUES ({placeholders})'
    for row in values:
        conn.execute(sql, row)


def recount_turns(conn: Connection, user_id: int) -> None:
    """Set each of the user's conversations' turn count from its messages."""
    conn.execute(
        "UPDATE conversations SET turn_count = (SELECT count(*) FROM messages m WHERE m.conversation_id ="
        " conversations.id AND m.kind IN ('chat', 'handoff_artifact') AND m.role IN ('user', 'assistant'))"
        " WHERE user_id = ?", (user_id,))
