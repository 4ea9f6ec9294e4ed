"""Personas (C1): who the companion is, with labels as configuration (G6)."""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import uuid
from typing import Any

from hearth.errors import Conflict, ConstraintError, InvalidInput, NotFound
from hearth.records import versions
from hearth.store import Store
from hearth.store.queries import personas as stored
from hearth.store.queries.personas import Persona
from hearth.validation import check_id, check_text, check_tree

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# The persona ``default()`` creates so a fresh install can chat at once; while it is the only one,
# untouched and unused, the web page offers its first-run welcome instead (``onboarding``).
DEFAULT_NAME = "companion"
DEFAULT_DISPLAY_NAME = "Companion"
DEFAULT_IDENTITY = ("You are Companion, a warm and attentive companion who remembers what matters to the "
                    "person you talk with and keeps one continuous relationship across conversations.")
MAX_TEXT = 50_000
# Saved characters are short profiles pinned into context on demand (D2).
MAX_CHARACTERS = 200


EDITABLE = (
    "display_name", "identity", "user_label", "assistant_label", "legacy_labels", "tone",
    "custom_instructions", "sections", "characters", "auto_continuity", "archive_access", "web_search", "card",
)
# Character card fields a persona keeps (SillyTavern V2/V3, X3): text fields, then lists, then the
# card's own extension data, kept as it came so an export gives it back.
CARD_TEXT = ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt",
             "post_history_instructions", "creator_notes", "creator", "character_version", "nickname")
CARD_LISTS = ("tags", "alternate_greetings", "group_only_greetings", "source")
# Kept as they came: the card's extensions, assets, multilingual notes, and its character book's
# own settings (name, scan depth, token budget; the entries themselves are fragments).
CARD_OPAQUE = ("extensions", "assets", "creator_notes_multilingual", "book")
CARD_FIELDS = (*CARD_TEXT, *CARD_LISTS, *CARD_OPAQUE, "creation_date", "modification_date")
MAX_CARD_FIELD = 200_000
MAX_AVATAR_BYTES = 8_000_000
AVATAR_MIMES = ("image/png", "image/jpeg", "image/webp", "image/gif")


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in EDITABLE:
            raise InvalidInput(f"unknown persona field {key!r}")
        if value is None:
            continue
        check_tree(value, key)  # no NUL or lone surrogate anywhere, nesting bounded
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
        elif key == "card":
            out[key] = json.dumps(check_card(value), ensure_ascii=False)
        else:
            check_text(value, key, max_chars=MAX_TEXT)
            if key in ("display_name", "user_label", "assistant_label") and not value.strip():
                raise InvalidInput(f"{key} must not be empty")
            out[key] = value
    return out


