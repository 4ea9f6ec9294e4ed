"""Autonomous activations (E11): schedules on standard recurrence rules, quiet hours, daily limits,
"stop check-ins" in any channel, check-ins only after approval (G4), exactly-once firing across kill -9."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from hearth import Hearth, Settings
from hearth.errors import InvalidInput
from hearth.ops.jobs import Worker
from hearth.outreach.activations import find_mentions, resolve_day

UTC = timezone.utc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def inner_messages(scope) -> list:
    return [m for c in scope.conversations.list() for m in scope.conversations.messages(c.id)
            if m.channel == "inner" and m.role == "assistant"]


def test_e11_morning_message_fires_once_at_its_local_time_through_the_send_path(me, persona, provider, hearth):
    me.activations.set_prefs(timezone_name="Europe/London")
    chat = me.new_chat(persona.id).conversation
    me.send(chat.id, "Goodnight, talk tomorrow.")
    morning = me.activations.add(persona.id, "morning", at="08:00")
    due = at(morning.next_run_at.replace("Z", ""))
    assert (due.hour, due.minute) == (8, 0)  # London is on UTC in winter

    assert me.activations.tick(due - timedelta(minutes=1)) == {}
    assert me.activations.tick(due + timedelta(minutes=1)) == {"queued": 1}
    assert me.activations.tick(due + timedelta(minutes=2)) == {}  # the occurrence fired once
    assert at(me.activations.get(morning.id).next_run_at.replace("Z", "")) == due + timedelta(days=1)

    Worker(hearth).run_once()
    [message] = inner_messages(me)
    assert message.conversation_id == chat.id  # the same thread: no new-chat boundary
    assert message.metadata["activation"] == "morning"
    assert "morning" in provider.requests[-1].messages[-1].content.lower()
    users = [m.content for m in me.conversations.messages(chat.id) if m.role == "user"]
    assert users == ["Goodnight, talk tomorrow."]  # the instruction is never saved as the person's words
    [run] = me.activations.runs()
    assert (run["status"], run["message_id"]) == ("delivered", message.id)
    span = hearth.store.connection().execute(
        "SELECT s.kind, s.channel, s.close_reason FROM events e JOIN spans s ON s.id = e.span_id WHERE e.id = ?",
        (message.id,)).fetchone()
    assert tuple(span) == ("inner", "inner", "activation_done")  # the activation is its own span
    Worker(hearth).run_once()
    assert len(inner_messages(me)) == 1


def zone_before_six_now() -> str:
    """A fixed-offset time zone in which it is now about 01:00, so that 06:00, 09:00 and 10:00 are
    all still ahead today there, whatever the hour of the run."""
    offset = (1 - datetime.now(UTC).hour) % 24
    offset = offset - 24 if offset > 12 else offset
    return "Etc/UTC" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"  # POSIX signs


def test_e11_quiet_hours_daily_limit_missed_and_bad_schedules(me, persona):
    from zoneinfo import ZoneInfo

    zone = zone_before_six_now()
    me.activations.set_prefs(timezone_name=zone, quiet_start="22:00", quiet_end="07:00", daily_limit=1)
    early = me.activations.add(persona.id, "morning", at="06:00")
    later = me.activations.add(persona.id, "morning", rule="FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0;BYSECOND=0")
    day = at(early.next_run_at.replace("Z", "")).astimezone(ZoneInfo(zone)).date()

    def local(hours: float) -> datetime:
        return datetime.combine(day, datetime.min.time(), ZoneInfo(zone)) + timedelta(hours=hours)

    assert local(0) < at(later.next_run_at.replace("Z", "")) < local(24)  # both fall on the same local day
    assert me.activations.tick(local(6 + 1 / 60)) == {"quiet": 1}
    assert me.activations.tick(local(9 + 1 / 60)) == {"queued": 1}
    assert me.activations.tick(local(10 + 1 / 60)) == {"limit": 1}
    # The server was down all day: both next occurrences are recorded as missed, never sent late.
    assert me.activations.tick(local(24 + 20)) == {"missed": 2}
    assert at(me.activations.get(later.id).next_run_at.replace("Z", "")) > local(48)
    for bad in ({"rule": "FREQ=HOURLY"}, {"rule": "not a rule"}, {"at": "25:00"}):
        with pytest.raises(InvalidInput):
            me.activations.add(persona.id, "morning", **bad)
    with pytest.raises(InvalidInput):
        me.activations.add(persona.id, "reflection", idle_minutes=5)
    with pytest.raises(InvalidInput):
        me.activations.set_prefs(timezone_name="Mars/Olympus")
    assert len(me.activations.list()) == 2


def test_e11_stop_check_ins_in_any_channel_pauses_every_activation(hearth, me, persona):
    chat = me.new_chat(persona.id).conversation
    morning = me.activations.add(persona.id, "morning", at="12:00")
    me.send(chat.id, "Stop check-ins!")
    assert me.activations.prefs().stopped
    due = at(morning.next_run_at.replace("Z", ""))
    assert me.activations.tick(due + timedelta(minutes=1)) == {"stopped": 1}
    me.send(chat.id, "start check-ins")
    assert not me.activations.prefs().stopped
    assert me.activations.tick(due + timedelta(days=1, minutes=1)) == {"queued": 1}
    kinds = [r[0] for r in hearth.store.connection().execute(
        "SELECT kind FROM events WHERE kind LIKE 'activations.%' ORDER BY id")]
    assert kinds == ["activations.stopped", "activations.started"]


def test_e11_check_ins_are_proposed_from_what_the_person_said_and_fire_only_after_approval(me, persona, hearth):
    watcher = me.activations.add(persona.id, "checkins")
    chat = me.new_chat(persona.id).conversation
    # A weekday two days off, so the exam's evening is still ahead whatever day the test runs.
    exam_day = (datetime.now(timezone.utc) + timedelta(days=2)).strftime("%A")
    me.send(chat.id, f"I'm nervous. My exam is on {exam_day}. Also remind me to call Mum tomorrow.")
    Worker(hearth).run_once()  # the tick looks at new messages
    proposals = me.layers.review.list(kind="checkin")
    assert len(proposals) == 2 and me.activations.list() == [watcher]  # nothing scheduled yet (G4)
    exam = next(p for p in proposals if "exam" in p.payload["note"])
    assert f"My exam is on {exam_day}" in exam.evidence
    approved = me.layers.review.approve(exam.id)
    checkin = me.activations.get(approved.result_id)
    assert checkin.kind == "checkin" and "exam" in checkin.note
    due = at(checkin.next_run_at.replace("Z", ""))
    assert due.strftime("%A") == exam_day and due.hour == 18  # that evening: "how did it go?"
    assert me.activations.tick(due + timedelta(minutes=1)) == {"queued": 1}
    assert me.activations.get(checkin.id).next_run_at is None  # once only
    Worker(hearth).run_once()
    [message] = inner_messages(me)
    assert message.metadata["activation"] == "checkin"


def test_e11_reflection_fires_once_per_quiet_spell(me, persona):
    chat = me.new_chat(persona.id).conversation
    me.send(chat.id, "Heading out for the day.")
    me.activations.set_prefs(quiet_start="00:00", quiet_end="00:00")  # no quiet hours
    me.activations.add(persona.id, "reflection", idle_minutes=180)
    last = max(m.created_at for m in me.conversations.messages(chat.id) if m.role == "user")
    spoke = at(last.replace("Z", ""))
    assert me.activations.tick(spoke + timedelta(minutes=100)) == {}
    assert me.activations.tick(spoke + timedelta(minutes=181)) == {"queued": 1}
    assert me.activations.tick(spoke + timedelta(minutes=400)) == {}


def test_e11_mentions_resolve_to_dates():
    wednesday = date(2026, 12, 2)
    assert resolve_day("on Friday", wednesday) == date(2026, 12, 4)
    assert resolve_day("tomorrow", wednesday) == date(2026, 12, 3)
    assert resolve_day("on 3 January", wednesday) == date(2027, 1, 3)
    assert resolve_day("on the 12th of December", wednesday) == date(2026, 12, 12)
    [m] = find_mentions("my driving test is next Wednesday, wish me luck", wednesday)
    assert (m.kind, m.what, m.day) == ("event", "driving test", date(2026, 12, 9))
    assert find_mentions("I love Fridays", wednesday) == []


def test_e11_delivered_on_the_preferred_channel(tmp_path, provider):
    from tests.fakes.twilio_server import FakeTwilio

    twilio = FakeTwilio("AC" + "2" * 32, "tok").start()
    try:
        settings = Settings.resolve({"home": str(tmp_path), "twilio_account_sid": "AC" + "2" * 32,
                                     "twilio_auth_token": "tok", "twilio_from_number": "+15550001111",
                                     "twilio_api_base": twilio.url}, environ={})
        with Hearth(settings, provider=provider) as h:
            me = h.scope()
            elion = me.personas.create("elion", "Elion")
            me.contacts.trust("sms", "+15557654321", elion.id)
            me.activations.set_prefs(quiet_start="00:00", quiet_end="00:00")
            morning = me.activations.add(elion.id, "morning", at="10:00", channel="sms")
            me.activations.tick(at(morning.next_run_at.replace("Z", "")) + timedelta(minutes=1))
            Worker(h).run_once()
            [message] = inner_messages(me)
            assert twilio.sent == [{"To": "+15557654321", "From": "+15550001111", "Body": message.content}]
    finally:
        twilio.stop()


@pytest.mark.slow
@pytest.mark.processes
def test_e11_schedules_survive_kill_9_and_never_fire_twice(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "HEARTH_HOME": str(home), "HEARTH_ACTIVATION_TICK_SECONDS": "0.2",
           "HEARTH_JOB_LEASE_SECONDS": "1"}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER"):
        env.pop(key, None)
    with Hearth(Settings.resolve({"home": str(home)}, environ={})) as h:
        me = h.scope()
        elion = me.personas.create("elion", "Elion")
        me.activations.set_prefs(quiet_start="00:00", quiet_end="00:00", daily_limit=24)
        morning = me.activations.add(elion.id, "morning", at="09:00")
        due = datetime.now(UTC) - timedelta(minutes=5)  # due a moment ago, within the grace period
        h.store.connection().execute("UPDATE activations SET next_run_at = ? WHERE id = ?",
                                     (due.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), morning.id))
    hearth_cmd = [str(Path(sys.executable).with_name("hearth")), "worker", "--poll", "0.1"]
    rng = random.Random(11)
    watcher = Hearth(Settings.resolve({"home": str(home)}, environ={}))
    db = watcher.store.connection()  # outside any transaction: each look sees the workers' commits
    for _ in range(6):  # kill the worker at random moments once it has started taking jobs
        proc = subprocess.Popen(hearth_cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline and not db.execute(
                "SELECT 1 FROM jobs WHERE status != 'pending' AND updated_at > created_at LIMIT 1").fetchone():
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    watcher.close()
    time.sleep(1.2)  # leases of jobs the last kill interrupted run out
    for _ in range(3):  # the tick, the run it queued, and one more tick that must fire nothing
        subprocess.run([*hearth_cmd[:2], "--once"], env=env, check=True, capture_output=True, timeout=120)
    with Hearth(Settings.resolve({"home": str(home)}, environ={})) as h:
        conn = h.store.connection()
        runs = conn.execute("SELECT due_at, status FROM activation_runs").fetchall()
        assert [tuple(r) for r in runs] == [(due.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "delivered")]
        written = conn.execute("SELECT metadata FROM messages WHERE channel = 'inner' AND role = 'assistant'").fetchall()
        assert [json.loads(r[0])["activation"] for r in written] == ["morning"]
        assert conn.execute("SELECT next_run_at FROM activations").fetchone()[0] > due.isoformat()
