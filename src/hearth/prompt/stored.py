"""Storage of the static prompt: built once, kept as the conversation's single system message.

``ensure()`` runs on every send: it returns the stored prompt, building it on the first send
(P2) and rebuilding it first when it was made under an older policy (P7). ``rebuild()`` refreshes
existing prompts in place when something they contain changed (P5). Both run inside the caller's
write transaction and read the persona, snapshot and handoff as they are at that moment, unless
``rebuild`` is handed texts ``compose()`` made earlier from a read snapshot that the caller has
checked is still current (memories.py: the write lock is then held only to write them).

Making the text (filling the macros, joining the sections) is ``_make``, a function of the inputs
read (``_Inputs``) and nothing else. A caller whose write runs under ``prepared.run`` passes its
``Ready``: the text is then made outside the write lock and written by a later attempt that reads
the same inputs (U5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Protocol

from hearth.memory.memories import Adjust, Composed, backfill, snapshot_items
from hearth.prompt.static import MemoryRow
from hearth.records import ledger
from hearth.records.personas import Persona
from hearth.store import Connection
from hearth.store.queries import stored_prompts
from hearth.store.queries.stored_prompts import StoredPrompt

from ..store import utcnow
from . import macros, prepared
from .dynamic import quote_reserved_headings
from .prepared import Ready
from .static import POLICY_VERSION, build_static_prompt


class Quote(Protocol):
    """A handoff read for a prompt but not yet enclosed: equal while its turns are; ``text()`` is
    the model-facing block (``continuity.branch.Quoted``)."""

    def text(self) -> str: ...


# Returns the handoff for a conversation's prompt: its model-facing text, or a ``Quote`` to make
# it from outside the write lock ("" or None when none may be injected).
HandoffText = Callable[[Connection, int], "str | Quote | None"]


@dataclass(frozen=True)
class _Inputs:
    """Everything a stored prompt's text is made from, read from the database: equal inputs make
    the same text (``built_at`` aside), so a text made from them outside the write lock fits."""

    persona: Persona
    items: tuple[MemoryRow, ...]
    handoff: str | Quote | None
    char: str
    user: str
    zone: Any
    at: datetime | None
    seed: int


def _inputs(conn: Connection, conversation_id: int, handoff_text: HandoffText,
            adjust: Adjust | None = None) -> _Inputs:
    persona = stored_prompts.persona(conn, conversation_id)
    own = stored_prompts.instructions(conn, conversation_id)
    if own is not None:  # the conversation's own instructions (a client's system prompt, X1)
        persona = replace(persona, custom_instructions=own)
    # When it was saved is no part of the text: a save repeated by a later attempt keeps what it made.
    persona = replace(persona, updated_at="")
    items = snapshot_items(conn, conversation_id)
    # Macros are filled with the thread's start as "now" and random picks seeded by the thread, so
    # a rebuild (P5) gives the same text; only the display names can change it.
    user_id, started = stored_prompts.started(conn, conversation_id)
    return _Inputs(persona, tuple(adjust(items) if adjust else items),
                   handoff_text(conn, conversation_id), macros.char_name(persona),
                   macros.person_name(conn, user_id), macros.zone(conn, user_id), macros.parse_stamp(started),
                   conversation_id)


def _make(inputs: _Inputs) -> tuple[str, dict]:
    """The stored prompt's text and metadata from its inputs: text work only, no database (U5)."""
    moment = (inputs.at or datetime.now(timezone.utc)).astimezone(inputs.zone)
    fill = macros.Macros(char=inputs.char, user=inputs.user, now=moment, seed=inputs.seed, stable=True)
    handoff = inputs.handoff if isinstance(inputs.handoff, str) else inputs.handoff.text() if inputs.handoff else ""
    prompt = build_static_prompt(inputs.persona, inputs.items, handoff, fill)
    # K5: user-authored text quoting the reserved recall heading is relabelled, not rejected.
    text = quote_reserved_headings(prompt.text)
    meta = {"policy_version": POLICY_VERSION, "handoff_chars": prompt.handoff_chars,
            "sections": list(prompt.section_keys), "section_chars": prompt.sizes, "built_at": utcnow()}
    return text, meta


