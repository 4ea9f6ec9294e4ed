"""Character cards (X3): SillyTavern / Tavern cards V1, V2 and V3, from PNG or JSON, and back.

A card PNG carries its JSON, base64-encoded, in PNG ``tEXt`` chunks: ``chara`` (V2, or V1) and
``ccv3`` (V3). When both are present ``ccv3`` wins. A JSON card is the same object as a file.
Reading goes through Pillow; the image itself becomes the persona's avatar (re-encoded as PNG,
which drops any other chunks it carried).

Versions: ``spec: "chara_card_v3"`` with ``spec_version`` 3.x, ``spec: "chara_card_v2"`` with
``spec_version`` 2.x, or a V1 card (the fields at the top level, no ``spec``). Any other spec or
major version is refused with a clear error.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from dataclasses import dataclass
from typing import Any

from hearth.errors import InvalidInput, TooLarge
from hearth.records.personas import CARD_LISTS, CARD_TEXT, MAX_CARD_FIELD
from hearth.validation import check_tree

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CARD_BYTES = 20_000_000
MAX_PIXELS = 25_000_000
V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
OPAQUE = ("extensions", "assets", "creator_notes_multilingual")
DATES = ("creation_date", "modification_date")


@dataclass
class Card:
    """A parsed card: its fields (V3 names), the character book if any, and the avatar image."""

    spec: str  # chara_card_v1, chara_card_v2 or chara_card_v3
    name: str
    fields: dict[str, Any]  # persona card fields (personas.CARD_FIELDS)
    book: dict[str, Any] | None
    avatar: bytes | None  # PNG bytes

    def canonical(self) -> str:
        """The card's identity for dedupe: its fields and book, not its spec wrapper or image."""
        return json.dumps({"name": self.name, "fields": self.fields, "book": self.book}, sort_keys=True,
                          ensure_ascii=False)


def is_png(data: bytes) -> bool:
    return data[:8] == PNG_SIGNATURE


