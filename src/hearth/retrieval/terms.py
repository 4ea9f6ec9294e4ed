"""Term statistics and term selection for keyword queries (K1 at scale, A2).

A keyword query asks the rarest of its words, drops the very common ones and keeps the postings it
reads within a budget, so an everyday sentence cannot make a query slow at a million messages.
Those choices need each word's document frequency from the FTS5 vocabulary table.
"""

from __future__ import annotations

import threading

from hearth.store.queries import keyword_search
from hearth.store.queries.keyword_search import PG_INDEXES, indexed_rows, pg_totals, tsquery

from ..store import Connection, engine_of
from .tuning import DEFAULT, Tuning

__all__ = ["DRIFT", "MAX_CACHED", "PG_INDEXES", "SMALL_INDEX", "SOURCES", "STABLE_DF", "STATS", "TermStats",
           "database_key", "doc_frequencies", "indexed_rows", "pg_totals", "rare_terms", "select_terms", "tsquery"]

SOURCES = {"messages": ("messages_fts", "messages_fts_vocab"), "chunks": ("archive_chunks_fts", "archive_chunks_fts_vocab"),
           "facts": ("facts_fts", "facts_fts_vocab")}
# On PostgreSQL (S9) each FTS5 index is a GIN expression index over hearth_words(column):
# ``PG_INDEXES`` (store/queries/keyword_search.py) names its table, column and indexed rows.

# -- term statistics, cached per index generation ----------------------------------------------------
# Reading a word's document frequency from fts5vocab walks its whole posting list: 57 ms for "the"
# at a million messages, once per word per send, and a stem's prefix range more. So frequencies
# are cached per database and index. The index's generation is its row count, one lookup in
# FTS5's own totals record. A frequency read at one generation is kept while the index stays
# within DRIFT of that size: a few new rows barely move it, and the choice it feeds ranks rare
# words against common ones. Two exceptions keep new words findable at once: a word found in no
# row is read again at every new generation (0 against 1 decides whether a new or edited message
# can be found at all), and so is a rare word (under STABLE_DF rows) while the index is small
# enough that one row is a large share of it.
STABLE_DF = 1_000
SMALL_INDEX = 100_000
DRIFT = 0.01
MAX_CACHED = 50_000


def database_key(conn: Connection) -> str:
    """Which database a connection reads, for the process-local caches."""
    return engine_of(conn).database_key(conn)


class TermStats:
    """Document frequencies per (database file, index), kept per index generation (see above)."""

    def __init__(self, stable_df: int = STABLE_DF, drift: float = DRIFT, small_index: int = SMALL_INDEX) -> None:
        self.stable_df = stable_df
        self.drift = drift
        self.small_index = small_index
        self._lock = threading.Lock()
        # (database file, vocab table) -> term -> (document frequency, rows in the index when read)
        self._cache: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
        self.lookups = 0  # vocabulary queries run: what the cache saves is visible to a test

    def frequencies(self, conn: Connection, fts: str, vocab: str, words: list[str]) -> tuple[int, dict[str, int]]:
        """(rows in the index, each word's document frequency)."""
        total = indexed_rows(conn, fts)
        database = database_key(conn)
        with self._lock:
            cached = self._cache.setdefault((database, vocab), {})
            if len(cached) > MAX_CACHED:
                cached.clear()
            known = dict(cached)
        out: dict[str, int] = {}
        missing: list[str] = []
        for word in words:
            hit = known.get(word)
            if hit is not None and self._usable(hit, total):
                out[word] = hit[0]
            else:
                missing.append(word)
        if missing:
            read = _read_frequencies(conn, vocab, missing)
            self.lookups += len(missing)
            out.update(read)
            with self._lock:
                cached.update({w: (df, total) for w, df in read.items()})
        return total, out

    def _usable(self, hit: tuple[int, int], total: int) -> bool:
        df, read_at = hit
        if df == 0 or (df < self.stable_df and total < self.small_index):
            return read_at == total
        return abs(total - read_at) <= self.drift * total

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


STATS = TermStats()


def _read_frequencies(conn: Connection, vocab: str, words: list[str]) -> dict[str, int]:
    return keyword_search.document_frequencies(conn, vocab, words)


def doc_frequencies(conn: Connection, vocab: str, words: list[str]) -> dict[str, int]:
    """Each word's document frequency in one index (``messages_fts_vocab``...), through the cache."""
    fts = vocab.removesuffix("_vocab")
    return STATS.frequencies(conn, fts, vocab, words)[1]


def select_terms(conn: Connection, words: list[str], source: str = "messages",
                 max_terms: int | None = None, *, tuning: Tuning = DEFAULT) -> list[str]:
    """Rarest terms first, very common ones dropped, at most ``max_terms`` (K1 at scale)."""
    if not words:
        return []
    max_terms = tuning.max_query_terms if max_terms is None else max_terms
    fts, vocab = SOURCES[source]
    total, df = STATS.frequencies(conn, fts, vocab, words)
    kept = [w for w in words if df[w] > 0]
    if total >= tuning.common_min_rows:
        kept = [w for w in kept if df[w] <= tuning.common_share * total]
    kept.sort(key=lambda w: df[w])
    # Rarest first while their postings stay within budget: a query's cost follows the postings it
    # reads, and at a million messages a few everyday words would each bring tens of thousands.
    chosen: list[str] = []
    postings = 0
    for word in kept[:max_terms]:
        if postings + df[word] > tuning.postings_budget and (chosen or not tuning.rarest_over_budget):
            break
        chosen.append(word)
        postings += df[word]
    return chosen


def rare_terms(conn: Connection, words: list[str], source: str = "messages") -> list[str]:
    """Terms specific enough to name a topic on their own: present, and in few rows."""
    if not words:
        return []
    fts, vocab = SOURCES[source]
    total, df = STATS.frequencies(conn, fts, vocab, words)
    limit = max(3, int(0.002 * total))
    return [w for w in words if 0 < df[w] <= limit and len(w) >= 4]
