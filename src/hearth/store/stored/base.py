"""The registry's parts: what a table stores, how its rows go, and the checks against the live schema.

A ``Stored`` entry names a table, every text or blob column it has (``content``: what a person
wrote, or what was derived from it; ``plain``: columns that hold none, each group with its reason),
how its rows are found (the column holding the user, the conversation, the message) and how they
go when their user, a conversation or a single message is forgotten. How they go is one of:

- ``Cascade(parent)``: the database deletes them with their parent row (``ON DELETE CASCADE``);
- ``Trigger(source)``: a trigger on ``source`` removes them when its rows go (an index, a fact);
- ``Step(...)``: statements the forget walk runs, deleting rows or blanking the text of rows that
  must stay (a handoff record the ledger still points at); a step names a *hook* instead of a
  function where the work needs an area's logic (rendering a handoff again, rebuilding a prompt);
- ``Compaction(source)``: pruned by the compaction job after the transaction (a vocabulary);
- ``Kept(reason)``: forgetting that target leaves them, for the reason given;
- ``Itself()``: the account's own row (``users``), whose removal cascades to everything above.

``Registry.walk`` runs every step in order (``FIND`` before ``DERIVED`` before ``TURNS``...), each
once, in the caller's transaction. ``Registry.problems`` reads the live schema and lists every text
or blob column no entry covers, every entry naming a column or table that is not there, and every
cascade or trigger an entry counts on that the schema does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Union

from ...errors import StoreError
from ..engine import Connection
from ..sqlite import engine_of

# The walk's phases, in order. Within one phase steps run in registry order.
FIND = 10      # read what goes before anything goes (facts citing the turns, a document's chunks)
DERIVED = 20   # what was built from the forgotten text, while that text can still be read
TURNS = 30     # the messages themselves (their events: rows, index entries and vectors cascade)
THREADS = 40   # whole conversations, then folders
DOCUMENTS = 50  # archive documents (after the threads: a forgotten thread's handoff goes with it)
MEMORIES = 60  # memories, each with its versions, suggestions and the prompts holding it
PROMPTS = 70   # stored prompts rebuilt from what remains


@dataclass
class Doomed:
    """One forget's resolved scope, for the steps: ids of what goes, and what they learn on the way."""

    user_id: int
    conversations: list[int] = field(default_factory=list)  # whole threads
    messages: list[int] = field(default_factory=list)  # single messages outside whole threads
    gone: set[int] = field(default_factory=set)  # every message id going, put-away turns included
    stashed: list[int] = field(default_factory=list)  # put-away turns going with single messages
    texts: list[str] = field(default_factory=list)  # the single messages' texts, to find quotes of them
    touched: list[int] = field(default_factory=list)  # threads that stay but lose turns
    first: dict[int, int] = field(default_factory=dict)  # such a thread -> its first forgotten turn
    folders: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)
    search_log: list[int] = field(default_factory=list)  # entries forgotten by date (a range)
    proposals: list[int] = field(default_factory=list)  # suggestions forgotten by date (a range)
    # Learned by steps: facts citing the turns, the documents' chunks, prompts to rebuild.
    facts: list[int] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    rebuild: set[int] = field(default_factory=set)


Run = Callable[[Connection, Doomed], int]


@dataclass(frozen=True)
class Step:
    """Statements the walk runs: ``run`` (or the caller's hook named ``hook``) returns a number,
    added to the receipt's ``count`` when there is one. ``does``: delete, blank, rewrite or find."""

    phase: int
    does: str
    run: Run | None = None
    hook: str | None = None
    count: str | None = None


@dataclass(frozen=True)
class Cascade:
    """Deleted by the database with the parent row (a foreign key with ``ON DELETE CASCADE``)."""

    parent: str


@dataclass(frozen=True)
class Trigger:
    """Removed by a trigger on ``source`` when the source rows go."""

    source: str


@dataclass(frozen=True)
class Compaction:
    """Pruned by the compaction job after the forget's transaction (what no row of ``source`` holds)."""

    source: str