def read(data: bytes, name: str = "card") -> Card:
    """A card from PNG or JSON bytes; raises InvalidInput with a one-line reason."""
    if len(data) > MAX_CARD_BYTES:
        raise TooLarge(f"{name} is larger than {MAX_CARD_BYTES} bytes")
    if is_png(data):
        payload, avatar = _from_png(data, name)
    else:
        try:
            payload = json.loads(data.decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{name} is neither a PNG nor UTF-8 JSON (byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise InvalidInput(f"{name} nests JSON too deeply") from None
        avatar = None
    return from_json(payload, name, avatar)


def _from_png(data: bytes, name: str) -> tuple[Any, bytes]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise InvalidInput(f"{name} is not a PNG image")
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise InvalidInput(f"{name} is too large an image ({width}x{height})")
            image.load()  # text chunks after the image data are read here
            text = dict(getattr(image, "text", {}) or {})
            avatar = io.BytesIO()
            image.save(avatar, format="PNG")
    except InvalidInput:
        raise
    except Image.DecompressionBombError:
        raise InvalidInput(f"{name} is too large an image") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, KeyError, IndexError,
            TypeError, MemoryError, Image.DecompressionBombWarning) as exc:
        raise InvalidInput(f"{name} is not a readable PNG ({type(exc).__name__})") from None
    raw = text.get("ccv3") or text.get("chara")
    if raw is None:
        raise InvalidInput(f"{name} is a PNG without character data (no 'chara' or 'ccv3' text chunk)")
    try:
        decoded = base64.b64decode(raw.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise InvalidInput(f"{name}: the character chunk is not valid base64") from None
    try:
        payload = json.loads(decoded.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: the character chunk is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name}: the character chunk is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InvalidInput(f"{name}: the character chunk nests JSON too deeply") from None
    return payload, avatar.getvalue()


def from_json(payload: Any, name: str = "card", avatar: bytes | None = None) -> Card:
    if not isinstance(payload, dict):
        raise InvalidInput(f"{name}: a character card is a JSON object")
    # Text Hearth cannot store (a NUL, a lone surrogate) is refused naming the card field it is in
    # (``data.description in lily.png``), not the persona field it would have become (X5).
    check_tree(payload, name, paths=True)
    spec = payload.get("spec")
    data: Any
    if spec is None:
        data, spec = payload, "chara_card_v1"
        if not isinstance(data.get("name"), str):
            raise InvalidInput(f"{name}: not a character card (no 'spec' and no 'name')")
    else:
        version = str(payload.get("spec_version", ""))
        expected = {"chara_card_v2": "2", "chara_card_v3": "3"}.get(spec) if isinstance(spec, str) else None
        if expected is None:
            raise InvalidInput(f"{name}: unsupported card spec {str(spec)[:40]!r} (expected chara_card_v2 or v3)")
        if version.split(".")[0] != expected:
            raise InvalidInput(f"{name}: unsupported {spec} spec_version {version[:20]!r}")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise InvalidInput(f"{name}: the card has no 'data' object")
    prefix = "" if spec == "chara_card_v1" else "data."  # where the fields sit, for errors
    card_name = data.get("name")
    if not isinstance(card_name, str) or not card_name.strip():
        raise InvalidInput(f"{name}: the card has no name")
    if len(card_name) > 200:
        raise InvalidInput(f"{name}: the card's name is longer than 200 characters")
    fields: dict[str, Any] = {}
    for key in CARD_TEXT:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"{prefix}{key} in {name}: must be text")
        if len(value) > MAX_CARD_FIELD:
            raise InvalidInput(f"{prefix}{key} in {name}: longer than {MAX_CARD_FIELD} characters")
        if value:
            fields[key] = value
    for key in CARD_LISTS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidInput(f"{prefix}{key} in {name}: must be a list of text")
        if sum(len(v) for v in value) > MAX_CARD_FIELD:
            raise InvalidInput(f"{prefix}{key} in {name}: longer than {MAX_CARD_FIELD} characters")
        if value:
            fields[key] = list(value)
    for key in OPAQUE:
        value = data.get(key)
        if value is None or value == {} or value == []:
            continue
        if key == "assets" and not isinstance(value, list) or key != "assets" and not isinstance(value, dict):
            raise InvalidInput(f"{prefix}{key} in {name}: has the wrong type")
        if len(json.dumps(value)) > MAX_CARD_FIELD:
            raise InvalidInput(f"{prefix}{key} in {name}: longer than {MAX_CARD_FIELD} characters")
        fields[key] = value
    for key in DATES:
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e13:
            fields[key] = int(value)
    book = data.get("character_book")
    if book is not None and not isinstance(book, dict):
        raise InvalidInput(f"{prefix}character_book in {name}: must be an object")
    if book:
        meta = {k: v for k, v in book.items() if k != "entries"}
        if meta:
            if len(json.dumps(meta)) > MAX_CARD_FIELD:
                raise InvalidInput(f"{name}: the character book's settings are too large")
            fields["book"] = meta
    return Card(spec, card_name.strip(), fields, book or None, avatar)


# -- export ---------------------------------------------------------------------------------------

def v3_json(name: str, fields: dict[str, Any], entries: list[dict[str, Any]] | None) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name}
    for key in ("description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
                "system_prompt", "post_history_instructions", "creator", "character_version"):
        data[key] = fields.get(key, "")
    data["tags"] = list(fields.get("tags", []))
    data["alternate_greetings"] = list(fields.get("alternate_greetings", []))
    data["group_only_greetings"] = list(fields.get("group_only_greetings", []))
    data["extensions"] = dict(fields.get("extensions", {}))
    for key in ("nickname", "source", "assets", "creator_notes_multilingual", *DATES):
        if key in fields:
            data[key] = fields[key]
    if entries or "book" in fields:
        data["character_book"] = {**fields.get("book", {}), "entries": list(entries or [])}
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


def v2_json(card_v3: dict[str, Any]) -> dict[str, Any]:
    """The V2 form of a V3 card, for loaders that read only ``chara``; V1 fields mirrored at the top."""
    data = {k: v for k, v in card_v3["data"].items()
            if k not in ("group_only_greetings", "nickname", "source", "assets", "creator_notes_multilingual",
                         *DATES)}
    out: dict[str, Any] = {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}
    for key in V1_FIELDS:
        out[key] = data.get(key, "")
    return out


def write_png(card_v3: dict[str, Any], avatar: bytes | None) -> bytes:
    """A card PNG with both chunks: ``chara`` (V2) and ``ccv3`` (V3)."""
    from PIL import Image, PngImagePlugin

    if avatar:
        try:
            with Image.open(io.BytesIO(avatar)) as source:
                source.load()
                image = source.copy() if source.mode in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16") \
                    else source.convert("RGBA")
        except (OSError, SyntaxError, ValueError) as exc:
            raise InvalidInput(f"the persona's avatar cannot be read as an image ({type(exc).__name__})") from None
    else:
        image = Image.new("RGBA", (400, 600), (62, 54, 48, 255))
    info = PngImagePlugin.PngInfo()
    info.add_text("chara", _b64(v2_json(card_v3)))
    info.add_text("ccv3", _b64(card_v3))
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def _b64(payload: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(payload, ensure_ascii=False).encode("utf-8")).decode("ascii")
