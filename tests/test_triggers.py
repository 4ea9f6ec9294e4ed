"""Trigger matching for memory fragments (F1, F2), checked against a slow regex reference."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.errors import InvalidInput
from hearth.lorebook import triggers as triggers_module
from hearth.lorebook.triggers import Match, TriggerFragment, TriggerIndex, normalise_trigger, word_forms


def frag(fid, *triggers, **kw):
    return TriggerFragment(id=fid, triggers=list(triggers), **kw)


def ids(matches):
    return [m.fragment_id for m in matches]


# --------------------------------------------------------------------------------------------
# Slow reference: one regular expression per term, run over a character-by-character folded copy
# of the message (so every folded character still knows where it came from).
# --------------------------------------------------------------------------------------------

_REF_APOS = {"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"}


def _ref_fold_char(c: str, fold_diacritics: bool) -> str:
    c = _REF_APOS.get(c, c).casefold()
    if fold_diacritics:
        c = "".join(ch for ch in unicodedata.normalize("NFKD", c) if not unicodedata.combining(ch))
    return c


def _ref_fold(text: str, fold_diacritics: bool = True) -> tuple[str, list[int]]:
    out, where = [], []
    for i, c in enumerate(text):
        f = _ref_fold_char(c, fold_diacritics)
        out.append(f)
        where.extend([i] * len(f))
    where.append(len(text))
    return "".join(out), where


def _ref_pattern(term: str) -> re.Pattern:
    folded, _ = _ref_fold(term)
    words = re.findall(r"\w+(?:'\w+)*", folded)
    parts = []
    for w in words:
        forms = sorted(word_forms(w), key=len, reverse=True)
        parts.append("(?:" + "|".join(map(re.escape, forms)) + ")(?:'s)?")
    body = r"[\s\-\u2010\u2011]+".join(parts)
    return re.compile(r"(?<!\w)(?<!\w')" + body + r"(?!\w)(?!'\w)")


def reference_match(fragments, text, budget_chars=None, max_fragments=None, patterns=None):
    folded, where = _ref_fold(text)
    cache: dict[str, tuple[int, int] | None] = {}
    patterns = {} if patterns is None else patterns  # a caller may share compiled patterns

    def occurrence(term):
        if term not in cache:
            if term not in patterns:
                patterns[term] = _ref_pattern(term)
            m = patterns[term].search(folded)
            cache[term] = None if m is None else (where[m.start()], where[m.end() - 1] + 1)
        return cache[term]

    hits = []
    for order, f in enumerate(fragments):
        best = None
        for i, t in enumerate(f.triggers):
            occ = occurrence(t)
            if occ is not None:
                cand = (occ[0], -occ[1], i)
                best = cand if best is None or cand < best else best
        if best is None:
            continue
        if not all(occurrence(t) for t in f.all_of):
            continue
        if f.any_of and not any(occurrence(t) for t in f.any_of):
            continue
        if any(occurrence(t) for t in f.none_of):
            continue
        hits.append((best[0], order, f, f.triggers[best[2]], -best[1]))
    hits.sort(key=lambda h: (h[0], h[1]))
    if budget_chars is not None or max_fragments is not None:
        ranked = sorted(hits, key=lambda h: (-h[2].priority, h[0], h[1]))
        kept, used = [], 0
        for h in ranked:
            if max_fragments is not None and len(kept) == max_fragments:
                break
            if budget_chars is not None and used + len(h[2].definition) > budget_chars:
                continue
            kept.append(h)
            used += len(h[2].definition)
        hits = sorted(kept, key=lambda h: (h[0], h[1]))
    return [(h[2].id, h[3], h[0], h[4]) for h in hits]


def as_tuples(matches):
    return [(m.fragment_id, m.trigger, m.position, m.end) for m in matches]


# --------------------------------------------------------------------------------------------
# F1 examples
# --------------------------------------------------------------------------------------------


def test_f1_word_boundary_cat_does_not_match_category_or_concatenate():
    index = TriggerIndex.build([frag("c", "cat")])
    assert ids(index.match("This category is about how to concatenate strings.")) == []
    assert ids(index.match("my cat_food bowl and bobcat")) == []
    for text in ("cat", "Cat!", "the (cat).", "cat-like", "a\ncat\n", "«cat»"):
        assert ids(index.match(text)) == ["c"], text


def test_f1_case_insensitive_with_unicode_casefold():
    index = TriggerIndex.build([frag("s", "Straße"), frag("n", "NAOMI")])
    found = index.match("We walked down the STRASSE with naomi.")
    assert ids(found) == ["s", "n"]
    assert found[0].position == 19 and found[0].end == 26


def test_f1_multiword_phrase_matches_across_whitespace():
    index = TriggerIndex.build([frag("ic", "ice cream")])
    for text in ("ice cream", "some ICE   Cream?", "ice\n\tcream", "ice-cream", "ice\u00a0cream"):
        assert ids(index.match(text)) == ["ic"], repr(text)
    for text in ("ice, cream", "iced cream", "ice creamery", "ice", "cream ice"):
        assert ids(index.match(text)) == [], repr(text)
    hyphenated = TriggerIndex.build([frag("h", "ice-cream")])
    assert ids(hyphenated.match("we had ice cream")) == ["h"]


def test_f1_simple_plurals_both_ways():
    cases = [
        ("dog", "two dogs barked"),
        ("dogs", "one dog barked"),
        ("puppy", "the puppies slept"),
        ("puppies", "a puppy slept"),
        ("box", "boxes everywhere"),
        ("boxes", "one box"),
        ("cookie", "cookies please"),
        ("cookies", "a cookie please"),
        ("church", "old churches"),
        ("glass", "two glasses"),
        ("ice cream", "ice creams"),
    ]
    for trigger, text in cases:
        index = TriggerIndex.build([frag("x", trigger)])
        assert ids(index.match(text)) == ["x"], (trigger, text)


def test_f1_word_forms_table():
    assert word_forms("dog") == {"dog", "dogs"}
    assert word_forms("dogs") >= {"dogs", "dog"}
    assert word_forms("puppy") == {"puppy", "puppies"}
    assert word_forms("puppies") >= {"puppies", "puppy"}
    assert word_forms("box") == {"box", "boxes"}
    assert word_forms("boxes") >= {"boxes", "box"}
    assert word_forms("day") == {"day", "days"}  # vowel + y is a plain +s
    # Never singularised: otherwise "glass" would match "glas", "bus" "bu", "Chris" "chri".
    assert "glas" not in word_forms("glass")
    assert "bu" not in word_forms("bus")
    assert "chri" not in word_forms("chris")
    # Words with digits or apostrophes are taken literally.
    assert word_forms("r2d2") == {"r2d2"}
    assert word_forms("don't") == {"don't"}
    assert word_forms("a") == {"a"}


def test_f1_plurals_do_not_leak_into_unrelated_words():
    index = TriggerIndex.build([frag("j", "James"), frag("b", "bus"), frag("c", "Chris")])
    assert ids(index.match("I love jam, my busy chri-friend")) == []
    assert ids(index.match("the Jameses and two buses")) == ["j", "b"]


def test_f1_apostrophes_and_possessives():
    index = TriggerIndex.build([frag("e", "Ellis"), frag("d", "don't"), frag("o", "brien")])
    assert ids(index.match("Ellis's garden")) == ["e"]
    assert ids(index.match("Ellis\u2019s garden")) == ["e"]
    assert ids(index.match("the Ellises' garden")) == ["e"]
    assert ids(index.match("I don\u2019t know")) == ["d"]
    assert ids(index.match("I don't know")) == ["d"]
    assert ids(index.match("I do not know")) == []
    assert ids(index.match("Mr O'Brien")) == []  # an apostrophe inside a word joins it
    assert ids(index.match("'brien' in quotes")) == ["o"]


def test_f1_diacritics_folded_by_default_and_optional():
    fragments = [frag("c", "café"), frag("z", "Zoe")]
    index = TriggerIndex.build(fragments)
    assert ids(index.match("a cafe with Zoë")) == ["c", "z"]
    assert ids(index.match("un CAFÉ")) == ["c"]
    assert ids(index.match("un cafe\u0301")) == ["c"]  # decomposed accent stays one word
    strict = TriggerIndex.build(fragments, fold_diacritics=False)
    assert ids(strict.match("a cafe with Zoë")) == []
    assert ids(strict.match("un CAFÉ, un cafe\u0301, Zoe")) == ["c", "z"]


def test_f1_each_fragment_once_at_first_occurrence_in_deterministic_order():
    index = TriggerIndex.build(
        [
            frag("a", "apple", "orchard"),
            frag("b", "banana"),
            frag("c", "apple"),
            frag("d", "orchard trip", "orchard"),
        ]
    )
    found = index.match("An orchard trip: banana, apple, apples, orchard again.")
    assert [(m.fragment_id, m.trigger, m.position) for m in found] == [
        ("a", "orchard", 3),
        ("d", "orchard trip", 3),  # same start: the longer trigger is reported
        ("b", "banana", 17),
        ("c", "apple", 25),
    ]
    assert found[1].end == 15


def test_f1_secondary_filters_all_any_none():
    index = TriggerIndex.build(
        [
            frag("bath-city", "Bath", all_of=["train"], none_of=["towel"]),
            frag("bath-tub", "bath", any_of=["bubbles", "soak", "hot water"]),
            frag("plain", "bath"),
        ]
    )
    assert ids(index.match("Taking the train to Bath")) == ["bath-city", "plain"]
    assert ids(index.match("Taking the trains to Bath with a towel")) == ["plain"]
    assert ids(index.match("a bath with HOT  water")) == ["bath-tub", "plain"]
    assert ids(index.match("a long bath")) == ["plain"]
    assert ids(index.match("bubbles and a train but no b-a-t-h")) == []


def test_f1_budget_trims_lowest_priority_then_latest():
    index = TriggerIndex.build(
        [
            TriggerFragment(id="a", triggers=["alpha"], definition="x" * 50, priority=0),
            TriggerFragment(id="b", triggers=["beta"], definition="x" * 50, priority=5),
            TriggerFragment(id="c", triggers=["gamma"], definition="x" * 50, priority=0),
            TriggerFragment(id="d", triggers=["delta"], definition="x" * 10, priority=0),
        ]
    )
    text = "alpha beta gamma delta"
    assert ids(index.match(text)) == ["a", "b", "c", "d"]
    assert ids(index.match(text, max_fragments=2)) == ["a", "b"]
    assert ids(index.match(text, max_fragments=1)) == ["b"]
    # 120 chars: b (priority) then a (earliest); c no longer fits, the small d still does.
    assert ids(index.match(text, budget_chars=120)) == ["a", "b", "d"]
    assert ids(index.match(text, budget_chars=9)) == []
    assert ids(index.match(text, budget_chars=0, max_fragments=5)) == []
    with pytest.raises(InvalidInput):
        index.match(text, budget_chars=-1)


def test_f1_invalid_triggers_are_rejected_clearly():
    for bad in ("", "   ", "C++", ".NET", "hi!", "\U0001f600"):
        with pytest.raises(InvalidInput):
            TriggerIndex.build([frag("x", bad)])
    with pytest.raises(InvalidInput, match="at most"):  # a too-long field is InvalidInput (422)
        normalise_trigger("word " * 13)
    with pytest.raises(InvalidInput, match="twice"):
        TriggerIndex.build([frag("x", "a"), frag("x", "b")])
    with pytest.raises(InvalidInput):
        TriggerIndex.build([frag("x", "ok", all_of="notalist")])
    with pytest.raises(InvalidInput):
        TriggerIndex.build([TriggerFragment(id="x", triggers=["ok"], priority="high")])
    assert normalise_trigger("  Ice-Cream  ") == ("ice", "cream")
    assert normalise_trigger("'dogs'") == ("dogs",)


def test_f1_fragment_without_triggers_never_matches():
    index = TriggerIndex.build([frag("empty"), frag("x", "x")])
    assert ids(index.match("x empty")) == ["x"]
    assert len(index) == 2


def test_f1_match_carries_trigger_position_and_sizes():
    index = TriggerIndex.build(
        [TriggerFragment(id=7, triggers=["Naomi's sister", "sister"], definition="abc", priority=2)]
    )
    (m,) = index.match("Yes, naomi\u2019s   sister called.")
    assert m == Match(fragment_id=7, trigger="Naomi's sister", position=5, end=21, priority=2, definition_chars=3)


# --------------------------------------------------------------------------------------------
# F1 properties against the reference
# --------------------------------------------------------------------------------------------

VOCAB = [
    "cat", "cats", "category", "concatenate", "dog", "dogs", "puppy", "puppies", "box", "boxes",
    "bus", "buses", "glass", "ice", "cream", "creams", "new", "york", "café", "cafe", "Straße",
    "strasse", "don't", "don", "o'brien", "ellis", "Ellis's", "chris", "day", "days", "city",
    "cities", "church", "zoë", "ÉCOLE", "naïve", "cookie", "cookies", "a", "s", "x1", "r2d2",
]
SEPARATORS = [" ", "  ", "\n", "\t", "-", " - ", ", ", ". ", "'s ", "\u2019s ", "_", "!", "'", "\u00a0", "(", ")"]

word = st.one_of(st.sampled_from(VOCAB), st.text(alphabet="abcdeoisy", min_size=1, max_size=6))
cased_word = st.tuples(word, st.sampled_from([str, str.upper, str.title, str.lower])).map(
    lambda p: p[1](p[0])
)
trigger_word = st.sampled_from([w for w in VOCAB if w not in ("a", "s")])
trigger_text = st.lists(trigger_word, min_size=1, max_size=3).flatmap(
    lambda ws: st.sampled_from([" ", "-", "  "]).map(lambda sep: sep.join(ws))
)
fragment_lists = st.lists(
    st.builds(
        lambda t, a, n, p, d: (t, a, n, p, d),
        st.lists(trigger_text, min_size=1, max_size=3),
        st.lists(trigger_text, max_size=1),
        st.lists(trigger_text, max_size=1),
        st.integers(0, 3),
        st.integers(0, 40),
    ),
    min_size=1,
    max_size=12,
).map(
    lambda specs: [
        TriggerFragment(
            id=f"f{i}",
            triggers=t,
            all_of=a if i % 3 == 0 else [],
            any_of=a if i % 3 == 1 else [],
            none_of=n if i % 2 else [],
            priority=p,
            definition="d" * d,
        )
        for i, (t, a, n, p, d) in enumerate(specs)
    ]
)



@st.composite
def library_and_text(draw):
    """A fragment list and a message built mostly from the fragments' own trigger words."""
    fragments = draw(fragment_lists)
    trigger_words = sorted({w for f in fragments for t in f.triggers for w in re.split(r"[\s-]+", t)})
    own_word = st.tuples(
        st.sampled_from(trigger_words), st.sampled_from([str, str.upper, str.title])
    ).map(lambda p: p[1](p[0]))
    parts = draw(
        st.lists(
            st.tuples(st.one_of(own_word, own_word, cased_word), st.sampled_from(SEPARATORS)),
            max_size=25,
        )
    )
    return fragments, "".join(w + s for w, s in parts)


