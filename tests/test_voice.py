"""Voice (E9, E10): the browser's microphone and Twilio phone calls relayed through the official
``openai`` SDK to a realtime speech server on 127.0.0.1 that speaks the real event format."""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest
import uvicorn
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from twilio.request_validator import RequestValidator
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from hearth import Hearth, Settings
from hearth.memory.helpers import OfflineHelper
from hearth.server import create_app
from hearth.server import voice as voice_server
from hearth.server.voice import stream_token
from tests.fakes.realtime_server import FakeRealtime

BASE = "http://127.0.0.1:8765"
WS = "ws://127.0.0.1:8765"  # the test client takes the host of WebSocket URLs from the URL itself
PUBLIC = "https://hearth.example.org"
SID, TOKEN = "AC" + "3" * 32, "twilio-voice-token"
ROBIN = "+15557654321"


@pytest.fixture
def realtime() -> Iterator[FakeRealtime]:
    fake = FakeRealtime().start()
    yield fake
    fake.stop()


@pytest.fixture
def voice_hearth(tmp_path, realtime, provider) -> Iterator[Hearth]:
    settings = Settings.resolve({
        "home": str(tmp_path / "home"), "input_token_limit": 32_000, "openai_api_key": "sk-server-only",
        "provider": "offline", "realtime_url": realtime.url, "public_url": PUBLIC, "capsule_recent_turns": 2,
        "twilio_account_sid": SID, "twilio_auth_token": TOKEN,
    }, environ={})
    h = Hearth(settings, provider=provider)
    me = h.scope()
    elion = me.personas.create("elion", "Elion")
    me.contacts.trust("sms", ROBIN, elion.id)
    yield h
    h.close()


def pcm_frames(count: int = 2, size: int = 4_800) -> list[str]:
    return [base64.b64encode(bytes(size)).decode() for _ in range(count)]


def events_until(ws, kind: str, role: str | None = None) -> list[dict]:
    seen = []
    while True:
        event = ws.receive_json()
        seen.append(event)
        if event["type"] == kind and (role is None or event.get("role") == role):
            return seen


def voice_events(h: Hearth) -> list[tuple[str, str]]:
    rows = h.store.connection().execute(
        "SELECT kind, payload FROM events WHERE kind LIKE 'voice.%' ORDER BY id").fetchall()
    return [(r[0], r[1]) for r in rows]


def test_e9_browser_voice_relays_audio_and_keeps_both_transcripts_in_the_same_thread(voice_hearth, realtime):
    me = voice_hearth.scope()
    elion = me.personas.by_name("elion")
    chat = me.new_chat(elion.id).conversation
    for text in ("My sister visits on Sunday.", "I promised to bake for her.", "I'll call you on my walk home."):
        me.send(chat.id, text)
    capsule = me.timeline.refresh_capsule(chat.id, OfflineHelper())
    assert capsule is not None
    me.send(chat.id, "Leaving the office now.")
    conn = voice_hearth.store.connection()
    conn.execute("INSERT INTO response_chains (conversation_id, user_id, response_id, updated_at)"
                 " VALUES (?, ?, 'resp_earlier', '2026-12-01T00:00:00.000000Z')", (chat.id, me.user_id))
    client = TestClient(create_app(hearth=voice_hearth), base_url=BASE)
    with client.websocket_connect(f"{WS}/api/voice?persona_id={elion.id}") as ws:
        assert ws.receive_json() == {"type": "ready", "conversation_id": chat.id}
        for frame in pcm_frames():
            ws.send_json({"type": "audio", "audio": frame})
        seen = events_until(ws, "transcript", "assistant")
        assert {"type": "transcript", "role": "user", "text": "I'm walking home now"} in seen
        assert any(e["type"] == "audio" and e["audio"] for e in seen)  # the companion's voice came back
        ws.send_json({"type": "end"})
        assert ws.receive_json() == {"type": "ended", "reason": "ended"}

    [update] = realtime.of("session.update")
    assert update["session"]["truncation"] == {"type": "retention_ratio", "retention_ratio": 0.8}
    # The stored prompt and the latest capsule, then only the verbatim turns the capsule does not cover.
    assert update["session"]["instructions"] == me.stored_prompt(chat.id) + "\n\n" + capsule.render()
    assert update["session"]["audio"]["input"]["format"] == {"type": "audio/pcm"}
    primed = [i["item"]["content"][0]["text"] for i in realtime.of("conversation.item.create")]
    assert primed[0] == "I'll call you on my walk home." and "My sister visits on Sunday." not in primed
    # A different protocol, not a new relationship: the Responses chain is cleared, nothing visible changes.
    assert conn.execute("SELECT count(*) FROM response_chains WHERE conversation_id = ?", (chat.id,)).fetchone()[0] == 0
    spans = conn.execute("SELECT kind, channel, close_reason FROM spans WHERE id IN"
                         " (SELECT span_id FROM events WHERE kind LIKE 'voice.%')").fetchall()
    assert [tuple(r) for r in spans] == [("voice", "voice", "voice_ended")]  # its own span, closed at the end
    assert realtime.authorization == ["Bearer sk-server-only"] and realtime.paths[0].startswith("/v1/realtime")

    assert [c.id for c in me.conversations.list()] == [chat.id]  # no new-chat boundary
    turns = [(m.role, m.channel, m.content) for m in me.conversations.messages(chat.id) if m.kind == "chat"]
    assert turns[8:] == [("user", "voice", "I'm walking home now"), ("assistant", "voice", "Walk safe, I'm here.")]
    assert [k for k, _ in voice_events(voice_hearth)] == ["voice.started", "voice.ended"]
    assert json.loads(voice_events(voice_hearth)[-1][1]) == {"reason": "ended", "turns": 2}
    voice_spans = {r[0] for r in conn.execute("SELECT span_id FROM events WHERE channel = 'voice' AND kind = 'message'")}
    assert len(voice_spans) == 1 and None not in voice_spans  # both transcripts in the session's span


