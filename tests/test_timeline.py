"""The relationship timeline: activity spans (E1) and span-safe pages with a compound cursor (E8).

Real SQLite files; the send path runs with the scripted in-process provider; the API runs on a
real uvicorn server on a free port; the CLI through click's runner.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hearth import ConfigError, Hearth, InvalidInput, NotFound, Settings
from hearth.cli import cli
from hearth.continuity.timeline import spans
from hearth.errors import ConstraintError
from hearth.records import ledger
from hearth.server import create_app
from tests.test_server import serve_in_thread

IDLE = 30 * 60


def later(hearth: Hearth, seconds: float) -> None:
    """Move the clock idle checkpoints are judged by (events keep their real timestamps)."""
    base = hearth.clock()
    hearth.clock = lambda: base + seconds


def events_of(hearth, conversation_id):
    with hearth.store.read() as conn:
        return [e for e, _m in ledger.replay(conn, hearth.scope().user_id, conversation_id)]


# -- E1 --------------------------------------------------------------------------------------------
def test_e1_a_text_exchange_is_one_span_that_every_event_of_it_carries(me, hearth, persona):
    chat = me.conversations.create(persona.id, title="Morning")
    me.send(chat.id, "Good morning")
    me.send(chat.id, "How are you?")
    [span] = me.timeline.open_spans()
    assert span.kind == "text" and span.channel == "web" and span.open and span.persona_id == persona.id
    events = events_of(hearth, chat.id)
    kinds = [e.kind for e in events if e.span_id == span.id]
    assert kinds.count("message") == 4 and kinds.count("context.usage") == 2
    assert kinds.count("context.request_size") == 2 and kinds[0] == "span.opened"
    # A span is a container in the timeline, never a chat: no conversation was created for it.
    assert [c.id for c in me.conversations.list()] == [chat.id]


def test_e1_idle_gap_closes_the_span_and_the_next_message_opens_another_in_the_same_conversation(
        me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "First burst")
    [first] = me.timeline.open_spans()
    later(hearth, IDLE + 60)
    me.send(chat.id, "Back again after a while")
    [second] = me.timeline.open_spans()
    assert second.id != first.id
    assert me.timeline.span(first.id).close_reason == "idle"
    assert [c.id for c in me.conversations.list()] == [chat.id]  # no visible new-chat boundary
    with hearth.store.read() as conn:
        jobs = conn.execute("SELECT payload FROM jobs WHERE kind = 'timeline.checkpoint' ORDER BY id").fetchall()
    assert [json.loads(j[0])["span_id"] for j in jobs] == [first.id, second.id]


def test_e1_switching_to_a_voice_session_opens_its_own_span_and_one_span_stays_open(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Typed hello")
    me.send(chat.id, "Spoken hello", channel="voice")
    open_now = me.timeline.open_spans()
    assert [s.kind for s in open_now] == ["voice"]
    closed = [s for s in me.timeline.page().spans if not s.open]
    assert [(s.kind, s.close_reason) for s in closed] == [("text", "switched")]
    with pytest.raises(ConstraintError):
        with hearth.store.write() as conn:  # the partial unique index: one open span per companion
            conn.execute("INSERT INTO spans (user_id, persona_id, kind, channel, start_event_id, started_at,"
                         " last_at) VALUES (?, ?, 'text', 'web', 0, 'x', 'x')", (me.user_id, persona.id))


@pytest.mark.sqlite_only
def test_e1_sqlite_trace_span_bookkeeping_is_one_indexed_update_inside_the_message_transaction(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Opens the span")
    statements: list[str] = []
    conn = hearth.store.connection()
    conn.set_trace_callback(statements.append)
    try:
        me.send(chat.id, "Continues it")
    finally:
        conn.set_trace_callback(None)
    touching = [s for s in statements if s.lstrip().upper().startswith(("UPDATE SPANS", "INSERT INTO SPANS"))]
    # One indexed update with the person's message; one by primary key with the reply (E2: the reply
    # keeps its span open however long it streamed).
    assert len(touching) == 2 and all(s.lstrip().upper().startswith("UPDATE SPANS") for s in touching)
    assert "WHERE id = " in touching[1]
    # ... inside the same transaction as the user's message.
    begin = max(i for i, s in enumerate(statements[:statements.index(touching[0])]) if s.startswith("BEGIN"))
    commit = next(i for i, s in enumerate(statements) if i > begin and s.startswith("COMMIT"))
    assert any("INSERT INTO messages" in s for s in statements[begin:commit])
    plan = conn.execute("EXPLAIN QUERY PLAN UPDATE spans SET last_at = ? WHERE user_id = ?"
                        " AND persona_id IS NOT DISTINCT FROM ?"
                        " AND closed_at IS NULL AND kind = ? AND last_at >= ?", ("a", 1, 1, "text", "b")).fetchall()
    assert "spans_one_open" in " ".join(r[3] for r in plan)


def test_e1_an_import_is_its_own_span_closed_with_the_import_and_queues_no_checkpoint(me, hearth, persona):
    from tests import samples

    mira = me.personas.get(me.imports.file(samples.card_png(samples.card_v3(book=False)), "mira.png")
                           .ids["personas"][0])
    chat = me.conversations.create(mira.id)
    me.send(chat.id, "Typed before the import")
    [text_span] = me.timeline.open_spans()
    report = me.imports.file(samples.st_chat(), "Mira Vale - 2024-03-02.jsonl")
    imported = report.ids["conversations"][0]
    assert me.timeline.open_spans() == []  # the import's span opened and closed in its transaction
    assert me.timeline.span(text_span.id).close_reason == "switched"
    [span_id] = {e.span_id for e in events_of(hearth, imported) if e.kind == "message"}
    span = me.timeline.span(span_id)
    assert (span.kind, span.channel, span.persona_id, span.close_reason) == ("import", "import", mira.id, "imported")
    with hearth.store.read() as conn:
        checkpoints = [json.loads(j[0])["span_id"] for j in conn.execute(
            "SELECT payload FROM jobs WHERE kind = 'timeline.checkpoint'")]
    assert span_id not in checkpoints and text_span.id in checkpoints
    # A refused or duplicate import leaves no span behind.
    before = len(me.timeline.page().spans)
    assert me.imports.file(samples.st_chat(), "again.jsonl").status == "duplicate"
    assert me.imports.file(b"{broken", "chat.jsonl", fmt="st-chat").status == "refused"
    assert len(me.timeline.page().spans) == before


# -- E8 --------------------------------------------------------------------------------------------
def test_e8_first_page_holds_the_newest_events_across_conversations_with_channels(me, hearth, persona):
    a = me.conversations.create(persona.id, title="A")
    b = me.conversations.create(persona.id, title="B")
    me.send(a.id, "Hello from the web")
    me.send(b.id, "Hello from the terminal", channel="cli")
    page = me.timeline.page()
    keys = [(e.created_at, e.id) for e in page.events]
    assert keys == sorted(keys) and page.before is None
    texts = [(e.conversation_id, e.channel, e.message["content"]) for e in page.events
             if e.message and e.message["role"] == "user"]
    assert texts == [(a.id, "web", "Hello from the web"), (b.id, "cli", "Hello from the terminal")]
    # Stored prompts are events too, but their text never shows in the timeline.
    prompts = [e for e in page.events if e.message and e.message["kind"] == "static_prompt"]
    assert prompts and all("content" not in e.message for e in prompts)
    assert Settings.resolve({"home": str(hearth.settings.home)}, environ={}).timeline_history_event_limit == 500


def test_e8_a_page_expands_to_its_owning_span_start_so_no_span_is_split(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    for n in range(4):
        me.send(chat.id, f"Message {n}")  # one span: opened, 4 x (user, size, reply, usage), prompt
    later(hearth, IDLE + 1)
    me.send(chat.id, "A new burst")
    newest = me.timeline.page(limit=3)
    [span_id] = {e.span_id for e in newest.events if e.span_id is not None}
    assert newest.events[0].kind == "span.opened" and newest.expanded > 0
    older = me.timeline.page(newest.before, limit=3)
    first_span = list(older.spans)
    assert len(first_span) == 1 and first_span[0].id != span_id
    assert older.events[0].id == first_span[0].start_event_id  # grown back to the span's start
    assert sum(1 for e in older.events if e.kind == "message" and e.message["role"] == "user") == 4


def test_e8_malformed_unknown_and_foreign_cursors_are_clear_errors(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Mine")
    other = hearth.scope(hearth.users.create("guest").id)
    other_chat = other.conversations.create(other.personas.default().id)
    other.send(other_chat.id, "Theirs")
    theirs = other.timeline.page().events[-1]
    for bad in ("yesterday", "2026-12-01T00:00:00Z~5", "2026-12-01T00:00:00.000000Z~0", "~", "a" * 64):
        with pytest.raises(InvalidInput, match="malformed timeline cursor"):
            me.timeline.page(bad)
    with pytest.raises(NotFound) as foreign:
        me.timeline.page(f"{theirs.created_at}~{theirs.id}")
    with pytest.raises(NotFound) as unknown:
        me.timeline.page(f"{theirs.created_at}~999999")
    assert str(foreign.value) == str(unknown.value) == "unknown timeline cursor; reload the timeline"
    with pytest.raises(InvalidInput):
        me.timeline.page(limit=0)


def test_e8_api_walks_pages_and_answers_bad_cursors_with_4xx(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    for n in range(3):
        me.send(chat.id, f"Turn {n}")
    other = hearth.scope(hearth.users.create("guest").id)
    other.send(other.conversations.create(other.personas.default().id).id, "Not yours")
    theirs = other.timeline.page().events[-1]
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        first = httpx.get(f"{base}/api/timeline", params={"limit": 4}).json()
        assert first["has_older"] and first["events"][0]["kind"] == "span.opened"
        seen = [e["id"] for e in first["events"]]
        before = first["before"]
        while before:
            older = httpx.get(f"{base}/api/timeline", params={"before": before, "limit": 4})
            assert older.status_code == 200
            body = older.json()
            seen = [e["id"] for e in body["events"]] + seen
            before = body["before"]
        with hearth.store.read() as conn:
            mine = [r[0] for r in conn.execute("SELECT id FROM events WHERE user_id = ? ORDER BY created_at, id",
                                               (me.user_id,))]
        assert seen == mine
        bad = httpx.get(f"{base}/api/timeline", params={"before": "not-a-cursor"})
        assert bad.status_code == 422 and bad.json()["error"] == "invalid_input"
        foreign = httpx.get(f"{base}/api/timeline", params={"before": f"{theirs.created_at}~{theirs.id}"})
        unknown = httpx.get(f"{base}/api/timeline", params={"before": f"{theirs.created_at}~987654"})
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.json() == unknown.json()


def test_e8_cli_prints_spans_and_the_older_cursor_and_refuses_bad_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["chat", "-m", "Hello from the terminal"]).exit_code == 0
    assert runner.invoke(cli, ["chat", "-m", "And again"]).exit_code == 0
    full = runner.invoke(cli, ["timeline"])
    assert full.exit_code == 0
    # Any span id: on PostgreSQL a first send's rolled-back first attempt (U5) has used one up.
    assert re.search(r"^== span \d+ · text", full.output, re.M) and "[cli] user: Hello from the terminal" in full.output
    page = runner.invoke(cli, ["timeline", "--limit", "2", "--json"])
    assert page.exit_code == 0
    body = json.loads(page.output)
    assert body["events"][0]["kind"] == "span.opened" and body["expanded"] > 0  # grown to the span start
    older = runner.invoke(cli, ["timeline", "--before", body["before"]])
    assert older.exit_code == 0 and "conversation.created" in older.output
    bad = runner.invoke(cli, ["timeline", "--before", "garbage"])
    assert bad.exit_code == 2 and bad.output.startswith("Error: malformed timeline cursor")
    assert bad.output.strip().count("\n") == 0
    unknown = runner.invoke(cli, ["timeline", "--before", "2026-01-01T00:00:00.000000Z~424242"])
    assert unknown.exit_code == 1 and unknown.output.strip() == "Error: unknown timeline cursor; reload the timeline"


def test_e2_e3_e8_invalid_timeline_settings_are_a_clear_error(tmp_path):
    for env, name in (({"HEARTH_IDLE_CHECKPOINT_MINUTES": "0"}, "idle_checkpoint_minutes"),
                      ({"HEARTH_IDLE_CHECKPOINT_MINUTES": "soon"}, "idle_checkpoint_minutes"),
                      ({"HEARTH_CAPSULE_THRESHOLD": "1.5"}, "capsule_threshold"),
                      ({"HEARTH_CAPSULE_THRESHOLD": "nan"}, "capsule_threshold"),
                      ({"HEARTH_COMPACTION_THRESHOLD": "-0.1"}, "compaction_threshold"),
                      ({"HEARTH_CAPSULE_RECENT_TURNS": "0"}, "capsule_recent_turns")):
        with pytest.raises(ConfigError, match=name):
            Settings.resolve(environ={"HEARTH_HOME": str(tmp_path), **env})
    with pytest.raises(ConfigError, match="timeline_history_event_limit"):
        Settings.resolve({"home": str(tmp_path), "timeline_history_event_limit": 0}, environ={})
    ok = Settings.resolve(environ={"HEARTH_HOME": str(tmp_path), "HEARTH_IDLE_CHECKPOINT_MINUTES": "45",
                                   "HEARTH_CAPSULE_THRESHOLD": "0.7", "HEARTH_COMPACTION_THRESHOLD": "0.8"})
    assert (ok.idle_checkpoint_minutes, ok.capsule_threshold, ok.compaction_threshold) == (45.0, 0.7, 0.8)
    result = CliRunner().invoke(cli, ["timeline"], env={"HEARTH_HOME": str(tmp_path),
                                                        "HEARTH_CAPSULE_THRESHOLD": "2"})
    assert result.exit_code == 2 and result.output.startswith("Error: capsule_threshold")


# -- E8 property: older pages never shift, duplicate or skip under concurrent inserts --------------
STEP = st.one_of(
    st.tuples(st.just("event"), st.integers(0, 2), st.integers(0, 3), st.sampled_from([1, 5, 45])),
    st.tuples(st.just("older"), st.integers(1, 6), st.just(0), st.just(0)),
)


USER_NUMBERS = itertools.count(1)


@pytest.fixture(scope="module")
def property_hearth(tmp_path_factory):
    settings = Settings.resolve({"home": str(tmp_path_factory.mktemp("prop") / "home")}, environ={})
    h = Hearth(settings)
    yield h
    h.close()


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([1, 5, 45])),
                     min_size=1, max_size=25),
       steps=st.lists(STEP, min_size=1, max_size=40), first_limit=st.integers(1, 8))
def test_e8_older_pages_never_shift_duplicate_or_skip_under_concurrent_inserts(property_hearth, seed, steps,
                                                                               first_limit):
    hearth = property_hearth
    user = hearth.users.create(f"u{next(USER_NUMBERS)}")
    scope = hearth.scope(user.id)
    personas = [scope.personas.default().id, scope.personas.create("p1", "P1").id,
                scope.personas.create("p2", "P2").id]
    conversations = [scope.conversations.create(personas[i % 3]).id for i in range(3)]
    clock = {"t": datetime.now(timezone.utc)}  # after this user's set-up events, as in real life

    def insert(persona_index: int, kind: int, gap_minutes: int) -> None:
        clock["t"] += timedelta(minutes=gap_minutes)
        at = clock["t"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with hearth.store.write() as conn:
            conversation = conversations[persona_index]
            persona = personas[persona_index]
            if kind == 3:  # an event outside any span (a memory edit, say)
                ledger.append(conn, user_id=user.id, kind="memory.added", created_at=at)
                return
            cutoff = (clock["t"] - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            span_id = spans.touch(conn, user.id, persona, "voice" if kind == 2 else "web", now=at,
                                  idle_cutoff=cutoff, idle_seconds=1800, conversation_id=conversation)
            ledger.append_message(conn, user_id=user.id, conversation_id=conversation, role="user",
                                  content="x", created_at=at, span_id=span_id)

    for persona_index, kind, gap in seed:
        insert(persona_index, kind, gap)
    with hearth.store.read() as conn:
        existing = [r[0] for r in conn.execute("SELECT id FROM events WHERE user_id = ? ORDER BY created_at, id",
                                               (user.id,))]
    first = scope.timeline.page(limit=first_limit)
    loaded, limits = [first], [first_limit]
    for op, a, b, c in steps:
        if op == "event":
            insert(a, b, c)
        elif loaded[-1].before is not None:
            loaded.append(scope.timeline.page(loaded[-1].before, limit=a))
            limits.append(a)
    while loaded[-1].before is not None:
        loaded.append(scope.timeline.page(loaded[-1].before, limit=3))
        limits.append(3)
    walked = [e.id for p in reversed(loaded) for e in p.events]
    assert walked == existing  # nothing skipped, duplicated or shifted
    # The same cursor gives the same page after everything that was inserted meanwhile.
    for newer, older, limit in zip(loaded, loaded[1:], limits[1:]):
        again = scope.timeline.page(newer.before, limit=limit)
        assert [e.id for e in again.events] == [e.id for e in older.events]
    # No span is split: every span with an event on a page starts on that page (so none of its
    # events can be on an older one).
    with hearth.store.read() as conn:
        starts = dict(conn.execute("SELECT id, start_event_id FROM spans WHERE user_id = ?", (user.id,)).fetchall())
    for page in loaded:
        ids = {e.id for e in page.events}
        for span_id in {e.span_id for e in page.events if e.span_id is not None}:
            assert starts[span_id] in ids


def test_e1_other_live_activity_joins_spans_through_the_timeline(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Typed first")
    from hearth.store import utcnow

    with hearth.store.write() as conn:  # e.g. a voice transcript written by its own module
        now = utcnow()
        span_id = me.timeline._touch(conn, chat.id, "voice", now=now)
        me.conversations.add_message(chat.id, "user", "Said aloud", channel="voice", created_at=now,
                                     span_id=span_id)
    with hearth.store.write() as conn:
        again = me.timeline._touch(conn, chat.id, "voice", now=utcnow())
    assert again == span_id and me.timeline.span(span_id).kind == "voice"
    [open_span] = me.timeline.open_spans()
    assert open_span.id == span_id
