"""Long-term memories and conversation-scoped snapshots (M1-M7, P5).

The governing rule (M2): new memories affect future threads and branches; edits affect threads
that already contain that memory; deletions remove the memory from every snapshot and stored prompt.

A snapshot is a set of memory ids per conversation, captured when the conversation is created. The
stored prompt always renders the *current* text of the ids in its snapshot. Every change that
affects stored prompts writes them in the same write transaction as the change itself, and writers
are serialised, so a racing first send, edit, delete or refresh can never leave a prompt that
disagrees with its snapshot or with the current memory text (M7).

Composing those prompts is the slow part (each renders its whole snapshot), so an edit, end,
restore, delete or move composes them first from a read snapshot, with the change applied to each
snapshot's items, and holds the write lock only to write the change and the finished texts. The
write transaction first checks that no other transaction committed since that snapshot
(``Store.commit_mark``); if one did, it plans the change again and composes inside the lock, as if
nothing had been prepared, so a racing writer never leaves a stale prompt (M7, S3).
"""

from __future__ import annotations

import builtins
from bisect import bisect_left
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from hearth.errors import Conflict, InvalidInput, NotFound
from hearth.prompt.static import MemoryRow
from hearth.records import ledger
from hearth.records.temporal import check_mode, parse_moment
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import memories as stored
from hearth.store.queries import proposals
from hearth.store.queries.memories import Memory, MemoryVersion, SnapshotInfo
from hearth.validation import check_id, check_text

MAX_MEMORY_TEXT = 10_000
MAX_IMPORT = 10_000
# Who made a change (B2): the owner by hand, an approved suggestion (or one auto-approved, G4),
# an import, or unknown for rows that predate versions.
ACTORS = ("owner", "suggestion", "auto", "import")
# Stored order numbers leave this much room between neighbours, so a move writes one row; only a
# move into a gap that has run out (or among numbers stored before gaps) renumbers the list.
GAP = 1024
# How many times a change composes its prompts from a read snapshot before, with other writers
# committing meanwhile every time, it composes them under the write lock instead.
PREPARE_ATTEMPTS = 2


def check_memory(text: Any, category: Any, importance: Any) -> tuple[str, str, int]:
    check_text(text, "memory text", max_chars=MAX_MEMORY_TEXT, required=True)
    if isinstance(category, str):
        check_text(category, "category")
    if not isinstance(category, str) or len(category) > 100:
        raise InvalidInput("category must be text of at most 100 characters")
    if isinstance(importance, bool) or not isinstance(importance, int) or not 0 <= importance <= 10:
        raise InvalidInput("importance must be a whole number from 0 to 10")
    return text.strip(), category.strip(), importance


# -- snapshot primitives used inside other transactions ----------------------------------------
def capture_snapshot(conn: Connection, user_id: int, conversation_id: int, provenance: str) -> None:
    """Replace a conversation's snapshot with the current eligible set, in the caller's transaction."""
    now = utcnow()
    stored.capture(conn, user_id, conversation_id)
    if provenance == "refreshed":
        stored.set_refreshed(conn, conversation_id, now)
    else:
        stored.set_captured(conn, conversation_id, provenance, now)


def snapshot_items(conn: Connection, conversation_id: int) -> list[MemoryRow]:
    """Current text of the snapshot's memories in manual global order. Empty stays empty (M3).

    Plain ``(id, text, category, importance)`` rows: a prompt may hold tens of thousands of them."""
    return stored.snapshot_items(conn, conversation_id)


def snapshot_ids(conn: Connection, conversation_id: int) -> list[int]:
    return stored.snapshot_ids(conn, conversation_id)


def conversations_holding(conn: Connection, memory_id: int) -> list[int]:
    return stored.conversations_holding(conn, memory_id)


def backfill(conn: Connection, user_id: int, conversation_ids: Iterable[int] | None = None) -> int:
    """Give legacy threads (no recorded snapshot) the current eligible set, once (M6).

    Provenance stays 'legacy' and no capture time is set: the true capture moment is unknown, so
    none is invented (M5). ``snapshot_backfilled`` makes it one-time: a backfilled thread whose set
    was empty stays empty (M3).
    """
    rows = stored.legacy_conversations(conn, user_id, conversation_ids)
    for conversation_id in rows:
        stored.backfill(conn, user_id, conversation_id)
    if rows:
        ledger.append(conn, user_id=user_id, kind="memory.snapshot_backfill", payload={"conversations": len(rows)})
    return len(rows)


