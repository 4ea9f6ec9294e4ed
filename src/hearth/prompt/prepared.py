"""Text work prepared outside the write lock (U5): macros are filled with no transaction open.

Writers are serialised (``Store.write``), so whatever runs inside a write transaction delays every
other writer of the database, every user's. Filling macros in a card's greeting or a stored prompt
costs time in proportion to the text, which a person chooses: a large card held everyone's writes
for as long as its text took. So a write that fills text runs as an attempt that can be retried:

1. the transaction runs as before, reading what the text is made from (cheap reads under the lock);
   where it would fill text and nothing was prepared for exactly those inputs, it raises
   ``Unprepared`` carrying the inputs (of every text it fills there: ``filled_all``), and the
   transaction rolls back, having kept nothing;
2. ``run`` fills the text from those inputs with no transaction open (a pure function of them);
3. the transaction runs again; where it reads the same inputs it writes the prepared text, which
   costs the lock a comparison of values instead of the fill. Inputs that changed in between
   (another writer edited the persona, a memory, a display name) are simply not found: the
   attempt asks for them again, up to ``ATTEMPTS`` times, then the write is refused as busy
   (``StoreBusy``, 503 "try again") rather than filled under the lock or written stale.

What an attempt chose that the inputs depend on (a new conversation's id and start time) is kept
in ``Ready.kept`` and chosen again by the next attempt, so its prepared text still fits.

A caller inside someone else's write transaction cannot roll back and retry: ``run`` then gives
``None`` for ``ready`` and ``filled`` fills at once, as before, unless that caller passes its own
``Ready`` down (the OpenAI-compatible path, whose whole save is one transaction, does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, TypeVar

from hearth.errors import StoreBusy

if TYPE_CHECKING:
    from hearth.store import Store

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 (the inputs of one fill)

# Attempts of one write before it is refused as busy: the first finds what to fill, each further
# one needs the inputs of the one before to have stayed as they were while the text was filled.
ATTEMPTS = 5


class Unprepared(Exception):
    """Raised inside a write transaction where text would be filled that is not prepared: the
    transaction rolls back and ``run`` fills it outside. Not a Hearth error: it never leaves
    ``run`` (a caller that cannot retry never sees it, ``filled`` fills at once for it)."""

    def __init__(self, ready: "Ready", needs: list[tuple[Hashable, Any]], make: Callable[[Any], Any]):
        super().__init__(f"{len(needs)} text(s) to prepare outside the write lock")
        self.ready = ready
        self.needs = needs  # (key, inputs)
        self.make = make


@dataclass
class Ready:
    """What the attempts of one write have prepared: per key, the inputs a text was made from and
    the text; and values an attempt chose that later attempts choose again."""

    texts: dict[Hashable, tuple[Any, Any]] = field(default_factory=dict)
    kept: dict[Hashable, Any] = field(default_factory=dict)
    attempts: int = 0

    def prepare(self, need: Unprepared) -> None:
        for key, inputs in need.needs:
            self.texts[key] = (inputs, need.make(inputs))

    def _found(self, key: Hashable, inputs: Any) -> tuple[bool, Any]:
        found = self.texts.get(key)
        return (True, found[1]) if found is not None and found[0] == inputs else (False, None)


def filled(ready: Ready | None, key: Hashable, inputs: I, make: Callable[[I], T]) -> T:
    """``make(inputs)``: the text prepared for these exact inputs when there is one; with no
    ``ready`` (a caller that cannot retry), made now; otherwise ``Unprepared`` is raised so the
    write rolls back and ``run`` makes it outside the lock. ``make`` must depend on nothing else."""
    return filled_all(ready, [(key, inputs)], make)[0]


def filled_all(ready: Ready | None, wanted: list[tuple[Hashable, I]], make: Callable[[I], T]) -> list[T]:
    """``filled`` for several texts at once: every one missing is asked for in one ``Unprepared``
    (a persona's settings rebuild every prompt of its threads in one attempt more, not one each)."""
    if ready is None:
        return [make(inputs) for _, inputs in wanted]
    found = [ready._found(key, inputs) for key, inputs in wanted]
    missing = [pair for pair, (hit, _) in zip(wanted, found) if not hit]
    if missing:
        raise Unprepared(ready, missing, make)
    return [text for _, text in found]


def run(store: "Store", attempt: Callable[[Ready | None], T], ready: Ready | None = None) -> T:
    """``attempt(ready)``, which opens a write transaction, run until what it fills is prepared.

    With a caller's ``ready`` the caller's own ``run`` retries (this attempt is part of its
    transaction); inside a transaction nobody can retry, so the attempt fills as it goes."""
    if ready is not None:
        return attempt(ready)
    if store.in_write:
        return attempt(None)
    ready = Ready()
    while True:
        ready.attempts += 1
        try:
            return attempt(ready)
        except Unprepared as need:
            if need.ready is not ready:
                raise
            if ready.attempts >= ATTEMPTS:
                raise StoreBusy("what this change is made from kept changing while it was prepared; "
                                "try again") from None
            need.ready.prepare(need)  # no transaction is open here
