"""Every helper task fails on its own (E13).

A fake model server on 127.0.0.1 answers through the official OpenAI SDK with truncated JSON,
prose around the JSON, an empty body and a refusal. An unreadable answer is asked once more with
the reason, then the task is skipped: the ledger says which task and why in numbers and error
kinds only, the rest of the work is written once, every span closes and nothing is extracted twice.
"""

from __future__ import annotations

import json
import time

import pytest

from hearth import Hearth, Settings
from hearth.continuity.timeline import capsules
from hearth.continuity.timeline.checkpoints import checkpoint_job
from hearth.continuity.timeline.spans import CHECKPOINT_JOB
from hearth.memory import mining
from hearth.memory.helpers import ModelHelper, skips
from hearth.memory.helpers.base import HelperOutputError, TurnText
from hearth.memory.helpers.model import parse_json_object
from hearth.ops.jobs import JobQueue, Worker
from hearth.prompt.layers import household
from hearth.records import ledger
from hearth.thread import titles

IDLE = 30 * 60
SECRET = "Marigold"  # words of the conversation: never in the ledger
SAID = f"My sister {SECRET} moved to Leeds in May."
UNREADABLE = {
    "truncated": ['{"items": [{"text": "The person\'s sister', ' is called'],
    "empty": [],
    "refusal": ["I'm sorry, but I can't help with that request."],
}
KINDS = tuple(UNREADABLE)


def prose(answer: dict) -> list[str]:
    return ["Sure! Here is the JSON you asked for:\n\n", json.dumps(answer), "\n\nLet me know if you need more."]


@pytest.fixture
def model_hearth(tmp_path, fake_provider_server):
    h = Hearth(Settings.resolve({"home": str(tmp_path / "home"), "provider": "openai-chat", "model": "fake",
                                 "base_url": fake_provider_server.openai_base_url, "openai_api_key": "k",
                                 "capsule_recent_turns": 2},
                                environ={}))
    yield h
    h.close()


def events(hearth: Hearth, kind: str) -> list[dict]:
    with hearth.store.read() as conn:
        return [json.loads(r[0]) for r in conn.execute("SELECT payload FROM events WHERE kind = ? ORDER BY id",
                                                        (kind,))]


def count(hearth: Hearth, sql: str) -> int:
    with hearth.store.read() as conn:
        return conn.execute(sql).fetchone()[0]


def assert_no_text_in_the_ledger(hearth: Hearth) -> None:
    for payload in events(hearth, skips.EVENT_KIND):
        assert set(payload) == {"task", "error", "attempts", "chars"}
        assert payload["task"] in skips.TASKS and payload["error"] in (*KINDS, "shape", "not_json", "too_long")
        assert isinstance(payload["attempts"], int) and isinstance(payload["chars"], int)
    with hearth.store.read() as conn:
        stored = [r[0] for r in conn.execute("SELECT payload FROM events")]
    assert not [p for p in stored if SECRET in p or "sorry" in p.lower()]


def test_e13_parse_errors_say_why_in_a_fixed_kind():
    for kind, parts in UNREADABLE.items():
        with pytest.raises(HelperOutputError) as err:
            parse_json_object("".join(parts))
        assert err.value.kind == kind
    assert parse_json_object("".join(prose({"facts": []}))) == {"facts": []}
    assert parse_json_object('Note {this} first: {"facts": [1]} and {that}') == {"facts": [1]}


