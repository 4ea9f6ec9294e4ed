"""Reads sent ahead: a read snapshot whose statements repeat from one use to the next.

A send reads its thread's state in one snapshot: a dozen small statements (the capsule, the
summary, the persona, the household's fields, the layers' settings), a round trip each on
PostgreSQL, and most of them the same statement with the same arguments on every send.
``store.read(ahead=key)`` names such a snapshot. The statements its last two uses both asked are
sent with its ``BEGIN`` in one pipeline; each is then answered from there when the code asks it,
and a statement asked with other arguments (the newest turns after this message) simply runs.

An answer taken from the pipeline is the one the statement would have had when asked: both ran
in the same ``REPEATABLE READ`` snapshot, and answers are given only to reads (never to a
statement that writes, locks or sets anything) and only until the snapshot's first statement
that is not such a read. Asking a statement twice in a snapshot runs it the second time. SQLite
has no round trips and ignores ``ahead``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any, Hashable

# One statement as sent: its SQL (rewritten for psycopg) and its arguments.
Call = tuple[str, tuple[Any, ...]]

# Anything a SELECT can do besides reading: write (a data-modifying WITH), lock rows, set a
# setting, advance a sequence, take an advisory lock, notify listeners. A match anywhere, in a
# literal too, is enough to leave a statement out: wrongly leaving a read out only costs its round trip.
_NOT_ONLY_READS = re.compile(
    r"\b(INSERT|UPDATE|DELETE|MERGE|SHARE|set_config|nextval|setval|pg_advisory\w*|pg_notify)\b", re.IGNORECASE)
_READ = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)
# A text argument this long is a search's words or a message, not an id: it never repeats, and is
# not kept.
LONGEST_ARGUMENT = 256


def reads_only(sql: str) -> bool:
    """Whether ``sql`` only reads, so running it earlier in the same snapshot gives the same rows."""
    return bool(_READ.match(sql)) and not _NOT_ONLY_READS.search(sql)


def call_of(sql: str, parameters: Any) -> Call | None:
    """The statement as a key, or None when it cannot be one (named or unhashable arguments, a long text)."""
    if not isinstance(parameters, tuple):
        return None
    for value in parameters:
        if isinstance(value, (str, bytes)) and len(value) > LONGEST_ARGUMENT:
            return None
    try:
        hash(parameters)
    except TypeError:
        return None
    return sql, parameters


class Snapshot:
    """One snapshot under way: the answers sent ahead, and what the code asked."""

    def __init__(self, key: Hashable, answers: dict[Call, Any]):
        self.key = key
        self.answers = answers
        self.asked: list[Call] = []
        self.reading = True  # until a statement that is not a read

    def take(self, sql: str, parameters: Any, only_reads: bool) -> Any | None:
        """The answer sent ahead for this statement (a driver cursor holding its rows), or None
        when it must run now. Notes what was asked either way."""
        if not self.reading:
            return None
        if not only_reads:
            self.reading = False
            return None
        call = call_of(sql, parameters)
        if call is None:
            return None
        self.asked.append(call)
        return self.answers.pop(call, None)


class ReadAhead:
    """A store's record, per named snapshot, of the statements worth sending ahead.

    A statement is sent ahead once two uses in a row asked it, so a read whose arguments change
    every time (a search for the message's words) is never sent for nothing more than once."""

    def __init__(self, snapshots: int = 256, statements: int = 32):
        self.snapshots = snapshots
        self.statements = statements
        self._lock = threading.Lock()
        # key -> (the statements to send ahead, the statements its last use asked)
        self._kept: OrderedDict[Hashable, tuple[list[Call], set[Call]]] = OrderedDict()

    def planned(self, key: Hashable) -> list[Call]:
        with self._lock:
            kept = self._kept.get(key)
            return list(kept[0]) if kept else []

    def ran(self, snapshot: Snapshot) -> None:
        """Remember what a finished snapshot asked."""
        asked = list(dict.fromkeys(snapshot.asked))
        with self._lock:
            before = self._kept.get(snapshot.key)
            last = before[1] if before else set()
            again = [call for call in asked if call in last][: self.statements]
            self._kept[snapshot.key] = (again, set(asked[: self.statements * 4]))
            self._kept.move_to_end(snapshot.key)
            while len(self._kept) > self.snapshots:
                self._kept.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._kept.pop(key, None)
