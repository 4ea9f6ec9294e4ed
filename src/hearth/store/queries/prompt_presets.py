"""Prompt presets (``prompt_presets``): named texts a person saves and applies as a
conversation's custom instructions. Every statement carries the user id (G2)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hearth.store import Connection, inserted_id

_COLUMNS = "SELECT id, name, text, created_at, updated_at FROM prompt_presets"


@dataclass(frozen=True)
class Preset:
    id: int
    name: str
    text: str
    created_at: str
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_for_user(conn: Connection, user_id: int) -> list[Preset]:
    """The user's presets by name, case-insensitively."""
    return [Preset(*r) for r in conn.execute(_COLUMNS + " WHERE user_id = ? ORDER BY lower(name), id",
                                             (user_id,)).fetchall()]


def get(conn: Connection, user_id: int, preset_id: int) -> Preset | None:
    row = conn.execute(_COLUMNS + " WHERE id = ? AND user_id = ?", (preset_id, user_id)).fetchone()
    return Preset(*row) if row is not None else None


def by_name(conn: Connection, user_id: int, name: str) -> Preset | None:
    row = conn.execute(_COLUMNS + " WHERE name = ? AND user_id = ?", (name, user_id)).fetchone()
    return Preset(*row) if row is not None else None


def by_text(conn: Connection, user_id: int, text: str) -> Preset | None:
    """The oldest preset with exactly this text."""
    row = conn.execute(_COLUMNS + " WHERE user_id = ? AND text = ? ORDER BY id LIMIT 1", (user_id, text)).fetchone()
    return Preset(*row) if row else None


def count_for_user(conn: Connection, user_id: int) -> int:
    return conn.execute("SELECT count(*) FROM prompt_presets WHERE user_id = ?", (user_id,)).fetchone()[0]


def insert(conn: Connection, user_id: int, name: str, text: str, now: str) -> int:
    """A new preset; returns its id. A name the user already has raises ``ConstraintError``."""
    cur = conn.execute(
        "INSERT INTO prompt_presets (user_id, name, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
        (user_id, name, text, now, now))
    return inserted_id(cur)


def update(conn: Connection, user_id: int, preset_id: int, name: str, text: str, updated_at: str) -> None:
    """A name the user already has raises ``ConstraintError``."""
    conn.execute("UPDATE prompt_presets SET name = ?, text = ?, updated_at = ? WHERE id = ? AND user_id = ?",
                 (name, text, updated_at, preset_id, user_id))


def delete(conn: Connection, user_id: int, preset_id: int) -> None:
    conn.execute("DELETE FROM prompt_presets WHERE id = ? AND user_id = ?", (preset_id, user_id))
