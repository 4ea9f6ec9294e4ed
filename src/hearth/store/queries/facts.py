"""Statements of the facts written at ingestion (``facts``, ``fact_sources``; E2, A2) and their
keyword search on both engines."""

from __future__ import annotations

from typing import Any, Iterable

from hearth.store import Connection, inserted_id
from hearth.store.queries.keyword_search import Bm25, pg_ranked, postings


def citable_turns(conn: Connection, user_id: int, ids: list[int]) -> list[tuple[int, int, str | None]]:
    """(id, conversation id, created_at) of the user's chat turns among ``ids``, by id."""
    rows = conn.execute(
        f"SELECT id, conversation_id, created_at FROM messages WHERE user_id = ? AND id IN ({','.join('?' * len(ids))})"
        " AND kind = 'chat' AND role IN ('user', 'assistant') ORDER BY id", (user_id, *ids)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def insert(conn: Connection, user_id: int, conversation_id: int, text: str, fact_date: str | None, source: str,
           span_id: int | None, created_at: str, message_ids: Iterable[int]) -> int:
    """One fact and the turns it cites; returns its id."""
    cur = conn.execute(
        "INSERT INTO facts (user_id, conversation_id, text, fact_date, source, span_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (user_id, conversation_id, text, fact_date, source, span_id, created_at))
    fact_id = inserted_id(cur)
    conn.executemany("INSERT INTO fact_sources (fact_id, message_id) VALUES (?, ?)",
                     [(fact_id, message_id) for message_id in message_ids])
    return fact_id


def listed(conn: Connection, user_id: int, message_ids: list[int]) -> list[tuple[int, str, str | None, str]]:
    """(id, text, fact_date, source) of the user's facts, or only those citing any of
    ``message_ids``, oldest first."""
    where, args = "f.user_id = ?", [user_id]
    if message_ids:
        where += f" AND f.id IN (SELECT fact_id FROM fact_sources WHERE message_id IN ({','.join('?' * len(message_ids))}))"
        args += message_ids
    rows = conn.execute(f"SELECT f.id, f.text, f.fact_date, f.source FROM facts f WHERE {where} ORDER BY f.id",
                        args).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def cited_turns(conn: Connection, fact_ids: list[int]) -> dict[int, list[int]]:
    """Fact id -> the turns it cites, in turn order."""
    out: dict[int, list[int]] = {}
    for start in range(0, len(fact_ids), 500):
        part = fact_ids[start:start + 500]
        for fact_id, message_id in conn.execute(
                f"SELECT fact_id, message_id FROM fact_sources WHERE fact_id IN ({','.join('?' * len(part))})"
                " ORDER BY fact_id, message_id", part):
            out.setdefault(fact_id, []).append(message_id)
    return out


def keyword_hits(conn: Connection, user_id: int, words: list[str], match: str, limit: int,
                 origins: tuple[str, ...], *, bm25: Bm25) -> list[tuple[int, float]]:
    """(fact id, BM25 score, higher is better) of the user's facts matching ``words`` (on SQLite,
    the FTS5 expression ``match``), written by one of ``origins`` when given."""
    where: list[str] = ["f.user_id = ?"]
    args: list[Any] = [user_id]
    if origins:
        where.append(f"f.source IN ({','.join('?' * len(origins))})")
        args.extend(origins)
    if postings(conn):
        ranked = pg_ranked(conn, "facts_fts", "f", "f.id", "", where, args, words, limit, bm25=bm25)
        return [(int(r.values[0]), float(r.score)) for r in ranked]
    rows = conn.execute(
        "SELECT f.id, bm25(facts_fts) AS score FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid"
        f" WHERE facts_fts MATCH ? AND {' AND '.join(where)} ORDER BY score LIMIT ?",
        (match, *args, limit)).fetchall()
    return [(int(r[0]), -float(r[1])) for r in rows]


def of_origins(conn: Connection, ids: list[int], origins: tuple[str, ...]) -> set[int]:
    """The facts among ``ids`` written by one of ``origins``."""
    return {r[0] for r in conn.execute(
        f"SELECT id FROM facts WHERE id IN ({','.join('?' * len(ids))}) AND source IN ({','.join('?' * len(origins))})",
        (*ids, *origins))}


def any_for_user(conn: Connection, user_id: int) -> bool:
    """Whether this user has any fact (E2): one indexed lookup."""
    return conn.execute("SELECT 1 FROM facts WHERE user_id = ? LIMIT 1", (user_id,)).fetchone() is not None