@dataclass(frozen=True)
class Itself:
    """The account's own row: removing it removes every row that cascades from it."""


@dataclass(frozen=True)
class Kept:
    """Left as it is, for ``reason``."""

    reason: str


Purge = Union[Cascade, Trigger, Step, Compaction, Itself, Kept, tuple[Union[Cascade, Trigger, Step], ...]]


@dataclass(frozen=True)
class Plain:
    """Text columns that hold no user content, and why."""

    reason: str
    columns: tuple[str, ...]

    def __init__(self, reason: str, *columns: str) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "columns", columns)


@dataclass(frozen=True)
class Stored:
    """What one table stores, how its rows are found and how they go (see the module doc)."""

    table: str
    area: str
    content: tuple[str, ...]  # "postgresql:vec": a column on that engine only
    on_conversation: Purge
    on_message: Purge
    plain: tuple[Plain, ...] = ()
    user: str | None = "user_id"  # the column holding the user (None: an index, see ``index_of``)
    conversation: str | None = None  # the column holding the conversation, if any
    message: str | None = None  # the column holding the message (its ledger event), if any
    on_user: Purge = Cascade("users")
    also: tuple[Step, ...] = ()  # steps for the other targets: documents, memories, folders, dates
    engine: str | None = None  # only on this engine ("sqlite", "postgresql")
    index_of: str | None = None  # a keyword index's rows: the table whose rows they index

    def found(self, by: str) -> str | None:
        """SQL selecting this table's rows of one user, conversation or message (``by``; its id is
        the one ``?``), or None where no column of its own names it (an index found through its rows)."""
        column = {"user": self.user, "conversation": self.conversation, "message": self.message}[by]
        if column is None:
            return None
        return f'SELECT count(*) FROM "{self.table}" WHERE "{column}" = ?'

    def steps(self) -> list[Step]:
        out: list[Step] = []
        for purge in (self.on_user, self.on_conversation, self.on_message, *self.also):
            for step in purge if isinstance(purge, tuple) else (purge,):
                if isinstance(step, Step) and step not in out:
                    out.append(step)
        return out


@dataclass(frozen=True)
class Exempt:
    """A table that holds no user content at all: every text column is plain, with its reason."""

    table: str
    area: str
    plain: tuple[Plain, ...]
    engine: str | None = None


Entry = Union[Stored, Exempt]

# A column named like this holds a timestamp written by the store's clock (``utcnow()``).
TIMESTAMP_SUFFIX = "_at"


def on_engine(columns: Iterable[str], engine: str) -> list[str]:
    """The columns one engine has: a name written ``"postgresql:vec"`` exists on that engine only."""
    out = []
    for column in columns:
        only, _, name = column.rpartition(":")
        if only in ("", engine):
            out.append(name)
    return out


def ids(rows: Iterable[Any]) -> list[int]:
    return [r[0] for r in rows]


def marks(values: list[Any]) -> str:
    return ",".join("?" * len(values))


def quotes(text: str, texts: list[str]) -> bool:
    """Does ``text`` quote one of ``texts`` (or is it quoted by one)? Short fragments do not count."""
    folded = text.casefold()
    if len(folded) < 12:
        return any(folded and folded == t.casefold() for t in texts)
    return any(folded in t.casefold() or (len(t) >= 12 and t.casefold() in folded) for t in texts)


