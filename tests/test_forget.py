"""Cascading, verifiable forgetting (B4) and retention controls (B5)."""

from __future__ import annotations

import pytest

from hearth import InvalidInput, NotFound
from hearth.errors import Conflict
from hearth.memory.helpers import OfflineHelper
from hearth.ops.jobs import Worker
from hearth.records.forget import CONFIRMATION_PHRASE, verify
from hearth.retrieval.archive import Archive
from hearth.store import is_postgres

CANARY = "quokkazephyr"


def forget(me, target, ident=None, **dates):
    preview = me.forget.preview(target, ident, **dates)
    return me.forget.apply(target, ident, token=preview.token, phrase=CONFIRMATION_PHRASE, **dates)


def drain(hearth) -> None:
    worker = Worker(hearth, helper=OfflineHelper())
    while worker.run_once():
        pass


def spread_canary(me, hearth, persona):
    """A thread whose canary reaches every derived place: FTS, a branch's handoff and prompt, a
    rolling summary, live context, the search log and a suggestion's evidence."""
    source = me.conversations.create(persona.id, "Secrets")
    me.send(source.id, f"My childhood password was {CANARY} and I never told anyone")
    me.send(source.id, f"Please remember {CANARY} is only between us")
    me.layers.summaries.refresh(source.id, OfflineHelper(), force=True)
    me.layers.live_context.refresh(source.id, OfflineHelper())
    me.search(CANARY, embed=False)
    me.layers.review.propose("memory_add", {"text": f"Password was {CANARY}"}, "It was said",
                             evidence=f"My childhood password was {CANARY}", conversation_id=source.id)
    result = me.branch(source.id, "retry-key-0001")
    me.send(result.conversation.id, "hello again")
    assert CANARY in me.stored_prompt(result.conversation.id)
    return source, result.conversation


def test_b4_forgetting_a_conversation_leaves_no_trace_anywhere_in_the_store(hearth, me, persona):
    """SQLite: the raw bytes of the database file, its WAL and the vector files; PostgreSQL: every
    text column of every table and the keyword index's terms."""
    source, branch = spread_canary(me, hearth, persona)
    drain(hearth)
    before = verify(hearth.store, CANARY)
    # The check does see it, where each engine keeps it.
    where = {"messages.content", "search_log.query", "proposals.evidence"} if is_postgres(
        hearth.store.connection()) else {"hearth.db"}
    assert where <= set(before.found_in) and before.fts_terms >= 1, before.found_in
    receipt = forget(me, "conversation", source.id)
    counts = receipt.counts
    assert counts["conversations"] == 1 and counts["messages"] >= 4
    assert counts["handoffs_rewritten"] == 1 and counts["search_log_entries"] >= 1 and counts["suggestions"] == 1
    assert counts["prompts_rebuilt"] == 1
    with pytest.raises(NotFound):
        me.conversations.get(source.id)
    # The branch stays, without the quoted turns: its prompt and its visible bubble no longer quote them.
    assert CANARY not in (me.stored_prompt(branch.id) or "")
    assert all(CANARY not in m.content for m in me.conversations.messages(branch.id, visible_only=False))
    # The receipt in the ledger carries counts only.
    row = hearth.store.connection().execute(
        "SELECT payload FROM events WHERE kind = 'forget.receipt' ORDER BY id DESC").fetchone()
    assert CANARY not in row[0] and '"messages"' in row[0]
    drain(hearth)  # the durable compaction job: FTS merge, vector files, WAL
    after = verify(hearth.store, CANARY)
    assert after.clean, after.to_dict()
    assert after.files_checked >= 1


def test_b4_forgetting_one_message_rebuilds_what_was_derived_from_it(hearth, me, persona):
    thread = me.conversations.create(persona.id, "Mixed")
    me.send(thread.id, "The weather is mild today and the garden needs water")
    secret = me.send(thread.id, f"Between us, the safe code is {CANARY}")
    me.send(thread.id, "Anyway, what should we cook tonight?")
    me.layers.summaries.refresh(thread.id, OfflineHelper(), force=True)
    me.search(CANARY, embed=False)
    me.search("garden water", embed=False)  # a search that never saw the message (one thread: recall ran none)
    message_id = secret.user_message.id
    receipt = forget(me, "message", message_id)
    assert receipt.counts["messages"] == 1 and receipt.counts["search_log_entries"] >= 1
    logged = hearth.store.connection().execute("SELECT query || results FROM search_log").fetchall()
    assert logged and all(CANARY not in r[0] for r in logged)  # other searches stay
    remaining = [m.content for m in me.conversations.messages(thread.id)]
    assert len(remaining) == 5 and all(CANARY not in t for t in remaining)
    assert me.layers.summaries.current(thread.id) is None or CANARY not in me.layers.summaries.current(thread.id).text
    drain(hearth)
    assert verify(hearth.store, CANARY).clean


