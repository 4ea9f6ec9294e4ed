"""Thread recall tiers T2 and T3: more of the current thread, for one turn, when asked.

Tier 1 is the thread's own history, carried up to the input budget. When the message asks for
something earlier in the same thread ("earlier", "you mentioned", "scroll back"), Tier 2 adds the
last 30 messages, capped at about 30,000 characters. When it asks explicitly to go deeper ("search
this whole conversation", "go all the way back"), Tier 3 searches the whole thread and adds the
best matching turns with their neighbours, in thread order, capped at about 90,000 characters;
with nothing specific to search for it starts from the beginning of the thread. Either block is
labelled as factual recall from this conversation, is built fresh for this one turn, and is never
stored. Each use is logged (A3).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from hearth.prompt.dynamic import Block, Turn, quote_reserved_headings
from hearth.records.ledger import Message
from hearth.retrieval.keyword import search_messages, terms
from hearth.retrieval.terms import select_terms
from hearth.store.queries import layer_messages
from hearth.text import phrase_pattern

T2_MESSAGES = 30
T2_CHARS = 30_000
T3_CHARS = 90_000
T3_HITS = 60
NEIGHBOURS = 1

T2_CUES = (
    "earlier", "you mentioned", "i mentioned", "scroll back", "a while ago", "a bit ago",
    "further up", "said above", "mentioned above", "previously", "said before", "told you before",
    "mentioned before", "talked about before", "discussed before", "from before", "you said", "i said", "we said", "at the start", "go back to",
    "back to what", "what was that", "remind me what", "few messages ago", "a moment ago",
    "we were talking about", "we talked about", "as i said", "like i said",
)
T3_CUES = (
    "search this whole conversation", "search the whole conversation", "search this conversation",
    "search the whole thread", "search this whole thread", "search this thread", "whole conversation",
    "whole thread", "entire conversation", "entire thread", "all the way back", "from the very beginning",
    "from the beginning", "the very start", "beginning of this conversation", "beginning of this thread",
    "start of this conversation", "start of this thread", "everything we said", "look through this conversation",
)
_T2 = phrase_pattern(T2_CUES)
_T3 = phrase_pattern(T3_CUES)
# Words of the cue phrases themselves: never the topic to search for.
_CUE_WORDS = frozenset(w for cue in (*T2_CUES, *T3_CUES) for w in terms(cue, 100)) | {
    "conversation", "thread", "search", "back", "way", "beginning", "start", "earlier", "mentioned"}

T2_LABEL = "THREAD RECALL: RECENT MESSAGES OF THIS CONVERSATION"
T3_LABEL = "THREAD RECALL: SEARCH OF THIS WHOLE CONVERSATION"
TRUST = (
    "Factual recall from the current conversation, quoted verbatim for this reply only because the "
    "person asked about something said earlier in this thread. These are the actual messages, with "
    "their dates; they are not guesses, summaries or results from other conversations."
)


def tier(text: str) -> int:
    """3 for an explicit deeper request, 2 for a cue about earlier in the thread, else 0."""
    if _T3.search(text):
        return 3
    if _T2.search(text):
        return 2
    return 0


def _thread(conn, conversation_id: int, before_id: int | None, newest: int | None = None) -> list[Message]:
    """The thread's turns in order; only the ``newest`` ones when given (tier 2 reads no more)."""
    return layer_messages.chat_turns(conn, conversation_id, before_id=before_id, newest=newest)


def _fit(messages: list[Message], cap: int, *, keep_newest: bool) -> list[Message]:
    """Whole messages within ``cap`` characters; a single oversized one is cut, not dropped."""
    out: list[Message] = []
    used = 0
    for m in (reversed(messages) if keep_newest else messages):
        if used + len(m.content) > cap:
            if not out:
                out.append(replace(m, content=m.content[:cap] + "… [cut to fit the recall limit]"))
            break
        out.append(m)
        used += len(m.content)
    return list(reversed(out)) if keep_newest else out


