"""Statements of ``conversations``, ``folders`` and ``conversation_tags`` (C2, C3, C4)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from hearth.store.connection import inserted_id, utcnow
from hearth.store.engine import Connection, Row

# Neither trashed nor in a hidden folder (V1): what the owner's deliberate search may include.
VISIBLE_SQL = (
    "c.trashed_at IS NULL"
    " AND (c.folder_id IS NULL OR NOT EXISTS"
    " (SELECT 1 FROM folders f WHERE f.id = c.folder_id AND f.hidden = 1))"
)
# A conversation counts for automatic continuity, recall and handoffs only when this holds (V1, V2).
ELIGIBLE_SQL = VISIBLE_SQL + " AND c.continuity_shielded = 0"


class Match(Protocol):
    """What a search found in a thread (``thread.search.ThreadMatch``)."""

    @property
    def message_id(self) -> int: ...

    @property
    def snippet(self) -> str: ...


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
    match: Match | None = None  # in a search: the message that matched
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


# -- folders ---------------------------------------------------------------------------------
def insert_folder(conn: Connection, user_id: int, name: str, hidden: bool) -> int:
    """A new folder's id; a taken name raises ``ConstraintError``."""
    cur = conn.execute(
        "INSERT INTO folders (user_id, name, hidden, created_at) VALUES (?, ?, ?, ?) RETURNING id",
        (user_id, name, int(hidden), utcnow()),
    )
    return inserted_id(cur)


def rename_folder(conn: Connection, user_id: int, folder_id: int, name: str) -> None:
    conn.execute("UPDATE folders SET name = ? WHERE id = ? AND user_id = ?", (name, folder_id, user_id))


def get_folder(conn: Connection, user_id: int, folder_id: int) -> Folder | None:
    row = conn.execute("SELECT * FROM folders WHERE id = ? AND user_id = ?", (folder_id, user_id)).fetchone()
    return Folder.from_row(row) if row else None


def folders_of(conn: Connection, user_id: int) -> list[Folder]:
    """The user's folders by name."""
    rows = conn.execute("SELECT * FROM folders WHERE user_id = ? ORDER BY name", (user_id,)).fetchall()
    return [Folder.from_row(r) for r in rows]


def set_folder_hidden(conn: Connection, user_id: int, folder_id: int, hidden: bool) -> None:
    conn.execute("UPDATE folders SET hidden = ? WHERE id = ? AND user_id = ?", (int(hidden), folder_id, user_id))


