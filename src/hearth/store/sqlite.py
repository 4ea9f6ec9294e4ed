"""SQLite's side of the store seam: its connection class, its errors as Hearth's, its Engine.

``SqliteConnection`` is ``sqlite3.Connection`` with one difference: a failing statement raises
Hearth's error (``ConstraintError`` for a broken unique or reference rule, ``StoreError`` or
``StoreBusy`` for the rest) instead of sqlite3's, as PostgreSQL's connection does, so module code
catches one set of errors on both engines.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import ConstraintError, HearthError, InvalidInput, StoreBusy, StoreError
from . import files

if TYPE_CHECKING:
    from .engine import Connection, CopyRows, Database, Engine

# The driver's own errors, which a connection's ``execute`` never raises (it raises Hearth's) but
# reading rows later may; ``translate`` turns them into Hearth's.
DriverError = sqlite3.Error

# The FTS5 indexes and their vocabulary tables (store/migrations/).
FTS_INDEXES = ("messages_fts", "archive_chunks_fts", "facts_fts")


def translate(exc: BaseException) -> HearthError | None:
    """The Hearth error for a database failure, or None when ``exc`` is not one (S3, U3).

    Runtime conditions (busy, disk full, read-only, damaged file) become ``StoreError`` with a
    plain reason; a value SQLite cannot bind (a lone surrogate, an integer past 64 bits) is the
    caller's ``InvalidInput``; a broken unique, reference or check rule is ``ConstraintError``.
    """
    if isinstance(exc, UnicodeEncodeError):
        return InvalidInput("text contains a lone surrogate and cannot be stored")
    if isinstance(exc, OverflowError):
        return InvalidInput("a number is outside the 64-bit range the database stores")
    if isinstance(exc, sqlite3.IntegrityError):
        return ConstraintError(str(exc))
    if not isinstance(exc, sqlite3.Error):
        return None
    return failure(str(exc))


def failure(message: str) -> StoreError:
    """The ``StoreError`` for a driver's message (either engine's, read for the same words)."""
    lowered = message.lower()
    if "locked" in lowered or "busy" in lowered:
        return StoreBusy("the database is busy; try again")
    if "full" in lowered:
        reason = "the disk holding the database is full"
    elif "readonly" in lowered or "read-only" in lowered:
        reason = "the database is read-only"
    elif "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        reason = "the database file is damaged; run hearth doctor and restore a backup"
    else:
        reason = f"the database failed: {message}"
    return StoreError(reason)


class SqliteEngine:
    """SQLite: one file, writers serialised by ``BEGIN IMMEDIATE``, FTS5, in-process vector indexes."""

    name = "sqlite"
    shared = False
    keyword_index = "fts5"
    vector_index = "in_process"
    chained_writes = False
    skip_locked = ""
    row_version = ""

    def json_get(self, column: str, path: str) -> str:
        return f"json_extract({column}, '$.{path}')"

    def json_int(self, column: str, path: str) -> str:
        return f"json_extract({column}, '$.{path}')"  # a JSON number is read as SQLite's number

    def json_set(self, column: str, path: str) -> str:
        return f"json_set({column}, '$.{path}', json(?))"

    def contains(self, text: str, part: str) -> str:
        return f"instr({text}, {part}) > 0"

    def not_timestamp(self, column: str) -> str:
        return (f"{column} NOT GLOB"
                " '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]*Z'")

    def database_key(self, conn: "Connection") -> str:
        return conn.execute("PRAGMA database_list").fetchone()[2] or f"memory:{id(conn)}"

    def foreign_key_violations(self, conn: "Connection") -> int:
        return len(conn.execute("PRAGMA foreign_key_check").fetchall())

    def index_problems(self, conn: "Connection") -> list[str]:
        # Only chat turns are indexed, so compare the index's document count with those rows.
        indexed = conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0]
        expected = conn.execute(
            "SELECT count(*) FROM messages WHERE kind = 'chat' AND role IN ('user', 'assistant')"
        ).fetchone()[0]
        if indexed != expected:
            return [f"keyword index holds {indexed} messages, expected {expected}"]
        return []

    def index_damage(self, conn: "Connection") -> list[str]:
        # FTS5's own check is issued as a write statement, so it runs outside a read snapshot.
        try:
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
        except (sqlite3.DatabaseError, StoreError):
            return ["keyword index is damaged"]
        return []

    def advance_identities(self, conn: "Connection", tables: list[str]) -> None:
        """Nothing to do: a rowid table's next id is always after its largest."""

    def after_copy(self, conn: "Connection", tables: list[str]) -> None:
        """Nothing to do: identities follow the rows and vectors have no second form."""

    def settle(self, store: "Database", tables: list[str]) -> None:
        """Nothing to do: FTS5 merges its segments as it writes, and the queries are written for
        SQLite's planner without statistics (it has never been given any)."""

    def empty_tables(self, conn: "Connection", tables: list[str]) -> None:
        for table in tables:
            conn.execute(f'DELETE FROM "{table}"')

    def backup(self, store: "Database", partial: Path, copy_rows: "CopyRows") -> tuple[dict[str, int], int]:
        # The online backup API: writers may go on while it copies.
        return files.copy_live(store.path, partial)

    def reclaim(self, store: "Database", tables: tuple[str, ...]) -> None:
        # Merging an FTS5 index drops every trace of its deleted rows; the WAL is then truncated.
        with store.write() as conn:
            for index in FTS_INDEXES:
                conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
        self.checkpoint(store.connection())

    def checkpoint(self, conn: "Connection", *, passive: bool = False) -> None:
        if not conn.in_transaction:
            conn.execute(f"PRAGMA wal_checkpoint({'PASSIVE' if passive else 'TRUNCATE'})")

    def find_text(self, store: "Database", text: str, words: list[str]) -> tuple[int, list[str], int]:
        # The raw bytes of the database file, its WAL (after a checkpoint) and the saved vector
        # index files beside it; then the words in the FTS5 vocabularies.
        self.checkpoint(store.connection())
        needles = {text.encode("utf-8"), text.lower().encode("utf-8"), text.upper().encode("utf-8")}
        path = Path(store.path)
        found_files = [path, path.with_name(path.name + "-wal")]
        vectors = path.with_name(path.name + ".vectors")
        if vectors.is_dir():
            found_files += sorted(p for p in vectors.rglob("*") if p.is_file())
        found, checked = [], 0
        for f in found_files:
            if not f.exists():
                continue
            checked += 1
            data = f.read_bytes()
            if any(n in data for n in needles):
                found.append(f.name)
        conn = store.connection()
        terms = 0
        for index in FTS_INDEXES:
            for word in words:
                terms += conn.execute(f"SELECT count(*) FROM {index}_vocab WHERE term = ?", (word,)).fetchone()[0]
        return checked, found, terms

    def describe(self, store: "Database") -> list[tuple[str, str]]:
        conn = store.connection()
        try:
            conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
            conn.execute("DROP TABLE temp.fts5_probe")
            fts5 = True
        except (sqlite3.OperationalError, StoreError):
            fts5 = False
        return [("engine", "sqlite"), ("sqlite", sqlite3.sqlite_version), ("database", str(store.path)),
                ("keyword index (FTS5)", "available" if fts5 else "missing")]


SQLITE = SqliteEngine()

_execute = sqlite3.Connection.execute
_executemany = sqlite3.Connection.executemany


class SqliteConnection(sqlite3.Connection):
    """A store connection: ``sqlite3.Connection`` raising Hearth's errors (see the module doc)."""

    engine = SQLITE
    snapshot_memo: dict[Any, Any] | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        try:
            return _execute(self, sql, parameters)
        except sqlite3.Error as exc:
            raise cast(HearthError, translate(exc)) from exc

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        try:
            return _executemany(self, sql, seq_of_parameters)
        except sqlite3.Error as exc:
            raise cast(HearthError, translate(exc)) from exc


def connect(path: str | Path, **kwargs: Any) -> SqliteConnection:
    """A ``SqliteConnection`` to ``path`` (``sqlite3.connect``'s arguments)."""
    return sqlite3.connect(path, factory=SqliteConnection, **kwargs)


def open_read_only(path: str | Path) -> SqliteConnection:
    """A read-only connection of its own to a store's file (a background thread's)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, factory=SqliteConnection)
    return conn


def engine_of(conn: Any) -> "Engine":
    """The engine of a store connection (a plain ``sqlite3`` connection is SQLite's)."""
    return getattr(conn, "engine", SQLITE)
