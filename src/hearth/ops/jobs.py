"""Background jobs: a small durable queue in the database and the worker that runs it.

Model-written work (rolling summary, live context refresh, state-change detection, review) never
runs on the send path. After a reply is saved, a hook decides in the same transaction what is due
and enqueues it; a ``Worker`` claims jobs one at a time in a write transaction and runs the handler
for their kind. The queue knows no kinds: the handlers come from ``registry.job_handlers()``.

A job is ``pending`` -> ``running`` -> ``done``; a failure goes back to ``pending`` with exponential
backoff and becomes ``dead`` after ``max_attempts``. A job left ``running`` by a crash is claimed
again once its lease expires, so a restart resumes pending work. ``last_error`` records an error
class or kind, never text that could carry conversation content.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Protocol

from hearth.errors import Conflict, HearthError, InvalidInput, NotFound, ProviderError
from hearth.store import Connection, DriverError, Store
from hearth.store.queries import jobs as queries
from hearth.store.queries.jobs import Job

if TYPE_CHECKING:
    from hearth.continuity.timeline.activity import Activity
    from hearth.memory.helpers.base import Helper
    from hearth.providers.base import Provider
    from hearth.records.context import Context
    from hearth.settings import Settings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
BACKOFF_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 3600.0
LEASE_SECONDS = 300.0
STATUSES = ("pending", "running", "done", "dead")

# What runs a job of one kind: handler(the job owner's context, payload, helper).
Handler = Callable[["Context", dict[str, Any], "Helper"], None]


class Deployment(Protocol):
    """What a worker needs of the deployment (``Hearth`` is one): the store and settings, the
    handlers, the provider for the helper, the activity it stays quiet for, each user's context."""

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def provider(self) -> Provider: ...

    @property
    def activity(self) -> Activity: ...

    def job_handlers(self) -> dict[str, Handler]: ...

    def context(self, user_id: int | None = None) -> Context: ...


def _stamp(epoch: float) -> str:
    """The sortable UTC form every timestamp column uses (see ``store.utcnow``)."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def enqueue(conn: Connection, user_id: int, kind: str, payload: dict[str, Any] | None = None, *,
            dedupe_key: str | None = None, delay: float = 0.0, max_attempts: int = MAX_ATTEMPTS,
            now: float | None = None) -> int:
    """Queue a job in the caller's write transaction; with a dedupe key, an identical pending job
    is reused instead of queuing a second one. Returns the job id."""
    if not kind or not isinstance(kind, str):
        raise InvalidInput("a job needs a kind")
    if max_attempts < 1:
        raise InvalidInput("max_attempts must be at least 1")
    at = time.time() if now is None else now
    stamp = _stamp(at)
    encoded = json.dumps(payload or {}, separators=(",", ":"))
    run_after = _stamp(at + max(0.0, delay))
    if dedupe_key is None:
        return queries.insert(conn, user_id, kind, encoded, None, max_attempts, run_after, stamp)
    # Two transactions may queue the same work at once (PostgreSQL's writers do not wait for each
    # other here): the one-pending-job index decides, and the loser reuses the winner's job (U6).
    # The common case, the work already queued, costs one read.
    while True:
        twin = _pending_twin(conn, user_id, kind, dedupe_key)
        if twin is not None:
            return twin
        job_id = queries.insert_unless_pending(conn, user_id, kind, encoded, dedupe_key, max_attempts, run_after,
                                               stamp)
        if job_id is not None:
            return job_id
        # Another transaction queued it between the two statements: reuse its job.


def _pending_twin(conn: Connection, user_id: int, kind: str, dedupe_key: str | None,
                  exclude: int = 0) -> int | None:
    """The pending job that already holds this work's dedupe key, if any."""
    if dedupe_key is None:
        return None
    return queries.pending_twin(conn, user_id, kind, dedupe_key, exclude)