class Home:
    """One person, one conversation with one exchange, and its open span."""

    def __init__(self, hearth: Hearth, fake):
        self.hearth, self.fake = hearth, fake
        self.me = hearth.scope()
        persona = self.me.personas.create("elion", "Elion", user_label="AUMA said:", assistant_label="Elion said:")
        self.chat = self.me.conversations.create(persona.id)
        self.me.send(self.chat.id, SAID)
        [self.span] = self.me.timeline.open_spans()
        with hearth.store.read() as conn:
            self.said_id = conn.execute("SELECT id FROM messages WHERE role = 'user' AND kind = 'chat'").fetchone()[0]
        fake.reset()  # only the helper's requests from here on
        self.memories = {"memories": [{"text": f"The person's sister is called {SECRET}.", "category": "people",
                                       "evidence": f"My sister {SECRET} moved to Leeds", "reason": "Named."}]}
        self.facts = {"facts": [{"text": f"{SECRET} moved to Leeds in May.", "turns": [self.said_id]}]}

    def checkpoint(self) -> None:
        base = self.hearth.clock()
        self.hearth.clock = lambda: base + IDLE + 5
        now = time.time() + IDLE + 5
        worker = Worker(self.hearth, queue=JobQueue(self.hearth.store, clock=lambda: now),
                        handlers={CHECKPOINT_JOB: checkpoint_job})
        assert worker.run_once() == 1

    def written(self) -> tuple[int, int]:
        """(memory suggestions, facts) written so far."""
        return (len(self.me.layers.review.list()),
                count(self.hearth, "SELECT count(*) FROM facts"))


@pytest.mark.parametrize("failing", ["memories", "facts"])
@pytest.mark.parametrize("kind", KINDS)
def test_e13_an_unreadable_task_is_skipped_and_the_checkpoint_still_closes_the_span(
        model_hearth, fake_provider_server, failing, kind):
    home = Home(model_hearth, fake_provider_server)
    for task in ("memories", "facts"):
        if task == failing:
            for _ in range(2):  # the answer, and the answer when asked once more
                fake_provider_server.script(text=list(UNREADABLE[kind]))
        else:
            fake_provider_server.script(text=prose(home.memories if task == "memories" else home.facts))
    home.checkpoint()

    assert len(fake_provider_server.requests) == 3
    retry = fake_provider_server.requests[1 if failing == "memories" else 2].body["messages"]
    assert retry[-1]["role"] == "user" and retry[-1]["content"].startswith("Your answer could not be read:")
    span = home.me.timeline.span(home.span.id)
    assert not span.open and span.close_reason == "idle" and span.checkpoint_event_id
    [checkpoint] = events(model_hearth, "checkpoint.created")
    assert checkpoint["skipped"] == 1
    assert home.written() == ((0, 1) if failing == "memories" else (1, 0))
    [skipped] = events(model_hearth, skips.EVENT_KIND)
    assert skipped["task"] == failing and skipped["error"] == kind and skipped["attempts"] == 2
    assert skips.plain(failing) == f"{failing} could not be read this time"
    jobs = JobQueue(model_hearth.store).list()
    assert [(j.kind, j.status, j.attempts) for j in jobs if j.kind == CHECKPOINT_JOB] == [(CHECKPOINT_JOB, "done", 1)]
    assert_no_text_in_the_ledger(model_hearth)

    # Nothing is extracted twice: running the checkpoint again asks the model nothing.
    assert home.me.timeline.checkpoint(home.span.id, ModelHelper(model_hearth.provider)) is None
    assert len(fake_provider_server.requests) == 3
    assert home.written() == ((0, 1) if failing == "memories" else (1, 0))


@pytest.mark.parametrize("kind", KINDS)
def test_e13_an_answer_read_on_the_second_try_is_written_once(model_hearth, fake_provider_server, kind):
    home = Home(model_hearth, fake_provider_server)
    fake_provider_server.script(text=list(UNREADABLE[kind]))
    fake_provider_server.script(text=prose(home.memories))
    fake_provider_server.script(text=list(UNREADABLE[kind]))
    fake_provider_server.script(text=[json.dumps(home.facts)])
    home.checkpoint()
    assert len(fake_provider_server.requests) == 4
    assert home.written() == (1, 1)
    assert events(model_hearth, skips.EVENT_KIND) == []
    assert not home.me.timeline.span(home.span.id).open
    # Run again: the span has its checkpoint, so nothing is asked or written again.
    assert home.me.timeline.checkpoint(home.span.id, ModelHelper(model_hearth.provider)) is None
    assert len(fake_provider_server.requests) == 4 and home.written() == (1, 1)


