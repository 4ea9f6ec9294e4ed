"""The knobs of the hybrid search, as one object passed in (A2).

Every constant that was measured on LoCoMo (docs/recall.md) lives here, so a benchmark or a caller
can try another setting without touching module state, and the send path and the owner's search
can differ only where they are meant to (``SEND_PATH`` drops the pseudo-relevance feedback list,
which costs a second round of keyword queries).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


def _variant_weights() -> dict[str, float]:
    return {"query": 1.0, "with_context": 0.7, "keywords": 1.0, "entities": 0.5}


def _signal_weights() -> dict[str, float]:
    # Multiplies each list's variant weight (equal weights measured best).
    return {"keyword": 1.0, "vector": 1.0}


@dataclass(frozen=True)
class Tuning:
    rrf_k: int = 10  # small k: the top of each list counts (measured on LoCoMo, docs/recall.md)
    neighbour_weight: float = 0.4  # a turn next to a strong match shares some of its score
    session_weight: float = 0.6  # a turn in a conversation with several strong matches is lifted (up to x1.6)
    session_top: int = 3  # a conversation's strength: the sum of its best three fused scores
    speaker_boost: float = 1.5  # the query names exactly one speaker: that speaker's turns
    date_boost: float = 1.3  # a result inside the date range the query names
    time_boost: float = 1.5  # a "when" question: turns that mention a time ("last week", "in May") are lifted
    # A chat turn's score is multiplied by 1 - penalty x the share of its sentences that are
    # questions: evidence sits in statements and answers, while a question shares the words of the
    # question asked now ("Did you go to the lake?"). 0.5 was chosen by every LoCoMo fold (recall.md).
    question_penalty: float = 0.5
    variant_weights: dict[str, float] = field(default_factory=_variant_weights)
    signal_weights: dict[str, float] = field(default_factory=_signal_weights)
    # Pseudo-relevance feedback: the most distinctive words of the best two turns, asked with the
    # query's words as one more FTS list. Few terms: five or more drift from the question (measured).
    feedback_docs: int = 2  # 0 turns it off
    feedback_terms: int = 3
    feedback_weight: float = 0.5
    # Candidate words whose document frequency the feedback list reads, longest first (a long word
    # is usually a rare one); 0 reads every word of the best turns. Each read walks the word's
    # postings, and most words of fresh turns are new to the term cache: 20-70 reads a send at 1M.
    feedback_candidates: int = 0
    candidates: int = 60  # per ranked list
    max_query_terms: int = 12
    # A term in more than this share of indexed rows carries little signal and costs a long posting
    # list scan; it is dropped once the index is large enough for the share to mean something.
    common_share: float = 0.08
    common_min_rows: int = 2_000
    postings_budget: int = 20_000  # rows the chosen terms may match together
    # Whether the rarest term stays when it alone matches more rows than the budget. Off on the send
    # path: ranking a word in 42,000 of a million turns costs 70 ms there, and a word that common
    # names no topic (the vector list still runs).
    rarest_over_budget: bool = True
    # Rows loaded behind the fused candidates, best first, in slices of this many until enough pass
    # the filters; 0 loads every candidate (hundreds, where a reply needs six).
    load_limit: int = 0
    # Word forms: the query's words as prefix terms of a light stem ("paint*"), for an index that
    # does not stem; off for an index whose tokenizer stems (FTS5 porter).
    stem_prefixes: bool = True
    # One keyword query per source over the words of all variants together, instead of one per
    # variant: one pass over each index.
    keyword_one_pass: bool = False
    # The recent context's words join the keyword query. Off on the send path: there the context
    # reaches the search through the stored vectors of its turns, and its thirty-odd words, new to
    # the term cache on most sends, made the keyword pass ten times the cost of the message's own.
    keyword_context: bool = True
    # The sentence variants embedded for the vector lists, in order of preference; variants the
    # query does not have are skipped, and the plain query stands in when none is left.
    vector_variants: tuple[str, ...] = ("query", "with_context")
    # Characters of recent context embedded with the message (the newest end of it): the cost of
    # an embedding grows with its length, and the last words carry most of the thread's topic.
    vector_context_chars: int = 10_000
    # The recent context as the stored vectors of its turns (already embedded by the background
    # job) mixed into the message's own vector at this weight, instead of embedding the message
    # with its context: the model then embeds only the message on the send path. 0 embeds the text.
    context_vector_weight: float = 0.0

    # A query that names a date ("in April 2022", "on 1 May 2022"): one more vector list, exact,
    # over the turns dated inside that range or up to ``dated_days_after`` days later (told of as
    # "last night"), at this weight; 0 turns it off. The lift for a result inside the range only
    # reorders what the other lists found, and the turn a dated question wants often shares no
    # word with it and ranks below the 240 vectors the index returns (LoCoMo, docs/recall.md).
    # A range holding at most ``dated_rows`` turns is compared turn by turn; a larger one is a
    # filtered search of the vector index, asking it for at most ``dated_fetch`` nearest (S17: its
    # cost follows the answer and the range's share, not the turns the range holds).
    dated_weight: float = 1.0
    dated_days_after: int = 3
    dated_rows: int = 1_000
    dated_fetch: int = 1_024
    # Ahead of the send, a large range's filtered search runs before the turns' own top-k search
    # of the same query vector, which then takes its nearest from the wider answer (one walk of
    # the graph instead of two; False: the two searches in turn, each walking it).
    dated_shared_search: bool = True

    # Facts written at ingestion (E2): the facts' keyword list and vector list join the fusion as
    # the lists of the turns they cite, at these weights; 0 leaves a list out. ``fact_origins``
    # limits the writers whose facts are asked ("offline", "model", "import"; every one when empty).
    # Measured on LoCoMo with the data set's statements as the facts (docs/recall.md, "Reranker and
    # facts"): the keyword list helps little and at 0.5 cost recall; the vector list carries the gain.
    fact_keyword_weight: float = 0.25
    fact_vector_weight: float = 1.0
    fact_origins: tuple[str, ...] = ()
    # A fact's vector hit counts only when it is at least as close to the query as the turn at this
    # rank of the turns' own vector list (0: every hit counts). Without it a small fact index (the
    # offline helper writes a few facts a conversation) answers every query with all its facts,
    # which cost the offline default 0.005-0.01 of R@10 on LoCoMo.
    fact_floor_rank: int = 10

    def with_changes(self, **changes: Any) -> "Tuning":
        return replace(self, **changes)


DEFAULT = Tuning()
# Automatic recall on the send path: one query embedding (the message alone; its recent context
# joins as the stored vectors of those turns), one keyword query per index over the message's own
# words (keyword recall asks the same one, so the two share it), postings bounded at 5,000 rows
# (the ranking reads every matching row: at a million messages a 20,000-row budget cost an
# everyday message twice the CPU; a message whose rarest word alone is over it asks no keyword
# query), and the feedback list only when the latency budget allows it
# (``Budget`` in hybrid.py).
SEND_PATH = DEFAULT.with_changes(vector_variants=("with_context",), vector_context_chars=300, keyword_one_pass=True,
                                 load_limit=100, context_vector_weight=0.5, keyword_context=False,
                                 postings_budget=5_000, rarest_over_budget=False, feedback_candidates=24)