class JobQueue:
    """The queue over one store. ``clock`` (seconds since the epoch) is injectable for tests."""

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time,
                 lease_seconds: float = LEASE_SECONDS, backoff_seconds: float = BACKOFF_SECONDS,
                 backoff_cap_seconds: float = BACKOFF_CAP_SECONDS):
        self.store = store
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.backoff_seconds = backoff_seconds
        self.backoff_cap_seconds = backoff_cap_seconds

    def enqueue(self, user_id: int, kind: str, payload: dict[str, Any] | None = None, *,
                dedupe_key: str | None = None, delay: float = 0.0, max_attempts: int = MAX_ATTEMPTS) -> int:
        with self.store.write() as conn:
            return enqueue(conn, user_id, kind, payload, dedupe_key=dedupe_key, delay=delay,
                           max_attempts=max_attempts, now=self.clock())

    def claim(self, kinds: tuple[str, ...] | None = None) -> Job | None:
        """Take the next due job, or one whose lease ran out (its worker died), atomically."""
        now = self.clock()
        stamp = _stamp(now)
        if kinds is not None and not kinds:
            return None
        # Where several workers claim at once (PostgreSQL), each locks the row it takes and skips rows
        # another claim holds (S10), so no job is handed out twice and no worker waits.
        with self.store.write(exclusive=False) as conn:
            job_id = queries.next_due(conn, stamp, kinds)
            if job_id is None:
                return None
            return queries.start(conn, job_id, _stamp(now + self.lease_seconds), stamp)

    def complete(self, job: Job) -> None:
        stamp = _stamp(self.clock())
        with self.store.write() as conn:
            queries.complete(conn, job.id, stamp)

    def fail(self, job: Job, error_kind: str, *, retryable: bool = True) -> str:
        """Record a failure: back to pending with backoff, or dead. Returns the new status.

        Work queued again while this job ran already waits as a pending twin (same user, kind and
        dedupe key); going back to pending beside it would break the one-pending-job rule, so the
        twin takes the work over and this job ends as ``done``, its error kept (U6)."""
        now = self.clock()
        dead = not retryable or job.attempts >= job.max_attempts
        delay = min(self.backoff_cap_seconds, self.backoff_seconds * 2 ** max(0, job.attempts - 1))
        status = "dead" if dead else "pending"
        with self.store.write() as conn:
            if not dead and _pending_twin(conn, job.user_id, job.kind, job.dedupe_key, exclude=job.id) is not None:
                status = "done"
            queries.finish_attempt(conn, job.id, status, _stamp(now + delay if status == "pending" else now),
                                   error_kind[:80], _stamp(now), None if status == "pending" else _stamp(now))
        return status

    def release(self, job: Job) -> None:
        """Let a job be claimed again at once (its lease ends now), when recording its outcome
        failed: it runs again instead of waiting out the lease."""
        with self.store.write() as conn:
            queries.end_lease(conn, job.id, _stamp(self.clock()))

    def retry(self, job_id: int, user_id: int | None = None) -> Job:
        """Give a dead job another round of attempts (owner action)."""
        stamp = _stamp(self.clock())
        with self.store.write() as conn:
            job = self.get(job_id, user_id)
            if job.status != "dead":
                raise InvalidInput(f"job {job_id} is {job.status}, not dead")
            twin = _pending_twin(conn, job.user_id, job.kind, job.dedupe_key)
            if twin is not None:
                raise Conflict(f"the same work is already queued as job {twin}")
            queries.requeue(conn, job_id, stamp)
            return self.get(job_id, user_id)

    def get(self, job_id: int, user_id: int | None = None) -> Job:
        job = queries.get(self.store.connection(), job_id)
        if job is None or (user_id is not None and job.user_id != user_id):
            raise NotFound(f"no job {job_id}")
        return job

    def list(self, *, user_id: int | None = None, status: str | None = None, limit: int = 50) -> list[Job]:
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}")
        return queries.newest(self.store.connection(), max(1, min(limit, 1000)), user_id=user_id, status=status)

    def idle(self) -> bool:
        """No job is running and none is due now (a delayed one may wait for its time)."""
        return not queries.busy(self.store.connection(), _stamp(self.clock()))

    def counts(self, user_id: int | None = None) -> dict[str, int]:
        """Jobs by status (all four keys, zeros included), for ``hearth doctor`` and the API."""
        found = queries.counts(self.store.connection(), user_id=user_id)
        return {status: found.get(status, 0) for status in STATUSES}

    def prune(self, older_than_seconds: float = 7 * 86400) -> int:
        """Forget finished jobs older than the given age; pending, running and dead ones stay."""
        with self.store.write() as conn:
            return queries.delete_done_before(conn, _stamp(self.clock() - older_than_seconds))


