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
from typing import Iterator

from ..errors import StoreError
from . import migrations

BUSY_TIMEOUT_MS = 30_000


def utcnow() -> str:
    """Sortable UTC timestamp with microseconds, the form every created_at column uses."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The rowid an INSERT just made (typed optional by sqlite3; always set after an INSERT)."""
    rowid = cursor.lastrowid
    if rowid is None:
        raise StoreError("the insert made no row")
    return rowid


class Store:
    """A Hearth database file. Safe to share between threads: each thread gets its own connection."""

    def __init__(self, path: str | Path, *, migrate: bool = True):
        self.path = Path(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self.connection()
        if migrate:
            with self.write():
                migrations.migrate(conn)
        else:
            migrations.check_version(conn)

    # -- connections -----------------------------------------------------------------------
    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            self._local.depth = 0
            with self._lock:
                self._all.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a Hearth database: {exc}") from exc
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=NORMAL")
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
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested calls join the outermost one."""
        conn = self.connection()
        if self._local.depth:
            self._local.depth += 1
            try:
                yield conn
            finally:
                self._local.depth -= 1
            return
        conn.execute("BEGIN IMMEDIATE")
        self._local.depth = 1
        try:
            yield conn
        except BaseException:
            self._local.depth = 0
            conn.execute("ROLLBACK")
            raise
        self._local.depth = 0
        conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read: several queries see one snapshot of the database."""
        conn = self.connection()
        if self._local.depth or conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    @property
    def in_write(self) -> bool:
        return bool(getattr(self._local, "depth", 0))

    def schema_version(self) -> int:
        return migrations.current_version(self.connection())