def test_e9_a_dropped_voice_session_keeps_the_transcript_so_far_and_closes(voice_hearth, realtime):
    realtime.drop_after_user = True
    me = voice_hearth.scope()
    client = TestClient(create_app(hearth=voice_hearth), base_url=BASE)
    with client.websocket_connect(f"{WS}/api/voice") as ws:
        ws.receive_json()
        for frame in pcm_frames():
            ws.send_json({"type": "audio", "audio": frame})
        events_until(ws, "transcript", "user")
        assert events_until(ws, "ended")[-1] == {"type": "ended", "reason": "dropped"}
    [conversation] = me.conversations.list()
    kept = [(m.role, m.content) for m in me.conversations.messages(conversation.id) if m.channel == "voice"]
    assert kept == [("user", "I'm walking home now")]
    kind, payload = voice_events(voice_hearth)[-1]
    assert kind == "voice.ended" and json.loads(payload) == {"reason": "dropped", "turns": 1}


def test_e9_voice_needs_a_login_and_refuses_other_sites(voice_hearth):
    voice_hearth.users.set_password(voice_hearth.users.owner().id, "correct horse battery")
    client = TestClient(create_app(hearth=voice_hearth), base_url=BASE)
    with pytest.raises(WebSocketDisconnect) as refused:
        with client.websocket_connect(f"{WS}/api/voice"):
            pass
    assert refused.value.code == 1008
    login = client.post("/api/auth/login", json={"name": "owner", "password": "correct horse battery"})
    assert login.status_code == 200
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect(f"{WS}/api/voice", headers={"Origin": "https://evil.example"}):
            pass
    with client.websocket_connect(f"{WS}/api/voice", headers={"Origin": BASE}) as ws:
        assert ws.receive_json()["type"] == "ready"
        ws.send_json({"type": "end"})
        assert ws.receive_json()["type"] == "ended"


def mulaw_tone(samples: int = 800, hz: float = 440.0) -> bytes:
    """A tone as 8 kHz G.711 mu-law, the audio Twilio Media Streams carry."""
    out = bytearray()
    for n in range(samples):
        s = int(8000 * math.sin(2 * math.pi * hz * n / 8000))
        sign = 0x80 if s < 0 else 0
        s = min(abs(s), 32635) + 0x84
        exponent, mask = 7, 0x4000
        while not s & mask and exponent > 0:
            exponent, mask = exponent - 1, mask >> 1
        out.append(~(sign | exponent << 4 | (s >> (exponent + 3)) & 0x0F) & 0xFF)
    return bytes(out)


