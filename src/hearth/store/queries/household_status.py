"""Household status (HS1, HS2): ``status_fields`` and their values over time, ``status_values``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hearth.store.connection import inserted_id
from hearth.store.engine import Connection, Row


# The HTTP API answers with StatusFieldInfo and StatusValue as they are (one definition per record).
@dataclass(frozen=True)
class StatusFieldInfo:
    id: int
    name: str
    options: tuple[str, ...]
    aliases: tuple[str, ...]
    position: int
    value: str | None
    valid_from: str | None
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "options": list(self.options), "aliases": list(self.aliases),
                "position": self.position, "value": self.value, "valid_from": self.valid_from,
                "source": self.source}


@dataclass(frozen=True)
class StatusValue:
    id: int
    field_id: int
    field: str
    value: str
    source: str
    proposal_id: int | None
    valid_from: str
    valid_to: str | None
    recorded_at: str | None = None
    retired_at: str | None = None
    valid_until: str | None = None  # valid_to under the name memories use (B1)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_FIELD_SQL = (
    "SELECT f.id, f.name, f.options, f.aliases, f.position, v.value, v.valid_from, v.source"
    " FROM status_fields f LEFT JOIN status_values v ON v.field_id = f.id AND v.valid_to IS NULL"
    " WHERE f.user_id = ? AND f.retired_at IS NULL"
)


def _field_from_row(row: Row) -> StatusFieldInfo:
    return StatusFieldInfo(row[0], row[1], tuple(json.loads(row[2])), tuple(json.loads(row[3])), row[4],
                           row[5], row[6], row[7])


# --- fields ---------------------------------------------------------------------------------------

def fields(conn: Connection, user_id: int) -> list[StatusFieldInfo]:
    """A user's fields in use with their current values, in order."""
    return [_field_from_row(r) for r in conn.execute(_FIELD_SQL + " ORDER BY f.position, f.id", (user_id,))]


def has_fields(conn: Connection, user_id: int) -> bool:
    return conn.execute("SELECT 1 FROM status_fields WHERE user_id = ? AND retired_at IS NULL LIMIT 1",
                        (user_id,)).fetchone() is not None


def field_by_id(conn: Connection, user_id: int, field_id: int) -> StatusFieldInfo | None:
    row = conn.execute(_FIELD_SQL + " AND f.id = ?", (user_id, field_id)).fetchone()
    return _field_from_row(row) if row is not None else None


def field_by_name(conn: Connection, user_id: int, name: str) -> StatusFieldInfo | None:
    """A field in use by name, case-insensitive."""
    row = conn.execute(_FIELD_SQL + " AND lower(f.name) = lower(?)", (user_id, name)).fetchone()
    return _field_from_row(row) if row is not None else None


def name_taken(conn: Connection, user_id: int, name: str) -> bool:
    """Whether a field in use has this name, case-insensitive."""
    return conn.execute("SELECT 1 FROM status_fields WHERE user_id = ? AND retired_at IS NULL"
                        " AND lower(name) = lower(?)", (user_id, name)).fetchone() is not None


def count_and_next_position(conn: Connection, user_id: int) -> tuple[int, int]:
    """How many fields are in use, and the position after the last."""
    count, position = conn.execute(
        "SELECT count(*), coalesce(max(position), 0) + 1 FROM status_fields"
        " WHERE user_id = ? AND retired_at IS NULL", (user_id,)).fetchone()
    return count, position


