"""Voice relays (E9, E10): the browser's microphone and Twilio phone calls, bridged to a realtime
speech session through the official ``openai`` SDK. The key never leaves the server.

Browser protocol on ``/api/voice`` (a logged-in WebSocket): the client sends
``{"type": "audio", "audio": <base64 PCM16, 24 kHz>}`` and ``{"type": "end"}``; the server sends
``ready``, ``audio``, ``transcript`` (role, text), ``error`` (a code) and ``ended``.

Phone: Twilio's signed voice webhook answers with TwiML that connects the call to
``/channels/voice/twilio/stream`` (Media Streams: ``connected``, ``start``, ``media``, ``stop``,
mu-law audio both ways). The stream carries a token derived from the call and the contact, checked
when it starts, so only a call Hearth answered can open a session.

Every frame on both sockets is checked for shape and types before it is used (U3): a frame that is
binary, not JSON, not an object, of an unknown kind or with a missing or wrongly typed field closes
the socket with 1008 (policy violation) and one log line naming the problem, never the frame's
content. A session already open is closed in the ledger with reason ``invalid``, keeping what was
said so far. A Media Stream that has not presented a valid ``start`` within
``START_TIMEOUT_SECONDS`` is closed with 1008 as well.

One call, one session (U7): the first valid ``start`` of a call SID claims it in the database
(``app_state``, so every server sharing the database and every restart sees the claim), and any
later ``start`` for that call, on a second socket or replayed after the call, closes with 1008. A
started stream that sends no ``media`` for ``voice_idle_seconds`` (30 s by default) is closed with
1008 and its session ends with reason ``idle``.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import hmac
import json
import logging
import re
from base64 import b64decode
from typing import Any, Awaitable, Callable
from xml.sax.saxutils import quoteattr

from fastapi import APIRouter, Depends, Request, Response, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketState

from hearth.outreach import voice
from hearth.outreach.channels.contacts import find
from hearth.records.context import Context
from hearth.scope import Scope
from hearth.settings import Settings

from ..errors import ConfigError, HearthError, InvalidInput, TooLarge
from .auth import current_scope, get_hearth, principal_of_connection
from .channels import public_base, signed_form

log = logging.getLogger(__name__)

router = APIRouter(tags=["voice"])
webhooks = APIRouter(prefix="/channels/voice", tags=["voice"])

# Twilio sends "connected" and "start" as soon as the call connects; an unauthenticated socket gets this long.
START_TIMEOUT_SECONDS = 5.0
# Far above a real frame (the browser sends ~11k characters, Twilio ~220), far below a memory problem.
MAX_AUDIO_CHARS = 1_000_000
# Within SQLite's and PostgreSQL's integer range, so a contact id never overflows a query.
CONTACT_ID = re.compile(r"[0-9]{1,18}")

ClientIn = Callable[[], Awaitable["str | None"]]  # base64 audio, or None when the caller ends
Send = Callable[[dict[str, Any]], Awaitable[None]]


def realtime_available(settings: Settings) -> bool:
    """Whether a realtime voice session can run here: the realtime speech API is OpenAI's, reached
    with the server's own key (W16: the page shows the voice button only then)."""
    return bool(settings.openai_api_key)


class VoiceAbilityOut(BaseModel):
    realtime: bool = Field(description="Whether the realtime voice session (/api/voice) can run on this server")


@router.get("/api/voice/ability", response_model=VoiceAbilityOut)
def voice_ability(request: Request, _scope: Scope = Depends(current_scope)) -> dict:
    """What voice the page may offer: the realtime session only when it can work (W16)."""
    return {"realtime": realtime_available(get_hearth(request).settings)}


def _realtime_client(ctx: Context):
    from openai import AsyncOpenAI

    settings = ctx.settings
    if not realtime_available(settings):
        raise ConfigError("voice needs OPENAI_API_KEY (the realtime speech API)")
    return AsyncOpenAI(api_key=settings.openai_api_key, websocket_base_url=settings.realtime_url or None)


