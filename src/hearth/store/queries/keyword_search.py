"""Statements of the keyword search (S6, S9): FTS5 with BM25 on SQLite, the postings tables ranked
by BM25 on PostgreSQL (``retrieval/pgsearch.py`` says how), side by side.

On PostgreSQL each FTS5 index is a GIN expression index over ``hearth_words(column)`` with its
postings in ``<table>_postings``; a ranking there needs each word's IDF and the index's average
row length, which the caller's term statistics give (``Bm25``), asked only on that engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from hearth.store import Connection, Row, engine_of
from hearth.store.queries.conversations import ELIGIBLE_SQL, VISIBLE_SQL

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


# -- term statistics ---------------------------------------------------------------------------------
def _varint(blob: bytes) -> int:
    """SQLite's variable-length integer at the start of ``blob`` (big-endian, 7 bits a byte)."""
    value = 0
    for n, byte in enumerate(blob[:9]):
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    raise ValueError("truncated varint")


def indexed_rows(conn: Connection, fts: str) -> int:
    """Rows in a keyword index. FTS5: the first number of its totals record (row id 1 of
    ``<fts>_data``), which FTS5 keeps current on every write; a count of the docsize table if it
    cannot be read. PostgreSQL: the totals the index's triggers keep (``pg_totals``)."""
    if postings(conn):
        return pg_totals(conn, fts)[0]
    row = conn.execute(f"SELECT block FROM {fts}_data WHERE id = 1").fetchone()
    if row and row[0]:
        try:
            return _varint(bytes(row[0]))
        except ValueError:
            pass
    return int(conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()[0])


def pg_totals(conn: Connection, fts: str) -> tuple[int, int]:
    """(rows, total length) of a keyword index on PostgreSQL, from the totals its triggers keep.
    In a read snapshot every index's totals are read once (a send's assembly asked them about
    eight times, a round trip each)."""
    memo = conn.snapshot_memo
    totals = memo.get("keyword_totals") if memo is not None else None
    if totals is None:
        totals = {r[0]: (int(r[1]), int(r[2])) for r in conn.execute("SELECT name, rows, lengths FROM keyword_totals")}
        if memo is not None:
            memo["keyword_totals"] = totals
    return totals.get(fts, (0, 0))


