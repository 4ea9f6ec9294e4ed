"""Finding chats (W4, U1): the sidebar search over titles and message text, pinned threads, tags
and the tag: filter, and imported threads that open read only (A5, X4), through the library, the
HTTP API and the CLI, on real database files."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import Conflict, InvalidInput
from hearth.cli import cli
from hearth.server import create_app
from hearth.store import Store
from hearth.thread.search import parse, snippet
from tests import samples
from tests.conftest import ENGINE
from tests.test_server import BASE, assert_error, parse_sse, row_counts


@pytest.fixture
def client(hearth):
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as c:
        yield c


def titles(found) -> list[str]:
    return [c["title"] if isinstance(c, dict) else c.title for c in found]


def thread(me, persona, title, *texts):
    conversation = me.conversations.create(persona.id, title=title)
    for i, text in enumerate(texts):
        me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", text)
    return conversation


# -- search by message text ---------------------------------------------------------------------------
def test_w4_search_matches_titles_or_message_text_and_shows_a_plain_snippet(client, me, persona):
    long_before = "We talked about the weather for a long while. " * 6
    walk = thread(me, persona, "Sunday", "Shall we walk to the harbour?",
                  long_before + "Then the *lighthouse* keeper waved at us <b>twice</b>.")
    titled = thread(me, persona, "Lighthouse plans")
    thread(me, persona, "Groceries", "Milk, eggs and bread.")
    thread(me, persona, "Café", "A crème brûlée, please.")

    found = client.get("/api/conversations", params={"q": "lighthouse"}).json()
    assert titles(found) == ["Lighthouse plans", "Sunday"]  # newest first, the list's own order
    by_title, by_text = found
    assert by_title["id"] == titled.id and by_title["match"] is None
    match = by_text["match"]
    assert by_text["id"] == walk.id and match["role"] == "assistant"
    # A short snippet around the word, Markdown marks gone, the rest as written (the page shows text).
    assert "lighthouse keeper waved at us <b>twice</b>" in match["snippet"]
    assert match["snippet"].startswith("…") and len(match["snippet"]) <= 165
    assert "*" not in match["snippet"]
    # The last word may still be being typed; every word must be in one message; accents fold.
    assert titles(client.get("/api/conversations", params={"q": "keeper lightho"}).json()) == ["Sunday"]
    assert titles(client.get("/api/conversations", params={"q": "harbour keeper"}).json()) == []
    assert titles(client.get("/api/conversations", params={"q": "creme brulee"}).json()) == ["Café"]
    # The match names the newest message holding the words.
    me.conversations.add_message(walk.id, "user", "The lighthouse again!")
    again = client.get("/api/conversations", params={"q": "lighthouse"}).json()
    assert again[0]["title"] == "Sunday" and again[0]["match"]["snippet"] == "The lighthouse again!"


def test_w4_g2_another_users_messages_never_match(client, hearth, me, persona):
    thread(me, persona, "Owner's walk", "The zephyrquill rang by the door.")
    second = hearth.users.create("second")
    other = {"Authorization": f"Bearer {hearth.users.create_token(second.id, 'tests')}"}
    own = client.post("/api/conversations", json={"title": "Mine"}, headers=other).json()
    assert client.get("/api/conversations", params={"q": "zephyrquill"}, headers=other).json() == []
    assert client.get("/api/conversations", params={"q": "zephyr"}, headers=other).json() == []
    hearth.scope(second.id).conversations.add_message(own["id"], "user", "My own zephyrquill.")
    found = client.get("/api/conversations", params={"q": "zephyrquill"}, headers=other).json()
    assert titles(found) == ["Mine"] and found[0]["match"]["snippet"] == "My own zephyrquill."
    assert titles(client.get("/api/conversations", params={"q": "zephyrquill"}).json()) == ["Owner's walk"]
    # Tags are the user's own too.
    client.post(f"/api/conversations/{own['id']}/tags", json={"tag": "walks"}, headers=other)
    assert client.get("/api/conversations", params={"q": "tag:walks"}).json() == []
    assert client.get("/api/conversations/tags").json() == []
    for method, path, body in (("POST", f"/api/conversations/{own['id']}/pin", None),
                               ("POST", f"/api/conversations/{own['id']}/tags", {"tag": "mine"}),
                               ("PUT", f"/api/conversations/{own['id']}/tags", {"tags": []}),
                               ("DELETE", f"/api/conversations/{own['id']}/tags/walks", None)):
        assert_error(client.request(method, path, json=body), 404, "not_found")
    assert hearth.scope(second.id).conversations.get(own["id"]).tags == ("walks",)


def test_w4_search_keeps_the_lists_rules_and_pages_by_the_same_cursor(client, me, persona):
    hidden = me.folders.create("Private", hidden=True)
    for i in range(60):
        thread(me, persona, f"Day {i:02d}", f"Entry {i}: the tidepool was full of crabs.")
    shielded = thread(me, persona, "Shielded one", "More crabs here.")
    me.conversations.set_shielded(shielded.id, True)
    in_hidden = thread(me, persona, "Hidden one", "Crabs in the hidden folder.")
    me.conversations.move(in_hidden.id, hidden.id)
    trashed = thread(me, persona, "Trashed one", "Crabs in the trash.")
    me.conversations.trash(trashed.id)

    # As the list does: shielded and hidden-folder threads are listed, trashed ones only in the trash.
    first = client.get("/api/conversations", params={"q": "crabs", "limit": 50}).json()
    assert len(first) == 50 and titles(first)[:2] == ["Hidden one", "Shielded one"]
    last = first[-1]
    rest = client.get("/api/conversations", params={"q": "crabs", "limit": 50, "before_updated_at": last["updated_at"],
                                                    "before_id": last["id"]}).json()
    assert len(rest) == 12 and not {c["id"] for c in first} & {c["id"] for c in rest}
    assert {c["title"] for c in first + rest} == {f"Day {i:02d}" for i in range(60)} | {"Hidden one", "Shielded one"}
    assert all(c["match"] for c in first + rest)
    trash = client.get("/api/conversations", params={"q": "crabs", "trashed": "true"}).json()
    assert titles(trash) == ["Trashed one"]
    # The other filters combine with the words.
    assert titles(client.get("/api/conversations", params={"q": "crabs", "folder_id": hidden.id}).json()) == ["Hidden one"]


@pytest.mark.sqlite_only
def test_w4_search_is_one_indexed_keyword_query_on_sqlite(hearth, me, persona):
    thread(me, persona, "Sunday", "The lighthouse keeper waved.")
    statements: list[str] = []
    conn = hearth.store.connection()
    conn.set_trace_callback(statements.append)
    try:
        found = me.conversations.list(text="lighthouse", limit=50)
    finally:
        conn.set_trace_callback(None)
    assert titles(found) == ["Sunday"]
    searched = [s for s in statements if "messages_fts" in s and not s.startswith("--")]  # not FTS5's own
    assert len(searched) == 1  # one query: the index, grouped by conversation, joined to the list
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + searched[0])]
    # The index answers the words; each hit is one primary-key read; no table is scanned whole.
    assert any(step.startswith("SCAN messages_fts VIRTUAL TABLE INDEX") for step in plan), plan
    assert "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
    assert not [step for step in plan if step.startswith("SCAN") and "VIRTUAL TABLE" not in step], plan
    # Then one read of the page's matching messages, by id.
    assert len([s for s in statements if s.startswith("SELECT id, role, created_at, content FROM messages")]) == 1


@pytest.mark.skipif(ENGINE != "postgres", reason="the PostgreSQL lane's plan (SQLite's is checked above)")
def test_w4_search_is_answered_by_the_gin_index_postgres(hearth, me, persona):
    conn = hearth.store.connection()
    # The plan is judged on statistics taken once, after the inserts: not on whatever an earlier
    # test's table size left, nor on an autovacuum that may analyze it meanwhile.
    conn.execute("ALTER TABLE messages SET (autovacuum_enabled = false)")
    try:
        conversation = thread(me, persona, "Sunday", "The lighthouse keeper waved.")
        with hearth.store.write():
            for i in range(1_000):
                me.conversations.add_message(conversation.id, "assistant", f"ordinary words number {i}")
        conn.execute("ANALYZE messages")
        plans = _search_plans(me, conn)
    finally:
        conn.execute("ALTER TABLE messages RESET (autovacuum_enabled)")
    assert len(plans) == 1 and "messages_search" in plans[0], plans
    assert "Seq Scan on messages" not in plans[0], plans


def _search_plans(me, conn) -> list[str]:
    """The plans of the sidebar search's queries while it finds "lighthouse"."""
    plans: list[str] = []
    execute = conn.execute

    def explained(sql, args=()):
        if sql.startswith("WITH hits"):
            plans.append(" ".join(r[0] for r in execute("EXPLAIN " + sql, args).fetchall()))
        return execute(sql, args)

    conn.execute = explained
    try:
        assert titles(me.conversations.list(text="lighthouse")) == ["Sunday"]
    finally:
        conn.execute = execute
    return plans


