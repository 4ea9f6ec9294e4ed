"""Fusion for the hybrid search (A2): ranked lists into one scored, deduplicated result list.

Reciprocal rank fusion keeps each signal's best rank and score on every result; then a few soft,
measured adjustments: a turn next to a strong match shares part of its score, a named speaker's
turns, a date the query names and a time phrase for a "when" question are lifted, a turn made of
questions is lowered (the answer is what is wanted), and turns of a
conversation holding several strong matches are lifted together.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

from hearth.store import Connection
from hearth.store.queries import search_neighbours

from .candidates import Filters, Ranked, Result, keyword_messages, load_messages
from .keyword import terms
from .query import match_terms, mentions_time
from .terms import doc_frequencies, indexed_rows
from .tuning import DEFAULT, Tuning

Fused = dict[tuple[str, int], dict[str, Any]]


def fuse(lists: dict[str, Ranked], *, tuning: Tuning = DEFAULT, weights: dict[str, float] | None = None) -> Fused:
    """Reciprocal rank fusion with a per-signal breakdown.

    ``lists`` maps a list name ("keyword:query:messages", "vector:query:chunks", ...) to ranked
    (key, score). Each key gets, per signal (the part before the colon), its best rank and score,
    and the RRF sum with ``tuning.rrf_k``.
    """
    fused: Fused = {}
    for name, ranked in lists.items():
        signal = name.split(":", 1)[0]
        add_list(fused, name, ranked, (weights or {}).get(name, (weights or {}).get(signal, 1.0)), tuning)
    return fused


def add_list(fused: Fused, name: str, ranked: Ranked, weight: float, tuning: Tuning = DEFAULT) -> None:
    """Fold one more ranked list into ``fused``: the same as fusing every list again with it last
    (the feedback list joins after the first fusion this way, without a second pass over all)."""
    k = tuning.rrf_k
    signal = name.split(":", 1)[0]
    rank_key = f"{signal}_rank"
    for rank, (key, score) in enumerate(ranked, start=1):
        entry = fused.get(key)
        if entry is None:
            # The score is rounded for the breakdown once a result is kept (``score``).
            fused[key] = {"rrf": weight / (k + rank), rank_key: rank, signal: score}
            continue
        entry["rrf"] += weight / (k + rank)
        best = entry.get(rank_key)
        if best is None or rank < best:
            entry[rank_key] = rank
            entry[signal] = score


def neighbours(conn: Connection, fused: Fused, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], float]:
    """For each chat turn of ``keys`` (the candidates being scored), the best RRF score of the
    turn just before or after it among the fused candidates.

    A short reply ("yes, in May!") is often the evidence for a match on the turn it answers; a
    candidate next to a strong match shares part of that match's score.
    """
    # Two index walks for each scored turn: at a million messages this is about a quarter of the
    # time of first reading the conversation of every candidate (hundreds of them) to walk only
    # the turns that share one (docs/benchmarks-history.md, seventh pass).
    messages = [key[1] for key in keys if key[0] == "message"]
    if not messages:
        return {}
    out: dict[tuple[str, int], float] = {}
    for message_id, before, after in search_neighbours.adjacent_turns(conn, messages):
        near = [fused[("message", n)]["rrf"] for n in (before, after) if n is not None and ("message", n) in fused]
        out[("message", message_id)] = max(near, default=0.0)
    return out


def feedback_list(conn: Connection, user_id: int, f: Filters, fused: Fused, query_words: list[str],
                  name_words: set[str], tuning: Tuning = DEFAULT) -> Ranked:
    """Pseudo-relevance feedback (RM3-like, bounded): one more FTS list, the query's words plus the
    most distinctive words of the best few chat turns, each weighted by its hit's score and rarity.
    """
    if not query_words or tuning.feedback_docs <= 0:
        return []
    ranked = sorted((k for k in fused if k[0] == "message"), key=lambda k: -fused[k]["rrf"])[:tuning.feedback_docs * 10]
    # Vector hits are filtered after the index answers: only turns the caller may see give words.
    allowed = load_messages(conn, user_id, [k[1] for k in ranked], f)
    top = [k for k in ranked if k[1] in allowed][:tuning.feedback_docs]
    text = {k[1]: allowed[k[1]].text for k in top}
    asked = set(query_words)
    weight_of: dict[str, float] = {}
    for key in top:
        words = [w for w in terms(text.get(key[1], ""), 48) if w not in name_words and not w.isdigit()]
        for term in match_terms(words, tuning.stem_prefixes):
            if term not in asked:
                weight_of[term] = weight_of.get(term, 0.0) + fused[key]["rrf"]
    if not weight_of:
        return []
    if tuning.feedback_candidates:
        # The best-weighted words, the longest first among equals.
        best = sorted(weight_of, key=lambda w: (-weight_of[w], -len(w)))[:tuning.feedback_candidates]
        weight_of = {w: weight_of[w] for w in best}
    total = max(indexed_rows(conn, "messages_fts"), 1)
    df = doc_frequencies(conn, "messages_fts_vocab", [*query_words, *weight_of])
    # Words in one row only re-find the hit itself; common words drift the query.
    common = tuning.common_share * total if total >= tuning.common_min_rows else total
    usable = {w: v * math.log(total / df[w]) for w, v in weight_of.items() if 2 <= df[w] <= common}
    # The added words stay within the postings budget the query's own words left (the ranking
    # reads every row a term matches).
    postings = sum(df[w] for w in query_words)
    extra: list[str] = []
    for word in sorted(usable, key=lambda w: -usable[w]):
        if len(extra) == tuning.feedback_terms:
            break
        if postings + df[word] <= tuning.postings_budget:
            extra.append(word)
            postings += df[word]
    if not extra:
        return []
    hits = keyword_messages(conn, user_id, [*query_words, *extra], f, tuning.candidates)
    return [(("message", i), s) for i, s in hits]


def session_lift(results: list[Result], tuning: Tuning = DEFAULT) -> None:
    """Lift turns of conversations (or documents) holding several strong matches.

    Evidence tends to cluster: a conversation where three turns match is a better place to look
    than one stray hit. Each result's fused score is multiplied by 1 + session_weight times its
    source's strength (sum of its best session_top fused scores) relative to the strongest source.
    """
    per_source: dict[tuple[str, int], list[float]] = {}
    for r in results:
        per_source.setdefault((r.kind, r.source_id), []).append(r.scores["fused"])
    strength = {k: sum(sorted(v, reverse=True)[:tuning.session_top]) for k, v in per_source.items()}
    best = max(strength.values(), default=0.0)
    if best <= 0:
        return
    for r in results:
        share = strength[(r.kind, r.source_id)] / best
        r.scores["session"] = round(share, 4)
        r.scores["fused"] = round(r.scores["fused"] * (1 + tuning.session_weight * share), 6)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def question_share(text: str) -> float:
    """The share of a text's sentences that are questions (0 at once for a text without "?")."""
    if "?" not in text:
        return 0.0
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if any(c.isalnum() for c in s)]
    if not sentences:
        return 0.0
    return sum(1 for s in sentences if s.rstrip().endswith("?")) / len(sentences)


