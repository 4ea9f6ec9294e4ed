"""Term statistics and term selection for keyword queries (K1 at scale, A2).

A keyword query asks the rarest of its words, drops the very common ones and keeps the postings it
reads within a budget, so an everyday sentence cannot make a query slow at a million messages.
Those choices need each word's document frequency from the FTS5 vocabulary table.
"""

from __future__ import annotations

import sqlite3
import time

from .tuning import DEFAULT, Tuning

SOURCES = {"messages": ("messages_fts", "messages_fts_vocab"), "chunks": ("archive_chunks_fts", "archive_chunks_fts_vocab")}

_SIZE_CACHE: dict[tuple[int, str, str], tuple[float, int]] = {}
SIZE_TTL = 60.0


def indexed_rows(conn: sqlite3.Connection, fts: str) -> int:
    """Rows in an FTS5 index, cached briefly per connection (a count is cheap, not free, at 1M)."""
    # id() alone can be reused by a later connection; the file name tells databases apart.
    key = (id(conn), conn.execute("PRAGMA database_list").fetchone()[2], fts)
    now = time.monotonic()
    cached = _SIZE_CACHE.get(key)
    if cached and now - cached[0] < SIZE_TTL:
        return cached[1]
    count = conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()[0]
    _SIZE_CACHE[key] = (now, count)
    return count


def doc_frequencies(conn: sqlite3.Connection, vocab: str, words: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for word in words:
        if word.endswith("*"):
            # A stem stands for every indexed form that starts with it (an upper bound of its rows).
            prefix = word[:-1]
            row = conn.execute(f"SELECT sum(doc) FROM {vocab} WHERE term >= ? AND term < ?",
                               (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))).fetchone()
        else:
            row = conn.execute(f"SELECT doc FROM {vocab} WHERE term = ?", (word,)).fetchone()
        out[word] = (row[0] or 0) if row else 0
    return out


def select_terms(conn: sqlite3.Connection, words: list[str], source: str = "messages",
                 max_terms: int | None = None, *, tuning: Tuning = DEFAULT) -> list[str]:
    """Rarest terms first, very common ones dropped, at most ``max_terms`` (K1 at scale)."""
    if not words:
        return []
    max_terms = tuning.max_query_terms if max_terms is None else max_terms
    fts, vocab = SOURCES[source]
    total = indexed_rows(conn, fts)
    df = doc_frequencies(conn, vocab, words)
    kept = [w for w in words if df[w] > 0]
    if total >= tuning.common_min_rows:
        kept = [w for w in kept if df[w] <= tuning.common_share * total]
    kept.sort(key=lambda w: df[w])
    # Rarest first while their postings stay within budget: a query's cost follows the postings it
    # reads, and at a million messages a few everyday words would each bring tens of thousands.
    chosen: list[str] = []
    postings = 0
    for word in kept[:max_terms]:
        if chosen and postings + df[word] > tuning.postings_budget:
            break
        chosen.append(word)
        postings += df[word]
    return chosen


def rare_terms(conn: sqlite3.Connection, words: list[str], source: str = "messages") -> list[str]:
    """Terms specific enough to name a topic on their own: present, and in few rows."""
    if not words:
        return []
    fts, vocab = SOURCES[source]
    total = indexed_rows(conn, fts)
    df = doc_frequencies(conn, vocab, words)
    limit = max(3, int(0.002 * total))
    return [w for w in words if 0 < df[w] <= limit and len(w) >= 4]
