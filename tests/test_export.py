"""Full export and re-import of a user (S5), scoped to that user (G2)."""

from __future__ import annotations

import json

import pytest

from hearth import Conflict, Hearth, InvalidInput, Settings
from hearth.interop.export import export_user, import_user
from tests.engines import keyword_ids


def _populate(me, persona):
    me.memories.add("Likes tea", "habits", 3)
    chat = me.conversations.create(persona.id, "Morning")
    me.send(chat.id, "Good morning, the garden is blooming")
    me.memories.add("Added later")
    me.send(chat.id, "and the tea is ready")
    me.branch(chat.id, "export-branch-key")
    folder = me.folders.create("Letters", hidden=True)
    me.conversations.create(persona.id, "Hidden", folder_id=folder.id)
    return chat


def test_s5_export_then_import_into_an_empty_store_reproduces_the_user(hearth, me, persona, tmp_path):
    chat = _populate(me, persona)
    exported = export_user(hearth.store, me.user_id)
    text = json.dumps(exported)
    assert {"conversations", "messages", "events", "memories", "conversation_memories", "personas",
            "folders", "conversation_summaries"} <= set(exported["tables"])

    with Hearth(Settings.resolve({"home": str(tmp_path / "other")}, environ={})) as fresh:
        target = fresh.scope()
        counts = import_user(fresh.store, target.user_id, text.encode())
        assert counts["messages"] == len(exported["tables"]["messages"]["rows"])
        again = export_user(fresh.store, target.user_id)
        for table, body in exported["tables"].items():
            assert again["tables"][table] == body, table
        # The imported deployment works: prompts, snapshots, keyword index and sending.
        assert target.stored_prompt(chat.id) == me.stored_prompt(chat.id)
        assert [m.text for m in target.memories.snapshot(chat.id)] == ["Likes tea"]
        assert len(keyword_ids(fresh.store.connection(), "messages_fts", "garden")) == 1
        from hearth.records import ledger
        assert ledger.verify(fresh.store.connection()).ok
        target.send(chat.id, "still here")


def test_g2_s5_export_holds_only_that_users_rows(hearth, me, persona):
    _populate(me, persona)
    bob = hearth.scope(hearth.users.create("bob").id)
    bob_persona = bob.personas.create("bobs")
    bob_chat = bob.conversations.create(bob_persona.id, "Bob's")
    bob.send(bob_chat.id, "bob's private words")
    mine = json.dumps(export_user(hearth.store, me.user_id))
    theirs = json.dumps(export_user(hearth.store, bob.user_id))
    assert "bob's private words" not in mine
    assert "garden is blooming" not in theirs and "Likes tea" not in theirs
    assert "password" not in mine and "token_hash" not in mine


@pytest.mark.parametrize("payload, message", [
    (b"\xff\xfe not utf-8", "UTF-8"),
    (b"{broken json", "not valid JSON"),
    (b'{"format": "something-else"}', "not a Hearth export"),
    (b'{"format": "hearth-export", "format_version": 1, "schema_version": 1, "tables": {}}', "schema version"),
])
def test_s5_broken_import_files_are_refused_and_change_nothing(hearth, me, payload, message):
    before = hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0]
    with pytest.raises(InvalidInput, match=message):
        import_user(hearth.store, me.user_id, payload)
    assert hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0] == before


def test_s5_import_refuses_a_store_that_already_has_data(hearth, me, persona, tmp_path):
    _populate(me, persona)
    exported = export_user(hearth.store, me.user_id)
    with pytest.raises(Conflict, match="empty store"):
        import_user(hearth.store, me.user_id, exported)


def test_s5_a_half_valid_file_leaves_nothing_behind(hearth, me, persona, tmp_path):
    _populate(me, persona)
    exported = export_user(hearth.store, me.user_id)
    exported["tables"]["messages"]["rows"][-1] = ["wrong shape"]
    with Hearth(Settings.resolve({"home": str(tmp_path / "other")}, environ={})) as fresh:
        with pytest.raises(InvalidInput, match="wrong shape"):
            import_user(fresh.store, fresh.scope().user_id, exported)
        conn = fresh.store.connection()
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM personas").fetchone()[0] == 0


def test_s5_cli_export_writes_the_document(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    assert runner.invoke(cli, ["chat", "-m", "hello there"]).exit_code == 0
    out = tmp_path / "export.json"
    result = runner.invoke(cli, ["export", "-o", str(out)])
    assert result.exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "hearth-export"
    assert any("hello there" in str(row) for row in doc["tables"]["messages"]["rows"])


def test_a5_s5_cli_import_restores_a_hearth_export_into_an_empty_deployment(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    runner = CliRunner()
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "old"))
    runner.invoke(cli, ["chat", "-m", "remember the blue kettle"])
    exported = tmp_path / "export.json"
    assert runner.invoke(cli, ["export", "-o", str(exported)]).exit_code == 0
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "new"))
    result = runner.invoke(cli, ["import", str(exported)])
    assert result.exit_code == 0, result.output
    assert "Restored 1 conversation(s)" in result.output
    assert "blue kettle" in runner.invoke(cli, ["conversations", "show", "1"]).output