# A fingerprint reads at most this much of a text: its first 400 characters once whitespace is
# collapsed, without case-folding and splitting the whole of a long chunk.
FINGERPRINT_READ = 2_000


def score(fused: Fused, loaded: dict[tuple[str, int], Result], neighbour_scores: dict[tuple[str, int], float], *,
          hint: tuple[str, str] | None, named_roles: set[str], asks_when: bool,
          tuning: Tuning = DEFAULT, limit: int | None = None) -> tuple[list[Result], int]:
    """Fused entries as scored results, best first, a repeat of the same words dropped: (the best
    ``limit`` of them, how many were scored). Every candidate gets its fused score; only the ones
    returned are checked for repeats and get the whole breakdown (hundreds are scored where a
    reply keeps six)."""
    results: list[Result] = []
    for key, entry in fused.items():
        result = loaded.get(key)
        if result is None:
            continue
        boost = 1.0
        if hint and result.date and hint[0] <= result.date[:10] <= hint[1]:
            boost *= tuning.date_boost
        if len(named_roles) == 1 and result.kind == "message" and result.speaker in named_roles:
            boost *= tuning.speaker_boost
        if asks_when and mentions_time(result.text):
            boost *= tuning.time_boost
        if tuning.question_penalty and result.kind == "message":
            # A turn that only asks is rarely what a question about the past wants: the answer is.
            boost *= 1 - tuning.question_penalty * question_share(result.text)
        neighbour = round(neighbour_scores.get(key, 0.0), 6)
        result.scores = {"boost": round(boost, 3), "neighbour": neighbour,
                         "fused": round((entry["rrf"] + tuning.neighbour_weight * neighbour) * boost, 6)}
        results.append(result)
    session_lift(results, tuning)
    results.sort(key=lambda r: (-r.scores["fused"], r.date or "", r.id))
    kept: list[Result] = []
    seen_text: set[str] = set()
    for result in results:  # best first: the better-scored copy of a repeat is the one kept
        if limit is not None and len(kept) == limit:
            break
        fingerprint = " ".join(result.text[:FINGERPRINT_READ].casefold().split())[:400]
        if fingerprint not in seen_text:  # the same words stored twice (a re-pasted message, a copied chunk)
            seen_text.add(fingerprint)
            kept.append(result)
    for result in kept:
        entry = fused[result.key]
        scores = {k: (float(f"{v:.6g}") if k in ("keyword", "vector") else v) for k, v in entry.items()}
        # A signal that found the result left its best rank ("keyword_rank", "vector_rank").
        scores["signals"] = sorted(k[:-5] for k in entry if k.endswith("_rank"))
        scores["rrf"] = round(entry["rrf"], 6)
        scores.update(result.scores)
        result.scores = scores
    return kept, len(results)


def named_roles(query: str, speaker_names: dict[str, str] | None) -> set[str]:
    return {role for name, role in (speaker_names or {}).items()
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE)}
