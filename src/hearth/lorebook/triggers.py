"""Trigger matching for memory fragments (F1, F2).

A memory fragment carries trigger words or phrases; when one of them appears in the latest user
message, the fragment's definition is injected as stable profile context. This module is the pure
matcher: :meth:`TriggerIndex.build` compiles a fragment library once (rebuild it whenever the
library changes), and :meth:`TriggerIndex.match` finds the fragments a message triggers.

Matching rules
--------------
* Words are runs of letters, digits, underscores and combining marks, joined by internal
  apostrophes (``don't``, ``o'brien`` are one word). Everything else separates words, so a
  trigger "cat" matches "cat", "Cat!", "cat-like" and "(cat)" but never "category",
  "concatenate" or "cat_food".
* Comparison is case-insensitive (Unicode casefold; "Straße" equals "STRASSE"), curly
  apostrophes equal straight ones, and by default diacritics are ignored ("café" equals "cafe",
  NFKD with combining marks removed; pass ``fold_diacritics=False`` to keep them significant).
* A possessive ``'s`` on a message word is ignored: "Ellis's" triggers "ellis".
* Simple English plurals, both ways, on every word of a trigger: "dog" matches "dogs" and
  "dogs" matches "dog"; "puppy"/"puppies"; "box"/"boxes"; "cookie"/"cookies". Words ending in
  "ss", "us" or "is" are never singularised (glass, bus, Chris); words with digits or
  apostrophes get no plural forms. See :func:`word_forms`.
* A multi-word trigger matches when its words follow one another in the message separated only by
  whitespace or hyphens, of any length: "ice cream" matches "ice   cream", "ice\\ncream" and
  "ice-cream", but not "ice, cream".
* Optional filters on a fragment, checked against the whole message with the same rules:
  ``all_of`` (every term must appear), ``any_of`` (at least one must appear) and ``none_of``
  (none may appear).
* Each fragment is reported once, at the earliest occurrence of any of its triggers (ties: the
  longer match, then the trigger listed first). Results are ordered by that position, then by the
  fragment's place in the library.
* A per-message budget (``max_fragments`` and/or ``budget_chars`` of definition text) keeps the
  highest-priority fragments first, then the earliest-mentioned, then library order; a fragment
  that does not fit is skipped and smaller later ones may still fit. The kept ones are returned in
  message order.

Triggers may contain only words, whitespace, hyphens and apostrophes; anything else (``C++``,
``.NET``, emoji) is rejected with :class:`InvalidInput` rather than silently matching something
different. Use :func:`normalise_trigger` to validate a trigger when it is saved.

Performance: the index is a token/phrase hash index, chosen by measurement over an Aho-Corasick
automaton (``benchmarks/triggers.py`` runs both): matching speed was about the same, building was
faster, and word offsets stay exact even where casefolding changes a string's length. A message
is split into words in one regular-expression pass; each word is looked up in a dict of every
single-word trigger form, phrases are looked up by their first two words and confirmed against
the words that follow. Cost per message grows with the message's length and the number of hits,
not with the size of the library. The index is immutable; rebuild it when the library changes.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Sequence

from hearth.errors import InvalidInput
from hearth.validation import check_text

__all__ = [
    "TriggerFragment",
    "Match",
    "TriggerIndex",
    "word_forms",
    "normalise_trigger",
    "fold",
    "MAX_TRIGGER_CHARS",
    "MAX_TRIGGER_WORDS",
]

MAX_TRIGGER_CHARS = 200
MAX_TRIGGER_WORDS = 12

# Combining marks count as word characters so that a decomposed "e" + U+0301 stays one word.
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_WORD_CHAR = rf"[\w{_MARKS}]"
_APOSTROPHE_CHARS = "'\u2019\u2018\u02bc\uff07"
_TOKEN_RE = re.compile(rf"{_WORD_CHAR}+(?:[{_APOSTROPHE_CHARS}]{_WORD_CHAR}+)*")
_HYPHENS = "\\-\u2010\u2011"
# What may sit between two words of a phrase in the message.
_PHRASE_GAP_RE = re.compile(rf"[\s{_HYPHENS}]+")
# What a trigger may contain besides words.
_TRIGGER_OK_RE = re.compile(rf"(?:{_WORD_CHAR}|[\s{_HYPHENS}{_APOSTROPHE_CHARS}])*")
_APOSTROPHE_MAP = str.maketrans({c: "'" for c in _APOSTROPHE_CHARS[1:]})

_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")
_NEVER_SINGULARISE = ("ss", "us", "is")
_VOWELS = frozenset("aeiou")


def fold(text: str, fold_diacritics: bool = True) -> str:
    """The comparison form of a word: apostrophes unified, casefolded, diacritics optionally gone."""
    if text.isascii():
        return text.lower()  # casefold equals lower on ASCII, and is the common case
    text = text.translate(_APOSTROPHE_MAP).casefold()
    if fold_diacritics:
        return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", text)


def word_forms(word: str) -> frozenset[str]:
    """Every form a (folded) trigger word matches: itself plus simple singular and plural forms.

    Rules are deliberately small and symmetric enough for names and nouns:
    singular from plural: "-ies" -> "-y" and "-ie"; "-es" -> drop "es" after s/x/z/ch/sh and
    drop "s"; "-s" -> drop "s" (not after "ss", "us", "is"); plural from singular:
    consonant + "y" -> "-ies"; s/x/z/ch/sh -> "+es"; otherwise "+s".
    """
    forms = {word}
    if len(word) < 2 or not word.isalpha():
        return frozenset(forms)
    # Singular forms, when the word looks plural.
    if word.endswith("s") and not word.endswith(_NEVER_SINGULARISE):
        if word.endswith("ies") and len(word) >= 5:
            forms.add(word[:-3] + "y")
        if word.endswith("es") and word[:-2].endswith(_SIBILANT_ENDINGS) and len(word) >= 5:
            forms.add(word[:-2])
        if len(word) >= 3:
            forms.add(word[:-1])
    # Plural form, treating the word as singular.
    if word.endswith("y") and len(word) >= 3 and word[-2] not in _VOWELS:
        forms.add(word[:-1] + "ies")
    elif word.endswith(_SIBILANT_ENDINGS):
        forms.add(word + "es")
    else:
        forms.add(word + "s")
    return frozenset(forms)


def normalise_trigger(trigger: str, fold_diacritics: bool = True) -> tuple[str, ...]:
    """The folded words of a trigger or filter term; raises InvalidInput if it cannot be matched."""
    if not isinstance(trigger, str):
        raise InvalidInput("a trigger must be text")
    check_text(trigger, "a trigger")
    if len(trigger) > MAX_TRIGGER_CHARS:
        raise InvalidInput(f"a trigger may be at most {MAX_TRIGGER_CHARS} characters")
    if not _TRIGGER_OK_RE.fullmatch(trigger):
        raise InvalidInput(
            "a trigger may contain only words, spaces, hyphens and apostrophes"
        )
    if trigger.isascii():
        words = tuple(_TOKEN_RE.findall(trigger.lower()))
    else:
        words = tuple(fold(w, fold_diacritics) for w in _TOKEN_RE.findall(trigger))
    if not words:
        raise InvalidInput("a trigger must contain at least one word")
    if len(words) > MAX_TRIGGER_WORDS:
        raise InvalidInput(f"a trigger may have at most {MAX_TRIGGER_WORDS} words")
    return words


@dataclass(frozen=True)
class TriggerFragment:
    """What the matcher needs from a memory fragment. Any object with these attributes will do."""

    id: Hashable
    triggers: Sequence[str]
    definition: str = ""
    category: str = ""
    all_of: Sequence[str] = ()
    any_of: Sequence[str] = ()
    none_of: Sequence[str] = ()
    priority: int = 0  # higher is kept first when a budget trims matches


@dataclass(frozen=True)
class Match:
    """One triggered fragment: which trigger fired and where (character offsets in the message)."""

    fragment_id: Hashable
    trigger: str
    position: int
    end: int
    priority: int = 0
    definition_chars: int = 0
    reason: str = "key"  # key, constant, sticky or recursion (lorebook activation)


@dataclass(slots=True)
class _Compiled:
    """A fragment after compilation: term ids for triggers and filters."""

    id: Hashable
    order: int
    triggers: tuple[str, ...]
    all_of: frozenset[int]
    any_of: frozenset[int]
    none_of: frozenset[int]
    priority: int
    definition_chars: int


class TriggerIndex:
    """A compiled, immutable fragment library. Build once per library change; match per message."""

    __slots__ = ("_fragments", "_single", "_phrase", "_term_users", "_fold_diacritics", "_fold_cache")
    _fragments: tuple[_Compiled, ...]
    _single: dict[str, tuple[int, ...]]
    _phrase: dict[str, dict[str, tuple[tuple[int, tuple[frozenset[str], ...]], ...]]]
    _term_users: tuple[tuple[tuple[int, int], ...], ...]
    _fold_diacritics: bool
    _fold_cache: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use TriggerIndex.build(fragments)")

    @classmethod
    def build(cls, fragments: Iterable[Any], *, fold_diacritics: bool = True) -> "TriggerIndex":
        """Compile fragments (in library order). Raises InvalidInput for duplicate ids or bad terms."""
        term_ids: dict[tuple[str, ...], int] = {}
        single: dict[str, list[int]] = {}
        # Phrases are keyed by their first two words, so a common first word stays cheap.
        phrase: dict[str, dict[str, list[tuple[int, tuple[frozenset[str], ...]]]]] = {}
        term_users: list[list[tuple[int, int]]] = []  # term id -> [(fragment order, trigger index)]
        compiled: list[_Compiled] = []
        seen_ids: set[Hashable] = set()

        raw_ids: dict[str, int] = {}  # libraries repeat terms; skip re-normalising them

        def term(text: str, fragment_id: Hashable) -> int:
            tid = raw_ids.get(text)
            if tid is not None:
                return tid
            try:
                words = normalise_trigger(text, fold_diacritics)
            except InvalidInput as exc:
                raise type(exc)(f"fragment {fragment_id!r}: {exc}") from None
            tid = term_ids.get(words)
            if tid is None:
                tid = term_ids[words] = len(term_users)
                term_users.append([])
                forms = [word_forms(w) for w in words]
                if len(words) == 1:
                    for form in forms[0]:
                        single.setdefault(form, []).append(tid)
                else:
                    rest = tuple(forms[2:])
                    for first in forms[0]:
                        by_second = phrase.setdefault(first, {})
                        for second in forms[1]:
                            by_second.setdefault(second, []).append((tid, rest))
            raw_ids[text] = tid
            return tid

        for order, frag in enumerate(fragments):
            fid = frag.id
            if fid in seen_ids:
                raise InvalidInput(f"fragment id {fid!r} appears twice")
            seen_ids.add(fid)
            triggers = _str_list(getattr(frag, "triggers", ()), fid, "triggers")
            trigger_terms = tuple(term(t, fid) for t in triggers)
            for i, tid in enumerate(trigger_terms):
                users = term_users[tid]
                if not users or users[-1][0] != order:  # a repeated trigger counts once
                    users.append((order, i))
            priority = getattr(frag, "priority", 0) or 0
            if not isinstance(priority, int) or isinstance(priority, bool):
                raise InvalidInput(f"fragment {fid!r}: priority must be an integer")
            compiled.append(
                _Compiled(
                    id=fid,
                    order=order,
                    triggers=triggers,
                    all_of=frozenset(term(t, fid) for t in _str_list(getattr(frag, "all_of", ()), fid, "all_of")),
                    any_of=frozenset(term(t, fid) for t in _str_list(getattr(frag, "any_of", ()), fid, "any_of")),
                    none_of=frozenset(term(t, fid) for t in _str_list(getattr(frag, "none_of", ()), fid, "none_of")),
                    priority=priority,
                    definition_chars=len(getattr(frag, "definition", "") or ""),
                )
            )

        self = object.__new__(cls)
        self._fragments = tuple(compiled)
        self._single = {k: tuple(v) for k, v in single.items()}
        self._phrase = {k: {k2: tuple(v) for k2, v in d.items()} for k, d in phrase.items()}
        self._term_users = tuple(tuple(u) for u in term_users)
        self._fold_diacritics = fold_diacritics
        # Folding non-ASCII words is the slow path; a bounded cache keeps repeated words cheap.
        self._fold_cache = {}
        return self

    # -- facts, for diagnostics (numbers only) ----------------------------------------------------

    def __len__(self) -> int:
        return len(self._fragments)

    @property
    def term_count(self) -> int:
        return len(self._term_users)

    @property
    def form_count(self) -> int:
        return len(self._single) + len(self._phrase)

    # -- matching ---------------------------------------------------------------------------------

    def match(
        self,
        text: str,
        budget_chars: int | None = None,
        max_fragments: int | None = None,
    ) -> list[Match]:
        """Fragments triggered by ``text``, each once, in message order, trimmed to the budget."""
        if not isinstance(text, str):
            raise InvalidInput("the message must be text")
        for name, value in (("budget_chars", budget_chars), ("max_fragments", max_fragments)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise InvalidInput(f"{name} must be a non-negative integer")
        found = self._find_terms(text)
        if not found:
            return []
        best: dict[int, tuple[int, int, int]] = {}  # fragment order -> (start, -end, trigger index)
        for tid, (start, end) in found.items():
            for order, trig in self._term_users[tid]:
                cand = (start, -end, trig)
                cur = best.get(order)
                if cur is None or cand < cur:
                    best[order] = cand
        present = found.keys()
        matches: list[tuple[int, int, Match]] = []
        for order, (start, neg_end, trig) in best.items():
            frag = self._fragments[order]
            if frag.all_of and not frag.all_of <= present:
                continue
            if frag.any_of and frag.any_of.isdisjoint(present):
                continue
            if frag.none_of and not frag.none_of.isdisjoint(present):
                continue
            m = Match(
                fragment_id=frag.id,
                trigger=frag.triggers[trig],
                position=start,
                end=-neg_end,
                priority=frag.priority,
                definition_chars=frag.definition_chars,
            )
            matches.append((start, order, m))
        matches.sort(key=lambda t: (t[0], t[1]))
        if budget_chars is not None or max_fragments is not None:
            matches = _apply_budget(matches, budget_chars, max_fragments)
        return [m for _, _, m in matches]

    def _tokens(self, text: str) -> tuple[list[int], list[int], list[str]]:
        """Start offsets, end offsets and folded words of the message's words."""
        if text.isascii():
            # Lower-casing ASCII keeps every offset, so fold once and read words straight off it.
            spans = [(m.start(), m.end()) for m in _TOKEN_RE.finditer(text)]
            low = text.lower()
            return [a for a, _ in spans], [b for _, b in spans], [low[a:b] for a, b in spans]
        starts, ends, keys = [], [], []
        cache = self._fold_cache
        for m in _TOKEN_RE.finditer(text):
            word = m.group()
            key = cache.get(word)
            if key is None:
                key = fold(word, self._fold_diacritics)
                if len(cache) > 50_000:
                    cache.clear()
                cache[word] = key
            starts.append(m.start())
            ends.append(m.end())
            keys.append(key)
        return starts, ends, keys

    def _find_terms(self, text: str) -> dict[int, tuple[int, int]]:
        """Term id -> (start, end) of its first occurrence (longest at that start)."""
        starts, ends, keys = self._tokens(text)
        found: dict[int, tuple[int, int]] = {}
        single, phrase = self._single, self._phrase
        n = len(keys)
        for i, key in enumerate(keys):
            for k in _alternatives(key):
                tids = single.get(k)
                if tids:
                    for tid in tids:
                        if tid not in found:
                            found[tid] = (starts[i], ends[i])
                by_second = phrase.get(k)
                if by_second is None or i + 1 >= n:
                    continue
                if not _PHRASE_GAP_RE.fullmatch(text, ends[i], starts[i + 1]):
                    continue
                for k2 in _alternatives(keys[i + 1]):
                    cands = by_second.get(k2)
                    if not cands:
                        continue
                    for tid, rest in cands:
                        last = i + 1 + len(rest)
                        if tid in found or last >= n:
                            continue
                        if not rest or _phrase_follows(text, starts, ends, keys, i + 1, rest):
                            found[tid] = (starts[i], ends[last])
        return found


