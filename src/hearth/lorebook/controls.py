"""Lorebook activation (F1, F2, X3): which fragments a turn brings in, with lorebook controls.

Plain memory fragments match through the compiled word index in ``triggers`` exactly as before.
Fragments imported from a SillyTavern lorebook (or edited to carry ``controls``) add what World
Info entries can say:

* keys of two kinds, as SillyTavern tells them apart (X6): a key written ``/pattern/flags`` that
  compiles is a regex (the ``regex`` package, with a time limit per turn, so a hostile pattern
  cannot stall a send); every other key is literal text, matched as written (``:)``, ``+1``,
  ``[REDACTED]``), any case unless ``case_sensitive``, and with ``whole_words`` only where no
  letter or digit touches it, without plural forms (``gull`` does not fire on "gulls"). Literal
  keys share one Aho-Corasick automaton and are confirmed by an exact pattern;
* secondary keys with selective logic: ``and_any``, ``and_all``, ``not_any``, ``not_all``;
* ``constant`` entries (always in), insertion ``order``, ``probability`` (a roll that is
  deterministic per conversation, turn and fragment, so a turn assembled twice gets the same
  answer);
* ``sticky`` / ``cooldown`` / ``delay`` counted in user turns of one conversation (the caller
  keeps the timers; :meth:`Activator.activate` says which timers start);
* recursion: the text of activated lorebook entries is scanned again for other lorebook entries,
  up to a depth limit (``exclude_recursion``: cannot be activated that way; ``prevent_recursion``:
  its text does not activate others; ``delay_until_recursion``: only from that level on);
* ``scan_depth``: how many of the latest messages the entry's keys are looked for in (2 when
  unset: SillyTavern's default, the newest message and the one before it);
* a budget for everything triggered (count, characters, estimated tokens), or for lorebook entries
  a token budget of their own (SillyTavern's share of the context, X8); ``ignore_budget`` entries
  are exempt.

The compiled ``Activator`` is immutable and built once per library change, like the word index.
Cost per message grows with the message's length and the number of hits; regex keys are the one
part that is linear in their number (there are few in practice; each runs under the time limit).
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Sequence

from hearth.errors import InvalidInput
from hearth.lorebook.triggers import Match, TriggerIndex
from hearth.text import estimate_tokens

LOGICS = ("and_any", "not_all", "not_any", "and_all")  # SillyTavern's selectiveLogic numbers 0-3
MAX_SCAN_DEPTH = 20
MAX_KEY_CHARS = 1_000
# SillyTavern's ``parseRegexFromString``: ``/pattern/flags`` with JavaScript's flags only, and no
# unescaped ``/`` inside the pattern; anything else, or a pattern that does not compile, is text.
REGEX_KEY_RE = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")
DEFAULT_SCAN_DEPTH = 2  # SillyTavern's world_info_depth default
REGEX_BUDGET_SECONDS = 0.02  # all regex keys of one turn together (CPU time)
MIN_SEARCH_SECONDS = 0.01
_WORD = r"[\w\u0300-\u036f]"
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# Controls and their defaults; anything else an entry carried lives in ``extra`` (for export).
DEFAULTS: dict[str, Any] = {
    "secondary": [], "logic": "and_any", "constant": False, "order": 100, "probability": 100,
    "use_probability": True, "sticky": 0, "cooldown": 0, "delay": 0, "exclude_recursion": False,
    "prevent_recursion": False, "delay_until_recursion": 0, "case_sensitive": None, "whole_words": None,
    "scan_depth": None, "ignore_budget": False, "position": 0, "depth": 4, "role": 0, "comment": "",
    "extra": {},
}


def check_controls(value: Any) -> dict[str, Any]:
    """Validated controls with defaults filled in; raises InvalidInput naming the bad field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("controls must be an object")
    unknown = set(value) - set(DEFAULTS)
    if unknown:
        raise InvalidInput(f"unknown fragment control {sorted(unknown)[0]!r}")
    out = dict(DEFAULTS)
    out.update(value)
    for name in ("constant", "use_probability", "exclude_recursion", "prevent_recursion", "ignore_budget"):
        if not isinstance(out[name], bool):
            raise InvalidInput(f"control {name} must be true or false")
    for name in ("case_sensitive", "whole_words"):
        if out[name] is not None and not isinstance(out[name], bool):
            raise InvalidInput(f"control {name} must be true, false or null")
    for name, low, high in (("order", -1_000_000, 1_000_000), ("probability", 0, 100), ("sticky", 0, 10_000),
                            ("cooldown", 0, 10_000), ("delay", 0, 10_000), ("delay_until_recursion", 0, 100),
                            ("position", 0, 10_000), ("depth", 0, 10_000), ("role", 0, 10)):
        v = out[name]
        if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
            raise InvalidInput(f"control {name} must be a whole number from {low} to {high}")
    if out["scan_depth"] is not None and (not isinstance(out["scan_depth"], int) or isinstance(out["scan_depth"], bool)
                                          or not 0 <= out["scan_depth"] <= 1000):
        raise InvalidInput("control scan_depth must be a whole number from 0 to 1000, or null")
    if out["logic"] not in LOGICS:
        raise InvalidInput(f"control logic must be one of {', '.join(LOGICS)}")
    if not isinstance(out["comment"], str) or len(out["comment"]) > 10_000:
        raise InvalidInput("control comment must be text of at most 10,000 characters")
    if not isinstance(out["extra"], dict):
        raise InvalidInput("control extra must be an object")
    out["secondary"] = check_keys(out["secondary"], "secondary keys")
    return out


