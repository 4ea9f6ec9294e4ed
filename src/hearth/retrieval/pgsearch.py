"""Keyword search on PostgreSQL (S6, S9): the index's postings, ranked by BM25 as FTS5 ranks.

Each keyword index (the rows FTS5 indexes on SQLite) keeps its postings in a table written with
the rows (``messages_postings``, ``archive_chunks_postings``, ``facts_postings``: migration 31, one
row a word and row, as FTS5's doclists): the words of ``hearth_words(...)`` (``to_tsvector('simple',
...)`` of the lower-cased text with diacritics folded), no stemming, no stop words, so a word
matches the same rows on both engines; query words are folded with ``hearth_fold`` the same way. A
row matches when it holds one of the query's words; a prefix term stands for the words of the
index's vocabulary that start with it (``keyword_lexemes``, migration 29). Matches are ranked by
Okapi BM25 (k1 1.2, b 0.75, FTS5's constants) from the postings alone, so a query never tokenises a
candidate's text again: term frequency and row length from the posting, each term's IDF from its
document frequency (the same cached statistics the common-term guard uses), and document length
against the average length over the index, kept with its row count by triggers
(``keyword_totals``). ``ts_rank`` is not used: it has no IDF, so a common word would weigh as much
as a rare one and the rankings of the two engines would disagree. The GIN indexes over
``hearth_words(...)`` find the matches first when the filters pass few of them (``ranked``), and
answer the search of conversations (``thread/search.py``: every word in one turn).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..store import Connection
from .terms import PG_INDEXES as INDEXES
from .terms import STATS, pg_totals, tsquery

K1 = 1.2
B = 0.75
_QUOTED = re.compile(r'"((?:[^"]|"")*)"(\*)?')


def words_of_match(match: str) -> list[str]:
    """The terms of an FTS5 expression Hearth builds (``"a" OR "b"*``), prefixes kept as ``b*``."""
    return [m.group(1).replace('""', '"') + (m.group(2) or "") for m in _QUOTED.finditer(match)]


def average_length(conn: Connection, fts: str) -> float:
    """Distinct words per indexed row, over the whole index (as FTS5 averages), from the totals
    the index's triggers keep."""
    rows, lengths = pg_totals(conn, fts)
    return lengths / rows if rows else 1.0


def idf(total: int, df: int) -> float:
    """FTS5's BM25 IDF, floored at a small positive value as FTS5 floors it."""
    return max(math.log((total - df + 0.5) / (df + 0.5)), 1e-6)


def bm25_weights(conn: Connection, fts: str, words: list[str]) -> tuple[list[float], float]:
    """The words' IDFs and the average row length: the parameters ``score_sql`` takes."""
    total, df = STATS.frequencies(conn, fts, fts + "_vocab", words)
    return [idf(max(total, 1), df.get(w, 0)) for w in words], average_length(conn, fts)


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


def ranked(conn: Connection, fts: str, alias: str, select: str, joins: str, where: list[str],
           args: list[Any], words: list[str], limit: int, narrow: bool = False) -> list[Any]:
    """Rows matching any of ``words`` under ``where``, best BM25 first; each row ends with ``score``.

    By default every row holding a query word is scored from the postings alone, then the rows
    are read best first, each through its primary key with the filters, until ``limit`` pass (as
    FTS5 ranks every match and filters after); the lateral subquery (``OFFSET 0`` keeps it one) is
    what stops the walk early. Finding the matches through the GIN index first read every match's
    row and conversation to filter them: twice the time on a send's search, and a cached generic
    plan could take seconds. ``narrow`` filters (one conversation, a date range, collections) pass
    few of the matches, so there the GIN index finds the matches, the filters keep the few, and
    only those are scored: walking in score order would read most matches before ``limit`` passed."""
    table, column, indexed = INDEXES[fts]
    query = tsquery(words)
    if not query:
        return []
    weights, avg = bm25_weights(conn, fts, words)
    if not narrow:
        sql = (
            f"{TERMS_SQL}, {score_sql(table)} SELECT x.*, top.score"
            " FROM (SELECT id, score FROM s ORDER BY score DESC, id) top"
            f" CROSS JOIN LATERAL (SELECT {select} FROM {table} {alias} {joins}"
            f" WHERE {alias}.id = top.id AND {' AND '.join(where)} OFFSET 0) x"
            " ORDER BY top.score DESC, top.id LIMIT ?"
        )
        return conn.execute(sql, (words, weights, fts, avg, *args, limit)).fetchall()
    sql = (
        f"{TERMS_SQL}, hits AS MATERIALIZED (SELECT {alias}.id FROM {table} {alias} {joins}"
        f" WHERE hearth_words({alias}.{column}) @@ to_tsquery('simple', hearth_fold(?))"
        f" AND {indexed.format(a=alias)} AND {' AND '.join(where)}), {score_sql(table, 'hits')}"
        f" SELECT {select}, s.score FROM s JOIN {table} {alias} ON {alias}.id = s.id {joins}"
        f" ORDER BY s.score DESC, {alias}.id LIMIT ?"
    )
    return conn.execute(sql, (words, weights, fts, query, *args, avg, limit)).fetchall()
