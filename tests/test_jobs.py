"""The durable job queue and worker behind the background memory layers (G3, HS2, LC1, RS1).

Real SQLite files; several threads and a restarted engine against one database file.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from click.testing import CliRunner

from hearth import Hearth, Settings
from hearth.errors import InvalidInput, ProviderError
from hearth.ops.jobs import JobQueue, Worker
from hearth.wiring import _registered, register_handler


class Clock:
    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_g3_enqueue_dedupes_pending_work_but_not_running_work(hearth, me):
    queue = JobQueue(hearth.store)
    first = queue.enqueue(me.user_id, "t.kind", {"conversation_id": 1}, dedupe_key="c1")
    assert queue.enqueue(me.user_id, "t.kind", {"conversation_id": 1}, dedupe_key="c1") == first
    other = queue.enqueue(me.user_id, "t.kind", {"conversation_id": 2}, dedupe_key="c2")
    assert other != first
    claimed = queue.claim(("t.kind",))
    assert claimed.id == first and claimed.status == "running" and claimed.attempts == 1
    # While it runs, new work for the same key is queued again: the running job may have read too early.
    again = queue.enqueue(me.user_id, "t.kind", {"conversation_id": 1}, dedupe_key="c1")
    assert again not in (first, other)
    assert queue.counts(me.user_id) == {"pending": 2, "running": 1, "done": 0, "dead": 0}


def test_g3_the_queue_is_idle_when_nothing_runs_and_nothing_is_due(hearth, me):
    clock = Clock()
    queue = JobQueue(hearth.store, clock=clock)
    assert queue.idle()
    queue.enqueue(me.user_id, "t.kind", {"n": 1}, delay=60)
    assert queue.idle()  # delayed work waits for its time
    clock.now += 61
    assert not queue.idle()
    job = queue.claim(("t.kind",))
    assert not queue.idle()  # running
    queue.complete(job)
    assert queue.idle()


def test_g3_claim_is_atomic_across_threads(tmp_path):
    hearth = Hearth(Settings.resolve({"home": str(tmp_path / "h")}, environ={}))
    user = hearth.scope().user_id
    queue = JobQueue(hearth.store)
    ids = {queue.enqueue(user, "t.kind", {"n": n}) for n in range(40)}
    claimed: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def claimer() -> None:
        barrier.wait()
        while (job := queue.claim(("t.kind",))) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hearth.close()
    assert sorted(claimed) == sorted(ids)  # every job exactly once


def test_g3_failures_back_off_exponentially_then_dead_letter_without_content(hearth, me, caplog):
    clock = Clock()
    queue = JobQueue(hearth.store, clock=clock, backoff_seconds=10)
    secret = "my private words about the dentist"

    def failing(scope, payload, helper):
        raise ProviderError(f"upstream echoed: {secret}", kind="rate_limit", retryable=True)

    worker = Worker(hearth, handlers={"t.fail": failing}, queue=queue, helper=object())
    job_id = queue.enqueue(me.user_id, "t.fail", {}, max_attempts=3)
    caplog.set_level(logging.DEBUG)
    delays = []
    for _ in range(2):
        assert worker.run_one().id == job_id
        job = queue.get(job_id)
        assert job.status == "pending" and job.last_error == "provider:rate_limit"
        assert worker.run_one() is None  # not due before its backoff
        run_after = time.mktime(time.strptime(job.run_after[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        delays.append(round(run_after - clock.now))
        clock.now += 10_000
    assert delays == [10, 20]
    worker.run_one()
    job = queue.get(job_id)
    assert job.status == "dead" and job.attempts == 3
    row = hearth.store.connection().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert secret not in json.dumps(dict(row))
    assert all(secret not in r.getMessage() for r in caplog.records)
    assert queue.retry(job_id, me.user_id).status == "pending"


def test_g3_not_found_is_not_retried(hearth, me):
    from hearth.prompt.layers.summary import JOB_KIND

    job_id = JobQueue(hearth.store).enqueue(me.user_id, JOB_KIND, {"conversation_id": 9999})
    Worker(hearth).run_once()
    job = JobQueue(hearth.store).get(job_id)
    assert job.status == "dead" and job.last_error == "not_found" and job.attempts == 1


def test_g3_restart_resumes_pending_and_reclaims_crashed_running_jobs(tmp_path):
    home = str(tmp_path / "h")
    hearth = Hearth(Settings.resolve({"home": home}, environ={}))
    user = hearth.scope().user_id
    queue = JobQueue(hearth.store, lease_seconds=60)
    crashed = queue.enqueue(user, "t.kind", {"n": 1})
    waiting = queue.enqueue(user, "t.kind", {"n": 2})
    assert queue.claim(("t.kind",)).id == crashed  # then the process dies without finishing it
    hearth.close()

    seen = []
    reopened = Hearth(Settings.resolve({"home": home}, environ={}))
    clock = Clock(time.time())
    worker = Worker(reopened, handlers={"t.kind": lambda scope, payload, helper: seen.append(payload["n"])},
                    queue=JobQueue(reopened.store, clock=clock, lease_seconds=60), helper=object())
    assert worker.run_once() == 1 and seen == [2]  # the running one keeps its lease for now
    clock.now += 61
    assert worker.run_once() == 1 and seen == [2, 1]
    job = worker.queue.get(crashed)
    assert job.status == "done" and job.attempts == 2
    assert worker.queue.get(waiting).status == "done"
    reopened.close()


def test_g3_worker_thread_runs_jobs_until_stopped(hearth, me):
    done = threading.Event()
    worker = Worker(hearth, handlers={"t.kind": lambda scope, payload, helper: done.set()}, poll_seconds=0.02,
                    helper=object())
    thread = worker.start()
    JobQueue(hearth.store).enqueue(me.user_id, "t.kind", {})
    assert done.wait(5)
    worker.stop()
    assert not thread.is_alive()
    deadline = time.time() + 5
    while JobQueue(hearth.store).counts()["done"] != 1 and time.time() < deadline:
        time.sleep(0.01)
    assert JobQueue(hearth.store).counts()["done"] == 1


def test_g3_kinds_without_a_handler_stay_pending_and_registered_handlers_run(hearth, me):
    queue = JobQueue(hearth.store)
    job_id = queue.enqueue(me.user_id, "t.elsewhere", {})
    assert Worker(hearth).run_once() == 0
    assert queue.get(job_id).status == "pending"
    ran = []
    register_handler("t.elsewhere", lambda scope, payload, helper: ran.append(scope.user_id))
    try:
        assert Worker(hearth).run_once() == 1
    finally:
        _registered.pop("t.elsewhere")
    assert ran == [me.user_id] and queue.get(job_id).status == "done"
    with pytest.raises(InvalidInput):
        register_handler("", None)


def test_g3_send_path_only_enqueues_and_the_worker_does_the_work(me, persona, hearth):
    me.layers.settings.set("summary.every", 2)
    conversation = me.conversations.create(persona.id)
    me.send(conversation.id, "We planned the garden for spring.")
    pending = [j for j in me.jobs.list() if j.kind == "summary.refresh"]
    assert [j.status for j in pending] == ["pending"]
    assert me.layers.summaries.current(conversation.id) is None  # nothing ran on the send path
    assert Worker(hearth).run_once() >= 1
    assert me.layers.summaries.current(conversation.id) is not None
    assert me.jobs.get(pending[0].id).status == "done"


def test_g3_cli_worker_once_and_doctor_show_jobs(tmp_path, monkeypatch):
    from hearth.cli import cli

    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["layers", "set", "live_context.every", "2"], catch_exceptions=False).exit_code == 0
    assert runner.invoke(cli, ["chat", "-m", "I am so tired today"], catch_exceptions=False).exit_code == 0
    doctor = runner.invoke(cli, ["doctor"], catch_exceptions=False).output
    assert "jobs" in doctor and "pending" in doctor and "dead 0" in doctor
    once = runner.invoke(cli, ["worker", "--once"], catch_exceptions=False)
    assert once.exit_code == 0 and "dead 0." in once.output
    listing = runner.invoke(cli, ["jobs", "list"], catch_exceptions=False).output
    assert "live_context.refresh" in listing and "done" in listing


@pytest.mark.sqlite_only
def test_s1_sqlite_the_worker_folds_the_write_ahead_log_between_sends(hearth, me, persona):
    """The worker copies the WAL into the database file while no send assembles (a passive
    checkpoint), so a send's own commit does not find the log past SQLite's bound and copy it
    while the person waits."""
    database = hearth.store.path

    def in_file(word: str) -> bool:
        return word.encode() in database.read_bytes()

    c = me.conversations.create(persona.id, "Lanterns")
    me.conversations.add_message(c.id, "user", "the quincelantern glows")
    assert not in_file("quincelantern")  # only in the log so far
    worker = Worker(hearth, handlers={}, poll_seconds=0.01, fold_every_seconds=0.0, helper=object())
    with hearth.activity.assembling():
        assert worker.fold_log() is False  # never while a send assembles
    assert not in_file("quincelantern")
    assert worker.fold_log() is True
    assert in_file("quincelantern")
    # The loop folds on its own.
    me.conversations.add_message(c.id, "user", "the harbourbell rings")
    assert not in_file("harbourbell")
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while not in_file("harbourbell") and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        worker.stop()
    assert in_file("harbourbell")


def test_u6_a_failed_job_beside_its_pending_twin_hands_over_and_twins_never_run_at_once(hearth, me):
    queue = JobQueue(hearth.store)
    first = queue.enqueue(me.user_id, "t.kind", {"n": 1}, dedupe_key="thread:1")
    running = queue.claim(("t.kind",))
    assert running.id == first
    twin = queue.enqueue(me.user_id, "t.kind", {"n": 1}, dedupe_key="thread:1")
    assert queue.claim(("t.kind",)) is None  # the twin waits while the first runs under its lease
    # Going back to pending beside the twin broke the one-pending-job rule (a ConstraintError that
    # left the job leased); now the twin takes the work over and nothing stays running.
    assert queue.fail(running, "conflict") == "done"
    assert queue.get(first).status == "done" and queue.get(first).last_error == "conflict"
    assert queue.claim(("t.kind",)).id == twin
    assert queue.counts(me.user_id) == {"pending": 0, "running": 1, "done": 1, "dead": 0}


def test_u6_a_job_whose_outcome_cannot_be_recorded_is_released_at_once(hearth, me):
    queue = JobQueue(hearth.store)
    job_id = queue.enqueue(me.user_id, "t.kind", {})

    class Broken(JobQueue):
        def complete(self, job):
            raise InvalidInput("the database refused the write")

    worker = Worker(hearth, handlers={"t.kind": lambda ctx, payload, helper: None}, helper=object(),
                    queue=Broken(hearth.store))
    with pytest.raises(InvalidInput):
        worker.run_one()
    again = queue.claim(("t.kind",))  # no five-minute wait for the lease
    assert again is not None and again.id == job_id and again.attempts == 2