PROP = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROP
@given(library_and_text())
@pytest.mark.slow
def test_f1_matching_agrees_with_regex_reference(case):
    fragments, text = case
    index = TriggerIndex.build(fragments)
    assert as_tuples(index.match(text)) == reference_match(fragments, text)


@PROP
@given(library_and_text(), st.one_of(st.none(), st.integers(0, 120)), st.one_of(st.none(), st.integers(0, 5)))
@pytest.mark.slow
def test_f1_budget_agrees_with_reference(case, budget_chars, max_fragments):
    fragments, text = case
    index = TriggerIndex.build(fragments)
    got = index.match(text, budget_chars=budget_chars, max_fragments=max_fragments)
    assert as_tuples(got) == reference_match(fragments, text, budget_chars, max_fragments)
    if budget_chars is not None:
        assert sum(m.definition_chars for m in got) <= budget_chars
    if max_fragments is not None:
        assert len(got) <= max_fragments


@PROP
@given(library_and_text())
@pytest.mark.slow
def test_f1_matches_respect_word_boundaries(case):
    fragments, text = case
    index = TriggerIndex.build(fragments)
    for m in index.match(text):
        before = text[m.position - 1] if m.position else " "
        after = text[m.end] if m.end < len(text) else " "
        assert not before.isalnum() and before != "_"
        assert not after.isalnum() and after != "_"
        assert text[m.position].isalnum() or text[m.position] == "_"


