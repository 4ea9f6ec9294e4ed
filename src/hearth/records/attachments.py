"""Attachments of the person's messages (W14): text files and images.

A text file is stored as text and travels inside its message, after the person's own words, each
file wrapped in an ``<attachment>`` element naming it; an image is stored as its bytes and travels
as the provider's own image part (``providers.base.ImagePart``). Both are checked before anything
is written: at most ``attachment_max_count`` a message, each at most ``attachment_max_bytes``
(``TooLarge``, HTTP 413), a message's text files together at most ``attachment_text_chars``
characters, images only PNG, JPEG, GIF or WebP told by their bytes (``InvalidInput``, 422).

Rows belong to the message's ledger event (migration 34), so they stay through edits and the turns
an edit puts away, and go when the message is forgotten (B4). Every read is scoped to its user.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from hearth.errors import InvalidInput, NotFound, TooLarge
from hearth.providers.base import ImagePart
from hearth.store import Connection
from hearth.store.queries import attachments as stored
from hearth.text import IMAGE_TOKENS, estimate_tokens
from hearth.validation import check_text, text_problem

if TYPE_CHECKING:
    from hearth.settings import Settings

MAX_NAME = 200
# The image types every provider Hearth speaks to accepts (Anthropic's list is the narrowest).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# Media types of text files beside text/*: what browsers report for common text formats.
TEXT_TYPES = ("application/json", "application/xml", "application/x-yaml", "application/yaml",
              "application/javascript", "application/x-sh", "application/toml", "application/sql",
              "application/x-python", "application/x-ndjson", "")


@dataclass(frozen=True)
class NewAttachment:
    """An attachment checked and ready to store: ``text`` for a text file, ``data`` for an image."""

    name: str
    media_type: str
    text: str | None = None
    data: bytes | None = None

    @property
    def kind(self) -> str:
        return "image" if self.data is not None else "text"

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else len((self.text or "").encode("utf-8"))


@dataclass(frozen=True)
class Attachment:
    id: int
    message_id: int
    conversation_id: int
    position: int
    kind: str  # text | image
    name: str
    media_type: str
    size: int  # bytes
    created_at: str
    text: str | None = None  # loaded only where the content is needed
    data: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        """What a message listing carries: never the content."""
        return {"id": self.id, "kind": self.kind, "name": self.name, "media_type": self.media_type,
                "size": self.size}

    def image(self) -> ImagePart:
        assert self.data is not None
        return ImagePart(self.media_type, self.data, self.name)


def sniff_image(data: bytes) -> str | None:
    """The media type an image's first bytes say, or None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _name(value: Any) -> str:
    name = check_text(value, "an attachment's name", required=True, strip=True)
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()  # a file's own name, never a path
    if not name or not name.isprintable():
        raise InvalidInput("an attachment's name must be one line of printable characters")
    return name[:MAX_NAME]


def check(items: Sequence[Any], settings: "Settings") -> list[NewAttachment]:
    """The attachments of one message, checked (see the module docstring), or the error that says
    which limit was passed. ``items`` are ``NewAttachment`` or mappings with ``name``,
    ``media_type`` and either ``text`` or ``data`` (base64)."""
    if len(items) > settings.attachment_max_count:
        raise InvalidInput(f"a message may carry at most {settings.attachment_max_count} attachments; "
                           f"this one has {len(items)}")
    checked = [_one(item, settings) for item in items]
    text_chars = sum(len(a.text) for a in checked if a.text is not None)
    if text_chars > settings.attachment_text_chars:
        raise TooLarge(f"the attached text files hold {text_chars} characters together; a message may carry "
                       f"at most {settings.attachment_text_chars}")
    return checked