class UserJobs:
    """One user's view of the queue (``scope.jobs``): every read and retry carries the user id, so
    another user's job answers exactly like an unknown one (G2)."""

    def __init__(self, store: Store, user_id: int):
        self._queue = JobQueue(store)
        self.user_id = user_id

    def get(self, job_id: int) -> Job:
        return self._queue.get(job_id, self.user_id)

    def list(self, *, status: str | None = None, limit: int = 50) -> list[Job]:
        return self._queue.list(user_id=self.user_id, status=status, limit=limit)

    def counts(self) -> dict[str, int]:
        return self._queue.counts(self.user_id)

    def retry(self, job_id: int) -> Job:
        return self._queue.retry(job_id, self.user_id)

    def enqueue(self, kind: str, payload: dict[str, Any] | None = None, *, dedupe_key: str | None = None,
                delay: float = 0.0) -> int:
        return self._queue.enqueue(self.user_id, kind, payload, dedupe_key=dedupe_key, delay=delay)


def _error_kind(exc: BaseException) -> tuple[str, bool]:
    """A content-free description of a failure, and whether trying again may help."""
    if isinstance(exc, ProviderError):
        return f"provider:{exc.kind}", exc.retryable
    if isinstance(exc, NotFound):
        return "not_found", False  # the conversation or user is gone; retrying cannot help
    if isinstance(exc, HearthError):
        return exc.code, True
    return type(exc).__name__, True


# While a worker runs (every `hearth serve`), the interpreter's youngest generation is collected
# after this many new objects instead of 700: a send makes thousands of short-lived rows, lists
# and tuples, and most are freed before a collection would walk them (docs/jobs.md).
YOUNG_THRESHOLD = 20_000