async def bridge(ctx: Context, setup: voice.VoiceSetup, client_in: ClientIn, send_audio: Callable[[str], Awaitable[None]],
                 send_event: Send, ended: Callable[[], str] = lambda: "ended") -> str:
    """Relay audio both ways and keep the transcripts; returns why the session ended (``ended()``
    names why the caller's side stopped: the caller ended it, or its stream fell silent)."""
    from openai import OpenAIError
    from websockets.exceptions import ConnectionClosed

    cid = setup.conversation_id

    async def keep(role: str, text: str) -> None:
        if await run_in_threadpool(voice.transcript, ctx, setup, role, text):
            await send_event({"type": "transcript", "role": role, "text": text})

    reason = "ended"
    try:
        async with _realtime_client(ctx).realtime.connect(model=ctx.settings.voice_model) as upstream:
            await upstream.session.update(session=setup.session)  # type: ignore[arg-type]
            for item in setup.items:
                await upstream.conversation.item.create(item=item)  # type: ignore[arg-type]
            await send_event({"type": "ready", "conversation_id": cid})

            async def inbound() -> str:
                while (audio := await client_in()) is not None:
                    await upstream.input_audio_buffer.append(audio=audio)
                return ended()

            async def outbound() -> str:
                async for event in upstream:
                    if event.type == "response.output_audio.delta":
                        await send_audio(event.delta)
                    elif event.type == "conversation.item.input_audio_transcription.completed":
                        await keep("user", event.transcript)
                    elif event.type == "response.output_audio_transcript.done":
                        await keep("assistant", event.transcript)
                    elif event.type == "error":
                        await send_event({"type": "error", "code": str(event.error.code or event.error.type)[:80]})
                return "dropped"  # the realtime side closed

            tasks = {asyncio.create_task(inbound()), asyncio.create_task(outbound())}
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            # Let a transcript being written finish before the session is counted and closed.
            await asyncio.gather(*pending, return_exceptions=True)
            reason = done.pop().result()
    except (WebSocketDisconnect, ConnectionClosed):
        reason = "dropped"  # what was said so far is already kept
    except InvalidInput as exc:  # a malformed frame from the caller (U3); its content is not logged
        log.warning("voice session refused a frame: %s", exc)
        reason = "invalid"
    except HearthError as exc:  # e.g. no API key: the session did not end normally
        log.warning("voice session failed: %s", type(exc).__name__)
        reason = "error"
    except (OpenAIError, OSError) as exc:
        log.warning("voice session failed: %s", type(exc).__name__)
        reason = "error"
    finally:
        await run_in_threadpool(voice.end, ctx, setup, reason)
    return reason


# -- frames (U3): the messages name the problem only, since they are logged ----------------------------
async def receive_object(websocket: WebSocket) -> dict[str, Any]:
    """The next frame as a JSON object; ``InvalidInput`` for anything else."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
    text = message.get("text")
    if text is None:
        raise InvalidInput("a binary frame")
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        raise InvalidInput("a frame that is not JSON") from None
    if not isinstance(frame, dict):
        raise InvalidInput("a JSON frame that is not an object")
    return frame


def audio_of(value: Any) -> str:
    """Base64 audio from a frame, checked before it goes upstream."""
    if not isinstance(value, str):
        raise InvalidInput("audio that is missing or not a string")
    if len(value) > MAX_AUDIO_CHARS:
        raise TooLarge("an audio frame over the size limit")
    try:
        b64decode(value, validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII characters
        raise InvalidInput("audio that is not base64") from None
    return value


def browser_audio(frame: dict[str, Any]) -> str | None:
    """A browser frame: its audio, or None for ``end``."""
    kind = frame.get("type")
    if kind == "end":
        return None
    if kind == "audio":
        return audio_of(frame.get("audio"))
    raise InvalidInput("a frame whose type is missing or unknown")


def media_event(frame: dict[str, Any]) -> str:
    event = frame.get("event")
    if not isinstance(event, str):
        raise InvalidInput("a Media Streams frame without an event name")
    return event


def media_start(frame: dict[str, Any]) -> tuple[str, str, int, str]:
    """A ``start`` frame's call SID, stream SID, contact id and token."""
    start = frame.get("start")
    params = start.get("customParameters") if isinstance(start, dict) else None
    if not isinstance(start, dict) or not isinstance(params, dict):
        raise InvalidInput("a start frame without its start object or parameters")
    call_sid, stream_sid = start.get("callSid"), start.get("streamSid", frame.get("streamSid", ""))
    contact, token = params.get("contact"), params.get("token")
    if not (isinstance(call_sid, str) and isinstance(stream_sid, str) and isinstance(contact, str)
            and isinstance(token, str)):
        raise InvalidInput("a start frame with a missing or wrongly typed field")
    if not CONTACT_ID.fullmatch(contact):
        raise InvalidInput("a start frame whose contact is not a number")
    return call_sid, stream_sid, int(contact), token


# -- browser ----------------------------------------------------------------------------------------
@router.websocket("/api/voice")
async def browser_voice(websocket: WebSocket, persona_id: int | None = None) -> None:
    hearth = websocket.app.state.hearth
    try:
        principal = principal_of_connection(websocket)
        ctx = hearth.context(principal.user_id)
        setup = await run_in_threadpool(voice.start, ctx, persona_id, source="browser")
    except HearthError as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    await websocket.accept()

    async def client_in() -> str | None:
        while (audio := browser_audio(await receive_object(websocket))) == "":
            pass  # an empty chunk carries nothing to relay
        return audio

    async def send_audio(audio: str) -> None:
        await websocket.send_json({"type": "audio", "audio": audio})

    reason = await bridge(ctx, setup, client_in, send_audio, websocket.send_json)
    if websocket.client_state == WebSocketState.CONNECTED:  # the browser is still there to be told
        if reason == "invalid":
            await websocket.close(code=1008, reason="invalid frame")
            return
        await websocket.send_json({"type": "ended", "reason": reason})
        await websocket.close()


# -- phone (Twilio Voice + Media Streams) -------------------------------------------------------------
def stream_token(auth_token: str, call_sid: str, contact_id: int) -> str:
    return hmac.new(auth_token.encode(), f"{call_sid}:{contact_id}".encode(), hashlib.sha256).hexdigest()