def check_keys(keys: Any, what: str = "keys") -> list[str]:
    """Lorebook keys: any non-empty text. A key that looks like ``/.../`` but does not compile is
    kept as literal text, as SillyTavern keeps it (X6)."""
    if not isinstance(keys, (list, tuple)):
        raise InvalidInput(f"{what} must be a list of text")
    out: list[str] = []
    for key in keys:
        if not isinstance(key, str):
            raise InvalidInput(f"{what} must be a list of text")
        key = key.strip()
        if not key:
            continue
        if len(key) > MAX_KEY_CHARS:
            raise InvalidInput(f"a key may be at most {MAX_KEY_CHARS} characters")
        if key not in out:
            out.append(key)
    if len(out) > 200:
        raise InvalidInput(f"at most 200 {what}")
    return out


@functools.lru_cache(maxsize=4096)
def regex_key(key: str) -> Any | None:
    """The compiled pattern of a key SillyTavern reads as a regex (``/pattern/flags``), else None:
    the one test of whether a key is a regex, on import, when compiling and when matching (X6)."""
    import regex  # here, not at the top: only regex keys need it, and short commands start faster (S20)

    m = REGEX_KEY_RE.match(key)
    if m is None or _UNESCAPED_SLASH.search(m.group(1)):
        return None
    flags = 0
    for f in m.group(2):
        if f == "i":
            flags |= regex.IGNORECASE
        elif f == "m":
            flags |= regex.MULTILINE
        elif f == "s":
            flags |= regex.DOTALL
        # g (global), y (sticky) and u (unicode) change nothing for a yes-or-no search
    try:
        return regex.compile(m.group(1).replace("\\/", "/"), flags | regex.V0)
    except (regex.error, OverflowError, RecursionError, ValueError):
        return None


@dataclass(frozen=True)
class Activation:
    """What one turn brings in, and the timers that start with it."""

    matches: list[Match]
    timers: dict[Any, tuple[int, int]] = field(default_factory=dict)  # id -> (sticky_until, cooldown_until)
    regex_timeouts: int = 0


@dataclass(slots=True)
class _Entry:
    id: Hashable
    order: int  # library order
    controls: dict[str, Any]
    keys: tuple[str, ...]
    definition: str
    priority: int
    whole: bool
    case: bool
    depth: int
    simple: bool = True  # no delay, secondary keys, roll or timers: activation needs no checks


