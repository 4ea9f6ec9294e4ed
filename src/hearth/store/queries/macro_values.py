"""What SillyTavern macros are filled with, read where it is stored: the person's display name
(``users``), their time zone (``activation_prefs``), and the texts that may name the person by
macro (``personas``, ``conversations``)."""

from __future__ import annotations

from typing import Sequence

from hearth.store import Connection


def display_name(conn: Connection, user_id: int) -> str | None:
    row = conn.execute("SELECT display_name FROM users WHERE id = ?", (user_id,)).fetchone()
    return row[0] if row else None


def timezone(conn: Connection, user_id: int) -> str | None:
    """The zone the person's activation preferences name, None when unset."""
    row = conn.execute("SELECT timezone FROM activation_prefs WHERE user_id = ?", (user_id,)).fetchone()
    return row[0] if row else None


def persona_texts(conn: Connection, user_id: int) -> list[tuple[int, tuple[str | None, ...]]]:
    """(persona id, (identity, custom instructions, tone, sections, characters, card)) of the
    user's personas, the texts as stored."""
    return [(row[0], tuple(row[1:])) for row in conn.execute(
        "SELECT id, identity, custom_instructions, tone, sections, characters, card FROM personas WHERE user_id = ?",
        (user_id,)).fetchall()]


def prompted_conversations(conn: Connection, user_id: int, persona_ids: Sequence[int]) -> list[int]:
    """The user's conversations of these personas that have a stored prompt."""
    marks = ",".join("?" * len(persona_ids))
    return [row[0] for row in conn.execute(
        f"SELECT c.id FROM conversations c WHERE c.user_id = ? AND c.persona_id IN ({marks})"
        " AND EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.kind = 'static_prompt')",
        (user_id, *persona_ids)).fetchall()]


def own_instructions(conn: Connection, user_id: int) -> list[tuple[int, str]]:
    """(conversation id, custom instructions) of the user's conversations that have their own."""
    return [(row[0], row[1]) for row in conn.execute(
        "SELECT id, custom_instructions FROM conversations WHERE user_id = ? AND custom_instructions IS NOT NULL",
        (user_id,)).fetchall()]
