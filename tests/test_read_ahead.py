"""Round trips on PostgreSQL (S9): a transaction's BEGIN goes with its first statement, and a read
snapshot sends the reads its last two uses both asked with its BEGIN, in one round trip, and
answers each from there exactly as asking it would have.

Round trips are counted on the wire, in libpq's trace of the connection: each simple ``Query``,
and each ``Sync`` that closes statements sent to run (psycopg's own round trip to prepare a
statement it has run five times is not counted: it comes and goes with the prepared-statement cache).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from typing import Iterator

import psycopg
import pytest

from hearth import Hearth, Settings
from hearth.errors import StoreError
from hearth.store.ahead import call_of, reads_only
from hearth.store.dialect import to_postgres


@contextlib.contextmanager
def round_trips(conn) -> Iterator[list[int]]:
    """Count the round trips of ``conn`` (a store's PostgreSQL connection) inside the block."""
    counted: list[int] = []
    with tempfile.TemporaryFile() as trace:
        conn.raw.pgconn.trace(trace.fileno())
        conn.raw.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            conn.raw.pgconn.untrace()
            trace.seek(0)
            counted.append(_statement_round_trips(trace.read().decode()))


def _statement_round_trips(trace: str) -> int:
    count, running = 0, False
    for line in trace.splitlines():
        sender, _length, message = line.split("\t")[:3]
        if sender != "F":
            continue
        if message.startswith("Query"):
            count += 1
        elif message.startswith("Execute"):
            running = True
        elif message.startswith("Sync"):
            count += running
            running = False
    return count


def test_s9_only_reads_are_sent_ahead():
    def sent_ahead(sql: str) -> bool:
        return to_postgres(sql).reads_only

    assert sent_ahead("SELECT display_name FROM personas WHERE id = ?")
    assert sent_ahead("WITH x AS (SELECT id FROM messages) SELECT count(*) FROM x WHERE updated_at > ?")
    for sql in ("WITH e AS (INSERT INTO events (kind) VALUES ('x') RETURNING id) SELECT id FROM e",
                "SELECT id FROM jobs WHERE state = 'queued' FOR UPDATE SKIP LOCKED",
                "SELECT id FROM jobs FOR NO KEY UPDATE", "SELECT id FROM jobs FOR KEY SHARE",
                "SELECT set_config('hnsw.ef_search', '40', true)", "SELECT nextval('s')",
                "SELECT pg_advisory_xact_lock(1)", "SELECT pg_notify('c', 'x')", "UPDATE personas SET name = ?",
                "DELETE FROM personas",
                "BEGIN", "COMMIT"):
        assert not sent_ahead(sql), sql
    assert not reads_only("VACUUM personas")
    # Only arguments that can repeat are remembered: no long text, named or unhashable ones.
    assert call_of("q", (1, "short")) == ("q", (1, "short"))
    assert call_of("q", ("x" * 300,)) is None
    assert call_of("q", {"id": 1}) is None
    assert call_of("q", ([1, 2],)) is None


def test_s9_a_snapshot_sends_its_repeated_reads_ahead_and_answers_as_asking_would_postgres(pg_url):
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "Wren")
        conn = hearth.store.connection()

        def snapshot(after: int, *, write: str = "") -> tuple[str, int, str]:
            with hearth.store.read(ahead=("thread", 1)) as c:
                if write:
                    c.execute("UPDATE personas SET display_name = ? WHERE id = ?", (write, persona.id))
                name = c.execute("SELECT display_name FROM personas WHERE id = ?", (persona.id,)).fetchone()[0]
                newer = c.execute("SELECT count(*) FROM personas WHERE id >= ?", (persona.id + after,)).fetchone()[0]
                again = c.execute("SELECT display_name FROM personas WHERE id = ?", (persona.id,)).fetchone()[0]
            return name, newer, again

        for after in (0, 1):  # the first two uses teach it what repeats
            with round_trips(conn) as trips:
                assert snapshot(after) == ("Wren", 1 - after, "Wren")
            assert trips == [4]  # BEGIN with the first statement, two more, COMMIT
        with round_trips(conn) as trips:
            assert snapshot(2) == ("Wren", 0, "Wren")
        # BEGIN with the persona's read; the count, asked with a new argument; the persona's read
        # asked again in the snapshot (a second asking runs); COMMIT.
        assert trips == [4]

        # Another process renames her between snapshots: the answer sent ahead is the new name.
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute("UPDATE personas SET display_name = 'Robin' WHERE id = %s", (persona.id,))
        assert snapshot(0) == ("Robin", 1, "Robin")
        # After a write in the snapshot, nothing is answered from ahead: the read sees the write.
        assert snapshot(0, write="Lark") == ("Lark", 1, "Lark")
        # The same snapshot without ``ahead`` sends nothing ahead.
        with round_trips(conn) as trips, hearth.store.read() as c:
            assert c.execute("SELECT display_name FROM personas WHERE id = ?", (persona.id,)).fetchone()[0] == "Lark"
        assert trips == [2]  # BEGIN with the read, COMMIT
    finally:
        hearth.close()


