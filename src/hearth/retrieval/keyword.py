"""Keyword search over chat messages with SQLite FTS5 and BM25 (S6).

Only ordinary user/assistant chat turns are indexed (stored prompts, handoff artifacts and tool
results never are), and every query is scoped to one user and to the conversations the caller
allows: visibility rules are applied in SQL, not after the fact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from hearth.store.queries import keyword_search
from hearth.store.queries.keyword_search import CANDIDATE_CAPS, CROWDED_FIRST, KeywordHit

from ..store import Connection
from ..text import STOPWORDS, WORD_RE
from .pgsearch import bm25_weights
from .terms import database_key

__all__ = ["CANDIDATE_CAPS", "CROWDED_FIRST", "KeywordHit", "STOPWORDS", "THREAD_IDS", "ThreadIds", "WORD_RE",
           "excerpt", "match_query", "search_messages", "terms"]


def terms(text: str, limit: int = 24) -> list[str]:
    """Distinct content words of a text in order, lower-cased, without stopwords."""
    seen: dict[str, None] = {}
    for match in WORD_RE.finditer(text.casefold()):
        word = match.group().replace("'", "")
        if len(word) > 1 and match.group() not in STOPWORDS and word not in STOPWORDS:
            seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def match_query(words: list[str]) -> str:
    """An FTS5 MATCH expression: any of the words, each quoted so no word is read as syntax."""
    return " OR ".join(f'"{w}"' for w in words)


def search_messages(
    conn: Connection,
    user_id: int,
    words: list[str],
    *,
    limit: int = 10,
    exclude_conversation_ids: tuple[int, ...] = (),
    persona_id: int | None = None,
    eligible_only: bool = True,
    include_shielded: bool = False,
    conversation_id: int | None = None,
    match: str | None = None,
) -> list[KeywordHit]:
    """The best BM25 matches among the user's allowed messages. ``match`` is a ready FTS5
    expression (prefix terms, say); by default the words, each quoted."""
    if not words:
        return []
    return keyword_search.messages(
        conn, user_id, match or match_query(words), limit, exclude_conversation_ids=exclude_conversation_ids,
        persona_id=persona_id, eligible_only=eligible_only, include_shielded=include_shielded,
        conversation_id=conversation_id, bm25=bm25_weights,
        left_out=lambda: THREAD_IDS.sets(conn, exclude_conversation_ids))


class ThreadIds:
    """The message ids of the conversations searches leave out (the current thread, a handoff's
    source), per database. On the send path the current thread's turns often fill the top of the
    ranked list (a person's own wording matches best), and checking each one against the filters
    is a row read; a set lookup is not. Kept current by reading the ids above the newest one held
    (message ids are never reused: they come from the ledger's AUTOINCREMENT), and read afresh when
    the conversation's newest id is below it (a restored database). A set only grows under the
    lock; readers only test membership.

    Bounded by conversations and by ids held (a set costs about 50 bytes an id): the least recently
    used go first, and a conversation longer than the whole bound is not held at all (its turns are
    then checked by the filters, as without this)."""

    SIZE = 64
    MAX_IDS = 1_000_000

    def __init__(self, size: int = SIZE, max_ids: int = MAX_IDS) -> None:
        self.size = size
        self.max_ids = max_ids
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[str, int], tuple[int, set[int]]] = OrderedDict()
        self._count = 0
        self._too_long: set[tuple[str, int]] = set()  # conversations only grow: never read again

    def sets(self, conn: Connection, conversation_ids: tuple[int, ...]) -> list[set[int]]:
        database = database_key(conn)
        return [ids for ids in (self._one(conn, database, c) for c in conversation_ids) if ids]

    def _one(self, conn: Connection, database: str, conversation_id: int) -> set[int]:
        key = (database, conversation_id)
        if key in self._too_long:
            return set()
        top = keyword_search.newest_message_id(conn, conversation_id)
        with self._lock:
            newest, ids = self._held.pop(key, (0, set()))
            self._count -= len(ids)
            if top < newest:
                newest, ids = 0, set()
            if top > newest:
                ids.update(keyword_search.message_ids_between(conn, conversation_id, newest, top))
            if len(ids) > self.max_ids:
                self._too_long.add(key)
                return set()
            self._held[key] = (top, ids)
            self._count += len(ids)
            while len(self._held) > self.size or self._count > self.max_ids:
                _, (_, dropped) = self._held.popitem(last=False)
                self._count -= len(dropped)
            return ids


THREAD_IDS = ThreadIds()


def excerpt(text: str, words: list[str], width: int = 300) -> str:
    """About ``width`` characters of ``text`` around the first matching word."""
    if len(text) <= width:
        return text
    lowered = text.casefold()
    positions = [p for p in (lowered.find(w) for w in words) if p >= 0]
    centre = min(positions) if positions else 0
    start = max(0, min(centre - width // 3, len(text) - width))
    piece = text[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
