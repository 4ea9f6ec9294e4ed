"""Delete forever by registry (S14): every text or blob column of the live schema, on either engine,
is covered by a registered purge or listed as plain with a reason, and forgetting leaves a marker
in none of them."""

from __future__ import annotations

import pytest

from hearth.memory.helpers import OfflineHelper
from hearth.records.forget import compact
from hearth.store import is_postgres
from hearth.store.stored import (
    REGISTRY,
    Cascade,
    Compaction,
    Exempt,
    Itself,
    Kept,
    Plain,
    Registry,
    Stored,
    Trigger,
    content_columns,
)
from hearth.store.stored.base import all_columns
from tests.test_attachments import PNG, image
from tests.test_forget import CANARY, drain, forget, spread_canary


def holding(conn, marker: str) -> list[str]:
    """Every ``table.column`` among the live schema's text and blob columns that holds ``marker``
    (any letter case in text, its UTF-8 bytes in a blob)."""
    found = []
    postgres = is_postgres(conn)
    for table, columns in sorted(content_columns(conn).items()):
        for column in columns:
            if postgres:
                kind = conn.execute("SELECT data_type FROM information_schema.columns WHERE table_schema ="
                                    " current_schema() AND table_name = ? AND column_name = ?",
                                    (table, column)).fetchone()[0]
                test = (f'position(convert_to(?, \'UTF8\') in "{column}") > 0' if kind == "bytea"
                        else f'lower(CAST("{column}" AS TEXT)) LIKE ?')
                value = marker if kind == "bytea" else f"%{marker.lower()}%"
            else:
                test = f'(instr(CAST("{column}" AS BLOB), CAST(? AS BLOB)) > 0 OR instr(lower("{column}"), ?) > 0)'
                value = None
            params = (value,) if postgres else (marker, marker.lower())
            if conn.execute(f'SELECT 1 FROM "{table}" WHERE {test} LIMIT 1', params).fetchone():
                found.append(f"{table}.{column}")
    return found


def found_after(conn, by: str, ident: int) -> list[str]:
    """Tables whose entry says their rows of this user, conversation or message go, where the
    registry's own lookup (``Stored.found``) still finds some."""
    engine = "postgresql" if is_postgres(conn) else "sqlite"
    left = []
    for entry in REGISTRY.stored():
        purge = {"user": entry.on_user, "conversation": entry.on_conversation, "message": entry.on_message}[by]
        sql = entry.found(by)
        if entry.engine in (None, engine) and sql and not isinstance(purge, Kept):
            if conn.execute(sql, (ident,)).fetchone()[0]:
                left.append(entry.table)
    return left


def test_s14_every_text_or_blob_column_of_the_live_schema_has_a_registered_purge(hearth):
    conn = hearth.store.connection()
    live = content_columns(conn)
    # The check reads the real schema: the columns that matter most are among those it sees.
    assert {"content", "metadata"} <= set(live["messages"]) and "data" in live["message_attachments"]
    assert "embedding" in live["message_embeddings"] and "payload" in live["proposals"]
    if is_postgres(conn):
        assert "lexeme" in live["messages_postings"] and "messages_fts" not in live
    else:
        assert "content" in live["messages_fts"] and "messages_fts_data" not in live  # FTS5 shadow tables skipped
    assert REGISTRY.problems(conn) == []


def test_s14_every_registered_purge_says_how_and_every_kept_or_plain_column_why():
    for entry in REGISTRY.entries:
        assert all(p.reason.strip() and p.columns for p in entry.plain), entry.table
        if isinstance(entry, Stored):
            for purge in (entry.on_user, entry.on_conversation, entry.on_message):
                assert not isinstance(purge, Kept) or len(purge.reason) > 20, entry.table
            # Forgetting the account takes every row: nothing is kept from the user.
            assert isinstance(entry.on_user, (Cascade, Trigger, Compaction, Itself)), entry.table
    assert REGISTRY.hooks() == {"handoffs", "memories", "prompts"}


def test_s14_the_walk_refuses_to_start_without_a_hook_and_removes_nothing(hearth, me, persona):
    from hearth.errors import StoreError
    from hearth.store.stored import Doomed

    chat = me.conversations.create(persona.id, "Kept")
    me.send(chat.id, f"hello {MARK}")
    with pytest.raises(StoreError, match="hooks handoffs, memories, prompts"), hearth.store.write() as conn:
        REGISTRY.walk(conn, Doomed(me.user_id, conversations=[chat.id]), {})
    assert len(me.conversations.messages(chat.id)) == 2