def test_b4_forgetting_a_memory_and_an_archive_document(hearth, me, persona):
    memory = me.memories.add(f"Keeps the spare key under the {CANARY} stone")
    me.memories.edit(memory.id, text=f"Keeps the spare key under the blue {CANARY} stone")
    thread = me.conversations.create(persona.id, "A")
    me.send(thread.id, "hello")
    assert CANARY in me.stored_prompt(thread.id)
    document = Archive(hearth.store, me.user_id).add_text("Old notes", f"AUMA said: the {CANARY} lives here\n")
    receipt = forget(me, "memory", memory.id)
    assert receipt.counts["memories"] == 1 and receipt.counts["prompts_rebuilt"] == 1
    assert CANARY not in me.stored_prompt(thread.id)
    assert forget(me, "document", document.document.id).counts["chunks"] == 1
    with pytest.raises(NotFound):
        me.memories.restore(memory.id, 1)  # a deleted memory's versions are gone (B2)
    drain(hearth)
    assert verify(hearth.store, CANARY).clean


def test_b4_forgetting_empties_the_process_caches_keyed_by_text(hearth, me, persona):
    from hearth.memory import duplicates
    from hearth.retrieval import semantic

    memory = me.memories.add(f"Hides the letters in the {CANARY} tin")
    me.layers.review.remember([{"text": "Nora walks the dog at seven"}])  # compared with the memory: cached
    me.search(f"where is the {CANARY} tin")  # its query vector is cached by text

    def cached_texts() -> list[str]:
        with semantic._QUERY_LOCK, duplicates._VECTORS_LOCK:
            return [t for _m, t in [*semantic._QUERY_CACHE, *duplicates._VECTORS]]

    if not any(CANARY in t for t in cached_texts()):
        pytest.skip("the local embedding model is not installed: nothing was cached")
    forget(me, "memory", memory.id)
    drain(hearth)  # the compaction job
    assert not any(CANARY in t for t in cached_texts())
    assert duplicates.read_fact.cache_info().currsize == 0


def test_b4_b5_another_users_item_answers_like_an_unknown_one_and_nothing_changes(hearth, me, persona):
    thread = me.conversations.create(persona.id, "Mine")
    me.send(thread.id, "hello")
    other = hearth.scope(hearth.users.create("bob").id)
    for target in ("conversation", "message", "memory", "folder", "document"):
        with pytest.raises(NotFound) as err:
            other.forget.preview(target, thread.id)
        with pytest.raises(NotFound) as unknown:
            other.forget.preview(target, 999_999)
        assert str(err.value).replace(str(thread.id), "N") == str(unknown.value).replace("999999", "N")
    token = me.forget.preview("conversation", thread.id).token
    with pytest.raises(NotFound):
        other.forget.apply("conversation", thread.id, token=token, phrase=CONFIRMATION_PHRASE)
    with pytest.raises(InvalidInput):
        me.forget.apply("conversation", thread.id, token=token, phrase="forget forever")
    me.send(thread.id, "one more")  # the scope changes after the preview
    with pytest.raises(Conflict):
        me.forget.apply("conversation", thread.id, token=token, phrase=CONFIRMATION_PHRASE)
    assert len(me.conversations.messages(thread.id)) == 4


