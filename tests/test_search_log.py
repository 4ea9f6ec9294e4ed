"""Search log (A3, G5) and the owner's search (V2): every search leaves an inspectable row with
query, variants, filters, per-signal scores, counts and a reliability judgement; CLI and API."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from hearth import NotFound, ProviderError
from hearth.cli import cli
from hearth.retrieval import searchlog
from hearth.retrieval.archive import Archive
from hearth.server import create_app
from hearth.server import recall as recall_routes
from hearth.store import is_postgres


@pytest.fixture
def seeded(hearth, me, persona):
    visible = me.conversations.create(persona.id, "Picnic")
    me.conversations.add_message(visible.id, "user", "the picnic blanket with red squares")
    shielded = me.conversations.create(persona.id, "Quiet")
    me.conversations.add_message(shielded.id, "user", "the picnic we keep private")
    me.conversations.set_shielded(shielded.id, True)
    Archive(hearth.store, me.user_id).add_text("Summer letters", "AUMA said:\nA picnic by the river.\n",
                                           document_date="2019-07-01")
    return visible, shielded


def test_v2_owner_search_includes_shielded_only_when_asked(me, seeded):
    default = me.search("picnic", embed=False)
    titles = {r.title for r in default.results}
    assert titles == {"Picnic", "Summer letters"}
    wider = me.search("picnic", include_shielded=True, embed=False)
    assert {r.title for r in wider.results} == {"Picnic", "Summer letters", "Quiet"}
    assert me.conversations.get(seeded[1].id).continuity_shielded  # the option releases nothing


def test_a3_g5_each_search_is_logged_with_everything_needed_to_judge_it(me, seeded):
    outcome = me.search("picnic blanket in July 2019", embed=False)
    entry = me.search_log_entry(outcome.log_id)
    assert entry.origin == "owner" and entry.query == "picnic blanket in July 2019"
    assert entry.variants and entry.variants[0].startswith("keywords:")
    assert entry.filters["sources"] == ["messages", "chunks"] and entry.filters["date_hint"] == ["2019-07-01", "2019-07-31"]
    assert entry.result_count == len(outcome.results) and entry.candidate_count >= entry.result_count
    for r in entry.results:
        assert {"kind", "id", "title", "date", "preview", "scores"} <= set(r)
        assert "fused" in r["scores"] and "keyword_rank" in r["scores"]
    assert entry.reliability in ("high", "medium", "low")


def test_a3_reliability_reads_gaps_and_agreement():
    assert searchlog.reliability([]) == "none"
    assert searchlog.reliability([1.0, 0.2, 0.2], agreement=0.6) == "high"
    assert searchlog.reliability([1.0, 0.95, 0.94, 0.93], agreement=0.0) == "low"
    assert searchlog.reliability([1.0, 0.5, 0.5]) == "medium"


def test_g2_a3_search_log_is_per_user(hearth, me, seeded):
    me.search("picnic", embed=False)
    other = hearth.scope(hearth.users.create("guest").id)
    assert other.search_log() == []
    with pytest.raises(NotFound, match="no search log entry"):
        other.search_log_entry(me.search_log()[0].id)


def test_a3_cli_search_and_search_log(hearth, me, seeded):
    home = str(hearth.settings.home)
    runner = CliRunner()
    found = runner.invoke(cli, ["--home", home, "search", "picnic", "--no-archive", "--json"])
    assert found.exit_code == 0, found.output
    data = json.loads(found.output)
    assert [r["title"] for r in data["results"]] == ["Picnic"]
    shielded = runner.invoke(cli, ["--home", home, "search", "picnic", "--include-shielded", "--no-archive", "--json"])
    assert {r["title"] for r in json.loads(shielded.output)["results"]} == {"Picnic", "Quiet"}
    log = runner.invoke(cli, ["--home", home, "search-log", "--json"])
    entries = json.loads(log.output)
    assert entries[0]["filters"]["include_shielded"] is True and entries[1]["origin"] == "owner"
    one = runner.invoke(cli, ["--home", home, "search-log", "--id", str(data["log_id"])])
    assert json.loads(one.output)["id"] == data["log_id"]


def test_a3_u3_api_search_search_log_and_import(hearth, me, seeded):
    app = create_app(hearth.settings, hearth)
    if not any(getattr(r, "path", "") == "/api/search" for r in app.routes):
        app.include_router(recall_routes.router)  # until the app factory includes it
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        response = client.get("/api/search", params={"q": "picnic", "archive": "false"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert [r["title"] for r in body["results"]] == ["Picnic"] and "fused" in body["results"][0]["scores"]
        log = client.get("/api/search-log").json()
        assert log[0]["id"] == body["log_id"] and log[0]["query"] == "picnic"
        assert client.get(f"/api/search-log/{body['log_id']}").json()["origin"] == "owner"
        assert client.get("/api/search-log/999999").status_code == 404
        assert client.get("/api/search", params={"q": "x", "date_from": "May 2020"}).status_code == 422
        imported = client.post("/api/archive/import", params={"format": "labelled", "name": "notes.txt"},
                               content="AUMA said:\nThe kite got stuck in the oak.\n".encode())
        assert imported.status_code == 201 and imported.json()["counts"]["documents"] == 1
        broken = client.post("/api/archive/import", params={"format": "chatgpt"}, content=b'[{"mapping": ')
        assert broken.status_code == 422
        assert len(client.get("/api/archive/documents").json()) == 2


def test_d2_a3_layers_read_one_snapshot_and_the_send_path_logs_their_searches(me, monkeypatch):
    """While the dynamic layers collect, nothing is written on their connection (no search-log row,
    no commit that would split the read snapshot); their searches are logged right after."""
    persona = me.personas.create("keeper", "Keeper", archive_access=True)
    old = me.conversations.create(persona.id, "Lighthouse")
    me.conversations.add_message(old.id, "user", "the lighthouse keeper painted the spiral stairs blue")
    me.archive.add_text("Letters", "AUMA said:\nThe lighthouse stairs were painted blue in 2019.\n",
                        document_date="2019-07-01")
    now = me.conversations.create(persona.id, "Today")
    me.send(now.id, "Good morning")
    denied: list[tuple] = []
    collect = me.dynamic.collect

    def read_only_collect(turn):
        if is_postgres(turn.conn):
            # The collecting transaction turns read-only: any write in it would fail the send.
            assert turn.conn.in_transaction
            turn.conn.execute("SET LOCAL transaction_read_only = on")
            return collect(turn)
        writes = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE, sqlite3.SQLITE_TRANSACTION)

        def authorizer(action, *args):
            # (SQLite itself checks sqlite_master while it builds the FTS vocabulary tables: not ours.)
            if action in writes and not (args[0] or "").startswith("sqlite_"):
                denied.append((action, *args))
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK

        turn.conn.set_authorizer(authorizer)
        try:
            return collect(turn)
        finally:
            turn.conn.set_authorizer(None)

    monkeypatch.setattr(me.dynamic, "collect", read_only_collect)
    before = {e.id for e in me.search_log(limit=500)}
    me.send(now.id, "Do you remember the lighthouse stairs we painted? When did we paint them blue?")
    assert denied == []
    logged = [e for e in me.search_log(limit=500) if e.id not in before]
    assert {"keyword_recall", "archive_recall"} <= {e.origin for e in logged}
    assert all(e.conversation_id == now.id for e in logged)


def _new_origins(me, before: set[int]) -> list[str]:
    return [e.origin for e in me.search_log(limit=500) if e.id not in before]


def test_a3_a_send_writes_nothing_between_the_save_and_the_provider_and_logs_with_the_reply(
        hearth, me, persona, provider, monkeypatch):
    old = me.conversations.create(persona.id, "Lighthouse")
    me.conversations.add_message(old.id, "user", "the lighthouse keeper painted the spiral stairs blue")
    now = me.conversations.create(persona.id, "Today")
    me.send(now.id, "Good morning")
    writes: list[str] = []
    begin = hearth.store._begin_write

    def counted_begin(conn, exclusive):
        writes.append("write")
        begin(conn, exclusive)

    at_request: list[int] = []

    def reply(request):
        at_request.append(len(writes))
        yield from ()

    monkeypatch.setattr(hearth.store, "_begin_write", counted_begin)
    provider.replies.append(reply)
    before = {e.id for e in me.search_log(limit=500)}
    for event in me.send_stream(now.id, "What did the lighthouse keeper paint?"):
        if event.type == "saved":
            writes.clear()  # the message and its prompt were saved: count from here
    assert at_request == [0]  # the search log and the size report wait for the reply's transaction
    assert writes == ["write"]  # and join it: one transaction after the provider, not two
    assert _new_origins(me, before) == ["keyword_recall"]
    with hearth.store.read() as conn:
        kinds = [r[0] for r in conn.execute(
            "SELECT kind FROM events WHERE conversation_id = ? ORDER BY id", (now.id,)).fetchall()]
    assert kinds.count("context.request_size") == 2
    # In the ledger the size report still comes before the reply it was measured for.
    assert kinds[-3:] == ["context.request_size", "message", "context.usage"]


def test_a3_the_search_log_is_written_when_the_provider_fails_or_the_stream_is_closed(me, persona, provider):
    old = me.conversations.create(persona.id, "Lighthouse")
    me.conversations.add_message(old.id, "user", "the lighthouse keeper painted the spiral stairs blue")
    now = me.conversations.create(persona.id, "Today")
    me.send(now.id, "Good morning")

    def failing(request):
        raise ProviderError("upstream timed out", "timeout", True)
        yield  # a generator, as a provider's stream is

    provider.replies.append(failing)
    before = {e.id for e in me.search_log(limit=500)}
    events = [e.type for e in me.send_stream(now.id, "What did the lighthouse keeper paint?")]
    assert events[-1] == "error"
    assert _new_origins(me, before) == ["keyword_recall"]

    before = {e.id for e in me.search_log(limit=500)}
    stream = me.send_stream(now.id, "What colour were the lighthouse stairs painted?")
    assert next(e for e in stream if e.type == "diagnostics")
    stream.close()  # the client went away before the reply
    assert _new_origins(me, before) == ["keyword_recall"]


def _rows(me) -> list[tuple[str, int, int]]:
    return [(e.origin, e.result_count, e.candidate_count) for e in me.search_log(limit=500)]


def test_a3_a_send_with_nothing_to_search_logs_no_search(hearth, me):
    """A first thread's sends: the recall layers have no other conversation and no archive to look
    in, so they run no search and the log stays empty; the API says the same."""
    persona = me.personas.create("keeper", "Keeper", archive_access=True)
    now = me.conversations.create(persona.id, "Today")
    for text in ("Good morning", "I baked bread with rosemary today",
                 "Do you remember the lighthouse stairs? When did we paint them?",
                 "Tell me about **markdown** and lists"):
        me.send(now.id, text)
    # Conversations recall may not search add nothing to search: shielded, trashed, another persona's, empty.
    shielded = me.conversations.create(persona.id, "Private")
    me.conversations.add_message(shielded.id, "user", "the rosemary bread we keep private")
    me.conversations.set_shielded(shielded.id, True)
    trashed = me.conversations.create(persona.id, "Old")
    me.conversations.add_message(trashed.id, "user", "rosemary bread in the bin")
    me.conversations.trash(trashed.id)
    other = me.conversations.create(me.personas.create("sage", "Sage").id, "Sage's")
    me.conversations.add_message(other.id, "user", "rosemary bread for Sage")
    me.conversations.create(persona.id, "Empty")
    me.send(now.id, "Do you remember the rosemary bread?")
    assert _rows(me) == []
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1:8765") as client:
        assert client.get("/api/search-log").json() == []


def test_a3_every_search_that_ran_is_logged_with_its_counts_even_when_it_found_nothing(hearth, me):
    persona = me.personas.create("keeper", "Keeper", archive_access=True)
    now = me.conversations.create(persona.id, "Today")
    me.send(now.id, "Good morning")
    older = me.conversations.create(persona.id, "Garden")
    me.conversations.add_message(older.id, "user", "we planted rosemary by the wall")
    me.send(now.id, "I baked bread with rosemary today")
    me.send(now.id, "The harbour ferry was late again")  # searched: nothing there matches
    assert _rows(me) == [("keyword_recall", 0, 0), ("keyword_recall", 1, 1)]
    # Archive recall searches the archive alone too: with a document there, a recall cue searches.
    me.conversations.trash(older.id)
    me.archive.add_text("Letters", "AUMA said:\nThe kite got stuck in the oak.\n", document_date="2019-07-01")
    me.send(now.id, "Do you remember the kite in the oak?")
    newest = me.search_log(limit=1)[0]
    assert newest.origin == "archive_recall" and newest.result_count >= 1
    assert newest.candidate_count >= newest.result_count and newest.conversation_id == now.id
    with TestClient(create_app(hearth.settings, hearth), base_url="http://127.0.0.1:8765") as client:
        logged = client.get("/api/search-log").json()
    assert [(e["origin"], e["result_count"], e["candidate_count"]) for e in logged[1:]] == [
        ("keyword_recall", 0, 0), ("keyword_recall", 1, 1)]
