"""``ledger.verify`` (``hearth doctor``) reads one snapshot and scales linearly (S2, U3)."""

from __future__ import annotations

import json
import sqlite3

from hearth.ledger import verify


def test_s2_verify_counts_come_from_one_snapshot_while_a_writer_commits(hearth, me, persona):
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


def test_s2_deleted_messages_are_not_reported_and_a_missing_row_is(hearth, me, persona):
    conversation = me.conversations.create(persona.id)
    me.conversations.add_message(conversation.id, "user", "kept")
    gone = me.conversations.add_message(conversation.id, "user", "gone")
    lost = me.conversations.add_message(conversation.id, "user", "lost")
    with me.store.write() as conn:
        conn.execute("INSERT INTO events (user_id, conversation_id, kind, created_at, payload)"
                     " VALUES (?, ?, 'message.deleted', '2026-01-01T00:00:00Z', ?)",
                     (me.user_id, conversation.id, json.dumps({"message_id": gone.id})))
        conn.execute("DELETE FROM messages WHERE id IN (?, ?)", (gone.id, lost.id))
    report = verify(hearth.store.connection())
    assert report.problems == [f"message events without a message row: ids {[lost.id]}"]