class _KeySet:
    """Literal keys (punctuation, case-sensitive, or partial-word): one Aho-Corasick automaton
    over their lower-cased text finds candidates, one compiled pattern each confirms them."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, str, bool, bool]] = []  # (entry slot, key, whole, case)
        self.regexes: list[tuple[int, str]] = []
        self._patterns: dict[int, Any] = {}
        self._automaton: Any = None

    def add(self, slot: int, key: str, whole: bool, case: bool) -> None:
        if regex_key(key) is not None:
            self.regexes.append((slot, key))
        else:
            self.keys.append((slot, key, whole, case))

    def compile(self) -> None:
        if self.keys:
            import ahocorasick_rs

            self._automaton = ahocorasick_rs.AhoCorasick([k[1].lower() for k in self.keys])

    def pattern(self, idx: int) -> Any:
        pat = self._patterns.get(idx)
        if pat is None:
            _, key, whole, case = self.keys[idx]
            body = re.escape(key)
            if whole:
                body = rf"(?<!{_WORD}){body}(?!{_WORD})"
            pat = self._patterns[idx] = re.compile(body, 0 if case else re.IGNORECASE)
        return pat

    def find(self, text: str, low: str) -> dict[int, tuple[int, int, str]]:
        """Entry slot -> (start, end, key) of its earliest literal key in ``text``."""
        found: dict[int, tuple[int, int, str]] = {}
        if self._automaton is None:
            return found
        hits = self._automaton.find_matches_as_indexes(low, overlapping=True)
        if text.isascii():
            # Lower-casing ASCII keeps every offset, so each hit is confirmed where it stands: the
            # same test as the pattern (no word character touching a whole-word key; the exact
            # text for a case-sensitive one), without a search per key.
            size = len(text)
            for idx, start, end in hits:
                slot, key, whole, case = self.keys[idx]
                if whole and ((start and low[start - 1] in _ASCII_WORD) or (end < size and low[end] in _ASCII_WORD)):
                    continue
                if case and text[start:end] != key:
                    continue
                cur = found.get(slot)
                if cur is None or start < cur[0]:
                    found[slot] = (start, end, key)
            return found
        cands = {idx for idx, _, _ in hits}
        for idx in cands:
            m = self.pattern(idx).search(text)
            if m:
                slot, key = self.keys[idx][0], self.keys[idx][1]
                cur = found.get(slot)
                if cur is None or m.start() < cur[0]:
                    found[slot] = (m.start(), m.end(), key)
        return found


class _Clock:
    """The regex time budget of one turn, shared by all regex keys.

    The budget is counted in this thread's CPU time, so a busy machine that pauses the process does
    not use it up; each search still gets a wall-clock limit (what the regex engine checks), never
    less than MIN_SEARCH_SECONDS, so a pause cannot starve an innocent pattern either.
    """

    def __init__(self, seconds: float):
        self.budget = seconds
        self.start = time.thread_time()
        self.timeouts = 0

    def search(self, pattern: Any, text: str) -> Any:
        left = self.budget - (time.thread_time() - self.start)
        if left <= 0:
            self.timeouts += 1
            return None
        try:
            return pattern.search(text, timeout=max(left, MIN_SEARCH_SECONDS))
        except TimeoutError:
            self.timeouts += 1
            return None


class Activator:
    """A compiled fragment library with lorebook controls. Build once per library change."""

    _index: TriggerIndex
    _plain_count: int
    _entries: tuple[_Entry, ...]
    _keyset: _KeySet
    _constants: tuple[int, ...]
    _max_depth: int
    _secondary: dict[tuple[str, bool, bool], Any]
    _constant_matches: tuple[tuple[int, Match], ...]
    _slot_of: dict[Hashable, int]
    _links: dict[int, dict[int, Match]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Activator.build(fragments)")

    @classmethod
    def build(cls, fragments: Iterable[Any]) -> "Activator":
        """Compile fragments in library order. Fragments without ``controls`` keep plain F1 rules."""
        plain: list[Any] = []
        natives = 0
        entries: list[_Entry] = []
        keyset = _KeySet()
        constants: list[int] = []
        seen: set[Hashable] = set()
        max_depth = 1
        for order, frag in enumerate(fragments):
            controls = getattr(frag, "controls", None) or {}
            if frag.id in seen:
                raise InvalidInput(f"fragment id {frag.id!r} appears twice")
            seen.add(frag.id)
            if not controls:
                plain.append(frag)
                natives += 1
                continue
            controls = {**DEFAULTS, **controls}
            extra = controls["extra"] if isinstance(controls["extra"], dict) else {}
            if controls["secondary"] and (("selective" in extra and not extra["selective"])
                                          or (extra.get("book") or {}).get("secondary_off")):
                # SillyTavern applies secondary keys only to a ``selective`` entry.
                controls["secondary"] = []
            whole = controls["whole_words"] is not False
            case = controls["case_sensitive"] is True
            depth = controls["scan_depth"]
            depth = DEFAULT_SCAN_DEPTH if depth is None else min(depth, MAX_SCAN_DEPTH)
            max_depth = max(max_depth, depth)
            slot = len(entries)
            simple = not (controls["delay_until_recursion"] or controls["delay"] or controls["secondary"]
                          or (controls["use_probability"] and controls["probability"] < 100)
                          or controls["sticky"] or controls["cooldown"])
            entry = _Entry(frag.id, order, controls, tuple(frag.triggers), frag.definition or "",
                           getattr(frag, "priority", 0) or 0, whole, case, depth, simple)
            entries.append(entry)
            if controls["constant"]:
                constants.append(slot)
            # A key listed twice counts once. Lorebook keys never take the word index's plural
            # forms: SillyTavern matches the key as written (X8).
            for key in dict.fromkeys(entry.keys):
                keyset.add(slot, key, whole, case)
        self = object.__new__(cls)
        keyset.compile()
        self._index = TriggerIndex.build(plain)
        self._plain_count = natives
        self._entries = tuple(entries)
        self._keyset = keyset
        self._constants = tuple(constants)
        self._max_depth = max_depth
        self._secondary = {}
        self._constant_matches = tuple((slot, _lore_match(entries[slot], "", -1, -1, reason="constant"))
                                       for slot in constants)
        self._slot_of = {e.id: slot for slot, e in enumerate(entries)}
        # Which entries each entry's text activates (recursion) depends on the library only, so it is
        # worked out once per entry, on first need.
        self._links = {}
        return self

    def __len__(self) -> int:
        return self._plain_count + len(self._entries)

    @property
    def lore_count(self) -> int:
        return len(self._entries)

    @property
    def scan_depth(self) -> int:
        """How many of the latest messages the activation reads (the deepest entry's scan depth)."""
        return self._max_depth

    def activate(self, messages: Sequence[str], *, turn: int = 1, seed: int = 0,
                 timers: Mapping[Any, tuple[int, int]] | None = None, budget_chars: int | None = None,
                 max_fragments: int | None = None, budget_tokens: int | None = None, recursion_depth: int = 2,
                 regex_seconds: float = REGEX_BUDGET_SECONDS, lore_budget_tokens: int | None = None) -> Activation:
        """Fragments brought in for the turn whose latest message is ``messages[-1]``.

        ``lore_budget_tokens`` gives lorebook entries a token budget of their own (SillyTavern's
        share of the context); the other budgets then apply to plain fragments only."""
        if not messages:
            return Activation([])
        text = messages[-1]
        timers = timers or {}
        clock = _Clock(regex_seconds)
        # Plain fragments read the newest message only; lorebook entries their own scan depth.
        plain_matches: list[Match] = self._index.match(text) if self._plain_count else []
        lore_hits: dict[int, tuple[int, Match]] = {}  # slot -> (message age, match)
        window = list(messages[-self._max_depth:]) if self._entries else []
        for age, message in enumerate(reversed(window)):
            if not message:
                continue
            low = message.lower()
            for slot, (start, end, key) in self._keyset.find(message, low).items():
                if age < self._entries[slot].depth:
                    cur = lore_hits.get(slot)
                    if cur is None or age < cur[0] or (age == cur[0] and start < cur[1].position):
                        lore_hits[slot] = (age, _lore_match(self._entries[slot], key, start, end))
            for slot, key in self._keyset.regexes:
                if slot in lore_hits or age >= self._entries[slot].depth:
                    continue
                m = clock.search(self._regex(key), message)
                if m:
                    lore_hits[slot] = (age, _lore_match(self._entries[slot], key, m.start(), m.end()))

        active: dict[int, Match] = {}
        started: dict[Any, tuple[int, int]] = {}
        if self._entries:
            scanned = "\n".join(window)
            # Sticky entries stay in without a key or a roll.
            for fid, (sticky_until, _) in timers.items():
                held = self._slot_of.get(fid)
                if held is not None and turn <= sticky_until:
                    active[held] = _lore_match(self._entries[held], "", -1, -1, reason="sticky")
            candidates = list(self._constant_matches)
            candidates += [(slot, m) for slot, (_, m) in sorted(lore_hits.items())]
            for slot, m in candidates:
                self._consider(slot, m, scanned, turn, seed, timers, active, started, clock, level=0)
            # Recursion: activated entries' text may activate further lorebook entries; an entry
            # reached this way has its secondary keys looked for in the text that reached it.
            frontier = [s for s in active if not self._entries[s].controls["prevent_recursion"]]
            for level in range(1, recursion_depth + 1):
                if not frontier:
                    break
                before = set(active)
                for source in frontier:
                    for slot, m in self._linked(source).items():
                        if slot in active or self._entries[slot].controls["exclude_recursion"]:
                            continue
                        self._consider(slot, m, self._entries[source].definition, turn, seed, timers, active,
                                       started, clock, level=level)
                frontier = [s for s in active if s not in before and not self._entries[s].controls["prevent_recursion"]]

        ranked = [(0, m.position, i, m, False) for i, m in enumerate(plain_matches)]
        for slot, m in active.items():
            entry = self._entries[slot]
            ranked.append((1, -entry.controls["order"], entry.order, m, entry.controls["ignore_budget"]))
        if lore_budget_tokens is None:
            kept = _budget(ranked, budget_chars, max_fragments, budget_tokens)
        else:
            kept = (_budget([t for t in ranked if t[0] == 0], budget_chars, max_fragments, budget_tokens)
                    + _budget([t for t in ranked if t[0] == 1], None, None, lore_budget_tokens))
        # Message order for plain fragments, then lorebook entries by insertion order (lowest first).
        kept.sort(key=lambda t: (t[0], t[1] if t[0] == 0 else -t[1], t[2]))
        kept_ids = {t[3].fragment_id for t in kept}
        return Activation([t[3] for t in kept], {k: v for k, v in started.items() if k in kept_ids},
                          clock.timeouts)

    def _consider(self, slot: int, m: Match, scanned: str, turn: int, seed: int,
                  timers: Mapping[Any, tuple[int, int]], active: dict[int, Match],
                  started: dict[Any, tuple[int, int]], clock: _Clock, level: int) -> None:
        if slot in active:
            return
        entry = self._entries[slot]
        if entry.simple and entry.id not in timers:
            active[slot] = m
            return
        c = entry.controls
        if level < c["delay_until_recursion"]:
            return
        if c["delay"] and turn < c["delay"]:
            return
        if turn <= timers.get(entry.id, (0, 0))[1]:
            return  # cooling down
        if m.reason != "constant" and c["secondary"] and not self._secondary_ok(entry, scanned, clock):
            return
        if c["use_probability"] and c["probability"] < 100 and _roll(seed, entry.id) >= c["probability"]:
            return
        active[slot] = m
        if c["sticky"] or c["cooldown"]:
            sticky_until = turn + c["sticky"] if c["sticky"] else 0
            cooldown_until = max(sticky_until, turn) + c["cooldown"] if c["cooldown"] else 0
            started[entry.id] = (sticky_until, cooldown_until)

    def _secondary_ok(self, entry: _Entry, text: str, clock: _Clock) -> bool:
        hits = [self._key_in(key, entry.whole, entry.case, text, clock) for key in entry.controls["secondary"]]
        logic = entry.controls["logic"]
        if logic == "and_any":
            return any(hits)
        if logic == "and_all":
            return all(hits)
        if logic == "not_any":
            return not any(hits)
        return not all(hits)  # not_all

    def _key_in(self, key: str, whole: bool, case: bool, text: str, clock: _Clock) -> bool:
        if regex_key(key) is not None:
            return clock.search(self._regex(key), text) is not None
        cache_key = (key, whole, case)
        pat = self._secondary.get(cache_key)
        if pat is None:
            body = re.escape(key)
            if whole:
                body = rf"(?<!{_WORD}){body}(?!{_WORD})"
            pat = self._secondary[cache_key] = re.compile(body, 0 if case else re.IGNORECASE)
        return pat.search(text) is not None

    def _regex(self, key: str) -> Any:
        pat = self._secondary.get((key, True, True))
        if pat is None:
            pat = self._secondary[(key, True, True)] = regex_key(key)
        return pat

    def _linked(self, slot: int) -> dict[int, Match]:
        links = self._links.get(slot)
        if links is None:
            found = self._scan(self._entries[slot].definition, _Clock(REGEX_BUDGET_SECONDS))
            found.pop(slot, None)
            links = self._links[slot] = {
                s: Match(m.fragment_id, m.trigger, m.position, m.end, m.priority, m.definition_chars, "recursion")
                for s, m in found.items()}
        return links

    def _scan(self, text: str, clock: _Clock) -> dict[int, Match]:
        """Lorebook entries whose primary keys appear in ``text`` (recursion passes)."""
        found: dict[int, Match] = {}
        for slot, (start, end, key) in self._keyset.find(text, text.lower()).items():
            found.setdefault(slot, _lore_match(self._entries[slot], key, start, end))
        for slot, key in self._keyset.regexes:
            if slot not in found:
                hit = clock.search(self._regex(key), text)
                if hit:
                    found[slot] = _lore_match(self._entries[slot], key, hit.start(), hit.end())
        return found


def _lore_match(entry: _Entry, key: str, start: int, end: int, reason: str = "key") -> Match:
    return Match(entry.id, key, start, end, entry.priority, len(entry.definition), reason)


def _roll(seed: int, fragment_id: Hashable) -> int:
    digest = hashlib.blake2b(f"{seed}:{fragment_id}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % 100


def _budget(ranked: list[tuple[int, int, int, Match, bool]], budget_chars: int | None, max_fragments: int | None,
            budget_tokens: int | None) -> list[tuple[int, int, int, Match, bool]]:
    """Keep the highest-ranked: priority, then constants/earliest, within every budget given."""
    if budget_chars is None and max_fragments is None and budget_tokens is None:
        return list(ranked)
    order = sorted(ranked, key=lambda t: (not t[4], -t[3].priority, t[0], t[1], t[2]))
    kept = []
    chars = tokens = count = 0
    for item in order:
        m, free = item[3], item[4]
        if free:
            kept.append(item)
            continue
        size = m.definition_chars
        cost = estimate_tokens(size)
        if max_fragments is not None and count >= max_fragments:
            continue
        if budget_chars is not None and chars + size > budget_chars:
            continue
        if budget_tokens is not None and tokens + cost > budget_tokens:
            continue
        kept.append(item)
        chars, tokens, count = chars + size, tokens + cost, count + 1
    return kept
