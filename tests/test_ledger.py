"""The durable event ledger (S2)."""

from __future__ import annotations

import pytest

from hearth.errors import ConstraintError
from hearth.records import ledger
from tests.engines import foreign_keys_off


def test_s2_message_and_its_event_are_one_row_pair(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    message = me.conversations.add_message(conversation.id, "user", "hello", channel="sms")
    conn = hearth.store.connection()
    event = conn.execute("SELECT * FROM events WHERE id = ?", (message.id,)).fetchone()
    assert event["kind"] == "message" and event["channel"] == "sms"
    assert event["conversation_id"] == conversation.id and event["user_id"] == me.user_id
    # Event payloads carry numbers and kinds, never the text.
    assert "hello" not in event["payload"]


def test_s2_events_are_append_only(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    message = me.conversations.add_message(conversation.id, "user", "hello")
    with pytest.raises(ConstraintError, match="append-only"):
        with hearth.store.write() as conn:
            conn.execute("UPDATE events SET kind = 'forged' WHERE id = ?", (message.id,))


def test_s2_a_crash_between_event_and_message_leaves_neither(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    before = hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0]
    with pytest.raises(ConstraintError):
        with hearth.store.write() as conn:
            # The event goes in, then the message insert fails on its role check.
            ledger.append_message(conn, user_id=me.user_id, conversation_id=conversation.id,
                                  role="user", content="x", kind="chat")
            conn.execute("INSERT INTO messages (id, user_id, conversation_id, role, content, created_at)"
                         " VALUES (-1, ?, ?, 'narrator', 'y', 'now')", (me.user_id, conversation.id))
    after = hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0]
    assert after == before
    assert ledger.verify(hearth.store.connection()).ok


def test_s2_replay_returns_the_conversation_in_ledger_order(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    ids = [me.conversations.add_message(conversation.id, role, text).id
           for role, text in [("user", "one"), ("assistant", "two"), ("user", "three")]]
    me.conversations.end(conversation.id)
    replayed = ledger.replay(hearth.store.connection(), me.user_id, conversation.id)
    kinds = [e.kind for e, _ in replayed]
    assert kinds == ["conversation.created", "message", "message", "message", "conversation.ended"]
    assert [m.content for _, m in replayed if m] == ["one", "two", "three"]
    assert [m.id for _, m in replayed if m] == ids
    stamps = [(e.created_at, e.id) for e, _ in replayed]
    assert stamps == sorted(stamps)


def test_s2_replay_is_scoped_to_the_user(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "private")
    other = hearth.users.create("guest")
    assert ledger.replay(hearth.store.connection(), other.id, conversation.id) == []


def test_s2_verify_reports_a_message_row_without_its_event(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "hello")
    conn = hearth.store.connection()
    assert ledger.verify(conn).ok
    with foreign_keys_off(hearth.store):
        conn.execute("INSERT INTO messages (id, user_id, conversation_id, role, content, created_at)"
                     " VALUES (999999, ?, ?, 'user', 'orphan', '2026-01-01T00:00:00.000000Z')",
                     (me.user_id, conversation.id))
    report = ledger.verify(conn)
    assert not report.ok
    assert any("foreign key" in p for p in report.problems)
    assert all("orphan" not in p for p in report.problems)  # problems never quote content


def test_s2_verify_reports_an_event_without_its_message(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    with hearth.store.write() as conn:
        ledger.append(conn, user_id=me.user_id, conversation_id=conversation.id, kind="message",
                      payload={"role": "user", "kind": "chat", "chars": 3})
    report = ledger.verify(hearth.store.connection())
    assert any("without a message row" in p for p in report.problems)


def test_s2_unknown_channel_is_refused_and_nothing_is_written(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    before = hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0]
    with pytest.raises(Exception, match="unknown channel"):
        me.conversations.add_message(conversation.id, "user", "hi", channel="carrier-pigeon")
    assert hearth.store.connection().execute("SELECT count(*) FROM events").fetchone()[0] == before
