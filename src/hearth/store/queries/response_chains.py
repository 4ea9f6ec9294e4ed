"""The Responses API working chain of a conversation (E7): ``response_chains`` rows and what a
compaction sends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store.engine import Connection


@dataclass(frozen=True)
class Chain:
    response_id: str | None
    replacement_input: tuple[dict[str, Any], ...]
    compacted_at: str | None
    model: str | None = None  # whose responses it continues; None: a chain from before models were kept

    def continues(self, model: str, chosen: str | None) -> bool:
        """Whether a request for ``model`` may continue this chain: a response id (or a compaction's
        output) from another model is never sent (the chain restarts). ``chosen`` is the
        conversation's own choice; a chain kept before models were recorded was made with the default."""
        return self.model == model if self.model is not None else chosen is None


def get(conn: Connection, conversation_id: int) -> Chain | None:
    row = conn.execute("SELECT response_id, replacement_input, compacted_at, model FROM response_chains"
                       " WHERE conversation_id = ?", (conversation_id,)).fetchone()
    if row is None:
        return None
    replacement = tuple(json.loads(row[1])) if row[1] else ()
    return Chain(row[0], replacement, row[2], row[3])


def continue_from(conn: Connection, user_id: int, conversation_id: int, response_id: str | None,
                  model: str | None, now: str) -> None:
    """Continue from a response (a compaction's replacement input is spent)."""
    conn.execute(
        "INSERT INTO response_chains (conversation_id, user_id, response_id, model, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE SET response_id = excluded.response_id, model = excluded.model,"
        " replacement_input = NULL, updated_at = excluded.updated_at",
        (conversation_id, user_id, response_id, model, now))


def set_compacted(conn: Connection, user_id: int, conversation_id: int, replacement_input: str, model: str | None,
                  now: str) -> None:
    """Keep a compaction's output (JSON text) as the replacement input, sent in place of the chain."""
    conn.execute(
        "INSERT INTO response_chains (conversation_id, user_id, response_id, replacement_input, compacted_at,"
        " model, updated_at) VALUES (?, ?, NULL, ?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET"
        " response_id = NULL, replacement_input = excluded.replacement_input,"
        " compacted_at = excluded.compacted_at, model = excluded.model, updated_at = excluded.updated_at",
        (conversation_id, user_id, replacement_input, now, model, now))


def delete(conn: Connection, conversation_id: int) -> None:
    conn.execute("DELETE FROM response_chains WHERE conversation_id = ?", (conversation_id,))


def stored_prompt(conn: Connection, conversation_id: int) -> str | None:
    """The conversation's stored prompt text, or None."""
    row = conn.execute("SELECT content FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
                       (conversation_id,)).fetchone()
    return row[0] if row else None


def thread_turns(conn: Connection, conversation_id: int) -> list[tuple[str, str]]:
    """(role, content) of every turn the thread sends, oldest first."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT role, content FROM messages WHERE conversation_id = ? AND role IN ('user', 'assistant')"
        " AND kind IN ('chat', 'handoff_artifact') ORDER BY id", (conversation_id,)).fetchall()]