def _swap_case_keep_length(text: str) -> str:
    out = []
    for c in text:
        s = c.swapcase()
        out.append(s if len(s) == 1 else c)
    return "".join(out)


@PROP
@given(library_and_text())
@pytest.mark.slow
def test_f1_case_insensitive_property(case):
    fragments, text = case
    index = TriggerIndex.build(fragments)
    assert as_tuples(index.match(_swap_case_keep_length(text))) == as_tuples(index.match(text))
    upper_index = TriggerIndex.build(
        [TriggerFragment(id=f.id, triggers=[t.upper() for t in f.triggers]) for f in fragments]
    )
    assert ids(upper_index.match(text)) == ids(
        TriggerIndex.build([TriggerFragment(id=f.id, triggers=f.triggers) for f in fragments]).match(text)
    )


@PROP
@given(trigger_word, st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=5))
def test_f1_trigger_glued_to_other_letters_never_matches(trigger, glue):
    index = TriggerIndex.build([frag("t", trigger)])
    folded = triggers_module.fold(trigger)
    for text in (trigger + glue, glue + trigger, glue + trigger + glue):
        expected = any(
            m.group().lower() in word_forms(folded)
            for m in re.finditer(r"\w+(?:'\w+)*", triggers_module.fold(text))
        )
        assert bool(index.match(text)) == expected, text


