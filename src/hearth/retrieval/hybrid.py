"""Hybrid retrieval: keyword (FTS5 BM25) and vector results fused by reciprocal rank (A2).

One entry point, ``search()``, serves the automatic recall layers, the model's tools, the owner's
search and the benchmark, so what is measured is what the product does. Its parts:

1. query analysis (``query``): the message and, when given, recent context as deterministic
   offline variants (content keywords, named entities), so no model is needed (G3);
2. candidates (``candidates``, ``terms``): FTS5 (rare terms first, very common terms dropped by
   document frequency) and the vector index, per variant, over chat turns and/or archive chunks,
   inside the caller's visibility and date filters;
3. fusion (``fusion``): reciprocal rank fusion of every list, one pseudo-relevance feedback list
   (the query's words plus a few distinctive words of the best hits), each signal's score and rank
   kept on every result, duplicates dropped, soft boosts (a named speaker, a date the query
   mentions, a time phrase for a "when" question), sorted;
4. the search log row (A3) and the results with a reliability judgement.

Every measured constant is on a ``Tuning`` object passed in (``tuning.DEFAULT`` by default).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from hearth.store import Connection

from . import searchlog
from .candidates import (
    Filters,
    Result,
    fact_keyword_list,
    keyword_chunks,
    keyword_lists,
    keyword_messages,
    load_chunks,
    load_messages,
    vector_lists,
)
from .fusion import add_list, feedback_list, fuse, named_roles, neighbours, score
from .keyword import WORD_RE, terms
from .query import (
    Variant,
    asks_when,
    build_variants,
    date_hint,
    display_date,
    entities,
    fts_match,
    has_recall_cue,
    match_terms,
    stem,
    without_names,
)
from .terms import doc_frequencies, rare_terms, select_terms
from .tuning import DEFAULT, SEND_PATH, Tuning


class Budget:
    """The milliseconds one send's recall may take at the p99, counted from when the send's layers
    began. The required steps (keyword and vector lists, fusion) always run; an optional step (the
    feedback list) is for a send that is going fast: it runs only while the send, with the step's
    expected cost (learned from its last runs), would still end within MEDIAN_SHARE of the budget
    (15 of the default 40 ms, the median goal the p99 budget stands for), and only while that cost
    is at most OPTIONAL_SHARE of what the send has spent so far, so optional work never makes a
    send much slower than its required work (a send within twice its floor stays near it). The
    rest of the budget is the margin for the steps after it and for the slow tail. A step left out
    PROBE_EVERY times in a row runs once, so one slow measurement (a cold cache) is not its cost
    for ever; each probe that finds it still too slow doubles the wait for the next (up to
    PROBE_MAX), since a probe is a slower send."""

    ALPHA = 0.2  # weight of the newest measurement in a step's expected cost
    MEDIAN_SHARE = 0.375
    OPTIONAL_SHARE = 0.5
    PROBE_EVERY = 20
    PROBE_MAX = 1_000
    _expected: dict[str, float] = {}  # step -> expected milliseconds, shared by every search
    _skipped: dict[str, int] = {}  # step -> times left out since it last ran
    _interval: dict[str, int] = {}  # step -> times it is left out before the next probe
    _lock = threading.Lock()

    def __init__(self, ms: float | None, started: float | None = None):
        self.ms = ms
        self.started = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return (time.monotonic() - self.started) * 1000

    def allows(self, step: str) -> bool:
        if self.ms is None:
            return True
        with self._lock:
            elapsed, expected = self.elapsed(), self._expected.get(step, 0.0)
            if elapsed + expected <= self.ms * self.MEDIAN_SHARE and expected <= self.OPTIONAL_SHARE * elapsed:
                self._interval[step] = self.PROBE_EVERY
                return True
            interval = self._interval.get(step, self.PROBE_EVERY)
            skipped = self._skipped.get(step, 0) + 1
            probe = skipped > interval
            self._skipped[step] = 0 if probe else skipped
            if probe:
                self._interval[step] = min(2 * interval, self.PROBE_MAX)
            return probe

    def expected(self, step: str) -> float:
        return self._expected.get(step, 0.0)

    def record(self, step: str, ms: float) -> None:
        with self._lock:
            old = self._expected.get(step)
            self._expected[step] = ms if old is None else (1 - self.ALPHA) * old + self.ALPHA * ms
            self._skipped[step] = 0


def feedback_step(conn: Connection, query_words: list[str]) -> str:
    """The budget's name for the feedback list of this query. Its cost is mostly the rows its
    terms match (its ranking reads every one), and the query's own words are most of those, so the
    cost is learned per order of magnitude of their rows: a cue of rare words (well under a
    millisecond at a million messages) no longer teaches the budget that a question of common
    words (several milliseconds) is cheap. Their frequencies are already cached by then."""
    rows = sum(doc_frequencies(conn, "messages_fts_vocab", query_words).values())
    return f"feedback:{rows.bit_length()}"


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
    skipped: tuple[str, ...] = ()  # optional steps the latency budget left out
    # Which vector search answered each source: "ann", "exact" or "exact_fallback" (S18).
    vector_index: dict[str, str] = field(default_factory=dict)


def search(
    conn: Connection,
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
    tuning: Tuning = DEFAULT,
    budget_ms: float | None = None,
    context_ids: tuple[int, ...] = (),
    memo: dict | None = None,
    budget_started: float | None = None,
) -> SearchOutcome:
    """Search one user's chat turns and/or archive chunks; see the module docstring.

    ``embedder`` None means keyword only (the vector signal is simply absent from the breakdown).
    ``speaker_names`` maps a name to the role that speaks under it ({"Elion": "assistant"}): a query
    that names a speaker lifts that speaker's turns. ``store`` is needed to write the log row.
    ``tuning`` holds every measured constant; ``budget_ms`` bounds the optional steps (``Budget``),
    counted from ``budget_started`` (the send's start; by default the search's).
    ``context_ids`` are the turns ``context`` came from: with ``tuning.context_vector_weight`` their
    stored vectors stand for the context in the vector query. ``memo`` is the send's shared store
    (``Turn.memo``): a keyword list another layer already asked is read from it.
    """
    started = time.monotonic()
    budget = Budget(budget_ms, started if budget_started is None else budget_started)
    skipped: list[str] = []
    vector_modes: dict[str, str] = {}
    variants = build_variants(query, context, ignore_names=ignore_names)
    # Speaker names go to the speaker lift, not to FTS: as words they match every greeting
    # addressed to that person ("Hey Caroline!") rather than what the person said.
    name_words: set[str] = set()
    for name in (*ignore_names, *(speaker_names or {})):
        name_words.update(terms(name))
    lists, weights, query_words = keyword_lists(conn, user_id, variants, filters, name_words, tuning, memo)
    more_lists, more_weights = fact_keyword_list(conn, user_id, variants, filters, name_words, tuning, memo)
    lists.update(more_lists)
    weights.update(more_weights)
    hint = date_hint(query)
    if embedder is not None:
        more, more_weights = vector_lists(conn, user_id, variants, filters, embedder, db_key, speaker_names, tuning,
                                          context_ids, hint, memo, vector_modes)
        lists.update(more)
        weights.update(more_weights)

    fused = fuse(lists, tuning=tuning, weights=weights)
    feedback = feedback_step(conn, query_words) if tuning.feedback_docs > 0 and query_words else ""
    if feedback and not budget.allows(feedback):
        skipped.append("feedback")
    elif tuning.feedback_docs > 0:
        step = time.monotonic()
        extra = feedback_list(conn, user_id, filters, fused, query_words, name_words, tuning)
        if extra:
            # Only a run that asked its query is its cost: one that found no word to add (a date
            # question's common words) returns at once, and would teach the budget that the list
            # is cheap for the next recall cue.
            budget.record(feedback, (time.monotonic() - step) * 1000)
            add_list(fused, "keyword:feedback:messages", extra, tuning.feedback_weight, tuning)
    # The rows behind the candidates, best fused first in slices of ``load_limit`` until twice
    # ``limit`` pass the filters (every candidate at once when there is no limit).
    keys = list(fused)
    size = tuning.load_limit or len(keys)
    if tuning.load_limit:
        keys.sort(key=lambda key: -fused[key]["rrf"])
    loaded: dict[tuple[str, int], Result] = {}
    for start in range(0, len(keys), max(size, 1)):
        if start and len(loaded) >= 2 * limit:
            break
        part = keys[start:start + size]
        for i, r in load_messages(conn, user_id, [key[1] for key in part if key[0] == "message"], filters).items():
            loaded[("message", i)] = r
        for i, r in load_chunks(conn, user_id, [key[1] for key in part if key[0] == "chunk"], filters).items():
            loaded[("chunk", i)] = r
    neighbour_scores = neighbours(conn, fused, loaded)  # only loaded candidates are scored

    results, candidates = score(fused, loaded, neighbour_scores, hint=hint,
                                named_roles=named_roles(query, speaker_names),
                                asks_when=tuning.time_boost != 1.0 and asks_when(query), tuning=tuning,
                                limit=limit)

    top = results[:5]
    # One signal cannot agree with another: without an embedder, judge by the score gap alone.
    agreement: float | None = None
    if embedder is not None:
        agreement = (sum(1 for r in top if len(r.scores["signals"]) > 1) / len(top)) if top else 0.0
    judgement = searchlog.reliability([r.scores["fused"] for r in results], agreement)
    duration = int((time.monotonic() - started) * 1000)
    outcome = SearchOutcome(query, variants, filters, results, candidates, judgement, None, duration, tuple(skipped),
                            vector_modes)
    if log and store is not None:
        log_filters = filters.to_log()
        if hint:
            log_filters["date_hint"] = list(hint)
        if vector_modes:
            log_filters["vector_index"] = dict(vector_modes)
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


# The names callers and tests import from here, whichever part now defines them.
__all__ = ["Budget", "DEFAULT", "SEND_PATH", "Filters", "Result", "SearchOutcome", "Tuning", "Variant", "WORD_RE", "build_variants", "feedback_step",
           "context_block", "date_hint", "display_date", "entities", "fts_match", "fuse", "has_recall_cue",
           "keyword_chunks", "keyword_messages", "load_chunks", "load_messages", "match_terms", "rare_terms",
           "search", "select_terms", "stem", "with_filters", "without_names"]
