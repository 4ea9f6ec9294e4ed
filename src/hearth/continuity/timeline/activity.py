"""What is running in a conversation right now: replies and compactions (E7).

"Compact now" is refused while a reply or another compaction of the same conversation runs, and a
new message is refused while a compaction runs, both with a clear ``Conflict`` (HTTP 409) before
anything is saved. The registry is per process: the server is the one process that streams
replies and compacts.

It knows which activity spans have a reply in flight, so an idle checkpoint never closes a span
whose reply is still streaming (E2); a worker in another process cannot see this, and a reply that
lands in a span closed meanwhile joins the span open now (``spans.keep_open``).

It also knows when a send is assembling its request, so background work that competes for the
same cores (embedding new turns, an import's backlog) can wait for it: the person's send comes
first (``wait_quiet``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from hearth.errors import Conflict


class Activity:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: Counter[int] = Counter()
        self._spans: Counter[int] = Counter()  # activity spans with a reply in flight (E2)
        self._compacting: set[int] = set()
        self._assembling = 0
        self._quiet = threading.Condition(self._lock)

    def begin_reply(self, conversation_id: int) -> None:
        with self._lock:
            if conversation_id in self._compacting:
                raise Conflict("this conversation is being compacted; send again in a moment")
            self._replies[conversation_id] += 1

    def end_reply(self, conversation_id: int) -> None:
        with self._lock:
            self._replies[conversation_id] -= 1
            if self._replies[conversation_id] <= 0:
                del self._replies[conversation_id]

    @contextmanager
    def compaction(self, conversation_id: int) -> Iterator[None]:
        with self._lock:
            if conversation_id in self._compacting:
                raise Conflict("a compaction of this conversation is already running")
            if self._replies[conversation_id]:
                raise Conflict("a reply is being written in this conversation; compact after it finishes")
            self._compacting.add(conversation_id)
        try:
            yield
        finally:
            with self._lock:
                self._compacting.discard(conversation_id)

    @contextmanager
    def reply_in_span(self, span_id: int) -> Iterator[None]:
        """A reply of this span is being written: its idle checkpoint waits (E2)."""
        with self._lock:
            self._spans[span_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._spans[span_id] -= 1
                if self._spans[span_id] <= 0:
                    del self._spans[span_id]

    def span_busy(self, span_id: int) -> bool:
        with self._lock:
            return bool(self._spans[span_id])

    @contextmanager
    def assembling(self) -> Iterator[None]:
        """A send assembling its request (the layers, the query embedding, the searches)."""
        with self._lock:
            self._assembling += 1
        try:
            yield
        finally:
            with self._lock:
                self._assembling -= 1
                if not self._assembling:
                    self._quiet.notify_all()

    def wait_quiet(self, limit: float = 2.0) -> bool:
        """Wait until no send is assembling, for at most ``limit`` seconds (a steady stream of sends
        must not stop background work for good). True when quiet."""
        deadline = time.monotonic() + limit
        with self._lock:
            while self._assembling:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._quiet.wait(left)
            return True

    def state(self, conversation_id: int) -> str:
        with self._lock:
            if conversation_id in self._compacting:
                return "compaction"
            return "reply" if self._replies[conversation_id] else "idle"
