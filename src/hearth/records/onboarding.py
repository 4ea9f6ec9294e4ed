"""The first run (U1, W3): what a fresh deployment offers instead of an empty chat.

A fresh deployment has no persona until something needs one: ``Personas.default()`` then creates
"Companion" (``hearth init`` does, and so do New Chat, voice, messaging and chat imports when no
persona is named). The web page shows its welcome, with *Create a companion* and *Import a
character card*, while the person has **no conversation at all** (trashed ones count) and their
personas are **none, or only that default, untouched**: its name, display name and identity as
created, no instructions, no card, no avatar, never edited or archived.

Finishing the welcome gives the person their own companion (made from a name and a short
identity, or a card they just imported) and archives the untouched default, so New Chat and the
pickers show only the companion they chose.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hearth.errors import Conflict, InvalidInput
from hearth.records.personas import (
    DEFAULT_DISPLAY_NAME,
    DEFAULT_IDENTITY,
    DEFAULT_NAME,
    MAX_TEXT,
    NAME_RE,
    Persona,
)
from hearth.store.queries import conversations
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.records.context import Context

MAX_DISPLAY_NAME = 200


@dataclass(frozen=True)
class Onboarding:
    """What ``GET /api/onboarding`` answers."""

    show: bool  # the page offers its welcome
    default_persona_id: int | None  # the untouched default persona, when there is one

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_untouched_default(ctx: "Context", persona: Persona) -> bool:
    return (persona.name == DEFAULT_NAME and persona.display_name == DEFAULT_DISPLAY_NAME
            and persona.identity == DEFAULT_IDENTITY and not persona.custom_instructions and not persona.card
            and persona.archived_at is None and persona.updated_at == persona.created_at
            and persona.id not in ctx.personas.avatar_versions())


def state(ctx: "Context") -> Onboarding:
    """Whether the welcome is shown: no conversation, and no persona but an untouched default."""
    has_conversation = conversations.any_for_user(ctx.store.connection(), ctx.user_id)
    personas = ctx.personas.list(include_archived=True)
    defaults = [p for p in personas if is_untouched_default(ctx, p)]
    default_id = defaults[0].id if defaults else None
    show = not has_conversation and len(personas) == len(defaults) <= 1
    return Onboarding(show, default_id)


def short_name(display_name: str, taken: set[str]) -> str:
    """A persona's short name from its display name: ASCII letters and digits joined by '-'."""
    ascii_text = unicodedata.normalize("NFKD", display_name).encode("ascii", "ignore").decode()
    base = re.sub(r"[^A-Za-z0-9]+", "-", ascii_text).strip("-").lower()[:56] or DEFAULT_NAME
    name, n = base, 1
    while name in taken:  # "companion" may be the default's; another person's names never count (G2)
        n += 1
        name = f"{base}-{n}"
    assert NAME_RE.match(name)
    return name


def create_companion(ctx: "Context", name: Any, identity: Any = "") -> tuple[Persona, list[int]]:
    """*Create a companion*: a persona from a display name and a short identity. Refused (409)
    once the welcome no longer applies, so a second click or tab makes no second companion."""
    display = check_text(name, "name", max_chars=MAX_DISPLAY_NAME, required=True, strip=True)
    if not display.isprintable():
        raise InvalidInput("a name must be one line of printable characters")
    who = check_text(identity if identity is not None else "", "identity", max_chars=MAX_TEXT, strip=True)
    with ctx.store.write():
        if not state(ctx).show:
            raise Conflict("this Hearth is already set up: create more companions in Personas")
        taken = {p.name for p in ctx.personas.list(include_archived=True)}
        persona = ctx.personas.create(short_name(display, taken), display,
                                        identity=who or f"You are {display}, a companion to the person you talk with.")
        return persona, _archive_defaults(ctx, persona.id)


def adopt(ctx: "Context", persona_id: int) -> tuple[Persona, list[int]]:
    """After *Import a character card*: the imported persona is the companion; the untouched default
    is archived. Refused (409) once a conversation exists."""
    with ctx.store.write() as conn:
        persona = ctx.personas.get(persona_id)
        if conversations.any_for_user(conn, ctx.user_id):
            raise Conflict("this Hearth is already set up: it has conversations")
        return persona, _archive_defaults(ctx, persona.id)


def _archive_defaults(ctx: "Context", keep: int) -> list[int]:
    archived = []
    for p in ctx.personas.list():
        if p.id != keep and is_untouched_default(ctx, p):
            ctx.personas.archive(p.id)
            archived.append(p.id)
    return archived
