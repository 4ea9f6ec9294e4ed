"""Where a conversation's handoff came from, as ``conversation_summaries`` records it."""

from __future__ import annotations

import json
from typing import Any

from hearth.store.engine import Connection


def of_conversation(conn: Connection, user_id: int, conversation_id: int) -> dict[str, Any] | None:
    """The source conversation, message ids and document of a conversation's handoff, or None."""
    row = conn.execute(
        "SELECT source_conversation_id, source_message_ids, source_document_id FROM conversation_summaries"
        " WHERE conversation_id = ? AND user_id = ? AND handoff != ''", (conversation_id, user_id),
    ).fetchone()
    if row is None:
        return None
    # An imported archive conversation's continuation names the document; its ids are turns.
    return {"source_conversation_id": row[0], "source_message_ids": json.loads(row[1]),
            "source_document_id": row[2]}


def holders(conn: Connection, user_id: int, source_ids: list[int]) -> list[int]:
    """The conversations whose handoff came from any of these."""
    return [r[0] for r in conn.execute(
        f"SELECT conversation_id FROM conversation_summaries WHERE user_id = ?"
        f" AND source_conversation_id IN ({','.join('?' * len(source_ids))})", (user_id, *source_ids))]