def _alternatives(key: str) -> tuple[str, ...]:
    # A possessive 's is also tried without it ("Ellis's" -> "ellis").
    if key.endswith("'s") and len(key) > 2:
        return (key, key[:-2])
    return (key,)


def _phrase_follows(
    text: str, starts: list[int], ends: list[int], keys: list[str], i: int, rest: tuple[frozenset[str], ...]
) -> bool:
    for j, forms in enumerate(rest, start=i + 1):
        key = keys[j]
        if key not in forms and not (key.endswith("'s") and key[:-2] in forms):
            return False
        if not _PHRASE_GAP_RE.fullmatch(text, ends[j - 1], starts[j]):
            return False
    return True


def _apply_budget(
    matches: list[tuple[int, int, Match]], budget_chars: int | None, max_fragments: int | None
) -> list[tuple[int, int, Match]]:
    ranked = sorted(matches, key=lambda t: (-t[2].priority, t[0], t[1]))
    kept: list[tuple[int, int, Match]] = []
    used = 0
    for item in ranked:
        if max_fragments is not None and len(kept) >= max_fragments:
            break
        size = item[2].definition_chars
        if budget_chars is not None and used + size > budget_chars:
            continue  # too big for what is left; a smaller, lower-ranked one may still fit
        kept.append(item)
        used += size
    kept.sort(key=lambda t: (t[0], t[1]))
    return kept


def _str_list(value: Any, fragment_id: Hashable, name: str) -> tuple[str, ...]:
    if not value:
        return ()
    # Ordered containers only: trigger order decides ties, and a bare string is a common mistake.
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(f"fragment {fragment_id!r}: {name} must be a list of text")
    for v in value:
        if type(v) is not str:
            raise InvalidInput(f"fragment {fragment_id!r}: {name} must be a list of text")
    return tuple(value)
