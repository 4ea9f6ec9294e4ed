"""Conversations (C2), folders (C3) and the end-of-conversation boundary (C4).

Visibility is derived, not stored twice: a conversation is ``trashed`` when ``trashed_at`` is set,
``hidden`` when its folder is hidden, otherwise ``visible``. ``continuity_shielded`` is separate: a
shielded conversation is visible and readable but kept out of automatic continuity (V2).
"""

from __future__ import annotations

import builtins
import json
from dataclasses import replace
from typing import Any, Callable

from hearth.errors import Conflict, ConstraintError, InvalidInput, NotFound
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.records.ledger import Message
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import conversations as stored
from hearth.store.queries import ledger as stored_ledger
from hearth.store.queries import personas as stored_personas
from hearth.store.queries.conversations import ELIGIBLE_SQL, VISIBLE_SQL, Conversation, Folder
from hearth.store.queries.ledger import chat_turns_after
from hearth.thread.search import MAX_TAGS, ThreadMatch, check_tag, hits_sql, parse, snippet
from hearth.validation import check_id, check_text

__all__ = ["Conversation", "Conversations", "ELIGIBLE_SQL", "Folder", "Folders", "MAX_FOLDER_NAME", "MAX_TITLE",
           "OnVisibility", "VISIBLE_SQL", "chat_turns_after"]

MAX_TITLE = 500
MAX_FOLDER_NAME = 200


def _check_title(title: str) -> str:
    return check_text(title, "title", max_chars=MAX_TITLE, strip=True)


# Called inside the transaction of a visibility change with the ids of the conversations whose
# eligibility may have changed, so stored prompts that quote them are refreshed before the change
# reports success (V1, V3); with ``ready`` (the change runs under ``prepared.run``) their text is
# filled outside the write lock (U5). Installed by the engine; None leaves prompts alone.
OnVisibility = Callable[[Connection, list[int], "Ready | None"], object]


class Folders:
    def __init__(self, store: Store, user_id: int, on_visibility: OnVisibility | None = None):
        self.store = store
        self.user_id = user_id
        self._on_visibility = on_visibility

    def create(self, name: str, hidden: bool = False) -> Folder:
        name = check_text(name or "", "folder name", strip=True)
        if not name or len(name) > MAX_FOLDER_NAME:
            raise InvalidInput(f"folder name must be 1-{MAX_FOLDER_NAME} characters")
        with self.store.write() as conn:
            try:
                folder_id = stored.insert_folder(conn, self.user_id, name, hidden)
            except ConstraintError:
                raise Conflict(f"a folder named {name!r} already exists") from None
            return self.get(folder_id)

    def rename(self, folder_id: int, name: str) -> Folder:
        name = (name or "").strip() if isinstance(name, str) else ""
        if not name or len(name) > MAX_FOLDER_NAME:
            raise InvalidInput(f"folder name must be 1-{MAX_FOLDER_NAME} characters")
        with self.store.write() as conn:
            self.get(folder_id)
            try:
                stored.rename_folder(conn, self.user_id, folder_id, name)
            except ConstraintError:
                raise Conflict(f"a folder named {name!r} already exists") from None
            ledger.append(conn, user_id=self.user_id, kind="folder.renamed", payload={"folder_id": folder_id})
            return self.get(folder_id)

    def delete(self, folder_id: int, *, threads: str) -> int:
        """Delete a folder (W4). Its threads either leave it (``threads="keep"``; threads of a hidden
        folder stay shielded, as when moved out, V2) or go to the trash with it (``"trash"``).
        Returns how many threads it held."""
        if threads not in ("keep", "trash"):
            raise InvalidInput("threads must be 'keep' or 'trash'")
        def attempt(ready: Ready | None) -> int:
            with self.store.write() as conn:
                folder = self.get(folder_id)
                members = stored.in_folder(conn, self.user_id, folder_id)
                if members and threads == "trash":
                    stored.trash_many(conn, members)
                elif members and folder.hidden:
                    stored.shield_many(conn, members)
                stored.delete_folder(conn, self.user_id, folder_id)
                ledger.append(conn, user_id=self.user_id, kind="folder.deleted",
                              payload={"folder_id": folder_id, "conversations": len(members), "trashed": threads == "trash"})
                if self._on_visibility and members:
                    self._on_visibility(conn, members, ready)
                return len(members)

        return prepared.run(self.store, attempt)

    def get(self, folder_id: int) -> Folder:
        folder = stored.get_folder(self.store.connection(), self.user_id, check_id(folder_id, "folder id"))
        if folder is None:
            raise NotFound(f"no folder {folder_id}")
        return folder

    def list(self) -> list[Folder]:
        return stored.folders_of(self.store.connection(), self.user_id)

    def set_hidden(self, folder_id: int, hidden: bool, *, shield_on_show: bool = True) -> Folder:
        """Hide or show a folder. Showing it leaves its conversations shielded until each is
        released (V2): quarantined material does not silently rejoin automatic continuity."""
        def attempt(ready: Ready | None) -> Folder:
            with self.store.write() as conn:
                was_hidden = self.get(folder_id).hidden
                stored.set_folder_hidden(conn, self.user_id, folder_id, hidden)
                members = stored.in_folder(conn, self.user_id, folder_id)
                if shield_on_show and was_hidden and not hidden and members:
                    stored.shield_many(conn, members)
                ledger.append(conn, user_id=self.user_id, kind="folder.hidden" if hidden else "folder.shown",
                              payload={"folder_id": folder_id, "conversations": len(members)})
                if self._on_visibility and members:
                    self._on_visibility(conn, members, ready)
                return self.get(folder_id)

        return prepared.run(self.store, attempt)


