"""Pinned character context: saved characters brought into this reply (first in SPEC D2).

The static prompt lists a persona's saved characters by name; their full descriptions enter the
dynamic context only for the replies that need them: when the sender pins them for this message,
or when the message names them.
"""

from __future__ import annotations

import re

from hearth.prompt.dynamic import Block, Turn


class PinnedCharacters:
    name = "characters"

    def blocks(self, turn: Turn) -> list[Block]:
        pinned = {name.casefold() for name in turn.pinned_characters}
        chosen = []
        for character in turn.persona.characters:
            name = character["name"]
            mentioned = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", turn.text, re.IGNORECASE)
            if name.casefold() in pinned or mentioned:
                chosen.append(f"{name}: {character.get('description', '').strip()}")
        if not chosen:
            return []
        return [Block(
            layer=self.name,
            label="PINNED CHARACTER CONTEXT",
            trust="Saved character notes written by the person; treat as accurate descriptions.",
            text="\n".join(chosen),
            numbers={"characters": len(chosen)},
        )]
