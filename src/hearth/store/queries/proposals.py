"""Statements of the review queue (F3, G4): ``proposals``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store import Connection, Row, engine_of, inserted_id


@dataclass(frozen=True)
class StoredProposal:
    """A ``proposals`` row, its payload read."""

    id: int
    kind: str
    conversation_id: int | None
    payload: dict[str, Any]
    reason: str
    evidence: str
    source: str
    status: str
    decided_by: str | None
    result_id: int | None
    created_at: str
    decided_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> "StoredProposal":
        return cls(row["id"], row["kind"], row["conversation_id"], json.loads(row["payload"]), row["reason"],
                   row["evidence"], row["source"], row["status"], row["decided_by"], row["result_id"],
                   row["created_at"], row["decided_at"])


def get(conn: Connection, user_id: int, proposal_id: int) -> StoredProposal | None:
    row = conn.execute("SELECT * FROM proposals WHERE id = ? AND user_id = ?", (proposal_id, user_id)).fetchone()
    return None if row is None else StoredProposal.from_row(row)


def listing(conn: Connection, user_id: int, limit: int, *, conversation_id: int | None = None,
            status: str | None = None, kind: str | None = None) -> list[StoredProposal]:
    """Newest first, filtered by what is given."""
    sql = "SELECT * FROM proposals WHERE user_id = ?"
    args: list[Any] = [user_id]
    if conversation_id is not None:
        sql += " AND conversation_id = ?"
        args.append(conversation_id)
    if status is not None:
        sql += " AND status = ?"
        args.append(status)
    if kind is not None:
        sql += " AND kind = ?"
        args.append(kind)
    sql += " ORDER BY id DESC LIMIT ?"
    args.append(limit)
    return [StoredProposal.from_row(r) for r in conn.execute(sql, args)]


def counts(conn: Connection, user_id: int) -> dict[str, int]:
    """How many proposals have each status (statuses with none are left out)."""
    return dict(conn.execute("SELECT status, count(*) FROM proposals WHERE user_id = ? GROUP BY status",
                             (user_id,)).fetchall())


def seen(conn: Connection, user_id: int, content_hash: str, *, dismissed: bool) -> bool:
    """Whether a proposal with this content is pending (or, with ``dismissed``, was dismissed)."""
    statuses = "('pending', 'dismissed')" if dismissed else "('pending')"
    return conn.execute(f"SELECT 1 FROM proposals WHERE user_id = ? AND content_hash = ?"
                        f" AND status IN {statuses} LIMIT 1", (user_id, content_hash)).fetchone() is not None


def insert(conn: Connection, user_id: int, kind: str, conversation_id: int | None, payload: dict[str, Any],
           reason: str, evidence: str, source: str, content_hash: str, created_at: str) -> int:
    cur = conn.execute(
        "INSERT INTO proposals (user_id, kind, conversation_id, payload, reason, evidence, source,"
        " content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, kind, conversation_id, json.dumps(payload, ensure_ascii=False), reason, evidence, source,
         content_hash, created_at))
    return inserted_id(cur)


def pending_by_hash(conn: Connection, user_id: int, content_hash: str) -> int:
    """The id of the pending proposal with this content (there is one)."""
    return conn.execute("SELECT id FROM proposals WHERE user_id = ? AND content_hash = ? AND status = 'pending'",
                        (user_id, content_hash)).fetchone()[0]


def set_dismissed(conn: Connection, proposal_id: int, decided_at: str) -> None:
    conn.execute("UPDATE proposals SET status = 'dismissed', decided_by = 'owner', decided_at = ?"
                 " WHERE id = ?", (decided_at, proposal_id))


def set_approved(conn: Connection, proposal_id: int, by: str, decided_at: str, result_id: int,
                 payload: dict[str, Any]) -> None:
    """Approved as ``payload`` (with the approval's edits)."""
    conn.execute("UPDATE proposals SET status = 'approved', decided_by = ?, decided_at = ?, result_id = ?,"
                 " payload = ? WHERE id = ?",
                 (by, decided_at, result_id, json.dumps(payload, ensure_ascii=False), proposal_id))


def delete_about_memory(conn: Connection, user_id: int, memory_id: int) -> None:
    """Suggestions that proposed the memory, or that compare something with it (they quote its text)."""
    conn.execute("DELETE FROM proposals WHERE user_id = ? AND ((kind = 'memory_add' AND result_id = ?)"
                 f" OR {engine_of(conn).json_int('payload', 'conflict.memory_id')} = ?)",
                 (user_id, memory_id, memory_id))


# An auto-approval that fails leaves the proposal pending: it runs inside a savepoint of the
# proposing transaction, undone on failure.
def begin_auto_approve(conn: Connection) -> None:
    conn.execute("SAVEPOINT auto_approve")


def undo_auto_approve(conn: Connection) -> None:
    conn.execute("ROLLBACK TO auto_approve")


def end_auto_approve(conn: Connection) -> None:
    conn.execute("RELEASE auto_approve")
