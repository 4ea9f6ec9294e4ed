"""The deep archive's statements (A1): documents (``archive_documents``), their chunks
(``archive_chunks``) and their turns as they came (``archive_turns``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from hearth.store import Connection, Row, inserted_id


@dataclass(frozen=True)
class Document:
    id: int
    user_id: int
    collection: str
    title: str
    source: str
    document_date: str | None
    content_hash: str
    chunk_count: int
    metadata: dict[str, Any]
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> "Document":
        data = dict(row)  # type: ignore[call-overload]
        data["metadata"] = json.loads(data["metadata"])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def any_for_user(conn: Connection, user_id: int) -> bool:
    """Whether the user has any archive chunk."""
    return conn.execute("SELECT 1 FROM archive_chunks WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None


# -- documents ---------------------------------------------------------------------------------------
def by_hash(conn: Connection, user_id: int, content_hash: str) -> Document | None:
    row = conn.execute("SELECT * FROM archive_documents WHERE user_id = ? AND content_hash = ?",
                       (user_id, content_hash)).fetchone()
    return None if row is None else Document.from_row(row)


def insert_document(conn: Connection, user_id: int, collection: str, title: str, source: str,
                    document_date: str | None, content_hash: str, metadata: str, created_at: str) -> int:
    """A new document (``metadata`` is JSON text); its id."""
    cur = conn.execute(
        "INSERT INTO archive_documents (user_id, collection, title, source, document_date, content_hash,"
        " metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, collection, title, source, document_date, content_hash, metadata, created_at))
    return inserted_id(cur)


def set_chunk_count(conn: Connection, document_id: int, count: int) -> None:
    conn.execute("UPDATE archive_documents SET chunk_count = ? WHERE id = ?", (count, document_id))


def get(conn: Connection, user_id: int, document_id: int) -> Document | None:
    row = conn.execute(
        "SELECT * FROM archive_documents WHERE id = ? AND user_id = ?", (document_id, user_id)).fetchone()
    return None if row is None else Document.from_row(row)


def documents(conn: Connection, user_id: int, limit: int, offset: int, *, collection: str | None = None,
              sources: tuple[str, ...] = ()) -> list[Document]:
    """Newest first (by the document's date, else when it was added)."""
    sql = "SELECT * FROM archive_documents WHERE user_id = ?"
    args: list[Any] = [user_id]
    if collection:
        sql += " AND collection = ?"
        args.append(collection)
    if sources:
        sql += f" AND source IN ({','.join('?' * len(sources))})"
        args.extend(sources)
    sql += " ORDER BY coalesce(document_date, created_at) DESC, id DESC LIMIT ? OFFSET ?"
    return [Document.from_row(r) for r in conn.execute(sql, (*args, limit, offset))]


def collections(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    """Each collection with its ``documents`` and ``chunks`` counts, by name."""
    rows = conn.execute(
        "SELECT collection, count(*) AS documents, sum(chunk_count) AS chunks FROM archive_documents"
        " WHERE user_id = ? GROUP BY collection ORDER BY collection", (user_id,))
    return [dict(r) for r in rows]  # type: ignore[call-overload]


def delete_document(conn: Connection, user_id: int, document_id: int) -> None:
    conn.execute("DELETE FROM archive_documents WHERE id = ? AND user_id = ?", (document_id, user_id))


# -- chunks ------------------------------------------------------------------------------------------
def insert_chunk(conn: Connection, user_id: int, document_id: int, position: int, text: str, speakers: str,
                 chunk_date: str | None, content_hash: str) -> bool:
    """One chunk (``speakers`` is JSON text); False when the same chunk is already there."""
    return bool(conn.execute(
        "INSERT INTO archive_chunks (user_id, document_id, position, text, speakers, chunk_date,"
        " content_hash) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (user_id, document_id, position, text, speakers, chunk_date, content_hash)).rowcount)


def chunks(conn: Connection, user_id: int, document_id: int) -> list[dict[str, Any]]:
    """The document's chunks in order: id, position, text, speakers (a list), chunk_date."""
    rows = conn.execute(
        "SELECT id, position, text, speakers, chunk_date FROM archive_chunks WHERE document_id = ?"
        " AND user_id = ? ORDER BY position", (document_id, user_id))
    return [{**dict(r), "speakers": json.loads(r["speakers"])} for r in rows]  # type: ignore[call-overload]


# -- turns -------------------------------------------------------------------------------------------
def has_turns(conn: Connection, document_id: int) -> bool:
    return bool(conn.execute("SELECT 1 FROM archive_turns WHERE document_id = ? LIMIT 1", (document_id,)).fetchone())


def insert_turns(conn: Connection, user_id: int, document_id: int,
                 turns: list[tuple[str, str, str, str | None]]) -> None:
    """The document's turns, (role, label, text, created_at) each, at positions 0, 1, ..."""
    conn.executemany(
        "INSERT INTO archive_turns (user_id, document_id, position, role, label, text, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(user_id, document_id, i, role, label, text, date) for i, (role, label, text, date) in enumerate(turns)])


def turn_count(conn: Connection, user_id: int, document_id: int) -> int:
    return conn.execute("SELECT count(*) FROM archive_turns WHERE document_id = ? AND user_id = ?",
                        (document_id, user_id)).fetchone()[0]


def chunk_count(conn: Connection, user_id: int, document_id: int) -> int:
    return conn.execute("SELECT count(*) FROM archive_chunks WHERE document_id = ? AND user_id = ?",
                        (document_id, user_id)).fetchone()[0]


def turn_page(conn: Connection, user_id: int, document_id: int, limit: int, *, passages: bool,
              before: int | None = None, start: int | None = None) -> list[dict[str, Any]]:
    """Up to ``limit`` of the document's turns (its chunks when ``passages``: a document added before
    turns were kept), oldest first: from position ``start`` on, else the newest before ``before``
    (or the newest of all). Each: position, role, label, text, created_at."""
    if passages:
        select = ("SELECT position, '' AS role, '' AS label, text, chunk_date AS created_at FROM archive_chunks"
                  " WHERE document_id = ? AND user_id = ?")
    else:
        select = ("SELECT position, role, label, text, created_at FROM archive_turns"
                  " WHERE document_id = ? AND user_id = ?")
    args: list[Any] = [document_id, user_id]
    if start is not None:
        rows = conn.execute(f"{select} AND position >= ? ORDER BY position LIMIT ?", (*args, start, limit)).fetchall()
    else:
        bound = " AND position < ?" if before is not None else ""
        rows = conn.execute(f"{select}{bound} ORDER BY position DESC LIMIT ?",
                            (*args, *([before] if before is not None else []), limit)).fetchall()
        rows.reverse()
    return [{"position": r["position"], "role": r["role"], "label": r["label"], "text": r["text"],
             "created_at": r["created_at"]} for r in rows]
