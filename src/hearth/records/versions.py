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

from typing import Any

from hearth.errors import InvalidInput, NotFound
from hearth.store import Connection
from hearth.store.queries import item_versions
from hearth.store.queries.item_versions import Version

NOUNS = ("fragment", "persona", "status_field")
ACTORS = ("owner", "suggestion", "auto", "import")
_VOLATILE = ("created_at", "updated_at", "user_id")


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
    return item_versions.insert_next(conn, user_id, noun, item_id, clean, change, actor)


def history(conn: Connection, user_id: int, noun: str, item_id: int) -> list[Version]:
    return item_versions.history(conn, user_id, noun, item_id)


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
    return item_versions.delete_item(conn, user_id, noun, item_id)
