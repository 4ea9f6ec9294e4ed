"""What is running in a conversation right now: replies and compactions (E7).

"Compact now" is refused while a reply or another compaction of the same conversation runs, and a
new message is refused while a compaction runs, both with a clear ``Conflict`` (HTTP 409) before
anything is saved. The registry is per process: the server is the one process that streams
replies and compacts.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from ..errors import Conflict


class Activity:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: Counter[int] = Counter()
        self._compacting: set[int] = set()

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

    def state(self, conversation_id: int) -> str:
        with self._lock:
            if conversation_id in self._compacting:
                return "compaction"
            return "reply" if self._replies[conversation_id] else "idle"
