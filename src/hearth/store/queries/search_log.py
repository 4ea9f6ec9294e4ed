"""Statements of the search log (``search_log``, A3, G5) and its retention setting (B5)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from hearth.store import Connection, Row, inserted_id


@dataclass(frozen=True)
class LogEntry:
    id: int
    user_id: int
    conversation_id: int | None
    origin: str
    query: str
    variants: list[str]
    filters: dict[str, Any]
    results: list[dict[str, Any]]
    candidate_count: int
    result_count: int
    reliability: str
    duration_ms: int
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> "LogEntry":
        return cls(row["id"], row["user_id"], row["conversation_id"], row["origin"], row["query"],
                   json.loads(row["variants"]), json.loads(row["filters"]), json.loads(row["results"]),
                   row["candidate_count"], row["result_count"], row["reliability"], row["duration_ms"],
                   row["created_at"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def insert(conn: Connection, user_id: int, conversation_id: int | None, origin: str, query: str, variants: str,
           filters: str, results: str, candidate_count: int, result_count: int, reliability: str,
           duration_ms: int, created_at: str) -> int:
    """One row; ``variants``, ``filters`` and ``results`` are JSON text."""
    cur = conn.execute(
        "INSERT INTO search_log (user_id, conversation_id, origin, query, variants, filters, results,"
        " candidate_count, result_count, reliability, duration_ms, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, conversation_id, origin, query, variants, filters, results, candidate_count, result_count,
         reliability, duration_ms, created_at),
    )
    return inserted_id(cur)


def retention_days(conn: Connection, user_id: int) -> str | None:
    """The JSON text of the owner's ``search_log.retention_days`` setting, None when unset."""
    row = conn.execute("SELECT value FROM layer_settings WHERE user_id = ? AND key = 'search_log.retention_days'",
                       (user_id,)).fetchone()
    return row[0] if row else None


def delete_older(conn: Connection, user_id: int, cutoff: str) -> int:
    return conn.execute("DELETE FROM search_log WHERE user_id = ? AND created_at < ?", (user_id, cutoff)).rowcount


def delete_all(conn: Connection, user_id: int) -> int:
    return conn.execute("DELETE FROM search_log WHERE user_id = ?", (user_id,)).rowcount


def entries(conn: Connection, user_id: int, limit: int, *, before_id: int | None = None,
            origin: str | None = None) -> list[LogEntry]:
    """Newest first, at most ``limit``."""
    sql = "SELECT * FROM search_log WHERE user_id = ?"
    args: list[Any] = [user_id]
    if before_id is not None:
        sql += " AND id < ?"
        args.append(before_id)
    if origin:
        sql += " AND origin = ?"
        args.append(origin)
    sql += " ORDER BY id DESC LIMIT ?"
    args.append(limit)
    return [LogEntry.from_row(r) for r in conn.execute(sql, args)]


def get(conn: Connection, user_id: int, entry_id: int) -> LogEntry | None:
    row = conn.execute("SELECT * FROM search_log WHERE id = ? AND user_id = ?", (entry_id, user_id)).fetchone()
    return None if row is None else LogEntry.from_row(row)


def end_snapshot(conn: Connection) -> None:
    """End the read snapshot open on ``conn`` so a write can take the lock."""
    conn.execute("COMMIT")


def begin_snapshot(conn: Connection) -> None:
    conn.execute("BEGIN")
