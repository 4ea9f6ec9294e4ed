"""``ModelHelper``: the helper tasks done by the configured model provider, as strict JSON (G3).

Each task sends one system message (the task and the exact JSON shape) and one user message (the
material), reads the streamed text, and validates the JSON before anything is used. A summary over
the word limit is sent back once with the count; if it is still too long it is rejected (the job
retries later) rather than stored. Items that fail validation (unknown status field, evidence that
is not the person's own words, bad triggers) are dropped one by one; an answer that is not the
expected JSON object at all raises ``HelperOutputError``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Sequence, TypeVar

from hearth.errors import InvalidInput
from hearth.lorebook.triggers import normalise_trigger
from hearth.memory.helpers.base import (
    SUMMARY_MAX_WORDS,
    CapsuleResult,
    FactSuggestion,
    FragmentSuggestion,
    HelperOutputError,
    LiveContextResult,
    MemorySuggestion,
    ReviewInput,
    StateChange,
    StatusField,
    SummaryResult,
    TurnText,
    clip,
    one_line,
    word_count,
)
from hearth.providers.base import ChatMessage, Provider, ProviderRequest

T = TypeVar("T")
RETRY_ECHO_CHARS = 4_000  # of an unreadable answer, shown back to the model with the reason
TRANSCRIPT_CHARS = 16_000
MESSAGE_CHARS = 2_000

SUMMARY_TASK = (
    "You keep the rolling summary of one conversation between a person and their companion. "
    "Write ONE plain sentence of at most {max_words} words that keeps durable facts, emotional "
    "continuity, commitments, unresolved topics and the current direction of the thread. Merge the "
    "previous summary with the newest section; drop what no longer matters. No lists, no line breaks, "
    'no quotes around it. Answer with JSON only, exactly: {{"summary": "..."}}'
)
LIVE_CONTEXT_TASK = (
    "You keep a small live-context note for one conversation: what is going on right now. Answer with "
    'JSON only, exactly: {"mood": "...", "events": "...", "needs": "...", "summary": "...", '
    '"nudges": ["..."]}. mood: the emotional weather in a few words; events: concrete recent or '
    "upcoming pressures; needs: what the companion should prioritise now; summary: at most 20 words "
    "for a side panel; nudges: 0 to 3 short, optional follow-up questions the companion could ask "
    "later if it fits naturally. Use empty strings when unknown. Never invent facts."
)
STATE_TASK = (
    "You watch for changes in a household status. Each field has a current value and may list its "
    "allowed options. Report a change only when the person's own words clearly say the situation "
    "changed. Answer with JSON only, exactly: "
    '{"changes": [{"field": "...", "value": "...", "reason": "...", "evidence": "..."}]} where evidence '
    'is an exact quote from the person\'s messages. Answer {"changes": []} when nothing changed.'
)
FRAGMENT_TASK = (
    "You review a conversation to suggest durable memory fragments: small facts that stay true (people, "
    "pets, projects, private vocabulary, health context, preferences). Each fragment has a category, "
    "trigger words that would appear in a later message when it matters, and a one- or two-sentence "
    "definition. Suggest additions, or updates to an existing fragment by its id. Do not repeat what the "
    "existing fragments already say; do not record passing moods. Answer with JSON only, exactly: "
    '{"proposals": [{"action": "add" or "update", "fragment_id": null or an id, "category": "...", '
    '"triggers": ["..."], "definition": "...", "reason": "...", "evidence": "..."}]}. '
    'Answer {"proposals": []} when there is nothing durable.'
)


MINING_TASK = (
    "You read part of an old conversation between a person and an assistant and pick out durable "
    "memories about the person worth keeping: facts, preferences, people in their life (with names) and "
    "dates that matter. Write each memory as one short sentence about 'the person'. Only what the person "
    "said about themselves; nothing passing, nothing guessed. Answer with JSON only, exactly: "
    '{"memories": [{"text": "...", "category": "facts" or "preferences" or "people" or "dates", '
    '"evidence": "an exact quote of the person\'s words", "reason": "..."}]}. '
    'Answer {"memories": []} when there is nothing durable.'
)
MINING_CATEGORIES = ("facts", "preferences", "people", "dates")
FACTS_TASK = (
    "You index a conversation between a person and their companion so that it can be searched later. "
    "Each line of the transcript starts with the turn's number in brackets. Write short statements of "
    "what happened or was said that someone might later ask about: events, plans, people, places, "
    "things owned or made, preferences, and what the companion shared too. One fact per statement, "
    "in the third person, with names where the turns give them, each at most 30 words; cite the numbers "
    "of the turns each statement comes from. Nothing guessed. Answer with JSON only, exactly: "
    '{"facts": [{"text": "...", "turns": [12, 13]}]}. Answer {"facts": []} when there is nothing.'
)
FACTS_MAX = 60  # statements kept from one answer
FACT_CHARS = 290
CAPSULE_TASK = (
    "You keep the continuity capsule of a relationship between a person and their companion: a compact "
    "account a fresh model session reads before the most recent turns. Merge the previous capsule with "
    "the newest turns. Keep established facts, commitments, unresolved work, corrections, preferences and "
    "cross-channel context (which channel recent things happened on); drop what no longer matters; never "
    "invent. Short items, at most six per list. Answer with JSON only, exactly: "
    '{"facts": ["..."], "commitments": ["..."], "unresolved": ["..."], "corrections": ["..."], '
    '"preferences": ["..."], "cross_channel": ["..."]}'
)
CONTRADICTION_TASK = (
    "You check a memory store about one person for contradictions. You get a new fact and some facts "
    "already kept about the same subject, each with an id. A kept fact is contradicted when both cannot be "
    "true at the same time (the same thing with another value: a new home, another job, a changed "
    "preference, incompatible circumstances). It is not contradicted when the new fact adds detail, says "
    "the same thing in other words, or is about something else. Answer with JSON only, exactly: "
    '{"verdicts": [{"id": <the kept fact\'s id>, "contradicts": true or false, "reason": "a few words"}]} '
    "with one verdict for every kept fact."
)
CONTRADICTION_FACT_CHARS = 1_000
TITLE_TASK = ("Write a short title of at most six words for the conversation below, in the language it is written "
              'in, without quotes. Answer only with JSON: {"title": "..."}')
_CAPSULE_KEYS = {"facts": "Established facts", "commitments": "Commitments", "unresolved": "Unresolved work",
                 "corrections": "Corrections", "preferences": "Preferences", "cross_channel": "Cross-channel context"}


def transcript(turns: Sequence[TurnText], limit: int = TRANSCRIPT_CHARS, *, numbered: bool = False) -> str:
    """'Person:' / 'Companion:' lines, newest kept when the whole does not fit; ``numbered`` puts
    each turn's message id first (``[id] Person:``), so the model can cite turns by it."""
    lines: list[str] = []
    used = 0
    for turn in reversed(turns):
        who = "Person" if turn.role == "user" else "Companion"
        line = (f"[{turn.message_id}] " if numbered else "") + f"{who}: {clip(turn.text, MESSAGE_CHARS)}"
        if used + len(line) > limit and lines:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


