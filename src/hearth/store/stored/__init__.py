"""What each area stores per user and per message, and how Delete forever removes it (B4, S14).

Every table that can hold text or bytes has one entry here, grouped by the area that owns it
(``records.py``, ``thread.py``, ``continuity.py``, ``prompt.py``, ``memory.py``, ``retrieval.py``,
``outreach.py``, ``interop.py``, ``ops.py``): its content columns and how their rows go when their
user, a conversation or a single message is forgotten, or its plain columns with the reason they
hold no one's content (``base.py`` describes the parts). ``records/forget.py`` resolves what a
target covers and walks ``REGISTRY``; ``tests/test_stored.py`` fails when the live schema, on
either engine, has a text or blob column no entry covers.

The entries live in ``store/`` rather than beside each area's code so that the registry imports
nothing above the store: every area imports the store, so registrations made from the areas would
be complete only once every area module had been imported, and one not yet imported would be
silently missing, the very gap this registry closes. Each area's file holds only that area's
entries and statements, ready to move into its query module (``store/queries/<area>.py``).

A new table with a text or blob column: add its entry to its area's file (content columns with a
purge for the user, a conversation and a message; plain columns with a reason) and list the area
here if it is new.
"""

from __future__ import annotations

from . import continuity, interop, memory, ops, outreach, prompt, records, retrieval, thread
from .base import (
                   DERIVED,
                   DOCUMENTS,
                   FIND,
                   MEMORIES,
                   PROMPTS,
                   THREADS,
                   TURNS,
                   Cascade,
                   Compaction,
                   Doomed,
                   Exempt,
                   Itself,
                   Kept,
                   Plain,
                   Registry,
                   Run,
                   Step,
                   Stored,
                   Trigger,
                   content_columns,
)

# Walk order: continuity first (its handoff rewrite reads turns still there), ops last.
REGISTRY = Registry([*continuity.STORED, *records.STORED, *thread.STORED, *retrieval.STORED, *memory.STORED,
                     *prompt.STORED, *outreach.STORED, *interop.STORED, *ops.STORED])

__all__ = ["REGISTRY", "Registry", "Stored", "Exempt", "Plain", "Step", "Cascade", "Trigger", "Compaction", "Itself",
           "Kept", "Doomed", "Run", "content_columns", "FIND", "DERIVED", "TURNS", "THREADS", "DOCUMENTS",
           "MEMORIES", "PROMPTS"]