def _stemming(conn: Connection, fts: str) -> bool:
    """Whether an FTS5 index stems its words (the porter tokenizer): its vocabulary then holds
    stems, so a word's frequency is read by matching it instead."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (fts,)).fetchone()
    return bool(row and "porter" in (row[0] or "").casefold())


def document_frequencies(conn: Connection, vocab: str, words: list[str]) -> dict[str, int]:
    """Each word's rows in a keyword index (``messages_fts_vocab``...), read from the index; ``stem*``
    counts the rows of every word it begins."""
    out: dict[str, int] = {}
    fts = vocab.removesuffix("_vocab")
    if postings(conn):
        return _pg_document_frequencies(conn, fts, words)
    stems = _stemming(conn, fts)
    for word in words:
        if stems:
            query = f'"{word[:-1]}"*' if word.endswith("*") else f'"{word}"'
            row = conn.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (query,)).fetchone()
        elif word.endswith("*"):
            # A stem stands for every indexed form that starts with it (an upper bound of its rows).
            prefix = word[:-1]
            row = conn.execute(f"SELECT sum(doc) FROM {vocab} WHERE term >= ? AND term < ?",
                               (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))).fetchone()
        else:
            row = conn.execute(f"SELECT doc FROM {vocab} WHERE term = ?", (word,)).fetchone()
        out[word] = (row[0] or 0) if row else 0
    return out


def _pg_document_frequencies(conn: Connection, fts: str, words: list[str]) -> dict[str, int]:
    """Each word's rows in a keyword index on PostgreSQL, all in one statement, counted on the
    index's postings (a key range each, read from the index alone): the rows holding the word, or
    for a stem (``talk*``) the rows holding any word it begins, as the GIN match would find them."""
    cores = [word.removesuffix("*") for word in words]
    asked = [i for i, core in enumerate(cores) if core]  # a bare "*" is no word
    out = dict.fromkeys(words, 0)
    if not asked:
        return out
    table = PG_INDEXES[fts][0]
    rows = conn.execute(
        f"SELECT u.n, (SELECT count(DISTINCT p.id) FROM {table}_postings p WHERE p.lexeme >= u.lo"
        " AND p.lexeme < u.lo || CASE WHEN u.prefix THEN chr(1114111) ELSE chr(1) END)"
        " FROM (SELECT x.n, hearth_fold(x.t) COLLATE \"C\" AS lo, x.prefix"
        " FROM unnest(?::text[], ?::boolean[]) WITH ORDINALITY AS x(t, prefix, n)) u",
        ([cores[i] for i in asked], [words[i].endswith("*") for i in asked])).fetchall()
    for n, count in rows:
        out[words[asked[int(n) - 1]]] = int(count)
    return out


_QUOTED = re.compile(r'"((?:[^"]|"")*)"(\*)?')


def words_of_match(match: str) -> list[str]:
    """The terms of an FTS5 expression Hearth builds (``"a" OR "b"*``), prefixes kept as ``b*``."""
    return [m.group(1).replace('""', '"') + (m.group(2) or "") for m in _QUOTED.finditer(match)]


# -- ranking -----------------------------------------------------------------------------------------
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


# -- chat messages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeywordHit:
    message_id: int
    conversation_id: int
    title: str
    role: str
    created_at: str
    content: str
    score: float  # BM25, lower is better in SQLite; negated here so higher is better


CANDIDATE_CAPS = (200, 5_000)
# With a conversation left out (the current thread, on the send path) the first list is longer, so
# that thread's own turns rarely crowd it: on the 1M deployment's recall cues the top 200 were
# often all the current thread's, and the second, excluding query ranked every match again, while
# every allowed match of those cues was within the top 1,000. A longer list costs about 1.4 ms
# more to rank and check there, so a search that leaves nothing out keeps the short one.
CROWDED_FIRST = 1_000


def messages(conn: Connection, user_id: int, match: str, limit: int, *,
             exclude_conversation_ids: tuple[int, ...], persona_id: int | None, eligible_only: bool,
             include_shielded: bool, conversation_id: int | None, bm25: Bm25,
             left_out: Callable[[], list[set[int]]]) -> list[KeywordHit]:
    """The best BM25 matches of the FTS5 expression ``match`` among the user's allowed chat turns.
    ``left_out`` gives the message ids of the excluded conversations (asked on SQLite only, before
    the first ranked list); ``bm25`` the ranking's parameters on PostgreSQL."""
    where = ["m.user_id = ?"]
    args: list = [match, user_id]
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
    if postings(conn):
        ranked = pg_ranked(conn, "messages_fts", "m", "m.id, m.conversation_id, c.title, m.role, m.created_at,"
                           " m.content", "JOIN conversations c ON c.id = m.conversation_id", where, filters,
                           words_of_match(match), limit, bm25=bm25, narrow=conversation_id is not None)
        return [KeywordHit(r[0], r[1], r[2], r[3], r[4], r[5], r.score) for r in ranked]
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
    skipped = left_out() if exclude_conversation_ids else []
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
        for ids in skipped:  # one plain pass per set: a thousand candidates, each a set lookup
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


def newest_message_id(conn: Connection, conversation_id: int) -> int:
    """The conversation's newest message id, 0 when it has none."""
    return conn.execute("SELECT max(id) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0] or 0


def message_ids_between(conn: Connection, conversation_id: int, after: int, upto: int) -> list[int]:
    """The conversation's message ids in (``after``, ``upto``]."""
    return [r[0] for r in conn.execute("SELECT id FROM messages WHERE conversation_id = ? AND id > ?"
                                       " AND id <= ?", (conversation_id, after, upto))]
