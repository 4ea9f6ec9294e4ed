"""Keyword search on PostgreSQL (S6, S9): tsvector + GIN, ranked by BM25 as FTS5 ranks.

The index is an expression GIN index over ``hearth_words(...)`` (``to_tsvector('simple', ...)`` of
the lower-cased text with diacritics folded) on exactly the rows FTS5 indexes on SQLite (see
``store/migrations/``): no stemming, no stop words, so a word matches the same rows on both
engines; query words are folded with ``hearth_fold`` the same way. Matches are found through the index and
ranked by Okapi BM25 (k1 1.2, b 0.75, FTS5's constants) computed from the matching row's own
vector, stored beside the row when it is written (``messages_words``, ``archive_chunks_words``,
``facts_words``: migration 28), so a query never tokenises a candidate's text again: term
frequency from its positions, each term's IDF from its document frequency (the same
cached statistics the common-term guard uses), and document length against the average length
over the index, kept with its row count by triggers (``keyword_totals``). ``ts_rank`` is not used: it has no IDF, so a common word would weigh as much as a
rare one and the rankings of the two engines would disagree.
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


def bm25_terms(conn: Connection, fts: str, words: list[str]) -> tuple[list[str], list[float], float]:
    """The words, their IDFs and the average row length: the parameters ``score_sql`` takes."""
    total, df = STATS.frequencies(conn, fts, fts + "_vocab", words)
    return words, [idf(max(total, 1), df.get(w, 0)) for w in words], average_length(conn, fts)


def score_sql(alias: str, table: str, prefixes: bool) -> str:
    """A lateral subquery giving ``score`` (BM25, higher is better) for row ``alias``, from the
    row's stored words (``<table>_words``, written with the row) joined to the query's terms
    (``q``, folded once per query by ``terms_sql``); its one parameter is the average length.
    Without prefix terms only the row's lexemes that are query terms are unnested (``setweight``
    marks them, ``ts_filter`` keeps them): a reply holds about fifty, a query a handful."""
    words = "kw.words" if prefixes else "ts_filter(setweight(kw.words, 'A', (SELECT array_agg(term) FROM q)), '{a}')"
    return (
        f"JOIN {table}_words kw ON kw.id = {alias}.id"
        " CROSS JOIN LATERAL (SELECT coalesce(sum(q.w * l.tf * " + str(K1 + 1) + " / (l.tf + " + str(K1) +
        " * (" + str(1 - B) + " + " + str(B) + " * l.dl / ?::float8))), 0) AS score"
        " FROM q JOIN (SELECT lexeme, coalesce(array_length(positions, 1), 1) AS tf, length(kw.words) AS dl"
        f" FROM unnest({words})) l"
        " ON CASE WHEN q.prefix THEN starts_with(l.lexeme, q.term) ELSE l.lexeme = q.term END) s"
    )


# The query's terms folded once, not once per row and lexeme; its parameters are the terms
# (text[], ``stem*`` for a prefix) and their IDFs (float8[]).
TERMS_SQL = ("WITH q AS MATERIALIZED (SELECT hearth_fold(rtrim(u.t, '*')) AS term, right(u.t, 1) = '*' AS prefix,"
             " u.w FROM unnest(?::text[], ?::float8[]) AS u(t, w)) ")


def ranked(conn: Connection, fts: str, alias: str, select: str, joins: str, where: list[str],
           args: list[Any], words: list[str], limit: int) -> list[Any]:
    """Rows matching any of ``words`` under ``where``, best BM25 first; each row ends with ``score``."""
    table, column, indexed = INDEXES[fts]
    query = tsquery(words)
    if not query:
        return []
    terms, weights, avg = bm25_terms(conn, fts, words)
    terms = [t.casefold() for t in terms]
    prefixes = any(t.endswith("*") for t in terms)
    sql = (
        f"{TERMS_SQL}SELECT {select}, s.score FROM {table} {alias} {joins} {score_sql(alias, table, prefixes)}"
        f" WHERE hearth_words({alias}.{column}) @@ to_tsquery('simple', hearth_fold(?))"
        f" AND {indexed.format(a=alias)} AND {' AND '.join(where)}"
        f" ORDER BY s.score DESC, {alias}.id LIMIT ?"
    )
    return conn.execute(sql, (terms, weights, avg, query, *args, limit)).fetchall()
