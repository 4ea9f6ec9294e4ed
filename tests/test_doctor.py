"""``ledger.verify`` (``hearth doctor``) reads one snapshot and scales linearly (S2, U3)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from hearth.records.ledger import verify


@pytest.mark.sqlite_only
def test_s2_sqlite_trace_verify_counts_come_from_one_snapshot_while_a_writer_commits(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "first")
    conn = sqlite3.connect(hearth.settings.database_path, isolation_level=None)
    writer = sqlite3.connect(hearth.settings.database_path, isolation_level=None)
    wrote = []

    def between_statements(sql: str) -> None:
        # Just before the messages count runs, another connection commits a new chat turn
        # (its message row and its keyword-index row together).
        if "FROM messages WHERE kind = 'chat'" in sql and not wrote:
            wrote.append(True)
            other = hearth.scope()
            other.conversations.add_message(conversation.id, "assistant", "written meanwhile")

    conn.set_trace_callback(between_statements)
    report = verify(conn)
    conn.set_trace_callback(None)
    assert wrote, "the writer ran in the middle of verify"
    assert report.ok, report.problems  # no false index mismatch
    assert verify(conn).messages == report.messages + 1  # the next run sees the new turn
    conn.close()
    writer.close()


def test_s2_verify_counts_come_from_one_snapshot_while_a_writer_commits_postgres(tmp_path, pg_url, monkeypatch):
    """The PostgreSQL form of the test above: the writer commits on its own connection between
    verify's first count and its messages count; verify still sees one snapshot."""
    from hearth import Hearth, Settings
    from hearth.store import PgStore

    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "home"), "database_url": pg_url}, environ={}))
    checker = PgStore(pg_url, migrate=False)
    try:
        me = hearth.scope()
        conversation = me.conversations.create(me.personas.create("p", "P").id)
        me.conversations.add_message(conversation.id, "user", "first")
        conn = checker.connection()
        execute = conn.execute
        wrote = []

        def between_statements(sql, parameters=()):
            if sql.strip().startswith("SELECT count(*) FROM messages") and not wrote:
                wrote.append(True)
                me.conversations.add_message(conversation.id, "assistant", "written meanwhile")
            return execute(sql, parameters)

        monkeypatch.setattr(conn, "execute", between_statements)
        report = verify(conn)
        assert wrote, "the writer ran in the middle of verify"
        assert report.ok, report.problems
        assert report.messages == 1  # counted in the snapshot taken before the writer committed
        assert verify(conn).messages == 2  # the next run sees the new turn
    finally:
        checker.close()
        hearth.close()


def test_s2_deleted_messages_are_not_reported_and_a_missing_row_is(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "kept")
    gone = me.conversations.add_message(conversation.id, "user", "gone")
    lost = me.conversations.add_message(conversation.id, "user", "lost")
    with hearth.store.write() as conn:
        conn.execute("INSERT INTO events (user_id, conversation_id, kind, created_at, payload)"
                     " VALUES (?, ?, 'message.deleted', '2026-01-01T00:00:00Z', ?)",
                     (me.user_id, conversation.id, json.dumps({"message_id": gone.id})))
        conn.execute("DELETE FROM messages WHERE id IN (?, ?)", (gone.id, lost.id))
    report = verify(hearth.store.connection())
    assert report.problems == [f"message events without a message row: ids {[lost.id]}"]


def test_s4_doctor_removes_and_reports_partial_files_of_killed_backups_but_not_one_in_use(tmp_path, monkeypatch):
    """Stale ``.partial`` files where a backup was made and in the web UI's ``backups`` folder go,
    named in the report; one a running backup holds locked stays until it is released."""
    import fcntl
    import os

    from click.testing import CliRunner

    from hearth.cli import cli

    home = tmp_path / "home"
    monkeypatch.setenv("HEARTH_HOME", str(home))
    runner = CliRunner()
    assert runner.invoke(cli, ["init"]).exit_code == 0
    folder = tmp_path / "safe"
    made = runner.invoke(cli, ["backup", str(folder / "first.db")])
    assert made.exit_code == 0, made.output
    page = (folder / "first.db").read_bytes()[:4096]  # a copy killed after its first page
    stale = folder / "second.db.partial"
    stale.write_bytes(page)
    web = home / "backups" / "hearth-20260101-000000-000000.db.partial"
    web.parent.mkdir(parents=True, exist_ok=True)
    web.write_bytes(b"")  # killed before its first page
    busy = folder / "third.db.partial"
    busy.write_bytes(page)
    fd = os.open(busy, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a running backup holds
    try:
        first = runner.invoke(cli, ["doctor"])
    finally:
        os.close(fd)
    assert first.exit_code == 0, first.output
    report = "".join(first.output.split())  # the table may wrap long names
    assert "backupleftovers" in report and stale.name in report and web.name in report, first.output
    assert busy.name not in report
    assert not stale.exists() and not web.exists() and busy.exists()
    assert (folder / "first.db").exists() and (folder / "first.db.manifest.json").exists()
    second = runner.invoke(cli, ["doctor"])  # released: no backup holds it any more
    assert busy.name in "".join(second.output.split()) and not busy.exists()
    third = runner.invoke(cli, ["doctor"])
    assert re.search(r"backup leftovers\s+none", third.output), third.output
