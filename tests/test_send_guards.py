"""Send-path guards: K5 for every message of every request, R3 fixed tool names, one reply per
message under concurrent retries (PR5), and a request that cannot fit is refused (R1).
"""

from __future__ import annotations

import json
import threading

import pytest
from fastapi.testclient import TestClient

from hearth import Conflict, DispatchRefused, ProviderError
from hearth.prompt.dynamic import QUOTED_RECALL_HEADING, RECALL_HEADING
from hearth.providers.base import StreamEvent, ToolCall, Usage
from hearth.server import create_app

BASE = "http://127.0.0.1:8765"


def sent_text(request) -> str:
    return "\n".join(m.content for m in request.messages)


# -- K5 ----------------------------------------------------------------------------------------------
def test_k5_quoted_heading_in_history_is_rewritten_in_every_later_request(me, persona, provider):
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, f"I once typed {RECALL_HEADING} into a note")
    me.send(conversation.id, "and now something else")
    me.send(conversation.id, "and a third thing")
    for request in provider.requests:
        assert RECALL_HEADING not in "\n".join(m.content for m in request.messages if m.role != "system")
    later = provider.requests[-1]
    history = [m.content for m in later.messages if m.role == "user"]
    assert any(QUOTED_RECALL_HEADING in text for text in history[:-1]), "the quoted turn travels, rewritten"
    # An assistant turn quoting the heading is rewritten too.
    me.conversations.add_message(conversation.id, "assistant", f"You wrote {RECALL_HEADING} before.")
    me.send(conversation.id, "really?")
    assistant_turns = [m.content for m in provider.requests[-1].messages if m.role == "assistant"]
    assert RECALL_HEADING not in "\n".join(assistant_turns)
    assert any(QUOTED_RECALL_HEADING in t for t in assistant_turns)


def test_k5_branch_artifact_quoting_the_heading_is_rewritten_in_the_birth_period(me, persona, provider):
    source = me.conversations.create(persona.id, title="Notes")
    for i in range(4):
        me.conversations.add_message(source.id, "user", f"note {i}: {RECALL_HEADING} appears in my notebook")
        me.conversations.add_message(source.id, "assistant", f"reply {i}")
    branch = me.branch(source.id, "k5-branch").conversation
    artifact = me.conversations.messages(branch.id)[0]
    assert artifact.kind == "handoff_artifact" and RECALL_HEADING in artifact.content
    reply = me.send(branch.id, "hello again")  # the birth period: no reply in this thread yet
    assert reply.assistant_message.role == "assistant"
    request = provider.requests[-1]
    assert RECALL_HEADING not in "\n".join(m.content for m in request.messages if m.role != "system")
    assert QUOTED_RECALL_HEADING in sent_text(request)


# -- R3 ----------------------------------------------------------------------------------------------
def test_r3_a_tool_name_invented_by_the_model_is_unknown_in_sse_frames_and_ledger(hearth, me, persona, provider):
    invented = "exfiltrate_user_secrets_about_fleur"

    def call_tool(request):
        yield StreamEvent("tool_call", tool_call=ToolCall("c1", invented, {"q": "x"}))

    def answer(request):
        yield StreamEvent("text", text="done")
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=1))

    provider.replies += [call_tool, answer]
    conversation = me.conversations.create(persona.id)
    with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
        response = client.post(f"/api/conversations/{conversation.id}/messages", json={"text": "go"})
    assert response.status_code == 200
    assert invented not in response.text
    tool_frames = [json.loads(line[5:]) for line in response.text.splitlines()
                   if line.startswith("data:") and '"status"' in line]
    assert tool_frames and {f["name"] for f in tool_frames} == {"unknown"}
    payloads = [json.loads(r[0]) for r in hearth.store.connection().execute(
        "SELECT payload FROM events WHERE kind = 'tool.call'")]
    assert payloads and all(p["name"] == "unknown" for p in payloads)
    every_payload = " ".join(r[0] for r in hearth.store.connection().execute("SELECT payload FROM events"))
    assert invented not in every_payload
    # A real tool keeps its fixed name.
    provider.replies += [lambda r: iter([StreamEvent("tool_call", tool_call=ToolCall(
        "c2", "search_past_conversations", {"query": "x"}))]), answer]
    me.send(conversation.id, "again")
    names = [json.loads(r[0])["name"] for r in hearth.store.connection().execute(
        "SELECT payload FROM events WHERE kind = 'tool.call' ORDER BY id")]
    assert names == ["unknown", "search_past_conversations"]


# -- one reply per message under concurrent retries ---------------------------------------------------------
def test_pr5_two_concurrent_retries_for_one_unanswered_message_store_one_reply(hearth, me, persona, provider):
    def failing(request):
        raise ProviderError("rate limited", "rate_limit")
        yield  # pragma: no cover - makes this a generator

    conversation = me.conversations.create(persona.id)
    provider.replies.append(failing)
    with pytest.raises(ProviderError):
        me.send(conversation.id, "please answer")
    both_streaming = threading.Barrier(2, timeout=20)

    def slow(request):
        both_streaming.wait()  # both retries are past their checks and streaming at once
        yield StreamEvent("text", text="the one reply")

    provider.replies += [slow, slow]
    outcomes: list[object] = []

    def retry():
        try:
            outcomes.append(hearth.scope(me.user_id).retry(conversation.id))
        except Conflict as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    replies = [m for m in me.conversations.messages(conversation.id) if m.role == "assistant"]
    assert len(replies) == 1 and replies[0].content == "the one reply"
    assert sum(isinstance(o, Conflict) for o in outcomes) == 1
    assert "answered by another request" in str(next(o for o in outcomes if isinstance(o, Conflict)))
    # A later, ordinary retry has nothing left to answer.
    with pytest.raises(Conflict, match="no unanswered message"):
        me.retry(conversation.id)


# -- R1: a request that cannot fit is refused --------------------------------------------------------------
def test_r1_a_static_prompt_larger_than_the_input_limit_is_refused_not_sent(settings, provider):
    from hearth import Hearth

    with Hearth(settings.with_(input_token_limit=4_000), provider=provider) as hearth:
        me = hearth.scope()
        persona = me.personas.create("big", identity="x" * 20_000)  # about 5,000 tokens
        conversation = me.conversations.create(persona.id)
        with pytest.raises(DispatchRefused, match="input limit"):
            me.send(conversation.id, "hello")
        assert provider.requests == [], "nothing was dispatched"
        saved = me.conversations.messages(conversation.id)
        assert [m.role for m in saved] == ["user"]  # the message is kept and can be retried once it fits
        with TestClient(create_app(hearth.settings, hearth), base_url=BASE) as client:
            response = client.post(f"/api/conversations/{conversation.id}/retry")
        frames = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        assert frames[-1]["error"] == "dispatch_refused" and "input limit" in frames[-1]["detail"]
        assert provider.requests == []
        # Shortened, it goes through.
        me.update_persona(persona.id, identity="I am brief.")
        assert me.retry(conversation.id).assistant_message.role == "assistant"
