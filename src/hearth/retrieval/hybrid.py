"""Hybrid retrieval: keyword (FTS5 BM25) and vector results fused by reciprocal rank (A2).

One entry point, ``search()``, serves the automatic recall layers, the model's tools, the owner's
search and the benchmark, so what is measured is what the product does. It

1. builds the query from the message and, when given, recent context; makes deterministic offline
   variants (content keywords, named entities) so no model is needed (G3);
2. asks FTS5 (rare terms first, very common terms dropped by document frequency) and the vector
   index, per variant, over chat turns and/or archive chunks, inside the caller's visibility and
   date filters;
3. fuses every ranked list with reciprocal rank fusion, adds one pseudo-relevance feedback list
   (the query's words plus a few distinctive words of the best hits), keeps each signal's score and
   rank on every result, deduplicates, applies soft boosts (a named speaker, a date the query
   mentions, a time phrase for a "when" question), sorts;
4. writes the search log row (A3) and returns the results with a reliability judgement.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any, Iterable

from ..conversations import ELIGIBLE_SQL, VISIBLE_SQL
from . import searchlog
from .keyword import STOPWORDS, WORD_RE, search_messages, terms

RRF_K = 10  # small k: the top of each list counts (measured on LoCoMo, docs/recall.md)
NEIGHBOUR_WEIGHT = 0.4  # a turn next to a strong match shares some of its score
SESSION_WEIGHT = 0.6  # a turn in a conversation with several strong matches is lifted (up to x1.6)
SESSION_TOP = 3  # a conversation's strength: the sum of its best three fused scores
SPEAKER_BOOST = 1.5  # the query names exactly one speaker: that speaker's turns
VARIANT_WEIGHTS = {"query": 1.0, "with_context": 0.7, "keywords": 1.0, "entities": 0.5}
# Multiplies each list's variant weight; read at call time, like RRF_K (equal weights measured best).
SIGNAL_WEIGHTS = {"keyword": 1.0, "vector": 1.0}
# Pseudo-relevance feedback: the most distinctive words of the best two turns, asked with the
# query's words as one more FTS list. Few terms: five or more drift from the question (measured).
FEEDBACK_DOCS = 2  # 0 turns it off
FEEDBACK_TERMS = 3
FEEDBACK_WEIGHT = 0.5
TIME_BOOST = 1.5  # a "when" question: turns that mention a time ("last week", "in May") are lifted
CANDIDATES = 60  # per ranked list
MAX_QUERY_TERMS = 12
# A term in more than this share of indexed rows carries little signal and costs a long posting
# list scan; it is dropped once the index is large enough for the share to mean something.
COMMON_SHARE = 0.08
COMMON_MIN_ROWS = 2_000
POSTINGS_BUDGET = 20_000  # rows the chosen terms may match together (the rarest term always stays)

RECALL_CUES = (
    "remember", "recall", "last time", "what did we", "what did i", "what did you", "you said",
    "you told me", "i told you", "we talked", "we discussed", "did i tell you", "did i mention",
    "the other day", "back when", "that time", "remind me", "you mentioned", "we spoke",
    "have we ever", "did we ever", "when did", "how long ago",
)
_CUE_RE = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(c) for c in RECALL_CUES) + r")(?!\w)", re.IGNORECASE)
_ENTITY_RE = re.compile(r"(?<![\w'])([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)*)")
_NUMBER_RE = re.compile(r"\b\d[\d,.:/-]*\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*[\"'(]*$")

_WHEN_RE = re.compile(r"\b(?:when|how long ago|what (?:year|month|date|day|time))\b", re.IGNORECASE)
_TIME_RE = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|last|next|this (?:week|month|year|weekend|morning|summer)"
    r"|(?:19|20)\d{2}|january|february|march|april|may|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|week|month|year|summer|winter|spring)\b",
    re.IGNORECASE)

MONTHS = {m: i for i, m in enumerate(
    ("january february march april may june july august september october november december").split(), 1)}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})


def has_recall_cue(text: str) -> bool:
    return bool(_CUE_RE.search(text))


def entities(text: str, ignore: Iterable[str] = ()) -> list[str]:
    """Capitalised names not at the start of a sentence (and not the pronoun I), in order."""
    skip = {w.casefold() for w in ignore}
    found: dict[str, None] = {}
    for match in _ENTITY_RE.finditer(text):
        words = match.group(1).split()
        if _SENTENCE_START.search(text[:match.start()]):
            words = words[1:]  # a capital that only opens a sentence says nothing
        words = [w for w in words if w.casefold() not in STOPWORDS and w.casefold() not in skip and w != "I"]
        if words:
            found.setdefault(" ".join(words), None)
    return list(found)


# -- document frequency ---------------------------------------------------------------------------
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


_SUFFIXES = ("ations", "ation", "ions", "ion", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er", "ed",
             "es", "ly", "s")


def stem(word: str) -> str:
    """A light English suffix strip: 'painting', 'painted', 'paints' -> 'paint'."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            base = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                return base  # 'studies' -> 'stud' (prefix of study, studied, studies)
            if len(base) >= 2 and base[-1] == base[-2] and base[-1] not in "ls":
                base = base[:-1]  # 'running' -> 'run'... kept >= 4 by the length rule
            return base
    if word.endswith("e") and len(word) >= 6:
        return word[:-1]  # 'promote' -> 'promot', matching promotion, promoted
    return word


