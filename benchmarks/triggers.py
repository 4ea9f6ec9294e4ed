"""Benchmark: memory-fragment trigger matching (F2).

Builds libraries of 1,000 and 10,000 fragments and matches 200 realistic chat messages against
each, printing build time and median / p99 match time. It also measures an Aho-Corasick design
(``ahocorasick_rs`` over the folded message, with word-boundary checks afterwards) on the same
data, which is how the token/phrase hash index in ``hearth.lorebook.triggers`` was chosen.

Times are CPU time of this process (``time.process_time``) so that other work on the machine
disturbs them less; wall-clock figures are printed alongside.

Lorebook activation (X3): the same 10,000 fragments as SillyTavern-style entries with controls
(secondary keys and selective logic, case-sensitive, partial-word and punctuated keys, some
regex keys, constant / sticky / cooldown / probability entries, recursion two levels deep)
matched through ``hearth.lorebook.controls.Activator``, next to the plain index on the plain library as
the floor, per class of message (short: under 40 words; long: 40 words or more).

Run: ``python benchmarks/triggers.py``
"""

from __future__ import annotations

import random
import re
import statistics
import time
from functools import partial

import ahocorasick_rs

from hearth.lorebook.controls import Activator
from hearth.lorebook.triggers import TriggerFragment, TriggerIndex, fold, normalise_trigger, word_forms

COMMON = (
    "i you we it the a an and but so because just really maybe today yesterday tomorrow morning "
    "night feel felt think thought know remember want need went came got made said told asked "
    "about with from after before again still always never little bit lot time day week work home "
    "tired happy sad okay good bad better worse talk talked sleep slept eat ate walk walked call "
    "called text message write wrote read reading music song coffee tea rain sun weather head "
    "heart hand house room kitchen garden car train bus city town friend friends mum dad sister "
    "brother kids dog cat project code bug meeting plan plans idea ideas book books film"
).split()
NOUNS = (
    "migraine garden piano violin bakery lighthouse harbour allotment ceramics pottery marathon "
    "asthma insulin sourdough chess kayak telescope orchard greenhouse bicycle guitar lantern "
    "quilt terrace vineyard studio library museum festival recital clinic physio therapy thesis "
    "novel poem sketchbook camera drone aquarium hedgehog parrot tortoise pony ferret rabbit"
).split()
SYLLABLES = ["ka", "lo", "mi", "ren", "tos", "va", "quin", "del", "bar", "sy", "op", "ith", "ul",
             "zen", "mar", "eli", "nor", "ash", "bel", "tor", "wyn", "dra", "fen", "hal"]


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).title()


def make_library(n: int, seed: int) -> list[TriggerFragment]:
    """Names, places and private vocabulary, a few everyday nouns, about 45% phrases."""
    rng = random.Random(seed)
    fragments = []
    for i in range(n):
        triggers = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            if r < 0.55:
                triggers.append(_name(rng))
            elif r < 0.57:
                triggers.append(rng.choice(NOUNS))  # a few libraries reuse everyday words
            elif r < 0.87:
                triggers.append(f"{_name(rng)} {_name(rng)}")
            else:
                triggers.append(f"{rng.choice(NOUNS)} {_name(rng).lower()} {rng.choice(NOUNS)}")
        fragments.append(
            TriggerFragment(
                id=i,
                category=rng.choice(["person", "place", "health", "project", "vocabulary"]),
                triggers=triggers,
                definition="x" * rng.randint(40, 600),
                none_of=[_name(rng)] if rng.random() < 0.05 else [],
                any_of=[rng.choice(COMMON)] if rng.random() < 0.05 else [],
                priority=rng.randint(0, 3),
            )
        )
    return fragments


def make_messages(fragments: list[TriggerFragment], count: int, seed: int) -> list[str]:
    """Chat-like messages of 5 to 250 words; most mention one to four fragment triggers."""
    rng = random.Random(seed)
    messages = []
    for _ in range(count):
        words = [rng.choice(COMMON) for _ in range(int(rng.triangular(5, 250, 30)))]
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
            trigger = rng.choice(rng.choice(fragments).triggers)
            words.insert(rng.randrange(len(words) + 1), trigger + rng.choice(["", "s", "'s", ","]))
        text = " ".join(words)
        text = re.sub(r"(\w+) (\w+) (\w+) (\w+) (\w+) (\w+) ", r"\1 \2 \3, \4 \5 \6. ", text)
        messages.append(text[0].upper() + text[1:] + rng.choice([".", "!", "?", " :)"]))
    return messages


