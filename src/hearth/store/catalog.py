"""What tables and columns a database holds, on either engine (export, migrate-store).

SQLite answers from ``sqlite_master`` and PRAGMAs, PostgreSQL from its catalog; both answer in
the same shapes. FTS5's virtual tables and their shadow tables are not data and are left out.
"""

from __future__ import annotations

from typing import Any

from .engine import Connection
from .sqlite import engine_of


def is_postgres(conn: Any) -> bool:
    return engine_of(conn).name == "postgresql"


# PostgreSQL's stand-ins for FTS5's totals record, its doclists and its vocabulary (kept by
# triggers from the rows they index): like FTS5's shadow tables, not data.
PG_DERIVED = ("keyword_totals", "messages_postings", "archive_chunks_postings", "facts_postings", "keyword_lexemes")


def tables(conn: Connection) -> list[str]:
    """Ordinary data tables, by name."""
    if is_postgres(conn):
        return [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
            if r[0] not in PG_DERIVED]
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                        ).fetchall()
    virtual = [name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")]
    return sorted(name for name, _ in rows
                  if name not in virtual and not any(name.startswith(v + "_") for v in virtual))


# PostgreSQL's column types named as the SQLite declarations they stand for.
_AS_SQLITE = {"bigint": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER", "text": "TEXT",
              "bytea": "BLOB", "double precision": "REAL", "real": "REAL"}


def columns(conn: Connection, table: str) -> list[tuple[str, str]]:
    """(name, declared type, as SQLite would declare it) of each column, in table order."""
    if is_postgres(conn):
        # pgvector's ``vec`` is derived from the ``embedding`` bytes beside it: not data of its own.
        return [(r[0], _AS_SQLITE.get(r[1], r[1].upper())) for r in conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ? AND udt_name <> 'vector'"
            " ORDER BY ordinal_position", (table,))]
    return [(r["name"], r["type"] or "") for r in conn.execute(f'PRAGMA table_info("{table}")')]


def parents(conn: Connection, table: str) -> dict[str, list[tuple[str, str]]]:
    """{parent table: [(column, parent column), ...]} from the table's foreign keys."""
    out: dict[str, list[tuple[str, str]]] = {}
    if is_postgres(conn):
        rows = conn.execute(
            "SELECT cl.relname, a.attname, pa.attname FROM pg_constraint c"
            " JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class cl ON cl.oid = c.confrelid"
            " CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(col, pcol)"
            " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col"
            " JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = k.pcol"
            " WHERE c.contype = 'f' AND t.relname = ? AND t.relnamespace = current_schema()::regnamespace",
            (table,)).fetchall()
        for parent, column, parent_column in rows:
            out.setdefault(parent, []).append((column, parent_column))
        return out
    for fk in conn.execute(f'PRAGMA foreign_key_list("{table}")'):
        out.setdefault(fk["table"], []).append((fk["from"], fk["to"] or "id"))
    return out


def dependency_order(conn: Connection, names: list[str]) -> list[str]:
    """``names`` with every table after the tables it refers to."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...] = ()) -> None:
        if name in order or name in path:
            return
        for parent in parents(conn, name):
            if parent != name and parent in names:
                visit(parent, path + (name,))
        order.append(name)

    for name in sorted(names):
        visit(name)
    return order


def advance_identities(conn: Connection, tables: list[str]) -> None:
    """PostgreSQL: identity columns continue after ids inserted as they were (a copy, an import)."""
    for table in tables:
        if "id" not in [c for c, _ in columns(conn, table)]:
            continue
        seq = conn.execute("SELECT pg_get_serial_sequence(?, 'id')", (table,)).fetchone()
        if seq and seq[0]:
            conn.execute(f"SELECT setval('{seq[0]}', (SELECT coalesce(max(id), 0) + 1 FROM {table}), false)")
