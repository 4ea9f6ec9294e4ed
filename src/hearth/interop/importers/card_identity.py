"""A card's Hearth identity (X3): which persona an exported card came from, and whether it changed.

An export writes ``data.extensions.hearth = {"uuid": ..., "hash": ...}``: the persona's stable
uuid and the hash of the card's normalised content. Importing the card for the same user finds the
persona by that uuid (never another user's); the content hashes say whether anything changed.

The hash is taken over the card as Hearth reads it, normalised so that what only restates a
default does not count: character book entries are compared by their parsed controls (an export
writes every control out; the original card may have named only a few), and the extension fields
SillyTavern adds with their default values when it saves a card are left out, as is the
modification date it stamps on every save. The image is compared apart, by its pixels.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any

from hearth.interop.importers.cards import Card

KEY = "hearth"
_HEX = frozenset("0123456789abcdef")
# SillyTavern's card extensions as it writes them when the character has none of its own.
_CARD_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "talkativeness": (0.5, "0.5"), "fav": (False, "false"), "world": ("",),
    "depth_prompt": ({"prompt": "", "depth": 4, "role": "system"}, {"prompt": "", "depth": 4}),
}
# SillyTavern's character book entry extensions at their defaults (display_index is list order).
_ENTRY_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "group": ("",), "group_override": (False,), "group_weight": (100,), "use_group_scoring": (False, None),
    "automation_id": ("",), "vectorized": (False,), "outlet_name": ("",), "triggers": ([],),
    "match_persona_description": (False,), "match_character_description": (False,),
    "match_character_personality": (False,), "match_character_depth_prompt": (False,),
    "match_scenario": (False,), "match_creator_notes": (False,),
}


@dataclass(frozen=True)
class Mark:
    uuid: str
    hash: str


def take_mark(card: Card) -> Mark | None:
    """Removes the Hearth mark from the card's extensions (a persona never stores another's) and
    returns it when it is well formed; a malformed mark is dropped and the card is simply foreign."""
    extensions = card.fields.get("extensions")
    if not isinstance(extensions, dict) or KEY not in extensions:
        return None
    extensions = dict(extensions)
    raw = extensions.pop(KEY)
    if extensions:
        card.fields["extensions"] = extensions
    else:
        del card.fields["extensions"]
    if not isinstance(raw, dict):
        return None
    uuid, digest = raw.get("uuid"), raw.get("hash")
    if not (isinstance(uuid, str) and isinstance(digest, str) and _hex(uuid, 32) and _hex(digest, 64)):
        return None
    return Mark(uuid, digest)


def _hex(value: Any, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and set(value) <= _HEX


def content_hash(card: Card) -> str:
    """The hash of the card's normalised content (name, fields, character book; not the image)."""
    from hearth.interop.importers.lorebook import parse_character_book
    from hearth.lorebook.controls import DEFAULTS, check_controls

    fields = copy.deepcopy(card.fields)
    fields.pop("modification_date", None)
    extensions = _without_defaults(fields.pop("extensions", {}), _CARD_DEFAULTS)
    extensions.pop(KEY, None)
    if extensions:
        fields["extensions"] = extensions
    if isinstance(fields.get("book"), dict):
        meta = {k: v for k, v in fields["book"].items() if v is not None and v != {}}
        if meta:
            fields["book"] = meta
        else:
            del fields["book"]
    entries: list[dict[str, Any]] = []
    if card.book:
        for entry in parse_character_book(card.book, card.name).entries:
            controls = check_controls(entry.controls)
            extra = dict(controls.get("extra") or {})
            ext = _without_defaults(extra.pop("extensions", {}), _ENTRY_DEFAULTS)
            ext.pop("display_index", None)
            if ext:
                extra["extensions"] = ext
            book = {k: v for k, v in (extra.pop("book", {}) or {}).items()
                    # secondary_off follows from fields already hashed (SillyTavern's reading of them)
                    if (k, v) not in (("selective", True), ("use_regex", False)) and k != "secondary_off"}
            if book:
                extra["book"] = book
            controls["extra"] = extra
            # Only what differs from a default counts, so a control written out at its default is
            # the same as one left unsaid.
            kept = {k: v for k, v in controls.items() if k not in DEFAULTS or DEFAULTS[k] != v}
            entries.append({"uid": entry.uid, "keys": entry.keys, "content": entry.content.strip(),
                            "enabled": entry.enabled, "controls": kept})
    entries.sort(key=lambda e: str(e["uid"]))
    text = json.dumps({"name": card.name, "fields": fields, "entries": entries}, sort_keys=True,
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _without_defaults(values: Any, defaults: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if v is not None and not (k in defaults and v in defaults[k])}


def picture(image: bytes | None) -> bytes | None:
    """The card's image as an avatar: None when there is none, or when it is only the plain image
    an export draws for a persona without an avatar (importing it would give the persona one)."""
    return None if image is None or pixels(image) == _placeholder() else image


@functools.lru_cache(maxsize=1)
def _placeholder() -> str | None:
    from hearth.interop.importers.cards import write_png

    return pixels(write_png({"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "-"}}, None))


def pixels(image: bytes | None) -> str | None:
    """A digest of an image's pixels (its mode, size and data), so the same picture re-encoded
    compares equal; None for no image or one that cannot be read."""
    if not image:
        return None
    from PIL import Image

    try:
        with Image.open(io.BytesIO(image)) as opened:
            opened.load()
            return hashlib.sha256(f"{opened.mode}:{opened.size}".encode() + opened.tobytes()).hexdigest()
    except (OSError, SyntaxError, ValueError):
        return None
