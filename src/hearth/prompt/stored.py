"""Storage of the static prompt: built once, kept as the conversation's single system message.

``ensure()`` runs on every send: it returns the stored prompt, building it on the first send
(P2) and rebuilding it first when it was made under an older policy (P7). ``rebuild()`` refreshes
existing prompts in place when something they contain changed (P5). Both run inside the caller's
write transaction and read the persona, snapshot and handoff as they are at that moment, unless
``rebuild`` is handed texts ``compose()`` made earlier from a read snapshot that the caller has
checked is still current (memories.py: the write lock is then held only to write them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from hearth.memory.memories import Adjust, Composed, backfill, snapshot_items
from hearth.records import ledger
from hearth.records.personas import Persona
from hearth.store import Connection, Row, engine_of, versions

from ..store import utcnow
from . import macros
from .dynamic import quote_reserved_headings
from .static import POLICY_VERSION, build_static_prompt

# Returns the model-facing handoff text for a conversation ("" when none may be injected).
HandoffText = Callable[[Connection, int], str]


@dataclass(frozen=True)
class StoredPrompt:
    message_id: int
    text: str
    handoff_chars: int
    policy_version: int
    section_chars: dict[str, int] = field(default_factory=dict)  # per static section (R2)


def _compose(conn: Connection, conversation_id: int, handoff_text: HandoffText,
             adjust: Adjust | None = None) -> tuple[str, dict]:
    row = conn.execute("SELECT p.* FROM conversations c JOIN personas p ON p.id = c.persona_id"
                       " WHERE c.id = ?", (conversation_id,)).fetchone()
    persona = Persona.from_row(row)
    own = conn.execute("SELECT custom_instructions FROM conversations WHERE id = ?", (conversation_id,)).fetchone()[0]
    if own is not None:  # the conversation's own instructions (a client's system prompt, X1)
        persona = replace(persona, custom_instructions=own)
    items = snapshot_items(conn, conversation_id)
    # Macros are filled now, with the thread's start as "now" and random picks seeded by the
    # thread, so a rebuild (P5) gives the same text; only the display names can change it.
    user_id, started = conn.execute("SELECT user_id, created_at FROM conversations WHERE id = ?",
                                    (conversation_id,)).fetchone()
    fill = macros.for_user(conn, user_id, macros.char_name(persona), at=macros.parse_stamp(started),
                           seed=conversation_id, stable=True)
    prompt = build_static_prompt(persona, adjust(items) if adjust else items, handoff_text(conn, conversation_id),
                                 fill)
    # K5: user-authored text quoting the reserved recall heading is relabelled, not rejected.
    text = quote_reserved_headings(prompt.text)
    meta = {"policy_version": POLICY_VERSION, "handoff_chars": prompt.handoff_chars,
            "sections": list(prompt.section_keys), "section_chars": prompt.sizes, "built_at": utcnow()}
    return text, meta


def _row(conn: Connection, conversation_id: int, columns: str = "id, content, metadata") -> Row | None:
    return conn.execute(
        f"SELECT {columns} FROM messages WHERE conversation_id = ? AND kind = 'static_prompt'",
        (conversation_id,),
    ).fetchone()


def _stored(row: Row) -> StoredPrompt:
    meta = json.loads(row["metadata"])
    return StoredPrompt(row["id"], row["content"], meta.get("handoff_chars", 0), meta.get("policy_version", 0),
                        dict(meta.get("section_chars") or {}))


def _written(conn: Connection, conversation_id: int) -> StoredPrompt:
    row = _row(conn, conversation_id)
    assert row is not None, "the stored prompt was written in this transaction"
    return _stored(row)


def _current(conn: Connection, conversation_id: int) -> StoredPrompt | None:
    """The stored prompt as it is now. Where the engine names a row's version (PostgreSQL) the
    version is read first and a prompt this process read at that version is used again: every
    send reads its thread's prompt, up to hundreds of KB, and its transfer was most of a
    millisecond there."""
    engine = engine_of(conn)
    if not engine.row_version:
        row = _row(conn, conversation_id)
        return _stored(row) if row is not None else None
    head = _row(conn, conversation_id, f"id, {engine.row_version}")
    if head is None:
        return None
    key = ("static_prompt", engine.database_key(conn), head[0])
    stored = versions.held(key, head[1])
    if stored is None:
        row = _row(conn, conversation_id, f"id, content, metadata, {engine.row_version} AS version")
        if row is None:
            return None
        stored = _stored(row)
        versions.keep(key, row["version"], stored)
    return stored


def ensure(conn: Connection, user_id: int, conversation_id: int, handoff_text: HandoffText,
           channel: str = "web") -> StoredPrompt:
    """The stored prompt, built on first use; a legacy prompt is rebuilt before it is used."""
    stored = _current(conn, conversation_id)
    if stored is not None:
        if stored.policy_version >= POLICY_VERSION:
            return stored
        rebuild(conn, user_id, [conversation_id], handoff_text)
        return _written(conn, conversation_id)
    backfill(conn, user_id, [conversation_id])  # a legacy thread never builds from a missing snapshot
    text, meta = _compose(conn, conversation_id, handoff_text)
    # The partial unique index guarantees one system prompt even if two first sends race (P2).
    ledger.append_message(conn, user_id=user_id, conversation_id=conversation_id, role="system",
                          content=text, kind="static_prompt", channel=channel, metadata=meta)
    return _written(conn, conversation_id)


def compose(conn: Connection, conversation_ids: Iterable[int], handoff_text: HandoffText,
            adjust: Adjust) -> Composed:
    """The existing stored prompts of these conversations as ``rebuild`` would write them once a
    change (``adjust``, applied to each snapshot's items) is made; only reads."""
    return {conversation_id: _compose(conn, conversation_id, handoff_text, adjust)
            for conversation_id in sorted(set(conversation_ids)) if _row(conn, conversation_id) is not None}


def rebuild(conn: Connection, user_id: int, conversation_ids: Iterable[int],
            handoff_text: HandoffText, composed: Composed | None = None) -> int:
    """Rebuild existing stored prompts in place, keeping snapshot membership and handoff (P5).

    ``composed`` texts are written as they are: the caller vouches that nothing they were built
    from changed since (``Store.commit_mark``). Prompts missing from it are composed here."""
    count = 0
    for conversation_id in sorted(set(conversation_ids)):
        row = _row(conn, conversation_id)
        if row is None:
            continue  # not sent yet: the first send builds from the current state anyway
        ready = composed.get(conversation_id) if composed else None
        text, meta = ready or _compose(conn, conversation_id, handoff_text)
        conn.execute("UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
                     (text, json.dumps(meta), row["id"]))
        count += 1
    if count:
        ledger.append(conn, user_id=user_id, kind="prompt.rebuilt", payload={"count": count})
    return count