def match_terms(words: list[str]) -> list[str]:
    """Query words as FTS terms: a stripped stem of 4+ letters (or any 5+) becomes a prefix ('paint*').

    The index has no stemmer (its tokenizer is fixed by the schema), so the query reaches the
    other forms of a word through an FTS5 prefix term, which BM25 scores as one term.
    """
    out: dict[str, None] = {}
    for w in words:
        base = stem(w)
        out.setdefault(base + "*" if len(base) >= 5 or (base != w and len(base) >= 4) else w, None)
    return list(out)


def fts_match(words: list[str]) -> str:
    """An FTS5 MATCH expression of any of the terms; a trailing '*' is kept as a prefix query."""
    return " OR ".join(f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in words)


SOURCES = {"messages": ("messages_fts", "messages_fts_vocab"), "chunks": ("archive_chunks_fts", "archive_chunks_fts_vocab")}


def select_terms(conn: sqlite3.Connection, words: list[str], source: str = "messages",
                 max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """Rarest terms first, very common ones dropped, at most ``max_terms`` (K1 at scale)."""
    if not words:
        return []
    fts, vocab = SOURCES[source]
    total = indexed_rows(conn, fts)
    df = doc_frequencies(conn, vocab, words)
    kept = [w for w in words if df[w] > 0]
    if total >= COMMON_MIN_ROWS:
        kept = [w for w in kept if df[w] <= COMMON_SHARE * total]
    kept.sort(key=lambda w: df[w])
    # Rarest first while their postings stay within budget: a query's cost follows the postings it
    # reads, and at a million messages a few everyday words would each bring tens of thousands.
    chosen: list[str] = []
    postings = 0
    for word in kept[:max_terms]:
        if chosen and postings + df[word] > POSTINGS_BUDGET:
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


# -- dates ----------------------------------------------------------------------------------------
def date_hint(text: str) -> tuple[str, str] | None:
    """A date range the query names explicitly ("in May 2023", "2022", "on 8 May 2023"), as ISO dates."""
    low = text.casefold()
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", low)
    if m:
        d = m.group(0)
        return d, d
    m = re.search(r"\b(\d{1,2})\s+(" + "|".join(MONTHS) + r")\w*,?\s+(\d{4})\b", low)
    if m:
        try:
            d = date(int(m.group(3)), MONTHS[m.group(2)[:3]], int(m.group(1))).isoformat()
            return d, d
        except ValueError:
            pass
    m = re.search(r"\b(" + "|".join(MONTHS) + r")\w*\s+(\d{4})\b", low)
    if m:
        year, month = int(m.group(2)), MONTHS[m.group(1)[:3]]
        end = (date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1))
        return date(year, month, 1).isoformat(), end.isoformat()
    m = re.search(r"\b(?:in|during|from|of)\s+((?:19|20)\d{2})\b", low)
    if m:
        return f"{m.group(1)}-01-01", f"{m.group(1)}-12-31"
    return None


def display_date(stamp: str | None) -> str:
    """``2023-05-08 (Monday)`` from a stored timestamp; the weekday helps with relative dates."""
    if not stamp:
        return "undated"
    try:
        day = datetime.fromisoformat(stamp[:10])
    except ValueError:
        return stamp[:10]
    return f"{stamp[:10]} ({day.strftime('%A')})"