def test_w4_the_search_box_is_parsed_into_words_tags_and_a_title_text():
    query = parse("Tag:Walks  the lighthouse  tag:family keep")
    assert query.tags == ("walks", "family") and query.text == "the lighthouse keep"
    assert query.words == ("lighthouse", "keep")  # "the" is too common to ask the index
    assert parse("we").words == ("we",)  # only common words: still searched
    with pytest.raises(InvalidInput, match="a tag is 1-40"):
        parse("tag:a,b")
    assert snippet("**Bold** `code` and\n\nnew lines", ("code",)) == "Bold code and new lines"


# -- pins and tags -----------------------------------------------------------------------------------
def test_w4_pinned_threads_are_listed_apart_and_persist(client, me, persona):
    a, b, c = (thread(me, persona, t) for t in ("Alpha", "Beta", "Gamma"))
    pinned = client.post(f"/api/conversations/{a.id}/pin").json()
    assert pinned["pinned_at"]
    assert client.post(f"/api/conversations/{a.id}/pin").json()["pinned_at"] == pinned["pinned_at"]  # idempotent
    client.post(f"/api/conversations/{c.id}/pin")
    assert titles(client.get("/api/conversations", params={"pinned": "true"}).json()) == ["Gamma", "Alpha"]
    assert titles(client.get("/api/conversations", params={"pinned": "false", "loose": "true"}).json()) == ["Beta"]
    # Pinning neither reorders the list nor touches the thread's time.
    assert client.get(f"/api/conversations/{a.id}").json()["updated_at"] == a.updated_at
    assert client.post(f"/api/conversations/{c.id}/unpin").json()["pinned_at"] is None
    assert titles(client.get("/api/conversations", params={"pinned": "true"}).json()) == ["Alpha"]
    kinds = [e["kind"] for e in client.get(f"/api/conversations/{c.id}/events").json()]
    assert kinds[-2:] == ["conversation.pinned", "conversation.unpinned"]
    assert_error(client.post("/api/conversations/987654/pin"), 404, "not_found")
    # A trashed pinned thread leaves the Pinned group and comes back with it when restored.
    me.conversations.trash(a.id)
    assert client.get("/api/conversations", params={"pinned": "true"}).json() == []
    me.conversations.restore(a.id)
    assert titles(client.get("/api/conversations", params={"pinned": "true"}).json()) == ["Alpha"]
    assert b.id not in [x["id"] for x in client.get("/api/conversations", params={"pinned": "true"}).json()]