# --------------------------------------------------------------------------------------------
# F2: large libraries, built once
# --------------------------------------------------------------------------------------------

_SYLLABLES = ["ka", "lo", "mi", "ren", "tos", "va", "quin", "del", "bar", "sy", "op", "ith", "ul", "zen"]


def _library(n: int, seed: int = 7) -> list[TriggerFragment]:
    rng = random.Random(seed)

    def pseudo_word():
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))

    out = []
    for i in range(n):
        trig = [pseudo_word() if rng.random() < 0.7 else f"{pseudo_word()} {pseudo_word()}"
                for _ in range(rng.randint(1, 3))]
        out.append(
            TriggerFragment(
                id=i,
                triggers=trig,
                definition="d" * rng.randint(20, 300),
                none_of=[pseudo_word()] if rng.random() < 0.05 else [],
                priority=rng.randint(0, 2),
            )
        )
    return out


@pytest.mark.slow
def test_f2_ten_thousand_fragments_build_once_and_match_fast(monkeypatch):
    fragments = _library(10_000)
    index = TriggerIndex.build(fragments)
    assert len(index) == 10_000
    rng = random.Random(3)
    messages = []
    for _ in range(8):
        chosen = rng.sample(fragments, 6)
        words = ["so", "today", "I", "went", "out", "and", "thought", "about", "it"]
        for f in chosen:
            words.insert(rng.randrange(len(words) + 1), rng.choice(f.triggers).upper())
        messages.append(" ".join(words) + ".")

    # Matching must use the compiled index only: any compilation during match is a failure.
    def no_compilation(*_a, **_k):
        raise AssertionError("matching recompiled a trigger")

    monkeypatch.setattr(triggers_module, "normalise_trigger", no_compilation)
    monkeypatch.setattr(triggers_module, "word_forms", no_compilation)
    results = [index.match(m) for m in messages]
    monkeypatch.undo()

    patterns: dict = {}
    for message, got in zip(messages, results):
        assert got, message
        assert as_tuples(got) == reference_match(fragments, message, patterns=patterns)
    # Same index, same message, same answer: nothing in the index changes while matching.
    assert as_tuples(index.match(messages[0])) == as_tuples(results[0])
