"""Duplicates and contradictions among memories (B3).

A new memory, a suggested memory or an imported fact is compared with the person's current
memories before it is stored:

- **duplicate**: it says the same thing. Lexical similarity (the larger of word-set Jaccard and the
  containment of the shorter text's content words in the longer one, after folding case,
  punctuation, stop words and simple plurals) at or above ``LEXICAL_THRESHOLD``, or, when an
  embedder is given, cosine similarity of the two embeddings at or above ``EMBEDDING_THRESHOLD``.
- **contradiction**: same subject, different value. Offline rules read "<subject> <relation>
  <value>" for common relations ("lives in", "works at", "is allergic to", "'s favourite colour
  is", "is called", ...); when two facts share subject and relation but not value, they disagree.
  When a model provider is configured, a **judge** (the model helper) is also asked about the
  same-subject memories the rules did not find contradicted (at most ``JUDGE_CANDIDATES``, the most
  similar first); its "contradicts" verdicts join the findings. When the judge fails, the offline
  verdict stands and the finding says so (``judge="offline"``, ``fallback`` = the error code).

The thresholds were tuned on half of a labelled set of pairs (benchmarks/data/memory_pairs.jsonl)
and measured on the other half; see docs/memory.md and docs/benchmarks.md.

Nothing is dropped: a conflicting fact becomes a ``memory_add`` suggestion in the review queue
carrying both texts, and the owner decides: ``merge`` (one memory, reworded as a correction),
``supersede`` (the old meaning is retired, B1) or ``keep_both``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Protocol, Sequence

import numpy as np

from hearth.errors import HearthError
from hearth.retrieval.semantic import model_id
from hearth.store import Connection
from hearth.store.queries import memories
from hearth.text import WORD_RE

LEXICAL_THRESHOLD = 0.70
EMBEDDING_THRESHOLD = 0.84
RESOLUTIONS = ("merge", "supersede", "keep_both")
JUDGE_CANDIDATES = 5  # same-subject memories the model judge is asked about, per new fact
# Vectors of fact texts, by embedder and text. A new fact is compared with every current memory:
# embedding all of them again for each suggestion held the write lock for 38 s with 2,000 memories
# (docs/benchmarks.md). 20,000 vectors of 384 floats are 30 MiB at most.
VECTOR_CACHE_SIZE = 20_000
_VECTORS: "OrderedDict[tuple[str, str], np.ndarray]" = OrderedDict()
_VECTORS_LOCK = threading.Lock()

_STOP = frozenset("""
a an the and or but of to in on at for with from by as is are was were be been being am do does did
has have had it its this that these those i me my mine you your he him his she her they them their we
us our very really just also too so then there here than not no yes will would can could should shall
may might must about into over under up down out off again once all any both each few more most other
some such only own same s t don now
""".split())

_WORD = WORD_RE

# Relations the contradiction rules read, most specific first. Each maps phrasings to one key.
_RELATIONS: tuple[tuple[str, str], ...] = (
    (r"(?:'s|s') favou?rite (\w+(?: \w+)?) (?:is|are)", "favourite:{0}"),
    (r"favou?rite (\w+(?: \w+)?) (?:is|are)", "favourite:{0}"),
    (r"(?:is|are) allergic to", "allergy"),
    (r"(?:lives|live|is living|are living) (?:in|at|on)", "lives"),
    (r"(?:moved|has moved|have moved) to", "lives"),
    (r"(?:works|work|is working|are working) (?:at|for)", "works_at"),
    (r"(?:works|work) as(?: an?)?", "works_as"),
    (r"(?:is|are) (?:called|named)", "name"),
    (r"(?:'s|s') name is", "name"),
    (r"(?:was|were) born (?:in|on)", "born"),
    (r"(?:is|are) (\d+) years old", "age"),
    (r"(?:drives|drive)(?: an?)?", "drives"),
    (r"(?:goes|go) to", "goes_to"),
    (r"(?:studies|study)", "studies"),
    (r"(?:is|are) married to", "married"),
    (r"(?:prefers|prefer)", "prefers"),
    (r"(?:hates|hate|dislikes|dislike)", "dislikes"),
    (r"(?:loves|love|likes|like|enjoys|enjoy)", "likes"),
    (r"(?:has|have) (?:an?|two|three|one) (\w+)", "has:{0}"),
    (r"(?:is|are) (?:an?)", "is_a"),
)
_COMPILED = [(re.compile(r"^(.{2,60}?)\s+" + pattern + r"\s+(.+)$", re.IGNORECASE), key)
             for pattern, key in _RELATIONS]
_NEGATION = re.compile(r"\b(?:not|no longer|never|n't|isn't|doesn't|don't|stopped)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One existing memory a new fact repeats or contradicts."""

    memory_id: int
    existing_text: str
    relation: str  # duplicate | contradiction
    score: float
    reason: str
    judge: str = "offline"  # who read the pair: offline rules, or the model judge
    fallback: str | None = None  # the model judge was configured but failed (its error code)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Judge(Protocol):
    """Asked whether a new fact contradicts each of some kept facts (the model helper)."""

    def judge_contradictions(self, fact: str, kept: Sequence[tuple[int, str]]) -> dict[int, tuple[bool, str]]: ...


