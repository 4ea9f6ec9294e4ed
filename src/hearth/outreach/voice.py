"""Voice sessions (E9): browser and phone speech through a realtime speech API, in the same thread.

A voice session is another channel of the same relationship, never a new chat: it continues the
persona's current conversation. At the start it is given the conversation's stored prompt as its
instructions and the recent turns (from every channel) as conversation items, and it is configured
with retention-ratio truncation, so the realtime model drops its oldest context at the session
limit and keeps a recent fraction instead of failing. Both sides' transcripts join the thread with
channel ``voice`` as they complete; if the socket drops, what was said so far is kept and the
session is closed in the ledger.

This module is the synchronous core (what to send at the start, what to keep); the relay itself,
browser <-> server <-> realtime API, lives at the server edge (``hearth.server.voice``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hearth.continuity.branch import new_chat
from hearth.continuity.timeline import capsules, chains, spans
from hearth.errors import InvalidInput
from hearth.outreach.channels.contacts import Contact, Contacts
from hearth.prompt import prepared, stored
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.store import Store, state, utcnow
from hearth.store.queries import contacts
from hearth.store.queries.outreach_lookups import recent_turns, voice_turns_since_start
from hearth.thread.send import save_turn

if TYPE_CHECKING:
    from hearth.records.context import Context
    from hearth.records.ledger import Message

RECENT_TURNS = 12
MAX_TRANSCRIPT = 20_000
FORMATS = {"browser": "audio/pcm", "phone": "audio/pcmu"}  # 24 kHz PCM16; G.711 mu-law for telephony
# The app_state key under which a call's one Media Stream session is claimed (U7).
CALL_KEY = "voice.call."


@dataclass(frozen=True)
class VoiceSetup:
    """What a voice session starts with: ids, and the events that prime the realtime session."""

    conversation_id: int
    persona_id: int
    span_id: int
    session: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)


def start(ctx: "Context", persona_id: int | None = None, *, source: str = "browser") -> VoiceSetup:
    """Open a voice session on the persona's current conversation (a new one only if it has none)."""
    if source not in FORMATS:
        raise InvalidInput(f"voice source must be one of {', '.join(FORMATS)}")
    settings = ctx.settings
    persona = ctx.personas.get(persona_id) if persona_id else ctx.personas.default()
    current = ctx.conversations.current(persona.id)
    conversation_id = current.id if current else new_chat(ctx, persona.id, channel="voice").conversation.id

    def attempt(ready: Ready | None) -> tuple[stored.StoredPrompt, Any, list[Any], int]:
        """One attempt of the session's write: a prompt to build is made outside the lock (U5)."""
        with ctx.store.write() as conn:
            prompt = stored.ensure(conn, ctx.user_id, conversation_id, ctx.handoff_text, "voice", ready)
            # The session gets the latest capsule and only the verbatim turns it does not cover (E3).
            capsule = capsules.latest(conn, conversation_id)
            after = capsule.through_message_id if capsule else 0
            rows = recent_turns(conn, conversation_id, after, RECENT_TURNS)
            # A different protocol, not a new relationship: the Responses chain starts again after it.
            chains.reset(conn, conversation_id)
            span_id, _now = spans.touch_now(conn, ctx, persona.id, "voice", conversation_id=conversation_id)
            ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation_id, kind="voice.started",
                          channel="voice", span_id=span_id,
                          payload={"source": source, "recent_turns": len(rows), "capsule": capsule is not None})
            return prompt, capsule, rows, span_id

    prompt, capsule, rows, span_id = prepared.run(ctx.store, attempt)
    audio_format = {"type": FORMATS[source]}
    session = {
        "type": "realtime",
        "model": settings.voice_model,
        "instructions": prompt.text + (f"\n\n{capsule.render()}" if capsule else ""),
        "audio": {
            "input": {"format": audio_format, "transcription": {"model": settings.voice_transcription_model},
                      "turn_detection": {"type": "server_vad"}},
            "output": {"format": audio_format, "voice": settings.voice_name},
        },
        "truncation": {"type": "retention_ratio", "retention_ratio": settings.voice_retention_ratio},
    }
    items = [{
        "type": "message", "role": role,
        "content": [{"type": "input_text" if role == "user" else "output_text", "text": content}],
    } for role, content in reversed(rows)]
    return VoiceSetup(conversation_id, persona.id, span_id, session, items)


