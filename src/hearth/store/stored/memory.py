"""Memory: durable memories with their versions (M2, B2), and the review queue's suggestions."""

from __future__ import annotations

import json

from ..engine import Connection
from .base import DERIVED, MEMORIES, Doomed, Entry, Kept, Plain, Step, Stored, ids, marks, quotes

AREA = "memory"
_KEPT = Kept("a memory outlives the conversation it came from: forget the memory itself")
# Deleting a memory rebuilds every stored prompt holding it and writes its own ledger event: the
# caller supplies it (memory/memories.py); its versions go by cascade, suggestions naming it with it.
_VALID = Plain("when it was true: timestamps (B1)", "valid_from", "valid_until")
_MEMORIES = Step(MEMORIES, "delete", hook="memories", count="prompts_rebuilt")


def _proposals(conn: Connection, d: Doomed) -> int:
    """Suggestions from a forgotten thread, quoting a forgotten message in their evidence or
    payload, or made inside a forgotten date range."""
    u = d.user_id
    doomed = set(d.proposals)
    if d.conversations:
        doomed.update(ids(conn.execute(
            f"SELECT id FROM proposals WHERE user_id = ? AND conversation_id IN ({marks(d.conversations)})",
            (u, *d.conversations))))
    if d.texts:
        for row in conn.execute(
                f"SELECT id, evidence, payload FROM proposals WHERE user_id = ?"
                f" AND (conversation_id IN ({marks(d.touched)}) OR conversation_id IS NULL)", (u, *d.touched)):
            if (row[1] and quotes(row[1], d.texts)) or any(
                    isinstance(v, str) and v and quotes(v, d.texts) for v in json.loads(row[2]).values()):
                doomed.add(row[0])
    found = sorted(doomed)
    for i in range(0, len(found), 500):
        part = found[i:i + 500]
        conn.execute(f"DELETE FROM proposals WHERE user_id = ? AND id IN ({marks(part)})", (u, *part))
    return len(found)


_PROPOSALS = Step(DERIVED, "delete", _proposals, count="suggestions")

STORED: list[Entry] = [
    Stored("memories", AREA, ("text", "category"), plain=(_VALID,), on_conversation=_KEPT, on_message=_KEPT, also=(_MEMORIES,)),
    Stored("memory_versions", AREA, ("text", "category"),
           plain=(Plain("the kind of change and who made it", "change", "actor"), _VALID),
           on_conversation=_KEPT, on_message=_KEPT, also=(_MEMORIES,)),
    Stored("proposals", AREA, ("payload", "reason", "evidence"), conversation="conversation_id",
           plain=(Plain("enumerations, a content hash and who decided", "kind", "source", "content_hash", "status",
                        "decided_by"),),
           on_conversation=_PROPOSALS, on_message=_PROPOSALS, also=(_MEMORIES,)),
]
