"""Personas (C1): who the companion is, with labels as configuration (G6)."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import Conflict, InvalidInput, NotFound
from .store import Store, inserted_id, utcnow

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEXT = 50_000
# Saved characters are short profiles pinned into context on demand (D2).
MAX_CHARACTERS = 200


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
    created_at: str = ""
    updated_at: str = ""

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Persona":
        data = dict(row)
        for key in ("legacy_labels", "sections", "characters"):
            data[key] = json.loads(data[key])
        for key in ("auto_continuity", "archive_access", "web_search"):
            data[key] = bool(data[key])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


EDITABLE = (
    "display_name", "identity", "user_label", "assistant_label", "legacy_labels", "tone",
    "custom_instructions", "sections", "characters", "auto_continuity", "archive_access", "web_search",
)


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in EDITABLE:
            raise InvalidInput(f"unknown persona field {key!r}")
        if value is None:
            continue
        if key in ("auto_continuity", "archive_access", "web_search"):
            out[key] = int(bool(value))
        elif key == "legacy_labels":
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise InvalidInput("legacy_labels must be a list of non-empty strings")
            out[key] = json.dumps(value, ensure_ascii=False)
        elif key == "sections":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise InvalidInput("sections must map section names to text")
            out[key] = json.dumps(value, ensure_ascii=False)
        elif key == "characters":
            _check_characters(value)
            out[key] = json.dumps(value, ensure_ascii=False)
        else:
            if not isinstance(value, str):
                raise InvalidInput(f"{key} must be text")
            if len(value) > MAX_TEXT:
                raise InvalidInput(f"{key} is longer than {MAX_TEXT} characters")
            if key in ("display_name", "user_label", "assistant_label") and not value.strip():
                raise InvalidInput(f"{key} must not be empty")
            out[key] = value
    return out


def _check_characters(value: Any) -> None:
    if not isinstance(value, list) or len(value) > MAX_CHARACTERS:
        raise InvalidInput(f"characters must be a list of at most {MAX_CHARACTERS} entries")
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"].strip()
                and isinstance(item.get("description", ""), str)):
            raise InvalidInput("each character needs a name and a description")


class Personas:
    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def create(self, name: str, display_name: str | None = None, **values: Any) -> Persona:
        if not NAME_RE.match(name or ""):
            raise InvalidInput("persona name must be 1-64 letters, digits, '.', '_' or '-'")
        display = display_name or name
        values = {
            "user_label": values.pop("user_label", None) or "User said:",
            "assistant_label": values.pop("assistant_label", None) or f"{display} said:",
            **values,
        }
        clean = _clean({"display_name": display, **values})
        now = utcnow()
        cols = ["user_id", "name", "created_at", "updated_at", *clean]
        with self.store.write() as conn:
            try:
                cur = conn.execute(
                    f"INSERT INTO personas ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    (self.user_id, name, now, now, *clean.values()),
                )
            except sqlite3.IntegrityError:
                raise Conflict(f"a persona named {name!r} already exists") from None
            return self.get(inserted_id(cur))

    def get(self, persona_id: int) -> Persona:
        row = self.store.connection().execute(
            "SELECT * FROM personas WHERE id = ? AND user_id = ?", (persona_id, self.user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no persona {persona_id}")
        return Persona.from_row(row)

    def by_name(self, name: str) -> Persona:
        row = self.store.connection().execute(
            "SELECT * FROM personas WHERE name = ? AND user_id = ?", (name, self.user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no persona named {name!r}")
        return Persona.from_row(row)

    def list(self) -> list[Persona]:
        rows = self.store.connection().execute(
            "SELECT * FROM personas WHERE user_id = ? ORDER BY id", (self.user_id,)
        ).fetchall()
        return [Persona.from_row(r) for r in rows]

    def update(self, persona_id: int, **values: Any) -> Persona:
        clean = _clean(values)
        with self.store.write() as conn:
            self.get(persona_id)
            if clean:
                sets = ", ".join(f"{k} = ?" for k in clean)
                conn.execute(
                    f"UPDATE personas SET {sets}, updated_at = ? WHERE id = ? AND user_id = ?",
                    (*clean.values(), utcnow(), persona_id, self.user_id),
                )
            return self.get(persona_id)

    def default(self) -> Persona:
        """The first persona, created on demand so a fresh install can chat at once."""
        with self.store.write():
            personas = self.list()
            if personas:
                return personas[0]
            return self.create("companion", "Companion", identity=(
                "You are Companion, a warm and attentive companion who remembers what matters to the "
                "person you talk with and keeps one continuous relationship across conversations."))