def _compose(conn: Connection, conversation_id: int, handoff_text: HandoffText,
             adjust: Adjust | None = None, ready: Ready | None = None) -> tuple[str, dict]:
    """The stored prompt as it would be written now. Inside a write with ``ready``, the text made
    outside the lock from the same inputs (``prepared``); otherwise made here."""
    return prepared.filled(ready, ("static_prompt", conversation_id),
                           _inputs(conn, conversation_id, handoff_text, adjust), _make)


def _written(conn: Connection, conversation_id: int) -> StoredPrompt:
    stored = stored_prompts.get(conn, conversation_id)
    assert stored is not None, "the stored prompt was written in this transaction"
    return stored


def ensure(conn: Connection, user_id: int, conversation_id: int, handoff_text: HandoffText,
           channel: str = "web", ready: Ready | None = None) -> StoredPrompt:
    """The stored prompt, built on first use; a legacy prompt is rebuilt before it is used.

    With ``ready`` (the caller's write runs under ``prepared.run``) a prompt to build is made
    outside the write lock: the first attempt reads its inputs and rolls back (U5)."""
    stored = stored_prompts.current(conn, conversation_id)
    if stored is not None:
        if stored.policy_version >= POLICY_VERSION:
            return stored
        rebuild(conn, user_id, [conversation_id], handoff_text, ready=ready)
        return _written(conn, conversation_id)
    backfill(conn, user_id, [conversation_id])  # a legacy thread never builds from a missing snapshot
    text, meta = _compose(conn, conversation_id, handoff_text, ready=ready)
    # The partial unique index guarantees one system prompt even if two first sends race (P2).
    ledger.append_message(conn, user_id=user_id, conversation_id=conversation_id, role="system",
                          content=text, kind="static_prompt", channel=channel, metadata=meta)
    return _written(conn, conversation_id)


def compose(conn: Connection, conversation_ids: Iterable[int], handoff_text: HandoffText,
            adjust: Adjust) -> Composed:
    """The existing stored prompts of these conversations as ``rebuild`` would write them once a
    change (``adjust``, applied to each snapshot's items) is made; only reads."""
    return {conversation_id: _compose(conn, conversation_id, handoff_text, adjust)
            for conversation_id in sorted(set(conversation_ids)) if stored_prompts.get(conn, conversation_id) is not None}


def rebuild(conn: Connection, user_id: int, conversation_ids: Iterable[int],
            handoff_text: HandoffText, composed: Composed | None = None, ready: Ready | None = None) -> int:
    """Rebuild existing stored prompts in place, keeping snapshot membership and handoff (P5).

    ``composed`` texts are written as they are: the caller vouches that nothing they were built
    from changed since (``Store.commit_mark``). Prompts missing from it are composed here, or with
    ``ready`` made outside the write lock (``prepared``)."""
    rows = {conversation_id: message_id for conversation_id in sorted(set(conversation_ids))
            if (message_id := stored_prompts.message_id(conn, conversation_id)) is not None}  # not sent yet: the first send builds
    ready_made = {conversation_id: composed[conversation_id] for conversation_id in rows
                  if composed and conversation_id in composed}
    others = [conversation_id for conversation_id in rows if conversation_id not in ready_made]
    if ready is not None:  # every prompt missing is asked for at once, then all are written
        made = prepared.filled_all(ready, [(("static_prompt", conversation_id), _inputs(conn, conversation_id,
                                                                                       handoff_text))
                                           for conversation_id in others], _make)
        ready_made |= dict(zip(others, made))
    count = 0
    for conversation_id, message_id in rows.items():
        done = ready_made.get(conversation_id)
        text, meta = done or _make(_inputs(conn, conversation_id, handoff_text))  # one at a time, as before
        stored_prompts.set_text(conn, message_id, text, meta)
        count += 1
    if count:
        ledger.append(conn, user_id=user_id, kind="prompt.rebuilt", payload={"count": count})
    return count
