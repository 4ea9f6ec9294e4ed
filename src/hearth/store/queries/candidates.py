"""The hybrid search's candidate reads (A2, S17): FTS5 lists inside the search's filters, the rows
behind the hits, and a date range's turns. ``where`` and ``args`` are the search's filters over
``messages m`` / ``conversations c`` or ``archive_chunks k`` / ``archive_documents d``, built by
``retrieval/candidates.py``; PostgreSQL's keyword lists are ``retrieval/pgsearch.py``'s."""

from __future__ import annotations

from typing import Any

from hearth.store.engine import Connection


def keyword_messages(conn: Connection, match: str, where: list[str], args: list[Any],
                     limit: int) -> list[tuple[int, float]]:
    """(message id, BM25 score: lower is better) of the turns matching ``match`` inside ``where``."""
    rows = conn.execute(
        "SELECT m.id, bm25(messages_fts) AS score FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        f" JOIN conversations c ON c.id = m.conversation_id WHERE messages_fts MATCH ? AND {' AND '.join(where)}"
        " ORDER BY score LIMIT ?", (match, *args, limit)).fetchall()
    return [(r[0], r[1]) for r in rows]


def keyword_chunks(conn: Connection, match: str, where: list[str], args: list[Any],
                   limit: int) -> list[tuple[int, float]]:
    """(chunk id, BM25 score: lower is better) of the archive chunks matching ``match`` inside ``where``."""
    rows = conn.execute(
        "SELECT k.id, bm25(archive_chunks_fts) AS score FROM archive_chunks_fts"
        " JOIN archive_chunks k ON k.id = archive_chunks_fts.rowid JOIN archive_documents d ON d.id = k.document_id"
        f" WHERE archive_chunks_fts MATCH ? AND {' AND '.join(where)} ORDER BY score LIMIT ?",
        (match, *args, limit)).fetchall()
    return [(r[0], r[1]) for r in rows]


def messages(conn: Connection, ids: list[int], where: list[str],
             args: list[Any]) -> list[tuple[int, int, str, str, str, str | None]]:
    """(id, conversation id, role, content, created_at, conversation title) of those of ``ids``
    inside ``where``, 500 ids a statement."""
    out: list[tuple[int, int, str, str, str, str | None]] = []
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        rows = conn.execute(
            "SELECT m.id, m.conversation_id, m.role, m.content, m.created_at, c.title"
            " FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE m.id IN ({','.join('?' * len(part))}) AND {' AND '.join(where)}", (*part, *args)).fetchall()
        out += [(r["id"], r["conversation_id"], r["role"], r["content"], r["created_at"], r["title"]) for r in rows]
    return out


def chunks(conn: Connection, ids: list[int], where: list[str],
           args: list[Any]) -> list[tuple[int, int, str, str, str | None, str, str]]:
    """(id, document id, text, speakers, day, document title, collection) of those of ``ids``
    inside ``where``, 500 ids a statement."""
    out: list[tuple[int, int, str, str, str | None, str, str]] = []
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        rows = conn.execute(
            "SELECT k.id, k.document_id, k.text, k.speakers, coalesce(k.chunk_date, d.document_date) AS day,"
            " d.title, d.collection FROM archive_chunks k JOIN archive_documents d ON d.id = k.document_id"
            f" WHERE k.id IN ({','.join('?' * len(part))}) AND {' AND '.join(where)}", (*part, *args)).fetchall()
        out += [(r["id"], r["document_id"], r["text"], r["speakers"], r["day"], r["title"], r["collection"])
                for r in rows]
    return out


def turns_in_span(conn: Connection, span: str, bounds: tuple, limit: int) -> int:
    """How many turns ``span`` (over ``messages m``) holds, counted up to ``limit``."""
    return int(conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE {span} LIMIT ?) AS s",
                            (*bounds, limit)).fetchone()[0])


def span_edges(conn: Connection, span: str, turn: str, bounds: tuple,
               user_id: int) -> tuple[int | None, int | None, int | None, int | None]:
    """(first and last turn of ``span`` by time, the turn just before it, the turn just after it);
    ``bounds``: (user, first day, end)."""
    first, last, before, after = conn.execute(
        f"SELECT (SELECT m.id FROM messages m WHERE {span} ORDER BY m.created_at LIMIT 1),"
        f" (SELECT m.id FROM messages m WHERE {span} ORDER BY m.created_at DESC LIMIT 1),"
        f" (SELECT m.id FROM messages m WHERE {turn} AND m.created_at < ? ORDER BY m.created_at DESC LIMIT 1),"
        f" (SELECT m.id FROM messages m WHERE {turn} AND m.created_at >= ? ORDER BY m.created_at LIMIT 1)",
        (*bounds, *bounds, user_id, bounds[1], user_id, bounds[2])).fetchone()
    return first, last, before, after


def in_range(conn: Connection, ids: list[int], chat_turn: str, bounds: tuple, where: list[str],
             args: list[Any]) -> set[int]:
    """Those of ``ids`` that are chat turns (``chat_turn``) of the range (``bounds``: user, first
    day, end) inside ``where``: read by primary key ("+": never the index of turns by time)."""
    return {row[0] for row in conn.execute(
        "SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        f" WHERE m.id IN ({','.join('?' * len(ids))}) AND +m.user_id = ? AND {chat_turn}"
        f" AND +m.created_at >= ? AND +m.created_at < ? AND {' AND '.join(['1 = 1', *where])}",
        (*ids, *bounds, *args))}
