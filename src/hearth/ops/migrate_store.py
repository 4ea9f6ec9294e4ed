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

from hearth.errors import ConfigError, InvalidInput
from hearth.records.ledger import verify
from hearth.store import Connection, Store, catalog
from hearth.store import copy as store_copy
from hearth.store.copy import RECOUNTED, Progress

BATCH = 2_000


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
        report.copied[table] = store_copy.copy_table(src, target, table, progress, batch)
    with target.write() as conn:
        for table in RECOUNTED:
            report.copied[table] = store_copy.copy_recounted(src, conn, table)
        store_copy.copy_conversation_counters(src, conn)
        target.engine.after_copy(conn, names)  # identities continue after the ids copied as they were
        if target.engine.vector_index == "pgvector":
            _fill_vectors(conn)  # the database index's own form of each copied vector
    target.engine.settle(target, names)  # planner statistics and merged index entries, as in use
    for table in names:
        here = store_copy.count(src, table)
        there = store_copy.count(dst, table)
        report.counts[table] = here
        if here != there:
            report.problems.append(f"{table}: {here} rows in the source, {there} in the target")
    ledger = verify(dst)
    report.problems.extend(f"ledger: {p}" for p in ledger.problems)
    return report


def _fill_vectors(conn: Connection, batch: int = BATCH) -> None:
    """pgvector's form of every copied embedding, then the HNSW index for each size, built once
    over all of them (a bulk build is many times faster than growing the graph row by row)."""
    import numpy as np

    from hearth.retrieval import pgvectors

    def literal(blob: bytes) -> tuple[str, int]:
        vector = np.frombuffer(blob, dtype=np.float32)
        return pgvectors.literal(vector), len(vector)

    for source, (table, key, model_column) in pgvectors.TABLES.items():
        sizes = store_copy.fill_vector_column(conn, table, key, model_column, literal, batch)
        for dim in sorted(sizes):
            pgvectors.ensure_index(conn, source, dim)


def check_target(source: Store, target: Store) -> None:
    """Refuse a copy onto itself."""
    if source.key == target.key:
        raise InvalidInput("the source and the target are the same store")
