"""Chats of OpenAI-compatible clients (X1): which Hearth conversation a client chat is.

A client such as SillyTavern or Open WebUI resends its whole chat on every request. Hearth does not
take that history as truth: it answers only the client's last user message, through its own send
path, in the one conversation the client chat is pinned to. The pin is found by

* the client's conversation id, when it sends one in a header (``X-Hearth-Conversation``, or the
  common ``X-Conversation-Id`` / ``X-OpenWebUI-Chat-Id``), else
* a fingerprint of the chat's opening (every message up to and including the first user
  message), told apart from other chats with the same opening by Hearth's own first reply, which
  the client resends.

The client's greeting (the assistant turns it sends before the first user message, such as a
SillyTavern character's first message) is saved as the companion's first turn of the conversation
when the pin is made, once. Pins are stored as hashes in ``client_chats``, never as text. A
request whose last user message is the one Hearth answered last (and whose history does not
already hold Hearth's reply to it) is a client-side regenerate: that message is answered again
instead of being saved twice. The client's system prompt becomes the conversation's own custom
instructions; a change rebuilds that conversation's stored prompt (P5).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from hearth.continuity.branch import new_chat
from hearth.errors import InvalidInput, NotFound
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.prompt.presets import set_custom_instructions
from hearth.records.conversations import Conversation
from hearth.records.personas import Persona
from hearth.store import utcnow
from hearth.store.queries import client_chats, interop_lookups
from hearth.thread.character import add_greeting
from hearth.thread.send import Events, SendPath
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.records.context import Context

# Header names a client may use to name its chat, in order of preference (lower case).
PIN_HEADERS = ("x-hearth-conversation", "x-conversation-id", "x-openwebui-chat-id")
MAX_CHAT_ID = 500
CANDIDATES = 20  # pinned conversations looked at for one fingerprint, newest first
TITLE_CHARS = 60
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True)
class ClientMessage:
    role: str  # system | developer | user | assistant | tool | function
    text: str


@dataclass(frozen=True)
class ClientModel:
    id: str
    owned_by: str
    created: int


@dataclass(frozen=True)
class Pinned:
    conversation: Conversation
    created: bool  # a new conversation was started for this client chat
    regenerate: bool  # the last user message is answered again, not saved twice


def _norm(text: str) -> str:
    return " ".join(text.split())


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def _epoch(stamp: str) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(stamp).timestamp())
    except ValueError:
        return 0


class ClientChats:
    """One user's client chats; reached as ``scope.clients``."""

    def __init__(self, ctx: "Context"):
        self._ctx = ctx
        self.store = ctx.store
        self.user_id = ctx.user_id

    # -- models ------------------------------------------------------------------------------------
    def models(self, *, provider_models: bool = False) -> list[ClientModel]:
        """Each persona is a model named by its persona name; with ``provider_models`` (an owner
        setting) the configured provider's model is listed too."""
        out = [ClientModel(p.name, "hearth", _epoch(p.created_at)) for p in self._ctx.personas.list()]
        if provider_models:
            provider = self._ctx.provider
            if provider.model not in {m.id for m in out}:
                out.append(ClientModel(provider.model, provider.name, 0))
        return out

    def persona_for(self, model: str, *, provider_models: bool = False) -> Persona:
        """The persona a model name stands for; the provider's model name means the default persona."""
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must name a persona")
        try:
            return self._ctx.personas.by_name(model)
        except NotFound:
            if provider_models and model == self._ctx.provider.model:
                return self._ctx.personas.default()
            raise unknown_model(model) from None

    # -- pinning -----------------------------------------------------------------------------------
    def pin(self, persona: Persona, messages: list[ClientMessage], chat_id: str | None = None,
            ready: Ready | None = None) -> Pinned:
        """The conversation this client chat maps to, started (and pinned) when there is none.

        Call inside a write transaction together with the send, so a refused send leaves no pin;
        ``ready``: that write's prepared text (``prompt.prepared``).
        """
        chat = [m for m in messages if m.role in ("user", "assistant")]
        if not chat or chat[-1].role != "user":
            raise InvalidInput("the last user or assistant message must be a user message")
        last = chat[-1]
        first_user = next(i for i, m in enumerate(chat) if m.role == "user")
        if chat_id is not None:
            key = "header:" + _digest(chat_id)
        else:
            key = "first:" + _digest(*(f"{m.role}:{_norm(m.text)}" for m in chat[:first_user + 1]))
        with self.store.write() as conn:
            pinned = client_chats.candidates(conn, self.user_id, persona.id, key, CANDIDATES)
            live = [c for c in (self._open(cid) for cid in pinned) if c is not None]
            found: Conversation | None = None
            if chat_id is not None:
                found = live[0] if live else None
            else:
                replies = [m for m in chat[first_user + 1:-1] if m.role == "assistant"]
                if replies:
                    # Hearth's first reply, resent by the client, tells chats with the same opening apart.
                    first_reply = _norm(replies[0].text)
                    found = next((c for c in live if self._first_reply(conn, c.id) == first_reply), None)
                elif live and self._user_turns(conn, live[0].id) == [_norm(last.text)]:
                    found = live[0]  # the opening turn asked again: a regenerate
            if found is None:
                title = " ".join(chat[first_user].text.split())[:TITLE_CHARS]
                found = new_chat(self._ctx, persona.id, title=title, channel="api", ready=ready).conversation
                # The client's own greeting (its character's first message, shown before the
                # person wrote) is the companion's first turn here too; saved once, with the pin.
                for greeting in chat[:first_user]:
                    if greeting.text.strip():
                        check_text(greeting.text, "the greeting")
                        add_greeting(conn, self.user_id, found.id, [greeting.text], source="client", channel="api")
                client_chats.pin(conn, self.user_id, persona.id, key, found.id, utcnow())
                return Pinned(found, True, False)
            return Pinned(found, False, self._is_regenerate(conn, found.id, chat))

    def _open(self, conversation_id: int) -> Conversation | None:
        try:
            conversation = self._ctx.conversations.get(conversation_id)
        except NotFound:
            return None
        # An ended or trashed conversation takes no new turns: the client chat moves to a new one.
        return conversation if conversation.state == "open" and conversation.visibility != "trashed" else None

    @staticmethod
    def _first_reply(conn, conversation_id: int) -> str | None:
        """Hearth's first reply: a greeting is the client's own text, the same in every such chat."""
        text = interop_lookups.first_reply(conn, conversation_id)
        return _norm(text) if text is not None else None

    @staticmethod
    def _user_turns(conn, conversation_id: int, limit: int = 2) -> list[str]:
        return [_norm(text) for text in interop_lookups.first_user_turns(conn, conversation_id, limit)]

    @staticmethod
    def _is_regenerate(conn, conversation_id: int, chat: list[ClientMessage]) -> bool:
        """Same last user message as Hearth's newest, and the client does not already hold
        Hearth's answer to it (then it is a new turn that happens to repeat the words)."""
        last = interop_lookups.last_user_turn(conn, conversation_id)
        if last is None or _norm(last[1]) != _norm(chat[-1].text):
            return False
        reply = interop_lookups.last_reply_after(conn, conversation_id, last[0])
        if reply is None:
            return True
        previous = next((m for m in reversed(chat[:-1]) if m.role == "assistant"), None)
        return previous is None or _norm(previous.text) != _norm(reply)

    # -- sending -----------------------------------------------------------------------------------
    def send_stream(self, model: str, messages: list[ClientMessage], *, chat_id: str | None = None,
                    provider_models: bool = False, attached: Sequence[Any] = ()) -> tuple[Pinned, Events]:
        """Pin the chat, keep its system prompt, and run the send path for its last user message
        (with ``attached``, its images, W14).

        Everything up to the saved user message is one transaction, run before this returns: bad
        input raises here and changes nothing. The events after ``saved`` then stream as from a
        chat's send.
        """
        for m in messages:
            if m.role not in ROLES:
                raise InvalidInput(f"unknown message role {m.role!r}")
        if chat_id is not None:
            chat_id = chat_id.strip()
            if not chat_id or len(chat_id) > MAX_CHAT_ID:
                raise InvalidInput(f"the conversation id header must be 1 to {MAX_CHAT_ID} characters")
        persona = self.persona_for(model, provider_models=provider_models)
        systems = [m.text for m in messages if m.role in ("system", "developer") and m.text.strip()]
        instructions = "\n\n".join(systems) if systems else None
        chat = [m for m in messages if m.role in ("user", "assistant")]
        if not chat or chat[-1].role != "user":
            raise InvalidInput("the last user or assistant message must be a user message")
        text = chat[-1].text
        if not text.strip():
            raise InvalidInput("the last user message is empty")
        max_chars = self._ctx.settings.max_message_chars
        if len(text) > max_chars:
            raise InvalidInput(f"message is longer than {max_chars} characters")

        def attempt(ready: Ready | None) -> tuple[Pinned, Events]:
            with self.store.write():
                pinned = self.pin(persona, messages, chat_id, ready)
                set_custom_instructions(self._ctx, pinned.conversation.id, instructions, ready)
                conversation_id = pinned.conversation.id
                path = SendPath(self._ctx)
                if pinned.regenerate:
                    events = path.stream(conversation_id, "", channel="api", regenerate=True, ready=ready)
                else:
                    events = path.stream(conversation_id, text, channel="api", attached=attached, ready=ready)
                next(events)  # "saved": the durable save, inside this transaction
                return pinned, events

        # The stored prompt's text (its instructions are the client's system messages) is made
        # outside the write lock: a first attempt reads what it is made from and rolls back (U5).
        pinned, events = prepared.run(self.store, attempt)
        return pinned, events


def unknown_model(model: str) -> NotFound:
    error = NotFound(f"the model {model!r} does not exist; GET /v1/models lists the personas")
    error.code = "model_not_found"  # OpenAI's code for this case
    return error


def chat_id_from(headers: dict[str, str]) -> str | None:
    """The client's conversation id from request headers (names compared in lower case)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in PIN_HEADERS:
        if lowered.get(name):
            return lowered[name]
    return None