def test_b5_empty_trash_folders_and_forgetting_a_date_range(hearth, me, persona):
    kept = me.conversations.create(persona.id, "Kept")
    me.send(kept.id, "a keeper")
    trashed = me.conversations.create(persona.id, "Trashed")
    me.send(trashed.id, f"trash {CANARY}")
    me.conversations.trash(trashed.id)
    receipt = forget(me, "trash")
    assert receipt.counts["conversations"] == 1
    assert [c.id for c in me.conversations.list(include_trashed=True)] == [kept.id]
    folder = me.folders.create("Old")
    inside = me.conversations.create(persona.id, "In folder", folder_id=folder.id)
    me.send(inside.id, "filed away")
    counts = forget(me, "folder", folder.id).counts
    assert (counts["conversations"], counts["folders"], counts["messages"]) == (1, 1, 2)
    with pytest.raises(NotFound):
        me.folders.get(folder.id)
    with pytest.raises(NotFound):
        me.conversations.get(inside.id)
    # Forget everything from a range: the kept thread was created before it.
    late = me.conversations.create(persona.id, "Late")
    me.send(late.id, "late words")
    start = me.conversations.get(late.id).created_at
    end = me.conversations.messages(late.id)[-1].created_at
    with pytest.raises(InvalidInput, match="future"):
        me.forget.preview("range", start=start, end="2999-01-01")
    with pytest.raises(InvalidInput):
        me.forget.preview("range", start=end, end=start)
    receipt = forget(me, "range", start=start, end=end[:10])
    assert receipt.counts["conversations"] == 1
    assert [c.id for c in me.conversations.list(include_trashed=True)] == [kept.id]


def test_b4_b5_cli_preview_apply_and_verify(hearth, me, persona, monkeypatch):
    import json

    from click.testing import CliRunner

    from hearth.cli import cli

    thread = me.conversations.create(persona.id, "To forget")
    me.send(thread.id, f"The word is {CANARY}")
    me.conversations.trash(thread.id)
    hearth.close()
    monkeypatch.setenv("HEARTH_HOME", str(hearth.settings.home))
    runner = CliRunner()
    dirty = runner.invoke(cli, ["forget", "--verify", CANARY])
    assert dirty.exit_code == 1 and "still present" in dirty.output
    preview = runner.invoke(cli, ["forget", "preview", "trash"])
    assert preview.exit_code == 0, preview.output
    data = json.loads(preview.output)
    assert data["counts"]["conversations"] == 1 and data["counts"]["messages"] == 2
    wrong = runner.invoke(cli, ["forget", "apply", "trash", "--token", data["token"], "--phrase", "yes"])
    assert wrong.exit_code == 2 and wrong.output.startswith("Error:")
    done = runner.invoke(cli, ["forget", "apply", "trash", "--token", data["token"], "--phrase", CONFIRMATION_PHRASE])
    assert done.exit_code == 0 and "1 conversations" in done.output
    clean = runner.invoke(cli, ["forget", "--verify", CANARY])
    assert clean.exit_code == 0 and clean.output.startswith("Clean")
    foreign = runner.invoke(cli, ["forget", "preview", "conversation", "424242"])
    assert foreign.exit_code == 1 and "no conversation" in foreign.output


def test_b4_verify_looks_up_the_phrase_and_its_words_but_not_its_stopwords(hearth, me, persona, monkeypatch):
    """The README's `hearth forget --verify "a private word"` is clean after a real forget, although
    "a" stays in the index; a canary still in the database is found, whole or by one of its words."""
    from click.testing import CliRunner

    from hearth.cli import cli

    example = "a private word"  # the README's example
    kept = me.conversations.create(persona.id, "Kept")
    me.send(kept.id, "I planted a tree in the garden and the roses are out")
    me.send(kept.id, f"The {CANARY} stone stays where it is")
    secret = me.conversations.create(persona.id, "Secret")
    me.send(secret.id, f"Here is {example} between us")
    before = verify(hearth.store, example)
    assert not before.clean and before.fts_terms >= 2, before.to_dict()
    forget(me, "conversation", secret.id)
    drain(hearth)
    assert verify(hearth.store, example).clean, verify(hearth.store, example).to_dict()
    left = verify(hearth.store, f"the {CANARY} stone")  # its words are still in the index
    assert not left.clean and left.fts_terms >= 2, left.to_dict()
    assert verify(hearth.store, f"{CANARY} stone stays").found_in  # and the phrase in the database
    one_word = verify(hearth.store, f"a {CANARY} pebble")  # the phrase nowhere, one word in the index
    assert not one_word.found_in and one_word.fts_terms >= 1 and not one_word.clean
    hearth.close()
    monkeypatch.setenv("HEARTH_HOME", str(hearth.settings.home))
    runner = CliRunner()
    clean = runner.invoke(cli, ["forget", "--verify", example])
    assert clean.exit_code == 0 and clean.output.startswith("Clean"), clean.output
    dirty = runner.invoke(cli, ["forget", "--verify", f"the {CANARY} stone"])
    assert dirty.exit_code == 1 and "still present" in dirty.output


