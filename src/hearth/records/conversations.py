"""Conversations (C2), folders (C3) and the end-of-conversation boundary (C4).

Visibility is derived, not stored twice: a conversation is ``trashed`` when ``trashed_at`` is set,
``hidden`` when its folder is hidden, otherwise ``visible``. ``continuity_shielded`` is separate: a
shielded conversation is visible and readable but kept out of automatic continuity (V2).
"""

from __future__ import annotations

import builtins
import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from hearth.errors import Conflict, ConstraintError, InvalidInput, NotFound
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.records import ledger
from hearth.records.ledger import Message
from hearth.store import Connection, Row, Store, inserted_id, utcnow
from hearth.thread.search import MAX_TAGS, ThreadMatch, check_tag, hits_sql, parse, snippet
from hearth.validation import check_id, check_text

MAX_TITLE = 500
MAX_FOLDER_NAME = 200

# Neither trashed nor in a hidden folder (V1): what the owner's deliberate search may include.
VISIBLE_SQL = (
    "c.trashed_at IS NULL"
    " AND (c.folder_id IS NULL OR NOT EXISTS"
    " (SELECT 1 FROM folders f WHERE f.id = c.folder_id AND f.hidden = 1))"
)
# A conversation counts for automatic continuity, recall and handoffs only when this holds (V1, V2).
ELIGIBLE_SQL = VISIBLE_SQL + " AND c.continuity_shielded = 0"


def chat_turns_after(conn: Connection, conversation_id: int, after_id: int, cap: int | None = None) -> int:
    """The thread's chat turns after ``after_id``, counted up to ``cap`` (None: all). A due check
    needs only to know whether the count reached its threshold, and it runs in the reply's write
    transaction, where counting a 100k-turn thread would hold the lock for 100 ms."""
    limit = " LIMIT ?" if cap is not None else ""
    return conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
        f" AND role IN ('user', 'assistant'){limit}) AS t",
        (conversation_id, after_id, *([cap] if cap is not None else []))).fetchone()[0]


