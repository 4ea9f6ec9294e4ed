"""Voice relays (E9, E10): the browser's microphone and Twilio phone calls, bridged to a realtime
speech session through the official ``openai`` SDK. The key never leaves the server.

Browser protocol on ``/api/voice`` (a logged-in WebSocket): the client sends
``{"type": "audio", "audio": <base64 PCM16, 24 kHz>}`` and ``{"type": "end"}``; the server sends
``ready``, ``audio``, ``transcript`` (role, text), ``error`` (a code) and ``ended``.

Phone: Twilio's signed voice webhook answers with TwiML that connects the call to
``/channels/voice/twilio/stream`` (Media Streams: ``connected``, ``start``, ``media``, ``stop``,
mu-law audio both ways). The stream carries a token derived from the call and the contact, checked
when it starts, so only a call Hearth answered can open a session.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any, Awaitable, Callable
from xml.sax.saxutils import quoteattr

from fastapi import APIRouter, Request, Response, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocketState

from .. import voice
from ..channels.contacts import Contact, find
from ..engine import Scope
from ..errors import ConfigError, HearthError
from .auth import principal_of_connection
from .channels import public_base, signed_form

log = logging.getLogger(__name__)

router = APIRouter(tags=["voice"])
webhooks = APIRouter(prefix="/channels/voice", tags=["voice"])

ClientIn = Callable[[], Awaitable["str | None"]]  # base64 audio, or None when the caller ends
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _realtime_client(scope: Scope):
    from openai import AsyncOpenAI

    settings = scope.hearth.settings
    if not settings.openai_api_key:
        raise ConfigError("voice needs OPENAI_API_KEY (the realtime speech API)")
    return AsyncOpenAI(api_key=settings.openai_api_key, websocket_base_url=settings.realtime_url or None)


async def bridge(scope: Scope, setup: voice.VoiceSetup, client_in: ClientIn, send_audio: Callable[[str], Awaitable[None]],
                 send_event: Send) -> str:
    """Relay audio both ways and keep the transcripts; returns why the session ended."""
    from openai import OpenAIError
    from websockets.exceptions import ConnectionClosed

    cid = setup.conversation_id

    async def keep(role: str, text: str) -> None:
        if await run_in_threadpool(voice.transcript, scope, setup, role, text):
            await send_event({"type": "transcript", "role": role, "text": text})

    reason = "ended"
    try:
        async with _realtime_client(scope).realtime.connect(model=scope.hearth.settings.voice_model) as upstream:
            await upstream.session.update(session=setup.session)  # type: ignore[arg-type]
            for item in setup.items:
                await upstream.conversation.item.create(item=item)  # type: ignore[arg-type]
            await send_event({"type": "ready", "conversation_id": cid})

            async def inbound() -> str:
                while (audio := await client_in()) is not None:
                    await upstream.input_audio_buffer.append(audio=audio)
                return "ended"

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
            reason = done.pop().result()
    except (WebSocketDisconnect, ConnectionClosed):
        reason = "dropped"  # what was said so far is already kept
    except (OpenAIError, OSError) as exc:
        log.warning("voice session failed: %s", type(exc).__name__)
        reason = "error"
    finally:
        await run_in_threadpool(voice.end, scope, setup, reason)
    return reason


# -- browser ----------------------------------------------------------------------------------------
@router.websocket("/api/voice")
async def browser_voice(websocket: WebSocket, persona_id: int | None = None) -> None:
    hearth = websocket.app.state.hearth
    try:
        principal = principal_of_connection(websocket)
        scope = hearth.scope(principal.user_id)
        setup = await run_in_threadpool(voice.start, scope, persona_id, source="browser")
    except HearthError as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    await websocket.accept()

    async def client_in() -> str | None:
        while True:
            message = await websocket.receive_json()
            if not isinstance(message, dict) or message.get("type") == "end":
                return None
            if message.get("type") == "audio" and isinstance(message.get("audio"), str):
                return message["audio"]

    async def send_audio(audio: str) -> None:
        await websocket.send_json({"type": "audio", "audio": audio})

    reason = await bridge(scope, setup, client_in, send_audio, websocket.send_json)
    if websocket.client_state == WebSocketState.CONNECTED:  # the browser is still there to be told
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
    start: dict[str, Any] = {}
    while not start:  # "connected" comes first, then "start" with the call and our parameters
        message = json.loads(await websocket.receive_text())
        if message.get("event") == "start":
            start = message.get("start") or {}
        elif message.get("event") == "stop":
            await websocket.close()
            return
    params = start.get("customParameters") or {}
    contact_id = str(params.get("contact", ""))
    expected = stream_token(settings.twilio_auth_token, str(start.get("callSid", "")), int(contact_id or 0))
    row = None
    if contact_id.isdigit() and settings.twilio_auth_token and hmac.compare_digest(expected, str(params.get("token", ""))):
        row = hearth.store.connection().execute("SELECT * FROM channel_contacts WHERE id = ?",
                                                (int(contact_id),)).fetchone()
    if row is None:
        log.info("media stream refused: no valid token")
        await websocket.close(code=1008)
        return
    contact = Contact(**dict(row))
    scope = hearth.scope(contact.user_id)
    stream_sid = str(start.get("streamSid", ""))
    setup = await run_in_threadpool(voice.start, scope, contact.persona_id, source="phone")

    async def client_in() -> str | None:
        while True:
            message = json.loads(await websocket.receive_text())
            if message.get("event") == "stop":
                return None
            if message.get("event") == "media":
                return str((message.get("media") or {}).get("payload", ""))

    async def send_audio(audio: str) -> None:
        await websocket.send_text(json.dumps({"event": "media", "streamSid": stream_sid, "media": {"payload": audio}}))

    async def send_event(event: dict[str, Any]) -> None:
        if event["type"] == "transcript":  # a mark lets the call log show progress, never the words
            await websocket.send_text(json.dumps({"event": "mark", "streamSid": stream_sid,
                                                  "mark": {"name": f"{event['role']}-transcript"}}))

    await bridge(scope, setup, client_in, send_audio, send_event)
    if websocket.client_state == WebSocketState.CONNECTED:
        await websocket.close()