class ThreadRecall:
    name = "thread_recall"

    def __init__(self, store: Any = None):
        self.store = store

    def _current_id(self, turn: Turn) -> int | None:
        return layer_messages.newest_user_turn(turn.conn, turn.conversation.id)

    def blocks(self, turn: Turn) -> list[Block]:
        level = tier(turn.text)
        if not level:
            return []
        started = time.monotonic()
        current = self._current_id(turn)
        thread = _thread(turn.conn, turn.conversation.id, current, T2_MESSAGES if level == 2 else None)
        if not thread:
            return []
        if level == 2:
            chosen = _fit(thread[-T2_MESSAGES:], T2_CHARS, keep_newest=True)
            label, words, hits = T2_LABEL, [], len(chosen)
            text = self._render_runs(chosen, thread, turn)
        else:
            words = select_terms(turn.conn, [w for w in terms(turn.text) if w not in _CUE_WORDS])
            chosen, hits = self._deep(turn, thread, words)
            label = T3_LABEL
            text = self._render_runs(chosen, thread, turn)
        self._log(turn, level, words, chosen, hits, started)
        return [Block(layer=self.name, label=label, trust=TRUST, text=text,
                      source_ids=tuple(m.id for m in chosen),
                      numbers={"tier": level, "messages": len(chosen), "chars": sum(len(m.content) for m in chosen)})]

    def _deep(self, turn: Turn, thread: list[Message], words: list[str]) -> tuple[list[Message], int]:
        position = {m.id: i for i, m in enumerate(thread)}
        if not words:
            return _fit(thread, T3_CHARS, keep_newest=False), 0
        hits = search_messages(turn.conn, turn.user_id, words, limit=T3_HITS, eligible_only=False,
                               conversation_id=turn.conversation.id)
        picked: dict[int, None] = {}
        used = 0
        for hit in hits:
            if hit.message_id not in position:
                continue
            at = position[hit.message_id]
            for i in range(max(0, at - NEIGHBOURS), min(len(thread), at + NEIGHBOURS + 1)):
                m = thread[i]
                if m.id in picked:
                    continue
                if used + len(m.content) > T3_CHARS:
                    break
                picked[m.id] = None
                used += len(m.content)
        if not picked:
            return _fit(thread, T3_CHARS, keep_newest=False), len(hits)
        return [m for m in thread if m.id in picked], len(hits)

    @staticmethod
    def _render_runs(chosen: list[Message], thread: list[Message], turn: Turn) -> str:
        """Thread order; a gap between non-adjacent messages is shown as […]."""
        index = {m.id: i for i, m in enumerate(thread)}
        persona = turn.persona
        lines: list[str] = []
        previous = None
        for m in chosen:
            at = index.get(m.id)
            if previous is not None and at is not None and at != previous + 1:
                lines.append("[…]")
            label = persona.user_label if m.role == "user" else persona.assistant_label
            lines.append(f"[{m.created_at[:16].replace('T', ' ')}] {label}\n{quote_reserved_headings(m.content)}")
            previous = at
        return "\n\n".join(lines)

    def _log(self, turn: Turn, level: int, words: list[str], chosen: list[Message], hits: int,
             started: float) -> None:
        if self.store is None:
            return
        results = [{"kind": "message", "id": m.id, "source_id": m.conversation_id, "date": m.created_at,
                    "text": m.content, "scores": {"position": i, "fused": 1.0, "signals": ["thread"]}}
                   for i, m in enumerate(chosen, start=1)]
        turn.search_log.append(dict(
            user_id=turn.user_id, origin="thread_recall", query=turn.text,
            variants=[" ".join(words)] if words else [], results=results,
            filters={"tier": level, "conversation_id": turn.conversation.id,
                     "cap_chars": T2_CHARS if level == 2 else T3_CHARS},
            candidate_count=hits, judgement="high" if chosen else "none",
            conversation_id=turn.conversation.id, duration_ms=int((time.monotonic() - started) * 1000)))