class AhoCorasickCandidate:
    """The alternative measured: one automaton over every trigger form, boundary checks after.

    Handles what the benchmark data needs (ASCII text, single-space phrase joins after gap
    normalisation, possessive 's); kept here only for the comparison.
    """

    _GAP = re.compile(r"[\s\-\u2010\u2011]+")

    def __init__(self, fragments: list[TriggerFragment]):
        term_ids: dict[tuple[str, ...], int] = {}
        pattern_terms: dict[str, list[int]] = {}
        self.term_users: list[list[int]] = []
        self.fragments = fragments

        def term(text: str) -> int:
            words = normalise_trigger(text)
            tid = term_ids.get(words)
            if tid is None:
                tid = term_ids[words] = len(self.term_users)
                self.term_users.append([])
                variants = [""]
                for w in words:
                    variants = [f"{v} {form}".lstrip() for v in variants for form in word_forms(w)]
                for v in variants:
                    pattern_terms.setdefault(v, []).append(tid)
            return tid

        self.filters = []
        for order, f in enumerate(fragments):
            for t in f.triggers:
                tid = term(t)
                if order not in self.term_users[tid]:
                    self.term_users[tid].append(order)
            self.filters.append(
                (
                    {term(t) for t in f.all_of},
                    {term(t) for t in f.any_of},
                    {term(t) for t in f.none_of},
                )
            )
        self.patterns = list(pattern_terms)
        self.pattern_terms = [pattern_terms[p] for p in self.patterns]
        self.automaton = ahocorasick_rs.AhoCorasick(self.patterns)

    def match_ids(self, text: str) -> list[int]:
        folded = self._GAP.sub(" ", fold(text))
        found: dict[int, int] = {}
        n = len(folded)
        for pid, start, end in self.automaton.find_matches_as_indexes(folded, overlapping=True):
            if start and (folded[start - 1].isalnum() or folded[start - 1] in "_'"):
                continue
            if end < n and folded.startswith("'s", end):
                end += 2
            if end < n and (folded[end].isalnum() or folded[end] in "_'"):
                continue
            for tid in self.pattern_terms[pid]:
                found.setdefault(tid, start)
        best: dict[int, int] = {}
        for tid, start in found.items():
            for order in self.term_users[tid]:
                if order not in best or start < best[order]:
                    best[order] = start
        kept = []
        for order, start in best.items():
            all_of, any_of, none_of = self.filters[order]
            if all_of - found.keys() or (any_of and not any_of & found.keys()) or none_of & found.keys():
                continue
            kept.append((start, order))
        return [self.fragments[order].id for _, order in sorted(kept)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _time(fn, *args):
    c0, w0 = time.process_time(), time.perf_counter()
    result = fn(*args)
    return result, time.process_time() - c0, time.perf_counter() - w0


def run(n: int) -> None:
    fragments = make_library(n, seed=n)
    messages = make_messages(fragments, 200, seed=n + 1)
    index, build_cpu, build_wall = min(
        (_time(TriggerIndex.build, fragments) for _ in range(3)), key=lambda r: r[1]
    )
    for m in messages:  # warm-up
        index.match(m)
    cpu_times, hits = [], []
    for _ in range(5):
        for m in messages:
            found, cpu, _ = _time(index.match, m)
            cpu_times.append(cpu)
        hits.append(sum(1 for m in messages for _ in index.match(m)))
    words = sum(len(m.split()) for m in messages) / len(messages)
    print(f"{n:>6} fragments, {index.term_count} distinct terms, {index.form_count} index keys; "
          f"200 messages of {words:.0f} words on average, {hits[0] / 200:.1f} fragments each")
    print(f"  token index   build {build_cpu * 1000:7.1f} ms cpu ({build_wall * 1000:.1f} ms wall)   "
          f"match median {statistics.median(cpu_times) * 1e6:6.1f} us   "
          f"p99 {_percentile(cpu_times, 0.99) * 1e6:6.1f} us")
    index.match(messages[0], budget_chars=1500, max_fragments=5)

    ac, ac_cpu, ac_wall = _time(AhoCorasickCandidate, fragments)
    ac_times, agree = [], 0
    for m in messages:
        ac.match_ids(m)
    for _ in range(5):
        for m in messages:
            _, cpu, _ = _time(ac.match_ids, m)
            ac_times.append(cpu)
    for m in messages:
        agree += ac.match_ids(m) == [x.fragment_id for x in index.match(m)]
    print(f"  aho-corasick  build {ac_cpu * 1000:7.1f} ms cpu ({ac_wall * 1000:.1f} ms wall)   "
          f"match median {statistics.median(ac_times) * 1e6:6.1f} us   "
          f"p99 {_percentile(ac_times, 0.99) * 1e6:6.1f} us   "
          f"({len(ac.patterns)} patterns; same result on {agree}/200 messages)")


class LoreFragment:
    """A fragment as the layer hands it to the activator: triggers, definition, controls."""

    __slots__ = ("id", "triggers", "definition", "priority", "controls")

    def __init__(self, id, triggers, definition, priority, controls):
        self.id, self.triggers, self.definition, self.priority, self.controls = (
            id, triggers, definition, priority, controls)


def make_lorebook(fragments: list[TriggerFragment], seed: int) -> list[LoreFragment]:
    rng = random.Random(seed)
    out = []
    for f in fragments:
        keys = list(f.triggers)
        controls: dict = {"order": rng.randint(0, 300)}
        r = rng.random()
        if r < 0.04:
            controls["case_sensitive"] = True
        elif r < 0.07:
            controls["whole_words"] = False
        elif r < 0.09:
            keys[0] = keys[0] + "!"  # punctuation: the literal path
        elif r < 0.091:
            keys[0] = f"/{re.escape(keys[0])}(s|'s)?\\b/i"  # 0.1% regex keys
        if rng.random() < 0.08:
            controls["secondary"] = [rng.choice(COMMON), rng.choice(COMMON)]
            controls["logic"] = rng.choice(["and_any", "and_all", "not_any", "not_all"])
        if rng.random() < 0.01:
            controls["constant"] = True
        if rng.random() < 0.05:
            controls["sticky"], controls["cooldown"] = rng.randint(1, 3), rng.randint(0, 3)
        if rng.random() < 0.05:
            controls["probability"] = rng.randint(10, 90)
        out.append(LoreFragment(f.id, keys, f.definition, f.priority, controls))
    return out


def run_lorebook(n: int) -> None:
    fragments = make_library(n, seed=n)
    messages = make_messages(fragments, 200, seed=n + 1)
    lore = make_lorebook(fragments, seed=n + 2)
    index = TriggerIndex.build(fragments)
    activator, build_cpu, build_wall = min((_time(Activator.build, lore) for _ in range(3)), key=lambda r: r[1])
    classes = {"short": [m for m in messages if len(m.split()) < 40],
               "long": [m for m in messages if len(m.split()) >= 40]}
    print(f"{n:>6} lorebook entries ({sum(1 for f in lore if f.triggers[0].startswith('/'))} regex keys, "
          f"{sum(1 for f in lore if f.controls.get('constant'))} constant); "
          f"build {build_cpu * 1000:.1f} ms cpu ({build_wall * 1000:.1f} ms wall)")
    for name, batch in classes.items():
        floor, lore_times, counts = [], [], []
        for m in batch:  # warm-up
            index.match(m)
            activator.activate([m], turn=3, seed=7)
        for rep in range(5):
            for i, m in enumerate(batch):
                _, cpu, _ = _time(index.match, m)
                floor.append(cpu)
                found, cpu, _ = _time(partial(activator.activate, turn=3, seed=rep * 1000 + i, budget_tokens=2000), [m])
                lore_times.append(cpu)
                counts.append(len(found.matches))
        med, floor_med = statistics.median(lore_times), statistics.median(floor)
        print(f"  {name:5} {len(batch):3} messages  activator median {med * 1e6:7.1f} us  "
              f"p99 {_percentile(lore_times, 0.99) * 1e6:7.1f} us   plain index (floor) median "
              f"{floor_med * 1e6:6.1f} us  p99 {_percentile(floor, 0.99) * 1e6:6.1f} us   "
              f"ratio {med / floor_med:4.1f}   {statistics.mean(counts):.1f} entries each")


def main() -> None:
    for n in (1_000, 10_000):
        run(n)
    for n in (1_000, 10_000):
        run_lorebook(n)


if __name__ == "__main__":
    main()
