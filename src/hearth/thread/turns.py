"""Current-thread history (T1): the saved turns that travel with every request.

The thread's history is carried up to the input budget, never cut to a fixed number of turns. It
is read newest-first so a very long thread costs only the part that can fit, and the newest window
of each recently used conversation is cached in memory: the next send reads only the turns added
since. Triggers keep a per-conversation ``history_rev`` that moves whenever an existing turn is
edited or deleted, so a cached window is never served stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

from hearth.prompt.assembly import HistoryTurns
from hearth.prompt.dynamic import quote_reserved_headings
from hearth.providers.base import ChatMessage
from hearth.store import Connection
from hearth.store.queries import turns as stored
from hearth.text import estimate_tokens


@dataclass(frozen=True)
class ThreadTurn:
    id: int
    role: str
    kind: str
    content: str
    created_at: str

    # Built once per turn and kept with the cached window: a long thread's ~2,000 turns are
    # otherwise converted again on every send.
    @cached_property
    def chat(self) -> ChatMessage:
        """The turn as the provider receives it (K5: the reserved recall heading quoted)."""
        return ChatMessage(self.role, quote_reserved_headings(self.content))

    @cached_property
    def tokens(self) -> int:
        return estimate_tokens(len(self.chat.content))


_Parts = tuple[list[ChatMessage], list[int], list[int]]


def _parts(turns: list[ThreadTurn]) -> _Parts:
    chats = [t.chat for t in turns]
    return chats, [t.tokens for t in turns], [len(c.content) for c in chats]


@dataclass
class _Window:
    rev: int
    turns: list[ThreadTurn]  # oldest first, contiguous up to the newest turn read
    chars: int
    complete: bool  # the window starts at the thread's first turn (or the first after ``after_id``)
    parts: _Parts  # ``_parts(turns)``, kept in step with ``turns``
    after_id: int = 0  # the window read only turns after this one (a continuity capsule's end)


class TurnCache:
    """Per-process cache of the newest turns of recently used conversations (LRU)."""

    def __init__(self, max_conversations: int = 32):
        self.max_conversations = max_conversations
        self._windows: OrderedDict[int, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, conn: Connection, conversation_id: int, before_id: int,
             budget_chars: int, after_id: int = 0) -> tuple[HistoryTurns, int]:
        """Turns before ``before_id`` that fit ``budget_chars`` (oldest first), and how many older
        turns were left out because they did not fit.

        With ``after_id`` (a continuity capsule covers everything up to it), only later turns are
        read; the cached window remembers that bound, so the next send reads only what is new
        (every turn since the capsule was read again on each send before: 1,200 at a time)."""
        rev, total = stored.history_state(conn, conversation_id)
        with self._lock:
            window = self._windows.get(conversation_id)
        # A window trimmed for a tighter budget than this one is read afresh.
        usable = (window is not None and window.rev == rev and window.after_id == after_id and bool(window.turns)
                  and window.turns[-1].id < before_id)
        if window is not None and usable and not window.complete and window.chars < budget_chars * 0.9:
            usable = False
        if window is not None and usable:
            newer = [ThreadTurn(*r) for r in stored.between(conn, conversation_id, window.turns[-1].id, before_id)]
            turns = window.turns + newer
            chars = window.chars + sum(len(t.content) for t in newer)
            complete = window.complete
            (chats, sizes, lengths), added = window.parts, _parts(newer)
            parts: _Parts = (chats + added[0], sizes + added[1], lengths + added[2])
        else:
            turns, chars, complete = self._read_newest(conn, conversation_id, before_id, budget_chars, after_id)
            parts = _parts(turns)
        drop = 0
        while len(turns) - drop > 1 and chars > budget_chars:
            chars -= len(turns[drop].content)
            drop += 1
            complete = False
        if drop:
            turns, parts = turns[drop:], (parts[0][drop:], parts[1][drop:], parts[2][drop:])
        with self._lock:
            self._windows[conversation_id] = _Window(rev, turns, chars, complete, parts, after_id)
            self._windows.move_to_end(conversation_id)
            while len(self._windows) > self.max_conversations:
                self._windows.popitem(last=False)
        history = HistoryTurns(turns, *parts)
        if complete or not turns:
            return history, 0
        if after_id:
            left_out = stored.count_between(conn, conversation_id, after_id, turns[0].id)
            return history, left_out
        # turn_count includes the message being answered (and anything newer); count only older ones.
        older_in_thread = stored.count_from(conn, conversation_id, before_id)
        return history, max(0, total - older_in_thread - len(turns))

    def _read_newest(self, conn, conversation_id, before_id, budget_chars,
                     after_id: int = 0) -> tuple[list[ThreadTurn], int, bool]:
        rows, chars, complete = stored.newest(conn, conversation_id, after_id, before_id, budget_chars)
        return [ThreadTurn(*row) for row in rows], chars, complete

    def forget(self, conversation_id: int) -> None:
        with self._lock:
            self._windows.pop(conversation_id, None)