class Worker:
    """Runs due jobs. ``run_once()`` drains what is due now (tests, ``hearth worker --once``);
    ``start()`` runs a daemon thread until ``stop()``."""

    def __init__(self, hearth: Deployment, *, handlers: dict[str, Handler] | None = None,
                 helper: "Helper | None" = None, queue: JobQueue | None = None, poll_seconds: float = 2.0,
                 prune_every_seconds: float = 3600.0, settle_every_seconds: float = 60.0,
                 fold_every_seconds: float = 1.0, young_threshold: int | None = YOUNG_THRESHOLD):
        self.hearth = hearth
        self.queue = queue or JobQueue(hearth.store, lease_seconds=hearth.settings.job_lease_seconds)
        # Jobs of kinds without a handler here stay pending (visible in counts) for a worker that
        # knows them; they are never failed for being unknown.
        self.handlers = handlers if handlers is not None else hearth.job_handlers()
        self._helper = helper
        self.poll_seconds = poll_seconds
        self.prune_every_seconds = prune_every_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_prune = 0.0
        self.settle_every_seconds = settle_every_seconds
        self._last_settle = 0.0
        self.fold_every_seconds = fold_every_seconds
        self._last_fold = 0.0
        self.young_threshold = young_threshold

    @property
    def helper(self) -> "Helper":
        if self._helper is None:
            from hearth.memory.helpers import helper_for

            self._helper = helper_for(self.hearth)
        return self._helper

    def run_one(self) -> Job | None:
        """Claim and run one due job; returns it as claimed, or None when nothing is due."""
        job = self.queue.claim(tuple(self.handlers))
        if job is None:
            return None
        handler = self.handlers[job.kind]
        try:
            try:
                ctx = self.hearth.context(job.user_id)
                # Without a helper given, the job owner's: their connection saved in the app may
                # differ from the deployment's (W10).
                helper = self._helper
                if helper is None:
                    from hearth.memory.helpers import helper_for

                    helper = helper_for(ctx)
                handler(ctx, job.payload, helper)
            except Exception as exc:  # noqa: BLE001 - any failure is recorded and retried, never lost
                kind, retryable = _error_kind(exc)
                status = self.queue.fail(job, kind, retryable=retryable)
                # Numbers and fixed names only: an exception message could quote conversation text.
                log.warning("job %d (%s) failed with %s; now %s", job.id, job.kind, kind, status)
                return job
            self.queue.complete(job)
        except (HearthError, DriverError):
            # Recording the outcome failed (the database was busy or closed): free the job now
            # rather than leave it leased, then let the loop report the error (U6).
            try:
                self.queue.release(job)
            except (HearthError, DriverError) as exc:
                log.warning("job %d could not be released (%s); it runs again after its lease",
                            job.id, type(exc).__name__)
            raise
        return job

    def run_once(self, limit: int = 1000) -> int:
        """Run jobs until none is due (or ``limit`` ran). Returns how many ran."""
        ran = 0
        while ran < limit and self.run_one() is not None:
            ran += 1
        return ran

    # -- background thread -----------------------------------------------------------------------
    def start(self) -> threading.Thread:
        if self._thread and self._thread.is_alive():
            return self._thread
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hearth-worker", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run_forever(self) -> None:
        """Run in the calling thread until ``stop()`` (or Ctrl-C in the CLI)."""
        self._stop.clear()
        self._loop()

    def _loop(self) -> None:
        previous = gc.get_threshold()
        if self.young_threshold:
            gc.set_threshold(self.young_threshold, *previous[1:])
        try:
            self._run_until_stopped()
        finally:
            gc.set_threshold(*previous)

    def _run_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once(limit=50)
                if time.monotonic() - self._last_prune > self.prune_every_seconds:
                    self._last_prune = time.monotonic()
                    self.queue.prune()
                if time.monotonic() - self._last_fold > self.fold_every_seconds:
                    self.fold_log()
            except (HearthError, DriverError) as exc:
                # The database was busy or closed under us; wait and try again rather than die.
                log.warning("worker loop error: %s", type(exc).__name__)
                ran = 0
            if not ran:
                if time.monotonic() - self._last_settle > self.settle_every_seconds:
                    self.settle_memory()
                self._stop.wait(self.poll_seconds)

    def fold_log(self) -> bool:
        """Between sends: copy what the write-ahead log holds into the database file (SQLite's
        passive checkpoint, which waits for nobody; nothing on PostgreSQL), so a send's own commit
        does not find the log past SQLite's bound of 1,000 pages and copy it while the person waits
        (about 80 ms on the 30,000-message deployment, one send in 125). True when it ran."""
        if not self.hearth.activity.wait_quiet(0):
            return False
        self._last_fold = time.monotonic()
        store = self.hearth.store
        store.engine.checkpoint(store.connection(), passive=True)
        return True

    def settle_memory(self) -> bool:
        """Between sends: collect the interpreter's cyclic garbage, then freeze what is left, so
        the collections a send triggers walk only the objects made since (True when it ran).

        A full collection walks every tracked object (the indexes, the caches, the loaded
        fragments): about 60 ms at a million messages, on about one send in a hundred. Here it runs
        only while no send assembles, once every ``settle_every_seconds`` of idle time; the objects
        frozen last time are unfrozen first, so garbage among them is still freed."""
        if not self.hearth.activity.wait_quiet(0):
            return False
        self._last_settle = time.monotonic()
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        return True


# -- cursors: how far a background layer has read a conversation ------------------------------------
def cursor(conn: Connection, conversation_id: int, layer: str) -> int:
    return queries.cursor(conn, conversation_id, layer)


def set_cursor(conn: Connection, user_id: int, conversation_id: int, layer: str, message_id: int) -> None:
    from hearth.store import utcnow

    queries.set_cursor(conn, user_id, conversation_id, layer, message_id, utcnow())
