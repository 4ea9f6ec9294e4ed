"""Migrations (S1, S9): both engines reach exactly the recorded schema, at every version.

``tests/schema.sql`` is what a blank SQLite database holds after every migration (``sqlite_master``
as written), ``tests/schema_postgres.txt`` the same for PostgreSQL, read from its catalogs (tables,
columns, types, defaults, constraints, indexes, triggers, sequences and functions).
``tests/schema_versions.json`` holds a digest of each engine's schema after every version, so a
database left at any older version is known to be upgraded by the same steps it always was.
Regenerate the three when a migration is added (docs/storage.md says how).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
from pathlib import Path

import pytest

from hearth.store import PgStore, migrations
from hearth.store.migrations import POSTGRESQL

HERE = Path(__file__).parent
SQLITE_SCHEMA = HERE / "schema.sql"
POSTGRES_SCHEMA = HERE / "schema_postgres.txt"
VERSIONS = HERE / "schema_versions.json"


def dump_sqlite(conn: sqlite3.Connection) -> str:
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        " ORDER BY type, name"
    ).fetchall()
    return "\n".join(f"-- {r[0]} {r[1]}\n{r[2]};" for r in rows) + "\n"


def dump_postgres(raw) -> str:
    """The public schema of a psycopg connection's database, from the catalogs, in a stable order.
    Functions that extensions own (pgvector's) are left out; the extension itself is listed."""

    def rows(sql: str, *args):
        return raw.execute(sql, args).fetchall()

    out = [f"extension {ext}" for (ext,) in rows(
        "SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1")]
    for oid, name, kind in rows(
            "SELECT c.oid, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname"):
        out.append(f"table {name} ({kind})")
        for column, kind_, notnull, identity, default in rows(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,"
                " pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a"
                " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
                " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", oid):
            extra = (" NOT NULL" if notnull else "") + (f" IDENTITY({identity})" if identity else "") + (
                f" DEFAULT {default}" if default is not None else "")
            out.append(f"  column {column} {kind_}{extra}")
        out += [f"  constraint {c} {d}" for c, d in rows(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s ORDER BY conname", oid)]
        out += [f"  index {i} {d}" for i, d in rows(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = %s ORDER BY 1", oid)]
        out += [f"  trigger {t} {d}" for t, d in rows(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s AND NOT tgisinternal"
            " ORDER BY tgname", oid)]
    out += [f"sequence {name} start {start} increment {step}" for name, start, step in rows(
        "SELECT c.relname, s.seqstart, s.seqincrement FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1")]
    for name, args, definition in rows(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
            " AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass"
            " AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1, 2"):
        out.append(f"function {name}({args})")
        out += ["  " + line for line in definition.strip().splitlines()]
    return "\n".join(out) + "\n"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def numbers() -> list[int]:
    """Every migration's number, in order (numbers are handed out ahead, so they may have gaps)."""
    return sorted(migrations.number(m) for m in migrations.MIGRATIONS)


def recorded(engine: str) -> dict[int, str]:
    return {int(k): v for k, v in json.loads(VERSIONS.read_text())[engine].items()}


def test_s1_sqlite_reaches_the_recorded_schema_at_every_version(tmp_path):
    conn = sqlite3.connect(tmp_path / "hearth.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    seen = {}
    conn.execute("BEGIN")
    for version in numbers():
        assert migrations.migrate(conn, upto=version) == [version]
        seen[version] = digest(dump_sqlite(conn))
    conn.execute("COMMIT")
    assert seen == recorded("sqlite")
    assert dump_sqlite(conn) == SQLITE_SCHEMA.read_text()


_names = itertools.count(1)


@pytest.fixture
def blank_pg(pg_server):
    """An empty database (not the migrated template), dropped after the test."""
    name = f"blank{os.getpid()}_{next(_names)}"
    pg_server.admin(f"CREATE DATABASE {name}")
    yield pg_server.url(name)
    pg_server.drop_database(pg_server.url(name))


def test_s9_postgres_reaches_the_recorded_schema_at_every_version(blank_pg):
    """PostgreSQL's history starts at the baseline: one step records versions 1 to 14."""
    store = PgStore(blank_pg, migrate=False)
    try:
        conn = store.connection()
        seen = {}
        with store.write():
            applied = []
            for version in sorted(recorded("postgresql")):
                applied += migrations.migrate(conn, POSTGRESQL, upto=version)
                seen[version] = digest(dump_postgres(conn.raw))
        assert applied == numbers()
        assert seen == recorded("postgresql")
        assert dump_postgres(conn.raw) == POSTGRES_SCHEMA.read_text()
    finally:
        store.close()


def test_s9_postgres_store_opened_on_a_blank_database_reaches_the_recorded_schema(blank_pg):
    store = PgStore(blank_pg)
    try:
        assert dump_postgres(store.connection().raw) == POSTGRES_SCHEMA.read_text()
        assert store.schema_version() == migrations.LATEST_VERSION
    finally:
        store.close()


def regenerate() -> None:
    """Write the fixtures from what the migrations build now (``python -m tests.test_migrations``).

    Only versions not yet recorded get a digest: a recorded version whose schema changed means a
    shipped migration was edited, which is refused instead of recorded."""
    import tempfile

    from tests.pgserver import LocalPostgres

    old = json.loads(VERSIONS.read_text())
    new: dict[str, dict[str, str]] = {"sqlite": {}, "postgresql": {}}
    with tempfile.TemporaryDirectory() as folder:
        conn = sqlite3.connect(Path(folder) / "hearth.db", isolation_level=None)
        conn.execute("BEGIN")
        for version in numbers():
            migrations.migrate(conn, upto=version)
            new["sqlite"][str(version)] = digest(dump_sqlite(conn))
        conn.execute("COMMIT")
        sqlite_schema = dump_sqlite(conn)
        conn.close()
    server = LocalPostgres().start()
    try:
        server.admin("CREATE DATABASE fixtures")
        store = PgStore(server.url("fixtures"), migrate=False)
        pg = store.connection()
        with store.write():
            for version in [v for v in numbers() if v >= POSTGRESQL.baseline]:
                migrations.migrate(pg, POSTGRESQL, upto=version)
                new["postgresql"][str(version)] = digest(dump_postgres(pg.raw))
        postgres_schema = dump_postgres(pg.raw)
        store.close()
    finally:
        server.stop()
    changed = [f"{engine} {v}" for engine in new for v in old[engine] if new[engine][v] != old[engine][v]]
    if changed:
        raise SystemExit(f"shipped migrations now build another schema ({', '.join(changed)}): add a new one instead")
    SQLITE_SCHEMA.write_text(sqlite_schema)
    POSTGRES_SCHEMA.write_text(postgres_schema)
    VERSIONS.write_text(json.dumps(new, indent=1) + "\n")


if __name__ == "__main__":
    regenerate()
