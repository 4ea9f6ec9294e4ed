"""Statements of ``personas`` and ``persona_avatars`` (C1)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from hearth.store.connection import inserted_id, utcnow
from hearth.store.engine import Connection, Row


@dataclass(frozen=True)
class Persona:
    id: int
    user_id: int
    name: str
    display_name: str
    identity: str = ""
    user_label: str = "User said:"
    assistant_label: str = "Assistant said:"
    legacy_labels: list[str] = field(default_factory=list)
    tone: str = "Natural"
    custom_instructions: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    characters: list[dict[str, str]] = field(default_factory=list)
    auto_continuity: bool = True
    archive_access: bool = False
    web_search: bool = False
    card: dict[str, Any] = field(default_factory=dict)  # character card fields (X3), see CARD_FIELDS
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None  # archived personas keep their threads but leave pickers (W3)
    uuid: str = ""  # stable across exports and backups: an exported card names its persona by it (X3)

    @classmethod
    def from_row(cls, row: Row) -> "Persona":
        data = dict(row)
        data["uuid"] = data.get("uuid") or ""
        for key in ("legacy_labels", "sections", "characters", "card"):
            data[key] = json.loads(data[key])
        for key in ("auto_continuity", "archive_access", "web_search"):
            data[key] = bool(data[key])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def insert(conn: Connection, user_id: int, name: str, uuid: str, values: dict[str, Any]) -> int:
    """A new persona with ``values`` (column: stored value); its id. A taken name raises ``ConstraintError``."""
    now = utcnow()
    cols = ["user_id", "name", "uuid", "created_at", "updated_at", *values]
    cur = conn.execute(
        f"INSERT INTO personas ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) RETURNING id",
        (user_id, name, uuid, now, now, *values.values()),
    )
    return inserted_id(cur)


def get(conn: Connection, user_id: int, persona_id: int) -> Persona | None:
    row = conn.execute("SELECT * FROM personas WHERE id = ? AND user_id = ?", (persona_id, user_id)).fetchone()
    return Persona.from_row(row) if row else None


def exists(conn: Connection, user_id: int, persona_id: int) -> bool:
    return conn.execute("SELECT 1 FROM personas WHERE id = ? AND user_id = ?",
                        (persona_id, user_id)).fetchone() is not None


def of_conversation(conn: Connection, user_id: int, conversation_id: int) -> Persona | None:
    """The persona a thread talks with, in one read (the thread and its persona together)."""
    row = conn.execute(
        "SELECT p.* FROM conversations c JOIN personas p ON p.id = c.persona_id"
        " WHERE c.id = ? AND c.user_id = ? AND p.user_id = ?",
        (conversation_id, user_id, user_id),
    ).fetchone()
    return Persona.from_row(row) if row else None


def by_name(conn: Connection, user_id: int, name: str) -> Persona | None:
    row = conn.execute("SELECT * FROM personas WHERE name = ? AND user_id = ?", (name, user_id)).fetchone()
    return Persona.from_row(row) if row else None


def by_uuid(conn: Connection, user_id: int, value: str) -> Persona | None:
    row = conn.execute("SELECT * FROM personas WHERE uuid = ? AND user_id = ?", (value, user_id)).fetchone()
    return Persona.from_row(row) if row else None


def for_user(conn: Connection, user_id: int, *, include_archived: bool = False) -> list[Persona]:
    """The user's personas by id."""
    archived = "" if include_archived else " AND archived_at IS NULL"
    rows = conn.execute(f"SELECT * FROM personas WHERE user_id = ?{archived} ORDER BY id", (user_id,)).fetchall()
    return [Persona.from_row(r) for r in rows]


def set_archived(conn: Connection, user_id: int, persona_id: int, archived: bool) -> None:
    conn.execute("UPDATE personas SET archived_at = ?, updated_at = ? WHERE id = ? AND user_id = ?",
                 (utcnow() if archived else None, utcnow(), persona_id, user_id))


def update(conn: Connection, user_id: int, persona_id: int, values: dict[str, Any]) -> None:
    """Set ``values`` (column: stored value) and the time of the change."""
    sets = ", ".join(f"{k} = ?" for k in values)
    conn.execute(
        f"UPDATE personas SET {sets}, updated_at = ? WHERE id = ? AND user_id = ?",
        (*values.values(), utcnow(), persona_id, user_id),
    )


def set_avatar(conn: Connection, user_id: int, persona_id: int, data: bytes, mime: str) -> None:
    conn.execute(
        "INSERT INTO persona_avatars (persona_id, user_id, mime, data, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (persona_id) DO UPDATE SET mime = excluded.mime, data = excluded.data,"
        " updated_at = excluded.updated_at", (persona_id, user_id, mime, data, utcnow()))


def avatar(conn: Connection, user_id: int, persona_id: int) -> tuple[bytes, str] | None:
    """(image bytes, media type) of a persona's avatar, or None."""
    row = conn.execute("SELECT data, mime FROM persona_avatars WHERE persona_id = ? AND user_id = ?",
                       (persona_id, user_id)).fetchone()
    return (bytes(row[0]), row[1]) if row else None


def avatar_stamps(conn: Connection, user_id: int) -> dict[int, tuple[str, int]]:
    """{persona id: (updated_at, size in bytes)} of the user's avatars."""
    rows = conn.execute("SELECT persona_id, updated_at, length(data) FROM persona_avatars WHERE user_id = ?",
                        (user_id,)).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}
