"""Candidates for the hybrid search (A2): ranked keyword and vector lists, and the rows behind them.

Visibility rules (V2) are applied in SQL for every signal: keyword lists are filtered as FTS5
answers, vector hits (filtered after the index answers) pass the same conditions when loaded.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from hearth.records.conversations import ELIGIBLE_SQL, VISIBLE_SQL

from ..store import Connection, engine_of
from ..store.queries import candidates as stored
from ..store.queries import facts as stored_facts
from ..store.queries import vectors as stored_vectors
from ..text import unit_rows
from .keyword import KeywordHit, search_messages
from .query import date_hint, fts_match, match_terms, without_names
from .terms import select_terms
from .tuning import DEFAULT, Tuning

if TYPE_CHECKING:
    import numpy as np  # imported where vectors are read: a keyword-only search needs none (S20)

Ranked = list[tuple[tuple[str, int], float]]
# A searchable chat turn; written as the partial index over turns by time (migration 19) states it,
# so the database can answer a date range from that index (PostgreSQL's also needs a time bound).
CHAT_TURN_SQL = "m.kind = 'chat' AND m.role IN ('user', 'assistant')"


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
    scores: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.id)

    def log_record(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "source_id": self.source_id, "title": self.title,
                "date": self.date, "text": self.text, "scores": self.scores}



def message_filter_sql(user_id: int, f: Filters) -> tuple[list[str], list[Any]]:
    # "+": the user's term must never make the index of turns by time (user_id, created_at) look
    # selective; these filters sit beside id lookups and FTS matches, which are narrower.
    where = ["+m.user_id = ?", CHAT_TURN_SQL]
    args: list[Any] = [user_id]
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


def chunk_filter_sql(user_id: int, f: Filters) -> tuple[list[str], list[Any]]:
    where = ["k.user_id = ?"]
    args: list[Any] = [user_id]
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


def keyword_messages(conn: Connection, user_id: int, words: list[str], f: Filters,
                     limit: int = DEFAULT.candidates, memo: dict | None = None) -> list[tuple[int, float]]:
    if (f.date_from or f.date_to) and engine_of(conn).keyword_index == "tsvector":
        from . import pgsearch

        where, args = message_filter_sql(user_id, f)
        rows = pgsearch.ranked(conn, "messages_fts", "m", "m.id", "JOIN conversations c ON c.id = m.conversation_id",
                               where, args, words, limit, narrow=True)
        return [(r[0], r["score"]) for r in rows]
    if f.date_from or f.date_to:
        where, args = message_filter_sql(user_id, f)
        return [(i, -score) for i, score in stored.keyword_messages(conn, fts_match(words), where, args, limit)]
    hits = shared_keyword_hits(conn, user_id, words, f, limit, memo)
    return [(h.message_id, h.score) for h in hits]


def shared_keyword_hits(conn: Connection, user_id: int, words: list[str], f: Filters, limit: int,
                        memo: dict | None = None) -> list[KeywordHit]:
    """The best BM25 matches for ``words`` inside ``f`` (no date filters), asked once per send.

    ``memo`` is the send's shared store (``Turn.memo``): keyword recall and archive recall ask the
    same words inside the same filters on a recall cue, and the second finds the first's list
    instead of a second pass over the messages index."""
    key = ("keyword_hits", user_id, tuple(words), f.exclude_conversation_ids, f.conversation_id, f.persona_id,
           f.eligible_only, f.include_shielded, limit)
    if memo is not None and key in memo:
        return list(memo[key])
    hits = search_messages(conn, user_id, words, limit=limit, exclude_conversation_ids=f.exclude_conversation_ids,
                           persona_id=f.persona_id, eligible_only=f.eligible_only,
                           include_shielded=f.include_shielded, conversation_id=f.conversation_id,
                           match=fts_match(words))
    if memo is not None:
        memo[key] = tuple(hits)
    return hits


def keyword_chunks(conn: Connection, user_id: int, words: list[str], f: Filters,
                   limit: int = DEFAULT.candidates) -> list[tuple[int, float]]:
    if not words:
        return []
    where, args = chunk_filter_sql(user_id, f)
    if engine_of(conn).keyword_index == "tsvector":
        from . import pgsearch

        rows = pgsearch.ranked(conn, "archive_chunks_fts", "k", "k.id",
                               "JOIN archive_documents d ON d.id = k.document_id", where, args, words, limit,
                               narrow=bool(f.collections or f.date_from or f.date_to))
        return [(r[0], r["score"]) for r in rows]
    return [(i, -score) for i, score in stored.keyword_chunks(conn, fts_match(words), where, args, limit)]


def load_messages(conn: Connection, user_id: int, ids: list[int], f: Filters) -> dict[int, Result]:
    """The allowed subset of ``ids`` as results: vector hits pass the same SQL filters as keyword hits."""
    where, args = message_filter_sql(user_id, f)
    return {i: Result("message", i, conversation_id, title or "Untitled conversation", created_at, content, role)
            for i, conversation_id, role, content, created_at, title in stored.messages(conn, ids, where, args)}


def load_chunks(conn: Connection, user_id: int, ids: list[int], f: Filters) -> dict[int, Result]:
    where, args = chunk_filter_sql(user_id, f)
    return {i: Result("chunk", i, document_id, title, day, text, speakers, collection=collection)
            for i, document_id, text, speakers, day, title, collection in stored.chunks(conn, ids, where, args)}



def keyword_lists(conn: Connection, user_id: int, variants: list, filters: Filters, name_words: set[str],
                  tuning: Tuning = DEFAULT, memo: dict | None = None) -> tuple[dict[str, Ranked], dict[str, float], list[str]]:
    """One FTS list per source and distinct set of chosen terms: (lists, their weights, the query's terms).

    Variants whose chosen terms are the same are asked once: the same words asked twice would only
    count twice.
    """
    lists: dict[str, Ranked] = {}
    weights: dict[str, float] = {}
    query_words: list[str] = []
    if not tuning.keyword_context:
        variants = [v for v in variants if v.name != "with_context"]
    if tuning.keyword_one_pass:
        return _one_pass(conn, user_id, variants, filters, name_words, tuning, memo)
    for source in filters.sources:
        kind = "message" if source == "messages" else "chunk"
        asked: set[tuple[str, ...]] = set()
        for variant in variants:
            vw = match_terms([w for w in variant.words if w not in name_words], tuning.stem_prefixes)
            words = select_terms(conn, vw, source, tuning=tuning)
            if not words or tuple(sorted(words)) in asked:
                continue
            asked.add(tuple(sorted(words)))
            if variant.name == "query" and source == "messages":
                query_words = words
            search_source = keyword_messages if source == "messages" else keyword_chunks
            hits = search_source(conn, user_id, words, filters, tuning.candidates)
            if hits:
                name = f"keyword:{variant.name}:{source}"
                lists[name] = [((kind, i), s) for i, s in hits]
                weights[name] = tuning.variant_weights.get(variant.name, 1.0) * tuning.signal_weights["keyword"]
    return lists, weights, query_words


def one_pass_terms(variants: list, name_words: set[str], tuning: Tuning) -> list[str]:
    """The FTS terms of every variant together, the message's first, speaker names left out."""
    words_in_order: dict[str, None] = {}
    for variant in variants:
        if variant.name == "with_context" and not tuning.keyword_context:
            continue
        for term in match_terms([w for w in variant.words if w not in name_words], tuning.stem_prefixes):
            words_in_order.setdefault(term, None)
    return list(words_in_order)


def _one_pass(conn: Connection, user_id: int, variants: list, filters: Filters, name_words: set[str],
              tuning: Tuning, memo: dict | None = None) -> tuple[dict[str, Ranked], dict[str, float], list[str]]:
    """One FTS query per source over the words of every variant together (the message's first):
    the terms are chosen once, rarest first within the postings budget, and BM25 ranks them."""
    words_in_order = one_pass_terms(variants, name_words, tuning)
    asked_query = set(match_terms([w for w in variants[0].words if w not in name_words], tuning.stem_prefixes))
    lists: dict[str, Ranked] = {}
    weights: dict[str, float] = {}
    query_words: list[str] = []
    for source in filters.sources:
        kind = "message" if source == "messages" else "chunk"
        words = select_terms(conn, list(words_in_order), source, tuning=tuning)
        if not words:
            continue
        if source == "messages":
            query_words = [w for w in words if w in asked_query]
        if source == "messages":
            hits = keyword_messages(conn, user_id, words, filters, tuning.candidates, memo)
        else:
            hits = keyword_chunks(conn, user_id, words, filters, tuning.candidates)
        if hits:
            name = f"keyword:all:{source}"
            lists[name] = [((kind, i), s) for i, s in hits]
            weights[name] = tuning.signal_weights["keyword"]
    return lists, weights, query_words


def has_facts(conn: Connection, user_id: int, memo: dict | None = None) -> bool:
    """Whether this user has any fact (E2): one indexed lookup, kept for the send in ``memo``."""
    key = ("has_facts", user_id)
    if memo is not None and key in memo:
        return bool(memo[key])
    found = stored_facts.any_for_user(conn, user_id)
    if memo is not None:
        memo[key] = found
    return found


def fact_keyword_list(conn: Connection, user_id: int, variants: list, filters: Filters, name_words: set[str],
                      tuning: Tuning = DEFAULT, memo: dict | None = None) -> tuple[dict[str, Ranked], dict[str, float]]:
    """The facts' keyword list (E2) as the turns they cite: the words the turns' one-pass query
    asks, chosen again against the facts' own index."""
    if tuning.fact_keyword_weight <= 0 or "messages" not in filters.sources or not has_facts(conn, user_id, memo):
        return {}, {}
    from . import facts

    words = select_terms(conn, one_pass_terms(variants, name_words, tuning), "facts", tuning=tuning)
    hits = facts.keyword_hits(conn, user_id, words, tuning.candidates, tuning.fact_origins)
    turns = facts.as_turns(conn, hits, tuning.candidates)
    if not turns:
        return {}, {}
    name = "keyword:facts:messages"
    return {name: turns}, {name: tuning.fact_keyword_weight * tuning.signal_weights["keyword"]}


def has_vectors(conn: Connection, user_id: int, model: str, sources: tuple[str, ...],
                memo: dict | None = None) -> bool:
    """Whether the user has a vector of ``model`` in any of ``sources`` (facts go with messages):
    one read of the counts the triggers keep (migration 6)."""
    wanted = sorted({*sources, *(("facts",) if "messages" in sources else ())})
    key = ("has_vectors", user_id, model, tuple(wanted))
    if memo is not None and key in memo:
        return memo[key]
    found = stored_vectors.any_of(conn, user_id, model, wanted)
    if memo is not None:
        memo[key] = found
    return found


def vector_lists(conn: Connection, user_id: int, variants: list, filters: Filters, embedder: Any,
                 db_key: str, speaker_names: dict[str, str] | None,
                 tuning: Tuning = DEFAULT, context_ids: tuple[int, ...] = (),
                 dated: tuple[str, str] | None = None,
                 memo: dict | None = None,
                 modes: dict[str, str] | None = None) -> tuple[dict[str, Ranked], dict[str, float]]:
    """One vector list per source and sentence variant (the message, the message with context),
    and with ``dated`` (the date range the query names) one exact list over the turns of that range.

    With ``tuning.context_vector_weight`` and ``context_ids`` (the recent turns the context came
    from), the message with context is the message's own vector mixed with those turns' stored
    vectors: one short text reaches the model.
    ``modes`` receives which search answered each source (``semantic.vector_search``)."""
    from .embedder import model_id

    lists: dict[str, Ranked] = {}
    weights: dict[str, float] = {}
    if not has_vectors(conn, user_id, model_id(embedder), filters.sources, memo):
        # Nothing to compare with: the query is not embedded, the model not loaded (S20).
        return lists, weights
    from .semantic import database_index, embed_queries, mix_context, taken_ahead, vector_search
    # Meaning is in the sentence: keyword-only and name-only variants go to FTS, not to vectors.
    chosen = [v for v in variants if v.name in tuning.vector_variants] or variants[:1]
    mixed = tuning.context_vector_weight > 0 and any(v.name == "with_context" for v in chosen)
    if mixed:
        chosen = [variants[0]]
    texts = [_vector_text(v, variants[0], tuning) for v in chosen]
    if texts:
        texts[0] = query_vector_text(texts[0], speaker_names)
    names = [v.name for v in chosen]
    vectors = embed_queries(embedder, texts)
    if mixed and context_ids:
        context = stored_context_vector(conn, user_id, embedder, context_ids, int(vectors.shape[1]), memo)
        if context is not None:
            vectors = vectors.copy()
            vectors[0] = mix_context(vectors[0], context, tuning.context_vector_weight)
            names = ["with_context"]
    wants_range = bool(dated) and tuning.dated_weight > 0 and "messages" in filters.sources

    def range_list() -> list[tuple[int, float]]:
        assert dated is not None
        hits = taken_ahead(_dated_key(db_key, user_id, filters, dated, embedder, tuning), vectors[0])
        return hits if hits is not None else dated_vector_hits(conn, db_key, user_id, filters, dated, embedder,
                                                               vectors[0], tuning)

    # In this process's index the range's list goes first: a large range is a wide filtered search
    # of the turns' graph, and the turns' own top-k search of the same vector then takes its
    # nearest from that answer (``VectorIndex.search_span``) instead of walking the graph again.
    # The database's list runs beside the other searches and is collected last, as before.
    in_range = range_list() if wants_range and not database_index(conn) else None
    for source in filters.sources:
        kind = "message" if source == "messages" else "chunk"
        per_query = vector_search(conn, db_key, source, user_id, embedder, vectors, vector_width(tuning), modes)
        for name, hits in zip(names, per_query):
            if hits:
                lists[f"vector:{name}:{source}"] = [((kind, i), s) for i, s in hits]
                weights[f"vector:{name}:{source}"] = (tuning.variant_weights.get(name, 1.0)
                                                      * tuning.signal_weights["vector"])
    if tuning.fact_vector_weight > 0 and "messages" in filters.sources and has_facts(conn, user_id, memo):
        from . import facts

        [hits] = vector_search(conn, db_key, "facts", user_id, embedder, vectors[:1], vector_width(tuning), modes)
        turn_hits = lists.get(f"vector:{names[0]}:messages", [])
        if tuning.fact_floor_rank and len(turn_hits) >= tuning.fact_floor_rank:
            # A fact counts only if it is as close to the query as the turn at that rank: a small
            # fact index otherwise answers every query with all its facts, close or not.
            floor = turn_hits[tuning.fact_floor_rank - 1][1]
            hits = [h for h in hits if h[1] >= floor]
        turns = facts.as_turns(conn, facts.of_origins(conn, hits, tuning.fact_origins), tuning.candidates)
        if turns:
            lists["vector:facts:messages"] = turns
            weights["vector:facts:messages"] = tuning.fact_vector_weight * tuning.signal_weights["vector"]
    if wants_range and in_range is None:
        in_range = range_list()
    if in_range:
        lists["vector:dated:messages"] = [(("message", i), s) for i, s in in_range]
        weights["vector:dated:messages"] = tuning.dated_weight * tuning.signal_weights["vector"]
    return lists, weights


def dated_vector_hits(conn: Connection, db_key: str, user_id: int, filters: Filters, dated: tuple[str, str],
                      embedder: Any, vector: Any, tuning: Tuning,
                      trace: dict[str, Any] | None = None) -> list[tuple[int, float]]:
    """The turns dated inside the named range, or up to ``tuning.dated_days_after`` days after it
    (a turn tells of a day as "last night" or "last Friday"), nearest to the query first (S17).

    A range of at most ``tuning.dated_rows`` turns (counted first on the index of turns by time,
    so counting costs at most that many index entries) is compared turn by turn, exactly. A larger
    one is a filtered search of the vector index: its work is bounded by ``tuning.dated_fetch``
    nearest asked of the index, not by the turns the range holds (a month of a million messages
    holds about 27,000). ``trace`` (when given) gets the path taken, the turns counted (up to
    ``dated_rows`` + 1) and the vectors compared."""
    from .semantic import exact_message_search

    end = (date.fromisoformat(dated[1]) + timedelta(days=tuning.dated_days_after + 1)).isoformat()
    # Here, and only here, the range is the narrow part: the plain user term lets it use that index.
    span = f"m.user_id = ? AND {CHAT_TURN_SQL} AND m.created_at >= ? AND m.created_at < ?"
    bounds = (user_id, dated[0], end)
    count = stored.turns_in_span(conn, span, bounds, tuning.dated_rows + 1)
    if trace is not None:
        trace.update(turns=count, path="none", compared=0)
    if not count:
        return []
    where, args = message_filter_sql(user_id, filters)
    ids_sql = ("SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id"
               f" WHERE {' AND '.join([span, *where[2:]])}")
    if count <= tuning.dated_rows:
        if trace is not None:
            trace.update(path="exact", compared=count)
        return exact_message_search(conn, db_key, user_id, ids_sql, (*bounds, *args[1:]), embedder, vector,
                                    tuning.candidates)
    return _dated_filtered(conn, db_key, user_id, span, bounds, where, args, ids_sql, embedder, vector, tuning,
                           trace)


def _dated_filtered(conn: Connection, db_key: str, user_id: int, span: str, bounds: tuple, where: list[str],
                    args: list[Any], ids_sql: str, embedder: Any, vector: Any, tuning: Tuning,
                    trace: dict[str, Any] | None) -> list[tuple[int, float]]:
    """A large range as a filtered search of the index. On PostgreSQL the HNSW index's own, with
    the range in the statement. In this process's index: within one user turns are saved in time
    order, so the range's turns lie between the ids of its first and last turn by time (index
    seeks); the index keeps its nearest inside those ids, and they are then checked against the
    range's dates and the search's filters in SQL (an import of older chats gives later ids to
    older turns: a hit between the ids but outside the dates is dropped, never shown)."""
    from .semantic import INDEXES, database_index, model_id

    model = model_id(embedder)
    k = tuning.candidates
    counts: dict[str, int] = {}
    if database_index(conn):
        from . import pgvectors

        hits = pgvectors.dated_messages(conn, user_id, " AND ".join([span, *where[2:]]), (*bounds, *args[1:]), model,
                                        vector, k)
        counts["compared"] = -1  # the database's own count, not visible from here
    else:
        index = INDEXES.get(conn, db_key, "messages", user_id, model, int(vector.shape[0]), wait=False)
        if index is None or len(index) == 0:
            return []
        turn = f"m.user_id = ? AND {CHAT_TURN_SQL}"
        first, last, before, after = stored.span_edges(conn, span, turn, bounds, user_id)
        if first is None or last is None:
            return []
        lo, hi = min(first, last), max(first, last)
        # Out to the turns just before and after the range, when their ids lie outside it: a turn
        # saved a little out of order (a reply stamped before the question) still falls inside.
        if before is not None and before < lo:
            lo = before + 1
        if after is not None and after > hi:
            hi = after - 1
        # Enough nearest that about eight times ``k`` of them fall inside the ids, going by the
        # ids' share of the index (the checks below drop some), and at most ``dated_fetch``.
        share = min(1.0, (hi - lo + 1) / len(index))
        fetch = min(tuning.dated_fetch, max(4 * k, math.ceil(8 * k / share)))
        # Every hit inside the ids is checked, not only the first ``k``: where older turns were
        # saved later (an import), those between the ids may crowd the nearest.
        found = index.search_span(vector, fetch, lo, hi, fetch, counts)
        hits = _in_range(conn, bounds, where, args, found)[:k]
    if trace is not None:
        trace.update(path="filtered", compared=counts.get("compared", 0))
    return hits


def _in_range(conn: Connection, bounds: tuple, where: list[str], args: list[Any],
              hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``hits`` that are chat turns of the range (``bounds``: user, first day, end) passing the
    search's filters, in order: read by primary key ("+": never the index of turns by time)."""
    if not hits:
        return []
    ids = [i for i, _ in hits]
    kept = stored.in_range(conn, ids, CHAT_TURN_SQL, bounds, where[2:], args[1:])
    return [h for h in hits if h[0] in kept]


def query_vector_text(text: str, speaker_names: dict[str, str] | None) -> str:
    """The text embedded for the message. The turns are embedded with their speaker's label; a
    name in the query pulls toward every turn that mentions or addresses that person, so speaker
    names are taken out (the speaker lift handles the speaker)."""
    text = text.strip()
    return (without_names(text, speaker_names) or text) if speaker_names else text


def vector_width(tuning: Tuning) -> int:
    """Hits asked of each index: oversampled, since visibility filters apply after it answers."""
    return tuning.candidates * 4


def vectors_ahead(conn: Connection, user_id: int, query: str, filters: Filters, embedder: Any,
                  db_key: str, speaker_names: dict[str, str] | None, tuning: Tuning,
                  context_ids: tuple[int, ...] = (), memo: dict | None = None, store: Any = None) -> None:
    """Start the index searches ``vector_lists`` will ask for ``query`` (``semantic.search_ahead``,
    on its own connection to ``store`` when the database holds the index), with the same text,
    context and width, before the layers ahead of the search run."""
    from .semantic import database_index, run_ahead, search_ahead

    context = None
    if tuning.context_vector_weight > 0 and "with_context" in tuning.vector_variants and context_ids:
        context = stored_context_vector(conn, user_id, embedder, context_ids, int(embedder.dim), memo)
    text = query_vector_text(query, speaker_names)
    dated = date_hint(query)
    # The dated list too, where the database compares the vectors, on a thread of its own beside
    # the index searches: behind them the search waited for it (a median 4.2 ms of a date
    # question's send). On SQLite, when the turns' index is a graph, on the prefetch thread: a
    # large range is a graph search, which releases the interpreter lock (an exact index stays in
    # the search: scoring a range's rows mostly holds it). There it goes first: the turns' own
    # top-k search of the same vector, queued behind it, then takes its nearest from the range's
    # wider answer instead of walking the graph again (``VectorIndex.search_span``).
    dated_after: functools.partial | None = None
    if dated and tuning.dated_weight > 0 and "messages" in filters.sources and store is not None:
        on_database = database_index(conn)
        if on_database or _graph_loaded(conn, db_key, user_id, embedder):
            dated_after = functools.partial(
                run_ahead, _dated_key(db_key, user_id, filters, dated, embedder, tuning), embedder, text, context,
                tuning.context_vector_weight,
                functools.partial(_dated_on, store, user_id, filters, dated, embedder, tuning), beside=on_database)
            if not on_database and tuning.dated_shared_search:
                dated_after()
                dated_after = None
    search_ahead(conn, db_key, filters.sources, user_id, embedder, text, vector_width(tuning), context,
                 tuning.context_vector_weight, store)
    if dated_after is not None:
        dated_after()


def _graph_loaded(conn: Connection, db_key: str, user_id: int, embedder: Any) -> bool:
    from .semantic import INDEXES, model_id

    index = INDEXES.loaded_for_ahead(conn, db_key, "messages", user_id, model_id(embedder), int(embedder.dim))
    return index is not None and index.mode == "ann"


def _dated_key(db_key: str, user_id: int, filters: Filters, dated: tuple[str, str], embedder: Any,
               tuning: Tuning) -> tuple:
    from .semantic import model_id

    return (db_key, "dated", user_id, model_id(embedder), filters, dated, tuning.candidates, tuning.dated_rows,
            tuning.dated_days_after, tuning.dated_fetch)


def _dated_on(store: Any, user_id: int, filters: Filters, dated: tuple[str, str], embedder: Any, tuning: Tuning,
              vector: np.ndarray) -> list[tuple[int, float]]:
    return dated_vector_hits(store.connection(), store.key, user_id, filters, dated, embedder, vector, tuning)


def stored_context_vector(conn: Connection, user_id: int, embedder: Any, message_ids: tuple[int, ...],
                          dim: int, memo: dict | None = None) -> Any:
    """The unit mean of the stored vectors of ``message_ids`` (the turns embedded so far), or None;
    read once per send with ``memo``."""
    from .semantic import model_id
    from .vectors import from_blob

    key = ("context_vector", user_id, model_id(embedder), message_ids, dim)
    if memo is not None and key in memo:
        return memo[key]
    found = [from_blob(blob) for blob in stored_vectors.message_blobs(conn, user_id, model_id(embedder), message_ids)]
    found = [v for v in found if v.shape[0] == dim]
    import numpy as np

    context = unit_rows(np.mean(found, axis=0)[None, :])[0] if found else None
    if memo is not None:
        memo[key] = context
    return context


def _vector_text(variant: Any, query: Any, tuning: Tuning) -> str:
    """The text embedded for a sentence variant: the message with context keeps only the newest
    ``vector_context_chars`` of that context."""
    if variant.name != "with_context" or len(variant.text) - len(query.text) <= tuning.vector_context_chars:
        return str(variant.text)
    context = variant.text[len(query.text):].strip()
    return f"{query.text}\n{context[-tuning.vector_context_chars:]}"