# A change as it shows in one snapshot's items (in order): what the prompt will list once it is made.
Adjust = Callable[[list[MemoryRow]], Sequence[MemoryRow]]
# Stored prompts composed ahead of their write: conversation id -> (text, metadata).
Composed = dict[int, tuple[str, dict]]
# Installed by the engine so this module does not depend on prompt storage. ``Compose`` renders
# the stored prompts of the given conversations as they will be after ``Adjust``, from whatever the
# connection reads; ``Rebuild`` writes them inside the current write transaction, using the
# composed texts where given and composing the rest itself.
Compose = Callable[[Connection, Iterable[int], Adjust], Composed]
Rebuild = Callable[[Connection, Iterable[int], "Composed | None"], int]


def moved(memory_id: int, rank: dict[int, int]) -> Adjust:
    """A move: the memory leaves its place and goes where ``rank`` (the new order) puts it. The
    others keep their order, so a snapshot's items need one removal and one insertion."""
    def adjust(items: list[MemoryRow]) -> list[MemoryRow]:
        for index, item in enumerate(items):
            if item[0] == memory_id:
                rest = items[:index] + items[index + 1:]
                at = bisect_left(rest, rank[memory_id], key=lambda other: rank[other[0]])
                return rest[:at] + [item] + rest[at:]
        return items  # not shown in this prompt: nothing to move
    return adjust


def replaced(memory_id: int, item: MemoryRow | None, rank: dict[int, int] | None) -> Adjust:
    """An edit, end, restore or delete of one memory the snapshot holds: it now shows as ``item``
    (None: no longer shown). ``rank`` (the order) is needed only when it was not shown before."""
    def adjust(items: list[MemoryRow]) -> list[MemoryRow]:
        for index, old in enumerate(items):
            if old[0] == memory_id:
                return items[:index] + ([item] if item else []) + items[index + 1:]
        if item is None:
            return items
        assert rank is not None, "a memory that becomes visible is placed by the order"
        at = bisect_left(items, rank[memory_id], key=lambda other: rank[other[0]])
        return items[:at] + [item] + items[at:]
    return adjust


def _between(before: int | None, after: int | None) -> int | None:
    """A stored order number strictly between two neighbours' (None: either end), or None if
    there is no room left between them."""
    if after is None:
        return GAP if before is None else before + GAP
    if before is None:
        return after - GAP
    return (before + after) // 2 if after - before >= 2 else None


def _unchanged(items: list[MemoryRow]) -> list[MemoryRow]:
    return items


@dataclass(frozen=True)
class _Plan:
    """A checked change, ready to write: the prompts it changes and how it changes their items."""

    affected: builtins.list[int]
    adjust: Adjust
    values: Any = None  # what the writer needs (new values, a new order, ...)


