"""What a reply remembered (W11): the sources its request carried, recorded with the reply and
read back for the person.

The send path records, in the reply's own metadata (the transaction that saves the reply), the ids
of what its request held: the thread's memory snapshot, the fragments that fired, the turns thread
and keyword recall quoted, the archive excerpts, and the conversation a handoff came from. Ids only
(numbers): the text is read at display time from the rows themselves, so an edit shows the current
wording and a forgotten source simply drops out (B4) instead of surviving in a copy.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from hearth.errors import NotFound
from hearth.store import Connection
from hearth.store.queries import remembered as stored

if TYPE_CHECKING:
    from hearth.prompt.dynamic import Block
    from hearth.records.conversations import Conversations

KEY = "remembered"  # the reply metadata key
MAX_MEMORIES = 100  # a snapshot may hold thousands; a reply lists at most this many of them
PREVIEW_CHARS = 300
RECALL_LAYERS = ("thread_recall", "keyword_recall")


def sources(conn: Connection, conversation_id: int, blocks: Iterable["Block"], handoff: dict[str, Any] | None,
            handoff_in_prompt: bool) -> dict[str, Any]:
    """The ids a request carried, for the reply's metadata; keys with nothing are left out. One
    indexed read inside the assembly's read snapshot: the snapshot's ids in the key's order, so it
    stops after MAX_MEMORIES + 1 rows however large the snapshot (ordering by the memory list's
    position would sort the whole snapshot on every send: 45 ms at 20,000 memories)."""
    found: dict[str, Any] = {}
    rows = stored.snapshot_ids(conn, conversation_id, MAX_MEMORIES + 1)
    if rows:
        found["memories"] = rows[:MAX_MEMORIES]
        if len(rows) > MAX_MEMORIES:
            found["memories_more"] = True
    recall: list[int] = []
    for block in blocks:
        if block.layer == "fragments":
            found["fragments"] = list(block.source_ids)
        elif block.layer in RECALL_LAYERS:
            recall += [i for i in block.source_ids if i not in recall]
        elif block.layer == "archive_recall":
            kinds = block.source_kinds or ("chunk",) * len(block.source_ids)
            found["archive"] = [[kind, i] for kind, i in zip(kinds, block.source_ids)]
    if recall:
        found["recall"] = recall
    if handoff_in_prompt and handoff and (handoff.get("source_conversation_id") or handoff.get("source_document_id")):
        found["handoff"] = {"conversation_id": handoff.get("source_conversation_id"),
                            "document_id": handoff.get("source_document_id")}
    return found


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1].rstrip() + "…"


def read(conversations: "Conversations", conversation_id: int, message_id: int) -> dict[str, Any]:
    """What reply ``message_id`` of conversation ``conversation_id`` remembered, with each source's
    current text and where it lives. Another user's (or an unknown) conversation or message is
    NotFound; every source row is read with the owner's id, so a stray id never shows another
    person's data."""
    conversations.get(conversation_id)  # NotFound for another user's thread (G2)
    user_id = conversations.user_id
    conn = conversations.store.connection()
    row = stored.message_of(conn, user_id, conversation_id, message_id)
    if row is None:
        raise NotFound(f"no message {message_id} in this conversation")
    role, stored_metadata = row
    metadata = json.loads(stored_metadata or "{}")
    recorded = metadata.get(KEY)
    out: dict[str, Any] = {"message_id": message_id, "recorded": isinstance(recorded, dict), "memories": [],
                           "memories_more": False, "fragments": [], "recall": [], "archive": [], "handoff": None}
    if role != "assistant" or not isinstance(recorded, dict):
        return out
    ids = [i for i in recorded.get("memories", []) if isinstance(i, int)]
    if ids:
        # Listed in the memory list's own order (the prompt's order).
        out["memories"] = [{"id": m.id, "text": m.text, "category": m.category}
                           for m in stored.memories(conn, user_id, ids)]
        out["memories_more"] = bool(recorded.get("memories_more"))
    ids = [i for i in recorded.get("fragments", []) if isinstance(i, int)]
    if ids:
        found = stored.fragments(conn, user_id, ids)
        out["fragments"] = [{"id": i, "category": found[i].category, "triggers": json.loads(found[i].triggers),
                             "text": _preview(found[i].definition)} for i in ids if i in found]
    ids = [i for i in recorded.get("recall", []) if isinstance(i, int)]
    out["recall"] = _messages(conn, user_id, ids, conversation_id)
    archive = [a for a in recorded.get("archive", []) if isinstance(a, list) and len(a) == 2]
    messages = {m["message_id"]: m for m in _messages(conn, user_id, [i for k, i in archive if k == "message"],
                                                       conversation_id)}
    chunk_ids = [i for k, i in archive if k == "chunk" and isinstance(i, int)]
    chunks = {}
    if chunk_ids:
        chunks = stored.chunks(conn, user_id, chunk_ids)
    for kind, i in archive:
        if kind == "message" and i in messages:
            out["archive"].append({"kind": "message", **messages[i]})
        elif kind == "chunk" and i in chunks:
            c = chunks[i]
            out["archive"].append({"kind": "chunk", "chunk_id": i, "document_id": c.document_id,
                                   "title": c.title, "date": c.chunk_date, "text": _preview(c.text)})
    handoff = recorded.get("handoff")
    if isinstance(handoff, dict):
        out["handoff"] = _handoff(conn, user_id, handoff)
    return out


def _messages(conn: Connection, user_id: int, ids: list[int], here: int) -> list[dict[str, Any]]:
    if not ids:
        return []
    found = stored.turns(conn, user_id, ids)
    return [{"message_id": i, "conversation_id": found[i].conversation_id, "title": found[i].title,
             "this_conversation": found[i].conversation_id == here, "role": found[i].role,
             "date": found[i].created_at, "text": _preview(found[i].content)} for i in ids if i in found]


def _handoff(conn: Connection, user_id: int, handoff: dict[str, Any]) -> dict[str, Any] | None:
    source = handoff.get("conversation_id")
    if isinstance(source, int):
        row = stored.conversation_title(conn, user_id, source)
        if row is not None:
            return {"conversation_id": row[0], "document_id": None, "title": row[1]}
    document = handoff.get("document_id")
    if isinstance(document, int):
        found = stored.document_title(conn, user_id, document)
        if found is not None:
            return {"conversation_id": None, "document_id": found[0], "title": found[1]}
    return None
