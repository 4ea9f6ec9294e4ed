"""Statements of long-term memories (M1-M7, B1-B2): ``memories``, their ``memory_versions``, and
the conversation-scoped snapshots (``conversation_memories`` and the snapshot fields of
``conversations``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence, cast

from hearth.store import Connection, Row, inserted_id

# Eligible and currently valid (B1): the only memories a snapshot captures or a prompt renders.
CURRENT_SQL = "eligible = 1 AND valid_until IS NULL"

# A memory as a prompt lists it: (id, text, category, importance).
Item = tuple[int, str, str, int]


@dataclass(frozen=True)
class Memory:
    id: int
    text: str
    category: str
    importance: int
    position: int  # 1-based place in the manual global order (the stored numbers have gaps)
    eligible: bool
    created_at: str
    updated_at: str
    version: int = 1
    valid_from: str | None = None
    valid_until: str | None = None
    recorded_at: str | None = None
    retired_at: str | None = None

    @classmethod
    def from_row(cls, row: Row, position: int) -> "Memory":
        return cls(row["id"], row["text"], row["category"], row["importance"], position,
                   bool(row["eligible"]), row["created_at"], row["updated_at"], row["version"],
                   row["valid_from"], row["valid_until"], row["recorded_at"], row["retired_at"])

    @property
    def current(self) -> bool:
        """Currently valid: not ended (B1). Only current, eligible memories reach a prompt."""
        return self.valid_until is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MemoryVersion:
    """One version of a memory (B1, B2): what it said, when it was true, when Hearth held it."""

    memory_id: int
    version: int
    text: str
    category: str
    importance: int
    eligible: bool
    valid_from: str
    valid_until: str | None
    recorded_at: str
    retired_at: str | None
    superseded_at: str | None
    change: str
    actor: str
    proposal_id: int | None

    @classmethod
    def from_row(cls, row: Row) -> "MemoryVersion":
        return cls(row["memory_id"], row["version"], row["text"], row["category"], row["importance"],
                   bool(row["eligible"]), row["valid_from"], row["valid_until"], row["recorded_at"],
                   row["retired_at"], row["superseded_at"], row["change"], row["actor"], row["proposal_id"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SnapshotInfo:
    """Snapshot metadata (M5): timestamps and provenance, never ids or text."""

    provenance: str  # captured | refreshed | backfill | legacy
    captured_at: str | None
    refreshed_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- snapshots ---------------------------------------------------------------------------------
def capture(conn: Connection, user_id: int, conversation_id: int) -> None:
    """Replace a conversation's snapshot with the user's current eligible set."""
    conn.execute("DELETE FROM conversation_memories WHERE conversation_id = ?", (conversation_id,))
    conn.execute(
        "INSERT INTO conversation_memories (conversation_id, memory_id)"
        " SELECT ?, id FROM memories WHERE user_id = ? AND " + CURRENT_SQL,
        (conversation_id, user_id),
    )


def set_refreshed(conn: Connection, conversation_id: int, now: str) -> None:
    conn.execute(
        "UPDATE conversations SET snapshot_provenance = 'refreshed', snapshot_refreshed_at = ? WHERE id = ?",
        (now, conversation_id),
    )


def set_captured(conn: Connection, conversation_id: int, provenance: str, now: str) -> None:
    conn.execute(
        "UPDATE conversations SET snapshot_provenance = ?, snapshot_captured_at = ? WHERE id = ?",
        (provenance, now, conversation_id),
    )


def snapshot_items(conn: Connection, conversation_id: int) -> list[Item]:
    """Current text of the snapshot's memories in manual global order, as plain tuples: a prompt
    may hold tens of thousands of them."""
    cursor = conn.execute(
        "SELECT m.id, m.text, m.category, m.importance FROM conversation_memories cm"
        " JOIN memories m ON m.id = cm.memory_id"
        " WHERE cm.conversation_id = ? AND m.eligible = 1 AND m.valid_until IS NULL ORDER BY m.position, m.id",
        (conversation_id,),
    )
    cursor.row_factory = None  # tuples, not Row (PostgreSQL rows unpack the same way)
    return cast("list[Item]", cursor.fetchall())


def snapshot_ids(conn: Connection, conversation_id: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT memory_id FROM conversation_memories WHERE conversation_id = ? ORDER BY memory_id",
        (conversation_id,),
    )]


def conversations_holding(conn: Connection, memory_id: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT conversation_id FROM conversation_memories WHERE memory_id = ?", (memory_id,)
    )]


def conversations_with_snapshots(conn: Connection, user_id: int) -> list[int]:
    """The user's conversations whose snapshot holds any memory."""
    return [row[0] for row in conn.execute(
        "SELECT id FROM conversations c WHERE user_id = ? AND EXISTS"
        " (SELECT 1 FROM conversation_memories cm WHERE cm.conversation_id = c.id)",
        (user_id,))]


