"""Idle checkpoints (E2): a durable job extracts memories from the turns since the last checkpoint
into the review queue and closes the span; a kill -9 at any point loses and repeats nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

from hearth import Hearth, Settings
from hearth.continuity.timeline.checkpoints import checkpoint_job
from hearth.continuity.timeline.spans import CHECKPOINT_JOB
from hearth.ops.jobs import JobQueue, Worker
from hearth.store import is_postgres

IDLE = 30 * 60
CHECKPOINTS_ONLY = {CHECKPOINT_JOB: checkpoint_job}


def later(hearth: Hearth, seconds: float) -> None:
    base = hearth.clock()
    hearth.clock = lambda: base + seconds


def worker_at(hearth: Hearth, seconds_ahead: float) -> Worker:
    """A worker whose queue clock is ahead too, so the delayed checkpoint job is due."""
    now = time.time() + seconds_ahead
    return Worker(hearth, queue=JobQueue(hearth.store, clock=lambda: now), handlers=CHECKPOINTS_ONLY)


def checkpoints(hearth: Hearth) -> list[dict]:
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute(
            "SELECT payload FROM events WHERE kind = 'checkpoint.created' ORDER BY id")]


def test_e2_idle_checkpoint_sends_new_turns_to_extraction_into_review_and_closes_the_span(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My sister is called Mia. I'm allergic to peanuts.")
    me.send(chat.id, "Just chatting about the weather.")
    [span] = me.timeline.open_spans()
    assert worker_at(hearth, 60).run_once() == 0  # not idle yet: the job is not even due
    later(hearth, IDLE + 5)
    worker_at(hearth, IDLE + 5).run_once()
    [checkpoint] = checkpoints(hearth)
    assert checkpoint["span_id"] == span.id and checkpoint["turns"] == 4 and checkpoint["suggestions"] == 2
    closed = me.timeline.span(span.id)
    assert not closed.open and closed.close_reason == "idle" and closed.checkpoint_event_id
    proposals = me.layers.review.list()
    assert sorted(p.payload["text"] for p in proposals) == ["The person is allergic to peanuts.",
                                                            "The person's sister is called Mia."]
    assert all(p.kind == "memory_add" and p.source == "offline" and p.status == "pending" for p in proposals)
    assert me.memories.list() == []  # G4: suggestions only, nothing saved until approved
    # Extraction is attached to the span that requested it.
    page = me.timeline.page()
    assert {e.span_id for e in page.events if e.kind in ("review.proposed", "checkpoint.created")} == {span.id}

    # The next interaction opens a new span in the same conversation; its checkpoint reads only
    # the turns added since the previous one.
    me.send(chat.id, "My dog is called Rex.")
    [second] = me.timeline.open_spans()
    assert second.id != span.id
    later(hearth, 2 * IDLE + 30)
    worker_at(hearth, 2 * IDLE + 30).run_once()
    latest = checkpoints(hearth)[-1]
    assert latest["span_id"] == second.id and latest["turns"] == 2 and latest["suggestions"] == 1
    assert len(me.layers.review.list()) == 3


def test_e2_a_busy_span_is_not_checkpointed_and_its_job_comes_back(me, hearth, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "Remember that the boiler service is on Friday.")
    [span] = me.timeline.open_spans()
    later(hearth, IDLE - 60)
    me.send(chat.id, "Still here")  # activity just before the idle period ends
    assert me.timeline.checkpoint(span.id) is None  # not idle: nothing written
    assert checkpoints(hearth) == [] and me.timeline.span(span.id).open
    with hearth.store.read() as conn:
        pending = conn.execute("SELECT count(*) FROM jobs WHERE kind = 'timeline.checkpoint' AND status = 'pending'"
                               ).fetchone()[0]
    assert pending == 1
    later(hearth, 2 * IDLE)
    assert me.timeline.checkpoint(span.id) is not None
    assert me.timeline.checkpoint(span.id) is None  # a second run repeats nothing
    assert len(checkpoints(hearth)) == 1


SLOW_WORKER = textwrap.dedent("""
    import os, sys, time
    from hearth import Hearth, Settings
    from hearth.memory.helpers import OfflineHelper
    from hearth.ops.jobs import JobQueue, Worker
    from hearth.continuity.timeline.checkpoints import checkpoint_job

    class SlowHelper(OfflineHelper):
        def extract_memories(self, turns):
            time.sleep(float(sys.argv[2]))
            return super().extract_memories(turns)

    # The deployment's database, if it names one (the PostgreSQL lane), and nothing else from the
    # environment.
    url = {k: v for k, v in os.environ.items() if k == "HEARTH_DATABASE_URL"}
    hearth = Hearth(Settings.resolve({"home": sys.argv[1]}, environ=url))
    hearth.clock = lambda: time.time() + 3 * 3600
    queue = JobQueue(hearth.store, clock=lambda: time.time() + 3 * 3600, lease_seconds=0.2)
    print("ready", flush=True)
    Worker(hearth, helper=SlowHelper(), queue=queue, handlers={"timeline.checkpoint": checkpoint_job}).run_once()
    print("drained", flush=True)