def in_folder(conn: Connection, user_id: int, folder_id: int) -> list[int]:
    """The ids of the folder's conversations."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM conversations WHERE folder_id = ? AND user_id = ?", (folder_id, user_id))]


def trash_many(conn: Connection, conversation_ids: list[int]) -> None:
    """Trash these conversations (a trashed one keeps its time)."""
    marks = ",".join("?" * len(conversation_ids))
    conn.execute(f"UPDATE conversations SET trashed_at = coalesce(trashed_at, ?) WHERE id IN ({marks})",
                 (utcnow(), *conversation_ids))


def shield_many(conn: Connection, conversation_ids: list[int]) -> None:
    conn.execute(
        f"UPDATE conversations SET continuity_shielded = 1 WHERE id IN ({','.join('?' * len(conversation_ids))})",
        conversation_ids,
    )


def delete_folder(conn: Connection, user_id: int, folder_id: int) -> None:
    """Delete a folder; its conversations stay, outside any folder."""
    conn.execute("UPDATE conversations SET folder_id = NULL WHERE folder_id = ? AND user_id = ?", (folder_id, user_id))
    conn.execute("DELETE FROM folders WHERE id = ? AND user_id = ?", (folder_id, user_id))


# -- conversations ---------------------------------------------------------------------------
def get(conn: Connection, user_id: int, conversation_id: int) -> Conversation | None:
    row = conn.execute(_SELECT + " WHERE c.id = ? AND c.user_id = ?", (conversation_id, user_id)).fetchone()
    return Conversation.from_row(row) if row else None


def any_for_user(conn: Connection, user_id: int) -> bool:
    """Whether the user has a conversation at all (trashed ones count)."""
    return conn.execute("SELECT 1 FROM conversations WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None


def current(conn: Connection, user_id: int, persona_id: int) -> Conversation | None:
    """The most recently active open, untrashed, not imported conversation with a persona."""
    row = conn.execute(
        _SELECT + " WHERE c.user_id = ? AND c.persona_id = ? AND c.state = 'open' AND c.trashed_at IS NULL"
        " AND c.imported = 0 ORDER BY c.updated_at DESC, c.id DESC LIMIT 1", (user_id, persona_id)).fetchone()
    return Conversation.from_row(row) if row else None


def listing(conn: Connection, user_id: int, *, hits: tuple[str, list[Any]] | None = None, title: str = "",
            tags: tuple[str, ...] = (), include_trashed: bool = False, trashed_only: bool = False,
            folder_id: int | None = None, loose: bool = False, persona_id: int | None = None,
            pinned: bool | None = None, before: tuple[str, int] | None = None, limit: int = 200,
            offset: int = 0) -> list[tuple[Conversation, int | None]]:
    """A page of the user's conversations, newest first, each with the id of its matching message.

    ``hits``: a CTE ``hits(cid, mid)`` and its arguments, the threads whose messages match a
    search; ``title`` then matches the title (contains) or a hit, without ``hits`` the title alone.
    ``tags``: only threads carrying each. ``before``: the (updated_at, id) of the previous page's last."""
    sql = _SELECT
    args: list[Any] = []
    if hits is not None:
        cte, args = hits[0], list(hits[1])
        sql = ("WITH " + cte + " SELECT c.*, coalesce(f.hidden, 0) AS folder_hidden, h.mid AS match_id"
               " FROM conversations c LEFT JOIN folders f ON f.id = c.folder_id LEFT JOIN hits h ON h.cid = c.id")
    sql += " WHERE c.user_id = ?"
    args.append(user_id)
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
    for tag in tags:
        sql += " AND c.id IN (SELECT t.conversation_id FROM conversation_tags t WHERE t.user_id = ? AND t.tag = ?)"
        args.extend([user_id, tag])
    if title:
        like = "lower(c.title) LIKE lower(?) ESCAPE '\\'"
        sql += f" AND ({like} OR h.mid IS NOT NULL)" if hits is not None else f" AND {like}"
        args.append("%" + title.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    if before is not None:
        sql += " AND (c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))"
        args.extend([before[0], before[0], before[1]])
    sql += " ORDER BY c.updated_at DESC, c.id DESC LIMIT ? OFFSET ?"
    rows = conn.execute(sql, (*args, limit, offset)).fetchall()
    return [(Conversation.from_row(r), r["match_id"] if hits is not None else None) for r in rows]


def tag_counts(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    """The user's tags with how many untrashed threads carry each, most used first."""
    rows = conn.execute(
        "SELECT t.tag, count(*) AS n FROM conversation_tags t JOIN conversations c ON c.id = t.conversation_id"
        " WHERE t.user_id = ? AND c.trashed_at IS NULL GROUP BY t.tag ORDER BY n DESC, t.tag",
        (user_id,)).fetchall()
    return [{"tag": r["tag"], "count": r["n"]} for r in rows]


def id_taken(conn: Connection, conversation_id: int) -> bool:
    return conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is not None


def insert(conn: Connection, user_id: int, persona_id: int, folder_id: int | None, title: str, created_at: str,
           imported: bool, *, conversation_id: int | None = None) -> int:
    """A new conversation's id (``conversation_id``: one the database handed out before)."""
    # An id given is one the database handed out before: PostgreSQL's identity never hands
    # it out again, SQLite's next id is after the largest.
    cur = conn.execute(
        "INSERT INTO conversations (id, user_id, persona_id, folder_id, title, created_at, updated_at,"
        " imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (conversation_id, user_id, persona_id, folder_id, title, created_at, created_at, int(imported)),
    ) if conversation_id is not None else conn.execute(
        "INSERT INTO conversations (user_id, persona_id, folder_id, title, created_at, updated_at, imported)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, persona_id, folder_id, title, created_at, created_at, int(imported)),
    )
    return inserted_id(cur)


def state_of(conn: Connection, user_id: int, conversation_id: int) -> str | None:
    """'open' or 'ended', or None for no such conversation of the user's."""
    row = conn.execute("SELECT state FROM conversations WHERE id = ? AND user_id = ?",
                       (conversation_id, user_id)).fetchone()
    return row[0] if row else None


def _update(conn: Connection, user_id: int, conversation_id: int, sql: str, args: tuple) -> None:
    conn.execute(f"UPDATE conversations SET {sql} WHERE id = ? AND user_id = ?", (*args, conversation_id, user_id))


def set_title(conn: Connection, user_id: int, conversation_id: int, title: str) -> None:
    _update(conn, user_id, conversation_id, "title = ?", (title,))


def pin(conn: Connection, user_id: int, conversation_id: int) -> None:
    """Pin (a pinned thread keeps its time)."""
    _update(conn, user_id, conversation_id, "pinned_at = coalesce(pinned_at, ?)", (utcnow(),))


def unpin(conn: Connection, user_id: int, conversation_id: int) -> None:
    _update(conn, user_id, conversation_id, "pinned_at = NULL", ())


def set_tags(conn: Connection, user_id: int, conversation_id: int, tags: list[str]) -> None:
    """The thread's tags, in their table and in its own ``tags`` column."""
    conn.execute("DELETE FROM conversation_tags WHERE conversation_id = ? AND user_id = ?", (conversation_id, user_id))
    now = utcnow()
    for tag in tags:
        conn.execute("INSERT INTO conversation_tags (user_id, conversation_id, tag, created_at)"
                     " VALUES (?, ?, ?, ?)", (user_id, conversation_id, tag, now))


def set_tags_column(conn: Connection, user_id: int, conversation_id: int, tags: list[str]) -> None:
    _update(conn, user_id, conversation_id, "tags = ?", (json.dumps(tags, ensure_ascii=False),))


def move(conn: Connection, user_id: int, conversation_id: int, folder_id: int | None, *, shield: bool) -> None:
    """Into a folder (None: out of any); ``shield`` shields it too."""
    if shield:
        _update(conn, user_id, conversation_id, "folder_id = ?, continuity_shielded = 1", (folder_id,))
    else:
        _update(conn, user_id, conversation_id, "folder_id = ?", (folder_id,))


def trash(conn: Connection, user_id: int, conversation_id: int) -> None:
    _update(conn, user_id, conversation_id, "trashed_at = coalesce(trashed_at, ?)", (utcnow(),))


def restore(conn: Connection, user_id: int, conversation_id: int, *, shielded: bool | None) -> None:
    """Out of the trash; ``shielded`` sets the shield, None leaves it."""
    if shielded is None:
        _update(conn, user_id, conversation_id, "trashed_at = NULL", ())
    else:
        _update(conn, user_id, conversation_id, "trashed_at = NULL, continuity_shielded = ?", (int(shielded),))


def set_shielded(conn: Connection, user_id: int, conversation_id: int, shielded: bool) -> None:
    _update(conn, user_id, conversation_id, "continuity_shielded = ?", (int(shielded),))


def end(conn: Connection, user_id: int, conversation_id: int) -> None:
    _update(conn, user_id, conversation_id, "state = 'ended', ended_at = ?", (utcnow(),))


def of_persona(conn: Connection, user_id: int, persona_id: int) -> list[int]:
    """The ids of the user's conversations with a persona."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM conversations WHERE persona_id = ? AND user_id = ?", (persona_id, user_id))]


def set_model(conn: Connection, user_id: int, conversation_id: int, model: str | None) -> None:
    conn.execute("UPDATE conversations SET model = ? WHERE id = ? AND user_id = ?", (model, conversation_id, user_id))
