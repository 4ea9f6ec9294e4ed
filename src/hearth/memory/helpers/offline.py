"""``OfflineHelper``: deterministic, extractive and rule-based versions of the helper tasks (G3).

Nothing here guesses like a model would. The summary is built from the most frequent topic words
and the most salient recent sentence of the person; live context comes from small word lists
(mood words, time and event cues, need phrases); state changes are proposed only when a message
names a status field together with one of its configured options; fragment suggestions come from a
few plain patterns ("my sister Mia", "I'm allergic to ...", "remember that ..."). Every result is
marked ``source="offline"``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from hearth.errors import InvalidInput
from hearth.lorebook.triggers import fold, normalise_trigger
from hearth.memory.duplicates import contradicts
from hearth.memory.helpers.base import (
    CAPSULE_MAX_CHARS,
    CAPSULE_SECTIONS,
    SUMMARY_MAX_WORDS,
    CapsuleResult,
    FactSuggestion,
    FragmentSuggestion,
    LiveContextResult,
    MemorySuggestion,
    ReviewInput,
    StateChange,
    StatusField,
    SummaryResult,
    TurnText,
    clamp_words,
    clip,
    content_words,
    one_line,
    sentences,
)

MOOD_WORDS = (
    "tired", "exhausted", "drained", "anxious", "worried", "nervous", "stressed", "overwhelmed",
    "sad", "down", "low", "lonely", "upset", "angry", "frustrated", "annoyed", "hurt", "scared",
    "afraid", "happy", "glad", "excited", "proud", "relieved", "grateful", "calm", "content",
    "hopeful", "better", "sick", "ill", "poorly", "restless", "bored", "confused", "guilty",
)
_MOOD_RE = re.compile(r"\b(" + "|".join(MOOD_WORDS) + r")\b", re.IGNORECASE)
_TIME_CUE = re.compile(
    r"\b(today|tonight|tomorrow|this (?:morning|afternoon|evening|week|weekend)|next (?:week|month|\w+day)|"
    r"on (?:mon|tues|wednes|thurs|fri|satur|sun)day|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"appointment|meeting|interview|exam|deadline|birthday|trip|flight|surgery|doctor|dentist|"
    r"hospital|party|wedding|funeral|move|moving|visit)\b", re.IGNORECASE)
_FUTURE_CUE = re.compile(
    r"\b(tomorrow|tonight|later|next|soon|going to|gonna|will|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"appointment|interview|exam|deadline|surgery)\b", re.IGNORECASE)
_NEED_CUE = re.compile(
    r"\b(i need|i really need|help me|can you|could you|would you|i want|i'd like|i would like|please)\b",
    re.IGNORECASE)
_COMMIT_CUE = re.compile(
    r"\b(will|going to|plan|promise|need to|have to|tomorrow|next|later|remind|unresolved|still)\b|\?",
    re.IGNORECASE)
_NEGATORS = frozenset({"not", "never", "no", "nor"})


def _negated(prefix: str, window: int = 3) -> bool:
    """A negation among the few words right before a mention ("is not at the farm")."""
    near = [w.lower().strip(",.;:!?\"'") for w in prefix.split()[-window:]]
    return any(w in _NEGATORS or w.endswith(("n't", "n\u2019t")) for w in near)

_RELATIONS = ("sister", "brother", "mum", "mom", "mother", "dad", "father", "son", "daughter", "partner",
              "wife", "husband", "boyfriend", "girlfriend", "friend", "boss", "colleague", "grandma",
              "grandmother", "grandpa", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew",
              "therapist", "doctor", "neighbour", "neighbor")
_PETS = ("dog", "cat", "puppy", "kitten", "horse", "pony", "rabbit", "bird", "parrot", "hamster",
         "guinea pig", "tortoise", "turtle", "fish", "lizard", "snake")
_NAME = r"([A-Z][\w'\u2019-]{1,40})"
_RELATION_RE = re.compile(
    r"\b(?i:my (" + "|".join(_RELATIONS + _PETS) + r")(?:'s name is|,? is (?:called|named)"
    r"|,? (?:who is |whose name is )?called|,? named|))\s+" + _NAME)
_ALLERGY_RE = re.compile(r"\bI(?:'m| am) allergic to ([A-Za-z][\w -]{1,40}?)(?:[.,!?;]|$| and | but )",
                         re.IGNORECASE)
_FAVOURITE_RE = re.compile(r"\bmy favou?rite (\w+) is ([A-Za-z][\w' -]{1,40}?)(?:[.,!?;]|$| and | but )",
                           re.IGNORECASE)
_PREFERENCE_RE = re.compile(
    r"\bI (?:really |truly |absolutely )?(love|like|enjoy|adore|prefer|hate|dislike|can't stand|cannot stand)"
    r" ([^.!?;]{3,80})", re.IGNORECASE)
_PLACE_RE = re.compile(r"\bI (live|work|grew up|was born) (in|at|for) ([A-Z][^.!?;,]{1,60})")
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_DATE_RE = re.compile(rf"\b(\d{{1,2}}(?:st|nd|rd|th)? (?:{_MONTHS})(?: \d{{4}})?|(?:{_MONTHS}) \d{{1,2}}"
                      rf"(?:st|nd|rd|th)?(?:,? \d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}})\b")
_REMEMBER_RE = re.compile(r"\b(?:please )?remember (?:that )?(.{8,200}?)(?:[.!?]|$)", re.IGNORECASE)


class OfflineHelper:
    name = "offline"

    # -- rolling summary (RS1) -------------------------------------------------------------------
    def summarise(self, previous: str, section: Sequence[TurnText],
                  max_words: int = SUMMARY_MAX_WORDS) -> SummaryResult:
        scores: Counter[str] = Counter()
        first_seen: dict[str, int] = {}
        position = 0
        for word in content_words(previous):
            scores[word] += 1
            first_seen.setdefault(word, position)
            position += 1
        for turn in section:
            weight = 2 if turn.role == "user" else 1
            for word in content_words(turn.text):
                scores[word] += weight
                first_seen.setdefault(word, position)
                position += 1
        topics = sorted(scores, key=lambda w: (-scores[w], first_seen[w]))[:4]
        best = _salient_sentence(section, scores)
        parts = []
        if topics:
            parts.append("Thread about " + _join(topics))
        if best:
            parts.append(f'the person most recently said "{clip(best.rstrip(".!?"), 160)}"')
        text = "; ".join(parts) if parts else "Thread with no recorded topics yet"
        text = clamp_words(text, max_words)
        if not text.endswith(("…", ".", "\"")):
            text += "."
        elif text.endswith("\""):
            text += "."
        return SummaryResult(text=one_line(text), source="offline")

    # -- live context (LC1) and nudges (LC2) ------------------------------------------------------
    def live_context(self, previous: LiveContextResult | None, recent: Sequence[TurnText]) -> LiveContextResult:
        user_sentences = [s for t in recent if t.role == "user" for s in sentences(t.text)]
        newest_first = list(reversed(user_sentences))
        moods: list[str] = []
        for sentence in newest_first:
            for match in _MOOD_RE.finditer(sentence):
                word = match.group(1).lower()
                if word not in moods and not _negated(sentence[:match.start()], 2):
                    moods.append(word)
        events = _unique([clip(s, 120) for s in newest_first if _TIME_CUE.search(s)])[:3]
        needs = _unique([clip(s, 120) for s in newest_first if _NEED_CUE.search(s)])[:2]
        mood = ", ".join(moods[:3]) or (previous.mood if previous else "")
        events_text = "; ".join(events) or (previous.events if previous else "")
        needs_text = "; ".join(needs) or (previous.needs if previous else "")
        nudges = tuple(_unique([f"Check in later about: \"{clip(s, 90)}\"" for s in newest_first
                                if _TIME_CUE.search(s) and _FUTURE_CUE.search(s)]))[:2]
        summary = "Offline notes: mood " + (mood or "unclear") + "; " + (
            clip(events[0], 60) if events else "no events noted")
        return LiveContextResult(mood=mood, events=events_text, needs=needs_text, summary=summary,
                                 nudges=nudges, source="offline")

    # -- continuity capsules (E3) ------------------------------------------------------------------
    def write_capsule(self, previous: str, turns: Sequence[TurnText],
                      channels: Sequence[str] = ()) -> CapsuleResult:
        return write_capsule(previous, turns, channels)

    # -- state-change detection (HS2) -------------------------------------------------------------
    def detect_state_change(self, fields: Sequence[StatusField], messages: Sequence[TurnText]) -> list[StateChange]:
        found: dict[str, StateChange] = {}
        for turn in messages:
            if turn.role != "user":
                continue
            for sentence in sentences(turn.text):
                for status in fields:
                    change = _detect_one(status, sentence)
                    if change is not None:
                        found[status.name] = change  # the latest mention wins
        return [c for c in found.values()
                if not any(f.name == c.field and (f.value or "").casefold() == c.value.casefold() for f in fields)]

    # -- memories mined from an archive (X4) -----------------------------------------------------------
    def extract_memories(self, turns: Sequence[TurnText]) -> list[MemorySuggestion]:
        out: list[MemorySuggestion] = []
        seen: set[str] = set()
        for turn in turns:
            if turn.role != "user":
                continue
            for sentence in sentences(turn.text):
                for category, text, why in mine_sentence(sentence):
                    key = text.casefold()
                    if key in seen or len(text) < 12:
                        continue
                    seen.add(key)
                    out.append(MemorySuggestion(text, category, sentence, f"The person's own words: {why}.",
                                                "offline"))
        return out

    # -- facts for retrieval (E2, A2) -------------------------------------------------------------
    def extract_facts(self, turns: Sequence[TurnText]) -> list[FactSuggestion]:
        """The memory rules over the person's own sentences, each statement citing its turn: no
        model, so a fact offline restates what a turn says (the turn's date comes with it)."""
        out: list[FactSuggestion] = []
        seen: set[str] = set()
        for turn in turns:
            if turn.role != "user" or not turn.message_id:
                continue
            for sentence in sentences(turn.text):
                for _category, text, _why in mine_sentence(sentence):
                    key = text.casefold()
                    if key in seen or len(text) < 12:
                        continue
                    seen.add(key)
                    out.append(FactSuggestion(clip(text, 290), (turn.message_id,), "offline"))
        return out

    # -- fragment suggestions (F3) ----------------------------------------------------------------
    def propose_fragments(self, review: ReviewInput) -> list[FragmentSuggestion]:
        existing: dict[str, dict] = {}
        for fragment in review.fragments:
            for trigger in fragment.get("triggers", ()):
                existing.setdefault(fold(one_line(trigger)), fragment)
        out: list[FragmentSuggestion] = []
        seen: set[str] = set()
        for turn in review.messages:
            if turn.role != "user":
                continue
            for sentence in sentences(turn.text):
                for category, triggers, definition, reason in _patterns(sentence):
                    try:
                        for trigger in triggers:
                            normalise_trigger(trigger)
                    except InvalidInput:
                        continue
                    key = fold(triggers[0])
                    if key in seen:
                        continue
                    seen.add(key)
                    holder = next((existing[fold(t)] for t in triggers if fold(t) in existing), None)
                    if holder is None:
                        out.append(FragmentSuggestion("add", category, tuple(triggers), definition, reason,
                                                      evidence=sentence, source="offline"))
                    elif not _covers(holder.get("definition", ""), definition):
                        merged = holder["definition"].rstrip(". ") + ". " + definition
                        out.append(FragmentSuggestion(
                            "update", holder.get("category", category), tuple(holder.get("triggers", triggers)),
                            merged, reason + " It adds to an existing fragment.", fragment_id=holder["id"],
                            evidence=sentence, source="offline"))
        return out

    def judge_contradictions(self, fact: str, kept: Sequence[tuple[int, str]]) -> dict[int, tuple[bool, str]]:
        """The offline rules' verdict on each pair (B3): what the duplicate check already applies."""
        return {memory_id: (contradicts(fact, text), "offline rules") for memory_id, text in kept}


def third_person(sentence: str) -> str:
    """The person's own sentence told about them: "I" -> "The person", "my" -> "the person's"."""
    out = re.sub(r"\bI(?:'m| am)\b", "the person is", sentence)
    out = re.sub(r"\bI've\b", "the person has", out)
    out = re.sub(r"\bI\b", "the person", out)
    out = re.sub(r"\b[Mm]y\b", "the person's", out)
    out = re.sub(r"\b[Mm]e\b", "the person", out)
    out = one_line(out).rstrip(" .!?;,")
    return (out[:1].upper() + out[1:] + ".") if out else ""


def mine_sentence(sentence: str) -> list[tuple[str, str, str]]:
    """(category, memory text, reason) found in one sentence of the person's own words."""
    found: list[tuple[str, str, str]] = []
    for m in _RELATION_RE.finditer(sentence):
        relation, name = m.group(1).lower(), m.group(2)
        found.append(("people", f"The person's {relation} is called {name}.", f"names their {relation}"))
    allergy = _ALLERGY_RE.search(sentence)
    if allergy:
        found.append(("facts", f"The person is allergic to {allergy.group(1).strip()}.", "an allergy"))
    favourite = _FAVOURITE_RE.search(sentence)
    if favourite:
        found.append(("preferences", f"The person's favourite {favourite.group(1).lower()} is "
                      f"{favourite.group(2).strip()}.", "a favourite"))
    preference = _PREFERENCE_RE.search(sentence)
    if preference:
        verb = preference.group(1).lower()
        verb = {"can't stand": "can't stand", "cannot stand": "can't stand"}.get(verb, verb + "s")
        found.append(("preferences", f"The person {verb} {preference.group(2).strip()}.", "a preference"))
    if _PLACE_RE.search(sentence):
        found.append(("facts", third_person(sentence), "where they live or work"))
    if _DATE_RE.search(sentence) and not any(c == "facts" and t == third_person(sentence) for c, t, _ in found):
        found.append(("dates", third_person(sentence), "a date that matters"))
    return found


def _salient_sentence(section: Sequence[TurnText], scores: Counter[str]) -> str:
    candidates = [(i, s) for i, t in enumerate(section) if t.role == "user" for s in sentences(t.text)]
    if not candidates:
        candidates = [(i, s) for i, t in enumerate(section) for s in sentences(t.text)]
    best, best_score = "", -1.0
    total = max(1, len(section))
    for index, sentence in candidates:
        found = content_words(sentence)
        if not found:
            continue
        score = sum(scores[w] for w in found) / (1 + len(found) / 8)
        score *= 1.0 + index / total  # later sentences carry the current direction
        if _COMMIT_CUE.search(sentence):
            score *= 1.5
        if score >= best_score:
            best, best_score = sentence, score
    return best


def _detect_one(status: StatusField, sentence: str) -> StateChange | None:
    names = [status.name, *status.aliases]
    named = next((n for n in names if _contains(sentence, n)), None)
    if named is None or not status.options:
        return None
    hits = []
    for option in status.options:
        # The whole option ("at the Farm") counts most; its core ("Farm") also counts, so
        # "going to the farm" is noticed, but a whole-option mention of another value wins.
        for exact, phrase in ((1, option), (0, _core(option))):
            match = _find(sentence, phrase) if phrase else None
            if match is not None and not _negated(sentence[:match.start()]):
                hits.append((exact, len(phrase), match.start(), option))
                break
    if not hits:
        return None
    best = max(hits)
    if best[0] == 0 and len({h[3] for h in hits}) > 1:
        return None  # only partial mentions of different options: too unclear to suggest
    option = best[3]
    return StateChange(field=status.name, value=option, evidence=sentence, source="offline",
                       reason=f'The person mentioned "{named}" together with "{option}".')


_LEADING = frozenset({"at", "with", "in", "on", "to", "the", "a", "an", "my", "their", "his", "her", "our", "by"})


def _core(option: str) -> str:
    """An option without its leading prepositions and articles ("at the Farm" -> "Farm")."""
    parts = option.split()
    while parts and parts[0].lower() in _LEADING:
        parts.pop(0)
    core = " ".join(parts)
    return core if core and core.lower() != option.lower() else ""


def _find(text: str, phrase: str) -> re.Match | None:
    pattern = r"\s+".join(re.escape(p) for p in phrase.split())
    return re.search(rf"(?<!\w){pattern}(?!\w)", text, re.IGNORECASE) if pattern else None


def _contains(text: str, phrase: str) -> bool:
    # Whole words, case-insensitive; other spellings ("kids" for "Children") are field aliases.
    return _find(text, phrase) is not None


def _patterns(sentence: str):
    """(category, triggers, definition, reason) for each durable fact the sentence states."""
    for match in _RELATION_RE.finditer(sentence):
        relation, name = match.group(1).lower(), match.group(2).rstrip("'\u2019s") or match.group(2)
        category = "pets" if relation in _PETS else "people"
        yield (category, [name], f"{name} is the person's {relation}.",
               f"The person mentioned their {relation} {name} by name.")
    for match in _ALLERGY_RE.finditer(sentence):
        thing = one_line(match.group(1))
        yield ("health", [thing, "allergy"], f"The person is allergic to {thing}.",
               "The person stated an allergy.")
    for match in _FAVOURITE_RE.finditer(sentence):
        kind, value = match.group(1).lower(), one_line(match.group(2))
        yield ("preferences", [kind], f"The person's favourite {kind} is {value}.",
               f"The person named a favourite {kind}.")
    for match in _REMEMBER_RE.finditer(sentence):
        clause = one_line(match.group(1))
        keys = _unique(content_words(clause))[:2]
        if keys:
            yield ("notes", keys, clip(clause[0].upper() + clause[1:], 300).rstrip(".") + ".",
                   "The person asked for this to be remembered.")


_CORRECTION_CUE = re.compile(r"\b(actually|i meant|correction|to be clear|that's wrong|that is wrong|not \w+ but)\b",
                             re.IGNORECASE)
_PREFERENCE_CUE = re.compile(r"\b(i prefer|i(?:'d| would) rather|i (?:really )?(?:like|love|enjoy|hate|dislike)|"
                             r"i don't like|i do not like|my favou?rite)\b", re.IGNORECASE)
_PROMISE_CUE = re.compile(r"\b(i will|i'll|we will|we'll|going to|promise|remind|plan to|next time)\b",
                          re.IGNORECASE)
CAPSULE_ITEMS = 6  # per section, newest kept


def _stated_facts(turns: Sequence[TurnText]) -> list[str]:
    """Durable facts the person stated, by the same plain patterns as fragment suggestions."""
    out: list[str] = []
    for turn in turns:
        if turn.role != "user":
            continue
        for sentence in sentences(turn.text):
            for _category, _triggers, definition, _reason in _patterns(sentence):
                if definition.casefold() not in (o.casefold() for o in out):
                    out.append(definition)
    return out


def parse_capsule(text: str) -> dict[str, list[str]]:
    """The bullet items of each section of a capsule rendered by ``render_capsule``."""
    found: dict[str, list[str]] = {name: [] for name in CAPSULE_SECTIONS}
    current = None
    for line in (text or "").splitlines():
        heading = line.rstrip(":").strip()
        if heading in found:
            current = heading
        elif current and line.startswith("- "):
            found[current].append(line[2:].strip())
    return found


def render_capsule(sections: dict[str, list[str]], label: str = "") -> str:
    lines = [label] if label else []
    for name in CAPSULE_SECTIONS:
        items = [i for i in sections.get(name, []) if i]
        if items:
            lines.append(f"{name}:")
            lines.extend(f"- {item}" for item in items)
    text = "\n".join(lines)
    if len(text) > CAPSULE_MAX_CHARS and "\n- " in text:
        # Drop the oldest item of the largest section until it fits.
        largest = max(sections, key=lambda k: len(sections[k]))
        return render_capsule({**sections, largest: sections[largest][1:]}, label)
    return text


OFFLINE_CAPSULE_LABEL = "(offline extractive capsule: sentences taken from the conversation, not a model summary)"


def write_capsule(previous: str, turns: Sequence[TurnText], channels: Sequence[str] = ()) -> CapsuleResult:
    """An extractive capsule: the previous capsule's items merged with what the newest turns state."""
    sections = parse_capsule(previous)

    def add(section: str, item: str) -> None:
        item = clip(item, 240)
        items = [i for i in sections[section] if i.casefold() != item.casefold()]
        sections[section] = (items + [item])[-CAPSULE_ITEMS:]

    for fact in _stated_facts(turns):
        add("Established facts", fact)
    for turn in turns:
        for sentence in sentences(turn.text):
            if _CORRECTION_CUE.search(sentence):
                add("Corrections", sentence)
            if turn.role == "user" and _PREFERENCE_CUE.search(sentence):
                add("Preferences", sentence)
            if _PROMISE_CUE.search(sentence):
                add("Commitments", ("The companion said: " if turn.role == "assistant" else "The person said: ")
                    + sentence)
    last_user = [t for t in turns if t.role == "user"][-3:]
    open_items = [s for t in last_user for s in sentences(t.text) if s.endswith("?") or _NEED_CUE.search(s)]
    if open_items:
        sections["Unresolved work"] = [clip(s, 240) for s in open_items][-CAPSULE_ITEMS:]
    used = sorted(set(channels))
    if len(used) > 1:
        sections["Cross-channel context"] = [f"Recent turns came through {', '.join(used)}."]
    return CapsuleResult(render_capsule(sections, OFFLINE_CAPSULE_LABEL), "offline")


def _covers(existing: str, new: str) -> bool:
    have = set(content_words(existing))
    return set(content_words(new)) <= have


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
