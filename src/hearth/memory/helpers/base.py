"""The ``Helper`` interface (G3): model-written work behind one interface, with an offline version.

Every layer that the seeds have a model write goes through a helper: the rolling summary, the live
context refresh, state-change detection and fragment suggestions. ``ModelHelper`` asks the
configured provider for strict JSON and validates it; ``OfflineHelper`` is deterministic and
extractive. Every result carries ``source`` ("model" or "offline") so offline output is labelled.

Inputs are plain ``TurnText`` records (role, text, message id), never database rows, so helpers
are pure with respect to storage and easy to test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from hearth import text
from hearth.errors import HearthError

SUMMARY_MAX_WORDS = 45


class HelperOutputError(HearthError):
    """A helper model answered with something unusable (not JSON, wrong shape, too long).

    ``kind`` is a fixed name (empty, refusal, truncated, not_json, shape, too_long), ``attempts``
    how many answers were read, ``chars`` the length of the last one: what the ledger may record
    about a skipped task (E13), never the answer itself. The message is a fixed sentence too; it
    is what the model is shown when it is asked once more.
    """

    code = "helper_output"

    def __init__(self, message: str, kind: str = "invalid", *, attempts: int = 1, chars: int = 0):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.chars = chars


@dataclass(frozen=True)
class TurnText:
    role: str  # user | assistant
    text: str
    message_id: int = 0


@dataclass(frozen=True)
class SummaryResult:
    text: str
    source: str  # offline | model


@dataclass(frozen=True)
class LiveContextResult:
    mood: str = ""
    events: str = ""
    needs: str = ""
    summary: str = ""
    nudges: tuple[str, ...] = ()
    source: str = "offline"


@dataclass(frozen=True)
class StatusField:
    name: str
    value: str | None
    options: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class StateChange:
    field: str
    value: str
    reason: str
    evidence: str  # the person's own words that suggested it (shown in review, never logged)
    source: str = "offline"


@dataclass(frozen=True)
class FragmentSuggestion:
    action: str  # add | update
    category: str
    triggers: tuple[str, ...]
    definition: str
    reason: str
    fragment_id: int | None = None
    evidence: str = ""
    source: str = "offline"


@dataclass(frozen=True)
class MemorySuggestion:
    """A durable memory mined from an archive (X4): proposed for review, never applied by itself."""

    text: str
    category: str  # facts | preferences | people | dates
    evidence: str  # the person's own words it came from
    reason: str
    source: str = "offline"


@dataclass(frozen=True)
class FactSuggestion:
    """A short statement for retrieval (E2, A2), citing the turns it came from by message id.
    Written at a checkpoint as a fact, never shown in place of those turns."""

    text: str
    message_ids: tuple[int, ...]
    source: str = "offline"


@dataclass(frozen=True)
class CapsuleResult:
    """A continuity capsule (E3): a compact account of the relationship, by section."""

    text: str
    source: str  # offline | model


CAPSULE_SECTIONS = ("Established facts", "Commitments", "Unresolved work", "Corrections", "Preferences",
                    "Cross-channel context")
CAPSULE_MAX_CHARS = 4_000


@dataclass(frozen=True)
class ReviewInput:
    messages: Sequence[TurnText]
    summary: str = ""
    live_context: dict[str, str] = field(default_factory=dict)
    fragments: Sequence[dict[str, Any]] = ()  # {"id", "category", "triggers", "definition"}


class Helper(Protocol):
    name: str  # "offline" or "model"

    def summarise(self, previous: str, section: Sequence[TurnText],
                  max_words: int = SUMMARY_MAX_WORDS) -> SummaryResult: ...

    def live_context(self, previous: LiveContextResult | None, recent: Sequence[TurnText]) -> LiveContextResult: ...

    def detect_state_change(self, fields: Sequence[StatusField], messages: Sequence[TurnText]) -> list[StateChange]: ...

    def propose_fragments(self, review: ReviewInput) -> list[FragmentSuggestion]: ...

    def extract_memories(self, turns: Sequence[TurnText]) -> list[MemorySuggestion]: ...

    def extract_facts(self, turns: Sequence[TurnText]) -> list[FactSuggestion]: ...

    def write_capsule(self, previous: str, turns: Sequence[TurnText],
                      channels: Sequence[str] = ()) -> CapsuleResult: ...

    def judge_contradictions(self, fact: str, kept: Sequence[tuple[int, str]]) -> dict[int, tuple[bool, str]]: ...


# -- small text tools shared by both helpers -------------------------------------------------------
_SPACE = re.compile(r"\s+")
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_WORD = re.compile(r"[A-Za-z\u00C0-\u024F][A-Za-z\u00C0-\u024F'\u2019-]*")

# What the extractive helpers skip: search's stopwords and more conversational filler.
STOPWORDS = text.STOPWORDS | text.CHAT_FILLER


def one_line(text: str) -> str:
    return _SPACE.sub(" ", text or "").strip()


def sentences(text: str) -> list[str]:
    return [one_line(s) for s in _SENTENCE.findall(text or "") if one_line(s)]


def words(text: str) -> list[str]:
    return _WORD.findall(text or "")


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (no stopwords, at least three letters)."""
    return [w.lower().strip("'\u2019-") for w in words(text)
            if len(w) >= 3 and w.lower().strip("'\u2019-") not in STOPWORDS]


def word_count(text: str) -> int:
    return len(one_line(text).split())


def clamp_words(text: str, max_words: int) -> str:
    """At most ``max_words`` words, cut at a word boundary; a cut sentence ends with an ellipsis."""
    parts = one_line(text).split()
    if len(parts) <= max_words:
        return " ".join(parts)
    cut = " ".join(parts[:max_words]).rstrip(",;:-")
    return cut + "…"


def clip(text: str, chars: int) -> str:
    flat = one_line(text)
    if len(flat) <= chars:
        return flat
    cut = flat[:chars].rsplit(" ", 1)[0] if " " in flat[:chars] else flat[:chars]
    return cut.rstrip(",;:-") + "…"