_REFUSAL = re.compile(r"^\W*(?:i'?m sorry|i am sorry|sorry|i can(?:no|')t|i cannot|i'?m (?:not able|unable)|i am "
                      r"(?:not able|unable)|i won'?t|as an ai)\b", re.IGNORECASE)
_DECODER = json.JSONDecoder()
MAX_OBJECT_STARTS = 20  # braces tried as the start of the answer's JSON object


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a helper's answer, prose or a code fence around it allowed.

    An unusable answer raises ``HelperOutputError`` whose kind says why: ``empty``, ``refusal``
    (prose declining the task), ``truncated`` (an object that runs off the end of the answer),
    ``not_json``.
    """
    # Found from the first "{", so a Markdown fence around the object needs no pattern (one ending in
    # \s*```$ read a long run of spaces again from each of them: U5).
    raw = (text or "").strip()
    if not raw.strip("`"):
        raise HelperOutputError("the answer was empty", "empty")
    start = raw.find("{")
    if start < 0:
        if _REFUSAL.match(raw):
            raise HelperOutputError("the answer declined the task instead of giving the JSON object", "refusal")
        raise HelperOutputError("the answer has no JSON object", "not_json")
    first = start
    for _ in range(MAX_OBJECT_STARTS):
        try:
            value, _end = _DECODER.raw_decode(raw, start)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                return value
        start = raw.find("{", start + 1)
        if start < 0:
            break
    if _unclosed(raw, first):
        raise HelperOutputError("the JSON object is cut off before its end", "truncated")
    raise HelperOutputError("the answer's JSON is not valid", "not_json")


def _unclosed(raw: str, start: int) -> bool:
    """Whether the JSON from ``start`` runs off the end of the answer: a string or bracket left open."""
    depth, in_string, escaped = 0, False, False
    for char in raw[start:]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return False
    return True


def _text(value: Any, limit: int) -> str:
    return clip(value, limit) if isinstance(value, str) else ""


class ModelHelper:
    name = "model"

    def __init__(self, provider: Provider, *, max_output_tokens: int = 800):
        self.provider = provider
        self.max_output_tokens = max_output_tokens

    def complete(self, task: str, material: str, history: Sequence[ChatMessage] = ()) -> str:
        """One request: the task, the material and any follow-up; the answer's text."""
        messages = [ChatMessage("system", task), ChatMessage("user", material), *history]
        return "".join(event.text for event in self.provider.stream(
            ProviderRequest(messages, [], self.max_output_tokens)) if event.type == "text")

    def ask(self, task: str, material: str, history: Sequence[ChatMessage] = ()) -> dict[str, Any]:
        """One request, its answer read as a JSON object (no second chance: see ``answer``)."""
        return parse_json_object(self.complete(task, material, history))

    def answer(self, task: str, material: str, read: Callable[[dict[str, Any]], T]) -> T:
        """Ask, and ``read`` the JSON object of the answer; an answer that cannot be read (E13) is
        shown back to the model once with the reason, and a second unreadable answer raises
        ``HelperOutputError`` (its ``attempts`` is 2) for the caller to skip the task."""
        raw = self.complete(task, material)
        try:
            return read(parse_json_object(raw))
        except HelperOutputError as first:
            follow_up = [ChatMessage("assistant", clip(raw, RETRY_ECHO_CHARS))] if raw.strip() else []
            follow_up.append(ChatMessage("user", f"Your answer could not be read: {first}. Answer again with the "
                                                 "complete JSON object only, exactly in the shape asked for."))
            raw = self.complete(task, material, follow_up)
            try:
                return read(parse_json_object(raw))
            except HelperOutputError as second:
                second.attempts, second.chars = 2, len(raw)
                raise

    # -- rolling summary (RS1) -------------------------------------------------------------------
    def summarise(self, previous: str, section: Sequence[TurnText],
                  max_words: int = SUMMARY_MAX_WORDS) -> SummaryResult:
        task = SUMMARY_TASK.format(max_words=max_words)
        material = f"Previous summary: {previous or '(none yet)'}\n\nNewest section of the transcript:\n" \
                   f"{transcript(section)}"
        text = self.answer(task, material, self._summary_text)
        if word_count(text) > max_words:
            # One more chance with the count; a second overrun is rejected, never stored.
            raw = self.complete(task, material, [
                ChatMessage("assistant", json.dumps({"summary": text})),
                ChatMessage("user", f"That summary has {word_count(text)} words; the limit is {max_words}. "
                                    "Answer again with a shorter sentence, JSON only."),
            ])
            try:
                text = self._summary_text(parse_json_object(raw))
            except HelperOutputError as again:
                again.attempts, again.chars = 2, len(raw)
                raise
            if word_count(text) > max_words:
                raise HelperOutputError(f"the summary is longer than {max_words} words", "too_long",
                                        attempts=2, chars=len(raw))
        return SummaryResult(text=text, source="model")

    @staticmethod
    def _summary_text(answer: dict[str, Any]) -> str:
        text = answer.get("summary")
        if not isinstance(text, str) or not text.strip():
            raise HelperOutputError("the summary answer has no summary text", "shape")
        return one_line(text)

    # -- live context (LC1, LC2) --------------------------------------------------------------------
    def live_context(self, previous: LiveContextResult | None, recent: Sequence[TurnText]) -> LiveContextResult:
        before = "(none yet)"
        if previous is not None:
            before = json.dumps({"mood": previous.mood, "events": previous.events, "needs": previous.needs,
                                 "summary": previous.summary}, ensure_ascii=False)

        def read(answer: dict[str, Any]) -> LiveContextResult:
            nudges = answer.get("nudges", [])
            if not isinstance(nudges, list):
                raise HelperOutputError("nudges must be a list", "shape")
            if not any(isinstance(answer.get(k), str) for k in ("mood", "events", "needs", "summary")):
                raise HelperOutputError("the live context answer has none of its fields", "shape")
            return LiveContextResult(
                mood=_text(answer.get("mood"), 120), events=_text(answer.get("events"), 400),
                needs=_text(answer.get("needs"), 300), summary=_text(answer.get("summary"), 160),
                nudges=tuple(clip(n, 160) for n in nudges if isinstance(n, str) and n.strip())[:3], source="model",
            )
        material = f"Previous live context: {before}\n\nRecent messages:\n{transcript(recent)}"
        return self.answer(LIVE_CONTEXT_TASK, material, read)

    # -- state-change detection (HS2) ----------------------------------------------------------------
    def detect_state_change(self, fields: Sequence[StatusField], messages: Sequence[TurnText]) -> list[StateChange]:
        people = [t for t in messages if t.role == "user"]
        if not fields or not people:
            return []
        described = [{"field": f.name, "current": f.value, "options": list(f.options)} for f in fields]

        def read(answer: dict[str, Any]) -> list[StateChange]:
            changes = answer.get("changes")
            if not isinstance(changes, list):
                raise HelperOutputError("the state-change answer has no list of changes", "shape")
            by_name = {f.name.casefold(): f for f in fields}
            said = [one_line(t.text).casefold() for t in people]
            out: list[StateChange] = []
            for item in changes:
                if not isinstance(item, dict):
                    continue
                status = by_name.get(str(item.get("field", "")).casefold())
                value = _text(item.get("value"), 100)
                evidence = one_line(item.get("evidence", "")) if isinstance(item.get("evidence"), str) else ""
                if status is None or not value or not evidence:
                    continue
                if not any(evidence.casefold() in text for text in said):
                    continue  # evidence must be the person's own words, not the model's paraphrase
                if status.options:
                    value = next((o for o in status.options if o.casefold() == value.casefold()), "")
                    if not value:
                        continue
                if (status.value or "").casefold() == value.casefold():
                    continue
                out.append(StateChange(status.name, value, _text(item.get("reason"), 300) or "The model noticed a change.",
                                       clip(evidence, 500), source="model"))
            return out
        material = "Fields: " + json.dumps(described, ensure_ascii=False) + "\n\nRecent messages:\n" \
                   + transcript(messages)
        return self.answer(STATE_TASK, material, read)

    # -- fragment suggestions (F3) ------------------------------------------------------------------
    def propose_fragments(self, review: ReviewInput) -> list[FragmentSuggestion]:
        library = [{"id": f["id"], "category": f.get("category", ""), "triggers": list(f.get("triggers", ())),
                    "definition": f.get("definition", "")} for f in review.fragments]
        material = (
            f"Rolling summary: {review.summary or '(none)'}\n"
            f"Live context: {json.dumps(review.live_context, ensure_ascii=False) if review.live_context else '(none)'}\n"
            f"Existing fragments: {json.dumps(library, ensure_ascii=False)}\n\n"
            f"Recent conversation:\n{transcript(review.messages)}"
        )

        def read(answer: dict[str, Any]) -> list[FragmentSuggestion]:
            proposals = answer.get("proposals")
            if not isinstance(proposals, list):
                raise HelperOutputError("the review answer has no list of proposals", "shape")
            known = {f["id"] for f in library}
            out: list[FragmentSuggestion] = []
            for item in proposals:
                if not isinstance(item, dict) or item.get("action") not in ("add", "update"):
                    continue
                fragment_id = item.get("fragment_id")
                if item["action"] == "update" and (not isinstance(fragment_id, int) or fragment_id not in known):
                    continue
                triggers = item.get("triggers")
                if not isinstance(triggers, list) or not 1 <= len(triggers) <= 10:
                    continue
                try:
                    cleaned = tuple(one_line(t) for t in triggers if isinstance(t, str) and normalise_trigger(t))
                except InvalidInput:
                    continue
                definition = _text(item.get("definition"), 1000)
                if len(cleaned) != len(triggers) or not definition:
                    continue
                out.append(FragmentSuggestion(
                    action=item["action"], category=_text(item.get("category"), 60), triggers=cleaned,
                    definition=definition, reason=_text(item.get("reason"), 300) or "Suggested by the review model.",
                    fragment_id=fragment_id if item["action"] == "update" else None,
                    evidence=_text(item.get("evidence"), 500), source="model"))
            return out
        return self.answer(FRAGMENT_TASK, material, read)

    # -- memories mined from an archive (X4) -----------------------------------------------------------
    def extract_memories(self, turns: Sequence[TurnText]) -> list[MemorySuggestion]:

        def read(answer: dict[str, Any]) -> list[MemorySuggestion]:
            items = answer.get("memories")
            if not isinstance(items, list):
                raise HelperOutputError("the mining answer has no list of memories", "shape")
            said = " ".join(one_line(t.text) for t in turns if t.role == "user").casefold()
            out: list[MemorySuggestion] = []
            for item in items:
                if not isinstance(item, dict):
                    continue
                text, evidence = _text(item.get("text"), 500), _text(item.get("evidence"), 500)
                category = item.get("category")
                # A memory must rest on the person's own words: a quote that is not there is dropped.
                if not text or not evidence or one_line(evidence).casefold() not in said:
                    continue
                out.append(MemorySuggestion(text, category if category in MINING_CATEGORIES else "facts", evidence,
                                            _text(item.get("reason"), 300) or "Mined by the model.", "model"))
            return out
        return self.answer(MINING_TASK, f"Conversation:\n{transcript(turns)}", read)

    # -- facts for retrieval (E2, A2) ------------------------------------------------------------------
    def extract_facts(self, turns: Sequence[TurnText]) -> list[FactSuggestion]:
        """Statements citing turns by number; a statement that cites no turn it was shown is dropped."""
        numbered = [t for t in turns if t.message_id]
        if not numbered:
            return []

        def read(answer: dict[str, Any]) -> list[FactSuggestion]:
            items = answer.get("facts")
            if not isinstance(items, list):
                raise HelperOutputError("the facts answer has no list of facts", "shape")
            shown = {t.message_id for t in numbered}
            out: list[FactSuggestion] = []
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("turns"), list):
                    continue
                text = _text(item.get("text"), FACT_CHARS)
                cited = tuple(sorted({n for n in item["turns"]
                                      if isinstance(n, int) and not isinstance(n, bool) and n in shown}))
                if text and cited:
                    out.append(FactSuggestion(text, cited[:20], "model"))
                if len(out) == FACTS_MAX:
                    break
            return out
        return self.answer(FACTS_TASK, f"Conversation:\n{transcript(numbered, numbered=True)}", read)

    # -- contradictions among memories (B3) -----------------------------------------------------------
    def judge_contradictions(self, fact: str, kept: Sequence[tuple[int, str]]) -> dict[int, tuple[bool, str]]:
        """Memory id -> (contradicts, reason) for each kept fact the model gave a valid verdict on;
        an answer without a list of verdicts raises ``HelperOutputError``."""
        if not kept:
            return {}
        listed = "\n".join(f"#{memory_id}: {clip(text, CONTRADICTION_FACT_CHARS)}" for memory_id, text in kept)

        def read(answer: dict[str, Any]) -> dict[int, tuple[bool, str]]:
            verdicts = answer.get("verdicts")
            if not isinstance(verdicts, list):
                raise HelperOutputError("the contradiction answer has no list of verdicts", "shape")
            asked = {memory_id for memory_id, _ in kept}
            out: dict[int, tuple[bool, str]] = {}
            for item in verdicts:
                if not isinstance(item, dict):
                    continue
                raw_id = item.get("id")
                if isinstance(raw_id, str) and raw_id.lstrip("#").isdigit():
                    raw_id = int(raw_id.lstrip("#"))
                says = item.get("contradicts")
                # A verdict about a fact it was not shown, or not a yes/no, is no verdict at all.
                if isinstance(raw_id, int) and not isinstance(raw_id, bool) and raw_id in asked and isinstance(says, bool):
                    out[raw_id] = (says, _text(item.get("reason"), 200))
            return out
        material = f"New fact: {clip(fact, CONTRADICTION_FACT_CHARS)}\n\nKept facts:\n{listed}"
        return self.answer(CONTRADICTION_TASK, material, read)

    def write_capsule(self, previous: str, turns: Sequence[TurnText],
                      channels: Sequence[str] = ()) -> CapsuleResult:
        from hearth.memory.helpers.offline import render_capsule

        material = (f"Previous capsule:\n{previous or '(none yet)'}\n\nChannels of the newest turns: "
                    f"{', '.join(sorted(set(channels))) or 'unknown'}\n\nNewest turns:\n{transcript(turns)}")

        def read(answer: dict[str, Any]) -> CapsuleResult:
            sections: dict[str, list[str]] = {}
            for key, name in _CAPSULE_KEYS.items():
                value = answer.get(key, [])
                if not isinstance(value, list):
                    raise HelperOutputError(f"the capsule answer's {key} is not a list", "shape")
                sections[name] = [clip(v, 240) for v in value if isinstance(v, str) and v.strip()][:6]
            if not any(sections.values()):
                raise HelperOutputError("the capsule answer is empty", "shape")
            return CapsuleResult(render_capsule(sections), "model")
        return self.answer(CAPSULE_TASK, material, read)

    # -- thread titles (W4) ------------------------------------------------------------------------
    def write_title(self, person: str, companion: str) -> str:
        """A short title for a thread from its first exchange; '' when the model gave none."""
        def read(answer: dict[str, Any]) -> str:
            title = answer.get("title")
            if not isinstance(title, str):
                raise HelperOutputError("the title answer has no title", "shape")
            return " ".join(title.split()).strip("\"'")

        return self.answer(TITLE_TASK, f"Person: {person[:2000]}\n\nCompanion: {companion[:2000]}", read)
