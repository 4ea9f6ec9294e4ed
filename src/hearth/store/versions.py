"""Values read from rows, kept by the row's version where the engine names one.

On PostgreSQL a row's ``xmin`` and ``ctid`` (``Engine.row_version``) change with every write of
it: a new version of a row is written by another transaction (a new ``xmin``) or, inside one
transaction, to another place (a new ``ctid``, since the place of a version that transaction
replaced cannot be reused before it ends); the server's start time goes with them, since
transaction ids are one server's own. So a value read with the version it came from can be
used again while a read of the version alone finds it unchanged: one short read instead of the
transfer of a long text, in every process that shares the database. SQLite names no version
(``""``): its rows are read in-process, as cheaply as the version would be.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

LIMIT = 64  # entries kept, the least recently used dropped first
_HELD: "OrderedDict[tuple[Any, ...], tuple[str, Any]]" = OrderedDict()
_LOCK = threading.Lock()


def held(key: tuple[Any, ...], version: str) -> Any:
    """The value kept for ``key`` when it was read at ``version``; None otherwise."""
    with _LOCK:
        entry = _HELD.get(key)
        if entry is None or entry[0] != version:
            return None
        _HELD.move_to_end(key)
        return entry[1]


def keep(key: tuple[Any, ...], version: str, value: Any) -> None:
    with _LOCK:
        _HELD[key] = (version, value)
        _HELD.move_to_end(key)
        while len(_HELD) > LIMIT:
            _HELD.popitem(last=False)


def forget() -> None:
    """Drop every value kept (forgetting's compaction: no text outlives its row here)."""
    with _LOCK:
        _HELD.clear()