@webhooks.post("/twilio", response_class=Response, responses={200: {"content": {"application/xml": {}}}})
async def twilio_call(request: Request) -> Response:
    """Twilio's signed voice webhook: a known caller (or the contact of an outbound call) is connected
    to a Media Stream; anyone else is rejected."""
    hearth = request.app.state.hearth
    settings = hearth.settings
    params = await signed_form(request)
    base = public_base(request)
    caller = params.get("To" if params.get("Direction", "").startswith("outbound") else "From", "")
    contact = await run_in_threadpool(lambda: find(hearth.store.connection(), "sms", caller))
    if contact is None:
        log.info("call from a number that is not a contact rejected")  # no number logged
        return Response('<?xml version="1.0" encoding="UTF-8"?><Response><Reject/></Response>',
                        media_type="application/xml")
    stream = base.replace("https://", "wss://").replace("http://", "ws://") + "/channels/voice/twilio/stream"
    token = stream_token(settings.twilio_auth_token, params.get("CallSid", ""), contact.id)
    twiml = ('<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
             f'<Stream url={quoteattr(stream)}><Parameter name="contact" value="{contact.id}"/>'
             f'<Parameter name="token" value="{token}"/></Stream></Connect></Response>')
    return Response(twiml, media_type="application/xml")


@webhooks.websocket("/twilio/stream")
async def twilio_stream(websocket: WebSocket) -> None:
    hearth = websocket.app.state.hearth
    settings = hearth.settings
    await websocket.accept()

    async def first_start() -> tuple[str, str, int, str] | None:
        while True:  # "connected" comes first, then "start" with the call and our parameters
            frame = await receive_object(websocket)
            event = media_event(frame)
            if event == "start":
                return media_start(frame)
            if event == "stop":
                return None
            if event != "connected":
                raise InvalidInput("a Media Streams frame before start")

    try:
        started = await asyncio.wait_for(first_start(), START_TIMEOUT_SECONDS)
    except TimeoutError:
        log.info("media stream refused: no start frame within %g s", START_TIMEOUT_SECONDS)
        await websocket.close(code=1008)
        return
    except InvalidInput as exc:
        log.info("media stream refused: %s", exc)
        await websocket.close(code=1008)
        return
    except WebSocketDisconnect:
        return  # Twilio hung up first: no session was opened
    if started is None:
        await websocket.close()
        return
    call_sid, stream_sid, contact_id, token = started
    contact = None
    # Bytes, not str: compare_digest refuses non-ASCII strings.
    if settings.twilio_auth_token and hmac.compare_digest(
            stream_token(settings.twilio_auth_token, call_sid, contact_id).encode(), token.encode()):
        contact = voice.stream_contact(hearth.store, contact_id)
    if contact is None:
        log.info("media stream refused: no valid token")
        await websocket.close(code=1008)
        return
    if not await run_in_threadpool(voice.claim_call, hearth.store, call_sid):
        log.info("media stream refused: the call already has a session")
        await websocket.close(code=1008)
        return
    ctx = hearth.context(contact.user_id)
    setup = await run_in_threadpool(voice.start, ctx, contact.persona_id, source="phone")
    idle_seconds = settings.voice_idle_seconds
    loop = asyncio.get_running_loop()
    # Seconds spent waiting for a frame since the last media frame: silence is time the caller sent
    # nothing, not time this server spent relaying what it had sent.
    waited = 0.0
    why = ["ended"]

    async def client_in() -> str | None:
        nonlocal waited
        while True:
            began = loop.time()
            try:
                frame = await asyncio.wait_for(receive_object(websocket), idle_seconds - waited)
            except TimeoutError:
                log.info("media stream closed: no audio for %g s", idle_seconds)
                why[0] = "idle"
                return None
            waited += loop.time() - began
            event = media_event(frame)
            if event == "stop":
                return None
            if event == "start":
                raise InvalidInput("a second start frame")
            if event == "media":
                media = frame.get("media")
                if not isinstance(media, dict):
                    raise InvalidInput("a media frame without its media object")
                audio = audio_of(media.get("payload"))
                waited = 0.0
                if audio:
                    return audio
            # "connected", "mark" (our marks played), "dtmf" and events Twilio may add carry nothing to
            # relay, and do not keep a silent stream open

    async def send_audio(audio: str) -> None:
        await websocket.send_text(json.dumps({"event": "media", "streamSid": stream_sid, "media": {"payload": audio}}))

    async def send_event(event: dict[str, Any]) -> None:
        if event["type"] == "transcript":  # a mark lets the call log show progress, never the words
            await websocket.send_text(json.dumps({"event": "mark", "streamSid": stream_sid,
                                                  "mark": {"name": f"{event['role']}-transcript"}}))

    reason = await bridge(ctx, setup, client_in, send_audio, send_event, ended=lambda: why[0])
    if websocket.client_state == WebSocketState.CONNECTED:
        await websocket.close(code=1008 if reason in ("invalid", "idle") else 1000)

