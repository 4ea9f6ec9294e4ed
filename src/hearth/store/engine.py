"""The store seam: what module code holds (a ``Connection``) and asks (its ``Engine``).

A deployment's database is SQLite or PostgreSQL, chosen once when the store opens
(``open_store``). Module code types its connections as ``Connection`` and its rows as ``Row``, and
catches Hearth's errors (``ConstraintError`` for a duplicate, ``StoreError`` for the rest): both
engines translate their driver's errors into those. Where the two engines genuinely differ (the
job claim's row lock, integrity checks, bulk copies, backups, compaction, index kinds) module code
asks the store's ``Engine`` (``store.engine``, or ``engine_of(conn)`` holding only a connection)
instead of testing which engine it runs on. Everything engine-specific lives under ``store/``:
``sqlite.py`` and ``postgres.py`` implement this protocol, ``dialect.py`` adapts the SQL text.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Protocol


class Row(Protocol):
    """A result row, read by position (``row[0]``) or by column name (``row["id"]``)."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    """What a statement returns: its rows (an INSERT's id too, when it says ``RETURNING id``), the
    rows it changed."""

    row_factory: Any  # None for plain tuples (SQLite; PostgreSQL's rows unpack as tuples anyway)

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int = 1, /) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """One thread's connection to the store, on either engine (``?`` placeholders).

    ``snapshot_memo`` lives as long as the read snapshot under way (``Store.read()``) and is None
    outside one: a place for values that snapshot cannot change, read once instead of per use."""

    snapshot_memo: dict[Any, Any] | None

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class Database(Protocol):
    """The part of a store an Engine works with (``Store`` and ``PgStore``; this module stays a
    leaf that imports neither)."""

    @property
    def path(self) -> Path: ...

    @property
    def key(self) -> str: ...

    def connection(self) -> Connection: ...

    def write(self, *, exclusive: bool = True) -> AbstractContextManager[Connection]: ...

    def read(self, *, ahead: Hashable | None = None) -> AbstractContextManager[Connection]: ...


# The backup's fallback when an engine has no file to copy: copy every row into a new SQLite file
# at ``partial``; returns (row counts per table, schema version).
CopyRows = Callable[[Any, Path], "tuple[dict[str, int], int]"]


class Engine(Protocol):
    """What differs between the two engines, asked by module code instead of an engine test."""

    name: str  # "sqlite" or "postgresql", for reports (hearth doctor)
    # Several server processes may share the database, so what must hold across them (the login
    # limiter's counts) is kept in it rather than in one process's memory.
    shared: bool
    # How the keyword and vector indexes are kept: "fts5" (SQLite's FTS5 tables) or "tsvector"
    # (GIN expression indexes); "in_process" (an index each process builds from the table's
    # vectors, saved beside the database file) or "pgvector" (HNSW indexes in the database).
    keyword_index: str
    vector_index: str
    # One statement can insert into several tables (a data-modifying WITH): one round trip
    # instead of several where a round trip costs (a server over a socket).
    chained_writes: bool
    # Appended to a SELECT that picks a row to take: lock it, and skip rows another
    # transaction holds ("" where writers are serialised anyway).
    skip_locked: str
    # SQL naming the version of the row a one-table SELECT reads, which changes with every write
    # of it (store/versions.py); "" where reading the row itself costs as little.
    row_version: str

    def json_get(self, column: str, path: str) -> str:
        """SQL reading ``$.path`` (dotted) of the JSON text in ``column``, as text (numbers as numbers
        on SQLite): for ``IS NULL`` tests and comparisons with text."""
        ...

    def json_int(self, column: str, path: str) -> str:
        """SQL reading the integer at ``$.path`` (an id, a version) of the JSON text in ``column`` as
        a number, for comparisons with id columns and numbers (NULL where it is absent)."""
        ...

    def json_set(self, column: str, path: str) -> str:
        """SQL for the JSON text in ``column`` with ``$.path`` set to the JSON text of one ``?``."""
        ...

    def contains(self, text: str, part: str) -> str:
        """SQL true when the text ``text`` holds the text ``part`` (case matters): both SQL
        expressions."""
        ...

    def not_timestamp(self, column: str) -> str:
        """SQL true when ``column`` is not a timestamp of ``utcnow()``'s form."""
        ...

    def database_key(self, conn: Connection) -> str:
        """Which database ``conn`` reads, for process-local caches."""
        ...

    def foreign_key_violations(self, conn: Connection) -> int:
        """Rows whose reference points at no row (0 where every statement is checked as it runs)."""
        ...

    def index_problems(self, conn: Connection) -> list[str]:
        """Ways the derived keyword index disagrees with its rows, read inside a snapshot."""
        ...

    def index_damage(self, conn: Connection) -> list[str]:
        """The keyword index's own consistency check, run outside any transaction."""
        ...

    def advance_identities(self, conn: Connection, tables: list[str]) -> None:
        """After rows were inserted with their ids given: new rows get ids after them."""
        ...

    def after_copy(self, conn: Connection, tables: list[str]) -> None:
        """After a bulk copy into ``tables`` (migrate-store): identities and derived forms caught up."""
        ...

    def settle(self, store: Database, tables: list[str]) -> None:
        """After a bulk copy into ``tables`` has committed: what the engine needs to plan and search
        them as it will once it has run a while (outside any transaction)."""
        ...

    def empty_tables(self, conn: Connection, tables: list[str]) -> None:
        """Delete every row of ``tables`` (a restore onto a live database)."""
        ...

    def backup(self, store: Database, partial: Path, copy_rows: CopyRows) -> tuple[dict[str, int], int]:
        """A consistent copy of ``store`` as a SQLite file at ``partial``: (row counts, schema version)."""
        ...

    def reclaim(self, store: Database, tables: tuple[str, ...]) -> None:
        """Make the space deleted rows of ``tables`` held free and their text unreadable."""
        ...

    def checkpoint(self, conn: Connection, *, passive: bool = False) -> None:
        """Fold the write-ahead log into the database file and empty it (nothing where the server
        owns its files); ``passive``: copy what no reader still needs and wait for nobody."""
        ...

    def find_text(self, store: Database, text: str, words: list[str]) -> tuple[int, list[str], int]:
        """Where ``text`` (any letter case) is still stored: (places checked, places found, how
        many of ``words`` the keyword indexes still hold)."""
        ...

    def describe(self, store: Database) -> list[tuple[str, str]]:
        """(label, value) rows about the engine and its indexes, for ``hearth doctor``."""
        ...