def legacy_conversations(conn: Connection, user_id: int, conversation_ids: Iterable[int] | None = None) -> list[int]:
    """The user's threads with no recorded snapshot that were never backfilled (among ``conversation_ids``)."""
    sql = ("SELECT id FROM conversations WHERE user_id = ? AND snapshot_provenance = 'legacy'"
           " AND snapshot_backfilled = 0")
    args: list[Any] = [user_id]
    if conversation_ids is not None:
        ids = list(conversation_ids)
        sql += f" AND id IN ({','.join('?' * len(ids))})"
        args += ids
    return [r[0] for r in conn.execute(sql, args)]


def backfill(conn: Connection, user_id: int, conversation_id: int) -> None:
    """Add the user's current eligible set to a legacy thread's snapshot, and mark it backfilled."""
    conn.execute(
        "INSERT INTO conversation_memories (conversation_id, memory_id)"
        " SELECT ?, id FROM memories WHERE user_id = ? AND " + CURRENT_SQL + " ON CONFLICT DO NOTHING",
        (conversation_id, user_id),
    )
    conn.execute("UPDATE conversations SET snapshot_backfilled = 1 WHERE id = ?", (conversation_id,))


def snapshot_info(conn: Connection, user_id: int, conversation_id: int) -> SnapshotInfo | None:
    """The snapshot metadata of the user's conversation; None when it is not theirs (or gone)."""
    row = conn.execute(
        "SELECT * FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id)
    ).fetchone()
    if row is None:
        return None
    return SnapshotInfo(row["snapshot_provenance"], row["snapshot_captured_at"], row["snapshot_refreshed_at"])


def snapshot(conn: Connection, user_id: int, conversation_id: int) -> list[Memory]:
    """Every memory a snapshot holds (ended and hidden ones too), in the global order."""
    rows = conn.execute(
        "SELECT m.* FROM conversation_memories cm JOIN memories m ON m.id = cm.memory_id"
        " WHERE cm.conversation_id = ? ORDER BY m.position, m.id", (conversation_id,)
    ).fetchall()
    order = ranks(conn, user_id) if rows else {}
    return [Memory.from_row(r, order[r["id"]] + 1) for r in rows]


# -- memories ----------------------------------------------------------------------------------
def ranks(conn: Connection, user_id: int) -> dict[int, int]:
    """Each memory's place in the manual global order, from 0."""
    return {row[0]: rank for rank, row in enumerate(conn.execute(
        "SELECT id FROM memories WHERE user_id = ? ORDER BY position, id", (user_id,)))}


def get(conn: Connection, user_id: int, memory_id: int) -> Memory | None:
    row = conn.execute(
        "SELECT * FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id)
    ).fetchone()
    if row is None:
        return None
    place = conn.execute(  # an index range: how many come before it in the order
        "SELECT count(*) FROM memories WHERE user_id = ? AND (position < ? OR (position = ? AND id <= ?))",
        (user_id, row["position"], row["position"], row["id"])).fetchone()[0]
    return Memory.from_row(row, place)


