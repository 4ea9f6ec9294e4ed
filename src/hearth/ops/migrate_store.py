"""Copy a deployment between engines: SQLite -> PostgreSQL and back (S11).

Tables are copied parents first, in batches, each batch one transaction on the target, so an
interrupted copy keeps what it committed and a second run goes on where it stopped: rows are
read in id order after the largest id the target already holds, and inserted with "insert or
ignore", so nothing is copied twice. Counters the target's triggers keep (turn counts, vector
counts) are set from the source at the end, since the triggers count the copied rows again.
The copy is verified by comparing every table's row count and running the ledger check on the
target. Both stores must be at the same schema version (the target is migrated to it first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from hearth.errors import ConfigError, InvalidInput
from hearth.records.ledger import verify
from hearth.store import Connection, Row, Store, catalog

BATCH = 2_000
# Counters kept by triggers: copied as the source holds them, after the rows they count.
RECOUNTED = ("vector_counts",)
Progress = Callable[[str, int, int], None]
# Triggers that count vectors on every update of their table (PostgreSQL), off while pgvector's
# column is filled in.
VECTOR_COUNT_TRIGGERS = {"message_embeddings": "message_vectors_changed"}


@dataclass
class CopyReport:
    copied: dict[str, int] = field(default_factory=dict)  # rows inserted per table in this run
    counts: dict[str, int] = field(default_factory=dict)  # rows per table on both sides
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def copy_store(source: Store, target: Store, progress: Progress | None = None, *, batch: int = BATCH) -> CopyReport:
    """Copy every row of ``source`` into ``target`` and verify the result (see the module text)."""
    src, dst = source.connection(), target.connection()
    if source.schema_version() != target.schema_version():
        raise ConfigError(f"the source is at schema version {source.schema_version()} and the target at "
                          f"{target.schema_version()}; open both with this Hearth first")
    names = [t for t in catalog.tables(src) if t != "schema_migrations"]
    missing = set(names) - set(catalog.tables(dst))
    if missing:
        raise ConfigError(f"the target has no table {sorted(missing)[0]}")
    report = CopyReport()
    order = [t for t in catalog.dependency_order(src, names) if t not in RECOUNTED]
    for table in order:
        report.copied[table] = _copy_table(src, target, table, progress, batch)
    with target.write() as conn:
        for table in RECOUNTED:
            conn.execute(f"DELETE FROM {table}")
            rows = src.execute(f"SELECT * FROM {table}").fetchall()
            if rows:
                cols = [c for c, _ in catalog.columns(src, table)]
                conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 [tuple(r) for r in rows])
            report.copied[table] = len(rows)
        for row in src.execute("SELECT id, turn_count, history_rev FROM conversations").fetchall():
            conn.execute("UPDATE conversations SET turn_count = ?, history_rev = ? WHERE id = ?",
                         (row[1], row[2], row[0]))
        target.engine.after_copy(conn, names)  # identities continue after the ids copied as they were
        if target.engine.vector_index == "pgvector":
            _fill_vectors(conn)  # the database index's own form of each copied vector
    target.engine.settle(target, names)  # planner statistics and merged index entries, as in use
    for table in names:
        here = src.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        there = dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        report.counts[table] = int(here)
        if here != there:
            report.problems.append(f"{table}: {here} rows in the source, {there} in the target")
    ledger = verify(dst)
    report.problems.extend(f"ledger: {p}" for p in ledger.problems)
    return report


def _copy_table(src: Connection, target: Store, table: str, progress: Progress | None, batch: int) -> int:
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


def _fill_vectors(conn: Connection, batch: int = BATCH) -> None:
    """pgvector's form of every copied embedding, then the HNSW index for each size, built once
    over all of them (a bulk build is many times faster than growing the graph row by row)."""
    import numpy as np

    from hearth.retrieval import pgvectors

    for source, (table, key, model_column) in pgvectors.TABLES.items():
        sizes: set[int] = set()
        last = 0
        # The count trigger fires on any update of a message's vector row; here only pgvector's
        # form is added (the counts were copied above), and one row of vector_counts updated twice
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
                vector = np.frombuffer(bytes(blob), dtype=np.float32)
                sizes.add(len(vector))
                updates.append((pgvectors.literal(vector), row_id))
            conn.executemany(f"UPDATE {table} SET vec = ?::vector WHERE {key} = ?", updates)
            last = rows[-1][0]
        if trigger:
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
        for dim in sorted(sizes):
            pgvectors.ensure_index(conn, source, dim)


def check_target(source: Store, target: Store) -> None:
    """Refuse a copy onto itself."""
    if source.key == target.key:
        raise InvalidInput("the source and the target are the same store")
