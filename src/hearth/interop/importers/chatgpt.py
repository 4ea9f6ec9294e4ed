"""ChatGPT ``conversations.json`` exports (A5).

An export is a list of conversations; each holds a ``mapping`` of nodes (id -> {message, parent,
children}) that forms a tree, because every edit or regeneration starts a new branch. The branch
the person last saw ends at ``current_node``: walking parent links from there to the root and
reversing gives the conversation as it stood. Without ``current_node`` the newest leaf is used.
System, tool and hidden messages are left out, and so is whatever is not speech: an assistant
message addressed to a tool (``recipient`` other than ``all``: the code it ran), and content that
is code, execution output, reasoning or the person's custom instructions. Text parts are joined.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from hearth.errors import InvalidInput
from hearth.retrieval.archive import ParsedDocument, Turn

ROLE_LABELS = {"user": "User said:", "assistant": "Assistant said:"}


# Seconds since 1970 up to the end of year 9999: anything outside is not a date.
MAX_TIMESTAMP = 253_402_300_799


def _number(value: Any) -> float | None:
    """A usable timestamp, or None for anything else (strings, booleans, 1e20, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value <= MAX_TIMESTAMP else None


def _stamp(value: Any) -> str | None:
    seconds = _number(value)
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _object(value: Any) -> dict[str, Any]:
    """Exports vary between versions: a field that is not an object counts as absent."""
    return value if isinstance(value, dict) else {}


def _key(value: Any) -> str | None:
    """Node ids are strings; anything else (a list, a number) cannot name a node."""
    return value if isinstance(value, str) else None


SPEECH = ("text", "multimodal_text")


def _text(message: dict[str, Any]) -> str:
    content = _object(message.get("content"))
    if content.get("content_type", "text") not in SPEECH:
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str)).strip()
    text = content.get("text")
    return text.strip() if isinstance(text, str) else ""


def _created(node: Any) -> float:
    return _number(_object(_object(node).get("message")).get("create_time")) or 0.0


def current_branch(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """Nodes from the root to ``current`` (or to the newest leaf), following parent links.

    A loop over parent links, never recursion: a hostile export cannot exhaust the stack.
    """
    if not mapping:
        return []
    node_id = _key(current)
    if node_id not in mapping:
        leaves = [n for n in mapping.values() if isinstance(n, dict) and not n.get("children")]
        leaves.sort(key=_created)
        node_id = _key(leaves[-1].get("id")) if leaves else None
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id is not None and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise InvalidInput("the export has a mapping node that is not an object")
        path.append(node)
        node_id = _key(node.get("parent"))
    return list(reversed(path))


def parse(payload: Any, role_labels: dict[str, str] | None = None) -> list[ParsedDocument]:
    labels = {**ROLE_LABELS, **(role_labels or {})}
    if isinstance(payload, dict):
        payload = [payload]
    if not isinstance(payload, list):
        raise InvalidInput("a ChatGPT export is a list of conversations")
    documents = []
    for n, conversation in enumerate(payload, start=1):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"), dict):
            raise InvalidInput(f"conversation {n} of the export has no 'mapping' of messages")
        turns: list[Turn] = []
        for node in current_branch(conversation["mapping"], conversation.get("current_node")):
            message = node.get("message")
            if not isinstance(message, dict):
                continue
            role = _key(_object(message.get("author")).get("role"))
            metadata = _object(message.get("metadata"))
            if role not in ROLE_LABELS or metadata.get("is_visually_hidden_from_conversation"):
                continue
            if message.get("recipient") not in (None, "all"):
                continue  # a call to a tool: code, not speech
            text = _text(message)
            if text:
                turns.append(Turn(labels[role], role, text, _stamp(message.get("create_time"))))
        if not turns:
            continue
        raw_title = conversation.get("title")
        title = (raw_title.strip() if isinstance(raw_title, str) else "") or "Untitled ChatGPT conversation"
        date = _stamp(conversation.get("create_time")) or turns[0].date
        rendered = "\n\n".join(f"{t.label}\n{t.text}" for t in turns)
        source_id = conversation.get("id") or conversation.get("conversation_id") or ""
        documents.append(ParsedDocument(
            title=title, turns=turns, date=date,
            metadata={"source_id": source_id if isinstance(source_id, str) else "", "turns": len(turns)},
            hash_text=f"{title}\n{rendered}"))
    return documents