def listing(conn: Connection, user_id: int) -> list[Memory]:
    """Every memory of the user's, in the global order."""
    rows = conn.execute(
        "SELECT * FROM memories WHERE user_id = ? ORDER BY position, id", (user_id,)
    ).fetchall()
    return [Memory.from_row(r, place) for place, r in enumerate(rows, start=1)]


def count_current(conn: Connection, user_id: int) -> int:
    """How many memories are eligible and current."""
    return conn.execute(
        "SELECT count(*) FROM memories WHERE user_id = ? AND eligible = 1 AND valid_until IS NULL",
        (user_id,)).fetchone()[0]


def current_items(conn: Connection, user_id: int) -> list[Item]:
    """The user's eligible, current memories as a prompt lists them, in the global order."""
    cursor = conn.execute("SELECT id, text, category, importance FROM memories WHERE user_id = ? AND "
                          + CURRENT_SQL + " ORDER BY position, id", (user_id,))
    cursor.row_factory = None
    return cast("list[Item]", cursor.fetchall())


def current_texts(conn: Connection, user_id: int) -> list[tuple[int, str]]:
    """(id, text) of the user's memories that have not ended (hidden ones too), by id."""
    rows = conn.execute("SELECT id, text FROM memories WHERE user_id = ? AND valid_until IS NULL ORDER BY id",
                        (user_id,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def positions(conn: Connection, user_id: int) -> list[tuple[int, int]]:
    """(id, stored order number) of the user's memories, in the global order."""
    return [(row[0], row[1]) for row in conn.execute(
        "SELECT id, position FROM memories WHERE user_id = ? ORDER BY position, id", (user_id,)).fetchall()]


def set_positions(conn: Connection, changes: Sequence[tuple[int, int, int]]) -> None:
    """Store order numbers: (position, memory id, user id) each."""
    conn.executemany("UPDATE memories SET position = ? WHERE id = ? AND user_id = ?", changes)


def top(conn: Connection, user_id: int) -> tuple[int, int]:
    """(the highest stored order number or 0, how many memories) of the user's."""
    highest, count = conn.execute("SELECT coalesce(max(position), 0), count(*) FROM memories WHERE user_id = ?",
                                  (user_id,)).fetchone()
    return highest, count


def insert(conn: Connection, user_id: int, text: str, category: str, importance: int, position: int,
           eligible: bool, now: str, valid_from: str) -> int:
    """A new memory at version 1; returns its id."""
    cur = conn.execute(
        "INSERT INTO memories (user_id, text, category, importance, position, eligible, created_at,"
        " updated_at, version, valid_from, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
        " RETURNING id",
        (user_id, text, category, importance, position, int(eligible), now, now, valid_from, now),
    )
    return inserted_id(cur)


def placed_after(conn: Connection, user_id: int, position: int, first_place: int) -> list[Memory]:
    """The memories stored after order number ``position``, the first at place ``first_place``."""
    rows = conn.execute("SELECT * FROM memories WHERE user_id = ? AND position > ? ORDER BY position, id",
                        (user_id, position)).fetchall()
    return [Memory.from_row(r, place) for place, r in enumerate(rows, start=first_place)]


def rewrite(conn: Connection, user_id: int, memory_id: int, text: str, category: str, importance: int,
            eligible: bool, now: str, valid_from: str) -> None:
    """A new version of the memory row, valid from ``valid_from``."""
    conn.execute(
        "UPDATE memories SET text = ?, category = ?, importance = ?, eligible = ?, updated_at = ?,"
        " version = version + 1, valid_from = ?, recorded_at = ? WHERE id = ? AND user_id = ?",
        (text, category, importance, int(eligible), now, valid_from, now, memory_id, user_id),
    )


def set_ended(conn: Connection, memory_id: int, valid_until: str, now: str) -> None:
    conn.execute("UPDATE memories SET valid_until = ?, retired_at = ?, updated_at = ? WHERE id = ?",
                 (valid_until, now, now, memory_id))


def reinstate(conn: Connection, memory_id: int, text: str, category: str, importance: int, eligible: int,
              now: str) -> None:
    """A new version of the memory row with an older version's values, current and valid from now."""
    conn.execute(
        "UPDATE memories SET text = ?, category = ?, importance = ?, eligible = ?, updated_at = ?,"
        " version = version + 1, valid_from = ?, valid_until = NULL, recorded_at = ?, retired_at = NULL"
        " WHERE id = ?",
        (text, category, importance, eligible, now, now, now, memory_id))


def delete(conn: Connection, user_id: int, memory_id: int) -> None:
    """The memory and (cascade) its versions and snapshot entries."""
    conn.execute("DELETE FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id))


# -- versions (B1, B2) -------------------------------------------------------------------------
def record_version(conn: Connection, memory_id: int, change: str, actor: str, proposal_id: int | None) -> None:
    """Append the memory row as it now stands as its newest version."""
    conn.execute(
        "INSERT INTO memory_versions (memory_id, user_id, version, text, category, importance, eligible,"
        " valid_from, valid_until, recorded_at, change, actor, proposal_id)"
        " SELECT id, user_id, version, text, category, importance, eligible, valid_from, valid_until,"
        " recorded_at, ?, ?, ? FROM memories WHERE id = ?",
        (change, actor, proposal_id, memory_id),
    )


def version(conn: Connection, memory_id: int, number: int) -> MemoryVersion | None:
    row = conn.execute("SELECT * FROM memory_versions WHERE memory_id = ? AND version = ?",
                       (memory_id, number)).fetchone()
    return None if row is None else MemoryVersion.from_row(row)


def versions(conn: Connection, user_id: int, memory_id: int) -> list[MemoryVersion]:
    """Every version of a memory, newest first."""
    rows = conn.execute(
        "SELECT * FROM memory_versions WHERE memory_id = ? AND user_id = ? ORDER BY version DESC",
        (memory_id, user_id)).fetchall()
    return [MemoryVersion.from_row(r) for r in rows]


def as_of(conn: Connection, user_id: int, moment: str, *, known: bool) -> list[MemoryVersion]:
    """The versions valid at ``moment`` as known today, or (``known``) as known at that moment, in
    the global order."""
    if not known:
        sql = "v.retired_at IS NULL AND v.valid_from <= :t AND (v.valid_until IS NULL OR v.valid_until > :t)"
    else:
        sql = ("v.recorded_at <= :t AND (v.retired_at IS NULL OR v.retired_at > :t) AND v.valid_from <= :t"
               " AND (v.valid_until IS NULL OR v.superseded_at > :t OR v.valid_until > :t)")
    rows = conn.execute(
        f"SELECT v.* FROM memory_versions v JOIN memories m ON m.id = v.memory_id WHERE v.user_id = :u AND {sql}"
        " ORDER BY m.position, m.id", {"u": user_id, "t": moment}).fetchall()
    return [MemoryVersion.from_row(r) for r in rows]


def end_version(conn: Connection, memory_id: int, number: int, valid_until: str, now: str) -> None:
    """A version stops being true at ``valid_until`` (superseded now)."""
    conn.execute(
        "UPDATE memory_versions SET valid_until = ?, superseded_at = ?"
        " WHERE memory_id = ? AND version = ?", (valid_until, now, memory_id, number))


def end_open_version(conn: Connection, memory_id: int, number: int, now: str) -> None:
    """A version still open stops being true now."""
    conn.execute("UPDATE memory_versions SET valid_until = ?, superseded_at = ?"
                 " WHERE memory_id = ? AND version = ? AND valid_until IS NULL",
                 (now, now, memory_id, number))


def retire_version(conn: Connection, memory_id: int, number: int, now: str) -> None:
    """A version corrected: Hearth no longer holds it as ever true."""
    conn.execute("UPDATE memory_versions SET retired_at = ? WHERE memory_id = ? AND version = ?",
                 (now, memory_id, number))
