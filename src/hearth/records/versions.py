"""Version history of fragments, personas and household status fields (B2).

Memories keep their own bi-temporal versions (``memory_versions``, see memories.py); status
*values* keep theirs in ``status_values``. This table holds every other durable thing the person or
a suggestion can change: after each change, the item as it now stands is appended as its next
version, with what changed and who changed it (``owner``, an approved ``suggestion``, ``auto`` for
an auto-approved one, ``import``). Restoring a version applies it again as a new version. When an
item is deleted its versions go with it, so a deleted item cannot be restored (and forgetting
leaves no copy behind).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from hearth.errors import InvalidInput, NotFound
from hearth.store import Connection, utcnow

NOUNS = ("fragment", "persona", "status_field")
ACTORS = ("owner", "suggestion", "auto", "import")
_VOLATILE = ("created_at", "updated_at", "user_id")


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


def _check(noun: str, actor: str) -> None:
    if noun not in NOUNS:
        raise InvalidInput(f"unknown versioned item {noun!r}")
    if actor not in ACTORS:
        raise InvalidInput(f"unknown actor {actor!r}")


def record(conn: Connection, user_id: int, noun: str, item_id: int, data: dict[str, Any],
           change: str, actor: str = "owner") -> int:
    """Append ``data`` (the item as it now stands) as the item's next version; returns its number."""
    _check(noun, actor)
    clean = {k: v for k, v in data.items() if k not in _VOLATILE and k != "id"}
    number = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM item_versions WHERE noun = ? AND item_id = ?",
                          (noun, item_id)).fetchone()[0]
    conn.execute(
        "INSERT INTO item_versions (user_id, noun, item_id, version, data, change, actor, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (user_id, noun, item_id, number, json.dumps(clean, ensure_ascii=False), change, actor, utcnow()))
    return int(number)


def history(conn: Connection, user_id: int, noun: str, item_id: int) -> list[Version]:
    rows = conn.execute(
        "SELECT noun, item_id, version, data, change, actor, created_at FROM item_versions"
        " WHERE user_id = ? AND noun = ? AND item_id = ? ORDER BY version DESC", (user_id, noun, item_id)).fetchall()
    return [Version(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6]) for r in rows]


def get(conn: Connection, user_id: int, noun: str, item_id: int, version: int) -> Version:
    for v in history(conn, user_id, noun, item_id):
        if v.version == version:
            return v
    raise NotFound(f"{noun.replace('_', ' ')} {item_id} has no version {version}")


def latest(conn: Connection, user_id: int, noun: str, item_id: int) -> Version | None:
    found = history(conn, user_id, noun, item_id)
    return found[0] if found else None


def drop(conn: Connection, user_id: int, noun: str, item_id: int) -> int:
    """Remove an item's versions with the item itself."""
    return conn.execute("DELETE FROM item_versions WHERE user_id = ? AND noun = ? AND item_id = ?",
                        (user_id, noun, item_id)).rowcount
