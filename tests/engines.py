"""What a test asks the database directly, in the form each engine takes (S9).

Most tests speak only through Hearth's modules and run unchanged on both engines. These helpers
are for the few that look underneath: the keyword index's own answer (FTS5 on SQLite, the
tsvector expression index on PostgreSQL), a real database failure injected with a trigger, and
every text the database holds (the raw file on SQLite, every text column on PostgreSQL).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from hearth.retrieval.terms import PG_INDEXES
from hearth.store import is_postgres


def keyword_ids(conn: Any, index: str, *words: str) -> list[int]:
    """The row ids the keyword index ``index`` (``messages_fts``, ``archive_chunks_fts``) finds
    for every one of ``words``, in id order."""
    if is_postgres(conn):
        table, column, indexed = PG_INDEXES[index]
        rows = conn.execute(
            f"SELECT a.id FROM {table} a WHERE {indexed.format(a='a')}"
            f" AND hearth_words(a.{column}) @@ plainto_tsquery('simple', hearth_fold(?)) ORDER BY a.id",
            (" ".join(words),)).fetchall()
    else:
        query = " AND ".join(f'"{w}"' for w in words)
        rows = conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? ORDER BY rowid", (query,)).fetchall()
    return [int(r[0]) for r in rows]


@contextmanager
def failing_inserts(store: Any, table: str, message: str) -> Iterator[None]:
    """Every INSERT into ``table`` fails inside the database with ``message`` while this lasts."""
    conn = store.connection()
    name = f"fail_{table}"
    if is_postgres(conn):
        raw = conn.raw
        raw.execute(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS"
                    f" $$BEGIN RAISE EXCEPTION '{message}'; END$$")
        raw.execute(f"CREATE TRIGGER {name} BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()")
        try:
            yield
        finally:
            raw.execute(f"DROP TRIGGER {name} ON {table}")
            raw.execute(f"DROP FUNCTION {name}()")
        return
    conn.execute(f"CREATE TEMP TRIGGER {name} BEFORE INSERT ON {table} BEGIN SELECT RAISE(ABORT, '{message}'); END")
    try:
        yield
    finally:
        conn.execute(f"DROP TRIGGER temp.{name}")


@contextmanager
def foreign_keys_off(store: Any) -> Iterator[None]:
    """Writes on this thread's connection skip foreign-key checks while this lasts (to plant a
    broken row the ledger check must find)."""
    conn = store.connection()
    if is_postgres(conn):
        conn.raw.execute("SET session_replication_role = replica")  # no triggers, so no FK checks
        try:
            yield
        finally:
            conn.raw.execute("SET session_replication_role = origin")
        return
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
