"""One conversation exported (W15): Markdown to read, JSON to keep and import again.

Both hold the thread as it reads: its title, companion and each visible turn (the chosen version
of each, in order) with its time and the files attached to it. The JSON carries the attachments
whole (text as text, images as base64), so importing it (``Imports.hearth_chat``, format
``hearth-chat``) gives back the same turns with their attachments as a read-only thread, continued
with Branch like any imported thread. Markdown shows text files in fenced blocks and names images
(their bytes are in the JSON). Neither carries the stored prompt, memories, versions that were not
chosen, or the turns an edit put away.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hearth.errors import InvalidInput, TooLarge
from hearth.records import attachments
from hearth.store import Connection
from hearth.store.queries.interop_lookups import chat_turns
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.records.conversations import Conversation
    from hearth.records.personas import Persona

FORMAT = "hearth-chat"
FORMAT_VERSION = 1
MAX_MESSAGES = 100_000
ROLES = ("user", "assistant")


def _turns(conn: Connection, user_id: int, conversation_id: int) -> list[tuple[int, str, str, str, str]]:
    return chat_turns(conn, user_id, conversation_id)


def chat_json(conn: Connection, user_id: int, conversation: "Conversation", persona: "Persona") -> dict[str, Any]:
    attached = attachments.of_conversation(conn, user_id, conversation.id, content=True)
    messages = []
    for row in _turns(conn, user_id, conversation.id):
        item: dict[str, Any] = {"role": row[1], "content": row[2], "channel": row[3], "created_at": row[4]}
        files = attached.get(row[0], [])
        if files:
            item["attachments"] = [_file(a) for a in files]
        messages.append(item)
    return {"format": FORMAT, "format_version": FORMAT_VERSION,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "conversation": {"title": conversation.title, "created_at": conversation.created_at,
                             "persona": {"name": persona.name, "display_name": persona.display_name}},
            "messages": messages}


def _file(a: attachments.Attachment) -> dict[str, Any]:
    out: dict[str, Any] = {"name": a.name, "media_type": a.media_type, "kind": a.kind, "size": a.size}
    if a.text is not None:
        out["text"] = a.text
    if a.data is not None:
        out["data"] = base64.b64encode(a.data).decode("ascii")
    return out


def _fence(text: str) -> str:
    """A backtick fence longer than any run inside ``text``, so the block cannot be closed early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def chat_markdown(conn: Connection, user_id: int, conversation: "Conversation", persona: "Persona",
                  person: str) -> str:
    attached = attachments.of_conversation(conn, user_id, conversation.id, content=True)
    names = {"user": person or "You", "assistant": persona.display_name or persona.name}
    lines = [f"# {conversation.title or 'Conversation'}", "",
             f"With {names['assistant']}, started {conversation.created_at[:16].replace('T', ' ')}.", ""]
    for row in _turns(conn, user_id, conversation.id):
        lines += [f"## {names[row[1]]} · {row[4][:16].replace('T', ' ')}", "", row[2], ""]
        for a in attached.get(row[0], []):
            if a.text is not None:
                fence = _fence(a.text)
                lines += [f"Attached: {a.name} ({a.media_type}, {a.size} bytes)", "", fence, a.text, fence, ""]
            else:
                lines += [f"Attached image: {a.name} ({a.media_type}, {a.size} bytes; in the JSON export)", ""]
    return "\n".join(lines).rstrip() + "\n"


def filename(conversation: "Conversation", ext: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", conversation.title or "conversation").strip("-._")[:60]
    return f"{slug or 'conversation'}-{conversation.id}.{ext}"


@dataclass(frozen=True)
class ImportedTurn:
    role: str
    content: str
    created_at: str | None
    attached: list[attachments.NewAttachment]


@dataclass(frozen=True)
class ImportedChat:
    title: str
    created_at: str | None
    persona_name: str
    turns: list[ImportedTurn]


def parse(payload: Any, name: str, settings: Any, max_chars: int) -> ImportedChat:
    """A ``hearth-chat`` document checked whole before anything is written, or ``InvalidInput``."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise InvalidInput(f"{name} is not a Hearth conversation export")
    if payload.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(f"{name} is a conversation export of version {payload.get('format_version')!r}; "
                           f"this Hearth reads version {FORMAT_VERSION}")
    head = payload.get("conversation")
    messages = payload.get("messages")
    if not isinstance(head, dict) or not isinstance(messages, list):
        raise InvalidInput(f"{name} needs a conversation object and a messages list")
    if not messages:
        raise InvalidInput(f"{name} holds no messages")
    if len(messages) > MAX_MESSAGES:
        raise TooLarge(f"{name} holds more than {MAX_MESSAGES} messages")
    named = head.get("persona")
    persona: dict[str, Any] = named if isinstance(named, dict) else {}
    turns = []
    for n, m in enumerate(messages, start=1):
        where = f"{name} message {n}"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise InvalidInput(f"{where} needs a role of user or assistant")
        content = check_text(m.get("content"), where, max_chars=max_chars)
        created = m.get("created_at")
        created = _stamp(created, where)
        files = m.get("attachments") or []
        if not isinstance(files, list):
            raise InvalidInput(f"{where}: attachments must be a list")
        if files and m["role"] != "user":
            raise InvalidInput(f"{where}: only the person's messages carry attachments")
        checked = attachments.check([_new(f, where) for f in files], settings)
        turns.append(ImportedTurn(m["role"], content, created, checked))
    title = check_text(head.get("title") or "", f"{name} title", max_chars=500, strip=True)
    return ImportedChat(title, _stamp(head.get("created_at"), f"{name} conversation"),
                        check_text(persona.get("name") or persona.get("display_name") or "", f"{name} persona",
                                   max_chars=200, strip=True), turns)


def _stamp(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: created_at must be an ISO 8601 time")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{where}: created_at must be an ISO 8601 time") from None
    return value


def _new(item: Any, where: str) -> attachments.NewAttachment:
    if not isinstance(item, dict):
        raise InvalidInput(f"{where}: each attachment must be an object")
    data = item.get("data")
    raw = None
    if data is not None:
        if not isinstance(data, str):
            raise InvalidInput(f"{where}: an attachment's data must be base64 text")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput(f"{where}: an attachment's data is not valid base64") from None
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise InvalidInput(f"{where}: an attachment's text must be text")
    name = item.get("name")
    media_type = item.get("media_type") or ""
    if not isinstance(name, str) or not isinstance(media_type, str):
        raise InvalidInput(f"{where}: an attachment needs a name and a media type")
    return attachments.NewAttachment(name, media_type, text=text, data=raw)


def dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
