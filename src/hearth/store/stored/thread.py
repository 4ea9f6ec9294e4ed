"""Thread: a turn's other versions, turns put away after an edit (W2), Responses API chains."""

from __future__ import annotations

from ..engine import Connection
from .base import DERIVED, TURNS, Cascade, Doomed, Entry, Plain, Step, Stored, marks

AREA = "thread"


def _branches(conn: Connection, d: Doomed) -> int:
    """The branches kept after a forgotten message's versions, and after its put-away turns'."""
    u = d.user_id
    if d.stashed:
        conn.execute(f"DELETE FROM message_branches WHERE user_id = ? AND message_id IN ({marks(d.stashed)})",
                     (u, *d.stashed))
    if d.messages:
        conn.execute(f"DELETE FROM message_branches WHERE user_id = ? AND message_id IN ({marks(d.messages)})",
                     (u, *d.messages))
    return 0


def _chains(conn: Connection, d: Doomed) -> int:
    """A Responses API chain (E7) or a compaction's replacement input may carry the turn: start over."""
    return sum(conn.execute("DELETE FROM response_chains WHERE conversation_id = ?", (c,)).rowcount
               for c in d.first)


STORED: list[Entry] = [
    Stored("message_alternatives", AREA, ("content", "metadata"), message="message_id",
           on_conversation=Cascade("messages"), on_message=Cascade("messages")),
    # Put-away turns are ledger events of their own: their events go (rows by cascade), then the
    # branches that held them; a whole thread's go with it.
    Stored("branch_messages", AREA, ("content", "metadata", "alternatives"), conversation="conversation_id",
           message="id", plain=(Plain("enumerations: role, kind, channel", "role", "kind", "channel"),),
           on_conversation=Cascade("conversations"),
           on_message=(Cascade("events"), Cascade("message_branches"), Step(TURNS, "delete", _branches))),
    Stored("response_chains", AREA, ("replacement_input",), conversation="conversation_id",
           plain=(Plain("the provider's response id and a model's name", "response_id", "model"),),
           on_conversation=Cascade("conversations"),
           on_message=Step(DERIVED, "delete", _chains, count="summaries_and_context")),
]