class Memories:
    def __init__(self, store: Store, user_id: int, rebuild: Rebuild, compose: Compose):
        self.store = store
        self.user_id = user_id
        self._rebuild = rebuild
        self._compose = compose

    # -- changes that rebuild stored prompts: composed outside the write lock ----------------------
    @contextmanager
    def _changing(self, plan: Callable[[Connection], _Plan]
                  ) -> Iterator[tuple[Connection, _Plan, Composed | None]]:
        """Plan a change and compose the prompts it leaves in a read snapshot, then open the write
        transaction. Yields (connection, plan, composed prompts or None) inside it.

        If another transaction committed since the snapshot, nothing composed is used: the work
        is prepared again from a new snapshot, and after ``PREPARE_ATTEMPTS`` the plan is made
        inside the lock and the rebuild composes from what the lock protects. Bad input is
        refused by the first plan, before the write lock is taken (U3).
        """
        attempts = 0 if self.store.in_write else PREPARE_ATTEMPTS  # a caller's lock is already held
        for _ in range(attempts):
            with self.store.read() as conn:
                mark = self.store.commit_mark(conn)
                first = plan(conn)
                composed = self._compose(conn, first.affected, first.adjust)
            with self.store.write() as conn:
                if self.store.commit_mark(conn) == mark:
                    yield conn, first, composed
                    return
        with self.store.write() as conn:
            yield conn, plan(conn), None

    def _ranks(self, conn: Connection) -> dict[int, int]:
        """Each memory's place in the manual global order."""
        return stored.ranks(conn, self.user_id)

    # -- reading ---------------------------------------------------------------------------
    def get(self, memory_id: int) -> Memory:
        with self.store.read() as conn:
            memory = stored.get(conn, self.user_id, check_id(memory_id, "memory id"))
            if memory is None:
                raise NotFound(f"no memory {memory_id}")
            return memory

    def list(self) -> list[Memory]:
        return stored.listing(self.store.connection(), self.user_id)

    def count(self) -> int:
        """How many memories are kept and current (what a new thread would start with, W11)."""
        return stored.count_current(self.store.connection(), self.user_id)

    def snapshot(self, conversation_id: int) -> builtins.list[Memory]:
        with self.store.read() as conn:
            self._owned_conversation(conn, conversation_id)
            return stored.snapshot(conn, self.user_id, conversation_id)

    def snapshot_info(self, conversation_id: int) -> SnapshotInfo:
        return self._owned_conversation(self.store.connection(), conversation_id)

    def _owned_conversation(self, conn: Connection, conversation_id: int) -> SnapshotInfo:
        info = stored.snapshot_info(conn, self.user_id, conversation_id)
        if info is None:
            raise NotFound(f"no conversation {conversation_id}")
        return info

    # -- additions: future threads only (M2) -------------------------------------------------
    def add(self, text: str, category: str = "", importance: int = 0, eligible: bool = True, *,
            actor: str = "owner", proposal_id: int | None = None, valid_from: Any = None) -> Memory:
        return self.import_many([{"text": text, "category": category, "importance": importance,
                                  "eligible": eligible, "valid_from": valid_from}],
                                actor=actor, proposal_id=proposal_id)[0]

    def import_many(self, items: builtins.list[dict[str, Any]], *, actor: str = "owner",
                    proposal_id: int | None = None) -> builtins.list[Memory]:
        """Persist a batch together (M1). Like additions, it rebuilds no existing prompt (P5).

        Each item may carry ``valid_from`` (when it became true; not in the future)."""
        if not isinstance(items, list) or not items:
            raise InvalidInput("a memory import needs a non-empty list")
        if len(items) > MAX_IMPORT:
            raise InvalidInput(f"at most {MAX_IMPORT} memories per import")
        if actor not in ACTORS:
            raise InvalidInput("unknown actor")
        now = utcnow()
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidInput(f"item {i} is not an object")
            try:
                valid_from = item.get("valid_from")
                checked.append((*check_memory(item.get("text"), item.get("category", ""), item.get("importance", 0)),
                                bool(item.get("eligible", True)),
                                now if valid_from is None else parse_moment(valid_from, "valid_from",
                                                                             end_of_day=False)))
            except InvalidInput as exc:
                raise InvalidInput(f"item {i}: {exc}") from None
        with self.store.write() as conn:
            top, before = stored.top(conn, self.user_id)
            ids = []
            for offset, (text, category, importance, eligible, valid_from) in enumerate(checked, start=1):
                ids.append(stored.insert(conn, self.user_id, text, category, importance, top + offset * GAP,
                                         eligible, now, valid_from))
                self._record(conn, ids[-1], "imported" if actor == "import" else "created", actor,
                             proposal_id)
            ledger.append(conn, user_id=self.user_id, kind="memory.added", payload={"count": len(ids)})
            # Exactly the new ones, after all others.
            return stored.placed_after(conn, self.user_id, top, before + 1)

    # -- versions (B1, B2) ------------------------------------------------------------------------
    def _record(self, conn: Connection, memory_id: int, change: str, actor: str,
                proposal_id: int | None = None) -> None:
        """Append the memory row as it now stands as its newest version."""
        stored.record_version(conn, memory_id, change, actor, proposal_id)

    def history(self, memory_id: int) -> builtins.list[MemoryVersion]:
        """Every version of a memory, newest first: what it said, when, and who changed it (B2)."""
        self.get(memory_id)
        return stored.versions(self.store.connection(), self.user_id, memory_id)

    def as_of(self, when: Any, mode: str = "valid") -> builtins.list[MemoryVersion]:
        """What was true on a date (``valid``), or what Hearth knew on that date (``known``).

        ``valid`` reads today's knowledge: versions not retired whose valid interval holds the
        moment. ``known`` reads the knowledge of that moment: versions recorded by then and not yet
        retired then, valid at that moment as far as Hearth knew then (an end recorded later does
        not count). Hidden memories are included with ``eligible`` false.
        """
        mode = check_mode(mode)
        moment = parse_moment(when, "as-of date")
        return stored.as_of(self.store.connection(), self.user_id, moment, known=mode != "valid")

    # -- edits: only threads that already hold the memory (M2, P5) ----------------------------
    def edit(self, memory_id: int, *, text: str | None = None, category: str | None = None,
             importance: int | None = None, eligible: bool | None = None, correction: bool = False,
             valid_from: Any = None, actor: str = "owner", proposal_id: int | None = None) -> tuple[Memory, int]:
        """Edit a memory; rebuild the prompts that hold it. Returns (memory, prompts rebuilt).

        A new text *supersedes* the old one (B1): the old version stays, valid until ``valid_from``
        (default now), and the new version is valid from then. ``correction=True`` marks a typo fix
        instead: the corrected version is retired and the new one takes its valid interval, as if
        it had always said so. Category, importance and visibility changes are corrections too.
        The memory keeps its id, so every snapshot that holds it now shows the new text (M2).
        """
        if actor not in ACTORS:
            raise InvalidInput("unknown actor")

        def plan(conn: Connection) -> _Plan:
            current = self.get(memory_id)
            new_text, new_category, new_importance = check_memory(
                current.text if text is None else text,
                current.category if category is None else category,
                current.importance if importance is None else importance,
            )
            new_eligible = current.eligible if eligible is None else bool(eligible)
            changed_text = new_text != current.text
            if not changed_text and (new_category, new_importance, new_eligible) == (
                    current.category, current.importance, current.eligible):
                if text is not None:
                    raise InvalidInput("the new text is identical to the current one; nothing to change")
                return _Plan([], _unchanged)
            if not current.current and changed_text:
                raise Conflict(f"memory {memory_id} has ended; restore a version to bring it back")
            supersede = changed_text and not correction
            start = None
            if supersede and valid_from is not None:
                start = parse_moment(valid_from, "valid_from", end_of_day=False)
                if current.valid_from and start < current.valid_from:
                    raise InvalidInput("a new version cannot become true before the version it replaces")
            if not supersede and valid_from is not None:
                raise InvalidInput("a correction keeps the corrected version's valid-from date")
            shown = new_eligible and current.current
            item = (memory_id, new_text, new_category, new_importance) if shown else None
            rank = self._ranks(conn) if shown and not current.eligible else None
            return _Plan(conversations_holding(conn, memory_id), replaced(memory_id, item, rank),
                         (current, new_text, new_category, new_importance, new_eligible, supersede, start))

        with self._changing(plan) as (conn, change, composed):
            if change.values is None:
                return self.get(memory_id), 0
            current, new_text, new_category, new_importance, new_eligible, supersede, start = change.values
            now = utcnow()
            if supersede:
                start = start or now
                if current.valid_from and start < current.valid_from:
                    raise InvalidInput("a new version cannot become true before the version it replaces")
                stored.end_version(conn, memory_id, current.version, start, now)
                kind = "superseded"
            else:
                start = current.valid_from or now
                stored.retire_version(conn, memory_id, current.version, now)
                kind = "corrected" if new_text != current.text else "edited"
            stored.rewrite(conn, self.user_id, memory_id, new_text, new_category, new_importance, new_eligible, now,
                           start)
            self._record(conn, memory_id, kind, actor, proposal_id)
            rebuilt = self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, kind="memory.edited",
                          payload={"memory_id": memory_id, "prompts_rebuilt": rebuilt, "change": kind})
            return self.get(memory_id), rebuilt

    def end(self, memory_id: int, valid_until: Any = None) -> tuple[Memory, int]:
        """Record that a memory stopped being true (B1): it leaves every prompt, its history stays."""
        def plan(conn: Connection) -> _Plan:
            current = self.get(memory_id)
            if not current.current:
                raise Conflict(f"memory {memory_id} has already ended")
            until = None if valid_until is None else parse_moment(valid_until, "valid_until")
            if until is not None and current.valid_from and until < current.valid_from:
                raise InvalidInput("a memory cannot end before it became true")
            return _Plan(conversations_holding(conn, memory_id), replaced(memory_id, None, None),
                         (current, until))

        with self._changing(plan) as (conn, change, composed):
            current, until = change.values
            now = utcnow()
            until = until or now
            stored.end_version(conn, memory_id, current.version, until, now)
            stored.set_ended(conn, memory_id, until, now)
            rebuilt = self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, kind="memory.ended",
                          payload={"memory_id": memory_id, "prompts_rebuilt": rebuilt})
            return self.get(memory_id), rebuilt

    def restore(self, memory_id: int, version: int, *, actor: str = "owner") -> tuple[Memory, int]:
        """Make an older version current again, as a new version valid from now (B2 undo)."""
        def plan(conn: Connection) -> _Plan:
            try:
                current = self.get(memory_id)
            except NotFound:
                raise NotFound(f"no memory {memory_id}: a deleted memory and its versions are gone for good,"
                               " so none of its versions can be restored") from None
            old = stored.version(conn, memory_id, version)
            if old is None:
                raise NotFound(f"memory {memory_id} has no version {version}")
            if version == current.version and current.current:
                raise InvalidInput(f"version {version} is already the current version")
            values = (old.text, old.category, old.importance, int(old.eligible))
            item = (memory_id, values[0], values[1], values[2]) if values[3] else None
            rank = self._ranks(conn) if item and not (current.eligible and current.current) else None
            return _Plan(conversations_holding(conn, memory_id), replaced(memory_id, item, rank),
                         (current, values))

        with self._changing(plan) as (conn, change, composed):
            current, (text, category, importance, eligible) = change.values
            now = utcnow()
            if current.current:
                stored.end_open_version(conn, memory_id, current.version, now)
            stored.reinstate(conn, memory_id, text, category, importance, eligible, now)
            self._record(conn, memory_id, f"restored v{version}", actor)
            rebuilt = self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, kind="memory.restored",
                          payload={"memory_id": memory_id, "version": version, "prompts_rebuilt": rebuilt})
            return self.get(memory_id), rebuilt

    # -- deletions: gone from every snapshot and prompt (M2) -----------------------------------
    def delete(self, memory_id: int) -> int:
        """Delete a memory everywhere; returns the number of prompts rebuilt."""
        def plan(conn: Connection) -> _Plan:
            self.get(memory_id)
            return _Plan(conversations_holding(conn, memory_id), replaced(memory_id, None, None))

        with self._changing(plan) as (conn, change, composed):
            # Suggestions that proposed it, or that compare something with it, quote its text (B4).
            proposals.delete_about_memory(conn, self.user_id, memory_id)
            # Versions go with it (cascade): a deleted memory cannot be restored (B2).
            stored.delete(conn, self.user_id, memory_id)
            rebuilt = self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, kind="memory.deleted",
                          payload={"memory_id": memory_id, "prompts_rebuilt": rebuilt})
            return rebuilt

    # -- manual global order ------------------------------------------------------------------
    def move(self, memory_id: int, position: int) -> builtins.list[Memory]:
        """Move a memory to a 1-based position in the global order.

        It takes a stored number between its new neighbours', so one row is written; only when
        they leave no room is the list renumbered ``GAP`` apart. Order is part of every prompt that
        holds any memory, like a settings change; those prompts are composed before the write lock.
        """
        def plan(conn: Connection) -> _Plan:
            self.get(memory_id)
            rows = stored.positions(conn, self.user_id)
            current = {row[0]: row[1] for row in rows}
            order = [row[0] for row in rows if row[0] != memory_id]
            if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= len(order) + 1:
                raise InvalidInput(f"position must be between 1 and {len(order) + 1}")
            at = position - 1
            before = current[order[at - 1]] if at > 0 else None
            after = current[order[at]] if at < len(order) else None
            order.insert(at, memory_id)
            if rows[at][0] == memory_id:
                changed = []  # already there
            elif (number := _between(before, after)) is not None:
                changed = [(number, memory_id, self.user_id)]
            else:
                changed = [(i * GAP, mid, self.user_id) for i, mid in enumerate(order, start=1) if current[mid] != i * GAP]
            affected = stored.conversations_with_snapshots(conn, self.user_id) if changed else []
            return _Plan(affected, moved(memory_id, {mid: i for i, mid in enumerate(order)}), changed)

        with self._changing(plan) as (conn, change, composed):
            stored.set_positions(conn, change.values)
            rebuilt = self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, kind="memory.moved",
                          payload={"memory_id": memory_id, "position": position, "prompts_rebuilt": rebuilt})
        return self.list()

    # -- explicit refresh (M4) ----------------------------------------------------------------
    def refresh(self, conversation_id: int) -> SnapshotInfo:
        """Replace one thread's snapshot with the current eligible set and rebuild its prompt."""
        def plan(conn: Connection) -> _Plan:
            self._owned_conversation(conn, conversation_id)
            shown = stored.current_items(conn, self.user_id)  # what the capture below will hold
            return _Plan([conversation_id], lambda _items: shown)

        with self._changing(plan) as (conn, change, composed):
            capture_snapshot(conn, self.user_id, conversation_id, "refreshed")
            self._rebuild(conn, change.affected, composed)
            ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id,
                          kind="memory.snapshot_refreshed", payload={})
        return self.snapshot_info(conversation_id)

    def backfill_legacy(self) -> int:
        """One-time snapshot backfill for threads that predate snapshots (M6); see backfill()."""
        with self.store.write() as conn:
            return backfill(conn, self.user_id)