def check_card(value: Any) -> dict[str, Any]:
    """A persona's card fields, checked: known names only, text where text belongs."""
    if not isinstance(value, dict):
        raise InvalidInput("card must be an object of character card fields")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in CARD_FIELDS:
            raise InvalidInput(f"unknown card field {key!r}")
        if key in CARD_LISTS:
            if not isinstance(item, list) or not all(isinstance(v, str) for v in item):
                raise InvalidInput(f"card field {key} must be a list of text")
            if sum(len(v) for v in item) > MAX_CARD_FIELD:
                raise InvalidInput(f"card field {key} is longer than {MAX_CARD_FIELD} characters")
        elif key in CARD_OPAQUE:
            if not isinstance(item, list if key == "assets" else dict):
                raise InvalidInput(f"card field {key} has the wrong type")
            if len(json.dumps(item)) > MAX_CARD_FIELD:
                raise InvalidInput(f"card field {key} is longer than {MAX_CARD_FIELD} characters")
        elif key in ("creation_date", "modification_date"):
            if item is not None and (not isinstance(item, int) or isinstance(item, bool)):
                raise InvalidInput(f"card field {key} must be a whole number of seconds")
        else:
            if not isinstance(item, str):
                raise InvalidInput(f"card field {key} must be text")
            if len(item) > MAX_CARD_FIELD:
                raise InvalidInput(f"card field {key} is longer than {MAX_CARD_FIELD} characters")
        out[key] = item
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
        with self.store.write() as conn:
            try:
                persona_id = stored.insert(conn, self.user_id, name, uuid.uuid4().hex, clean)
            except ConstraintError:
                raise Conflict(f"a persona named {name!r} already exists") from None
            created = self.get(persona_id)
            versions.record(conn, self.user_id, "persona", created.id, created.to_dict(), "created", "owner")
            return created

    def get(self, persona_id: int) -> Persona:
        found = stored.get(self.store.connection(), self.user_id, check_id(persona_id, "persona id"))
        if found is None:
            raise NotFound(f"no persona {persona_id}")
        return found

    def of_thread(self, conversation_id: int) -> Persona:
        """The persona a thread talks with, in one read (the thread and its persona together)."""
        found = stored.of_conversation(self.store.connection(), self.user_id,
                                       check_id(conversation_id, "conversation id"))
        if found is None:
            raise NotFound(f"no conversation {conversation_id}")
        return found

    def by_name(self, name: str) -> Persona:
        found = stored.by_name(self.store.connection(), self.user_id, name)
        if found is None:
            raise NotFound(f"no persona named {name!r}")
        return found

    def list(self, *, include_archived: bool = False) -> list[Persona]:
        return stored.for_user(self.store.connection(), self.user_id, include_archived=include_archived)

    def archive(self, persona_id: int, archived: bool = True) -> Persona:
        """Archive (or bring back) a persona: its threads stay, it leaves the pickers and New Chat."""
        with self.store.write() as conn:
            persona = self.get(persona_id)
            if archived and persona.archived_at is None and [p.id for p in self.list()] == [persona_id]:
                raise Conflict("this is the only persona that is not archived; create or restore another first")
            if archived != (persona.archived_at is not None):
                stored.set_archived(conn, self.user_id, persona_id, archived)
            return self.get(persona_id)

    def update(self, persona_id: int, *, actor: str = "owner", change: str = "edited", **values: Any) -> Persona:
        clean = _clean(values)
        with self.store.write() as conn:
            before = self.get(persona_id)
            if clean:
                stored.update(conn, self.user_id, persona_id, clean)
            after = self.get(persona_id)
            if after.to_dict() | {"updated_at": ""} != before.to_dict() | {"updated_at": ""}:
                versions.record(conn, self.user_id, "persona", persona_id, after.to_dict(), change, actor)
            return after

    def history(self, persona_id: int) -> "builtins.list[versions.Version]":
        """Every version of a persona's settings, newest first (B2)."""
        self.get(persona_id)
        return versions.history(self.store.connection(), self.user_id, "persona", persona_id)

    def version_values(self, persona_id: int, version: int) -> dict[str, Any]:
        """The editable settings of one version, to apply again (restoring is a new version)."""
        try:
            current = self.get(persona_id)
        except NotFound:
            raise NotFound(f"no persona {persona_id}: a deleted persona and its versions are gone") from None
        data = versions.get(self.store.connection(), self.user_id, "persona", persona_id, version).data
        values = {k: data[k] for k in EDITABLE if k in data}
        if all(getattr(current, k) == v for k, v in values.items()):
            raise InvalidInput(f"version {version} is the same as the current persona")
        return values

    # -- avatars: one image per persona, shared with the web client -----------------------------
    def set_avatar(self, persona_id: int, data: bytes, mime: str) -> None:
        if mime not in AVATAR_MIMES:
            raise InvalidInput(f"an avatar must be one of {', '.join(AVATAR_MIMES)}")
        if not isinstance(data, (bytes, bytearray)) or not data:
            raise InvalidInput("an avatar needs image data")
        if len(data) > MAX_AVATAR_BYTES:
            raise InvalidInput(f"an avatar may be at most {MAX_AVATAR_BYTES} bytes")
        with self.store.write() as conn:
            self.get(persona_id)
            stored.set_avatar(conn, self.user_id, persona_id, bytes(data), mime)

    def avatar(self, persona_id: int) -> tuple[bytes, str] | None:
        self.get(persona_id)
        return stored.avatar(self.store.connection(), self.user_id, persona_id)

    def avatar_versions(self) -> dict[int, str]:
        """{persona id: tag} for this user's personas that have an avatar. The tag changes whenever
        the image does, so a URL carrying it can be cached for good (one request per image, however
        many threads show it)."""
        return {persona_id: hashlib.sha256(f"{updated_at}:{size}".encode()).hexdigest()[:16]
                for persona_id, (updated_at, size) in stored.avatar_stamps(self.store.connection(), self.user_id).items()}

    def by_uuid(self, value: str) -> Persona | None:
        """This user's persona with that uuid; another user's persona is never found."""
        return stored.by_uuid(self.store.connection(), self.user_id, value)

    def default(self) -> Persona:
        """The first persona, created on demand so a fresh install can chat at once."""
        with self.store.write():
            personas = self.list()
            if personas:
                return personas[0]
            return self.create(DEFAULT_NAME, DEFAULT_DISPLAY_NAME, identity=DEFAULT_IDENTITY)