""")


def test_e2_kill_9_at_any_point_never_loses_or_repeats_a_checkpoint(tmp_path):
    home = tmp_path / "home"
    settings = Settings.resolve({"home": str(home), "input_token_limit": 32_000}, environ={})
    with Hearth(settings) as hearth:
        me = hearth.scope()
        persona = me.personas.create("elion", "Elion")
        for n in range(3):  # three spans, one after another, each due for its checkpoint
            chat = me.conversations.create(persona.id)
            me.send(chat.id, f"My friend is called Sam{n}. Remember that the plan {n} is on.")
            later(hearth, (n + 1) * (IDLE + 60))
        span_ids = [s.id for s in me.timeline.page().spans]
    assert len(span_ids) == 3
    script = tmp_path / "slow_worker.py"
    script.write_text(SLOW_WORKER)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"HEARTH_HOME": str(home)}
    delays = [0.0, 0.05, 0.15, 0.3, 0.5, 0.8]
    killed_mid_job = 0
    for delay in delays:  # kill while claiming, while extracting, while writing, after writing
        process = subprocess.Popen([sys.executable, str(script), str(home), "0.2"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        with Hearth(settings) as hearth:
            killed_mid_job += hearth.store.connection().execute(
                "SELECT count(*) FROM jobs WHERE kind = 'timeline.checkpoint' AND status = 'running'").fetchone()[0]
    assert killed_mid_job >= 1  # at least one kill landed inside a claimed checkpoint
    time.sleep(0.3)  # let the leases of killed claims run out
    final = subprocess.run([sys.executable, str(script), str(home), "0"], env=env, capture_output=True, timeout=60)
    assert final.returncode == 0, final.stderr.decode()[-2000:]
    with Hearth(settings) as hearth:
        made = checkpoints(hearth)
        assert sorted(c["span_id"] for c in made) == sorted(span_ids)  # each exactly once
        me = hearth.scope()
        texts = sorted(p.payload["text"] for p in me.layers.review.list())
        assert texts == sorted({t for t in texts})  # no suggestion twice
        assert len([t for t in texts if "is called Sam" in t]) == 3
        assert all(not me.timeline.span(s).open for s in span_ids)
        with hearth.store.read() as conn:
            statuses = dict(conn.execute("SELECT status, count(*) FROM jobs WHERE kind = 'timeline.checkpoint'"
                                         " GROUP BY status").fetchall())
        assert statuses == {"done": statuses.get("done", 0)} and statuses["done"] >= 3
        if not is_postgres(hearth.store.connection()):
            assert hearth.store.connection().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


class WatchedEmbedder:
    """Unit vectors from letter counts that note, per call, how many texts it was given and
    whether the store's write transaction was open."""

    name = "watched-letters"
    dim = 26

    def __init__(self, hearth: Hearth):
        self.hearth = hearth
        self.calls: list[tuple[int, bool]] = []

    def embed(self, texts):
        self.calls.append((len(texts), self.hearth.store.in_write))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    rows[i, ord(ch) - 97] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def test_b3_e2_a_checkpoint_embeds_memories_outside_the_write_lock_and_each_once(me, hearth, persona):
    watched = WatchedEmbedder(hearth)
    hearth._embedder = watched  # the deployment's embedder, as Hearth.embedder would create it
    me.memories.add("The person's brother is called Tom.")
    for i in range(40):
        me.memories.add(f"Memory number {i} about the garden plot {i * 7}.")
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "My sister is called Mia. I'm allergic to peanuts.")
    watched.calls.clear()
    later(hearth, IDLE + 5)
    worker_at(hearth, IDLE + 5).run_once()
    [checkpoint] = checkpoints(hearth)
    assert checkpoint["suggestions"] == 2
    # Every memory and suggestion was embedded before the write lock was taken, once.
    assert watched.calls and not any(in_write for _n, in_write in watched.calls)
    assert sum(n for n, _w in watched.calls) == 41 + 2
    proposals = me.layers.review.list()
    assert len(proposals) == 2 and all(p.status == "pending" for p in proposals)

    # A second checkpoint embeds only the texts it has not seen.
    me.send(chat.id, "My dog is called Rex.")
    watched.calls.clear()
    later(hearth, 2 * IDLE + 30)
    worker_at(hearth, 2 * IDLE + 30).run_once()
    assert len(checkpoints(hearth)) == 2
    assert watched.calls == [(1, False)]