def _blob(conn) -> str:
    return "BYTEA" if is_postgres(conn) else "BLOB"


def test_s14_a_new_table_or_column_holding_text_fails_the_check_until_registered(hearth):
    """The checker, not only today's schema: a table added with a text column, a blob and a JSON
    column is found at once; a new column on a registered table too; numbers and timestamps are not."""
    conn = hearth.store.connection()
    try:
        json_type = "JSONB" if is_postgres(conn) else "JSON"
        with hearth.store.write() as c:
            c.execute(f"CREATE TABLE s14_notes (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT,"
                      f" picture {_blob(c)}, extra {json_type}, stars INTEGER, written_at TEXT)")
            c.execute("ALTER TABLE memories ADD COLUMN s14_secret TEXT")
        problems = REGISTRY.problems(conn)
        assert sorted(p.split(":")[0] for p in problems) == [
            "memories.s14_secret", "s14_notes.body", "s14_notes.extra", "s14_notes.picture"], problems

        # Registered, it passes only if what the entry counts on is really there: a cascade from users.
        notes = Stored("s14_notes", "test", ("body", "picture"), plain=(Plain("a rating's label", "extra"),),
                       on_conversation=Kept("notes are the person's own, not a trace of a conversation"),
                       on_message=Kept("notes are the person's own, not a trace of a conversation"))
        memories = next(e for e in REGISTRY.entries if e.table == "memories")
        assert isinstance(memories, Stored)
        widened = Stored(**{**memories.__dict__, "content": (*memories.content, "s14_secret")})
        registry = Registry([e for e in REGISTRY.entries if e.table != "memories"] + [widened, notes])
        assert registry.problems(conn) == ["s14_notes: goes with a user by cascade from users, which the schema lacks"]
        with hearth.store.write() as c:
            c.execute("DROP TABLE s14_notes")
            c.execute(f"CREATE TABLE s14_notes (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id)"
                      f" ON DELETE CASCADE, body TEXT, picture {_blob(c)}, extra {json_type}, stars INTEGER,"
                      f" written_at TEXT)")
        assert registry.problems(conn) == []
        # An entry naming a column the schema lacks, or a trigger it does not have, is a problem too.
        stale = Registry([*registry.entries[:-1], Stored(
            "s14_notes", "test", ("body", "picture", "gone"), plain=(Plain("a rating's label", "extra"),),
            on_conversation=Trigger("messages"), on_message=Kept("notes are the person's own, not a trace"))])
        assert sorted(stale.problems(conn)) == [
            "s14_notes.gone: registered but not in the schema",
            "s14_notes: goes with a conversation by a trigger on messages that the schema lacks"]
        exempt = Registry([*registry.entries[:-1], Exempt("s14_notes", "test", (Plain("", "body", "picture", "extra"),))])
        assert exempt.problems(conn) == ["s14_notes: a plain column without a reason"]
    finally:  # PostgreSQL's test database is shared by the session: leave its schema as it was
        with hearth.store.write() as c:
            c.execute("DROP TABLE IF EXISTS s14_notes")
            if "s14_secret" in all_columns(c, "memories"):
                c.execute("ALTER TABLE memories DROP COLUMN s14_secret")


MARK = "s14marigoldquill"


def _spread(me, hearth, persona, marker: str):
    """A thread where ``marker`` travels: a turn with a text file and a picture, its reply, the
    search log, a rolling summary, live context, a suggestion, a capsule, facts and a branch."""
    chat = me.conversations.create(persona.id, "Plans")
    me.send(chat.id, "The weather is mild today and the garden needs water")
    secret = me.send(chat.id, f"Between us, the locker word is {marker}",
                     attached=[{"name": "notes.txt", "media_type": "text/plain", "text": f"note {marker}"},
                               image(PNG + marker.encode())])
    me.send(chat.id, "Anyway, what should we cook tonight?")
    me.search(marker, embed=False)
    me.layers.summaries.refresh(chat.id, OfflineHelper(), force=True)
    me.layers.live_context.refresh(chat.id, OfflineHelper())
    me.layers.review.propose("memory_add", {"text": f"The locker word is {marker}"}, "It was said",
                             evidence=f"the locker word is {marker}", conversation_id=chat.id)
    me.timeline.refresh_capsule(chat.id)
    branched = me.branch(chat.id, "retry-key-s14-0001")
    drain(hearth)
    return chat, secret, branched.conversation