@dataclass(frozen=True)
class Folder:
    id: int
    user_id: int
    name: str
    hidden: bool
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> "Folder":
        return cls(row["id"], row["user_id"], row["name"], bool(row["hidden"]), row["created_at"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Conversation:
    id: int
    user_id: int
    persona_id: int
    folder_id: int | None
    title: str
    state: str
    visibility: str
    continuity_shielded: bool
    created_at: str
    updated_at: str
    ended_at: str | None
    trashed_at: str | None
    pinned_at: str | None = None  # pinned threads are listed first (W4)
    tags: tuple[str, ...] = ()
    imported: bool = False  # made by an import: read only (continue it in a new chat)
    match: ThreadMatch | None = None  # in a search: the message that matched
    model: str | None = None  # the model its requests ask for; None: the deployment's default

    @classmethod
    def from_row(cls, row: Row) -> "Conversation":
        if row["trashed_at"]:
            visibility = "trashed"
        elif row["folder_hidden"]:
            visibility = "hidden"
        else:
            visibility = "visible"
        return cls(
            id=row["id"], user_id=row["user_id"], persona_id=row["persona_id"], folder_id=row["folder_id"],
            title=row["title"], state=row["state"], visibility=visibility,
            continuity_shielded=bool(row["continuity_shielded"]), created_at=row["created_at"],
            updated_at=row["updated_at"], ended_at=row["ended_at"], trashed_at=row["trashed_at"],
            pinned_at=row["pinned_at"], tags=tuple(json.loads(row["tags"])), imported=bool(row["imported"]),
            model=row["model"],
        )

    @property
    def eligible(self) -> bool:
        """May feed automatic continuity, recall and handoffs (V1, V2)."""
        return self.visibility == "visible" and not self.continuity_shielded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_SELECT = (
    "SELECT c.*, coalesce(f.hidden, 0) AS folder_hidden FROM conversations c"
    " LEFT JOIN folders f ON f.id = c.folder_id"
)


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
                cur = conn.execute(
                    "INSERT INTO folders (user_id, name, hidden, created_at) VALUES (?, ?, ?, ?) RETURNING id",
                    (self.user_id, name, int(hidden), utcnow()),
                )
            except ConstraintError:
                raise Conflict(f"a folder named {name!r} already exists") from None
            return self.get(inserted_id(cur))

    def rename(self, folder_id: int, name: str) -> Folder:
        name = (name or "").strip() if isinstance(name, str) else ""
        if not name or len(name) > MAX_FOLDER_NAME:
            raise InvalidInput(f"folder name must be 1-{MAX_FOLDER_NAME} characters")
        with self.store.write() as conn:
            self.get(folder_id)
            try:
                conn.execute("UPDATE folders SET name = ? WHERE id = ? AND user_id = ?", (name, folder_id, self.user_id))
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
                members = [r[0] for r in conn.execute(
                    "SELECT id FROM conversations WHERE folder_id = ? AND user_id = ?", (folder_id, self.user_id))]
                marks = ",".join("?" * len(members))
                if members and threads == "trash":
                    conn.execute(f"UPDATE conversations SET trashed_at = coalesce(trashed_at, ?) WHERE id IN ({marks})",
                                 (utcnow(), *members))
                elif members and folder.hidden:
                    conn.execute(f"UPDATE conversations SET continuity_shielded = 1 WHERE id IN ({marks})", members)
                conn.execute("UPDATE conversations SET folder_id = NULL WHERE folder_id = ? AND user_id = ?",
                             (folder_id, self.user_id))
                conn.execute("DELETE FROM folders WHERE id = ? AND user_id = ?", (folder_id, self.user_id))
                ledger.append(conn, user_id=self.user_id, kind="folder.deleted",
                              payload={"folder_id": folder_id, "conversations": len(members), "trashed": threads == "trash"})
                if self._on_visibility and members:
                    self._on_visibility(conn, members, ready)
                return len(members)

        return prepared.run(self.store, attempt)

    def get(self, folder_id: int) -> Folder:
        row = self.store.connection().execute(
            "SELECT * FROM folders WHERE id = ? AND user_id = ?", (check_id(folder_id, "folder id"), self.user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no folder {folder_id}")
        return Folder.from_row(row)

    def list(self) -> list[Folder]:
        rows = self.store.connection().execute(
            "SELECT * FROM folders WHERE user_id = ? ORDER BY name", (self.user_id,)
        ).fetchall()
        return [Folder.from_row(r) for r in rows]

    def set_hidden(self, folder_id: int, hidden: bool, *, shield_on_show: bool = True) -> Folder:
        """Hide or show a folder. Showing it leaves its conversations shielded until each is
        released (V2): quarantined material does not silently rejoin automatic continuity."""
        def attempt(ready: Ready | None) -> Folder:
            with self.store.write() as conn:
                was_hidden = self.get(folder_id).hidden
                conn.execute(
                    "UPDATE folders SET hidden = ? WHERE id = ? AND user_id = ?",
                    (int(hidden), folder_id, self.user_id),
                )
                members = [r[0] for r in conn.execute(
                    "SELECT id FROM conversations WHERE folder_id = ? AND user_id = ?", (folder_id, self.user_id))]
                if shield_on_show and was_hidden and not hidden and members:
                    conn.execute(
                        f"UPDATE conversations SET continuity_shielded = 1 WHERE id IN ({','.join('?' * len(members))})",
                        members,
                    )
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
        row = self.store.connection().execute(
            _SELECT + " WHERE c.id = ? AND c.user_id = ?", (check_id(conversation_id, "conversation id"), self.user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conversation_id}")
        return Conversation.from_row(row)

    def current(self, persona_id: int) -> Conversation | None:
        """The most recently active open, untrashed conversation with a persona: where a message
        arriving on another channel, or the companion's own, continues (E5, E11)."""
        row = self.store.connection().execute(
            _SELECT + " WHERE c.user_id = ? AND c.persona_id = ? AND c.state = 'open' AND c.trashed_at IS NULL"
            " AND c.imported = 0 ORDER BY c.updated_at DESC, c.id DESC LIMIT 1", (self.user_id, persona_id)).fetchone()
        return Conversation.from_row(row) if row else None

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
        sql = _SELECT
        args: list[Any] = []
        if query.words:
            cte, args = hits_sql(conn, self.user_id, query.words)
            sql = ("WITH " + cte + " SELECT c.*, coalesce(f.hidden, 0) AS folder_hidden, h.mid AS match_id"
                   " FROM conversations c LEFT JOIN folders f ON f.id = c.folder_id LEFT JOIN hits h ON h.cid = c.id")
        sql += " WHERE c.user_id = ?"
        args.append(self.user_id)
        if trashed_only:
            sql += " AND c.trashed_at IS NOT NULL"
        elif not include_trashed:
            sql += " AND c.trashed_at IS NULL"
        if folder_id is not None:
            sql += " AND c.folder_id = ?"
            args.append(folder_id)
        elif loose:
            sql += " AND c.folder_id IS NULL"
        if persona_id is not None:
            sql += " AND c.persona_id = ?"
            args.append(persona_id)
        if pinned is not None:
            sql += " AND c.pinned_at IS NOT NULL" if pinned else " AND c.pinned_at IS NULL"
        for tag in query.tags:
            sql += " AND c.id IN (SELECT t.conversation_id FROM conversation_tags t WHERE t.user_id = ? AND t.tag = ?)"
            args.extend([self.user_id, tag])
        if query.text:
            title = "lower(c.title) LIKE lower(?) ESCAPE '\\'"
            sql += f" AND ({title} OR h.mid IS NOT NULL)" if query.words else f" AND {title}"
            args.append("%" + query.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if before is not None:
            sql += " AND (c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))"
            args.extend([before[0], before[0], before[1]])
        sql += " ORDER BY c.updated_at DESC, c.id DESC LIMIT ? OFFSET ?"
        rows = conn.execute(sql, (*args, limit, offset)).fetchall()
        found = [Conversation.from_row(r) for r in rows]
        if not query.words:
            return found
        return self._with_matches(conn, found, [r["match_id"] for r in rows], query.words)

    def _with_matches(self, conn: Connection, found: builtins.list[Conversation],
                      match_ids: builtins.list[int | None], words: tuple[str, ...]) -> builtins.list[Conversation]:
        """Each thread of a page with the snippet of its matching message: one read of at most a
        page of messages."""
        ids = [m for m in match_ids if m is not None]
        if not ids:
            return found
        rows = {r["id"]: r for r in conn.execute(
            f"SELECT id, role, created_at, content FROM messages WHERE user_id = ? AND id IN ({','.join('?' * len(ids))})",
            (self.user_id, *ids))}
        out = []
        for conversation, match_id in zip(found, match_ids):
            row = rows.get(match_id) if match_id is not None else None
            if row is not None:
                conversation = replace(conversation, match=ThreadMatch(
                    row["id"], row["role"], row["created_at"], snippet(row["content"], words)))
            out.append(conversation)
        return out

    def tags(self) -> builtins.list[dict[str, Any]]:
        """The user's tags with how many untrashed threads carry each, most used first."""
        rows = self.store.connection().execute(
            "SELECT t.tag, count(*) AS n FROM conversation_tags t JOIN conversations c ON c.id = t.conversation_id"
            " WHERE t.user_id = ? AND c.trashed_at IS NULL GROUP BY t.tag ORDER BY n DESC, t.tag",
            (self.user_id,)).fetchall()
        return [{"tag": r["tag"], "count": r["n"]} for r in rows]

    def messages(self, conversation_id: int, *, visible_only: bool = True,
                 after_id: int = 0, limit: int | None = None, before_id: int | None = None,
                 newest: int | None = None) -> builtins.list[Message]:
        """Messages in stored order; by default only what a person sees as bubbles (P6).
        ``newest`` keeps only the last that many (before ``before_id``), so a long thread opens at
        its end without reading all of it."""
        self.get(conversation_id)
        sql = "SELECT * FROM messages WHERE conversation_id = ? AND user_id = ? AND id > ?"
        args: list[Any] = [conversation_id, self.user_id, after_id]
        if before_id is not None:
            sql += " AND id < ?"
            args.append(before_id)
        if visible_only:
            sql += " AND kind IN ('chat', 'handoff_artifact')"
        sql += " ORDER BY id DESC" if newest is not None else " ORDER BY id"
        if newest is not None or limit is not None:
            sql += " LIMIT ?"
            args.append(newest if newest is not None else limit)
        rows = self.store.connection().execute(sql, args).fetchall()
        if newest is not None:
            rows.reverse()
        return [Message.from_row(r) for r in rows]

    def message(self, message_id: int) -> Message:
        row = self.store.connection().execute(
            "SELECT * FROM messages WHERE id = ? AND user_id = ?", (check_id(message_id, "message id"), self.user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no message {message_id}")
        return Message.from_row(row)

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
            if not conn.execute("SELECT 1 FROM personas WHERE id = ? AND user_id = ?",
                                (persona_id, self.user_id)).fetchone():
                raise NotFound(f"no persona {persona_id}")
            if folder_id is not None:
                Folders(self.store, self.user_id).get(folder_id)
            now = created_at or utcnow()
            # A thread an import makes holds someone's history: it is read only (W4).
            if conversation_id is not None and conn.execute("SELECT 1 FROM conversations WHERE id = ?",
                                                            (conversation_id,)).fetchone():
                conversation_id = None  # taken meanwhile (SQLite hands out the largest id plus one)
            # An id given is one the database handed out before: PostgreSQL's identity never hands
            # it out again, SQLite's next id is after the largest.
            cur = conn.execute(
                "INSERT INTO conversations (id, user_id, persona_id, folder_id, title, created_at, updated_at,"
                " imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (conversation_id, self.user_id, persona_id, folder_id, title, now, now, int(channel == "import")),
            ) if conversation_id is not None else conn.execute(
                "INSERT INTO conversations (user_id, persona_id, folder_id, title, created_at, updated_at, imported)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (self.user_id, persona_id, folder_id, title, now, now, int(channel == "import")),
            )
            conversation_id = inserted_id(cur)
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
            row = conn.execute("SELECT state FROM conversations WHERE id = ? AND user_id = ?",
                               (check_id(conversation_id, "conversation id"), self.user_id)).fetchone()
            if row is None:
                raise NotFound(f"no conversation {conversation_id}")
            if row[0] == "ended" and kind == "chat":
                raise Conflict("this conversation has ended; start a new one")
            message_id = ledger.append_message(
                conn, user_id=self.user_id, conversation_id=conversation_id, role=role, content=content,
                kind=kind, channel=channel, metadata=metadata, created_at=created_at, span_id=span_id,
            )
        return Message(message_id, self.user_id, conversation_id, role, kind, content, channel, created_at,
                       json.loads(json.dumps(metadata)) if metadata else {})

    def _set(self, conversation_id: int, event: str, sql: str, args: tuple, payload: dict | None = None,
             *, visibility: bool = False) -> Conversation:
        def attempt(ready: Ready | None) -> Conversation:
            with self.store.write() as conn:
                self.get(conversation_id)
                conn.execute(f"UPDATE conversations SET {sql} WHERE id = ? AND user_id = ?",
                             (*args, conversation_id, self.user_id))
                ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id, kind=event,
                              payload=payload or {})
                if visibility and self._on_visibility:
                    self._on_visibility(conn, [conversation_id], ready)
                return self.get(conversation_id)

        return prepared.run(self.store, attempt)

    def rename(self, conversation_id: int, title: str) -> Conversation:
        return self._set(conversation_id, "conversation.renamed", "title = ?", (_check_title(title),))

    def pin(self, conversation_id: int) -> Conversation:
        """Pinned threads are listed first, in their own group (W4); pinning again changes nothing."""
        return self._set(conversation_id, "conversation.pinned", "pinned_at = coalesce(pinned_at, ?)", (utcnow(),))

    def unpin(self, conversation_id: int) -> Conversation:
        return self._set(conversation_id, "conversation.unpinned", "pinned_at = NULL", ())

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
            conn.execute("DELETE FROM conversation_tags WHERE conversation_id = ? AND user_id = ?",
                         (conversation_id, self.user_id))
            now = utcnow()
            for tag in wanted:
                conn.execute("INSERT INTO conversation_tags (user_id, conversation_id, tag, created_at)"
                             " VALUES (?, ?, ?, ?)", (self.user_id, conversation_id, tag, now))
            return self._set(conversation_id, "conversation.tagged", "tags = ?",
                             (json.dumps(wanted, ensure_ascii=False),), {"tags": len(wanted)})

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
            sql, args = "folder_id = ?", (folder_id,)
            if shield_on_leave and before.visibility == "hidden" and not hidden_target:
                sql, args = "folder_id = ?, continuity_shielded = 1", (folder_id,)
            return self._set(conversation_id, "conversation.moved", sql, args, {"folder_id": folder_id},
                             visibility=True)

    def trash(self, conversation_id: int) -> Conversation:
        return self._set(conversation_id, "conversation.trashed", "trashed_at = coalesce(trashed_at, ?)",
                         (utcnow(),), visibility=True)

    def restore(self, conversation_id: int, *, shielded: bool | None = True) -> Conversation:
        """Take a conversation out of the trash. It stays shielded from continuity until released
        (V2); ``shielded=False`` releases it at once, ``None`` leaves the flag as it is."""
        with self.store.write():
            if self.get(conversation_id).visibility != "trashed":
                shielded = None  # nothing is being restored, so the shield is not touched
            sql = "trashed_at = NULL"
            args: tuple[int, ...] = ()
            if shielded is not None:
                sql, args = "trashed_at = NULL, continuity_shielded = ?", (int(shielded),)
            return self._set(conversation_id, "conversation.restored", sql, args,
                             {"shielded": shielded} if shielded is not None else {}, visibility=True)

    def set_shielded(self, conversation_id: int, shielded: bool) -> Conversation:
        """Shield, or explicitly release, a conversation; affected prompts refresh first (V3)."""
        return self._set(conversation_id, "conversation.shielded" if shielded else "conversation.shield_released",
                         "continuity_shielded = ?", (int(shielded),), visibility=True)

    def end(self, conversation_id: int) -> Conversation:
        """An explicit technical boundary (C4): history stays, new chat turns go elsewhere."""
        conversation = self.get(conversation_id)
        if conversation.state == "ended":
            return conversation
        return self._set(conversation_id, "conversation.ended", "state = 'ended', ended_at = ?", (utcnow(),))
