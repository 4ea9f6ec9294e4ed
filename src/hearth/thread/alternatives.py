"""Alternatives of a turn (W2): regenerated replies to swipe between, and edits of a sent message.

A message row always holds the chosen version, so everything that reads the thread (history,
handoffs, summaries, search) sees what the person chose without knowing about alternatives. Every
version, the original included, is kept in ``message_alternatives`` (numbered from 0, never
deleted or changed), and each new version or choice is a ledger event that carries numbers only.

A message of the person's can be edited anywhere in the thread. The turns that followed the
version being replaced are its *branch*: they move, with their ids, events and own versions, from
``messages`` into ``branch_messages`` (one ``message_branches`` row per message and version), so the
thread, its history, the keyword and vector indexes and every later request see only the chosen
path; choosing that version again brings them back and puts the other continuation away in turn.
Nothing is deleted. Whenever the chosen text of a turn changes, its vector is dropped and queued
again (with the next turn's, whose context quotes it), the thread's Responses chain is reset, and
after a branch moves its summary and live context are queued to be written again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hearth.continuity.timeline import chains
from hearth.errors import InvalidInput, NotFound
from hearth.ops.jobs import enqueue
from hearth.records import ledger
from hearth.records.ledger import Message
from hearth.retrieval.embedding_job import EMBED_JOB, EMBED_JOB_SLICE
from hearth.store import Connection
from hearth.store.connection import utcnow
from hearth.store.queries import alternatives as stored

# What leaves the thread with a branch: turns, never the stored prompt or a handoff bubble.
BRANCH_KINDS = ("chat", "tool_result")
# Jobs that write a thread's derived state again once its turns changed (as after forgetting).
_REBUILD_KINDS = ("summary.refresh", "live_context.refresh")


@dataclass(frozen=True)
class Alternative:
    message_id: int
    position: int
    content: str
    created_at: str
    chosen: bool
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "position": self.position, "content": self.content,
                "created_at": self.created_at, "chosen": self.chosen, "metadata": self.metadata}


def _message(conn: Connection, user_id: int, message_id: int) -> Message:
    message = stored.message(conn, user_id, message_id)
    if message is None:
        raise NotFound(f"no message {message_id}")
    return message


def add(conn: Connection, user_id: int, message_id: int, content: str, *, metadata: dict[str, Any] | None = None,
        channel: str = "web", reason: str = "regenerated") -> int:
    """Store a new version of a message and make it the chosen one (in the caller's transaction).

    Returns its position. ``reason`` is ``regenerated`` (a reply) or ``edited`` (the person's
    message: the turns after it become the branch of the version it replaces).
    """
    message = _message(conn, user_id, message_id)
    # The first time a message gets an alternative, its original version becomes position 0.
    stored.keep_original(conn, message)
    position = stored.next_position(conn, message_id)
    meta = dict(metadata or {})
    stored.insert(conn, user_id, message_id, position, content, json.dumps(meta), utcnow())
    payload = {"message_id": message_id, "position": position, "chars": len(content)}
    if reason == "edited":
        payload["branched"] = len(_stash(conn, message, message.metadata.get("chosen", 0)))
    _show(conn, message, position, content, meta)
    ledger.append(conn, user_id=user_id, conversation_id=message.conversation_id, kind=f"message.{reason}",
                  channel=channel, payload=payload)
    _changed(conn, message, [], moved=reason == "edited")
    return position


def choose(conn: Connection, user_id: int, message_id: int, position: int, *, channel: str = "web") -> Message:
    """Make the version at ``position`` the one the thread shows and later requests read."""
    message = _message(conn, user_id, message_id)
    row = stored.version(conn, message_id, position)
    if row is None:
        raise InvalidInput(f"message {message_id} has no alternative {position}")
    payload: dict[str, Any] = {"message_id": message_id, "position": position}
    restored: list[int] = []
    current = message.metadata.get("chosen", 0)
    moved = message.role == "user" and position != current
    if moved:
        # The person's message carries its continuation: put the present one away, bring back the other.
        payload["branched"] = len(_stash(conn, message, current))
        restored = _restore(conn, message, position)
        payload["restored"] = len(restored)
    _show(conn, message, position, row[0], json.loads(row[1]))
    ledger.append(conn, user_id=user_id, conversation_id=message.conversation_id, kind="message.alternative_chosen",
                  channel=channel, payload=payload)
    _changed(conn, message, restored, moved=moved)
    return _message(conn, user_id, message_id)


def _stash(conn: Connection, message: Message, position: int) -> list[int]:
    """Move the turns after ``message`` out of the thread, as the branch of its version ``position``."""
    return stored.stash(conn, message, position, BRANCH_KINDS, utcnow())


def _restore(conn: Connection, message: Message, position: int) -> list[int]:
    """Bring back the branch of ``message``'s version ``position`` (nothing if it has none)."""
    return stored.restore(conn, message.id, position)


def _changed(conn: Connection, message: Message, restored: list[int], *, moved: bool) -> None:
    """What follows a change of the chosen text of ``message`` (and turns brought back after it)."""
    conversation_id = message.conversation_id
    ids = [message.id, *restored]
    # The turn after each changed one is embedded with a quote of it ("in reply to: ..."), so it goes too.
    following = stored.next_turn(conn, conversation_id, max(ids))
    ids += [following] if following is not None else []
    stored.drop_vectors(conn, ids)
    enqueue(conn, message.user_id, EMBED_JOB, {"limit": EMBED_JOB_SLICE, "messages": sorted(set(ids))})
    # A Responses chain (E7) holds the other version: the next turn sends the thread again.
    chains.reset(conn, conversation_id)
    # Cached history windows are keyed by this revision; turns brought back may be older than them.
    stored.bump_history(conn, conversation_id)
    if moved:
        for kind in _REBUILD_KINDS:
            enqueue(conn, message.user_id, kind, {"conversation_id": conversation_id, "force": True},
                    dedupe_key=f"branch:{conversation_id}")


def _show(conn: Connection, message: Message, position: int, content: str, metadata: dict[str, Any]) -> None:
    count = stored.count(conn, message.id)
    shown = {k: v for k, v in message.metadata.items() if k not in ("alternatives", "chosen")}
    shown.update({k: v for k, v in metadata.items() if k not in ("alternatives", "chosen")})
    shown.update({"alternatives": count, "chosen": position})
    stored.show(conn, message.id, content, shown)


def listing(conn: Connection, user_id: int, message_id: int) -> list[Alternative]:
    """Every version of a message, oldest first; a message never changed has just its own."""
    message = _message(conn, user_id, message_id)
    chosen = message.metadata.get("chosen", 0)
    rows = stored.versions(conn, message_id)
    if not rows:
        return [Alternative(message.id, 0, message.content, message.created_at, True, {})]
    return [Alternative(message.id, r[0], r[1], r[3], r[0] == chosen, json.loads(r[2])) for r in rows]
