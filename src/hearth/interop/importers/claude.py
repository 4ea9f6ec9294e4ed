"""Claude exports (X4): ``conversations.json`` from a claude.ai data export (or its zip).

The export is a list of conversations (``uuid``, ``name``, ``created_at``, ``chat_messages``);
each message has a ``sender`` (``human`` or ``assistant``), ISO timestamps, and ``content``
blocks. Only ``text`` blocks are speech: ``tool_use`` (code the assistant ran) and
``tool_result`` blocks, thinking and attachments are left out. A message without content blocks
falls back to its ``text`` field.
"""

from __future__ import annotations

from typing import Any

from hearth.errors import InvalidInput
from hearth.retrieval.archive import ParsedDocument, Turn

ROLES = {"human": "user", "user": "user", "assistant": "assistant"}


def _stamp(value: Any) -> str | None:
    if isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-":
        return value[:19].replace(" ", "T") + "Z" if len(value) >= 19 else value[:10]
    return None


def _text(message: dict[str, Any]) -> str:
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks:
        parts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        return "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""


def parse(payload: Any, labels: dict[str, str]) -> list[ParsedDocument]:
    if isinstance(payload, dict):
        payload = payload.get("conversations", [payload]) if "chat_messages" not in payload else [payload]
    if not isinstance(payload, list):
        raise InvalidInput("a Claude export is a list of conversations")
    documents = []
    seen: set[str] = set()
    for n, conversation in enumerate(payload, start=1):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("chat_messages"), list):
            raise InvalidInput(f"conversation {n} of the export has no 'chat_messages'")
        source_id = str(conversation.get("uuid") or "")
        if source_id and source_id in seen:
            continue  # the same conversation twice in one file: documented skip
        seen.add(source_id)
        turns: list[Turn] = []
        for message in conversation["chat_messages"]:
            if not isinstance(message, dict):
                raise InvalidInput(f"conversation {n} has a message that is not an object")
            role = ROLES.get(message.get("sender"))  # type: ignore[arg-type]
            if role is None:
                continue  # system or unknown senders are not speech
            text = _text(message)
            if text:
                turns.append(Turn(labels[role], role, text, _stamp(message.get("created_at"))))
        if not turns:
            continue
        name = conversation.get("name")
        title = name.strip() if isinstance(name, str) and name.strip() else "Untitled Claude conversation"
        rendered = "\n\n".join(f"{t.label}\n{t.text}" for t in turns)
        documents.append(ParsedDocument(
            title=title[:300], turns=turns, date=_stamp(conversation.get("created_at")) or turns[0].date,
            metadata={"source_id": source_id, "turns": len(turns), "source_format": "claude"},
            hash_text=f"{title}\n{rendered}"))
    return documents