def test_w4_tags_are_added_removed_filtered_and_bad_ones_change_nothing(client, hearth, me, persona):
    walk = thread(me, persona, "Sunday", "We walked to the lighthouse.")
    cook = thread(me, persona, "Soup", "The lighthouse soup recipe.")
    thread(me, persona, "Other", "Nothing here.")
    assert client.post(f"/api/conversations/{walk.id}/tags", json={"tag": " Walks "}).json()["tags"] == ["walks"]
    client.post(f"/api/conversations/{walk.id}/tags", json={"tag": "family"})
    client.post(f"/api/conversations/{walk.id}/tags", json={"tag": "walks"})  # once only
    assert client.put(f"/api/conversations/{cook.id}/tags", json={"tags": ["food", "family"]}).json()["tags"] == [
        "food", "family"]
    assert client.get(f"/api/conversations/{walk.id}").json()["tags"] == ["walks", "family"]
    # tag: filters, alone, several, and with words (a tag's threads whose title or messages hold them).
    assert titles(client.get("/api/conversations", params={"q": "tag:family"}).json()) == ["Soup", "Sunday"]
    assert titles(client.get("/api/conversations", params={"q": "tag:family tag:walks"}).json()) == ["Sunday"]
    assert titles(client.get("/api/conversations", params={"q": "lighthouse tag:food"}).json()) == ["Soup"]
    assert titles(client.get("/api/conversations", params={"q": "tag:nothing"}).json()) == []
    assert client.get("/api/conversations/tags").json() == [
        {"tag": "family", "count": 2}, {"tag": "food", "count": 1}, {"tag": "walks", "count": 1}]
    assert client.delete(f"/api/conversations/{walk.id}/tags/family").json()["tags"] == ["walks"]
    # Bad input: a clear error and nothing changes.
    before = row_counts(hearth)
    for response in (client.post(f"/api/conversations/{walk.id}/tags", json={"tag": "two words"}),
                     client.post(f"/api/conversations/{walk.id}/tags", json={"tag": ""}),
                     client.put(f"/api/conversations/{walk.id}/tags", json={"tags": ["ok", "<b>"]}),
                     client.put(f"/api/conversations/{walk.id}/tags", json={"tags": [f"t{i}" for i in range(21)]}),
                     client.get("/api/conversations", params={"q": "tag:a,b"})):
        assert response.status_code in (400, 422), response.text
    assert row_counts(hearth) == before
    assert me.conversations.get(walk.id).tags == ("walks",) and me.conversations.get(cook.id).tags == ("food", "family")
    # Ledger events carry counts, never the tags.
    events = client.get(f"/api/conversations/{cook.id}/events").json()
    tagged = [e for e in events if e["kind"] == "conversation.tagged"]
    assert tagged and tagged[-1]["payload"] == {"tags": 2}
    # Deleting the thread forever takes its tags along.
    me.conversations.trash(cook.id)
    assert client.get("/api/conversations/tags").json() == [{"tag": "walks", "count": 1}]


