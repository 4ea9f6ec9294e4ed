"""Continuity: handoff records (H1), branch requests, continuity capsules (E3), activity spans."""

from __future__ import annotations

from ..engine import Connection
from .base import DERIVED, DOCUMENTS, Cascade, Doomed, Entry, Exempt, Plain, Step, Stored, marks

AREA = "continuity"

# Rendering a handoff again from the turns that remain needs the handoff renderer and the
# deployment's limits: the caller supplies it (continuity/branch.py), rows it rewrites are blanked
# where nothing remains. It runs while the forgotten turns can still be read.
_HANDOFFS = Step(DERIVED, "rewrite", hook="handoffs", count="handoffs_rewritten")


def _document_handoffs(conn: Connection, d: Doomed) -> int:
    """Chats that continued a forgotten archive document lose the handoff quoting its turns: the
    record is emptied (it stays: the thread's ledger points at it) and the visible bubble removed
    (its event, so the message goes by cascade)."""
    if not d.documents:
        return 0
    rows = conn.execute(
        f"SELECT id, conversation_id FROM conversation_summaries WHERE user_id = ?"
        f" AND source_document_id IN ({marks(d.documents)})", (d.user_id, *d.documents)).fetchall()
    for row in rows:
        conn.execute("UPDATE conversation_summaries SET source_message_ids = '[]', handoff = '', summary = '',"
                     " recent_raw = '', source_document_id = NULL WHERE id = ?", (row["id"],))
        conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM messages WHERE conversation_id = ?"
                     " AND kind = 'handoff_artifact')", (row["conversation_id"],))
    d.rebuild |= {row["conversation_id"] for row in rows}
    return len(rows)


def _capsules(conn: Connection, d: Doomed) -> int:
    """Continuity capsules written from forgotten turns (E3): the capsule goes with its ledger event."""
    return sum(conn.execute(
        "DELETE FROM events WHERE id IN (SELECT id FROM capsules WHERE conversation_id = ?"
        " AND through_message_id >= ?)", (c, first)).rowcount for c, first in d.first.items())


STORED: list[Entry] = [
    Stored("conversation_summaries", AREA, ("handoff", "summary", "recent_raw"), conversation="conversation_id",
           plain=(Plain("the ids of the turns a handoff quotes", "source_message_ids"),),
           on_conversation=(_HANDOFFS, Cascade("conversations")), on_message=_HANDOFFS,
           also=(Step(DOCUMENTS, "blank", _document_handoffs, count="handoffs_rewritten"),)),
    Exempt("branch_requests", AREA, (Plain("a client's retry key", "retry_key"),)),
    Stored("capsules", AREA, ("text",), conversation="conversation_id",
           plain=(Plain("who wrote it: offline or model", "source"),),
           on_conversation=Cascade("conversations"),
           on_message=Step(DERIVED, "delete", _capsules, count="summaries_and_context")),
    Exempt("spans", AREA, (Plain("a span's kind, channel and why it closed", "kind", "channel", "close_reason"),)),
]