class Registry:
    """Every table's entry, in walk order (see the module doc)."""

    def __init__(self, entries: Iterable[Entry]):
        self.entries: tuple[Entry, ...] = tuple(entries)
        seen: set[tuple[str, str | None]] = set()
        for entry in self.entries:
            key = (entry.table, entry.engine)
            if key in seen:
                raise StoreError(f"{entry.table} is registered twice")
            seen.add(key)

    def stored(self) -> list[Stored]:
        return [e for e in self.entries if isinstance(e, Stored)]

    def entry(self, table: str, engine: str) -> Entry | None:
        for e in self.entries:
            if e.table == table and e.engine in (None, engine):
                return e
        return None

    def steps(self) -> list[Step]:
        """Every step once, in phase order, then registry order."""
        out: list[Step] = []
        for entry in self.stored():
            out += [s for s in entry.steps() if s not in out]
        return sorted(out, key=lambda s: s.phase)

    def reclaimed(self) -> tuple[str, ...]:
        """The tables whose rows or text some forget removes: after one, their space is made free."""
        return tuple(e.table for e in self.stored()
                     if e.also or not all(isinstance(p, Kept) for p in (e.on_conversation, e.on_message)))

    def hooks(self) -> set[str]:
        return {s.hook for s in self.steps() if s.hook}

    def walk(self, conn: Connection, doomed: Doomed, hooks: Mapping[str, Run]) -> dict[str, int]:
        """Run every step for ``doomed`` in the caller's transaction; the receipt's counts they make."""
        missing = self.hooks() - set(hooks)
        if missing:  # a step nobody runs would leave its rows behind: refuse before removing anything
            raise StoreError(f"forgetting needs the hooks {', '.join(sorted(missing))}")
        counts: dict[str, int] = {}
        for step in self.steps():
            run = hooks[step.hook] if step.hook else step.run
            assert run is not None
            done = run(conn, doomed)
            if step.count:
                counts[step.count] = counts.get(step.count, 0) + done
        return counts

    # -- the live schema -----------------------------------------------------------------------
    def problems(self, conn: Connection) -> list[str]:
        """Why the registry does not cover the live schema: empty when every text or blob column
        of every table is content some entry purges or plain with a reason."""
        engine = engine_of(conn).name
        live = content_columns(conn)
        out: list[str] = []
        for table, every_text in sorted(live.items()):
            columns = [c for c in every_text if not c.endswith(TIMESTAMP_SUFFIX)]
            entry = self.entry(table, engine)
            if entry is None:
                out += [f"{table}.{c}: no entry registers this table" for c in columns]
                continue
            known = {c for p in entry.plain for c in p.columns}
            if isinstance(entry, Stored):
                known |= set(on_engine(entry.content, engine))
            out += [f"{table}.{c}: neither content with a purge nor plain with a reason"
                    for c in columns if c not in known]
        for entry in self.entries:
            if entry.engine not in (None, engine):
                continue
            every = all_columns(conn, entry.table)
            if not every:
                out.append(f"{entry.table}: registered but not in the schema")
                continue
            named = [c for p in entry.plain for c in p.columns] + (
                on_engine(entry.content, engine) if isinstance(entry, Stored) else [])
            out += [f"{entry.table}.{c}: registered but not in the schema" for c in named if c not in every]
            if any(not p.reason.strip() for p in entry.plain):
                out.append(f"{entry.table}: a plain column without a reason")
            if isinstance(entry, Stored):
                out += _check_stored(conn, entry, every)
        return out


def _check_stored(conn: Connection, entry: Stored, every: list[str]) -> list[str]:
    out: list[str] = []
    t = entry.table
    for name in ("conversation", "message"):
        column = getattr(entry, name)
        if column is not None and column not in every:
            out.append(f"{t}: its {name} column {column} is not in the schema")
    if entry.user is not None and entry.user not in every:
        out.append(f"{t}: its user column {entry.user} is not in the schema")
    if entry.user is None and (entry.index_of is None or not all_columns(conn, entry.index_of)):
        out.append(f"{t}: neither a user column nor the table it indexes")
    for when, purge in (("user", entry.on_user), ("conversation", entry.on_conversation),
                        ("message", entry.on_message)):
        for part in purge if isinstance(purge, tuple) else (purge,):
            if isinstance(part, Cascade) and not cascades(conn, t, part.parent):
                out.append(f"{t}: goes with a {when} by cascade from {part.parent}, which the schema lacks")
            elif isinstance(part, Trigger) and not triggers(conn, part.source, t):
                out.append(f"{t}: goes with a {when} by a trigger on {part.source} that the schema lacks")
            elif isinstance(part, Compaction) and not all_columns(conn, part.source):
                out.append(f"{t}: pruned by compaction from {part.source}, which is not in the schema")
            elif isinstance(part, Kept) and not part.reason.strip():
                out.append(f"{t}: kept when a {when} is forgotten, without a reason")
            elif isinstance(part, Step) and (part.run is None) == (part.hook is None):
                out.append(f"{t}: a step needs either a function or a hook")
    return out


