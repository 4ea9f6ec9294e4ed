"""Store: one SQLite file, WAL, numbered migrations, transactions, keyword index (S1, S3, S6)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from hearth import Hearth, SchemaError, StoreError
from hearth.store import LATEST_VERSION, Store, migrations
from tests.engines import keyword_ids

SCHEMA_FILE = Path(__file__).parent / "schema.sql"


def dump_schema(conn: sqlite3.Connection) -> str:
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        " ORDER BY type, name"
    ).fetchall()
    return "\n".join(f"-- {r[0]} {r[1]}\n{r[2]};" for r in rows) + "\n"


def test_s1_blank_database_migrates_to_the_exact_expected_schema(tmp_path):
    store = Store(tmp_path / "hearth.db")
    # Regenerate with: python -c "..." (see docs/storage.md) when a migration is added.
    assert dump_schema(store.connection()) == SCHEMA_FILE.read_text()
    versions = [r[0] for r in store.connection().execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, LATEST_VERSION + 1))


def test_s1_wal_foreign_keys_and_busy_timeout_are_on(tmp_path):
    conn = Store(tmp_path / "hearth.db").connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_s1_older_file_is_migrated_forward_on_open(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    migrations._ensure_table(conn)
    migrations.m001_create_foundation(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'm001_create_foundation', '2026-01-01')")
    conn.execute("INSERT INTO users (name, is_owner, created_at) VALUES ('owner', 1, '2026-01-01T00:00:00.000000Z')")
    conn.execute("COMMIT")
    conn.close()
    store = Store(path)
    assert store.schema_version() == LATEST_VERSION
    assert store.connection().execute("SELECT name FROM users").fetchone()[0] == "owner"


def test_s1_newer_file_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "new.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', '2030-01-01')", (LATEST_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="newer than this Hearth knows"):
        Store(path)


def test_s1_a_failing_migration_leaves_no_trace(tmp_path, monkeypatch):
    def broken(conn):
        conn.execute("CREATE TABLE half_done (x)")
        raise sqlite3.OperationalError("boom")

    broken.__name__ = f"m{LATEST_VERSION + 1:03d}_break_things"

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, broken])
    monkeypatch.setattr(migrations, "LATEST_VERSION", LATEST_VERSION + 1)
    with pytest.raises(StoreError, match="boom"):  # translated at the store seam, never a raw traceback
        Store(tmp_path / "hearth.db")
    conn = sqlite3.connect(tmp_path / "hearth.db")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()[0] == 0


def test_s1_a_non_database_file_is_refused_clearly(tmp_path):
    path = tmp_path / "hearth.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="is not a Hearth database"):
        Store(path)


def test_s3_multi_row_change_is_all_or_nothing(hearth, me, persona):
    before = hearth.store.connection().execute("SELECT count(*) FROM conversations").fetchone()[0]
    with pytest.raises(RuntimeError):
        with hearth.store.write():
            me.conversations.create(persona.id, "one")
            me.conversations.create(persona.id, "two")
            raise RuntimeError("crash half-way")
    after = hearth.store.connection().execute("SELECT count(*) FROM conversations").fetchone()[0]
    assert after == before
    events = hearth.store.connection().execute("SELECT count(*) FROM events WHERE kind = 'conversation.created'")
    assert events.fetchone()[0] == 0


def test_s3_concurrent_writers_from_threads_all_land(tmp_path):
    hearth = Hearth.open(str(tmp_path))
    me = hearth.scope()
    persona = me.personas.create("p")
    conversation = me.conversations.create(persona.id)
    errors = []

    def writer(n):
        try:
            for i in range(25):
                me.conversations.add_message(conversation.id, "user", f"thread {n} message {i}")
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(me.conversations.messages(conversation.id)) == 100


def test_s3_commit_mark_moves_only_when_another_connection_commits(hearth, me, persona):
    """Work prepared in a read snapshot may be written later only if its mark still holds."""
    store = hearth.store

    def mark_in_read():
        with store.read() as conn:
            return store.commit_mark(conn)

    def mark_in_write():
        with store.write() as conn:
            return store.commit_mark(conn)

    first = mark_in_read()
    assert mark_in_write() == first == mark_in_read()
    other = threading.Thread(target=lambda: me.conversations.create(persona.id, "another connection"))
    other.start()
    other.join()
    assert mark_in_write() != first


def test_s6_keyword_index_follows_inserts_edits_and_deletes(hearth, me, persona):
    conn = hearth.store.connection()
    conversation = me.conversations.create(persona.id)
    message = me.conversations.add_message(conversation.id, "user", "the lighthouse keeper waved")

    def hits(word):
        return keyword_ids(conn, "messages_fts", word)

    assert hits("lighthouse") == [message.id]
    with hearth.store.write() as w:
        w.execute("UPDATE messages SET content = 'the harbour pilot waved' WHERE id = ?", (message.id,))
    assert hits("lighthouse") == [] and hits("harbour") == [message.id]
    with hearth.store.write() as w:
        w.execute("DELETE FROM messages WHERE id = ?", (message.id,))
    assert hits("harbour") == []


def test_s6_stored_prompts_and_artifacts_are_not_indexed(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "system", "zebra prompt", kind="static_prompt")
    me.conversations.add_message(conversation.id, "assistant", "zebra artifact", kind="handoff_artifact")
    me.conversations.add_message(conversation.id, "user", "zebra chat")
    conn = hearth.store.connection()
    rows = [conn.execute("SELECT kind FROM messages WHERE id = ?", (i,)).fetchone()[0]
            for i in keyword_ids(conn, "messages_fts", "zebra")]
    assert rows == ["chat"]


def test_s6_diacritics_fold_in_keyword_search(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "We had crème brûlée at the café")
    conn = hearth.store.connection()
    assert len(keyword_ids(conn, "messages_fts", "creme", "cafe")) == 1
    assert [r.text for r in me.search("creme brulee").results] == ["We had crème brûlée at the café"]