# -- requests and results ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    """Where a search may look. Visibility rules are applied in SQL for every signal."""

    sources: tuple[str, ...] = ("messages",)  # "messages" and/or "chunks"
    exclude_conversation_ids: tuple[int, ...] = ()
    conversation_id: int | None = None
    persona_id: int | None = None
    eligible_only: bool = True
    include_shielded: bool = False
    collections: tuple[str, ...] = ()
    date_from: str | None = None
    date_to: str | None = None

    def to_log(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, (), False) or k == "eligible_only"}


@dataclass
class Result:
    kind: str  # "message" | "chunk"
    id: int
    source_id: int  # conversation id or document id
    title: str
    date: str | None
    text: str
    speaker: str  # role of a chat turn, or the labels a chunk holds
    collection: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.id)

    def log_record(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "source_id": self.source_id, "title": self.title,
                "date": self.date, "text": self.text, "scores": self.scores}


@dataclass(frozen=True)
class Variant:
    name: str
    text: str
    words: tuple[str, ...]


@dataclass
class SearchOutcome:
    query: str
    variants: list[Variant]
    filters: Filters
    results: list[Result]
    candidates: int
    reliability: str
    log_id: int | None = None
    duration_ms: int = 0


def build_variants(query: str, context: str = "", *, ignore_names: Iterable[str] = ()) -> list[Variant]:
    """Deterministic offline query variants (G3): the message with its context, keywords, entities."""
    ignore = list(ignore_names)
    base = query.strip()
    variants = [Variant("query", base, tuple(terms(base, 48)))]
    if context.strip():
        joined = f"{base}\n{context.strip()}"
        variants.append(Variant("with_context", joined, tuple(terms(joined, 48))))
    keywords = terms(base, 24)
    if keywords and " ".join(keywords) != base.casefold():
        variants.append(Variant("keywords", " ".join(keywords), tuple(keywords)))
    names = entities(base, ignore)
    if names:
        words = tuple(terms(" ".join(names), 24))
        if words and set(words) != set(keywords):
            variants.append(Variant("entities", " ".join(names), words))
    return variants


# -- candidates -----------------------------------------------------------------------------------
def _message_filter_sql(user_id: int, f: Filters) -> tuple[list[str], list[Any]]:
    where, args = ["m.user_id = ?", "m.kind = 'chat'", "m.role IN ('user', 'assistant')"], [user_id]
    if f.conversation_id is not None:
        where.append("m.conversation_id = ?")
        args.append(f.conversation_id)
    if f.eligible_only:
        where.append(VISIBLE_SQL if f.include_shielded else ELIGIBLE_SQL)
    if f.exclude_conversation_ids:
        where.append(f"m.conversation_id NOT IN ({','.join('?' * len(f.exclude_conversation_ids))})")
        args.extend(f.exclude_conversation_ids)
    if f.persona_id is not None:
        where.append("c.persona_id = ?")
        args.append(f.persona_id)
    if f.date_from:
        where.append("m.created_at >= ?")
        args.append(f.date_from)
    if f.date_to:
        where.append("substr(m.created_at, 1, 10) <= ?")
        args.append(f.date_to[:10])
    return where, args


def _chunk_filter_sql(user_id: int, f: Filters) -> tuple[list[str], list[Any]]:
    where, args = ["k.user_id = ?"], [user_id]
    if f.collections:
        where.append(f"d.collection IN ({','.join('?' * len(f.collections))})")
        args.extend(f.collections)
    if f.date_from:
        where.append("coalesce(k.chunk_date, d.document_date) >= ?")
        args.append(f.date_from)
    if f.date_to:
        where.append("substr(coalesce(k.chunk_date, d.document_date), 1, 10) <= ?")
        args.append(f.date_to[:10])
    return where, args


