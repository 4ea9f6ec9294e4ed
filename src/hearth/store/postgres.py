"""The PostgreSQL store: a sqlite3-shaped connection over psycopg 3, and the Store that opens it.

Module code is written once against the sqlite3 DB-API and SQLite's dialect. ``PgConnection``
gives it the same surface (``execute`` returning a cursor with ``fetchone``/``fetchall``/
``rowcount``, rows readable by index and by name, ``in_transaction``, errors raised
as Hearth's, as the SQLite connection raises them) and rewrites each statement once through
``dialect.to_postgres``. ``PgEngine`` is PostgreSQL's side of the Engine seam (store/engine.py).

Transactions keep SQLite's guarantees: ``store.write()`` opens ``BEGIN`` and takes one
transaction-scoped advisory lock, so writers are serialised exactly as ``BEGIN IMMEDIATE``
serialises them on SQLite (read-modify-write code needs no change); ``store.read()`` is a
``REPEATABLE READ`` snapshot. A one-row INSERT that meets a unique key raises ``ConstraintError``
without aborting the transaction (it is sent with ``ON CONFLICT DO NOTHING``), so code that
handles a duplicate and goes on works as on SQLite. (A savepoint per statement would
do the same for every error, but makes long transactions quadratic on PostgreSQL.)
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Iterable, Iterator, Sequence, cast
from urllib.parse import urlsplit

from ..errors import ConfigError, ConstraintError, HearthError, InvalidInput, StoreBusy, StoreError
from . import catalog, dialect, migrations
from .ahead import Call, ReadAhead, Snapshot
from .connection import BUSY_TIMEOUT_MS, Store
from .sqlite import failure

if TYPE_CHECKING:
    from .engine import Connection, CopyRows, Database

# The key of the one advisory lock every write transaction takes (S3: writers are serialised).
WRITE_LOCK_KEY = 0x4865617274  # "Heart"


def is_postgres(conn: Any) -> bool:
    """True for a connection of the PostgreSQL store (the few engine-specific branches ask this)."""
    return isinstance(conn, PgConnection)


# Each keyword index's table and text column: a GIN expression index over hearth_words(column),
# the index's postings and vocabulary (store/migrations/), PostgreSQL's stand-in
# for an FTS5 table.
KEYWORD_INDEXES = {"messages_fts": ("messages", "content"), "archive_chunks_fts": ("archive_chunks", "text"),
                   "facts_fts": ("facts", "text")}


class PgEngine:
    """PostgreSQL: a server several Hearth processes share; tsvector + GIN, pgvector's HNSW."""

    name = "postgresql"
    shared = True
    keyword_index = "tsvector"
    vector_index = "pgvector"
    chained_writes = True
    skip_locked = " FOR UPDATE SKIP LOCKED"
    # The server's start too: transaction ids are the server's own, so a database restored to
    # another server under the same address and name never matches a version read before.
    row_version = "xmin::text || ctid::text || pg_postmaster_start_time()::text"

    def json_get(self, column: str, path: str) -> str:
        return f"({column}::jsonb #>> '{{{','.join(path.split('.'))}}}')"

    def json_int(self, column: str, path: str) -> str:
        return f"({self.json_get(column, path)}::bigint)"  # #>> reads text

    def json_set(self, column: str, path: str) -> str:
        return f"(jsonb_set({column}::jsonb, '{{{','.join(path.split('.'))}}}', ?::jsonb))::text"

    def contains(self, text: str, part: str) -> str:
        return f"strpos({text}, {part}) > 0"

    def not_timestamp(self, column: str) -> str:
        return rf"{column} !~ '^\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d.*Z$'"

    def database_key(self, conn: Connection) -> str:
        return cast(PgConnection, conn).key

    def foreign_key_violations(self, conn: Connection) -> int:
        return 0  # every statement's references are checked as it runs

    def index_problems(self, conn: Connection) -> list[str]:
        return []  # the keyword index is an index of the rows' own table: it cannot drift

    def index_damage(self, conn: Connection) -> list[str]:
        return []  # the server checks its own indexes

    def advance_identities(self, conn: Connection, tables: list[str]) -> None:
        catalog.advance_identities(conn, tables)

    def after_copy(self, conn: Connection, tables: list[str]) -> None:
        catalog.advance_identities(conn, tables)

    def settle(self, store: Database, tables: list[str]) -> None:
        # Until autovacuum reaches a copied table it has no planner statistics and its GIN indexes
        # hold the copied rows in their pending list, which every keyword query reads through: the
        # planner then reads every vector for a top-10, or tokenises every archive chunk to count
        # one word rather than use a GIN index it costs as large. VACUUM merges the pending lists.
        conn = store.connection()
        if conn.in_transaction:
            return
        for table in tables:
            conn.execute(f"VACUUM (ANALYZE) {table}")

    def empty_tables(self, conn: Connection, tables: list[str]) -> None:
        # TRUNCATE fires no row triggers: the postings and the vocabulary go with their rows and
        # the keyword totals start again from zero; the copy that follows refills them through its inserts.
        if tables:
            derived = [t for t in catalog.PG_DERIVED if t != "keyword_totals"]
            conn.execute(f"TRUNCATE {', '.join([*tables, *derived])} RESTART IDENTITY")
            conn.execute("UPDATE keyword_totals SET rows = 0, lengths = 0")

    def backup(self, store: Database, partial: Path, copy_rows: CopyRows) -> tuple[dict[str, int], int]:
        # The server's files are not Hearth's to copy: every row goes into a new SQLite file.
        return copy_rows(store, partial)

    def reclaim(self, store: Database, tables: tuple[str, ...]) -> None:
        # The keyword indexes' vocabulary keeps only the words some indexed row still holds (a
        # deleted or edited row's words stay until now, as in an FTS5 index until it is merged),
        # under the writers' lock, so a row being written cannot lose a word it has just taught.
        # VACUUM then removes dead rows and their GIN and HNSW index entries and marks their space free.
        with store.write() as conn:
            for index, (table, _column) in KEYWORD_INDEXES.items():
                conn.execute(f"DELETE FROM keyword_lexemes k WHERE k.name = ? AND NOT EXISTS"
                             f" (SELECT 1 FROM {table}_postings p WHERE p.lexeme = k.lexeme)", (index,))
        conn = store.connection()
        if conn.in_transaction:
            return  # VACUUM cannot run inside a transaction; the next compaction (or autovacuum) does it
        present = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        for table in tables:
            if table in present:
                conn.execute(f"VACUUM {table}")

    def checkpoint(self, conn: Connection, *, passive: bool = False) -> None:
        """Nothing to do: the server owns its files and its log."""

    def find_text(self, store: Database, text: str, words: list[str]) -> tuple[int, list[str], int]:
        # The server's files are not readable here: every text column of every table instead
        # (places are ``table.column``), and the words in the keyword indexes' terms and vocabulary.
        found: list[str] = []
        with store.read() as conn:
            columns = conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND data_type IN ('text', 'character varying', 'json', 'jsonb') ORDER BY table_name, column_name"
            ).fetchall()
            checked = len({r[0] for r in columns})
            pattern = "%" + text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"
            for table, column in columns:
                hit = conn.execute(f'SELECT 1 FROM "{table}" WHERE lower(CAST("{column}" AS TEXT)) LIKE ? ESCAPE \'!\''
                                   " LIMIT 1", (pattern,)).fetchone()
                if hit:
                    found.append(f"{table}.{column}")
            terms = 0
            for index, (table, column) in KEYWORD_INDEXES.items():
                for word in words:
                    terms += conn.execute(f"SELECT count(*) FROM {table} WHERE hearth_words({column})"
                                          " @@ plainto_tsquery('simple', hearth_fold(?))", (word,)).fetchone()[0]
                    terms += conn.execute("SELECT count(*) FROM keyword_lexemes WHERE name = ? AND lexeme"
                                          " = ANY(tsvector_to_array(hearth_words(?)))", (index, word)).fetchone()[0]
        return checked, found, terms

    def describe(self, store: Database) -> list[tuple[str, str]]:
        info = cast(PgStore, store).server_info()
        return [("engine", "postgresql"), ("postgresql", info["server"]), ("database", info["database"]),
                ("pgvector", info["pgvector"]), ("keyword index", "tsvector + GIN")]