def test_s14_forgetting_a_message_leaves_its_marker_in_no_column(hearth, me, persona):
    chat, secret, branch = _spread(me, hearth, persona, MARK)
    conn = hearth.store.connection()
    before = set(holding(conn, MARK))
    assert {"messages.content", "message_attachments.text", "message_attachments.data", "search_log.query",
            "proposals.evidence", "conversation_summaries.handoff"} <= before, before
    message_id = secret.user_message.id
    assert {"events", "messages", "message_attachments"} <= set(found_after(conn, "message", message_id))
    forget(me, "message", message_id)
    drain(hearth)  # rebuilds from what remains, then the compaction
    assert holding(conn, MARK) == []
    assert found_after(conn, "message", message_id) == []
    assert len(me.conversations.messages(chat.id)) == 5 and me.conversations.get(branch.id)


def test_s14_forgetting_a_conversation_leaves_its_marker_in_no_column(hearth, me, persona):
    source, branch = spread_canary(me, hearth, persona)
    chat, _secret, _branch = _spread(me, hearth, persona, CANARY)
    drain(hearth)
    conn = hearth.store.connection()
    assert len(holding(conn, CANARY)) >= 8
    assert {"conversations", "messages", "search_log", "proposals"} <= set(found_after(conn, "conversation", chat.id))
    forget(me, "conversation", source.id)
    forget(me, "conversation", chat.id)
    drain(hearth)
    assert holding(conn, CANARY) == []
    assert found_after(conn, "conversation", source.id) == found_after(conn, "conversation", chat.id) == []
    assert me.conversations.get(branch.id)  # the branch stays, without the quoted turns


def test_s14_removing_an_account_leaves_its_marker_in_no_column_and_anothers_stays(hearth, me, persona):
    """Every entry says its rows go with their user (cascade or trigger): removing the account row
    takes them all, and another user's rows stay."""
    other_mark = "s14othertanager"
    bob = hearth.scope(hearth.users.create("bob").id)
    bob_persona = bob.personas.create("kai", "Kai")
    _spread(bob, hearth, bob_persona, other_mark)
    own = me.personas.create(f"{MARK}-p", "Marker", identity=f"Speaks of {MARK}")
    _spread(me, hearth, own, MARK)
    me.memories.add(f"Keeps the {MARK} stone by the door")
    me.layers.fragments.add([MARK], f"The {MARK} is a small bird")
    me.presets.create(f"{MARK} preset", f"Mention the {MARK}.")
    me.archive.add_text("Notes", f"AUMA said: the {MARK} sings at dawn\n")
    me.folders.create(f"{MARK} folder")
    conn = hearth.store.connection()
    assert len(holding(conn, MARK)) >= 15
    assert len(found_after(conn, "user", me.user_id)) >= 20
    with hearth.store.write() as c:
        c.execute("DELETE FROM users WHERE id = ?", (me.user_id,))
    compact(hearth.store)  # the keyword vocabulary is pruned by compaction, as after a forget
    assert holding(conn, MARK) == []
    assert found_after(conn, "user", me.user_id) == []
    assert len(found_after(conn, "user", bob.user_id)) >= 12  # his rows stay
    kept = set(holding(conn, other_mark))
    assert {"messages.content", "message_attachments.data", "search_log.query"} <= kept, kept


@pytest.mark.parametrize("target", ["message", "conversation"])
def test_s14_forget_runs_in_one_transaction_and_a_failing_step_removes_nothing(hearth, me, persona, target):
    """A step that fails part way leaves every row in place: the walk shares the caller's transaction."""
    from tests.engines import failing_inserts

    chat, secret, _branch = _spread(me, hearth, persona, MARK)
    conn = hearth.store.connection()
    before = sorted(holding(conn, MARK))
    ident = secret.user_message.id if target == "message" else chat.id
    preview = me.forget.preview(target, ident)
    from hearth.records.forget import CONFIRMATION_PHRASE

    with failing_inserts(hearth.store, "jobs", "s14 refuses"), pytest.raises(Exception, match="s14 refuses"):
        me.forget.apply(target, ident, token=preview.token, phrase=CONFIRMATION_PHRASE)
    assert sorted(holding(conn, MARK)) == before