def test_e2_a_reply_streaming_past_the_idle_period_keeps_its_span_open_and_is_extracted(me, hearth, persona,
                                                                                        provider):
    from hearth.providers.base import StreamEvent, Usage

    chat = me.conversations.create(persona.id)
    seen: dict[str, object] = {}

    def slow_reply(request):
        yield StreamEvent("text", text="Noted: your sister is called Mia. ")
        # The reply is still streaming when the idle period has passed: the checkpoint waits.
        later(hearth, IDLE + 5)
        [span] = me.timeline.open_spans()
        seen["span"] = span.id
        seen["checkpoint"] = me.timeline.checkpoint(span.id)
        yield StreamEvent("text", text="And I'm allergic to peanuts too, I'll have you know.")
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=5))

    provider.replies.append(slow_reply)
    reply = me.send(chat.id, "My sister is called Mia.")
    assert seen["checkpoint"] is None and checkpoints(hearth) == []
    span = me.timeline.span(seen["span"])
    assert span.open  # saving the reply extended it
    with hearth.store.read() as conn:
        assert conn.execute("SELECT span_id FROM events WHERE id = ?", (reply.assistant_message.id,)
                            ).fetchone()[0] == span.id
    later(hearth, 2 * IDLE + 60)
    assert me.timeline.checkpoint(span.id) is not None
    [checkpoint] = checkpoints(hearth)
    assert checkpoint["turns"] == 2 and checkpoint["through_message_id"] == reply.assistant_message.id


def test_e2_a_reply_saved_after_another_process_closed_its_span_reaches_the_next_checkpoint(me, hearth, persona,
                                                                                          provider, settings):
    from hearth.providers.base import StreamEvent, Usage

    chat = me.conversations.create(persona.id)
    other = Hearth(settings, provider=provider)  # a worker in another process: it cannot see the reply
    try:
        def slow_reply(request):
            yield StreamEvent("text", text="Rex sounds like a good dog.")
            later(other, IDLE + 5)
            [span] = me.timeline.open_spans()
            assert other.scope(me.user_id).timeline.checkpoint(span.id) is not None  # closes the span
            yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=5))

        provider.replies.append(slow_reply)
        reply = me.send(chat.id, "My dog is called Rex.")
    finally:
        other.close()
    [first] = checkpoints(hearth)
    assert first["turns"] == 1  # the person's message only: the reply was still streaming
    # The reply joined the span open now, so the next checkpoint reads it.
    [now_open] = me.timeline.open_spans()
    assert now_open.id != first["span_id"]
    later(hearth, 3 * IDLE)
    assert me.timeline.checkpoint(now_open.id) is not None
    second = checkpoints(hearth)[-1]
    assert second["turns"] == 1 and second["through_message_id"] == reply.assistant_message.id
