"""Hearth database files: what a backup is on either engine (a self-contained SQLite file).

Backups are SQLite files whatever the deployment's engine (a PostgreSQL deployment's backup is
its rows copied into one), so verifying and restoring one reads SQLite directly here; module code
(ops/backup.py) asks these functions instead of opening files itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StoreError


def tables(conn: sqlite3.Connection) -> list[str]:
    """Every real table (shadow tables of the keyword index included; virtual tables are views)."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
    )]


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in tables(conn)}


def schema_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
    if not exists:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]


def open_read_only(path: Path) -> sqlite3.Connection:
    """A backup file opened to be read only. Raises StoreError when it is no SQLite database."""
    # immutable: the file is only read, and no -wal/-shm files are made beside a backup.
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path.name} is not a readable Hearth database: {exc}") from exc
    return conn


def check(path: Path) -> tuple[list[str], int, dict[str, int]]:
    """(``PRAGMA integrity_check``'s lines, schema version, row counts) of a file. Raises StoreError."""
    conn = open_read_only(path)
    try:
        try:
            result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            return result, schema_version(conn), counts(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path.name} failed its integrity check: {exc}") from exc
    finally:
        conn.close()


def copy_live(source_path: Path, partial: Path) -> tuple[dict[str, int], int]:
    """The online backup API's copy of a live SQLite store, and the counts of the read snapshot
    it was taken from (both from one read transaction on a dedicated connection)."""
    source = sqlite3.connect(source_path, isolation_level=None)
    try:
        source.execute("BEGIN")
        try:
            found = counts(source)  # starts the read snapshot the copy is taken from
            version = schema_version(source)
            target = sqlite3.connect(partial, isolation_level=None)
            try:
                source.backup(target)
                # A self-contained file: no WAL header, so it opens read-only anywhere.
                target.execute("PRAGMA journal_mode=DELETE")
            finally:
                target.close()
        finally:
            source.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        partial.unlink(missing_ok=True)
        raise StoreError(f"backup failed: {exc}") from exc
    finally:
        source.close()
    return found, version


def seal(path: Path) -> dict[str, int]:
    """Make a file written through a Store self-contained (no WAL), as the backup API's copy is;
    returns its row counts."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        return counts(conn)
    finally:
        conn.close()


def restore_file(backup: Path, target_path: Path) -> tuple[dict[str, int], list[str]]:
    """Copy a backup file over the database at ``target_path`` through the backup API (it takes
    the target's locks like any writer); returns the restored file's (row counts, integrity check)."""
    source = open_read_only(backup)
    try:
        target = sqlite3.connect(target_path, isolation_level=None)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=WAL")
            restored = counts(target)
            result = [r[0] for r in target.execute("PRAGMA integrity_check")]
        finally:
            target.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"restore failed: {exc}") from exc
    finally:
        source.close()
    return restored, result