def signed_call(client: TestClient, form: dict[str, str]):
    signature = RequestValidator(TOKEN).compute_signature(PUBLIC + "/channels/voice/twilio", form)
    return client.post("/channels/voice/twilio", data=form, headers={"X-Twilio-Signature": signature})


def test_e10_phone_call_is_signature_checked_and_bridged_over_media_streams(voice_hearth, realtime):
    me = voice_hearth.scope()
    client = TestClient(create_app(hearth=voice_hearth), base_url=BASE)
    call = {"CallSid": "CA" + "9" * 32, "AccountSid": SID, "From": ROBIN, "To": "+15550001111",
            "Direction": "inbound", "CallStatus": "ringing"}
    assert client.post("/channels/voice/twilio", data=call).status_code == 403  # unsigned
    stranger = signed_call(client, {**call, "From": "+15550009999"})
    assert stranger.status_code == 200 and "<Reject/>" in stranger.text
    answered = signed_call(client, call)
    assert answered.status_code == 200
    assert '<Stream url="wss://hearth.example.org/channels/voice/twilio/stream">' in answered.text
    params = dict(re.findall(r'<Parameter name="(\w+)" value="([^"]+)"/>', answered.text))
    assert params["token"] == stream_token(TOKEN, call["CallSid"], int(params["contact"]))

    with client.websocket_connect(f"{WS}/channels/voice/twilio/stream") as ws:
        ws.send_json({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        ws.send_json({"event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
                      "start": {"streamSid": "MZ1", "callSid": call["CallSid"], "accountSid": SID,
                                "tracks": ["inbound"], "customParameters": params,
                                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}})
        tone = base64.b64encode(mulaw_tone()).decode()
        for n in range(8):  # 8 x 100 ms of audio
            ws.send_json({"event": "media", "sequenceNumber": str(n + 2), "streamSid": "MZ1",
                          "media": {"track": "inbound", "chunk": str(n + 1), "timestamp": str(n * 100),
                                    "payload": tone}})
        heard = [ws.receive_json()]
        while heard[-1].get("mark", {}).get("name") != "assistant-transcript":
            heard.append(ws.receive_json())
        assert [m["mark"]["name"] for m in heard if m["event"] == "mark"] == ["user-transcript", "assistant-transcript"]
        assert any(m["event"] == "media" and m["streamSid"] == "MZ1" and m["media"]["payload"] for m in heard)
        ws.send_json({"event": "stop", "streamSid": "MZ1", "stop": {"callSid": call["CallSid"]}})
    [update] = realtime.of("session.update")
    assert update["session"]["audio"]["output"]["format"] == {"type": "audio/pcmu"}
    assert update["session"]["truncation"]["type"] == "retention_ratio"
    [conversation] = me.conversations.list()
    kept = [(m.role, m.channel) for m in me.conversations.messages(conversation.id) if m.kind == "chat"]
    assert kept == [("user", "voice"), ("assistant", "voice")]

    with client.websocket_connect(f"{WS}/channels/voice/twilio/stream") as ws:  # a forged token
        ws.send_json({"event": "start", "start": {"streamSid": "MZ2", "callSid": "CA1",
                                                  "customParameters": {"contact": params["contact"], "token": "0" * 64}}})
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 1008


def test_e10_an_outbound_call_is_placed_through_the_twilio_sdk_and_answered_by_the_same_webhook(tmp_path, realtime):
    from hearth.outreach.voice import call
    from tests.fakes.twilio_server import FakeTwilio

    twilio = FakeTwilio(SID, TOKEN).start()
    try:
        settings = Settings.resolve({"home": str(tmp_path), "public_url": PUBLIC, "twilio_account_sid": SID,
                                     "twilio_auth_token": TOKEN, "twilio_from_number": "+15550001111",
                                     "twilio_api_base": twilio.url, "openai_api_key": "sk",
                                     "realtime_url": realtime.url}, environ={})
        with Hearth(settings) as h:
            me = h.scope()
            contact = me.contacts.trust("sms", ROBIN, me.personas.create("elion", "Elion").id)
            assert call(h.context(me.user_id), contact.id).startswith("CA")
            assert twilio.calls == [{"To": ROBIN, "From": "+15550001111", "Url": PUBLIC + "/channels/voice/twilio"}]
            answered = signed_call(TestClient(create_app(hearth=h), base_url=BASE),
                                   {"CallSid": "CA" + "1" * 32, "From": "+15550001111", "To": ROBIN,
                                    "Direction": "outbound-api"})
            assert "<Stream" in answered.text  # the callee is identified by the number that was called
            mail = me.contacts.trust("email", "robin@example.org")
            with pytest.raises(Exception, match="phone contact"):
                call(h.context(me.user_id), mail.id)
    finally:
        twilio.stop()


# -- hostile frames (U3): validated, refused with 1008, one log line, the ledger says so ---------------
SECRET = "SECRET-WORDS"  # stands for what a frame carries; it must never reach the log

BAD_BROWSER_FRAMES = {
    "not_json": f"{SECRET} {{",
    "binary": SECRET.encode() + b"\xff\x00",
    "json_list": json.dumps([SECRET]),
    "nested_too_deep": "[" * 100_000 + "]" * 100_000,
    "missing_type": json.dumps({"audio": base64.b64encode(SECRET.encode()).decode()}),
    "unknown_type": json.dumps({"type": SECRET}),
    "audio_not_a_string": json.dumps({"type": "audio", "audio": 12345}),
    "audio_not_base64": json.dumps({"type": "audio", "audio": SECRET + "!!"}),
    "audio_too_large": json.dumps({"type": "audio", "audio": "A" * 1_000_004}),
}


@contextmanager
def served(h: Hearth) -> Iterator[str]:
    """The app on a real uvicorn server on 127.0.0.1; yields its ws:// base. ``log_config=None`` lets
    uvicorn's own error log (an unhandled exception's traceback) reach caplog."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(hearth=h), host="127.0.0.1", port=port, log_config=None,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"ws://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def close_code(ws: ClientConnection, within: float = 5.0) -> int:
    """Read until the server closes; a server that stays open fails the test with TimeoutError."""
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=within)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


def until(ws: ClientConnection, done, within: float = 10) -> list[dict]:
    seen: list[dict] = []
    while not seen or not done(seen[-1]):
        seen.append(json.loads(ws.recv(timeout=within)))
    return seen


def assert_one_quiet_log_line(caplog) -> None:
    """Exactly one line from Hearth, no traceback from anyone, and nothing of the frame's content."""
    ours = [r for r in caplog.records if r.name.startswith("hearth")]
    assert len(ours) == 1, [r.getMessage() for r in ours]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


def voice_span_reasons(h: Hearth) -> list[str]:
    rows = h.store.connection().execute(
        "SELECT close_reason FROM spans WHERE id IN (SELECT span_id FROM events WHERE kind = 'voice.ended')")
    return [r[0] for r in rows]


@pytest.mark.parametrize("frame", list(BAD_BROWSER_FRAMES.values()), ids=list(BAD_BROWSER_FRAMES))
def test_u3_e9_a_bad_browser_voice_frame_closes_with_1008_and_the_session_ends_invalid(voice_hearth, frame, caplog):
    caplog.set_level(logging.INFO)
    me = voice_hearth.scope()
    with served(voice_hearth) as base, connect(f"{base}/api/voice") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "ready"
        for chunk in pcm_frames():
            ws.send(json.dumps({"type": "audio", "audio": chunk}))
        until(ws, lambda e: e["type"] == "transcript" and e["role"] == "assistant")
        ws.send(frame)
        assert close_code(ws) == 1008
    [conversation] = me.conversations.list()
    kept = [(m.role, m.content) for m in me.conversations.messages(conversation.id) if m.channel == "voice"]
    assert kept == [("user", "I'm walking home now"), ("assistant", "Walk safe, I'm here.")]  # what was said stays
    kind, payload = voice_events(voice_hearth)[-1]
    assert kind == "voice.ended" and json.loads(payload) == {"reason": "invalid", "turns": 2}
    assert voice_span_reasons(voice_hearth) == ["voice_invalid"]
    assert_one_quiet_log_line(caplog)


def media_start_frame(call_sid: object, contact: object, token: object) -> dict:
    return {"event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
            "start": {"streamSid": "MZ1", "callSid": call_sid, "accountSid": SID, "tracks": ["inbound"],
                      "customParameters": {"contact": contact, "token": token},
                      "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}}


def robin_id(h: Hearth) -> int:
    return h.store.connection().execute("SELECT id FROM channel_contacts").fetchone()[0]


CALL = "CA" + "7" * 32


def bad_starts(contact_id: int) -> dict[str, object]:
    token = stream_token(TOKEN, CALL, contact_id)
    return {
        "not_json": f"{SECRET} {{",
        "binary": SECRET.encode() + b"\xff",
        "json_list": json.dumps([{"event": "start"}, SECRET]),
        "missing_event": json.dumps({"start": {"callSid": CALL}}),
        "event_not_a_string": json.dumps({"event": ["start"]}),
        "media_before_start": json.dumps({"event": "media", "media": {"payload": ""}}),
        "start_not_an_object": json.dumps({"event": "start", "start": SECRET}),
        "contact_a_number": json.dumps(media_start_frame(CALL, contact_id, token)),
        "contact_not_numeric": json.dumps(media_start_frame(CALL, SECRET, token)),
        "contact_unicode_digits": json.dumps(media_start_frame(CALL, "\u00b2", token)),
        "token_not_ascii": json.dumps(media_start_frame(CALL, str(contact_id), "\u00e9" * 64)),
    }


@pytest.mark.parametrize("case", list(bad_starts(1)))
def test_u3_e10_a_media_stream_with_a_bad_frame_before_start_is_refused_with_1008(voice_hearth, case, caplog):
    caplog.set_level(logging.INFO)
    frame = bad_starts(robin_id(voice_hearth))[case]
    with served(voice_hearth) as base, connect(f"{base}/channels/voice/twilio/stream") as ws:
        ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        ws.send(frame)
        assert close_code(ws) == 1008
    assert voice_events(voice_hearth) == []  # no session was opened, nothing changed
    assert_one_quiet_log_line(caplog)


@pytest.mark.parametrize("frame", [
    f"{SECRET} {{",
    SECRET.encode(),
    json.dumps([SECRET]),
    json.dumps({"event": "media", "media": SECRET}),
    json.dumps({"event": "media", "media": {"payload": 160}}),
    json.dumps({"event": "media", "media": {"payload": SECRET + "!!"}}),
    json.dumps({"event": 3}),
    json.dumps(media_start_frame(CALL, "1", "0" * 64)),
], ids=["not_json", "binary", "json_list", "media_not_an_object", "payload_a_number", "payload_not_base64",
        "event_a_number", "second_start"])
def test_u3_e10_a_bad_frame_during_a_call_closes_with_1008_and_keeps_what_was_said(voice_hearth, frame, caplog):
    caplog.set_level(logging.INFO)
    me = voice_hearth.scope()
    contact_id = robin_id(voice_hearth)
    tone = base64.b64encode(mulaw_tone()).decode()
    with served(voice_hearth) as base, connect(f"{base}/channels/voice/twilio/stream") as ws:
        ws.send(json.dumps(media_start_frame(CALL, str(contact_id), stream_token(TOKEN, CALL, contact_id))))
        for _ in range(8):
            ws.send(json.dumps({"event": "media", "streamSid": "MZ1", "media": {"track": "inbound", "payload": tone}}))
        until(ws, lambda m: m.get("mark", {}).get("name") == "assistant-transcript")
        ws.send(json.dumps({"event": "mark", "streamSid": "MZ1", "mark": {"name": "user-transcript"}}))  # Twilio's echo
        ws.send(frame)
        assert close_code(ws) == 1008
    [conversation] = me.conversations.list()
    kept = [(m.role, m.channel) for m in me.conversations.messages(conversation.id) if m.kind == "chat"]
    assert kept == [("user", "voice"), ("assistant", "voice")]
    kind, payload = voice_events(voice_hearth)[-1]
    assert kind == "voice.ended" and json.loads(payload) == {"reason": "invalid", "turns": 2}
    assert voice_span_reasons(voice_hearth) == ["voice_invalid"]
    assert_one_quiet_log_line(caplog)


@pytest.mark.parametrize("opening", [[], [{"event": "connected", "protocol": "Call", "version": "1.0.0"}]],
                         ids=["silent", "connected_only"])
def test_u3_e10_a_media_stream_without_a_start_frame_is_closed_after_the_timeout(voice_hearth, opening, monkeypatch,
                                                                                 caplog):
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(voice_server, "START_TIMEOUT_SECONDS", 0.3)
    with served(voice_hearth) as base, connect(f"{base}/channels/voice/twilio/stream") as ws:
        began = time.monotonic()
        for frame in opening:
            ws.send(json.dumps(frame))
        assert close_code(ws, within=5) == 1008
        assert time.monotonic() - began < 4
    assert voice_events(voice_hearth) == []
    assert_one_quiet_log_line(caplog)


# -- U7: one session per call, and a silent stream is closed -------------------------------------------
def test_u7_a_start_replayed_on_a_second_socket_or_after_the_call_closes_with_1008(voice_hearth, caplog):
    caplog.set_level(logging.INFO)
    contact_id = robin_id(voice_hearth)
    start = json.dumps(media_start_frame(CALL, str(contact_id), stream_token(TOKEN, CALL, contact_id)))
    tone = base64.b64encode(mulaw_tone()).decode()
    with served(voice_hearth) as base:
        with connect(f"{base}/channels/voice/twilio/stream") as first:
            first.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
            first.send(start)
            for _ in range(8):
                first.send(json.dumps({"event": "media", "streamSid": "MZ1", "media": {"track": "inbound",
                                                                                       "payload": tone}}))
            until(first, lambda m: m.get("mark", {}).get("name") == "assistant-transcript", within=60)
            with connect(f"{base}/channels/voice/twilio/stream") as replay:  # the same valid start, live call
                replay.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
                replay.send(start)
                assert close_code(replay) == 1008
            first.send(json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": tone}}))
            first.send(json.dumps({"event": "stop", "sequenceNumber": "99", "streamSid": "MZ1",
                                   "stop": {"accountSid": SID, "callSid": CALL}}))
            assert close_code(first) == 1000
        with connect(f"{base}/channels/voice/twilio/stream") as late:  # replayed after the call ended
            late.send(start)
            assert close_code(late) == 1008
    # One session was opened and ended normally; the replays opened nothing.
    assert [kind for kind, _ in voice_events(voice_hearth)] == ["voice.started", "voice.ended"]
    assert json.loads(voice_events(voice_hearth)[-1][1])["reason"] == "ended"
    refused = [r.getMessage() for r in caplog.records if "already has a session" in r.getMessage()]
    assert len(refused) == 2 and CALL not in " ".join(r.getMessage() for r in caplog.records)


def test_u7_a_started_stream_without_media_is_closed_after_the_idle_timeout(tmp_path, realtime, provider,
                                                                            caplog):
    caplog.set_level(logging.INFO)
    settings = Settings.resolve({
        "home": str(tmp_path / "home"), "openai_api_key": "sk-server-only", "provider": "offline",
        "realtime_url": realtime.url, "public_url": PUBLIC, "twilio_account_sid": SID,
        "twilio_auth_token": TOKEN}, environ={"HEARTH_VOICE_IDLE_SECONDS": "1"})
    assert settings.voice_idle_seconds == 1
    assert Settings.resolve({"home": str(tmp_path / "other")}, environ={}).voice_idle_seconds == 30
    h = Hearth(settings, provider=provider)
    try:
        me = h.scope()
        me.contacts.trust("sms", ROBIN, me.personas.create("elion", "Elion").id)
        contact_id = robin_id(h)
        tone = base64.b64encode(mulaw_tone()).decode()
        with served(h) as base, connect(f"{base}/channels/voice/twilio/stream") as ws:
            ws.send(json.dumps(media_start_frame(CALL, str(contact_id), stream_token(TOKEN, CALL, contact_id))))
            began = time.monotonic()
            for _ in range(4):  # audio keeps it open; marks and DTMF do not
                time.sleep(0.3)
                ws.send(json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": tone}}))
            ws.send(json.dumps({"event": "mark", "streamSid": "MZ1", "mark": {"name": "user-transcript"}}))
            ws.send(json.dumps({"event": "dtmf", "streamSid": "MZ1", "dtmf": {"track": "inbound_track",
                                                                               "digit": "1"}}))
            silent = time.monotonic()
            assert close_code(ws, within=10) == 1008
            closed = time.monotonic()
        assert closed - began > 2.1  # the media frames kept it open well past one idle period
        assert 0.8 < closed - silent < 5
        kind, payload = voice_events(h)[-1]
        assert kind == "voice.ended" and json.loads(payload)["reason"] == "idle"
        assert voice_span_reasons(h) == ["voice_idle"]
    finally:
        h.close()
