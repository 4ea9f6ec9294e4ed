"""The OpenAI-compatible endpoint (X1) through the official openai SDK against a real `hearth serve`.

The server runs as its own process on a free port with the offline provider; the tests read its
database file through the library to see what was stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from hearth import Hearth, Settings
from hearth.server import create_app
from hearth.store import catalog
from tests.test_serve import free_port


def _settings(home: Path) -> Settings:
    return Settings.resolve({"home": str(home)}, environ={})


class Served:
    def __init__(self, home: Path, port: int, token: str, other_token: str, revoked: str):
        self.home, self.port, self.token, self.other_token, self.revoked = home, port, token, other_token, revoked

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self, token: str | None = None, **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=token or self.token, max_retries=0, **kw)

    def hearth(self) -> Hearth:
        return Hearth(_settings(self.home))


def start_server(home: Path, extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("HEARTH_")}
    env |= {"HEARTH_HOME": str(home), **(extra_env or {})}
    process = subprocess.Popen([sys.executable, "-m", "hearth", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120  # a cold start on a loaded machine takes tens of seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read().decode() if process.stderr else "server exited")
        try:
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
            return process, port
        except httpx.TransportError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError("server did not open its port")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("x1") / "home"
    with Hearth(_settings(home)) as hearth:
        owner = hearth.scope()
        owner.personas.create("elion", "Elion")
        owner.personas.create("sage", "Sage")
        token = hearth.users.create_token(owner.user_id, "sdk")
        revoked = hearth.users.create_token(owner.user_id, "old")
        hearth.users.revoke_token(owner.user_id, hearth.users.list_tokens(owner.user_id)[-1]["id"])
        other = hearth.users.create("guest")
        hearth.scope(other.id).personas.create("guestbot", "Guest bot")
        other_token = hearth.users.create_token(other.id, "guest")
    process, port = start_server(home)
    try:
        yield Served(home, port, token, other_token, revoked)
    finally:
        stop_server(process)


def chat_rows(served: Served, conversation_id: int) -> list[tuple[str, str]]:
    with served.hearth() as hearth:
        return [(m.role, m.content) for m in hearth.scope().conversations.messages(conversation_id)
                if m.kind == "chat"]


def table_counts(served: Served) -> dict[str, int]:
    """Rows per table once the server's worker is idle (it embeds earlier tests' turns meanwhile)."""
    deadline = time.monotonic() + 120  # a cold start on a loaded machine takes tens of seconds
    while True:
        with served.hearth() as hearth:
            busy = hearth.store.connection().execute(
                "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running') AND run_after <= ?",
                (time.strftime("%Y-%m-%dT%H:%M:%S.999999Z", time.gmtime()),)).fetchone()[0]
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    with served.hearth() as hearth:
        conn = hearth.store.connection()
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in catalog.tables(conn)}


# -- models -----------------------------------------------------------------------------------------
def test_x1_models_lists_the_callers_personas_as_models(served):
    ids = [m.id for m in served.client().models.list()]
    assert ids == ["elion", "sage"]
    assert served.client().models.retrieve("sage").owned_by == "hearth"
    assert [m.id for m in served.client(served.other_token).models.list()] == ["guestbot"]
    with pytest.raises(openai.NotFoundError):
        served.client(served.other_token).models.retrieve("elion")  # another user's persona (G2)


# -- the send path, sync / streaming / async ----------------------------------------------------------
def test_x1_sync_completion_runs_the_send_path_and_keeps_the_system_prompt(served):
    raw = served.client().chat.completions.with_raw_response.create(
        model="elion", messages=[{"role": "system", "content": "Speak softly, like a lighthouse keeper."},
                                 {"role": "user", "content": "Good evening, keeper"}])
    completion = raw.parse()
    conversation_id = int(raw.headers["x-hearth-conversation-id"])
    reply = completion.choices[0].message
    assert completion.object == "chat.completion" and completion.model == "elion"
    assert completion.choices[0].finish_reason == "stop" and reply.role == "assistant"
    assert reply.content.startswith("[offline reply") and "Good evening, keeper" in reply.content
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    assert chat_rows(served, conversation_id) == [("user", "Good evening, keeper"), ("assistant", reply.content)]
    with served.hearth() as hearth:
        me = hearth.scope()
        conversation = me.conversations.get(conversation_id)
        assert me.personas.get(conversation.persona_id).name == "elion"
        prompt = me.stored_prompt(conversation_id)
        assert "## Custom instructions\nSpeak softly, like a lighthouse keeper." in prompt
        assert me.request_size(conversation_id)["total_tokens"] > 0  # the size report of the full send path
        channels = {m.channel for m in me.conversations.messages(conversation_id)}
        assert channels == {"api"}


def test_x1_streaming_completion_through_the_sdk(served):
    with served.client().chat.completions.with_streaming_response.create(
            model="sage", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Tell me about the tide tables"}]) as response:
        conversation_id = int(response.headers["x-hearth-conversation-id"])
        chunks = list(response.parse())
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1
    assert chat_rows(served, conversation_id) == [("user", "Tell me about the tide tables"), ("assistant", text)]


def test_x1_async_client_streams_and_answers(served):
    async def run() -> tuple[str, str]:
        client = openai.AsyncOpenAI(base_url=served.base_url, api_key=served.token, max_retries=0)
        done = await client.chat.completions.create(
            model="elion", messages=[{"role": "user", "content": "Async hello one"}],
            extra_headers={"X-Hearth-Conversation": "async-chat"})
        stream = await client.chat.completions.create(
            model="elion", stream=True, extra_headers={"X-Hearth-Conversation": "async-chat"},
            messages=[{"role": "user", "content": "Async hello one"},
                      {"role": "assistant", "content": done.choices[0].message.content},
                      {"role": "user", "content": "Async hello two"}])
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        await client.close()
        return done.choices[0].message.content, "".join(parts)

    first, second = asyncio.run(run())
    assert "Async hello one" in first and "Async hello two" in second
    with served.hearth() as hearth:
        me = hearth.scope()
        (conversation,) = [c for c in me.conversations.list() if c.title == "Async hello one"]
    assert chat_rows(served, conversation.id) == [
        ("user", "Async hello one"), ("assistant", first), ("user", "Async hello two"), ("assistant", second)]


# -- pinning ------------------------------------------------------------------------------------------
def test_x1_header_pins_each_client_chat_to_one_conversation(served):
    client = served.client()

    def say(chat: str, text: str) -> int:
        raw = client.chat.completions.with_raw_response.create(
            model="elion", messages=[{"role": "user", "content": text}],
            extra_headers={"X-Hearth-Conversation": chat})
        return int(raw.headers["x-hearth-conversation-id"])

    a1, b1 = say("chat-a", "first in a"), say("chat-b", "first in b")
    a2 = say("chat-a", "second in a")
    assert a1 == a2 != b1
    assert [t for r, t in chat_rows(served, a1) if r == "user"] == ["first in a", "second in a"]
    # The common header names name the same chat.
    for header in ("X-Conversation-Id", "X-OpenWebUI-Chat-Id"):
        raw = client.chat.completions.with_raw_response.create(
            model="elion", messages=[{"role": "user", "content": f"via {header}"}], extra_headers={header: "chat-a"})
        assert int(raw.headers["x-hearth-conversation-id"]) == a1
    assert len([r for r, _ in chat_rows(served, a1) if r == "user"]) == 4


def test_x1_fingerprint_pins_a_resent_history_and_tells_same_openings_apart(served):
    client = served.client()

    def turn(history: list[dict]) -> tuple[int, str]:
        raw = client.chat.completions.with_raw_response.create(model="sage", messages=history)
        return int(raw.headers["x-hearth-conversation-id"]), raw.parse().choices[0].message.content

    greeting = {"role": "assistant", "content": "Welcome back to the harbour."}  # a card's first message
    opening = [{"role": "system", "content": "You are Sage."}, greeting,
               {"role": "user", "content": "Fingerprint opening line"}]
    c1, r1 = turn(opening)
    c1b, r1b = turn(opening + [{"role": "assistant", "content": r1}, {"role": "user", "content": "and the second turn"}])
    assert c1b == c1
    # A second chat with the same opening gets its own conversation once the first one moved on.
    c2, r2 = turn(opening)
    assert c2 != c1
    c1c, _ = turn(opening + [{"role": "assistant", "content": r1}, {"role": "user", "content": "and the second turn"},
                             {"role": "assistant", "content": r1b}, {"role": "user", "content": "third turn of chat one"}])
    assert c1c == c1
    assert [t for r, t in chat_rows(served, c1) if r == "user"] == [
        "Fingerprint opening line", "and the second turn", "third turn of chat one"]
    assert [t for r, t in chat_rows(served, c2) if r == "user"] == ["Fingerprint opening line"]


def test_x1_client_regenerate_answers_the_same_turn_again_without_a_second_user_message(served):
    client = served.client()
    history = [{"role": "user", "content": "Regenerate me please"}]
    headers = {"X-Hearth-Conversation": "regen-chat"}
    first = client.chat.completions.with_raw_response.create(model="elion", messages=history, extra_headers=headers)
    conversation_id = int(first.headers["x-hearth-conversation-id"])
    reply = first.parse().choices[0].message.content
    again = client.chat.completions.create(model="elion", messages=history, extra_headers=headers)
    assert again.choices[0].message.content
    rows = chat_rows(served, conversation_id)
    # The regenerated reply is another version of the same turn (W2): the thread keeps one reply,
    # the new one, which is what later requests read; the first stays as a version.
    assert [r for r, _ in rows] == ["user", "assistant"]
    assert rows[-1][1] == again.choices[0].message.content
    # Repeating the same words as a new turn (the client holds Hearth's reply) is a new message.
    client.chat.completions.create(model="elion", extra_headers=headers, messages=history + [
        {"role": "assistant", "content": again.choices[0].message.content},
        {"role": "user", "content": "Regenerate me please"}])
    assert [r for r, _ in chat_rows(served, conversation_id)] == ["user", "assistant", "user", "assistant"]
    with served.hearth() as hearth:
        me = hearth.scope()
        messages = me.conversations.messages(conversation_id)
        assert [m.metadata.get("regenerated", False) for m in messages if m.role == "assistant"] == [True, False]
        assert [a.content for a in me.alternatives(messages[1].id)] == [reply, again.choices[0].message.content]


def test_x1_changing_the_client_system_prompt_rebuilds_that_conversations_stored_prompt(served):
    client = served.client()
    headers = {"X-Hearth-Conversation": "system-change"}
    raw = client.chat.completions.with_raw_response.create(
        model="elion", extra_headers=headers,
        messages=[{"role": "system", "content": "Old instructions."}, {"role": "user", "content": "hi"}])
    conversation_id = int(raw.headers["x-hearth-conversation-id"])
    client.chat.completions.create(model="elion", extra_headers=headers, messages=[
        {"role": "developer", "content": "New instructions."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": raw.parse().choices[0].message.content}, {"role": "user", "content": "again"}])
    with served.hearth() as hearth:
        me = hearth.scope()
        prompt = me.stored_prompt(conversation_id)
        assert "New instructions." in prompt and "Old instructions." not in prompt
        assert "Custom instructions" not in (me.personas.by_name("elion").custom_instructions or "")
        kinds = [r[0] for r in hearth.store.connection().execute(
            "SELECT kind FROM events WHERE conversation_id = ? ORDER BY id", (conversation_id,))]
        assert kinds.count("conversation.instructions_set") == 2
        # The other conversations of the persona keep the persona's own (empty) instructions.
        others = [c.id for c in me.conversations.list() if c.id != conversation_id and me.stored_prompt(c.id)]
        assert others and all("New instructions." not in me.stored_prompt(c) for c in others)


# -- errors and auth --------------------------------------------------------------------------------
def test_x1_token_decides_the_user_and_bad_tokens_answer_401(served):
    for token in ("hth_not-a-real-token", served.revoked, "sk-openai-style"):
        with pytest.raises(openai.AuthenticationError) as bad:
            served.client(token).chat.completions.create(model="elion", messages=[{"role": "user", "content": "x"}])
        assert bad.value.body["type"] == "authentication_error" and bad.value.body["code"] == "invalid_api_key"
    raw = httpx.get(served.base_url + "/models", timeout=5)  # open mode still needs a token here
    assert raw.status_code == 401 and set(raw.json()["error"]) == {"message", "type", "param", "code"}
    # The guest's token answers as the guest: the owner's persona is an unknown model to them.
    with pytest.raises(openai.NotFoundError) as foreign:
        served.client(served.other_token).chat.completions.create(model="elion", messages=[{"role": "user", "content": "x"}])
    assert foreign.value.code == "model_not_found"
    raw = served.client(served.other_token).chat.completions.with_raw_response.create(
        model="guestbot", messages=[{"role": "user", "content": "guest words"}])
    with served.hearth() as hearth:
        guest = hearth.scope(hearth.users.by_name("guest").id)
        assert guest.conversations.get(int(raw.headers["x-hearth-conversation-id"])).title == "guest words"


@pytest.mark.parametrize("body, status, param", [
    ({"model": "elion", "messages": []}, 400, "messages"),
    ({"model": "elion"}, 400, "messages"),
    ({"model": "elion", "messages": [{"role": "system", "content": "only a system prompt"}]}, 400, None),
    ({"model": "elion", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}, 400, None),
    ({"model": "elion", "messages": [{"role": "robot", "content": "x"}]}, 400, "messages.0.role"),
    ({"model": "elion", "messages": [{"role": "user", "content": "   "}]}, 400, None),
    ({"model": "elion", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, None),
    ({"model": "elion", "n": 2, "messages": [{"role": "user", "content": "x"}]}, 400, "n"),
    ({"model": "elion", "messages": "hello"}, 400, "messages"),
    ({"model": "nobody", "messages": [{"role": "user", "content": "x"}]}, 404, None),
    # U3: a NUL is refused under the field that carries it, wherever the text would have gone.
    ({"model": "elion", "messages": [{"role": "user", "content": "tea\x00time"}]}, 400, "messages.0.content"),
    ({"model": "elion", "messages": [{"role": "system", "content": "be\x00kind"},
                                     {"role": "user", "content": "x"}]}, 400, "messages.0.content"),
    ({"model": "elion", "messages": [{"role": "user", "content": [{"type": "text", "text": "ok"},
                                                                  {"type": "text", "text": "\x00"}]}]},
     400, "messages.0.content"),
    ({"model": "el\x00ion", "messages": [{"role": "user", "content": "x"}]}, 400, "model"),
    # Only JSON booleans are booleans: "yes", 1 or "false" would otherwise be read as true.
    ({"model": "elion", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}, 400, "stream"),
    ({"model": "elion", "stream": 1, "messages": [{"role": "user", "content": "x"}]}, 400, "stream"),
    ({"model": "elion", "stream": "false", "messages": [{"role": "user", "content": "x"}]}, 400, "stream"),
    ({"model": "elion", "stream": True, "stream_options": {"include_usage": "yes"},
      "messages": [{"role": "user", "content": "x"}]}, 400, "stream_options.include_usage"),
])
def test_x1_u3_bad_requests_answer_openai_errors_and_change_nothing(served, body, status, param):
    before = table_counts(served)
    response = httpx.post(served.base_url + "/chat/completions", json=body, timeout=10,
                          headers={"Authorization": f"Bearer {served.token}"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert table_counts(served) == before


def test_x1_u3_nul_in_content_is_refused_as_that_message_through_the_sdk(served):
    before = table_counts(served)
    with pytest.raises(openai.BadRequestError) as refused:
        served.client().chat.completions.create(model="elion", messages=[
            {"role": "user", "content": "first"}, {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "tea\x00time"}])
    assert refused.value.param == "messages.2.content"
    assert refused.value.body["message"] == "messages.2.content: contains a NUL character (at 3)"  # not "title"
    with pytest.raises(openai.BadRequestError) as streamed:
        served.client().chat.completions.create(model="elion", stream=True,
                                                messages=[{"role": "user", "content": "tea\x00time"}])
    assert streamed.value.param == "messages.0.content"
    assert table_counts(served) == before


def test_x1_malformed_and_oversized_bodies_answer_400_and_413(served):
    headers = {"Authorization": f"Bearer {served.token}", "Content-Type": "application/json"}
    bad = httpx.post(served.base_url + "/chat/completions", content=b'{"model": "elion", "messages": [', headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
    huge = httpx.post(served.base_url + "/chat/completions", content=b"x" * 2_000_000, headers=headers)
    assert huge.status_code == 413 and huge.json()["error"]["type"] == "invalid_request_error"


def test_x1_unsupported_parameters_are_ignored(served):
    completion = served.client().chat.completions.create(
        model="elion", messages=[{"role": "user", "content": "ignore my knobs"}], temperature=0.2, top_p=0.5,
        max_tokens=10, stop=["\n"], presence_penalty=0.1, frequency_penalty=0.1, seed=1, user="someone",
        logit_bias={"1": 1}, response_format={"type": "text"},
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        extra_body={"top_k": 40, "repetition_penalty": 1.1})
    assert "ignore my knobs" in completion.choices[0].message.content


def test_x1_provider_models_are_listed_only_when_the_owner_enables_it(tmp_path):
    home = tmp_path / "home"
    with Hearth(_settings(home)) as hearth:
        owner = hearth.scope()
        owner.personas.create("elion", "Elion")
        token = hearth.users.create_token(owner.user_id, "sdk")
    for enabled, expected in (("", ["elion"]), ("1", ["elion", "offline"])):
        app = create_app(Settings.resolve({"home": str(home), "v1_provider_models": enabled}, environ={}))
        client = TestClient(app)
        headers = {"Authorization": f"Bearer {token}"}
        assert [m["id"] for m in client.get("/v1/models", headers=headers).json()["data"]] == expected
        answer = client.post("/v1/chat/completions", headers=headers,
                             json={"model": "offline", "messages": [{"role": "user", "content": "hello"}]})
        assert answer.status_code == (200 if enabled else 404)


# -- the exact wire format ---------------------------------------------------------------------------
GOLDEN = (
    'data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"elion",'
    '"system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    '"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"elion",'
    '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Reply "},'
    '"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"elion",'
    '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"1"},'
    '"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"elion",'
    '"system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],'
    '"usage":null}\n\n'
    'data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"elion",'
    '"system_fingerprint":null,"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,'
    '"total_tokens":105,"prompt_tokens_details":{"cached_tokens":0}}}\n\n'
    'data: [DONE]\n\n'
)


def test_x1_streamed_bytes_match_the_chat_completions_wire_format(hearth, me, persona):
    token = hearth.users.create_token(me.user_id, "golden")
    client = TestClient(create_app(hearth=hearth))
    response = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, json={
        "model": "elion", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hello"}]})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    raw = response.content.decode()
    ids = set(re.findall(r'"id":"(chatcmpl-[0-9a-f]{24})"', raw))
    assert len(ids) == 1
    normalized = re.sub(r'"created":\d+', '"created":0', raw.replace(ids.pop(), "chatcmpl-ID"))
    assert normalized == GOLDEN
    # Without include_usage no chunk carries a usage key.
    plain = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, json={
        "model": "elion", "stream": True, "messages": [{"role": "user", "content": "hello"}]}).content.decode()
    assert '"usage"' not in plain and plain.endswith('"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def test_x1_provider_failure_mid_stream_is_an_error_event_and_the_message_stays(hearth, me, persona, provider):
    from hearth.errors import ProviderError

    def failing(request):
        raise ProviderError("upstream timed out", "timeout", True)
        yield  # pragma: no cover

    provider.replies.append(failing)
    token = hearth.users.create_token(me.user_id, "fail")
    client = TestClient(create_app(hearth=hearth))
    headers = {"Authorization": f"Bearer {token}", "X-Hearth-Conversation": "failing"}
    body = {"model": "elion", "stream": True, "messages": [{"role": "user", "content": "will fail"}]}
    response = client.post("/v1/chat/completions", headers=headers, json=body)
    assert response.status_code == 200 and '"code":"provider_error"' in response.text
    assert "[DONE]" not in response.text
    conversation_id = int(response.headers["x-hearth-conversation-id"])
    assert [m.role for m in me.conversations.messages(conversation_id)] == ["user"]
    # The client's regenerate answers the saved message; it is not saved twice.
    provider.replies.append(failing)
    failed = client.post("/v1/chat/completions", headers=headers, json={**body, "stream": False})
    assert failed.status_code == 502 and failed.json()["error"]["type"] == "api_error"
    done = client.post("/v1/chat/completions", headers=headers, json={**body, "stream": False})
    assert done.status_code == 200
    assert [m.role for m in me.conversations.messages(conversation_id)] == ["user", "assistant"]


# -- no input answers a server error ------------------------------------------------------------------
def test_x1_arbitrary_request_bodies_answer_openai_errors_never_5xx(hearth, me, persona):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    token = hearth.users.create_token(me.user_id, "fuzz")
    client = TestClient(create_app(hearth=hearth), base_url="http://127.0.0.1")
    scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
        | st.text(max_size=20)
    anything = st.recursive(scalar, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
    part = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"])},
                                 optional={"text": anything | st.text()})
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "x"]) | anything},
        optional={"content": st.text() | st.lists(part, max_size=3) | anything, "name": anything})
    body = st.fixed_dictionaries(
        {"model": st.sampled_from(["elion", "nobody", ""]) | anything,
         "messages": st.lists(message, max_size=4) | anything},
        optional={"stream": st.booleans() | anything, "n": anything, "temperature": anything,
                  "stream_options": anything | st.fixed_dictionaries({"include_usage": anything})})
    chat_id = st.none() | st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body, chat_id)
    def check(payload, chat):
        headers = {"Authorization": f"Bearer {token}"} | ({"X-Hearth-Conversation": chat} if chat is not None else {})
        response = client.post("/v1/chat/completions", json=payload, headers=headers)
        assert response.status_code < 500, response.text
        if response.status_code >= 400:
            assert set(response.json()["error"]) == {"message", "type", "param", "code"}

    check()


def test_x1_u3_hostile_values_sweep_no_tracebacks_and_nothing_saved(hearth, me, persona, caplog):
    import logging

    token = hearth.users.create_token(me.user_id, "sweep")
    client = TestClient(create_app(hearth=hearth), base_url="http://127.0.0.1")
    valid = {"model": "elion", "stream": False, "stream_options": {"include_usage": False},
             "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]}
    hostile = ["a\x00b", "\ud800", "x" * 900_000, "", "yes", "true", 10**20, -1, 1, 1.5, None, [], {},
               ["a\x00"], {"$gt": ""}]
    places = {  # where each value goes: a top-level field, or a message's role or content
        "model": lambda v: {**valid, "model": v},
        "stream": lambda v: {**valid, "stream": v},
        "include_usage": lambda v: {**valid, "stream_options": {"include_usage": v}},
        "n": lambda v: {**valid, "n": v},
        "system": lambda v: {**valid, "messages": [{"role": "system", "content": v}, valid["messages"][1]]},
        "user": lambda v: {**valid, "messages": [valid["messages"][0], {"role": "user", "content": v}]},
        "part": lambda v: {**valid, "messages": [{"role": "user", "content": [{"type": "text", "text": v}]}]},
        "role": lambda v: {**valid, "messages": [{"role": v, "content": "hello"}]},
    }
    # Values a field legitimately takes (null for the optional ones, 1 for n, words for a message).
    fine = [("stream", None), ("n", None), ("n", 1), ("system", None), ("system", ""), ("system", [])] + [
        (place, word) for place in ("system", "user", "part") for word in ("yes", "true")]

    def count() -> dict[str, int]:
        conn = hearth.store.connection()
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("conversations", "messages", "client_chats", "proposals")}

    before = count()
    answers = []
    with caplog.at_level(logging.WARNING):
        for place, build in places.items():
            for value in hostile:
                if (place, value) in fine:
                    continue
                # json.dumps escapes a lone surrogate as \ud800, as a hostile client would send it.
                response = client.post("/v1/chat/completions", content=json.dumps(build(value)),
                                       headers={"Authorization": f"Bearer {token}",
                                                "Content-Type": "application/json"})
                answers.append((place, repr(value)[:30], response.status_code,
                                response.json().get("error", {}).get("message")))
    assert [a for a in answers if a[2] not in (400, 404, 413) or not a[3]] == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert count() == before
