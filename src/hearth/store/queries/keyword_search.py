"""Statements of the keyword search (S6, S9): FTS5 with BM25 on SQLite, the postings tables ranked
by BM25 on PostgreSQL (``retrieval/pgsearch.py`` says how), side by side.

On PostgreSQL each FTS5 index is a GIN expression index over ``hearth_words(column)`` with its
postings in ``<table>_postings``; a ranking there needs each word's IDF and the index's average
row length, which the caller's term statistics give (``Bm25``), asked only on that engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hearth.store import Connection, Row, engine_of

# index name -> (table, text column, the rows that are indexed, for a table alias ``a``).
PG_INDEXES = {
    "messages_fts": ("messages", "content", "{a}.kind = 'chat' AND {a}.role IN ('user', 'assistant')"),
    "archive_chunks_fts": ("archive_chunks", "text", "TRUE"),
    "facts_fts": ("facts", "text", "TRUE"),
}
K1 = 1.2
B = 0.75
# (index name, words) -> (each word's IDF, the average row length): BM25's parameters.
Bm25 = Callable[[Connection, str, list[str]], tuple[list[float], float]]


def postings(conn: Connection) -> bool:
    """Whether the keyword indexes are PostgreSQL's postings (else FTS5's)."""
    return engine_of(conn).keyword_index == "tsvector"


def tsquery(words: list[str]) -> str:
    """A tsquery text matching any of the words; ``stem*`` is a prefix match."""
    parts = []
    for word in words:
        prefix = word.endswith("*")
        core = word[:-1] if prefix else word
        if core:
            parts.append("'" + core.replace("\\", "\\\\").replace("'", "''") + "'" + (":*" if prefix else ""))
    return " | ".join(parts)


# The query's terms folded once (parameters: the terms, ``stem*`` for a prefix, and their IDFs),
# and each as the words of the index it stands for: itself, or every word of the index's vocabulary
# (``keyword_lexemes``, parameter: the index's name) that starts with the prefix. The vocabulary is
# read in C collation, where the words starting with ``p`` are those from ``p`` up to ``p`` + U+10FFFF.
TERMS_SQL = (
    "WITH e AS MATERIALIZED (SELECT hearth_fold(rtrim(u.t, '*')) COLLATE \"C\" AS term,"
    " right(u.t, 1) = '*' AS prefix, u.w FROM unnest(?::text[], ?::float8[]) AS u(t, w)),"
    " q AS MATERIALIZED (SELECT term AS lexeme, w FROM e WHERE NOT prefix AND term <> ''"
    " UNION ALL SELECT k.lexeme, e.w FROM e JOIN keyword_lexemes k ON e.prefix AND k.name = ?"
    " AND k.lexeme >= e.term AND k.lexeme < e.term || chr(1114111)) "
)


def score_sql(table: str, among: str = "") -> str:
    """BM25 (higher is better) of each row holding one of the query's words, as ``s(id, score)``:
    the postings of those words (``<table>_postings``, written with the rows), read through their
    key by the words as one array so the plan stays an index scan whatever the planner guesses of
    ``q``, summed in word order so equal scores compare equal; ``among`` (a CTE of ids) keeps them
    to its rows. Its one parameter is the average length."""
    kept = f" JOIN {among} ON {among}.id = p.id" if among else ""
    # ``{B}::float8``: a bare 0.75 is numeric, and numeric arithmetic on every posting cost a
    # recall cue's query a tenth of its time; 0.75 x an integer is exact in both, so scores are equal.
    return (
        f"s AS (SELECT p.id, sum(q.w * p.tf * {K1 + 1} / (p.tf + {K1} * ({1 - B} + {B}::float8 * p.dl / ?::float8))"
        f" ORDER BY q.lexeme, q.w) AS score FROM {table}_postings p JOIN q ON q.lexeme = p.lexeme{kept}"
        " WHERE p.lexeme = ANY(ARRAY(SELECT lexeme FROM q)) GROUP BY p.id)"
    )


@dataclass(frozen=True)
class Scored:
    """One row a ranking found: the selected columns in order, and its score (higher is better).
    ``row[0]`` and ``row["score"]`` read it as the ranking's callers always have."""

    values: tuple[Any, ...]
    score: float

    def __getitem__(self, key: int | str) -> Any:
        return self.score if key == "score" else self.values[key]  # type: ignore[index]


def pg_ranked(conn: Connection, fts: str, alias: str, select: str, joins: str, where: list[str],
              args: list[Any], words: list[str], limit: int, *, bm25: Bm25, narrow: bool = False) -> list[Scored]:
    """Rows of a PostgreSQL keyword index matching any of ``words`` under ``where``, best BM25 first
    (``retrieval/pgsearch.py``, ``ranked``, says why each of the two plans)."""
    table, column, indexed = PG_INDEXES[fts]
    query = tsquery(words)
    if not query:
        return []
    weights, avg = bm25(conn, fts, words)
    if not narrow:
        sql = (
            f"{TERMS_SQL}, {score_sql(table)} SELECT x.*, top.score"
            " FROM (SELECT id, score FROM s ORDER BY score DESC, id) top"
            f" CROSS JOIN LATERAL (SELECT {select} FROM {table} {alias} {joins}"
            f" WHERE {alias}.id = top.id AND {' AND '.join(where)} OFFSET 0) x"
            " ORDER BY top.score DESC, top.id LIMIT ?"
        )
        rows = conn.execute(sql, (words, weights, fts, avg, *args, limit)).fetchall()
    else:
        sql = (
            f"{TERMS_SQL}, hits AS MATERIALIZED (SELECT {alias}.id FROM {table} {alias} {joins}"
            f" WHERE hearth_words({alias}.{column}) @@ to_tsquery('simple', hearth_fold(?))"
            f" AND {indexed.format(a=alias)} AND {' AND '.join(where)}), {score_sql(table, 'hits')}"
            f" SELECT {select}, s.score FROM s JOIN {table} {alias} ON {alias}.id = s.id {joins}"
            f" ORDER BY s.score DESC, {alias}.id LIMIT ?"
        )
        rows = conn.execute(sql, (words, weights, fts, query, *args, avg, limit)).fetchall()
    return [Scored(tuple(r)[:-1], r["score"]) for r in rows]
