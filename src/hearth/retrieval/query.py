"""Query analysis for the hybrid search (A2): recall cues, names, dates, word forms, variants.

Everything here works on the query text alone (no database, no model), so it is deterministic and
offline (G3): the variants a search asks, the FTS terms of a word (a light stem as a prefix term),
and the date range or time question a query carries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Iterable

from hearth.text import phrase_pattern

from .keyword import STOPWORDS, terms

RECALL_CUES = (
    "remember", "recall", "last time", "what did we", "what did i", "what did you", "you said",
    "you told me", "i told you", "we talked", "we discussed", "did i tell you", "did i mention",
    "the other day", "back when", "that time", "remind me", "you mentioned", "we spoke",
    "have we ever", "did we ever", "when did", "how long ago",
)
_CUE_RE = phrase_pattern(RECALL_CUES)
_ENTITY_RE = re.compile(r"(?<![\w'])([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)*)")
_OPENERS = "\"'("

WHEN_RE = re.compile(r"\b(?:when|how long ago|what (?:year|month|date|day|time))\b", re.IGNORECASE)
# "Remember when we ..." recalls a moment; it does not ask for its time.
_REMEMBERED_MOMENT = re.compile(r"\b(?:remember|recall|back) when (?=(?:we|i|you|he|she|they)\b)", re.IGNORECASE)
TIME_RE = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|last|next|this (?:week|month|year|weekend|morning|summer)"
    r"|(?:19|20)\d{2}|january|february|march|april|may|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|week|month|year|summer|winter|spring)\b")


def asks_when(query: str) -> bool:
    """Whether a query asks for a time ("When did ...", "how long ago", "what year")."""
    return WHEN_RE.search(_REMEMBERED_MOMENT.sub(" ", query)) is not None


def mentions_time(text: str) -> bool:
    """Whether a text holds a time phrase ("last week", "in May", "2023"). The pattern is asked of
    the case-folded text: ignoring case inside it made each of a search's hundred candidates cost
    three times as much."""
    return TIME_RE.search(text.casefold()) is not None


MONTHS = {m: i for i, m in enumerate(
    ("january february march april may june july august september october november december").split(), 1)}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})


def has_recall_cue(text: str) -> bool:
    return bool(_CUE_RE.search(text))


def _opens_sentence(text: str, at: int) -> bool:
    """Whether ``text[at]`` begins a sentence: only quotes or brackets and white space, after the
    start of the text, a line break, or a sentence's end and a space. Read backwards from ``at``
    (a pattern searched over ``text[:at]`` for each name read the whole text again each time: U5)."""
    i = at
    while i > 0 and text[i - 1] in _OPENERS:
        i -= 1
    gap = i
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i == 0 or "\n" in text[i:gap] or (gap > i and text[i - 1] in ".!?")


def entities(text: str, ignore: Iterable[str] = ()) -> list[str]:
    """Capitalised names not at the start of a sentence (and not the pronoun I), in order."""
    skip = {w.casefold() for w in ignore}
    found: dict[str, None] = {}
    for match in _ENTITY_RE.finditer(text):
        words = match.group(1).split()
        if _opens_sentence(text, match.start()):
            words = words[1:]  # a capital that only opens a sentence says nothing
        words = [w for w in words if w.casefold() not in STOPWORDS and w.casefold() not in skip and w != "I"]
        if words:
            found.setdefault(" ".join(words), None)
    return list(found)


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


def match_terms(words: list[str], prefixes: bool = True) -> list[str]:
    """Query words as FTS terms: a stripped stem of 4+ letters (or any 5+) becomes a prefix ('paint*').

    The index has no stemmer (its tokenizer is fixed by the schema), so the query reaches the
    other forms of a word through an FTS5 prefix term, which BM25 scores as one term. With
    ``prefixes`` off (an index that stems, such as FTS5's porter tokenizer) the words stay as they are.
    """
    out: dict[str, None] = {}
    if not prefixes:
        return list(dict.fromkeys(words))
    for w in words:
        base = stem(w)
        out.setdefault(base + "*" if len(base) >= 5 or (base != w and len(base) >= 4) else w, None)
    return list(out)


def fts_match(words: list[str]) -> str:
    """An FTS5 MATCH expression of any of the terms; a trailing '*' is kept as a prefix query."""
    return " OR ".join(f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in words)


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


@dataclass(frozen=True)
class Variant:
    name: str
    text: str
    words: tuple[str, ...]


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


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` with the given names (and their possessive 's) taken out."""
    names = [n for n in names if n.strip()]
    if not names:
        return text
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                         + r")(?:['’]s)?(?!\w)", re.IGNORECASE)
    return " ".join(pattern.sub(" ", text).split())

