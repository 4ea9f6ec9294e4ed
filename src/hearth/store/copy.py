"""The statements of copying a store into another, engine to engine (S11): tables in batches that
resume after what the target holds, the counters triggers keep, and pgvector's column filled in.
``hearth.ops.migrate_store`` decides the order, reports progress and checks the result."""

from __future__ import annotations

from typing import Any, Callable

from hearth.errors import ConfigError

from . import catalog
from .connection import Store
from .engine import Connection, Row

# Counters kept by triggers: copied as the source holds them, after the rows they count.
RECOUNTED = ("vector_counts",)
# Triggers that count vectors on every update of their table (PostgreSQL), off while pgvector's
# column is filled in.
VECTOR_COUNT_TRIGGERS = {"message_embeddings": "message_vectors_changed"}

Progress = Callable[[str, int, int], None]


def count(conn: Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def copy_table(src: Connection, target: Store, table: str, progress: Progress | None, batch: int) -> int:
    """Copy the rows of ``table`` the target lacks, one transaction per batch; returns how many."""
    declared = catalog.columns(src, table)
    cols = [c for c, _ in declared]
    integer_id = any(c == "id" and "INT" in kind.upper() for c, kind in declared)
    target_cols = {c for c, _ in catalog.columns(target.connection(), table)}
    if not set(cols) <= target_cols:
        raise ConfigError(f"table {table} differs between the two stores")
    total = int(src.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) ON CONFLICT DO NOTHING"
    copied = 0
    if integer_id:
        # Resume after the largest id already there; ids are copied as they are.
        start = target.connection().execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        done = int(src.execute(f"SELECT count(*) FROM {table} WHERE id <= ?", (start,)).fetchone()[0])
        while True:
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE id > ? ORDER BY id LIMIT ?",
                               (start, batch)).fetchall()
            if not rows:
                break
            with target.write() as conn:
                conn.executemany(insert, [_values(r) for r in rows])
            copied += len(rows)
            start = rows[-1][cols.index("id")]
            if progress:
                progress(table, done + copied, total)
        return copied
    offset = 0
    while True:
        rows = src.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {', '.join(cols[:3])} LIMIT ? OFFSET ?",
                           (batch, offset)).fetchall()
        if not rows:
            break
        with target.write() as conn:
            conn.executemany(insert, [_values(r) for r in rows])
        offset += len(rows)
        copied += len(rows)
        if progress:
            progress(table, offset, total)
    return copied


def _values(row: Row) -> tuple:
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)


def copy_recounted(src: Connection, conn: Connection, table: str) -> int:
    """Replace the target's rows of a trigger-kept counter table with the source's; returns how many."""
    conn.execute(f"DELETE FROM {table}")
    rows = src.execute(f"SELECT * FROM {table}").fetchall()
    if rows:
        cols = [c for c, _ in catalog.columns(src, table)]
        conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [tuple(r) for r in rows])
    return len(rows)


def copy_conversation_counters(src: Connection, conn: Connection) -> None:
    """Each conversation's turn count and history revision, as the source holds them."""
    for row in src.execute("SELECT id, turn_count, history_rev FROM conversations").fetchall():
        conn.execute("UPDATE conversations SET turn_count = ?, history_rev = ? WHERE id = ?",
                     (row[1], row[2], row[0]))


def fill_vector_column(conn: Connection, table: str, key: str, model_column: str,
                       literal: Callable[[bytes], tuple[str, int]], batch: int) -> set[int]:
    """pgvector's form (``literal``: a stored embedding's text form and its size) of every copied
    embedding of ``table`` that lacks it; returns the vector sizes seen."""
    sizes: set[int] = set()
    last: Any = 0
    # The count trigger fires on any update of a message's vector row; here only pgvector's
    # form is added (the counts were copied), and one row of vector_counts updated twice
    # per vector in one transaction grows a chain of versions every update walks: quadratic.
    # ALTER TABLE's lock lasts to the commit; the target is being built, nothing else uses it.
    trigger = VECTOR_COUNT_TRIGGERS.get(table)
    if trigger:
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    while True:
        rows = conn.execute(f"SELECT {key}, embedding FROM {table} WHERE embedding IS NOT NULL"
                            f" AND {model_column} IS NOT NULL AND vec IS NULL AND {key} > ?"
                            f" ORDER BY {key} LIMIT ?", (last, batch)).fetchall()
        if not rows:
            break
        updates = []
        for row_id, blob in rows:
            text, size = literal(bytes(blob))
            sizes.add(size)
            updates.append((text, row_id))
        conn.executemany(f"UPDATE {table} SET vec = ?::vector WHERE {key} = ?", updates)
        last = rows[-1][0]
    if trigger:
        conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
    return sizes
