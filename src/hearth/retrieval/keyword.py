"""Keyword search over chat messages with SQLite FTS5 and BM25 (S6).

Only ordinary user/assistant chat turns are indexed (stored prompts, handoff artifacts and tool
results never are), and every query is scoped to one user and to the conversations the caller
allows: visibility rules are applied in SQL, not after the fact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from hearth.records.conversations import ELIGIBLE_SQL, VISIBLE_SQL

from ..store import Connection, Row, engine_of
from ..text import STOPWORDS, WORD_RE
from .terms import database_key


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


@dataclass(frozen=True)
class KeywordHit:
    message_id: int
    conversation_id: int
    title: str
    role: str
    created_at: str
    content: str
    score: float  # BM25, lower is better in SQLite; negated here so higher is better


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
    where = ["m.user_id = ?"]
    args: list = [match or match_query(words), user_id]
    if conversation_id is not None:
        where.append("m.conversation_id = ?")
        args.append(conversation_id)
    if eligible_only:
        where.append(VISIBLE_SQL if include_shielded else ELIGIBLE_SQL)
    if exclude_conversation_ids:
        where.append(f"m.conversation_id NOT IN ({','.join('?' * len(exclude_conversation_ids))})")
        args.extend(exclude_conversation_ids)
    if persona_id is not None:
        where.append("c.persona_id = ?")
        args.append(persona_id)
    match, filters = args[0], args[1:]
    if engine_of(conn).keyword_index == "tsvector":
        from . import pgsearch

        rows = pgsearch.ranked(conn, "messages_fts", "m", "m.id, m.conversation_id, c.title, m.role, m.created_at,"
                               " m.content", "JOIN conversations c ON c.id = m.conversation_id", where, filters,
                               pgsearch.words_of_match(match), limit, narrow=conversation_id is not None)
        return [_hit(r, r["score"]) for r in rows]
    # Rank inside FTS5 first and filter a bounded candidate list: joining every match of a common
    # word to its message and conversation before ranking costs hundreds of milliseconds at a
    # million messages. When the filters leave too few, widen, and finally rank every match.
    # When the bounded list comes back crowded by the excluded conversations (the turns of a long
    # current thread match the person's own wording best), it is asked again with them left out
    # inside the query, row by row in rank order (a primary-key read each, only as far as the
    # list reaches), before any widening.
    exclusion = ""
    if exclude_conversation_ids:
        exclusion = (" AND (SELECT x.conversation_id FROM messages x WHERE x.id = messages_fts.rowid)"
                     f" NOT IN ({','.join('?' * len(exclude_conversation_ids))})")
    # The left-out conversations' own turns are dropped from the list in memory before any row is
    # checked (``ThreadIds``: a thread's ids are read once, then only its new ones); the SQL
    # filters still decide what may be returned.
    left_out = THREAD_IDS.sets(conn, exclude_conversation_ids) if exclude_conversation_ids else []
    attempts = [(CROWDED_FIRST if exclusion else CANDIDATE_CAPS[0], "")]
    attempts += [(cap, exclusion) for cap in CANDIDATE_CAPS] if exclusion else [(cap, "") for cap in CANDIDATE_CAPS[1:]]
    for cap, rows_sql in attempts:
        rows_args = list(exclude_conversation_ids) if rows_sql else []
        # bm25() ordered with rowid breaking ties: the same rows in the same order as FTS5's
        # ``ORDER BY rank``, which sorts through a second statement inside FTS5 (a fifth to a third
        # slower for a recall cue's few thousand matches).
        candidates = conn.execute(
            f"SELECT rowid, bm25(messages_fts) AS score FROM messages_fts WHERE messages_fts MATCH ?{rows_sql}"
            " ORDER BY score, rowid LIMIT ?", (match, *rows_args, cap)).fetchall()
        if not candidates:
            return []
        kept = candidates
        for ids in left_out:  # one plain pass per set: a thousand candidates, each a set lookup
            kept = [c for c in kept if c[0] not in ids]
        best = _best_allowed(conn, kept, where, filters, limit)
        if len(best) >= limit or len(candidates) < cap:
            found = _rows(conn, [row_id for row_id, _ in best], where, filters)
            return [_hit(found[row_id], -rank) for row_id, rank in best if row_id in found]
    sql = (
        "SELECT m.id, m.conversation_id, c.title, m.role, m.created_at, m.content, bm25(messages_fts) AS score"
        " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        " JOIN conversations c ON c.id = m.conversation_id"
        f" WHERE messages_fts MATCH ? AND {' AND '.join(where)}"
        " ORDER BY score LIMIT ?"
    )
    return [_hit(r, -r["score"]) for r in conn.execute(sql, (*args, limit)).fetchall()]


CANDIDATE_CAPS = (200, 5_000)
# With a conversation left out (the current thread, on the send path) the first list is longer, so
# that thread's own turns rarely crowd it: on the 1M deployment's recall cues the top 200 were
# often all the current thread's, and the second, excluding query ranked every match again, while
# every allowed match of those cues was within the top 1,000. A longer list costs about 1.4 ms
# more to rank and check there, so a search that leaves nothing out keeps the short one.
CROWDED_FIRST = 1_000


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
        top = conn.execute("SELECT max(id) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0] or 0
        with self._lock:
            newest, ids = self._held.pop(key, (0, set()))
            self._count -= len(ids)
            if top < newest:
                newest, ids = 0, set()
            if top > newest:
                ids.update(r[0] for r in conn.execute("SELECT id FROM messages WHERE conversation_id = ? AND id > ?"
                                                      " AND id <= ?", (conversation_id, newest, top)))
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


def _best_allowed(conn: Connection, candidates: list, where: list[str], args: list,
                  limit: int) -> list[tuple[int, float]]:
    """The first ``limit`` candidates the filters allow, in rank order. Asked in growing slices
    from the top: most lists have their ``limit`` allowed rows near the top, and each id asked
    is a row read (a 1,000-long list cost 1.7-4 ms to check whole at a million messages)."""
    best: list[tuple[int, float]] = []
    start, size = 0, 2 * limit
    while start < len(candidates) and len(best) < limit:
        part = candidates[start:start + size]
        allowed = _allowed(conn, [row_id for row_id, _ in part], where, args)
        best.extend((row_id, rank) for row_id, rank in part if row_id in allowed)
        start, size = start + size, size * 2
    return best[:limit]


def _allowed(conn: Connection, ids: list[int], where: list[str], args: list) -> set[int]:
    """The ids the filters allow. Only ids: the rows behind the best ``limit`` are read after
    (``_rows``), not the content of every candidate of a 1,000-long list."""
    sql = (f"SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id"
           f" WHERE m.id IN ({','.join('?' * len(ids))}) AND {' AND '.join(where)}")
    return {r[0] for r in conn.execute(sql, (*ids, *args))}


def _rows(conn: Connection, ids: list[int], where: list[str], args: list) -> dict[int, Row]:
    """The rows of ``ids``, the filters asked again: outside a read transaction a turn may have
    been hidden since ``_allowed`` looked."""
    if not ids:
        return {}
    sql = ("SELECT m.id, m.conversation_id, c.title, m.role, m.created_at, m.content"
           " FROM messages m JOIN conversations c ON c.id = m.conversation_id"
           f" WHERE m.id IN ({','.join('?' * len(ids))}) AND {' AND '.join(where)}")
    return {r["id"]: r for r in conn.execute(sql, (*ids, *args))}


def _hit(row: Row, score: float) -> KeywordHit:
    return KeywordHit(row["id"], row["conversation_id"], row["title"], row["role"], row["created_at"],
                      row["content"], score)


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