def keyword_messages(conn: sqlite3.Connection, user_id: int, words: list[str], f: Filters,
                     limit: int = CANDIDATES) -> list[tuple[int, float]]:
    if f.date_from or f.date_to:
        where, args = _message_filter_sql(user_id, f)
        rows = conn.execute(
            "SELECT m.id, bm25(messages_fts) AS score FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f" JOIN conversations c ON c.id = m.conversation_id WHERE messages_fts MATCH ? AND {' AND '.join(where)}"
            " ORDER BY score LIMIT ?", (fts_match(words), *args, limit)).fetchall()
        return [(r[0], -r[1]) for r in rows]
    hits = search_messages(conn, user_id, words, limit=limit, exclude_conversation_ids=f.exclude_conversation_ids,
                           persona_id=f.persona_id, eligible_only=f.eligible_only,
                           include_shielded=f.include_shielded, conversation_id=f.conversation_id,
                           match=fts_match(words))
    return [(h.message_id, h.score) for h in hits]


def keyword_chunks(conn: sqlite3.Connection, user_id: int, words: list[str], f: Filters,
                   limit: int = CANDIDATES) -> list[tuple[int, float]]:
    if not words:
        return []
    where, args = _chunk_filter_sql(user_id, f)
    rows = conn.execute(
        "SELECT k.id, bm25(archive_chunks_fts) AS score FROM archive_chunks_fts"
        " JOIN archive_chunks k ON k.id = archive_chunks_fts.rowid JOIN archive_documents d ON d.id = k.document_id"
        f" WHERE archive_chunks_fts MATCH ? AND {' AND '.join(where)} ORDER BY score LIMIT ?",
        (fts_match(words), *args, limit)).fetchall()
    return [(r[0], -r[1]) for r in rows]


def _load_messages(conn: sqlite3.Connection, user_id: int, ids: list[int], f: Filters) -> dict[int, Result]:
    """The allowed subset of ``ids`` as results: vector hits pass the same SQL filters as keyword hits."""
    out: dict[int, Result] = {}
    where, args = _message_filter_sql(user_id, f)
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        rows = conn.execute(
            "SELECT m.id, m.conversation_id, m.role, m.content, m.created_at, m.metadata, c.title"
            " FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE m.id IN ({','.join('?' * len(part))}) AND {' AND '.join(where)}", (*part, *args)).fetchall()
        for r in rows:
            out[r["id"]] = Result("message", r["id"], r["conversation_id"], r["title"] or "Untitled conversation",
                                  r["created_at"], r["content"], r["role"], metadata=json.loads(r["metadata"]))
    return out


def _load_chunks(conn: sqlite3.Connection, user_id: int, ids: list[int], f: Filters) -> dict[int, Result]:
    out: dict[int, Result] = {}
    where, args = _chunk_filter_sql(user_id, f)
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        rows = conn.execute(
            "SELECT k.id, k.document_id, k.text, k.speakers, coalesce(k.chunk_date, d.document_date) AS day,"
            " d.title, d.collection FROM archive_chunks k JOIN archive_documents d ON d.id = k.document_id"
            f" WHERE k.id IN ({','.join('?' * len(part))}) AND {' AND '.join(where)}", (*part, *args)).fetchall()
        for r in rows:
            out[r["id"]] = Result("chunk", r["id"], r["document_id"], r["title"], r["day"], r["text"],
                                  r["speakers"], collection=r["collection"])
    return out