def insert_field(conn: Connection, user_id: int, name: str, options: tuple[str, ...], aliases: tuple[str, ...],
                 position: int, created_at: str) -> int:
    cur = conn.execute(
        "INSERT INTO status_fields (user_id, name, options, aliases, position, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, name, json.dumps(options), json.dumps(aliases), position, created_at))
    return inserted_id(cur)


def update_field(conn: Connection, field_id: int, name: str, options: tuple[str, ...],
                 aliases: tuple[str, ...]) -> None:
    conn.execute(
        "UPDATE status_fields SET name = ?, options = ?, aliases = ? WHERE id = ?",
        (name, json.dumps(options), json.dumps(aliases), field_id))


def retire_field(conn: Connection, field_id: int, now: str) -> None:
    """A field leaves use: its current value ends now; its history stays."""
    conn.execute("UPDATE status_values SET valid_to = ? WHERE field_id = ? AND valid_to IS NULL", (now, field_id))
    conn.execute("UPDATE status_fields SET retired_at = ? WHERE id = ?", (now, field_id))


# --- values ---------------------------------------------------------------------------------------

def value_of(conn: Connection, user_id: int, field_id: int, value_id: int) -> str | None:
    """The text of one of a field's values, current or not."""
    row = conn.execute("SELECT value FROM status_values WHERE id = ? AND field_id = ? AND user_id = ?",
                       (value_id, field_id, user_id)).fetchone()
    return row[0] if row is not None else None


def retire_current_value(conn: Connection, field_id: int, now: str) -> None:
    """The current value was wrong: it ends and is retired now (a correction)."""
    conn.execute("UPDATE status_values SET valid_to = ?, superseded_at = ?, retired_at = ?"
                 " WHERE field_id = ? AND valid_to IS NULL", (now, now, now, field_id))


def supersede_current_value(conn: Connection, field_id: int, valid_to: str, now: str) -> None:
    """The current value stays true until ``valid_to``; it was superseded ``now``."""
    conn.execute("UPDATE status_values SET valid_to = ?, superseded_at = ?"
                 " WHERE field_id = ? AND valid_to IS NULL", (valid_to, now, field_id))


def insert_value(conn: Connection, user_id: int, field_id: int, value: str, source: str, proposal_id: int | None,
                 valid_from: str, recorded_at: str) -> None:
    conn.execute(
        "INSERT INTO status_values (user_id, field_id, value, source, proposal_id, valid_from, recorded_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)", (user_id, field_id, value, source, proposal_id, valid_from, recorded_at))


def history(conn: Connection, user_id: int, limit: int, *, field_id: int | None = None) -> list[StatusValue]:
    """Every value a field (or every field) has had, newest first, retired ones included."""
    sql = ("SELECT v.id, v.field_id, f.name, v.value, v.source, v.proposal_id, v.valid_from, v.valid_to,"
           " v.recorded_at, v.retired_at, v.valid_to FROM status_values v JOIN status_fields f ON f.id = v.field_id"
           " WHERE v.user_id = ?")
    args: list[Any] = [user_id]
    if field_id is not None:
        sql += " AND v.field_id = ?"
        args.append(field_id)
    sql += " ORDER BY v.recorded_at DESC, v.id DESC LIMIT ?"
    args.append(limit)
    return [StatusValue(*r) for r in conn.execute(sql, args)]


def as_of(conn: Connection, user_id: int, moment: str, mode: str) -> dict[str, str]:
    """Field name to value at a moment: what was true then (``valid``) or what was known then (``known``)."""
    if mode == "valid":
        cond = "v.retired_at IS NULL AND v.valid_from <= :t AND (v.valid_to IS NULL OR v.valid_to > :t)"
    else:
        cond = ("v.recorded_at <= :t AND (v.retired_at IS NULL OR v.retired_at > :t) AND v.valid_from <= :t"
                " AND (v.valid_to IS NULL OR v.superseded_at > :t OR v.valid_to > :t)")
    rows = conn.execute(
        "SELECT f.name, v.value FROM status_values v JOIN status_fields f ON f.id = v.field_id"
        f" WHERE v.user_id = :u AND {cond} ORDER BY f.position, f.id", {"u": user_id, "t": moment}).fetchall()
    return {r[0]: r[1] for r in rows}


# --- what state-change detection reads ----------------------------------------------------------------

def user_turns_after(conn: Connection, conversation_id: int, after_id: int, limit: int) -> list[tuple[int, str, str]]:
    """(id, role, content) of the person's chat turns after ``after_id``, newest first, at most ``limit``."""
    return [(r["id"], r["role"], r["content"]) for r in conn.execute(
        "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        " AND role = 'user' ORDER BY id DESC LIMIT ?", (conversation_id, after_id, limit)).fetchall()]
