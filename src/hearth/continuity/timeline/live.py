"""Live-only notices (E6): what the timeline shows while it happens and never stores.

A capsule refresh that starts or fails is announced here, not in the ledger. Subscribers (the
server's SSE stream) get each notice of their own user only; a slow subscriber loses the oldest
notices rather than holding anyone up. Notices carry kinds, ids and numbers, never text.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

MAX_QUEUED = 100


class LiveBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[int, list[queue.Queue]] = {}

    def subscribe(self, user_id: int) -> "queue.Queue[dict[str, Any]]":
        q: queue.Queue[dict[str, Any]] = queue.Queue(MAX_QUEUED)
        with self._lock:
            self._subscribers.setdefault(user_id, []).append(q)
        return q

    def unsubscribe(self, user_id: int, q: queue.Queue) -> None:
        with self._lock:
            listeners = self._subscribers.get(user_id, [])
            if q in listeners:
                listeners.remove(q)
            if not listeners:
                self._subscribers.pop(user_id, None)

    def publish(self, user_id: int, notice: dict[str, Any]) -> int:
        """Deliver to this user's subscribers; returns how many got it."""
        with self._lock:
            listeners = list(self._subscribers.get(user_id, []))
        for q in listeners:
            while True:
                try:
                    q.put_nowait(notice)
                    break
                except queue.Full:
                    try:
                        q.get_nowait()
                    except queue.Empty:
                        pass
        return len(listeners)