def call(ctx: "Context", contact_id: int) -> str:
    """Ring a contact (E10): Twilio calls the number and, once answered, asks the voice webhook,
    which connects the call to a voice session like an incoming one. Returns the call's SID."""
    from twilio.base.exceptions import TwilioException

    from hearth.errors import Conflict, ProviderError
    from hearth.outreach.channels.sms import client

    settings = ctx.settings
    contact = Contacts(ctx.store, ctx.user_id, settings).get(contact_id)
    if contact.channel != "sms":
        raise InvalidInput("calls go to a phone contact")
    if not settings.public_url:
        raise Conflict("calls need HEARTH_PUBLIC_URL (where Twilio reaches the voice webhook)")
    try:
        placed = client(settings).calls.create(to=contact.address, from_=settings.twilio_from_number,
                                               url=settings.public_url.rstrip("/") + "/channels/voice/twilio")
    except TwilioException:
        raise ProviderError("Twilio did not place the call", "server", True) from None
    with ctx.store.write() as conn:
        ledger.append(conn, user_id=ctx.user_id, kind="voice.call_placed", channel="voice",
                      payload={"contact_id": contact.id})
    return placed.sid or ""


def transcript(ctx: "Context", setup: VoiceSetup, role: str, text: str) -> "Message | None":
    """Keep one side's finished utterance in the thread (empty transcripts are not kept)."""
    if role not in ("user", "assistant"):
        raise InvalidInput("a transcript is the user's or the assistant's")
    text = (text or "").replace("\x00", "").strip()[:MAX_TRANSCRIPT]
    if not text:
        return None
    with ctx.store.write() as conn:
        span_id, now = spans.touch_now(conn, ctx, setup.persona_id, "voice", conversation_id=setup.conversation_id)
        if role == "user":  # what the person said joins the thread as every turn of theirs does
            return save_turn(ctx, conn, setup.conversation_id, text, channel="voice", metadata={"voice": True},
                             created_at=now, span_id=span_id)
        return ctx.conversations.add_message(setup.conversation_id, role, text, channel="voice",
                                             metadata={"voice": True}, created_at=now, span_id=span_id)


def end(ctx: "Context", setup: VoiceSetup, reason: str) -> None:
    """Close the session and its span in the ledger: numbers and a fixed reason only. ``invalid``
    means the relay refused a malformed frame from the caller (U3); ``idle`` that a call's stream
    sent no audio for ``voice_idle_seconds`` (U7)."""
    if reason not in ("ended", "dropped", "error", "invalid", "idle"):
        reason = "error"
    cid = setup.conversation_id
    with ctx.store.write() as conn:
        turns = voice_turns_since_start(conn, cid)
        ledger.append(conn, user_id=ctx.user_id, conversation_id=cid, kind="voice.ended", channel="voice",
                      span_id=setup.span_id, payload={"reason": reason, "turns": turns})
        span = spans.get(conn, ctx.user_id, setup.span_id)
        if span.open:  # the next interaction opens a new span in the same timeline (E1)
            spans.close(conn, ctx.user_id, span, f"voice_{reason}", at=utcnow())


def stream_contact(store: Store, contact_id: int) -> Contact | None:
    """The contact a phone call's stream names, whoever's it is (its signed token vouches for it)."""
    return contacts.get(store.connection(), contact_id)


def claim_call(store: Store, call_sid: str) -> bool:
    """Claim the call's one session; False when a session of this call was opened before (U7).
    The claim stays after the call (a call has one Media Stream), so a replayed ``start`` is
    refused even once the first session has ended."""
    with store.write() as conn:
        return state.put_new(conn, CALL_KEY + call_sid, {"at": utcnow()})
