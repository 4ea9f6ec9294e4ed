"""The job queue (``jobs``) and how far each background layer has read a conversation
(``layer_cursors``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store import Connection, Row, engine_of, inserted_id


@dataclass(frozen=True)
class Job:
    id: int
    user_id: int
    kind: str
    payload: dict[str, Any]
    dedupe_key: str | None
    status: str
    attempts: int
    max_attempts: int
    run_after: str
    last_error: str | None
    created_at: str
    updated_at: str
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> "Job":
        return cls(row["id"], row["user_id"], row["kind"], json.loads(row["payload"]), row["dedupe_key"],
                   row["status"], row["attempts"], row["max_attempts"], row["run_after"], row["last_error"],
                   row["created_at"], row["updated_at"], row["finished_at"])

    def to_dict(self) -> dict[str, Any]:
        # The payload holds ids only; it is safe to show.
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_INSERT = ("INSERT INTO jobs (user_id, kind, payload, dedupe_key, max_attempts, run_after, created_at, updated_at)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def insert(conn: Connection, user_id: int, kind: str, payload: str, dedupe_key: str | None, max_attempts: int,
           run_after: str, stamp: str) -> int:
    return inserted_id(conn.execute(_INSERT + " RETURNING id",
                                    (user_id, kind, payload, dedupe_key, max_attempts, run_after, stamp, stamp)))


def insert_unless_pending(conn: Connection, user_id: int, kind: str, payload: str, dedupe_key: str,
                          max_attempts: int, run_after: str, stamp: str) -> int | None:
    """Queue the job unless one with the same dedupe key is pending; its id, or None when it was not queued."""
    row = conn.execute(_INSERT + " ON CONFLICT (user_id, kind, dedupe_key) WHERE status = 'pending'"
                       " AND dedupe_key IS NOT NULL DO NOTHING RETURNING id",
                       (user_id, kind, payload, dedupe_key, max_attempts, run_after, stamp, stamp)).fetchone()
    return None if row is None else row[0]


def pending_twin(conn: Connection, user_id: int, kind: str, dedupe_key: str, exclude: int = 0) -> int | None:
    row = conn.execute(
        "SELECT id FROM jobs WHERE user_id = ? AND kind = ? AND dedupe_key = ? AND status = 'pending' AND id <> ?",
        (user_id, kind, dedupe_key, exclude)).fetchone()
    return row[0] if row else None


def next_due(conn: Connection, stamp: str, kinds: tuple[str, ...] | None) -> int | None:
    """The id of the next job to claim at ``stamp`` (of ``kinds`` when given), locked against other
    claims where the engine locks rows, or None."""
    kind_sql = ""
    args: list[Any] = [stamp, stamp, stamp]
    if kinds is not None:
        kind_sql = f" AND kind IN ({','.join('?' * len(kinds))})"
        args.extend(kinds)
    # A pending job waits while its twin (same user, kind and dedupe key) runs under a live
    # lease: two replies to one thread never run at once (U6).
    row = conn.execute(
        "SELECT id FROM jobs WHERE ((status = 'pending' AND run_after <= ? AND NOT EXISTS ("
        "SELECT 1 FROM jobs AS twin WHERE twin.status = 'running' AND twin.lease_until > ?"
        " AND twin.user_id = jobs.user_id AND twin.kind = jobs.kind AND twin.dedupe_key = jobs.dedupe_key))"
        " OR (status = 'running' AND lease_until <= ?))" + kind_sql +
        " ORDER BY run_after, id LIMIT 1" + engine_of(conn).skip_locked, args,
    ).fetchone()
    return None if row is None else row[0]


def start(conn: Connection, job_id: int, lease_until: str, stamp: str) -> Job:
    """Mark the job running under a lease; returns it as it now is."""
    conn.execute(
        "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, updated_at = ?"
        " WHERE id = ?", (lease_until, stamp, job_id),
    )
    return Job.from_row(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())


def complete(conn: Connection, job_id: int, stamp: str) -> None:
    conn.execute(
        "UPDATE jobs SET status = 'done', lease_until = NULL, last_error = NULL, updated_at = ?,"
        " finished_at = ? WHERE id = ? AND status = 'running'", (stamp, stamp, job_id),
    )


def finish_attempt(conn: Connection, job_id: int, status: str, run_after: str, last_error: str, stamp: str,
                   finished_at: str | None) -> None:
    """Record a failed attempt of a running job: its new status, when it may run next, and why."""
    conn.execute(
        "UPDATE jobs SET status = ?, run_after = ?, lease_until = NULL, last_error = ?, updated_at = ?,"
        " finished_at = ? WHERE id = ? AND status = 'running'",
        (status, run_after, last_error, stamp, finished_at, job_id),
    )


def end_lease(conn: Connection, job_id: int, stamp: str) -> None:
    conn.execute("UPDATE jobs SET lease_until = ? WHERE id = ? AND status = 'running'", (stamp, job_id))


def requeue(conn: Connection, job_id: int, stamp: str) -> None:
    """A fresh round of attempts, due at ``stamp``."""
    conn.execute("UPDATE jobs SET status = 'pending', attempts = 0, run_after = ?, updated_at = ?,"
                 " finished_at = NULL WHERE id = ?", (stamp, stamp, job_id))


def get(conn: Connection, job_id: int) -> Job | None:
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return Job.from_row(row) if row else None


def newest(conn: Connection, limit: int, *, user_id: int | None = None, status: str | None = None) -> list[Job]:
    sql = "SELECT * FROM jobs WHERE 1=1"
    args: list[Any] = []
    if user_id is not None:
        sql += " AND user_id = ?"
        args.append(user_id)
    if status is not None:
        sql += " AND status = ?"
        args.append(status)
    sql += " ORDER BY id DESC LIMIT ?"
    args.append(limit)
    return [Job.from_row(r) for r in conn.execute(sql, args)]


def busy(conn: Connection, stamp: str) -> bool:
    """A job is running, or one is due at ``stamp``."""
    return conn.execute(
        "SELECT 1 FROM jobs WHERE (status = 'pending' AND run_after <= ?) OR status = 'running' LIMIT 1",
        (stamp,)).fetchone() is not None


def counts(conn: Connection, *, user_id: int | None = None) -> dict[str, int]:
    """Jobs by status (only the statuses that have jobs)."""
    sql = "SELECT status, count(*) FROM jobs"
    args: list[Any] = []
    if user_id is not None:
        sql += " WHERE user_id = ?"
        args.append(user_id)
    return dict(conn.execute(sql + " GROUP BY status", args).fetchall())


def delete_done_before(conn: Connection, stamp: str) -> int:
    return conn.execute("DELETE FROM jobs WHERE status = 'done' AND finished_at < ?", (stamp,)).rowcount


# -- layer_cursors ------------------------------------------------------------------------------------
def cursor(conn: Connection, conversation_id: int, layer: str) -> int:
    row = conn.execute("SELECT message_id FROM layer_cursors WHERE conversation_id = ? AND layer = ?",
                       (conversation_id, layer)).fetchone()
    return row[0] if row else 0


def set_cursor(conn: Connection, user_id: int, conversation_id: int, layer: str, message_id: int,
               updated_at: str) -> None:
    """Move the cursor forward to ``message_id`` (never back)."""
    conn.execute(
        "INSERT INTO layer_cursors (conversation_id, layer, user_id, message_id, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id, layer) DO UPDATE SET message_id = CASE WHEN"
        " layer_cursors.message_id > excluded.message_id THEN layer_cursors.message_id ELSE excluded.message_id END,"
        " updated_at = excluded.updated_at",
        (conversation_id, layer, user_id, message_id, updated_at),
    )