def test_b5_api_delete_forever_search_log_retention_and_clearing(hearth, me, persona):
    from datetime import datetime, timedelta, timezone

    from fastapi.testclient import TestClient

    from hearth.server.app import create_app

    folder = me.folders.create("Old things")
    thread = me.conversations.create(persona.id, "Filed", folder_id=folder.id)
    me.send(thread.id, "filed words")
    me.search("garden tomatoes", embed=False)
    old = (datetime.now(timezone.utc) - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with hearth.store.write() as conn:
        conn.execute("UPDATE search_log SET created_at = ?", (old,))
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1") as client:
        preview = client.post("/api/forget/preview", json={"target": "folder", "id": folder.id})
        assert preview.status_code == 200 and preview.json()["counts"]["conversations"] == 1
        bad = client.post("/api/forget", json={"target": "folder", "id": folder.id, "token": "x",
                                               "phrase": CONFIRMATION_PHRASE})
        assert bad.status_code == 409 and "error" in bad.json()
        unknown = client.post("/api/forget/preview", json={"target": "folder", "id": 4242})
        assert unknown.status_code == 404
        done = client.post("/api/forget", json={"target": "folder", "id": folder.id,
                                                "token": preview.json()["token"], "phrase": CONFIRMATION_PHRASE})
        assert done.status_code == 200 and done.json()["counts"]["folders"] == 1
        assert client.get(f"/api/conversations/{thread.id}").status_code == 404
        # Retention: with 30 days set, the 40-day-old entries go when the next search is logged.
        assert client.patch("/api/layers/settings", json={"search_log.retention_days": 30}).status_code == 200
        before = len(client.get("/api/search-log").json())
        assert before >= 1
        me.search("anything new", embed=False)
        assert len(client.get("/api/search-log").json()) == 1
        cleared = client.post("/api/forget/search-log", json={"phrase": CONFIRMATION_PHRASE})
        assert cleared.status_code == 200 and cleared.json()["counts"]["search_log_entries"] == 1
        assert client.get("/api/search-log").json() == []
        drain(hearth)
        assert client.post("/api/forget/verify", json={"canary": "filed words"}).json()["clean"] is True


def test_b4_the_archive_delete_route_takes_search_log_citations_with_it(hearth, me):
    from fastapi.testclient import TestClient

    from hearth.server.app import create_app

    added = Archive(hearth.store, me.user_id).add_text("Letters", f"AUMA said: the {CANARY} letter\n")
    me.search(CANARY, embed=False)
    cited = hearth.store.connection().execute("SELECT count(*) FROM search_log").fetchone()[0]
    assert cited == 1
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1") as client:
        assert client.delete(f"/api/archive/documents/{added.document.id}").status_code == 204
        assert client.delete(f"/api/archive/documents/{added.document.id}").status_code == 404
    assert hearth.store.connection().execute("SELECT count(*) FROM search_log").fetchone()[0] == 0
    drain(hearth)
    assert verify(hearth.store, CANARY).clean


def test_b4_a_capsule_written_from_a_forgotten_turn_goes_too(tmp_path):
    from hearth import Hearth, Settings
    from tests.conftest import RecordingProvider

    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "capsule_recent_turns": 2}, environ={})
    with Hearth(settings, provider=RecordingProvider()) as h:
        me = h.scope()
        persona = me.personas.create("elion", "Elion")
        thread = me.conversations.create(persona.id, "Capsule")
        secret = me.send(thread.id, f"My sister is called {CANARY.title()}.")
        me.send(thread.id, "I prefer tea to coffee.")
        me.send(thread.id, "Remind me about the dentist tomorrow.")
        capsule = me.timeline.refresh_capsule(thread.id)
        assert capsule is not None and CANARY in capsule.text.lower()
        forget(me, "message", secret.user_message.id)
        assert h.store.connection().execute("SELECT count(*) FROM capsules").fetchone()[0] == 0
        drain(h)
        assert verify(h.store, CANARY).clean