def test_w4_cli_pins_tags_and_searches_threads(tmp_path, hearth, me, persona):
    walk = thread(me, persona, "Sunday", "We walked to the [bold]lighthouse[/bold].")
    runner = CliRunner()
    home = ["--home", str(hearth.settings.home)]

    def run(*args):
        result = runner.invoke(cli, [*home, *args], catch_exceptions=False)
        return result

    assert run("threads", "pin", str(walk.id)).output.strip() == f"Conversation {walk.id} pinned."
    assert me.conversations.get(walk.id).pinned_at
    assert "walks family" in run("threads", "tag", str(walk.id), "Walks", "family").output
    listing = run("threads", "list", "--search", "tag:walks lighthouse").output
    cells = "".join(listing.replace("│", " ").split())  # the table's cells wrap at the runner's width
    assert "Sunday(pinned)" in cells and "[bold]lighthouse[/bold]" in cells, listing
    assert [line.split() for line in run("threads", "tags").output.splitlines()] == [["family", "1"], ["walks", "1"]]
    assert "(none)" not in run("threads", "tag", str(walk.id), "--remove", "family").output
    assert me.conversations.get(walk.id).tags == ("walks",)
    refused = runner.invoke(cli, [*home, "threads", "tag", str(walk.id), "ok", "bad tag"])
    assert refused.exit_code != 0 and "a tag is 1-40" in refused.output
    assert me.conversations.get(walk.id).tags == ("walks",)  # all or nothing
    assert run("threads", "unpin", str(walk.id)).exit_code == 0
    assert me.conversations.get(walk.id).pinned_at is None


