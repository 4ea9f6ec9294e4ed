"""Prompt layers: rolling summaries, live context, nudges (thread-local continuity), household
status, lorebook fragments and books, prompt presets, the layers' settings."""

from __future__ import annotations

from ..engine import Connection
from .base import DERIVED, Cascade, Doomed, Entry, Exempt, Kept, Plain, Step, Stored

AREA = "prompt"
_SOURCE = Plain("who wrote it: offline, model or manual", "source")
_OWN = "the person's own lore and settings, not a trace of a conversation: they go with the account"


# Thread-local continuity built from forgotten turns in threads that stay: dropped (or blanked) now,
# rebuilt from what remains by the durable jobs the forget queues.
def _summaries(conn: Connection, d: Doomed) -> int:
    return sum(conn.execute("DELETE FROM thread_summaries WHERE conversation_id = ? AND through_message_id >= ?",
                            (c, first)).rowcount for c, first in d.first.items())


def _live_context(conn: Connection, d: Doomed) -> int:
    # The row stays (one per thread, refreshed in place); its text goes.
    return sum(conn.execute(
        "UPDATE live_context SET mood = '', events = '', needs = '', summary = '', through_message_id = 0"
        " WHERE conversation_id = ? AND through_message_id >= ?", (c, first)).rowcount for c, first in d.first.items())


def _nudges(conn: Connection, d: Doomed) -> int:
    return sum(conn.execute("DELETE FROM nudges WHERE conversation_id = ?", (c,)).rowcount for c in d.first)


STORED: list[Entry] = [
    Stored("thread_summaries", AREA, ("text",), conversation="conversation_id", plain=(_SOURCE,),
           on_conversation=Cascade("conversations"),
           on_message=Step(DERIVED, "delete", _summaries, count="summaries_and_context")),
    Stored("live_context", AREA, ("mood", "events", "needs", "summary"), conversation="conversation_id",
           plain=(_SOURCE,), on_conversation=Cascade("conversations"),
           on_message=Step(DERIVED, "blank", _live_context, count="summaries_and_context")),
    Stored("nudges", AREA, ("text",), conversation="conversation_id",
           plain=(Plain("a random marker and a status", "marker", "status"), _SOURCE),
           on_conversation=Cascade("conversations"),
           on_message=Step(DERIVED, "delete", _nudges, count="summaries_and_context")),
    Exempt("layer_settings", AREA, (Plain("a setting's name and its number or switch", "key", "value"),)),
    Exempt("layer_cursors", AREA, (Plain("a layer's name", "layer"),)),
    Stored("prompt_presets", AREA, ("name", "text"), on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("status_fields", AREA, ("name", "options", "aliases"), on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("status_values", AREA, ("value",), plain=(Plain("who set it: manual, approved or auto", "source"),
                  Plain("when it was true: timestamps (B1)", "valid_from", "valid_to")),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("fragments", AREA, ("category", "triggers", "definition", "all_of", "any_of", "none_of", "controls"),
           plain=(Plain("the key of the card or lorebook entry it was imported from", "import_key"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("fragment_books", AREA, ("name",), plain=(Plain("a scope: all, character or personas", "scope"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
]
