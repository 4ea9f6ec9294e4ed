"""Continuity capsules (E3) and context events (E6)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from hearth import Hearth, Settings
from hearth.continuity.timeline import capsules
from hearth.memory.helpers import HelperOutputError, ModelHelper, OfflineHelper
from hearth.ops.jobs import JobQueue, Worker
from hearth.providers.base import StreamEvent, Usage
from hearth.server import create_app
from tests.conftest import RecordingProvider
from tests.test_server import serve_in_thread

CAPSULES_ONLY = {capsules.JOB_KIND: capsules.capsule_job}


@pytest.fixture
def hearth(tmp_path, provider):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "input_token_limit": 32_000,
                                 "capsule_recent_turns": 2}, environ={})
    h = Hearth(settings, provider=provider)
    yield h
    h.close()


def usage_reply(input_tokens: int):
    def reply(request):
        yield StreamEvent("text", text="Noted.")
        yield StreamEvent("usage", usage=Usage(input_tokens=input_tokens, output_tokens=3))
    return reply


def capsule_events(hearth):
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute("SELECT payload FROM events WHERE kind = 'context.capsule'")]


class BrokenHelper(OfflineHelper):
    def write_capsule(self, previous, turns, channels=()):
        raise HelperOutputError("the capsule answer is empty", "shape")


def test_e3_capsule_is_an_event_and_travels_with_the_verbatim_turns_it_does_not_cover(me, hearth, persona, provider):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My sister is called Mia.")
    me.send(chat.id, "Actually, I prefer tea to coffee.", channel="sms")
    me.send(chat.id, "Can you remind me about the dentist tomorrow?")
    capsule = me.timeline.refresh_capsule(chat.id)
    assert capsule is not None and capsule.source == "offline"
    assert capsule.text.startswith("(offline extractive capsule")  # labelled (G3)
    assert "- Mia is the person's sister." in capsule.text and "Corrections:" in capsule.text
    assert "Recent turns came through sms, web." in capsule.text  # cross-channel context
    [event] = capsule_events(hearth)
    assert event["status"] == "completed" and event["source"] == "offline"
    turns = [m for m in me.conversations.messages(chat.id) if m.role in ("user", "assistant")]
    assert capsule.through_message_id == turns[-3].id  # the newest two turns stay verbatim

    reply = me.send(chat.id, "Thanks!")
    request = provider.requests[-1]
    systems = [m for m in request.messages if m.role == "system"]
    assert sum(m.content.startswith(capsules.HEADING) for m in systems) == 1
    assert request.messages[1].content.startswith(capsules.HEADING)  # right after the stored prompt
    spoken = [m for m in request.messages if m.role in ("user", "assistant")]
    assert [m.content for m in spoken] == [t.content for t in turns[-2:]] + ["Thanks!"]
    assert not any(capsules.HEADING in m.content or "Mia is the person" in m.content for m in spoken)
    assert reply.size["capsule_active"] is True and reply.size["capsule_tokens"] > 0
    assert reply.size["history_messages"] == 2
    # Never shown as a user or assistant message: the timeline has it as a context event only.
    page = me.timeline.page()
    capsule_event = next(e for e in page.events if e.kind == "context.capsule")
    assert capsule_event.message is None and capsule_event.channel == "inner"
    assert "Mia" not in json.dumps(capsule_event.payload)


def _capsuled_chat(me):
    chat = me.conversations.create(me.personas.list()[0].id)
    for text in ("My sister is called Mia.", "We met in Lisbon.", "Good night."):
        me.send(chat.id, text)
    return chat, me.timeline.refresh_capsule(chat.id)


@pytest.mark.sqlite_only
def test_e3_sqlite_the_capsule_check_of_every_send_reads_a_small_index(me, hearth, persona):
    chat, _ = _capsuled_chat(me)
    plan = " ".join(r[3] for r in hearth.store.connection().execute("EXPLAIN QUERY PLAN " + capsules.latest_sql(hearth.store.engine),
                                                                   (chat.id,)))
    assert "events_turn_versions" in plan, plan  # the partial index of turn-version events, not every event


def test_e3_w2_a_capsule_serves_until_a_turn_it_covers_is_edited(me, hearth, persona):
    chat, capsule = _capsuled_chat(me)
    conn = hearth.store.connection()
    assert capsules.latest(conn, chat.id).id == capsule.id
    first = next(m for m in me.conversations.messages(chat.id) if m.role == "user")
    assert first.role == "user" and first.id <= capsule.through_message_id
    me.edit(chat.id, first.id, "My sister is called Mia Rose.")
    assert capsules.latest(conn, chat.id) is None  # the edit changed a turn the capsule covers


def test_e3_usage_over_the_threshold_queues_a_refresh_that_the_worker_runs(me, hearth, persona, provider):
    hearth.settings = hearth.settings.with_(capsule_recent_turns=4)
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My brother is called Tom.")
    provider.replies.append(usage_reply(10_000))  # 31% of 32,000: under the 0.6 threshold
    me.send(chat.id, "We talked for hours.")
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM jobs WHERE kind = ?", (capsules.JOB_KIND,)).fetchone()[0] == 0
    provider.replies.append(usage_reply(20_000))  # 62%: crosses it
    me.send(chat.id, "And then some more.")
    worker = Worker(hearth, handlers=CAPSULES_ONLY, queue=JobQueue(hearth.store), helper=OfflineHelper())
    assert worker.run_once() == 1
    capsule = me.timeline.capsule(chat.id)
    assert capsule is not None and "Tom is the person's brother." in capsule.text
    assert capsule_events(hearth)[0]["reason"] == "threshold"
    # Usage stays over the threshold, but one new exchange (two turns) is not worth a new capsule:
    # at most one refresh per `capsule_recent_turns` (4) new turns.
    provider.replies.append(usage_reply(20_000))
    me.send(chat.id, "Still talking.")
    worker.run_once()
    assert len(capsule_events(hearth)) == 1
    provider.replies.append(usage_reply(20_000))
    me.send(chat.id, "And talking.")
    worker.run_once()
    assert len(capsule_events(hearth)) == 2


def test_e3_a_configured_model_writes_the_capsule_through_the_helper_interface(me, hearth, persona, provider):
    chat = me.conversations.create(persona.id)
    for text in ("I moved to Leeds last month.", "I start the new job on Monday.", "Tea, never coffee."):
        me.send(chat.id, text)
    helper_provider = RecordingProvider()
    answer = {"facts": ["The person moved to Leeds last month."], "commitments": [],
              "unresolved": ["Starts a new job on Monday."], "corrections": [], "preferences": ["Tea over coffee."],
              "cross_channel": []}

    def reply(request):
        yield StreamEvent("text", text=json.dumps(answer))
    helper_provider.replies.append(reply)
    capsule = me.timeline.refresh_capsule(chat.id, ModelHelper(helper_provider))
    assert capsule.source == "model"
    assert capsule.text.splitlines()[:2] == ["Established facts:", "- The person moved to Leeds last month."]
    me.send(chat.id, "Morning!")
    assert "(model-written)" in provider.requests[-1].messages[1].content


def test_e6_capsule_started_and_failed_are_live_only_and_completed_is_persisted(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    for text in ("One.", "Two.", "Three."):
        me.send(chat.id, text)
    notices = hearth.live.subscribe(me.user_id)
    assert me.timeline.refresh_capsule(chat.id, BrokenHelper()) is None  # skipped (E13), not raised
    assert [notices.get_nowait()["status"] for _ in range(2)] == ["started", "failed"]
    assert capsule_events(hearth) == []  # neither notice was stored
    with hearth.store.read() as conn:
        [skipped] = [json.loads(r[0]) for r in conn.execute("SELECT payload FROM events WHERE kind = 'helper.skipped'")]
    assert skipped == {"task": "capsule", "error": "shape", "attempts": 1, "chars": 0}
    assert me.timeline.capsule(chat.id) is None
    me.timeline.refresh_capsule(chat.id, OfflineHelper())
    assert [notices.get_nowait()["status"] for _ in range(2)] == ["started", "completed"]
    assert [e["status"] for e in capsule_events(hearth)] == ["completed"]
    guest = hearth.scope(hearth.users.create("guest").id)
    assert hearth.live.publish(guest.user_id, {"kind": "context.capsule"}) == 0  # nobody else hears it


def test_e6_usage_is_persisted_and_replayed_inline_with_the_reply_that_caused_it(me, hearth, persona, provider):
    chat = me.conversations.create(persona.id)
    provider.replies.append(usage_reply(1234))
    me.send(chat.id, "Hello")
    events = me.timeline.page().events
    reply_at = next(i for i, e in enumerate(events) if e.message and e.message["role"] == "assistant")
    usage = events[reply_at + 1]
    assert usage.kind == "context.usage" and usage.span_id == events[reply_at].span_id
    assert usage.payload == {"input": 1234, "output": 3, "total": 1237, "cached": 0}


def test_e6_live_notices_stream_over_sse_to_their_own_user_only(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    for text in ("One.", "Two.", "Three."):
        me.send(chat.id, text)
    received: list[str] = []
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        opened = threading.Event()

        def listen():
            with httpx.stream("GET", f"{base}/api/timeline/live", params={"once": "true"}, timeout=10) as r:
                for line in r.iter_lines():
                    opened.set()
                    received.append(line)
        thread = threading.Thread(target=listen)
        thread.start()
        assert opened.wait(5)
        time.sleep(0.2)
        assert me.timeline.refresh_capsule(chat.id, BrokenHelper()) is None
        thread.join(10)
    assert "event: context.capsule" in received
    data = json.loads(next(line for line in received if line.startswith("data: "))[6:])
    assert data["status"] == "started" and data["conversation_id"] == chat.id