# -- imported threads --------------------------------------------------------------------------------
@pytest.fixture
def imported(me, persona):
    report = me.imports.file(samples.st_chat(), "Mira Vale - 2024-03-02.jsonl", persona=persona)
    return me.conversations.get(report.ids["conversations"][0])


def test_x4_a5_an_imported_chat_opens_read_only_and_continues_in_a_new_chat(client, hearth, me, persona, imported):
    shown = client.get(f"/api/conversations/{imported.id}").json()
    assert shown["imported"] is True and shown["state"] == "open"
    assert len(client.get(f"/api/conversations/{imported.id}/messages").json()["messages"]) == 4
    before = row_counts(hearth)
    for path, body in ((f"/api/conversations/{imported.id}/messages", {"text": "Hello again"}),
                       (f"/api/conversations/{imported.id}/regenerate", None),
                       (f"/api/conversations/{imported.id}/partial", {"text": "kept"})):
        body_ = assert_error(client.post(path, json=body), 409, "conflict")
        assert "imported and is read only" in body_["detail"]
    assert row_counts(hearth) == before
    with pytest.raises(Conflict):
        me.send(imported.id, "From the library")
    # A message arriving on another channel does not land in it either.
    assert me.conversations.current(persona.id) is None or me.conversations.current(persona.id).id != imported.id
    # "Continue in a new chat" is Branch: a new, writable thread whose handoff carries the last turns.
    branched = client.post(f"/api/conversations/{imported.id}/branch", json={"retry_key": "continue-1"}).json()
    new = branched["conversation"]
    assert new["imported"] is False and new["id"] != imported.id
    messages = client.get(f"/api/conversations/{new['id']}/messages").json()["messages"]
    assert messages[0]["kind"] == "handoff_artifact" and "tea without sugar" in messages[0]["content"]
    events = parse_sse(client.post(f"/api/conversations/{new['id']}/messages", json={"text": "Hello again"}).text)
    assert events[-1][0] == "done"
    # The imported thread can still be organised: pinned, tagged, found by its text.
    client.post(f"/api/conversations/{imported.id}/pin")
    client.post(f"/api/conversations/{imported.id}/tags", json={"tag": "sillytavern"})
    found = client.get("/api/conversations", params={"q": "tag:sillytavern kettle"}).json()
    assert [c["id"] for c in found] == [imported.id] and "kettle" in found[0]["match"]["snippet"]


def test_x4_threads_a_web_chat_makes_are_not_imported(me, persona):
    assert me.conversations.create(persona.id, title="Mine").imported is False
    assert me.new_chat(persona.id).conversation.imported is False


@pytest.mark.sqlite_only
def test_x4_threads_imported_before_migration_24_are_marked_read_only_sqlite(tmp_path, settings, persona, hearth, me, imported):
    """An older database: migration 24 finds earlier imports by their creation event's channel."""
    web = me.conversations.create(persona.id, title="Mine")
    path = hearth.store.path
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("""
        DROP INDEX conversations_user_pinned; DROP INDEX conversation_tags_user_tag; DROP TABLE conversation_tags;
        ALTER TABLE conversations DROP COLUMN pinned_at; ALTER TABLE conversations DROP COLUMN tags;
        ALTER TABLE conversations DROP COLUMN imported; DELETE FROM schema_migrations WHERE version = 24;
    """)
    conn.close()
    store = Store(path)
    try:
        marks = dict(store.connection().execute("SELECT id, imported FROM conversations").fetchall())
        assert marks[imported.id] == 1 and marks[web.id] == 0
    finally:
        store.close()
