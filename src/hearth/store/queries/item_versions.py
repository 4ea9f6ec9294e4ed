"""Statements of ``item_versions``: the versions of fragments, personas and status fields (B2)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from hearth.store.connection import utcnow
from hearth.store.engine import Connection


@dataclass(frozen=True)
class Version:
    noun: str
    item_id: int
    version: int
    data: dict[str, Any]
    change: str
    actor: str
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def insert_next(conn: Connection, user_id: int, noun: str, item_id: int, data: dict[str, Any],
                change: str, actor: str) -> int:
    """Append ``data`` as the item's next version; returns its number."""
    number = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM item_versions WHERE noun = ? AND item_id = ?",
                          (noun, item_id)).fetchone()[0]
    conn.execute(
        "INSERT INTO item_versions (user_id, noun, item_id, version, data, change, actor, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (user_id, noun, item_id, number, json.dumps(data, ensure_ascii=False), change, actor, utcnow()))
    return int(number)


def history(conn: Connection, user_id: int, noun: str, item_id: int) -> list[Version]:
    """An item's versions, newest first."""
    rows = conn.execute(
        "SELECT noun, item_id, version, data, change, actor, created_at FROM item_versions"
        " WHERE user_id = ? AND noun = ? AND item_id = ? ORDER BY version DESC", (user_id, noun, item_id)).fetchall()
    return [Version(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6]) for r in rows]


def delete_item(conn: Connection, user_id: int, noun: str, item_id: int) -> int:
    return conn.execute("DELETE FROM item_versions WHERE user_id = ? AND noun = ? AND item_id = ?",
                        (user_id, noun, item_id)).rowcount
