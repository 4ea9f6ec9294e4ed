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
from typing import Any

from hearth.store.queries import keyword_search
from hearth.store.queries.keyword_search import K1, TERMS_SQL, B, score_sql, words_of_match
from hearth.store.queries.keyword_search import PG_INDEXES as INDEXES

from ..store import Connection
from .terms import STATS, pg_totals

__all__ = ["B", "INDEXES", "K1", "TERMS_SQL", "average_length", "bm25_weights", "idf", "ranked", "score_sql", "words_of_match"]


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


def ranked(conn: Connection, fts: str, alias: str, select: str, joins: str, where: list[str],
           args: list[Any], words: list[str], limit: int, narrow: bool = False) -> list[Any]:
    """Rows matching any of ``words`` under ``where``, best BM25 first; each is read as ``row[i]``
    (the columns of ``select``) and ``row["score"]``.

    By default every row holding a query word is scored from the postings alone, then the rows
    are read best first, each through its primary key with the filters, until ``limit`` pass (as
    FTS5 ranks every match and filters after); the lateral subquery (``OFFSET 0`` keeps it one) is
    what stops the walk early. Finding the matches through the GIN index first read every match's
    row and conversation to filter them: twice the time on a send's search, and a cached generic
    plan could take seconds. ``narrow`` filters (one conversation, a date range, collections) pass
    few of the matches, so there the GIN index finds the matches, the filters keep the few, and
    only those are scored: walking in score order would read most matches before ``limit`` passed."""
    return keyword_search.pg_ranked(conn, fts, alias, select, joins, where, args, words, limit,
                                    bm25=bm25_weights, narrow=narrow)
