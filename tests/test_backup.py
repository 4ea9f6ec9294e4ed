"""Verified backups and restore (S4) on real database files, including writes during a backup."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading

import pytest
from click.testing import CliRunner

from hearth import Hearth, Settings
from hearth.cli import cli
from hearth.errors import Conflict, SchemaError, StoreError
from hearth.ops.backup import (
    STATE_KEY,
    backup,
    last_verified,
    manifest_path,
    restore_deployment,
    verify_backup,
)
from hearth.store import LATEST_VERSION, catalog, open_store
from tests.importfuzz import _postgres_hash


def fill(me, persona, n: int = 3) -> list[int]:
    ids = []
    for i in range(n):
        conversation = me.conversations.create(persona.id, title=f"thread {i}")
        me.conversations.add_message(conversation.id, "user", f"hello {i}")
        me.conversations.add_message(conversation.id, "assistant", f"hi {i}")
        ids.append(conversation.id)
    me.memories.add("likes tea")
    return ids


def table_counts(path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def deployment_state(settings) -> str:
    """A digest of the deployment's database: the SQLite file's bytes, or every PostgreSQL row."""
    if settings.database_url:
        return _postgres_hash(settings.database_url)
    return sha(settings.database_path)


def deployment_counts(settings) -> dict[str, int]:
    """Rows per table of the deployment's database (on PostgreSQL, the tables both engines have)."""
    if not settings.database_url:
        return table_counts(settings.database_path)
    store = open_store(settings.database_url, settings.database_path, migrate=False)
    try:
        conn = store.connection()
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in catalog.tables(conn)}
    finally:
        store.close()


def test_s4_backup_writes_a_verified_copy_with_manifest(hearth, me, persona, tmp_path):
    fill(me, persona)
    dest = tmp_path / "backups" / "hearth-1.db"
    report = backup(hearth.store, dest)
    manifest = json.loads(manifest_path(dest).read_text())
    assert manifest["format"] == "hearth-backup" and manifest["schema_version"] == LATEST_VERSION
    assert manifest["sha256"] == sha(dest) == report.sha256
    assert manifest["counts"]["messages"] == 6 and manifest["counts"]["conversations"] == 3
    assert manifest["counts"] == table_counts(dest)
    assert "hello" not in manifest_path(dest).read_text()  # counts, never text
    assert verify_backup(dest).counts == manifest["counts"]
    assert not (tmp_path / "backups" / "hearth-1.db-wal").exists()
    recorded = last_verified(hearth.store)
    assert recorded["path"] == str(dest.resolve()) and recorded["sha256"] == report.sha256
    with pytest.raises(Conflict, match="already exists"):
        backup(hearth.store, dest)


def test_s4_backup_while_another_thread_writes_is_consistent(hearth, me, persona, tmp_path):
    conversation = me.conversations.create(persona.id)
    stop = threading.Event()
    written = []

    def writer():
        while not stop.is_set():
            written.append(me.conversations.add_message(conversation.id, "user", "busy").id)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(written) < 20:
            threading.Event().wait(0.005)
        reports = [backup(hearth.store, tmp_path / f"b{i}.db") for i in range(3)]
    finally:
        stop.set()
        thread.join()
    for report in reports:
        # Verified inside backup(); the ledger pairs every message with its event in the copy.
        copy = sqlite3.connect(report.path)
        orphans = copy.execute("SELECT count(*) FROM messages m LEFT JOIN events e ON e.id = m.id"
                               " WHERE e.id IS NULL").fetchone()[0]
        copy.close()
        assert orphans == 0 and report.counts["messages"] >= 20
    assert reports[-1].counts["messages"] >= reports[0].counts["messages"]