# -- reading the live schema ----------------------------------------------------------------------
# Column types that hold numbers, truth values or times only; every other column can hold text or
# bytes (SQLite's untyped and NUMERIC-affinity columns can, PostgreSQL's json, tsvector, arrays...).
_PG_PLAIN_TYPES = {"smallint", "integer", "bigint", "real", "double precision", "numeric", "boolean", "date",
                   "timestamp without time zone", "timestamp with time zone", "time without time zone",
                   "time with time zone", "interval", "uuid", "oid"}


def _sqlite_holds_text(declared: str) -> bool:
    """Can a column of this declared type hold text or bytes? Not with INTEGER or REAL affinity
    (SQLite's rules: "INT" in the name, then "CHAR"/"CLOB"/"TEXT", "BLOB" or none, "REAL"/"FLOA"/"DOUB")."""
    t = declared.upper()
    if "INT" in t:
        return False
    if any(k in t for k in ("CHAR", "CLOB", "TEXT", "BLOB")) or not t:
        return True
    return not any(k in t for k in ("REAL", "FLOA", "DOUB"))


def content_columns(conn: Connection) -> dict[str, list[str]]:
    """{table: its columns that can hold text or bytes}, for every table of the live schema.

    SQLite: ``sqlite_master`` and ``PRAGMA table_info``; FTS5's shadow tables and its vocabulary
    views (``<index>_data``, ``_idx``, ``_vocab``...) are the index's own storage, merged by the
    compaction job, and are left out; the FTS5 tables themselves are not. PostgreSQL:
    ``information_schema.columns`` of the base tables in the current schema."""
    out: dict[str, list[str]] = {}
    if engine_of(conn).name == "postgresql":
        for table, column, data_type in conn.execute(
                "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c"
                " JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
                " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
                " ORDER BY c.table_name, c.ordinal_position"):
            out.setdefault(table, [])
            if data_type not in _PG_PLAIN_TYPES:
                out[table].append(column)
        return {t: c for t, c in out.items() if c}
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                        ).fetchall()
    fts = [name for name, sql in rows if "USING FTS5" in (sql or "").upper().replace("\n", " ")]
    for name, _sql in rows:
        if any(name.startswith(index + "_") for index in fts):
            continue
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")') if _sqlite_holds_text(r[2] or "")]
        if columns:
            out[name] = columns
    return out


def all_columns(conn: Connection, table: str) -> list[str]:
    if engine_of(conn).name == "postgresql":
        return [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ?", (table,))]
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def cascades(conn: Connection, table: str, parent: str) -> bool:
    """Does ``table`` have a foreign key to ``parent`` that deletes its rows with the parent's?"""
    if engine_of(conn).name == "postgresql":
        return conn.execute(
            "SELECT 1 FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class p ON p.oid = c.confrelid"
            " WHERE c.contype = 'f' AND c.confdeltype = 'c' AND t.relname = ? AND p.relname = ?"
            " AND t.relnamespace = current_schema()::regnamespace", (table, parent)).fetchone() is not None
    return any(fk[2] == parent and str(fk[6]).upper() == "CASCADE"
               for fk in conn.execute(f'PRAGMA foreign_key_list("{table}")'))


def triggers(conn: Connection, source: str, table: str) -> bool:
    """Does a trigger on ``source`` write to ``table`` (its body names it)?"""
    if engine_of(conn).name == "postgresql":
        return conn.execute(
            "SELECT 1 FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_proc p ON p.oid = g.tgfoid"
            " WHERE NOT g.tgisinternal AND c.relname = ? AND c.relnamespace = current_schema()::regnamespace"
            " AND p.prosrc LIKE ?", (source, f"%{table}%")).fetchone() is not None
    return any(table in (r[0] or "") for r in conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (source,)))