def test_e13_every_other_helper_task_skips_alone_on_each_unreadable_answer(model_hearth, fake_provider_server):
    home = Home(model_hearth, fake_provider_server)
    me, chat, hearth = home.me, home.chat, model_hearth
    ctx = hearth.context(me.user_id)
    helper = ModelHelper(hearth.provider)
    me.layers.household.add_field("Sister", ["near", "away"])
    title = me.conversations.get(chat.id).title
    with hearth.store.read() as conn:
        reply_id = conn.execute("SELECT id FROM messages WHERE role = 'assistant' AND kind = 'chat'").fetchone()[0]
    source = mining.Source("conversation", chat.id, "Old chat", "2024-05-01", (TurnText("user", SAID, home.said_id),))

    def new_message(text: str) -> None:
        with hearth.store.write() as conn:  # a turn of the person's, without a model reply
            ledger.append_message(conn, user_id=me.user_id, conversation_id=chat.id, role="user", content=text)

    tasks = {
        "capsule": lambda: capsules.refresh(ctx, chat.id, helper, reason="manual"),
        "summary": lambda: me.layers.summaries.refresh(chat.id, helper, force=True),
        "live_context": lambda: me.layers.live_context.refresh(chat.id, helper),
        "household": lambda: household.detect_job(ctx, {"conversation_id": chat.id}, helper),
        "fragments": lambda: me.layers.review.run(chat.id, helper),
        "title": lambda: titles.title_job(ctx, {"conversation_id": chat.id, "user_message_id": home.said_id,
                                                "reply_id": reply_id}, helper),
        "mining": lambda: mining.mine(ctx, [source], helper),
    }
    expected: list[tuple[str, str]] = []
    for kind in KINDS:
        for task, run in tasks.items():
            new_message(f"{kind} {task}: my sister {SECRET} is away now.")  # new material for the cursors
            if task == "capsule":
                for _ in range(2):
                    new_message("And more.")  # past the verbatim turns a capsule leaves out
            asked = len(fake_provider_server.requests)
            fake_provider_server.script(text=list(UNREADABLE[kind]))
            fake_provider_server.script(text=list(UNREADABLE[kind]))
            run()  # no exception: the job would complete, not retry
            assert len(fake_provider_server.requests) == asked + 2, task
            expected.append((task, kind))
    found = [(e["task"], e["error"]) for e in events(hearth, skips.EVENT_KIND)]
    assert found == expected
    assert all(e["attempts"] == 2 for e in events(hearth, skips.EVENT_KIND))
    # Nothing was written by a skipped task.
    assert me.timeline.capsule(chat.id) is None and me.layers.summaries.current(chat.id) is None
    assert me.layers.review.list() == [] and me.conversations.get(chat.id).title == title
    assert_no_text_in_the_ledger(hearth)

    # Prose around the JSON is read at the first answer and written once.
    fake_provider_server.script(text=prose({"summary": "The person's sister moved away."}))
    assert me.layers.summaries.refresh(chat.id, helper, force=True) is not None
    fake_provider_server.script(text=prose({"title": "Sister news"}))
    tasks["title"]()
    assert me.conversations.get(chat.id).title == "Sister news"
    assert len(events(hearth, "summary.refreshed")) == 1


def test_e13_hearth_timeline_prints_the_plain_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    home = tmp_path / "home"
    monkeypatch.setenv("HEARTH_HOME", str(home))
    hearth = Hearth(Settings.resolve({"home": str(home)}, environ={}))
    try:
        me = hearth.scope()
        with hearth.store.write() as conn:
            skips.record(conn, me.user_id, "facts", HelperOutputError("cut off", "truncated", attempts=2, chars=9))
    finally:
        hearth.close()
    out = CliRunner().invoke(cli, ["timeline"], catch_exceptions=False).output
    assert "facts could not be read this time" in out and "truncated" not in out