def test_s4_restore_round_trip(settings, provider, hearth, me, persona, tmp_path):
    ids = fill(me, persona)
    me.conversations.add_message(ids[2], "user", "the orchard gate by the north fence")
    report = backup(hearth.store, tmp_path / "b.db")
    me.conversations.add_message(ids[2], "user", "more about the orchard, said after the backup")
    me.conversations.create(persona.id, title="made after the backup")
    me.conversations.trash(ids[0])
    hearth.close()
    restore_deployment(report.path, settings)
    reopened = Hearth(settings, provider=provider)
    try:
        scope = reopened.scope()
        titles = sorted(c.title for c in scope.conversations.list(include_trashed=True))
        assert titles == ["thread 0", "thread 1", "thread 2"]
        assert scope.conversations.get(ids[0]).visibility == "visible"
        assert [m.content for m in scope.conversations.messages(ids[1])] == ["hello 1", "hi 1"]
        counts = deployment_counts(settings)
        assert counts == {t: n for t, n in report.counts.items() if t in counts}
        assert counts["messages"] == 7
        # The keyword index holds the restored rows and only those.
        assert [r.text for r in scope.search("orchard", embed=False).results] == ["the orchard gate by the north fence"]
    finally:
        reopened.close()


def test_s4_restore_refuses_a_corrupted_file_and_changes_nothing(settings, hearth, me, persona, tmp_path):
    fill(me, persona)
    report = backup(hearth.store, tmp_path / "b.db")
    hearth.close()
    before = deployment_state(settings)
    conn = sqlite3.connect(report.path)
    root, page_size = conn.execute(
        "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master WHERE name = 'messages'"
    ).fetchone()
    conn.close()
    with open(report.path, "r+b") as handle:  # break the b-tree header of the messages table
        handle.seek((root - 1) * page_size)
        handle.write(b"\xff" * 12)
    with pytest.raises(StoreError, match="checksum"):
        restore_deployment(report.path, settings)
    # Even with a manifest that agrees with the damaged bytes, the integrity check refuses it.
    manifest = json.loads(manifest_path(report.path).read_text())
    manifest["sha256"] = sha(report.path)
    manifest_path(report.path).write_text(json.dumps(manifest))
    with pytest.raises(StoreError):
        restore_deployment(report.path, settings)
    assert deployment_state(settings) == before


def test_s4_restore_refuses_missing_or_bad_manifest_and_wrong_counts(settings, hearth, me, persona, tmp_path):
    fill(me, persona)
    report = backup(hearth.store, tmp_path / "b.db")
    mpath = manifest_path(report.path)
    good = mpath.read_text()
    mpath.write_text("{not json")
    with pytest.raises(StoreError, match="manifest"):
        verify_backup(report.path)
    mpath.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(StoreError, match="not a Hearth backup manifest"):
        verify_backup(report.path)
    manifest = json.loads(good)
    manifest["counts"]["messages"] += 1
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="row counts differ"):
        verify_backup(report.path)
    mpath.unlink()
    with pytest.raises(StoreError, match="no manifest"):
        restore_deployment(report.path, settings)
    with pytest.raises(StoreError, match="no backup file"):
        verify_backup(tmp_path / "missing.db")


def test_s4_restore_refuses_a_newer_schema(settings, hearth, me, persona, tmp_path):
    fill(me, persona)
    report = backup(hearth.store, tmp_path / "b.db")
    conn = sqlite3.connect(report.path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', '2030-01-01')", (LATEST_VERSION + 1,))
    conn.commit()
    conn.close()
    manifest = json.loads(manifest_path(report.path).read_text())
    manifest.update(sha256=sha(report.path), schema_version=LATEST_VERSION + 1,
                    counts=table_counts(report.path))
    manifest_path(report.path).write_text(json.dumps(manifest))
    hearth.close()
    before = deployment_state(settings)
    with pytest.raises(SchemaError, match="newer"):
        restore_deployment(report.path, settings)
    assert deployment_state(settings) == before


def test_s4_cli_backup_and_restore(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    assert run("init").exit_code == 0
    dest = tmp_path / "copy.db"
    stale = tmp_path / "killed.db.partial"  # what a backup killed before its first page leaves
    stale.write_bytes(b"")
    made = run("backup", str(dest))
    assert made.exit_code == 0 and "verified" in made.output
    assert "Removed 1 file(s) left by an interrupted backup: killed.db.partial" in made.output
    assert not stale.exists()
    with Hearth(Settings.resolve()) as deployment:
        state = deployment.store.connection().execute(
            "SELECT value FROM app_state WHERE key = ?", (STATE_KEY,)).fetchone()
    assert json.loads(state[0])["path"] == str(dest.resolve())
    assert run("restore", "--yes", str(dest)).exit_code == 0
    manifest_path(dest).unlink()
    refused = run("restore", "--yes", str(dest))
    assert refused.exit_code == 1 and "no manifest" in refused.output
