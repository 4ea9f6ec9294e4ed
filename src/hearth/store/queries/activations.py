"""Autonomous activations (``activations``), their runs (``activation_runs``) and each user's
preferences for them (``activation_prefs``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.errors import ConstraintError
from hearth.store import Connection, Row, inserted_id


@dataclass(frozen=True)
class Activation:
    id: int
    user_id: int
    persona_id: int
    kind: str
    rule: str | None
    idle_minutes: int | None
    note: str
    channel: str
    enabled: bool
    next_run_at: str | None
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: Row) -> "Activation":
        data = dict(row)
        data["enabled"] = bool(data["enabled"])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Run:
    id: int
    activation_id: int
    status: str


# -- activation_prefs ---------------------------------------------------------------------------
def prefs(conn: Connection, user_id: int) -> tuple[str, str, str, int, bool] | None:
    """(timezone, quiet_start, quiet_end, daily_limit, stopped), or None when the user set none."""
    row = conn.execute(
        "SELECT timezone, quiet_start, quiet_end, daily_limit, stopped FROM activation_prefs WHERE user_id = ?",
        (user_id,)).fetchone()
    return (row[0], row[1], row[2], row[3], bool(row[4])) if row else None


def save_prefs(conn: Connection, user_id: int, timezone: str, quiet_start: str, quiet_end: str, daily_limit: int,
               stopped: bool) -> None:
    conn.execute(
        "INSERT INTO activation_prefs (user_id, timezone, quiet_start, quiet_end, daily_limit, stopped)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone,"
        " quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,"
        " daily_limit = excluded.daily_limit, stopped = excluded.stopped",
        (user_id, timezone, quiet_start, quiet_end, daily_limit, int(stopped)))


# -- activations ----------------------------------------------------------------------------------
def insert(conn: Connection, user_id: int, persona_id: int, kind: str, rule: str | None, idle_minutes: int | None,
           note: str, channel: str, next_run_at: str | None, created_at: str, updated_at: str) -> int:
    return inserted_id(conn.execute(
        "INSERT INTO activations (user_id, persona_id, kind, rule, idle_minutes, note, channel, enabled,"
        " next_run_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) RETURNING id",
        (user_id, persona_id, kind, rule, idle_minutes, note, channel, next_run_at, created_at, updated_at)))


def get(conn: Connection, activation_id: int, user_id: int) -> Activation | None:
    row = conn.execute("SELECT * FROM activations WHERE id = ? AND user_id = ?", (activation_id, user_id)).fetchone()
    return Activation.from_row(row) if row else None


def for_user(conn: Connection, user_id: int) -> list[Activation]:
    rows = conn.execute("SELECT * FROM activations WHERE user_id = ? ORDER BY id", (user_id,))
    return [Activation.from_row(r) for r in rows]


def due(conn: Connection, user_id: int, now: str) -> list[Activation]:
    """Enabled activations due by ``now``, and every enabled reflection (its time is the person's silence)."""
    rows = conn.execute(
        "SELECT * FROM activations WHERE user_id = ? AND enabled = 1 AND ("
        " (next_run_at IS NOT NULL AND next_run_at <= ?) OR kind = 'reflection')", (user_id, now))
    return [Activation.from_row(r) for r in rows]


def set_enabled(conn: Connection, activation_id: int, enabled: bool, updated_at: str) -> None:
    conn.execute("UPDATE activations SET enabled = ?, updated_at = ? WHERE id = ?",
                 (int(enabled), updated_at, activation_id))


def set_next_run(conn: Connection, activation_id: int, next_run_at: str | None, *,
                 updated_at: str | None = None) -> None:
    """Move the schedule on; with ``updated_at``, stamp the change too."""
    if updated_at is None:
        conn.execute("UPDATE activations SET next_run_at = ? WHERE id = ?", (next_run_at, activation_id))
    else:
        conn.execute("UPDATE activations SET next_run_at = ?, updated_at = ? WHERE id = ?",
                     (next_run_at, updated_at, activation_id))


def delete(conn: Connection, activation_id: int, user_id: int) -> None:
    conn.execute("DELETE FROM activations WHERE id = ? AND user_id = ?", (activation_id, user_id))


def users_with_enabled(conn: Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT DISTINCT user_id FROM activations WHERE enabled = 1")]


def any_enabled(conn: Connection, user_id: int) -> bool:
    return conn.execute("SELECT 1 FROM activations WHERE user_id = ? AND enabled = 1 LIMIT 1",
                        (user_id,)).fetchone() is not None


# -- activation_runs ------------------------------------------------------------------------------
def claim_run(conn: Connection, activation_id: int, user_id: int, due_at: str, created_at: str) -> int | None:
    """Insert the occurrence's run as ``claimed``; None when this occurrence already has one."""
    try:
        cur = conn.execute(
            "INSERT INTO activation_runs (activation_id, user_id, due_at, status, created_at)"
            " VALUES (?, ?, ?, 'claimed', ?) RETURNING id", (activation_id, user_id, due_at, created_at))
    except ConstraintError:
        return None
    return inserted_id(cur)


def set_run_status(conn: Connection, run_id: int, status: str) -> None:
    conn.execute("UPDATE activation_runs SET status = ? WHERE id = ?", (status, run_id))


def set_delivered(conn: Connection, run_id: int, conversation_id: int, message_id: int) -> None:
    conn.execute("UPDATE activation_runs SET status = 'delivered', conversation_id = ?, message_id = ?"
                 " WHERE id = ?", (conversation_id, message_id, run_id))


def run(conn: Connection, run_id: int, user_id: int) -> Run | None:
    row = conn.execute("SELECT * FROM activation_runs WHERE id = ? AND user_id = ?", (run_id, user_id)).fetchone()
    return Run(row["id"], row["activation_id"], row["status"]) if row else None


def runs(conn: Connection, user_id: int, limit: int) -> list[dict[str, Any]]:
    """The user's newest runs with their activation's kind."""
    rows = conn.execute(
        "SELECT r.id, r.activation_id, a.kind, r.due_at, r.status, r.conversation_id, r.message_id"
        " FROM activation_runs r JOIN activations a ON a.id = r.activation_id"
        " WHERE r.user_id = ? ORDER BY r.id DESC LIMIT ?", (user_id, limit))
    return [dict(r) for r in rows]


def sent_since(conn: Connection, user_id: int, since: str) -> int:
    """Runs queued or delivered since ``since``, the check-in watcher's own excluded."""
    return int(conn.execute(
        "SELECT count(*) FROM activation_runs r JOIN activations a ON a.id = r.activation_id"
        " WHERE r.user_id = ? AND r.status IN ('queued', 'delivered') AND r.created_at >= ?"
        " AND a.kind != 'checkins'", (user_id, since)).fetchone()[0])