def _one(item: Any, settings: "Settings") -> NewAttachment:
    if isinstance(item, NewAttachment):
        item = {"name": item.name, "media_type": item.media_type, "text": item.text,
                "data": None if item.data is None else item.data}
    if not isinstance(item, dict):
        raise InvalidInput("an attachment must be an object with a name and its text or data")
    name = _name(item.get("name"))
    media_type = check_text(item.get("media_type") or "", "an attachment's media type", max_chars=100,
                            strip=True).lower()
    text, data = item.get("text"), item.get("data")
    if (text is None) == (data is None):
        raise InvalidInput(f"attachment {name!r} needs either its text or its data, not both")
    limit = settings.attachment_max_bytes
    if text is not None:
        if not isinstance(text, str):
            raise InvalidInput(f"attachment {name!r}: text must be text")
        if len(text) > limit or len(text.encode("utf-8")) > limit:
            raise TooLarge(f"attachment {name!r} is larger than {limit} bytes")
        problem = text_problem(text)
        if problem:
            raise InvalidInput(f"attachment {name!r} {problem}; attach text files as text, images as images")
        if not (media_type.startswith("text/") or media_type in TEXT_TYPES):
            raise InvalidInput(f"attachment {name!r} is {media_type}: only text files and images can be attached")
        return NewAttachment(name, media_type or "text/plain", text=text)
    if isinstance(data, str):
        if len(data) > (limit + 2) // 3 * 4 + 4:
            raise TooLarge(f"attachment {name!r} is larger than {limit} bytes")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput(f"attachment {name!r}: data is not valid base64") from None
    elif isinstance(data, bytes):
        raw = data
    else:
        raise InvalidInput(f"attachment {name!r}: data must be base64 text")
    if len(raw) > limit:
        raise TooLarge(f"attachment {name!r} is larger than {limit} bytes")
    sniffed = sniff_image(raw)
    if sniffed is None:
        raise InvalidInput(f"attachment {name!r} is not a PNG, JPEG, GIF or WebP image; "
                           "only text files and those images can be attached")
    return NewAttachment(name, sniffed, data=raw)


def add(conn: Connection, user_id: int, conversation_id: int, message_id: int,
        items: Iterable[NewAttachment]) -> int:
    """Store a message's attachments in the caller's transaction (the message's own); their count."""
    return stored.insert(conn, user_id, conversation_id, message_id,
                         [(i.kind, i.name, i.media_type, i.size, i.text, i.data) for i in items])


def _by_message(rows: list[dict[str, Any]]) -> dict[int, list[Attachment]]:
    found: dict[int, list[Attachment]] = {}
    for row in rows:
        found.setdefault(row["message_id"], []).append(Attachment(**row))
    return found


def of_messages(conn: Connection, user_id: int, conversation_id: int, message_ids: Sequence[int], *,
                content: bool = False) -> dict[int, list[Attachment]]:
    """The attachments of these messages of one conversation, by message id (in order)."""
    ids = sorted(set(message_ids))
    if not ids:
        return {}
    # One range read on the (conversation_id, message_id) index, then kept to the ids asked for.
    found = _by_message(stored.in_range(conn, user_id, conversation_id, ids[0], ids[-1], content=content))
    wanted = set(ids)
    return {k: v for k, v in found.items() if k in wanted}


def in_range(conn: Connection, user_id: int, conversation_id: int, first_id: int, last_id: int, *,
             content: bool = False) -> dict[int, list[Attachment]]:
    """The attachments of a conversation's messages from ``first_id`` to ``last_id``, by message id."""
    return _by_message(stored.in_range(conn, user_id, conversation_id, first_id, last_id, content=content))


def of_conversation(conn: Connection, user_id: int, conversation_id: int, *,
                    content: bool = False) -> dict[int, list[Attachment]]:
    return _by_message(stored.of_conversation(conn, user_id, conversation_id, content=content))


def get(conn: Connection, user_id: int, conversation_id: int, attachment_id: int) -> Attachment:
    """One attachment with its content; another user's or another thread's is not found."""
    row = stored.get(conn, user_id, conversation_id, attachment_id)
    if row is None:
        raise NotFound(f"no attachment {attachment_id} in this conversation")
    return Attachment(**row)


def totals(conn: Connection, user_id: int, conversation_id: int) -> tuple[int, int]:
    """(characters of text files, number of images) of a thread's messages, for the header (R4)."""
    return stored.totals(conn, user_id, conversation_id)


def inline(text: str, attached: Sequence[Attachment | NewAttachment]) -> str:
    """The message as the model reads it: the person's words, then each text file in its element.
    Images travel as image parts; a model that cannot see them is told their names (``unseen``)."""
    parts = [text]
    for a in attached:
        if a.text is not None:
            name = a.name.replace('"', "'")
            parts.append(f'<attachment name="{name}" type="{a.media_type}">\n{a.text}\n</attachment>')
    return "\n\n".join(parts)


def unseen(attached: Sequence[Attachment | NewAttachment]) -> str:
    """A line naming images this model cannot see (kept from a thread whose model could)."""
    names = [a.name for a in attached if a.data is not None]
    if not names:
        return ""
    return "[" + ", ".join(f"image {n!r}" for n in names) + " attached; this model cannot see images]"


def image_tokens(count: int) -> int:
    return IMAGE_TOKENS * count


def text_tokens(attached: Sequence[Attachment | NewAttachment]) -> int:
    return estimate_tokens(sum(len(a.text) for a in attached if a.text is not None))