@dataclass(frozen=True)
class Judgement:
    """What the judge said about one new fact: memory id -> reason, for the pairs it called a
    contradiction; ``asked`` the pairs it was asked about; ``fallback`` its error code when it failed
    (then the offline verdict stands for every pair)."""

    contradicts: dict[int, str]
    asked: int = 0
    fallback: str | None = None


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Content words: folded, stop words out, simple plurals and possessives reduced."""
    out = []
    for w in _WORD.findall(text.casefold().replace("’", "'")):
        w = w.removesuffix("'s")
        if w and w not in _STOP:
            out.append(_stem(w))
    return out


@lru_cache(maxsize=VECTOR_CACHE_SIZE)
def _word_set(text: str) -> frozenset[str]:
    return frozenset(words(text))


def lexical_similarity(a: str, b: str) -> float:
    """max(Jaccard of the content-word sets, containment of the smaller set in the larger)."""
    sa, sb = _word_set(a), _word_set(b)
    if not sa or not sb:
        return 1.0 if a.strip().casefold() == b.strip().casefold() else 0.0
    inter = len(sa & sb)
    jaccard = inter / len(sa | sb)
    small = min(len(sa), len(sb))
    containment = inter / small if small >= 3 else 0.0  # two-word facts must match by Jaccard
    return max(jaccard, containment)


def same_words(a: str, b: str) -> bool:
    """The same content words (after folding case, punctuation, stop words and plurals): one
    sentence repeating the other nearly word for word, with nothing added (U8)."""
    sa, sb = _word_set(a), _word_set(b)
    return sa == sb if sa or sb else a.strip().casefold() == b.strip().casefold()


def already_remembered(text: str, finding: Finding | None) -> bool:
    """Whether ``text`` repeats the memory of a duplicate finding with the same content words
    (U8): approving it could change nothing, so it is not queued from any source. A rewording or a
    repeat that adds something still waits as merge / supersede / keep both (B3)."""
    return finding is not None and finding.relation == "duplicate" and same_words(text, finding.existing_text)


def _fold(text: str) -> str:
    return " ".join(words(text))


@lru_cache(maxsize=VECTOR_CACHE_SIZE)  # every current memory is read again for each new fact
def read_fact(text: str) -> tuple[str, str, str] | None:
    """(subject, relation, value) of a simple fact, or None when no rule reads it."""
    sentence = text.strip().split("\n")[0]
    sentence = re.split(r"(?<=[.!?;])\s", sentence)[0].rstrip(".!?; ")
    if _NEGATION.search(sentence):
        return None
    for pattern, key in _COMPILED:
        m = pattern.match(sentence)
        if not m:
            continue
        groups = m.groups()
        subject, value = groups[0], groups[-1]
        relation = key.format(*[_stem(g.casefold()) for g in groups[1:-1]]) if "{0}" in key else key
        subject_key, value_key = _fold(subject), _fold(value)
        if subject_key and value_key:
            return subject_key, relation, value_key
    return None


_OPPOSITE = {("likes", "dislikes"), ("dislikes", "likes")}
# Verbs that take many values at once: "likes jazz" and "likes tea" are two facts, not a conflict.
_MULTI = frozenset("has have likes like loves love enjoys enjoy speaks speak knows owns visited and also".split())
_ARTICLES = frozenset(("a", "an", "the", "two", "some"))


@lru_cache(maxsize=VECTOR_CACHE_SIZE)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(w.removesuffix("'s") if w.endswith("'s") else w
                 for w in _WORD.findall(text.casefold().replace("’", "'")))


def _aligned_difference(a: str, b: str) -> bool:
    """The two sentences are the same words around one short differing span ("X's therapist is Dr
    A" / "... Dr B"): the same statement with another value."""
    ta, tb = _tokens(a), _tokens(b)
    if len(ta) < 3 or len(tb) < 3 or ta[0] != tb[0]:
        return False
    prefix = 0
    while prefix < min(len(ta), len(tb)) and ta[prefix] == tb[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(ta), len(tb)) - prefix and ta[-1 - suffix] == tb[-1 - suffix]:
        suffix += 1
    middle_a, middle_b = ta[prefix:len(ta) - suffix], tb[prefix:len(tb) - suffix]
    # Subject and verb (and more) must be shared: "X lives in" / "X's home is in" is a rewording.
    if prefix < 3 or not middle_a or not middle_b or len(middle_a) > 4 or len(middle_b) > 4:
        return False
    verb = ta[prefix - 2] if ta[prefix - 1] in _ARTICLES else ta[prefix - 1]
    if verb in _MULTI or _NEGATION.search(" ".join(middle_a + middle_b)):
        return False
    content_a = {_stem(w) for w in middle_a if w not in _STOP}
    content_b = {_stem(w) for w in middle_b if w not in _STOP}
    shared = prefix + suffix
    return bool(content_a and content_b) and not (content_a & content_b) and shared >= 0.5 * max(len(ta), len(tb))


def contradicts(a: str, b: str) -> bool:
    """Same subject and relation, different value; or one liking what the other dislikes (offline rules)."""
    fa, fb = read_fact(a), read_fact(b)
    if fa is not None and fb is not None and fa[0] == fb[0]:
        if fa[1] == fb[1]:
            va, vb = set(fa[2].split()), set(fb[2].split())
            return not (va <= vb or vb <= va)
        if (fa[1], fb[1]) in _OPPOSITE and fa[2] == fb[2]:
            return True
    return _aligned_difference(a, b)


def compare(new: str, existing: str, cosine: float | None = None, *,
            lexical_threshold: float = LEXICAL_THRESHOLD,
            embedding_threshold: float = EMBEDDING_THRESHOLD) -> tuple[str, float, str] | None:
    """(relation, score, reason) when ``new`` repeats or contradicts ``existing``, else None."""
    if contradicts(new, existing):
        return "contradiction", 1.0, "same subject and relation, a different value"
    lexical = lexical_similarity(new, existing)
    if lexical >= lexical_threshold:
        return "duplicate", round(lexical, 3), f"word overlap {lexical:.2f}"
    if cosine is not None and cosine >= embedding_threshold:
        return "duplicate", round(cosine, 3), f"embedding similarity {cosine:.2f}"
    return None


def subject_key(text: str) -> str:
    """The first content word of the fact's subject (of the text when no rule reads it): "Nora's
    therapist is ..." and "Nora grew up ..." share "nora"."""
    fact = read_fact(text)
    found = fact[0].split() if fact is not None else words(text)
    return found[0] if found else ""


def _current(conn: Connection, user_id: int, exclude: Sequence[int]) -> list[tuple[int, str]]:
    return [(i, text) for i, text in memories.current_texts(conn, user_id) if i not in set(exclude)]


def fact_vectors(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of ``texts``; only the texts not embedded before reach the model."""
    if not texts:
        return np.zeros((0, int(getattr(embedder, "dim", 0))), dtype="float32")
    keys = [(model_id(embedder), t) for t in texts]
    with _VECTORS_LOCK:
        found = {k: _VECTORS[k] for k in keys if k in _VECTORS}
        for k in found:
            _VECTORS.move_to_end(k)
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    if missing:
        fresh = np.asarray(embedder.embed([t for _m, t in missing]), dtype="float32")  # unit rows
        with _VECTORS_LOCK:
            for k, vector in zip(missing, fresh):
                found[k] = _VECTORS[k] = vector
            while len(_VECTORS) > VECTOR_CACHE_SIZE:
                _VECTORS.popitem(last=False)
    return np.stack([found[k] for k in keys])


def forget_cached() -> None:
    """Drop every cached fact text and vector (after delete-forever: no text outlives it here)."""
    with _VECTORS_LOCK:
        _VECTORS.clear()
    for cached in (_word_set, read_fact, _tokens):
        cached.cache_clear()


def _cosines(text: str, rows: Sequence[tuple[int, str]], embedder: Any) -> list[float | None]:
    if embedder is None or not rows:
        return [None] * len(rows)
    try:
        vectors = fact_vectors(embedder, [text, *[r[1] for r in rows]])
    except (HearthError, OSError, ImportError):
        return [None] * len(rows)  # the model could not run: word overlap and rules still decide
    return [float(v) for v in vectors[1:] @ vectors[0]]


def prepare(conn: Connection, user_id: int, texts: Sequence[str], embedder: Any) -> None:
    """Embed the current memories and ``texts`` ahead, outside any write transaction, so that
    ``find`` inside one only compares vectors (the write lock is never held while a model runs)."""
    if embedder is None:
        return
    try:
        fact_vectors(embedder, [*texts, *[r[1] for r in _current(conn, user_id, ())]])
    except (HearthError, OSError, ImportError):
        pass  # ``find`` meets the same failure and lets the rules decide


def find(conn: Connection, user_id: int, text: str, *, embedder: Any = None,
         exclude: Sequence[int] = (), judgement: Judgement | None = None) -> list[Finding]:
    """Current memories that ``text`` repeats or contradicts, strongest first. With a
    ``judgement`` (see ``ask_judge``), the model's contradictions of memories that are still current
    join the offline findings, and every finding records who judged it."""
    rows = _current(conn, user_id, exclude)
    if not rows:
        return []
    found: dict[int, Finding] = {}
    for (memory_id, existing), cosine in zip(rows, _cosines(text, rows, embedder)):
        verdict = compare(text, existing, cosine)
        if verdict is not None:
            found[memory_id] = Finding(memory_id, existing, verdict[0], verdict[1], verdict[2])
    if judgement is not None:
        current = dict(rows)
        for memory_id, reason in judgement.contradicts.items():
            offline = found.get(memory_id)
            if memory_id in current and (offline is None or offline.relation != "contradiction"):
                found[memory_id] = Finding(memory_id, current[memory_id], "contradiction", 1.0,
                                           f"the model reads a contradiction: {reason}" if reason
                                           else "the model reads a contradiction", judge="model")
        if judgement.fallback is not None:
            found = {k: Finding(**{**f.to_dict(), "fallback": judgement.fallback}) for k, f in found.items()}
    ordered = sorted(found.values(), key=lambda f: (f.relation != "contradiction", -f.score, f.memory_id))
    return ordered


def ask_judge(conn: Connection, user_id: int, text: str, judge: Judge, *, embedder: Any = None,
          exclude: Sequence[int] = ()) -> Judgement:
    """Ask the judge about the same-subject current memories the offline rules do not already
    find contradicted, the most similar first. Call it outside any write transaction (it waits on a
    model). A judge that fails leaves the offline verdict, with the failure's code."""
    rows = _current(conn, user_id, exclude)
    key = subject_key(text)
    if not key or not rows:
        return Judgement({})
    cosines = _cosines(text, rows, embedder)
    ranked = []
    for (memory_id, existing), cosine in zip(rows, cosines):
        if subject_key(existing) != key or contradicts(text, existing):
            continue
        ranked.append((cosine if cosine is not None else lexical_similarity(text, existing), memory_id, existing))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    kept = [(memory_id, existing) for _score, memory_id, existing in ranked[:JUDGE_CANDIDATES]]
    if not kept:
        return Judgement({})
    try:
        verdicts = judge.judge_contradictions(text, kept)
    except HearthError as exc:  # the provider or its answer failed: the offline verdict stands
        kind = getattr(exc, "kind", None)
        return Judgement({}, len(kept), f"{exc.code}:{kind}" if isinstance(kind, str) else exc.code)
    asked = {memory_id for memory_id, _ in kept}
    return Judgement({k: reason for k, (says, reason) in verdicts.items() if says and k in asked}, len(kept),
                     None if asked <= set(verdicts) else "incomplete")