def test_s9_a_read_sent_ahead_that_now_fails_leaves_the_snapshot_as_if_never_sent_postgres(pg_url):
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        hearth.scope()  # its owner: one user
        conn = hearth.store.connection()
        conn.execute("CREATE TABLE scratch (id bigint, note text)")
        conn.execute("INSERT INTO scratch VALUES (1, 'kept')")

        def snapshot() -> list:
            with hearth.store.read(ahead="scratch") as c:
                users = c.execute("SELECT count(*) FROM users WHERE id > ?", (0,)).fetchone()[0]
                return [users, c.execute("SELECT note FROM scratch WHERE id = ?", (1,)).fetchone()[0]]

        assert snapshot() == snapshot() == [1, "kept"]
        conn.execute("DROP TABLE scratch")
        with pytest.raises(StoreError, match="scratch"):
            snapshot()  # the pipeline failed; the snapshot began again and the code's own read failed
        assert not conn.in_transaction
        with round_trips(conn) as trips, hearth.store.read(ahead="scratch") as c:
            assert c.execute("SELECT count(*) FROM users WHERE id > ?", (0,)).fetchone()[0] == 1
        assert trips == [2]  # forgotten: BEGIN with the read, COMMIT
    finally:
        with contextlib.suppress(StoreError):
            hearth.store.connection().execute("DROP TABLE IF EXISTS scratch")
        hearth.close()


def test_s9_a_send_reads_its_thread_ahead_postgres(pg_url):
    """From a thread's third send, the assembly's reads of the thread's state (capsule, summary,
    persona, household, live context, the layers' settings) go with the snapshot's BEGIN."""
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        me.send(conv.id, "hello")
        conn = hearth.store.connection()
        trips = []
        for text in ("good night", "miss you", "love you"):
            with round_trips(conn) as counted:
                reply = me.send(conv.id, text)
            trips.append(counted[0])
        assert reply.assistant_message.content
        assert trips[1] <= trips[0] - 6 and trips[2] <= trips[1], trips
    finally:
        hearth.close()


def test_s9_a_transaction_opens_with_its_first_statement_and_writers_stay_serialised_postgres(pg_url):
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    store = hearth.store
    try:
        hearth.scope()
        conn = store.connection()
        conn.execute("CREATE TABLE scratch (id bigint PRIMARY KEY, n bigint)")
        conn.execute("INSERT INTO scratch VALUES (1, 0)")
        with round_trips(conn) as trips, store.write() as c:
            c.execute("UPDATE scratch SET n = n + 1 WHERE id = ?", (1,))
        assert trips == [2]  # BEGIN, the writers' lock and the update; COMMIT
        with round_trips(conn) as trips, store.write() as c:
            assert c.in_transaction
        assert trips == [0]  # a transaction that asks nothing sends nothing
        with store.write() as c:  # work beside the sqlite3 surface runs inside the transaction
            store.commit_mark(c)
            assert c.raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            c.execute("UPDATE scratch SET n = n + 1 WHERE id = ?", (1,))

        def add_one() -> None:  # read, wait, write: a writer let in early loses an update
            for _ in range(5):
                with store.write() as c:
                    n = c.execute("SELECT n FROM scratch WHERE id = ?", (1,)).fetchone()[0]
                    time.sleep(0.005)
                    c.execute("UPDATE scratch SET n = ? WHERE id = ?", (n + 1, 1))

        threads = [threading.Thread(target=add_one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert conn.execute("SELECT n FROM scratch WHERE id = ?", (1,)).fetchone()[0] == 2 + 20

        # A first statement that fails leaves nothing behind and no transaction open.
        with pytest.raises(StoreError), store.write() as c:
            c.execute("UPDATE no_such_table SET n = 1")
        assert not conn.in_transaction
        assert conn.execute("SELECT n FROM scratch WHERE id = ?", (1,)).fetchone()[0] == 22
    finally:
        with contextlib.suppress(StoreError):
            store.connection().execute("DROP TABLE IF EXISTS scratch")
        hearth.close()