# -- fusion ---------------------------------------------------------------------------------------
def fuse(lists: dict[str, list[tuple[tuple[str, int], float]]], *, k: int | None = None,
         weights: dict[str, float] | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """Reciprocal rank fusion with a per-signal breakdown.

    ``k`` defaults to ``RRF_K`` read at call time (a default bound at definition would ignore a
    changed constant).

    ``lists`` maps a list name ("keyword:query", "vector:keywords", ...) to ranked (key, score).
    Each key gets, per signal (the part before the colon), its best rank and score, and the RRF sum.
    """
    k = RRF_K if k is None else k
    fused: dict[tuple[str, int], dict[str, Any]] = {}
    for name, ranked in lists.items():
        signal = name.split(":", 1)[0]
        weight = (weights or {}).get(name, (weights or {}).get(signal, 1.0))
        for rank, (key, score) in enumerate(ranked, start=1):
            entry = fused.setdefault(key, {"rrf": 0.0})
            entry["rrf"] += weight / (k + rank)
            best = entry.get(f"{signal}_rank")
            if best is None or rank < best:
                entry[f"{signal}_rank"] = rank
                entry[signal] = float(f"{score:.6g}")
            entry.setdefault("lists", []).append(name)
    return fused


def _neighbours(conn: sqlite3.Connection, fused: dict[tuple[str, int], dict[str, Any]]) -> dict[tuple[str, int], float]:
    """For each candidate chat turn, the best RRF score of the turn just before or after it.

    A short reply ("yes, in May!") is often the evidence for a match on the turn it answers; a
    candidate next to a strong match shares part of that match's score.
    """
    messages = [key[1] for key in fused if key[0] == "message"]
    if not messages:
        return {}
    # One statement for every candidate: the previous and next turn in its conversation.
    rows = conn.execute(
        "SELECT m.id,"
        " (SELECT p.id FROM messages p WHERE p.conversation_id = m.conversation_id AND p.id < m.id"
        "  AND p.kind = 'chat' AND p.role IN ('user', 'assistant') ORDER BY p.id DESC LIMIT 1),"
        " (SELECT n.id FROM messages n WHERE n.conversation_id = m.conversation_id AND n.id > m.id"
        "  AND n.kind = 'chat' AND n.role IN ('user', 'assistant') ORDER BY n.id LIMIT 1)"
        f" FROM messages m WHERE m.id IN ({','.join('?' * len(messages))})",
        messages,
    ).fetchall()
    out: dict[tuple[str, int], float] = {}
    for message_id, before, after in rows:
        near = [fused[("message", n)]["rrf"] for n in (before, after) if n is not None and ("message", n) in fused]
        out[("message", message_id)] = max(near, default=0.0)
    return out


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` with the given names (and their possessive 's) taken out."""
    names = [n for n in names if n.strip()]
    if not names:
        return text
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                         + r")(?:['’]s)?(?!\w)", re.IGNORECASE)
    return " ".join(pattern.sub(" ", text).split())


def _feedback_list(conn: sqlite3.Connection, user_id: int, f: Filters, fused: dict[tuple[str, int], dict[str, Any]],
                   query_words: list[str], name_words: set[str]) -> list[tuple[tuple[str, int], float]]:
    """Pseudo-relevance feedback (RM3-like, bounded): one more FTS list, the query's words plus the
    most distinctive words of the best few chat turns, each weighted by its hit's score and rarity.
    """
    if not query_words:
        return []
    ranked = sorted((k for k in fused if k[0] == "message"), key=lambda k: -fused[k]["rrf"])[:FEEDBACK_DOCS * 10]
    # Vector hits are filtered after the index answers: only turns the caller may see give words.
    allowed = _load_messages(conn, user_id, [k[1] for k in ranked], f)
    top = [k for k in ranked if k[1] in allowed][:FEEDBACK_DOCS]
    text = {k[1]: allowed[k[1]].text for k in top}
    asked = set(query_words)
    weight_of: dict[str, float] = {}
    for key in top:
        for term in match_terms([w for w in terms(text.get(key[1], ""), 48) if w not in name_words and not w.isdigit()]):
            if term not in asked:
                weight_of[term] = weight_of.get(term, 0.0) + fused[key]["rrf"]
    if not weight_of:
        return []
    total = max(indexed_rows(conn, "messages_fts"), 1)
    df = doc_frequencies(conn, "messages_fts_vocab", list(weight_of))
    # Words in one row only re-find the hit itself; common words drift the query.
    common = COMMON_SHARE * total if total >= COMMON_MIN_ROWS else total
    usable = {w: v * math.log(total / df[w]) for w, v in weight_of.items() if 2 <= df[w] <= common}
    extra = sorted(usable, key=lambda w: -usable[w])[:FEEDBACK_TERMS]
    if not extra:
        return []
    hits = keyword_messages(conn, user_id, [*query_words, *extra], f)
    return [(("message", i), s) for i, s in hits]


def _session_lift(results: list[Result]) -> None:
    """Lift turns of conversations (or documents) holding several strong matches.

    Evidence tends to cluster: a conversation where three turns match is a better place to look
    than one stray hit. Each result's fused score is multiplied by 1 + SESSION_WEIGHT times its
    source's strength (sum of its best SESSION_TOP fused scores) relative to the strongest source.
    """
    per_source: dict[tuple[str, int], list[float]] = {}
    for r in results:
        per_source.setdefault((r.kind, r.source_id), []).append(r.scores["fused"])
    strength = {k: sum(sorted(v, reverse=True)[:SESSION_TOP]) for k, v in per_source.items()}
    best = max(strength.values(), default=0.0)
    if best <= 0:
        return
    for r in results:
        share = strength[(r.kind, r.source_id)] / best
        r.scores["session"] = round(share, 4)
        r.scores["fused"] = round(r.scores["fused"] * (1 + SESSION_WEIGHT * share), 6)


def search(
    conn: sqlite3.Connection,
    user_id: int,
    query: str,
    *,
    context: str = "",
    filters: Filters = Filters(),
    limit: int = 10,
    embedder: Any = None,
    db_key: str = "",
    origin: str = "owner",
    store: Any = None,
    conversation_id: int | None = None,
    speaker_names: dict[str, str] | None = None,
    ignore_names: Iterable[str] = (),
    log: bool = True,
) -> SearchOutcome:
    """Search one user's chat turns and/or archive chunks; see the module docstring.

    ``embedder`` None means keyword only (the vector signal is simply absent from the breakdown).
    ``speaker_names`` maps a name to the role that speaks under it ({"Elion": "assistant"}): a query
    that names a speaker lifts that speaker's turns. ``store`` is needed to write the log row.
    """
    started = time.monotonic()
    variants = build_variants(query, context, ignore_names=ignore_names)
    lists: dict[str, list[tuple[tuple[str, int], float]]] = {}
    weights: dict[str, float] = {}
    # Speaker names go to the speaker lift, not to FTS: as words they match every greeting
    # addressed to that person ("Hey Caroline!") rather than what the person said.
    name_words: set[str] = set()
    for name in (*ignore_names, *(speaker_names or {})):
        name_words.update(terms(name))
    query_words: list[str] = []
    for source in filters.sources:
        kind = "message" if source == "messages" else "chunk"
        asked: set[tuple[str, ...]] = set()
        for variant in variants:
            vw = match_terms([w for w in variant.words if w not in name_words])
            words = select_terms(conn, vw, source)
            if not words or tuple(sorted(words)) in asked:
                continue  # the same words asked twice would only count twice
            asked.add(tuple(sorted(words)))
            if variant.name == "query" and source == "messages":
                query_words = words
            hits = (keyword_messages if source == "messages" else keyword_chunks)(conn, user_id, words, filters)
            if hits:
                name = f"keyword:{variant.name}:{source}"
                lists[name] = [((kind, i), s) for i, s in hits]
                weights[name] = VARIANT_WEIGHTS.get(variant.name, 1.0) * SIGNAL_WEIGHTS["keyword"]
    if embedder is not None:
        from .semantic import embed_queries, vector_search

        # Meaning is in the sentence: keyword-only and name-only variants go to FTS, not to vectors.
        texts = [v.text for v in variants if v.name in ("query", "with_context")]
        if speaker_names and texts:
            # The turns are embedded with their speaker's label; a name in the query pulls toward
            # every turn that mentions or addresses that person. The lift below handles the speaker.
            texts[0] = without_names(texts[0], speaker_names) or texts[0]
        names = [v.name for v in variants if v.name in ("query", "with_context")]
        vectors = embed_queries(embedder, texts)
        for source in filters.sources:
            kind = "message" if source == "messages" else "chunk"
            # Oversample: visibility filters are applied after the index answers.
            per_query = vector_search(conn, db_key, source, user_id, embedder, vectors, CANDIDATES * 4)
            for name, hits in zip(names, per_query):
                if hits:
                    lists[f"vector:{name}:{source}"] = [((kind, i), s) for i, s in hits]
                    weights[f"vector:{name}:{source}"] = VARIANT_WEIGHTS.get(name, 1.0) * SIGNAL_WEIGHTS["vector"]

    fused = fuse(lists, k=RRF_K, weights=weights)
    if FEEDBACK_DOCS > 0:
        extra = _feedback_list(conn, user_id, filters, fused, query_words, name_words)
        if extra:
            lists["keyword:feedback:messages"] = extra
            weights["keyword:feedback:messages"] = FEEDBACK_WEIGHT
            fused = fuse(lists, k=RRF_K, weights=weights)
    neighbour_scores = _neighbours(conn, fused)
    message_ids = [key[1] for key in fused if key[0] == "message"]
    chunk_ids = [key[1] for key in fused if key[0] == "chunk"]
    loaded: dict[tuple[str, int], Result] = {}
    for i, r in _load_messages(conn, user_id, message_ids, filters).items():
        loaded[("message", i)] = r
    for i, r in _load_chunks(conn, user_id, chunk_ids, filters).items():
        loaded[("chunk", i)] = r

    hint = date_hint(query)
    named_roles = {role for name, role in (speaker_names or {}).items()
                   if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE)}
    asks_when = TIME_BOOST != 1.0 and bool(_WHEN_RE.search(query))
    results: list[Result] = []
    seen_text: set[str] = set()
    for key, entry in fused.items():
        result = loaded.get(key)
        if result is None:
            continue
        fingerprint = " ".join(result.text.casefold().split())[:400]
        if fingerprint in seen_text:
            continue  # the same words stored twice (a re-pasted message, a duplicated chunk)
        seen_text.add(fingerprint)
        boost = 1.0
        if hint and result.date and hint[0] <= result.date[:10] <= hint[1]:
            boost *= 1.3
        if len(named_roles) == 1 and result.kind == "message" and result.speaker in named_roles:
            boost *= SPEAKER_BOOST
        if asks_when and _TIME_RE.search(result.text):
            boost *= TIME_BOOST
        scores = {k: v for k, v in entry.items() if k != "lists"}
        scores["signals"] = sorted({name.split(":", 1)[0] for name in entry["lists"]})
        scores["boost"] = round(boost, 3)
        scores["neighbour"] = round(neighbour_scores.get(key, 0.0), 6)
        scores["rrf"] = round(entry["rrf"], 6)
        scores["fused"] = round((entry["rrf"] + NEIGHBOUR_WEIGHT * scores["neighbour"]) * boost, 6)
        result.scores = scores
        results.append(result)
    _session_lift(results)
    results.sort(key=lambda r: (-r.scores["fused"], r.date or "", r.id))
    candidates = len(results)
    results = results[:limit]

    top = results[:5]
    agreement = (sum(1 for r in top if len(r.scores["signals"]) > 1) / len(top)) if top else 0.0
    if embedder is None:
        agreement = None  # one signal cannot agree with another; judge by the score gap alone
    judgement = searchlog.reliability([r.scores["fused"] for r in results], agreement)
    duration = int((time.monotonic() - started) * 1000)
    outcome = SearchOutcome(query, variants, filters, results, candidates, judgement, None, duration)
    if log and store is not None:
        log_filters = filters.to_log()
        if hint:
            log_filters["date_hint"] = list(hint)
        outcome.log_id = searchlog.write(
            store, user_id=user_id, origin=origin, query=query, results=results,
            variants=[f"{v.name}: {v.text}" for v in variants[1:]], filters=log_filters,
            candidate_count=candidates, judgement=judgement, conversation_id=conversation_id,
            duration_ms=duration)
    return outcome


def context_block(results: list[Result], *, max_chars: int = 6_000, excerpt_chars: int = 700) -> str:
    """Results as dated, cited lines for the model, grouped by source, oldest first within one."""
    groups: dict[tuple[str, int], list[Result]] = {}
    for r in results:
        groups.setdefault((r.kind, r.source_id), []).append(r)
    parts: list[str] = []
    used = 0
    for (kind, _), items in groups.items():
        items.sort(key=lambda r: (r.date or "", r.id))
        head_kind = "conversation" if kind == "message" else "document"
        head = f'From {head_kind} "{items[0].title}"' + (f" [{items[0].collection}]" if items[0].collection else "")
        lines = [head + ":"]
        for r in items:
            text = " ".join(r.text.split())
            if len(text) > excerpt_chars:
                text = text[:excerpt_chars] + "…"
            who = f"{r.speaker}: " if r.kind == "message" else ""
            lines.append(f"- [{display_date(r.date)}] {who}{text}")
        piece = "\n".join(lines)
        if used + len(piece) > max_chars and parts:
            break
        parts.append(piece)
        used += len(piece)
    return "\n\n".join(parts)


def with_filters(filters: Filters, **changes: Any) -> Filters:
    return replace(filters, **changes)


__all__ = ["Filters", "Result", "SearchOutcome", "Variant", "build_variants", "context_block", "date_hint",
           "entities", "fts_match", "fuse", "has_recall_cue", "match_terms", "rare_terms", "search", "select_terms",
           "stem", "without_names", "WORD_RE"]
