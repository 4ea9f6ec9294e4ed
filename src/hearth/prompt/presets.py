"""Prompt presets (W3, P5): named texts a person saves once and reuses ("Be brief", "Roleplay narrator").

A preset is applied to a conversation as its custom instructions, through
``set_custom_instructions``, which rebuilds that conversation's stored prompt in the same
transaction (P5), its text made outside the write lock (``prepared``, U5). Applying copies the text: editing or deleting the preset later changes no
conversation. A preset's text follows the rules of custom instructions (at most ``MAX_TEXT``
characters, storable text); its name is one line, unique per person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hearth.errors import Conflict, ConstraintError, InvalidInput, NotFound
from hearth.prompt import prepared, stored
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.records.personas import MAX_TEXT
from hearth.store import utcnow
from hearth.store.queries import prompt_presets, stored_prompts
from hearth.store.queries.prompt_presets import Preset
from hearth.validation import check_id, check_text

if TYPE_CHECKING:
    from hearth.records.context import Context

MAX_NAME = 100
MAX_PRESETS = 500  # per person: a list a menu can still show


def check_name(value: Any) -> str:
    name = check_text(value, "preset name", max_chars=MAX_NAME, required=True, strip=True)
    if not name.isprintable():
        raise InvalidInput("a preset name must be one line of printable characters")
    return name


def check_preset_text(value: Any) -> str:
    text = check_text(value, "preset text", max_chars=MAX_TEXT, required=True)
    return text


class Presets:
    """One person's presets; every query carries their user id (G2)."""

    def __init__(self, ctx: "Context"):
        self._ctx = ctx
        self.store = ctx.store
        self.user_id = ctx.user_id

    def list(self) -> list[Preset]:
        return prompt_presets.list_for_user(self.store.connection(), self.user_id)

    def get(self, preset_id: int) -> Preset:
        found = prompt_presets.get(self.store.connection(), self.user_id, check_id(preset_id, "preset id"))
        if found is None:
            raise NotFound(f"no preset {preset_id}")
        return found

    def find(self, ref: str) -> Preset:
        """A preset by id (digits) or by name, as the CLI names them."""
        if ref.isdigit():
            return self.get(int(ref))
        found = prompt_presets.by_name(self.store.connection(), self.user_id, ref)
        if found is None:
            raise NotFound(f"no preset named {ref!r}")
        return found

    def create(self, name: str, text: str) -> Preset:
        name, text = check_name(name), check_preset_text(text)
        with self.store.write() as conn:
            if prompt_presets.count_for_user(conn, self.user_id) >= MAX_PRESETS:
                raise Conflict(f"you have {MAX_PRESETS} presets already; delete one first")
            try:
                preset_id = prompt_presets.insert(conn, self.user_id, name, text, utcnow())
            except ConstraintError:
                raise Conflict(f"a preset named {name!r} already exists") from None
            return self.get(preset_id)

    def update(self, preset_id: int, *, name: str | None = None, text: str | None = None) -> Preset:
        """Rename a preset or change its text; conversations it was applied to keep their copy."""
        if name is None and text is None:
            raise InvalidInput("nothing to change: give a name or a text")
        new_name = None if name is None else check_name(name)
        new_text = None if text is None else check_preset_text(text)
        with self.store.write() as conn:
            current = self.get(preset_id)
            try:
                prompt_presets.update(conn, self.user_id, current.id,
                                      new_name if new_name is not None else current.name,
                                      new_text if new_text is not None else current.text, utcnow())
            except ConstraintError:
                raise Conflict(f"a preset named {new_name!r} already exists") from None
            return self.get(current.id)

    def delete(self, preset_id: int) -> None:
        with self.store.write() as conn:
            self.get(preset_id)
            prompt_presets.delete(conn, self.user_id, preset_id)

    def apply(self, preset_id: int, conversation_id: int) -> bool:
        """Make the preset's text the conversation's custom instructions; its stored prompt is
        rebuilt before this returns (P5). Returns whether anything changed."""
        def attempt(ready: Ready | None) -> bool:
            with self.store.write():
                preset = self.get(preset_id)
                return set_custom_instructions(self._ctx, conversation_id, preset.text, ready)

        return prepared.run(self.store, attempt)

    def matching(self, text: str | None) -> Preset | None:
        """The preset whose text a conversation's instructions are, if any (for the chat header)."""
        if text is None:
            return None
        return prompt_presets.by_text(self.store.connection(), self.user_id, text)


    def conversation_instructions(self, conversation_id: int) -> str | None:
        """A conversation's own custom instructions, or None while it uses its persona's."""
        self._ctx.conversations.get(conversation_id)
        return stored_prompts.instructions(self.store.connection(), conversation_id, user_id=self.user_id)


def set_custom_instructions(ctx: "Context", conversation_id: int, text: str | None,
                            ready: Ready | None = None) -> bool:
    """Give one conversation its own custom instructions (None: the persona's again).

    A change rebuilds that conversation's stored prompt in the same transaction (P5), its text made
    outside the write lock (``prepared``, U5; ``ready``: a caller's whose write this joins); the
    same text again changes nothing. Returns whether anything changed."""
    if text is not None and (not isinstance(text, str) or len(text) > MAX_TEXT):
        raise InvalidInput(f"custom instructions must be text of at most {MAX_TEXT} characters")
    if text is not None:
        check_text(text, "custom instructions")  # no NUL, no lone surrogate
    return prepared.run(ctx.store, lambda ready: _set_instructions(ctx, conversation_id, text, ready), ready)


def _set_instructions(ctx: "Context", conversation_id: int, text: str | None, ready: Ready | None) -> bool:
    """One attempt of ``set_custom_instructions``' write; the prompt's text is made outside it (U5)."""
    with ctx.store.write() as conn:
        ctx.conversations.get(conversation_id)
        if stored_prompts.instructions(conn, conversation_id) == text:
            return False
        stored_prompts.set_instructions(conn, ctx.user_id, conversation_id, text)
        ledger.append(conn, user_id=ctx.user_id, conversation_id=conversation_id,
                      kind="conversation.instructions_set",
                      payload={"chars": None if text is None else len(text)})
        stored.rebuild(conn, ctx.user_id, [conversation_id], ctx.handoff_text, ready=ready)
        return True
