"""The Responses API working chain (E7), through the official openai SDK against the fake server
speaking the real wire format: previous_response_id chaining, server-side compaction, Compact now
with its replacement input, the 409 while a reply or compaction runs, and the header figures.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from hearth import Conflict, Hearth, InvalidInput, Settings
from hearth.cli import cli
from hearth.continuity.timeline import capsules
from hearth.server import create_app
from tests.test_server import serve_in_thread

CAPSULE_JSON = json.dumps({"facts": ["The person likes rain."], "commitments": [], "unresolved": [],
                           "corrections": [], "preferences": [], "cross_channel": []})


def responses_settings(tmp_path, fake) -> Settings:
    return Settings.resolve({"home": str(tmp_path / "home"), "provider": "openai", "model": "gpt-4.1",
                             "base_url": fake.openai_base_url, "openai_api_key": "sk-test",
                             "input_token_limit": 32_000, "compaction_threshold": 0.5,
                             "capsule_recent_turns": 2}, environ={})


@pytest.fixture
def chained(tmp_path, fake_provider_server):
    hearth = Hearth(responses_settings(tmp_path, fake_provider_server))
    me = hearth.scope()
    chat = me.conversations.create(me.personas.create("elion", "Elion").id)
    yield hearth, me, chat, fake_provider_server
    hearth.close()


def bodies(fake, path="/v1/responses"):
    return [r.body for r in fake.requests if r.path == path]


def compacted_events(hearth):
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute("SELECT payload FROM events WHERE kind = 'context.compacted'")]


def test_e7_turns_continue_with_previous_response_id_and_every_request_enables_compaction(chained):
    hearth, me, chat, fake = chained
    fake.script(response_id="resp_1")
    me.send(chat.id, "First message")
    fake.script(response_id="resp_2")
    me.send(chat.id, "Second message")
    first, second = bodies(fake)
    assert "previous_response_id" not in first
    assert second["previous_response_id"] == "resp_1"
    assert second["input"] == [{"role": "user", "content": "Second message"}]  # the server holds the rest
    for body in (first, second):
        assert body["context_management"] == [{"type": "compaction", "compact_threshold": 16_000}]
    # A tool continuation chains from the round that asked for the tool, compaction enabled too.
    fake.script(response_id="resp_3", text=[], tool_calls=[("call_1", "search_past_conversations",
                                                            {"query": "rain"})])
    fake.script(response_id="resp_4")
    me.send(chat.id, "What did we say about rain?")
    asked, continued = bodies(fake)[-2:]
    assert asked["previous_response_id"] == "resp_2"
    assert continued["previous_response_id"] == "resp_3"
    assert [item["type"] for item in continued["input"]] == ["function_call_output"]
    assert continued["context_management"] == first["context_management"]
    fake.script(response_id="resp_5")
    me.send(chat.id, "And now?")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_4"


def test_e7_compact_now_keeps_its_replacement_input_until_the_next_successful_turn(chained):
    hearth, me, chat, fake = chained
    for n in range(3):
        fake.script(response_id=f"resp_{n}")
        me.send(chat.id, f"Turn {n}: I like rain.")
    fake.script(response_id="resp_unused")  # the compaction endpoint's answer
    fake.script(text=[CAPSULE_JSON])  # the capsule helper's model call
    result = me.timeline.compact(chat.id)
    compact_body = bodies(fake, "/v1/responses/compact")[-1]
    assert compact_body["previous_response_id"] == "resp_2" and compact_body["model"] == "gpt-4.1"
    assert compacted_events(hearth) == [{"mode": "manual", "items": 1, "input_tokens": 42, "output_tokens": 7}]
    capsule = me.timeline.capsule(chat.id)
    assert result.capsule_id == capsule.id and capsule.source == "model"  # refreshed by the compaction

    fake.script(status=500)  # the next turn fails: the replacement input is kept
    failed = list(me.send_stream(chat.id, "After compaction"))
    assert failed[-1].type == "error"
    fake.script(response_id="resp_after")
    me.send(chat.id, "Try again")
    for body in bodies(fake)[-2:]:
        assert "previous_response_id" not in body
        assert body["input"][0] == {"type": "compaction", "id": "cmp_fake_1",
                                    "encrypted_content": "gAAAA-fake-compacted-state"}
    assert bodies(fake)[-1]["input"][-2:] == [{"role": "user", "content": "After compaction"},
                                              {"role": "user", "content": "Try again"}]
    fake.script(response_id="resp_next")
    me.send(chat.id, "Back to normal")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_after"  # the replacement input was spent
    assert bodies(fake)[-1]["input"] == [{"role": "user", "content": "Back to normal"}]
    context = me.timeline.context(chat.id)
    assert context.capsule_active and context.last_compaction_at and not context.replacement_input_pending


def test_e7_server_side_compaction_is_recorded_and_queues_a_capsule_refresh(chained):
    hearth, me, chat, fake = chained
    fake.script(compaction=True, input_tokens=12_000)
    me.send(chat.id, "A long conversation")
    assert compacted_events(hearth) == [{"mode": "auto"}]
    with hearth.store.read() as conn:
        jobs = [json.loads(r[0]) for r in conn.execute("SELECT payload FROM jobs WHERE kind = ?", (capsules.JOB_KIND,))]
    assert jobs == [{"conversation_id": chat.id, "reason": "compaction"}]
    context = me.timeline.context(chat.id)
    assert context.threshold_kind == "compaction" and context.threshold_tokens == 16_000
    assert context.percent == 75.0 and context.input_tokens == 12_000


def test_e7_compact_now_is_refused_with_409_while_a_reply_or_compaction_runs(chained):
    hearth, me, chat, fake = chained
    fake.script(response_id="resp_0")
    me.send(chat.id, "Hello")
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        fake.script(delay=1.5, response_id="resp_slow")
        sending = threading.Thread(target=lambda: httpx.post(
            f"{base}/api/conversations/{chat.id}/messages", json={"text": "A slow reply"}, timeout=20).read())
        sending.start()
        deadline = time.monotonic() + 10
        while httpx.get(f"{base}/api/conversations/{chat.id}/context").json()["running"] != "reply":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        refused = httpx.post(f"{base}/api/conversations/{chat.id}/compact", json={})
        assert refused.status_code == 409 and refused.json()["error"] == "conflict"
        assert "reply" in refused.json()["detail"]
        sending.join(20)
        assert bodies(fake, "/v1/responses/compact") == [] and compacted_events(hearth) == []

        # And while a compaction runs, a new message is refused before anything is saved.
        fake.script(delay=1.5)
        fake.script(text=[CAPSULE_JSON])
        compacting = threading.Thread(target=lambda: httpx.post(
            f"{base}/api/conversations/{chat.id}/compact", json={}, timeout=20))
        compacting.start()
        while httpx.get(f"{base}/api/conversations/{chat.id}/context").json()["running"] != "compaction":
            assert time.monotonic() < deadline + 10
            time.sleep(0.05)
        count = len(me.conversations.messages(chat.id))
        busy = httpx.post(f"{base}/api/conversations/{chat.id}/messages", json={"text": "Now?"})
        assert busy.status_code == 409 and "compacted" in busy.json()["detail"]
        again = httpx.post(f"{base}/api/conversations/{chat.id}/compact", json={})
        assert again.status_code == 409
        assert len(me.conversations.messages(chat.id)) == count
        compacting.join(20)
        header = httpx.get(f"{base}/api/conversations/{chat.id}/context").json()
        assert header["last_compaction_at"] and header["running"] == "idle"
    with pytest.raises(Conflict):
        with hearth.activity.compaction(chat.id):
            list(me.send_stream(chat.id, "refused"))


def test_e7_compact_now_needs_the_responses_provider_and_answers_clearly(me, persona, tmp_path, monkeypatch,
                                                                         fake_provider_server):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Hello")
    with pytest.raises(InvalidInput, match="Compact now needs the OpenAI Responses provider"):
        me.timeline.compact(chat.id)
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "cli"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["chat", "-m", "Hello"]).exit_code == 0
    offline = runner.invoke(cli, ["compact", "1"])
    assert offline.exit_code == 2 and offline.output.startswith("Error: Compact now needs")
    monkeypatch.setenv("HEARTH_PROVIDER", "openai")
    monkeypatch.setenv("HEARTH_BASE_URL", fake_provider_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_provider_server.script(text=[CAPSULE_JSON])
    done = runner.invoke(cli, ["compact", "1"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Compacted conversation 1: 2 replacement items")  # the user turn + state
    assert runner.invoke(cli, ["compact", "999"]).output.strip() == "Error: no conversation 999"


def test_e7_e11_an_inner_turn_chains_records_usage_and_compaction_like_any_reply(chained):
    hearth, me, chat, fake = chained
    fake.script(response_id="resp_1")
    me.send(chat.id, "Good night")
    fake.script(response_id="resp_inner", compaction=True, input_tokens=12_000)
    inner = me.inner_turn(chat.id, "Write a short morning message.", metadata={"activation": "morning"})
    assert bodies(fake)[-1]["previous_response_id"] == "resp_1"
    # The person's next turn chains from what the companion said on its own.
    fake.script(response_id="resp_3")
    me.send(chat.id, "Morning!")
    assert bodies(fake)[-1]["previous_response_id"] == "resp_inner"
    with hearth.store.read() as conn:
        usage = [(r[0], json.loads(r[1])["input"]) for r in conn.execute(
            "SELECT channel, payload FROM events WHERE kind = 'context.usage' ORDER BY id")]
        jobs = [json.loads(r[0]) for r in conn.execute("SELECT payload FROM jobs WHERE kind = ?", (capsules.JOB_KIND,))]
    assert [channel for channel, _n in usage] == ["web", "inner", "web"] and usage[1][1] == 12_000
    assert compacted_events(hearth) == [{"mode": "auto"}]
    assert jobs == [{"conversation_id": chat.id, "reason": "compaction"}]
    assert inner.channel == "inner"


def test_e11_an_inner_turn_over_the_capsule_threshold_queues_a_capsule_refresh(chained):
    hearth, me, chat, fake = chained
    fake.script(response_id="resp_inner", input_tokens=30_000)
    me.inner_turn(chat.id, "Reflect on the week.", metadata={"activation": "reflection"})
    with hearth.store.read() as conn:
        jobs = [json.loads(r[0]) for r in conn.execute("SELECT payload FROM jobs WHERE kind = ?", (capsules.JOB_KIND,))]
    assert jobs == [{"conversation_id": chat.id, "reason": "threshold"}]


@pytest.mark.parametrize("configured, expected", [
    ({}, [{"type": "compaction", "compact_threshold": 25_600}]),  # the default: 0.8 of 32,000
    ({"compaction_threshold": 0}, None),
])
def test_e12_server_side_compaction_is_on_by_default_and_0_turns_it_off(tmp_path, fake_provider_server,
                                                                        configured, expected):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "provider": "openai", "model": "gpt-4.1",
                                 "base_url": fake_provider_server.openai_base_url, "openai_api_key": "sk-test",
                                 "input_token_limit": 32_000, **configured}, environ={})
    assert settings.compaction_threshold == (0.8 if not configured else 0)
    hearth = Hearth(settings)
    try:
        me = hearth.scope()
        chat = me.conversations.create(me.personas.create("elion", "Elion").id)
        fake_provider_server.script(response_id="resp_1")
        me.send(chat.id, "First message")
        fake_provider_server.script(response_id="resp_2")
        me.send(chat.id, "Second message")
        first, second = bodies(fake_provider_server)
        assert second["previous_response_id"] == "resp_1"
        for body in (first, second):  # the initial request and every continuation
            assert body.get("context_management") == expected
        header = me.timeline.context(chat.id)
        assert header.threshold_kind == ("compaction" if expected else "input_limit")
    finally:
        hearth.close()
