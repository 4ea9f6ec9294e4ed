"""Memory that stays correct over time: bi-temporal facts (B1) and versions with undo (B2)."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import Hearth, InvalidInput, NotFound, Settings
from hearth.cli import cli
from hearth.server.app import create_app
from hearth.store import Store, migrations, utcnow
from tests.test_memories import memory_lines


def tick() -> str:
    """A moment strictly between two operations."""
    time.sleep(0.002)
    moment = utcnow()
    time.sleep(0.002)
    return moment


def texts(versions) -> list[str]:
    return [v.text for v in versions]


def test_b1_m2_a_change_of_meaning_supersedes_and_reaches_threads_that_hold_it(me, persona):
    moved = me.memories.add("Fleur lives in Lyon", "people")
    other = me.memories.add("Likes tea")
    thread_a = me.conversations.create(persona.id, "A")
    me.send(thread_a.id, "hello")
    before = tick()
    memory, rebuilt = me.memories.edit(moved.id, text="Fleur lives in Paris")
    assert rebuilt == 1 and memory.id == moved.id and memory.version == 2
    # M2 unchanged: the thread holding the id shows the new text only; the old one is retired.
    assert memory_lines(me.stored_prompt(thread_a.id)) == ["- [people] Fleur lives in Paris", "- Likes tea"]
    assert "Lyon" not in me.stored_prompt(thread_a.id)
    history = me.memories.history(moved.id)
    assert [(v.version, v.change, v.actor) for v in history] == [(2, "superseded", "owner"), (1, "created", "owner")]
    old, new = history[1], history[0]
    assert old.valid_until == new.valid_from and old.retired_at is None and old.superseded_at is not None
    # As of a moment before the edit, the old meaning was true and was what Hearth knew.
    assert texts(me.memories.as_of(before)) == ["Fleur lives in Lyon", "Likes tea"]
    assert texts(me.memories.as_of(before, "known")) == ["Fleur lives in Lyon", "Likes tea"]
    assert texts(me.memories.as_of(utcnow())) == ["Fleur lives in Paris", "Likes tea"]
    assert other.id in [v.memory_id for v in me.memories.as_of(utcnow())]


def test_b1_a_typo_fix_is_a_correction_of_the_same_version(me, persona):
    m = me.memories.add("Allergic to cast")
    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    before = tick()
    fixed, rebuilt = me.memories.edit(m.id, text="Allergic to cats", correction=True)
    assert rebuilt == 1 and fixed.valid_from == m.valid_from  # same valid interval
    history = me.memories.history(m.id)
    assert [(v.version, v.change) for v in history] == [(2, "corrected"), (1, "created")]
    assert history[1].retired_at is not None and history[1].valid_until is None
    # What was true then, by today's knowledge: the corrected text, as if it always said so.
    assert texts(me.memories.as_of(before)) == ["Allergic to cats"]
    # What Hearth knew then: the typo.
    assert texts(me.memories.as_of(before, "known")) == ["Allergic to cast"]
    assert memory_lines(me.stored_prompt(thread.id)) == ["- Allergic to cats"]


def test_b1_backdated_change_and_ended_fact_answer_as_of_both_ways(me, persona):
    m = me.memories.add("Works at the bakery", valid_from="2020-01-01")
    assert m.valid_from.startswith("2020-01-01T00:00:00")
    learned = tick()
    me.memories.edit(m.id, text="Works at the library", valid_from="2024-03-01")
    # Today's knowledge: in mid-2024 the library job was true.
    assert texts(me.memories.as_of("2024-06-01")) == ["Works at the library"]
    assert texts(me.memories.as_of("2023-06-01")) == ["Works at the bakery"]
    # What Hearth knew just before the edit: the bakery, valid indefinitely.
    assert texts(me.memories.as_of(learned, "known")) == ["Works at the bakery"]
    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    ended, rebuilt = me.memories.end(m.id)
    assert rebuilt == 1 and ended.valid_until is not None and ended.retired_at is not None
    # A fact that is no longer true never reaches a prompt, and new snapshots do not capture it.
    assert memory_lines(me.stored_prompt(thread.id)) == []
    later = me.conversations.create(persona.id, "B")
    me.send(later.id, "hello")
    assert memory_lines(me.stored_prompt(later.id)) == []
    assert texts(me.memories.as_of(utcnow())) == []
    assert texts(me.memories.as_of("2024-06-01")) == ["Works at the library"]
    with pytest.raises(Exception, match="ended"):
        me.memories.edit(m.id, text="Works at the museum")


def test_b1_bad_input_is_a_clear_error_and_changes_nothing(me):
    m = me.memories.add("Has a dog named Pip")
    for bad in ("2999-01-01", "yesterday", "2024-13-45", ""):
        with pytest.raises(InvalidInput):
            me.memories.as_of(bad)
        with pytest.raises(InvalidInput):
            me.layers.household.as_of(bad)
    with pytest.raises(InvalidInput, match="identical"):
        me.memories.edit(m.id, text="Has a dog named Pip")
    with pytest.raises(InvalidInput, match="future"):
        me.memories.edit(m.id, text="Has a dog named Pep", valid_from="2999-01-01")
    with pytest.raises(InvalidInput):
        me.memories.edit(m.id, text="Has a dog named Pep", valid_from="1999-01-01")  # before v1 began
    with pytest.raises(InvalidInput):
        me.memories.as_of(utcnow(), "sometimes")
    assert me.memories.get(m.id) == m
    assert len(me.memories.history(m.id)) == 1


def test_b1_hs1_household_status_is_bitemporal(me, persona, provider):
    household = me.layers.household
    household.add_field("Children", options=["with me", "with their dad"], value="with me")
    first = tick()
    household.set("Children", "with their dad", valid_from=first)
    after_change = tick()
    household.set("Children", "with me", correction=True)  # it was entered wrongly
    # Today's knowledge: from the change on, the corrected value was true all along.
    assert household.as_of(after_change) == {"Children": "with me"}
    # What Hearth knew then: the wrong value.
    assert household.as_of(after_change, "known") == {"Children": "with their dad"}
    rows = household.history("Children")
    assert [(r.value, r.retired_at is not None) for r in rows] == [
        ("with me", False), ("with their dad", True), ("with me", False)]
    assert rows[0].valid_from == rows[1].valid_from  # the correction keeps the valid-from time
    # HS1 unchanged: the dynamic block carries only the current value.
    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    sent = "\n".join(m.content for m in provider.requests[-1].messages if m.role == "system")
    assert "Children: with me" in sent and "with their dad" not in sent
    with pytest.raises(InvalidInput):
        household.set("Children", "with me", correction=True)  # identical
    with pytest.raises(InvalidInput, match="future"):
        household.set("Children", "with their dad", valid_from="2999-01-01")
    assert household.field("Children").value == "with me"


def test_b1_migration_backfills_versions_and_status_times(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("BEGIN")
    migrations._ensure_table(conn)
    for migration in migrations.MIGRATIONS:
        if migrations.number(migration) < 7:
            migration(conn)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'x')",
                         (migrations.number(migration), migration.__name__))
    conn.execute("INSERT INTO users (id, name, is_owner, created_at) VALUES (1, 'owner', 1, '2020')")
    conn.execute("INSERT INTO memories (user_id, text, position, created_at, updated_at)"
                 " VALUES (1, 'Old fact', 1, '2021-01-01T00:00:00.000000Z', '2022-01-01T00:00:00.000000Z')")
    conn.execute("INSERT INTO status_fields (user_id, name, position, created_at) VALUES (1, 'Cat', 1, '2021')")
    conn.execute("INSERT INTO status_values (user_id, field_id, value, valid_from, valid_to)"
                 " VALUES (1, 1, 'inside', '2021-01-01T00:00:00.000000Z', '2021-02-01T00:00:00.000000Z')")
    conn.execute("COMMIT")
    conn.close()
    store = Store(path)
    row = store.connection().execute("SELECT * FROM memory_versions").fetchone()
    assert (row["text"], row["version"], row["valid_from"], row["recorded_at"]) == (
        "Old fact", 1, "2021-01-01T00:00:00.000000Z", "2021-01-01T00:00:00.000000Z")
    memory = store.connection().execute("SELECT valid_from, recorded_at, version FROM memories").fetchone()
    assert tuple(memory) == ("2021-01-01T00:00:00.000000Z", "2021-01-01T00:00:00.000000Z", 1)
    status = store.connection().execute("SELECT recorded_at, superseded_at FROM status_values").fetchone()
    assert tuple(status) == ("2021-01-01T00:00:00.000000Z", "2021-02-01T00:00:00.000000Z")
    store.close()


def test_b1_as_of_reads_through_the_api_and_the_cli(hearth, me, tmp_path, monkeypatch):
    m = me.memories.add("Reads Proust", valid_from="2022-01-01")
    me.memories.edit(m.id, text="Reads Woolf", valid_from="2023-01-01")
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1") as client:
        got = client.get("/api/memories/as-of", params={"date": "2022-06-01"})
        assert got.status_code == 200 and [v["text"] for v in got.json()] == ["Reads Proust"]
        assert [v["text"] for v in client.get("/api/memories/as-of", params={"date": "2023-06-01"}).json()] \
            == ["Reads Woolf"]
        for bad in ({"date": "2999-01-01"}, {"date": "soon"}, {"date": "2022-06-01", "mode": "maybe"}):
            response = client.get("/api/memories/as-of", params=bad)
            assert response.status_code in (400, 422) and "error" in response.json()
        same = client.patch(f"/api/memories/{m.id}", json={"text": "Reads Woolf"})
        assert same.status_code == 422 and "identical" in same.json()["detail"]
        fix = client.patch(f"/api/memories/{m.id}", json={"text": "Reads V. Woolf", "correction": True})
        assert fix.status_code == 200 and fix.json()["memory"]["version"] == 3
        client.post("/api/status", json={"name": "Cat", "value": "inside"})
        assert client.get("/api/status/as-of", params={"date": utcnow()}).json() == {"Cat": "inside"}
        assert client.get("/api/status/as-of", params={"date": "2999-01-01"}).status_code == 422
    hearth.close()
    monkeypatch.setenv("HEARTH_HOME", str(hearth.settings.home))
    runner = CliRunner()
    listed = runner.invoke(cli, ["memory", "list", "--as-of", "2022-06-01"])
    assert listed.exit_code == 0 and "Reads Proust" in listed.output and "Woolf" not in listed.output
    bad = runner.invoke(cli, ["memory", "list", "--as-of", "2999-01-01"])
    assert bad.exit_code == 2 and bad.output.startswith("Error:") and "future" in bad.output
    history = runner.invoke(cli, ["memory", "history", str(m.id)])
    assert history.exit_code == 0 and "superseded" in history.output and "corrected" in history.output


def test_b2_memory_history_says_who_and_any_version_can_be_restored(hearth, me, persona):
    owned = me.memories.add("Drinks coffee black")
    imported = me.memories.import_many([{"text": "Was born in Ghent"}], actor="import")[0]
    proposal = me.layers.review.propose("memory_add", {"text": "Plays the cello"}, "Mentioned it")
    approved = me.layers.review.approve(proposal.id)
    suggested = me.memories.get(approved.result_id)
    assert [v.actor for v in me.memories.history(imported.id)] == ["import"]
    assert [(v.actor, v.proposal_id) for v in me.memories.history(suggested.id)] == [("suggestion", proposal.id)]
    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    me.memories.edit(owned.id, text="Drinks coffee with oat milk")
    restored, rebuilt = me.memories.restore(owned.id, 1)
    assert restored.text == "Drinks coffee black" and restored.version == 3 and rebuilt == 1
    assert "Drinks coffee black" in me.stored_prompt(thread.id) and "oat milk" not in me.stored_prompt(thread.id)
    history = me.memories.history(owned.id)
    assert [(v.version, v.change, v.actor) for v in history] == [
        (3, "restored v1", "owner"), (2, "superseded", "owner"), (1, "created", "owner")]
    with pytest.raises(InvalidInput, match="already the current"):
        me.memories.restore(owned.id, 3)
    with pytest.raises(NotFound):
        me.memories.restore(owned.id, 9)
    me.memories.delete(owned.id)
    with pytest.raises(NotFound, match="deleted"):
        me.memories.restore(owned.id, 1)
    assert hearth.store.connection().execute(
        "SELECT count(*) FROM memory_versions WHERE memory_id = ?", (owned.id,)).fetchone()[0] == 0


def test_b2_fragments_personas_and_status_fields_keep_versions_and_restore(me, persona):
    fragments = me.layers.fragments
    fragment = fragments.add(["garden"], "Grows tomatoes", "home")
    fragments.edit(fragment.id, definition="Grows tomatoes and beans")
    assert [(v.version, v.change, v.actor) for v in fragments.history(fragment.id)] == [
        (2, "edited", "owner"), (1, "created", "owner")]
    assert fragments.restore(fragment.id, 1).definition == "Grows tomatoes"
    assert fragments.history(fragment.id)[0].change == "restored v1"
    proposal = me.layers.review.propose("fragment_update", {"fragment_id": fragment.id, "triggers": ["garden"],
                                                            "definition": "Grows squash"}, "Said so")
    me.layers.review.approve(proposal.id)
    assert fragments.history(fragment.id)[0].actor == "suggestion"
    fragments.remove(fragment.id)
    with pytest.raises(NotFound, match="deleted"):
        fragments.restore(fragment.id, 1)

    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    me.update_persona(persona.id, identity="I am Elion, and I love the sea.")
    assert "love the sea" in me.stored_prompt(thread.id)
    assert [v.version for v in me.personas.history(persona.id)] == [2, 1]
    restored, rebuilt = me.restore_persona(persona.id, 1)
    assert restored.identity == "I am Elion, a steady companion." and rebuilt == 1
    assert "love the sea" not in me.stored_prompt(thread.id)
    with pytest.raises(InvalidInput):
        me.restore_persona(persona.id, 3)  # identical to the current settings

    household = me.layers.household
    household.add_field("Fleur", aliases=["fleur"], value="at the Farm")
    household.edit_field("Fleur", aliases=["fleur", "my sister"])
    assert [v.version for v in household.field_history("Fleur")] == [2, 1]
    assert household.restore_field("Fleur", 1).aliases == ("fleur",)
    household.set("Fleur", "in town")
    farm = [v for v in household.history("Fleur") if v.value == "at the Farm"][0]
    assert household.restore_value("Fleur", farm.id).value == "at the Farm"
    household.remove_field("Fleur")
    with pytest.raises(NotFound, match="removed"):
        household.restore_value("Fleur", farm.id)


def test_b2_history_and_restore_over_http(hearth, me, persona):
    m = me.memories.add("Walks at dawn")
    me.memories.edit(m.id, text="Walks at dusk")
    fragment = me.layers.fragments.add(["walk"], "Likes long walks")
    me.layers.fragments.edit(fragment.id, definition="Likes short walks")
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1") as client:
        history = client.get(f"/api/memories/{m.id}/history").json()
        assert [(h["version"], h["actor"]) for h in history] == [(2, "owner"), (1, "owner")]
        undo = client.post(f"/api/memories/{m.id}/restore", json={"version": 1})
        assert undo.status_code == 200 and undo.json()["memory"]["text"] == "Walks at dawn"
        assert client.post(f"/api/fragments/{fragment.id}/restore", json={"version": 1}).json()["definition"] \
            == "Likes long walks"
        assert len(client.get(f"/api/fragments/{fragment.id}/history").json()) == 3
        assert client.get(f"/api/personas/{persona.id}/history").status_code == 200
        client.delete(f"/api/memories/{m.id}")
        gone = client.post(f"/api/memories/{m.id}/restore", json={"version": 1})
        assert gone.status_code == 404 and "deleted" in gone.json()["detail"]
        assert client.post("/api/fragments/4242/restore", json={"version": 1}).status_code == 404


def test_b2_history_and_restore_of_every_kind_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()

    def run(*args: str, user: str | None = None):
        return runner.invoke(cli, [*(["--user", user] if user else []), *args])

    def ok(*args: str) -> str:
        result = run(*args)
        assert result.exit_code == 0, result.output
        return result.output

    def refused(code: int, *args: str, user: str | None = None) -> str:
        result = run(*args, user=user)
        assert result.exit_code == code, (args, result.output)
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
        return result.output

    ok("init")
    ok("user", "add", "bob")
    # Memories: history says who changed what; a restore is a new version; as-of reads see the past.
    ok("memory", "add", "Walks the dog at dawn")
    ok("memory", "edit", "1", "--text", "Walks the dog at dusk")
    assert "restored from version 1 as version 3" in ok("memory", "restore", "1", "1")
    history = ok("memory", "history", "1")
    assert "restored v1" in history and "superseded" in history and "created" in history
    assert "dawn" in ok("memory", "list") and "dusk" not in ok("memory", "list")
    assert "dawn" in ok("memory", "list", "--as-of", utcnow())
    # Fragments.
    ok("fragments", "add", "--trigger", "allotment", "--definition", "Plot 14.")
    ok("fragments", "edit", "1", "--definition", "Plot 15.")
    fragment_history = ok("fragments", "history", "1")
    assert "edited" in fragment_history and "definition: Plot 15." in fragment_history
    assert "as version 3" in ok("fragments", "restore", "1", "1")
    assert "Plot 14." in ok("fragments", "list") and "Plot 15." not in ok("fragments", "list")
    # Personas: a restore rebuilds the persona's stored prompts.
    ok("persona", "add", "elion", "--identity", "I am Elion.")
    ok("chat", "--persona", "elion", "-m", "hello")
    ok("persona", "edit", "elion", "--identity", "I am Elion, and I love the sea.")
    assert "identity: I am Elion, and I love the sea." in ok("persona", "history", "elion")
    restored = ok("persona", "restore", "elion", "1")
    assert "as version 3" in restored and "1 stored prompt(s) rebuilt" in restored
    assert json.loads(ok("persona", "show", "elion"))["identity"] == "I am Elion."
    # Household status: the field's definition has versions, its values have their own history.
    ok("status", "add", "Fleur", "--alias", "fleur", "--value", "at the Farm")
    ok("status", "set", "Fleur", "in town")
    ok("status", "add", "Kids")
    assert "at the Farm" in ok("status", "history", "Fleur")
    farm_id = next(line.split()[0][1:] for line in ok("status", "history", "Fleur").splitlines()
                   if "at the Farm" in line)
    assert "Fleur: at the Farm (restored" in ok("status", "restore-value", "Fleur", farm_id)
    assert "Fleur: at the Farm" in ok("status", "list", "--as-of", utcnow())
    hs = Hearth(Settings.resolve({"home": str(tmp_path / "home")}, environ={}))
    hs.scope().layers.household.edit_field("Fleur", aliases=["fleur", "my sister"])
    hs.close()
    assert "my sister" in ok("status", "versions", "Fleur")
    assert "as version 3" in ok("status", "restore", "Fleur", "1")

    # Bad input: one line, exit 1 (not found) or 2 (invalid), and nothing changed.
    before = {kind: ok(*args) for kind, args in (
        ("memory", ("memory", "history", "1")), ("fragment", ("fragments", "history", "1")),
        ("persona", ("persona", "history", "elion")), ("status", ("status", "versions", "Fleur")),
        ("values", ("status", "history", "Fleur")))}
    assert "version 9" in refused(1, "memory", "restore", "1", "9")
    assert "already the current" in refused(2, "memory", "restore", "1", "3")
    refused(1, "fragments", "restore", "1", "9")
    refused(2, "fragments", "restore", "1", "3")
    refused(1, "persona", "restore", "elion", "9")
    refused(2, "persona", "restore", "elion", "3")
    refused(1, "persona", "restore", "nobody", "1")
    refused(1, "status", "restore", "Fleur", "9")
    refused(1, "status", "restore-value", "Fleur", "4242")
    refused(1, "status", "restore", "Nothing", "1")
    # Another user's ids answer exactly like unknown ones.
    for args, unknown in ((("memory", "restore", "1", "1"), ("memory", "restore", "4242", "1")),
                          (("memory", "history", "1"), ("memory", "history", "4242")),
                          (("fragments", "restore", "1", "1"), ("fragments", "restore", "4242", "1")),
                          (("fragments", "history", "1"), ("fragments", "history", "4242")),
                          (("status", "restore-value", "Fleur", farm_id), ("status", "restore-value", "Nobody", farm_id)),
                          (("persona", "history", "elion"), ("persona", "history", "nobody"))):
        foreign = refused(1, *args, user="bob")
        assert foreign == refused(1, *unknown, user="bob").replace("4242", "1").replace("Nobody", "Fleur") \
            .replace("nobody", "elion")
    after = {kind: ok(*args) for kind, args in (
        ("memory", ("memory", "history", "1")), ("fragment", ("fragments", "history", "1")),
        ("persona", ("persona", "history", "elion")), ("status", ("status", "versions", "Fleur")),
        ("values", ("status", "history", "Fleur")))}
    assert after == before
    # A deleted item's versions went with it: restoring one is "not found", and changes nothing.
    ok("memory", "rm", "1")
    assert "deleted" in refused(1, "memory", "restore", "1", "1")
    ok("fragments", "rm", "1")
    assert "deleted" in refused(1, "fragments", "restore", "1", "1")
    ok("status", "rm", "Fleur")
    assert "removed" in refused(1, "status", "restore", "Fleur", "1")
    assert "removed" in refused(1, "status", "restore-value", "Fleur", farm_id)
    assert "Fleur" not in ok("status", "list")