class Conversations:
    def __init__(self, store: Store, user_id: int, on_visibility: OnVisibility | None = None):
        self.store = store
        self.user_id = user_id
        self._on_visibility = on_visibility

    # -- reading ---------------------------------------------------------------------------
    def get(self, conversation_id: int) -> Conversation:
        found = stored.get(self.store.connection(), self.user_id, check_id(conversation_id, "conversation id"))
        if found is None:
            raise NotFound(f"no conversation {conversation_id}")
        return found

    def current(self, persona_id: int) -> Conversation | None:
        """The most recently active open, untrashed conversation with a persona: where a message
        arriving on another channel, or the companion's own, continues (E5, E11)."""
        return stored.current(self.store.connection(), self.user_id, persona_id)

    def list(self, *, include_trashed: bool = False, folder_id: int | None = None,
             limit: int = 200, offset: int = 0, text: str = "", persona_id: int | None = None,
             loose: bool = False, trashed_only: bool = False,
             before: tuple[str, int] | None = None, pinned: bool | None = None) -> list[Conversation]:
        """Newest first. ``text`` is the search box: its words match the title (contains) or the
        text of a message (every word; the thread's newest such message is its ``match``), and
        each ``tag:NAME`` in it keeps only threads with that tag. ``loose`` keeps threads outside
        folders; ``pinned`` only pinned (True) or unpinned (False) ones; ``before`` is a cursor,
        the (updated_at, id) of the last thread of the previous page, so pages stay stable and
        cheap however many threads there are (W4)."""
        query = parse(text)
        conn = self.store.connection()
        page = stored.listing(conn, self.user_id, hits=hits_sql(conn, self.user_id, query.words) if query.words else None,
                              title=query.text, tags=query.tags, include_trashed=include_trashed,
                              trashed_only=trashed_only, folder_id=folder_id, loose=loose, persona_id=persona_id,
                              pinned=pinned, before=before, limit=limit, offset=offset)
        found = [conversation for conversation, _ in page]
        if not query.words:
            return found
        return self._with_matches(conn, found, [match_id for _, match_id in page], query.words)

    def _with_matches(self, conn: Connection, found: builtins.list[Conversation],
                      match_ids: builtins.list[int | None], words: tuple[str, ...]) -> builtins.list[Conversation]:
        """Each thread of a page with the snippet of its matching message: one read of at most a
        page of messages."""
        ids = [m for m in match_ids if m is not None]
        if not ids:
            return found
        rows = stored_ledger.matches(conn, self.user_id, ids)
        out = []
        for conversation, match_id in zip(found, match_ids):
            row = rows.get(match_id) if match_id is not None else None
            if match_id is not None and row is not None:
                role, created_at, content = row
                conversation = replace(conversation, match=ThreadMatch(
                    match_id, role, created_at, snippet(content, words)))
            out.append(conversation)
        return out

    def tags(self) -> builtins.list[dict[str, Any]]:
        """The user's tags with how many untrashed threads carry each, most used first."""
        return stored.tag_counts(self.store.connection(), self.user_id)

    def messages(self, conversation_id: int, *, visible_only: bool = True,
                 after_id: int = 0, limit: int | None = None, before_id: int | None = None,
                 newest: int | None = None) -> builtins.list[Message]:
        """Messages in stored order; by default only what a person sees as bubbles (P6).
        ``newest`` keeps only the last that many (before ``before_id``), so a long thread opens at
        its end without reading all of it."""
        self.get(conversation_id)
        return stored_ledger.messages_of(self.store.connection(), self.user_id, conversation_id, after_id=after_id,
                                         before_id=before_id, visible_only=visible_only, limit=limit, newest=newest)

    def message(self, message_id: int) -> Message:
        found = stored_ledger.message(self.store.connection(), self.user_id, check_id(message_id, "message id"))
        if found is None:
            raise NotFound(f"no message {message_id}")
        return found

    # -- writing ---------------------------------------------------------------------------
    def create(self, persona_id: int | None = None, title: str = "", folder_id: int | None = None,
               channel: str = "web", created_at: str | None = None, conversation_id: int | None = None) -> Conversation:
        """A bare conversation (no handoff; ``Scope.new_chat`` is the one with continuity), with
        the default persona when none is given. ``conversation_id``: the id an earlier attempt of
        the same write was given and rolled back (``prompt.prepared``), used again while it is free."""
        title = _check_title(title)
        with self.store.write() as conn:
            if persona_id is None:
                from hearth.records.personas import Personas

                persona_id = Personas(self.store, self.user_id).default().id
            if not stored_personas.exists(conn, self.user_id, persona_id):
                raise NotFound(f"no persona {persona_id}")
            if folder_id is not None:
                Folders(self.store, self.user_id).get(folder_id)
            now = created_at or utcnow()
            # A thread an import makes holds someone's history: it is read only (W4).
            if conversation_id is not None and stored.id_taken(conn, conversation_id):
                conversation_id = None  # taken meanwhile (SQLite hands out the largest id plus one)
            conversation_id = stored.insert(conn, self.user_id, persona_id, folder_id, title, now, channel == "import",
                                            conversation_id=conversation_id)
            # P1: the snapshot is captured now, before any prompt exists. (Imported here: a search
            # reads conversations and has no use for the memory layer, S20.)
            from hearth.memory.memories import capture_snapshot

            capture_snapshot(conn, self.user_id, conversation_id, "captured")
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id,
                          kind="conversation.created", channel=channel, created_at=now,
                          payload={"persona_id": persona_id})
            return self.get(conversation_id)

    def add_message(self, conversation_id: int, role: str, content: str, *, kind: str = "chat",
                    channel: str = "web", metadata: dict[str, Any] | None = None,
                    created_at: str | None = None, span_id: int | None = None) -> Message:
        check_text(content, "message content")
        created_at = created_at or utcnow()
        # Imports write messages by the hundred thousand: one indexed lookup, no re-read (S8).
        with self.store.write() as conn:
            state = stored.state_of(conn, self.user_id, check_id(conversation_id, "conversation id"))
            if state is None:
                raise NotFound(f"no conversation {conversation_id}")
            if state == "ended" and kind == "chat":
                raise Conflict("this conversation has ended; start a new one")
            message_id = ledger.append_message(
                conn, user_id=self.user_id, conversation_id=conversation_id, role=role, content=content,
                kind=kind, channel=channel, metadata=metadata, created_at=created_at, span_id=span_id,
            )
        return Message(message_id, self.user_id, conversation_id, role, kind, content, channel, created_at,
                       json.loads(json.dumps(metadata)) if metadata else {})

    def _set(self, conversation_id: int, event: str, change: Callable[[Connection], object],
             payload: dict | None = None, *, visibility: bool = False) -> Conversation:
        def attempt(ready: Ready | None) -> Conversation:
            with self.store.write() as conn:
                self.get(conversation_id)
                change(conn)
                ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind=event,
                              payload=payload or {})
                if visibility and self._on_visibility:
                    self._on_visibility(conn, [conversation_id], ready)
                return self.get(conversation_id)

        return prepared.run(self.store, attempt)

    def rename(self, conversation_id: int, title: str) -> Conversation:
        title = _check_title(title)
        return self._set(conversation_id, "conversation.renamed",
                         lambda conn: stored.set_title(conn, self.user_id, conversation_id, title))

    def pin(self, conversation_id: int) -> Conversation:
        """Pinned threads are listed first, in their own group (W4); pinning again changes nothing."""
        return self._set(conversation_id, "conversation.pinned",
                         lambda conn: stored.pin(conn, self.user_id, conversation_id))

    def unpin(self, conversation_id: int) -> Conversation:
        return self._set(conversation_id, "conversation.unpinned",
                         lambda conn: stored.unpin(conn, self.user_id, conversation_id))

    def set_tags(self, conversation_id: int, tags: builtins.list[str]) -> Conversation:
        """Replace a thread's tags (W4): each trimmed and lower-cased, duplicates dropped, in the
        order given. The ledger records how many, never the tags."""
        if not isinstance(tags, (list, tuple)):
            raise InvalidInput("tags must be a list")
        wanted = builtins.list(dict.fromkeys(check_tag(t) for t in tags))
        if len(wanted) > MAX_TAGS:
            raise InvalidInput(f"a thread has at most {MAX_TAGS} tags")
        with self.store.write() as conn:
            before = self.get(conversation_id)
            if builtins.list(before.tags) == wanted:
                return before
            stored.set_tags(conn, self.user_id, conversation_id, wanted)
            return self._set(conversation_id, "conversation.tagged",
                             lambda conn: stored.set_tags_column(conn, self.user_id, conversation_id, wanted),
                             {"tags": len(wanted)})

    def add_tag(self, conversation_id: int, name: str) -> Conversation:
        tag = check_tag(name)
        with self.store.write():
            return self.set_tags(conversation_id, [*self.get(conversation_id).tags, tag])

    def remove_tag(self, conversation_id: int, name: str) -> Conversation:
        tag = check_tag(name)
        with self.store.write():
            return self.set_tags(conversation_id, [t for t in self.get(conversation_id).tags if t != tag])

    def move(self, conversation_id: int, folder_id: int | None, *, shield_on_leave: bool = True) -> Conversation:
        """Move between folders; leaving a hidden folder keeps the conversation shielded (V2)."""
        with self.store.write():
            before = self.get(conversation_id)
            hidden_target = folder_id is not None and Folders(self.store, self.user_id).get(folder_id).hidden
            shield = shield_on_leave and before.visibility == "hidden" and not hidden_target
            return self._set(conversation_id, "conversation.moved",
                             lambda conn: stored.move(conn, self.user_id, conversation_id, folder_id, shield=shield),
                             {"folder_id": folder_id}, visibility=True)

    def trash(self, conversation_id: int) -> Conversation:
        return self._set(conversation_id, "conversation.trashed",
                         lambda conn: stored.trash(conn, self.user_id, conversation_id), visibility=True)

    def restore(self, conversation_id: int, *, shielded: bool | None = True) -> Conversation:
        """Take a conversation out of the trash. It stays shielded from continuity until released
        (V2); ``shielded=False`` releases it at once, ``None`` leaves the flag as it is."""
        with self.store.write():
            if self.get(conversation_id).visibility != "trashed":
                shielded = None  # nothing is being restored, so the shield is not touched
            keep = shielded
            return self._set(conversation_id, "conversation.restored",
                             lambda conn: stored.restore(conn, self.user_id, conversation_id, shielded=keep),
                             {"shielded": shielded} if shielded is not None else {}, visibility=True)

    def set_shielded(self, conversation_id: int, shielded: bool) -> Conversation:
        """Shield, or explicitly release, a conversation; affected prompts refresh first (V3)."""
        return self._set(conversation_id, "conversation.shielded" if shielded else "conversation.shield_released",
                         lambda conn: stored.set_shielded(conn, self.user_id, conversation_id, shielded),
                         visibility=True)

    def end(self, conversation_id: int) -> Conversation:
        """An explicit technical boundary (C4): history stays, new chat turns go elsewhere."""
        conversation = self.get(conversation_id)
        if conversation.state == "ended":
            return conversation
        return self._set(conversation_id, "conversation.ended",
                         lambda conn: stored.end(conn, self.user_id, conversation_id))
