"""What a character card does in a thread (X3), beyond the stored prompt.

* **Greeting.** A New Chat with a persona whose card has a first message (``first_mes``) opens
  with it: the companion's first turn, an ordinary assistant chat message (so handoffs, recall and
  the history see it), marked ``greeting`` in its metadata. The card's ``alternate_greetings`` are
  the other versions of that message (``message_alternatives``, as regenerated replies are), so
  they can be swiped. A greeting is not a reply: the birth period (K3) lasts until the first real
  one, and a thread that holds nothing but its greeting is not carried into the next New Chat.
* **A client's greeting** (X1): the assistant turns an OpenAI-compatible client sends before the
  first user message (SillyTavern's own first message) are saved, once, as the first turns of the
  conversation the client chat is pinned to.
* **Post-history instructions**: a card's ``post_history_instructions``, macros filled fresh on
  every send, travel as their own system message after the history (``prompt.assembly``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from hearth.prompt import macros, prepared
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.store import Connection, utcnow
from hearth.store.queries import alternatives, turns

if TYPE_CHECKING:
    from hearth.records.ledger import Message
    from hearth.records.personas import Persona

# New chats opened on these channels show the card's greeting. Elsewhere the first turn is not the
# companion's to script: a client shows its own greeting (api), a message arrived (sms, email),
# a voice session or an activation speaks first (voice, inner).
GREETING_CHANNELS = ("web", "cli")


@dataclass(frozen=True)
class _Greeting:
    """What a card's greetings are filled from (U5: equal inputs, the same macros filled)."""

    texts: tuple[str, ...]
    char: str
    user: str
    zone: Any
    seed: int  # the conversation: ``pick`` chooses as the stored prompt and the lore of the thread do


def _fill_greetings(inputs: _Greeting) -> list[str]:
    fill = macros.Macros(char=inputs.char, user=inputs.user, now=datetime.now(inputs.zone), seed=inputs.seed)
    filled = [fill.fill(text) for text in inputs.texts]
    return [text for text in filled if text.strip()]


def greeting_versions(conn: Connection, user_id: int, persona: "Persona", conversation_id: int,
                      ready: Ready | None = None) -> list[str]:
    """The card's greeting and its alternates with macros filled, empty ones left out. With
    ``ready`` (a write under ``prepared.run``) they are filled outside the write lock (U5)."""
    card = persona.card
    texts = tuple(text for text in [card.get("first_mes", ""), *card.get("alternate_greetings", [])]
                  if isinstance(text, str))
    if not any(text.strip() for text in texts):
        return []
    inputs = _Greeting(texts, macros.char_name(persona), macros.person_name(conn, user_id),
                       macros.zone(conn, user_id), conversation_id)
    return prepared.filled(ready, ("greeting", conversation_id), inputs, _fill_greetings)


def open_with_greeting(conn: Connection, user_id: int, persona: "Persona", conversation_id: int,
                       channel: str, ready: Ready | None = None) -> int | None:
    """Write the card's greeting as the first turn of a new conversation (in the caller's
    transaction); its alternates become versions to swipe. Returns the message id, or None."""
    versions = greeting_versions(conn, user_id, persona, conversation_id, ready)
    if not versions:
        return None
    return add_greeting(conn, user_id, conversation_id, versions, source="card", channel=channel)


def add_greeting(conn: Connection, user_id: int, conversation_id: int, versions: Sequence[str], *,
                 source: str, channel: str) -> int:
    """One assistant turn marked as a greeting, with ``versions[0]`` shown and every version kept
    for swiping (position 0 onwards, as ``alternatives`` numbers them)."""
    metadata: dict[str, Any] = {"greeting": source}
    if len(versions) > 1:
        metadata |= {"alternatives": len(versions), "chosen": 0}
    message_id = ledger.append_message(conn, user_id=user_id, conversation_id=conversation_id, role="assistant",
                                       content=versions[0], kind="chat", channel=channel, metadata=metadata)
    if len(versions) > 1:
        alternatives.insert_many(conn, user_id, message_id,
                                 [(position, text, json.dumps({"greeting": source}))
                                  for position, text in enumerate(versions)], utcnow())
    return message_id


def post_history(conn: Connection, user_id: int, persona: "Persona", conversation_id: int,
                 user_message: "Message") -> str:
    """The card's post-history instructions for this send, macros filled now; "" when it has none.
    ``{{idle_duration}}`` is the time since the person's message before this one."""
    text = persona.card.get("post_history_instructions", "")
    if not isinstance(text, str) or not text.strip():
        return ""
    idle = None
    if "idle_duration" in text.lower():
        stamp = turns.user_turn_before_at(conn, conversation_id, user_message.id)
        before = macros.parse_stamp(stamp) if stamp is not None else None
        if before is not None:
            idle = datetime.now(timezone.utc) - before
    fill = macros.for_user(conn, user_id, macros.char_name(persona), idle=idle, seed=conversation_id)
    return fill.fill(text).strip()
