"""The SQLite store: connection pragmas, one connection per thread, explicit transactions.

Writes go through ``Store.write()``, which opens ``BEGIN IMMEDIATE`` so that a writer takes the
lock up front instead of failing half-way on upgrade; a nested ``write()`` joins the outer
transaction, so a multi-row change composed of smaller ones is still one transaction (S3).
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Hashable, Iterator, cast

from ..errors import StoreError
from . import migrations
from .sqlite import SQLITE, SqliteConnection, translate

if TYPE_CHECKING:
    from .engine import Connection, Cursor, Engine

__all__ = ["Store", "inserted_id", "translate", "utcnow"]

BUSY_TIMEOUT_MS = 30_000
PAGE_CACHE_KIB = 32 * 1024  # per connection, filled only as pages are read


def utcnow() -> str:
    """Sortable UTC timestamp with microseconds, the form every created_at column uses."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def inserted_id(cursor: Cursor) -> int:
    """The id a one-row ``INSERT ... RETURNING id`` made, read from the row it returns (once: the
    cursor holds that one row), the same on both engines (``Cursor`` has no ``lastrowid``)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("the insert made no row")
    return int(row[0])


class Store:
    """A Hearth database file. Safe to share between threads: each thread gets its own connection."""

    engine: Engine = SQLITE  # what differs between the engines (store/engine.py); PgStore's is PostgreSQL's

    def __init__(self, path: str | Path, *, migrate: bool = True):
        self.path = Path(path)
        self._local = threading.local()
        self._all: list[Connection] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self.connection()
        if migrate:
            with self.write():
                migrations.migrate(cast(sqlite3.Connection, conn))
        else:
            migrations.check_version(cast(sqlite3.Connection, conn))

    @property
    def key(self) -> str:
        """A stable name for this database in process-local caches (the file's path here)."""
        return str(self.path)

    # -- connections -----------------------------------------------------------------------
    def connection(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not self._local.depth and self._lost(conn):
            # The server dropped it (a restart, a proxy's idle timeout): the statement that met the
            # break failed; this thread's next one gets a new connection instead of failing forever.
            with self._lock:
                self._all.remove(conn)
            conn.close()
            conn = None
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            self._local.depth = 0
            with self._lock:
                self._all.append(conn)
        return conn

    def _lost(self, conn: Connection) -> bool:
        """Whether ``conn`` can no longer run a statement (never, for a file)."""
        return False

    def _open(self) -> Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000,
                factory=SqliteConnection,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        try:
            # sqlite3's own execute: the driver's message says what the file is instead.
            sqlite3.Connection.execute(conn, "PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a Hearth database: {exc}") from exc
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=NORMAL")
        # SQLite's default page cache is 2 MiB; at a million messages the index pages an insert or a
        # recall touches no longer fit, and ingest CPU rose by a third (docs/benchmarks.md).
        conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        # Deleted content is overwritten with zeros, not left in free pages (B4, verifiable forgetting).
        conn.execute("PRAGMA secure_delete=ON")
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def write(self, *, exclusive: bool = True) -> Iterator[Connection]:
        """One write transaction; nested calls join the outermost one.

        ``exclusive=False`` is for work that locks the rows it takes itself (the job queue's
        claim): SQLite serialises every writer anyway; on PostgreSQL it skips the writers' lock.
        """
        conn = self.connection()
        if self._local.depth:
            self._local.depth += 1
            try:
                yield conn
            finally:
                self._local.depth -= 1
            return
        try:
            self._begin_write(conn, exclusive)
        except sqlite3.Error as exc:  # connections raise Hearth's errors; this is for a plain one
            raise translate(exc) or exc from exc
        self._local.depth = 1
        try:
            yield conn
        except BaseException as exc:
            self._local.depth = 0
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            error = translate(exc)
            if error is not None:
                raise error from exc
            raise
        self._local.depth = 0
        try:
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            error = translate(exc)
            if error is None:
                raise
            raise error from exc

    def _begin_write(self, conn: Connection, exclusive: bool) -> None:
        conn.execute("BEGIN IMMEDIATE")

    @contextmanager
    def read(self, *, ahead: Hashable | None = None) -> Iterator[Connection]:
        """A consistent read: several queries see one snapshot of the database.

        ``ahead`` names a snapshot whose reads repeat from one use to the next (a send's reads of
        its thread): an engine with a round trip per statement sends them with its ``BEGIN``
        (store/ahead.py). SQLite has none to save."""
        conn = self.connection()
        if self._local.depth or conn.in_transaction:
            yield conn
            return
        self._begin_read(conn, ahead)
        conn.snapshot_memo = {}
        try:
            yield conn
        except BaseException as exc:
            self._end_read(conn, finished=False)
            conn.execute("COMMIT")
            error = translate(exc)
            if error is not None:
                raise error from exc
            raise
        finally:
            conn.snapshot_memo = None
        self._end_read(conn, finished=True)
        conn.execute("COMMIT")

    def _begin_read(self, conn: Connection, ahead: Hashable | None) -> None:
        conn.execute("BEGIN")

    def _end_read(self, conn: Connection, *, finished: bool) -> None:
        """Nothing to note: SQLite sends nothing ahead."""

    def commit_mark(self, conn: Connection) -> object:
        """What this connection's transaction sees, as a token: two marks are equal only if no other
        connection committed between them. Taken first in a ``read()`` block and again inside a
        later ``write()``, it tells whether work prepared from the read snapshot is still current.

        SQLite: ``PRAGMA data_version``, which as a transaction's first statement also fixes its
        snapshot, and changes with every commit of another connection (never with this one's).
        """
        return conn.execute("PRAGMA data_version").fetchone()[0]

    @property
    def in_write(self) -> bool:
        return bool(getattr(self._local, "depth", 0))

    def schema_version(self) -> int:
        return migrations.current_version(cast(sqlite3.Connection, self.connection()))