POSTGRES = PgEngine()


def _psycopg():
    try:
        import psycopg
    except ImportError as exc:  # the optional extra is not installed
        raise ConfigError("HEARTH_DATABASE_URL names PostgreSQL but psycopg is not installed;"
                          " install hearth[postgres]") from exc
    return psycopg


class Row:
    """A result row read by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: Sequence[Any], index: dict[str, int]):
        self._values = tuple(values)
        self._index = index

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            try:
                return self._values[self._index[key]]
            except KeyError:
                raise IndexError(f"No item with that key: {key!r}") from None
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return self._values == other._values and self._index == other._index
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values))!r})"


def _row_factory(cursor: Any) -> Any:
    description = cursor.description
    if description is None:
        return lambda values: values
    index = {column.name: i for i, column in enumerate(description)}
    return lambda values: Row(values, index)


def _to_hearth_error(exc: BaseException) -> HearthError:
    """Hearth's error for a psycopg error, as SQLite's are translated (``sqlite.translate``)."""
    psycopg = _psycopg()
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.IntegrityError):
        return ConstraintError(message)
    if isinstance(exc, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected,
                        psycopg.errors.LockNotAvailable)):
        return StoreBusy("the database is busy; try again")
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreError("the disk holding the database is full")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return StoreError("the database is read-only")
    if isinstance(exc, psycopg.errors.NumericValueOutOfRange):
        return InvalidInput("a number is outside the 64-bit range the database stores")
    return failure(message)


class PgCursor:
    """The part of ``sqlite3.Cursor`` module code uses."""

    def __init__(self, cursor: Any):
        self._cursor = cursor
        self.row_factory: Any = None  # accepted and ignored: rows unpack as tuples do

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def description(self) -> Any:
        return self._cursor.description

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return list(self._cursor.fetchall())

    def fetchmany(self, size: int = 1) -> list[Any]:
        if self._cursor.description is None:
            return []
        return list(self._cursor.fetchmany(size))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cursor.close()


class PgConnection:
    """A psycopg connection with the sqlite3 surface module code is written against."""

    engine = POSTGRES
    snapshot_memo: dict[Any, Any] | None = None

    def __init__(self, raw: Any):
        self._raw = raw
        self.row_factory: Any = None  # accepted and ignored: rows are always ``Row``
        self._key: str | None = None
        self.ahead: Snapshot | None = None  # a read snapshot's answers sent ahead (store/ahead.py)
        # A transaction's opening statements, not sent yet: they go with its first statement, in
        # one round trip (``_opened_with``); a transaction that asks nothing sends nothing.
        self._opening: tuple[str, ...] = ()

    @property
    def raw(self) -> Any:
        """The psycopg connection, for work outside the sqlite3 surface; a transaction whose opening
        is still held back is opened first, so that work runs inside it."""
        if self._opening:
            self._open_now()
        return self._raw

    @property
    def key(self) -> str:
        """Which database this is (server address, port, name), for process-local caches: asked
        once per connection, not on every query that consults a cache."""
        if self._key is None:
            self._key = str(self._raw.execute("SELECT concat('postgresql:', inet_server_addr(), ':',"
                                             " inet_server_port(), '/', current_database())").fetchone()[0])
        return self._key

    @property
    def in_transaction(self) -> bool:
        status = self._raw.info.transaction_status
        return bool(self._opening) or status != _psycopg().pq.TransactionStatus.IDLE

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> PgCursor:
        statement = dialect.to_postgres(sql)
        if statement.begin:
            return self._begin(statement)
        if self._opening and statement.sql in ("COMMIT", "ROLLBACK"):
            self._opening = ()  # a transaction that asked nothing was never opened
            return PgCursor(self._raw.cursor())
        params = _params(parameters)
        if self.ahead is not None:
            answered = self.ahead.take(statement.sql, params, statement.reads_only)
            if answered is not None:
                return PgCursor(answered)
        psycopg = _psycopg()
        cursor = self._raw.cursor()
        try:
            if self._opening:
                self._opened_with(cursor, statement.sql, params)
            else:
                cursor.execute(statement.sql, params)
        except psycopg.Error as exc:
            raise _to_hearth_error(exc) from exc
        if statement.conflict_raises and cursor.rowcount == 0:
            raise ConstraintError(f"UNIQUE constraint failed: {statement.conflict_raises}")
        return PgCursor(cursor)

    def _begin(self, statement: dialect.Statement) -> PgCursor:
        if statement.begin == "write":
            # The writers' lock is taken before the transaction's first statement runs, in the
            # same round trip: writers stay serialised.
            self.begin(statement.sql, f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")
        else:
            self.begin(statement.sql)
        return PgCursor(self._raw.cursor())

    def begin(self, *opening: str) -> None:
        """Open a transaction with ``opening`` (its ``BEGIN`` and what goes with it), sent with its
        first statement: a round trip less for every transaction, two for one that asks nothing.
        (A snapshot is taken by the first statement, not by ``BEGIN``, so a read sees the same.)"""
        self._opening = opening

    def _opened_with(self, cursor: Any, sql: str, params: Any) -> None:
        opening, self._opening = self._opening, ()
        with self._raw.pipeline():
            for opener in opening:
                self._raw.execute(opener)
            cursor.execute(sql, params)

    def _open_now(self) -> None:
        opening, self._opening = self._opening, ()
        psycopg = _psycopg()
        try:
            self._raw.execute("; ".join(opening))  # one simple-protocol message
        except psycopg.Error as exc:
            raise _to_hearth_error(exc) from exc

    def begin_read(self, calls: list[Call]) -> dict[Call, Any] | None:
        """Open a read snapshot with ``calls`` sent in the same round trip (one pipeline); their
        cursors, holding their rows, by call. None when one of them failed: the snapshot is then
        open with nothing sent ahead."""
        opener = dialect.to_postgres("BEGIN")
        if not calls:
            self._begin(opener)
            return {}
        psycopg = _psycopg()
        answers = {}
        try:
            with self._raw.pipeline():
                self._raw.execute(opener.sql)
                for call in calls:
                    cursor = self._raw.cursor()
                    cursor.execute(*call)
                    answers[call] = cursor
        except psycopg.Error:
            # A statement that ran last time fails now (a migration changed its table, say): the
            # snapshot starts again with nothing sent ahead; the code's own statements fail, if
            # they still do, when it asks them.
            if not self._raw.broken and self.in_transaction:
                self._raw.execute("ROLLBACK")
            self._begin(opener)
            return None
        return answers

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]]) -> PgCursor:
        statement = dialect.to_postgres(sql)
        rows = [_params(p) for p in seq_of_parameters]
        psycopg = _psycopg()
        cursor = self.raw.cursor()  # opens a held-back transaction first
        try:
            if rows:
                cursor.executemany(statement.sql, rows)
        except psycopg.Error as exc:
            raise _to_hearth_error(exc) from exc
        return PgCursor(cursor)

    def commit(self) -> None:
        self._end("COMMIT")

    def rollback(self) -> None:
        self._end("ROLLBACK")

    def _end(self, sql: str) -> None:
        if self.in_transaction:
            self.execute(sql)

    def close(self) -> None:
        self._raw.close()


def _params(parameters: Sequence[Any] | dict[str, Any]) -> Any:
    if isinstance(parameters, dict):
        return parameters
    return tuple(parameters)


def _adapters(psycopg: Any) -> Any:
    """Types as module code expects them from SQLite: ints and bools as untyped literals that
    PostgreSQL casts to the column they meet (SQLite's loose typing), numerics back as int/float."""
    from psycopg.adapt import Dumper, Loader

    class UntypedInt(Dumper):
        oid = 0  # "unknown": the server infers the type from where the value is used

        def dump(self, obj: Any) -> bytes:
            return str(int(obj)).encode()

    class Number(Loader):
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            if "." in text or "e" in text.lower() or text in ("NaN", "Infinity", "-Infinity"):
                return float(text)
            return int(text)

    adapters = psycopg.adapt.AdaptersMap(psycopg.adapters)
    adapters.register_dumper(int, UntypedInt)
    adapters.register_dumper(bool, UntypedInt)
    adapters.register_loader("numeric", Number)
    return adapters


def _connect_reason(exc: BaseException) -> str:
    """psycopg's several-line connection failure as one short clause."""
    text = " ".join(str(exc).split())
    if "failed:" in text:
        text = text.rsplit("failed:", 1)[1].strip()
        text = text.split(" Is the server running")[0].strip()
    return text or "no answer"


def describe_url(url: str) -> str:
    """The database URL without its password, for messages and keys."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}@" if parts.username else ""
    return f"postgresql://{user}{host}{port}{parts.path}"


class PgStore(Store):
    """A Hearth database on PostgreSQL: the same interface as the SQLite ``Store`` (S9)."""

    engine = POSTGRES

    def __init__(self, url: str, *, migrate: bool = True):
        self.url = url
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._adapters: Any = None
        self._ahead = ReadAhead()
        conn = self.connection()
        raw = cast(PgConnection, conn)
        if migrate:
            with self.write():
                migrations.migrate(raw, migrations.POSTGRESQL)
        else:
            migrations.check_version(raw, migrations.POSTGRESQL)

    @property
    def key(self) -> str:
        return describe_url(self.url)

    @property  # type: ignore[override]
    def path(self) -> Path:
        # Nothing belongs beside a path made from the URL: a caller that wants the database file
        # (the in-process vector index, raw-file scans, the SQLite backup API) must branch first.
        raise StoreError("a PostgreSQL store has no database file")

    @path.setter
    def path(self, value: Path) -> None:
        raise StoreError("a PostgreSQL store has no database file")

    def _open(self) -> Connection:
        psycopg = _psycopg()
        if self._adapters is None:
            self._adapters = _adapters(psycopg)
        try:
            raw = psycopg.connect(self.url, autocommit=True, row_factory=_row_factory, context=self._adapters,
                                  connect_timeout=10)
        except psycopg.OperationalError as exc:
            reason = _connect_reason(exc)
            raise ConfigError(f"cannot connect to {describe_url(self.url)}: {reason}") from exc
        # A writer waits for the writers' lock as long as SQLite's busy timeout, then is told "busy".
        raw.execute(f"SET lock_timeout = {BUSY_TIMEOUT_MS}")
        # A filtered nearest-neighbour search (one user's vectors) keeps scanning the HNSW graph
        # until it has enough rows instead of returning fewer (pgvector 0.8). A search's rows are
        # read from memory or an SSD, where a random read costs little more than a sequential one:
        # at the server's default (4, for spinning disks) the planner scans a whole side table to
        # read the thousand rows a keyword search matched (15 ms of a 29 ms query at 30,000 messages).
        raw.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false),"
                    " set_config('hnsw.ef_search', '100', false), set_config('random_page_cost', '1.1', false)")
        return PgConnection(raw)

    def _lost(self, conn: Connection) -> bool:
        raw = cast(PgConnection, conn)._raw
        return bool(raw.closed or raw.broken)

    def _begin_write(self, conn: Connection, exclusive: bool) -> None:
        if exclusive:
            conn.execute("BEGIN IMMEDIATE")  # BEGIN and the writers' advisory lock
        else:
            cast(PgConnection, conn).begin("BEGIN")

    def _begin_read(self, conn: Connection, ahead: Hashable | None) -> None:
        if ahead is None:
            super()._begin_read(conn, ahead)
            return
        pg = cast(PgConnection, conn)
        answers = pg.begin_read(self._ahead.planned(ahead))
        if answers is None:
            self._ahead.forget(ahead)  # learnt again from the next two uses
        pg.ahead = Snapshot(ahead, answers or {})

    def _end_read(self, conn: Connection, *, finished: bool) -> None:
        pg = cast(PgConnection, conn)
        snapshot, pg.ahead = pg.ahead, None
        if snapshot is not None and finished:
            self._ahead.ran(snapshot)

    def commit_mark(self, conn: Connection) -> object:
        """The transaction's snapshot (``xmin:xmax:in-progress ids``). A transaction that commits
        after it either was in progress then (it leaves the list) or started later (``xmax``
        moves), so an equal snapshot taken later means nothing committed in between."""
        return cast(PgConnection, conn).raw.execute("SELECT pg_current_snapshot()::text").fetchone()[0]

    def schema_version(self) -> int:
        return migrations.current_version(cast(PgConnection, self.connection()), migrations.POSTGRESQL)

    def server_info(self) -> dict[str, str]:
        """Engine, server and extension versions (``hearth doctor``)."""
        conn = self.connection()
        server = conn.execute("SHOW server_version").fetchone()[0]
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        return {"engine": "postgresql", "server": str(server), "pgvector": vector[0] if vector else "missing",
                "database": describe_url(self.url)}


def open_store(database_url: str, path: Path, *, migrate: bool = True) -> Store:
    """The store a deployment's settings name: PostgreSQL for a ``postgresql://`` URL, else SQLite."""
    if database_url:
        if not database_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("HEARTH_DATABASE_URL must start with postgresql://")
        return PgStore(database_url, migrate=migrate)
    return Store(path, migrate=migrate)
