"""The in-process vector index cache (S7, S18): one ``VectorIndex`` per database, user, source
and model, kept in step with its table and saved beside the database.

A change other than an addition (a deletion, a vector embedded again) is applied to the cached
index in place; an index that must be built from its table is built in a background thread while
searches compare every stored vector (``exact_table_search``). ``semantic`` holds the process's
cache (``semantic.INDEXES``) and the searches that use it; docs/embeddings.md describes both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from hearth.store import Connection
from hearth.store.queries import vectors as stored

from .. import retrieval
from ..errors import HearthError, StoreError
from ..store import DriverError, engine_of, open_read_only

if TYPE_CHECKING:
    from .vectors import VectorIndex


log = logging.getLogger(__name__)


def database_index(conn: Connection) -> bool:
    """Whether the database keeps the vector index (pgvector's HNSW) rather than this process
    (an index built from the table's vectors and saved beside the database file)."""
    return engine_of(conn).vector_index == "pgvector"


VECTOR_SOURCES = ("messages", "chunks", "facts")
# Above this many vectors an index that must be built from its table is built in a background
# thread, and searches meanwhile compare every stored vector (``exact_table_search``, S18).
BACKGROUND_ABOVE = 100_000
# A saved index this many rows behind its table is saved again once loaded, so the next start does
# not add them all again (10,584 rows took 5.8 s to add at a million vectors).
RESAVE_AFTER = 5_000
# An exact index this large is searched ahead on the prefetch thread, as a graph is: its product
# releases the interpreter lock for most of the search (a loop of primary-key reads beside a loop
# of 40,000-vector searches kept 0.82 of its rate; beside a graph's, 0.79). A smaller one is short
# and mostly holds the lock (3,225 vectors: 0.39), so it stays in the search.
AHEAD_EXACT_ROWS = 16_384
# A graph whose free slots (removed vectors not yet reused by additions) pass this share of its
# nodes, and at least COMPACT_MIN of them, is rebuilt from its table in the background while the
# old one goes on answering: searches walk free nodes without returning them.
COMPACT_SHARE = 0.2
COMPACT_MIN = 1_000
# A graph changed in place other than by additions is saved again this many seconds later (one
# save for a burst of changes), so a restart finds those changes in the file: a vector deleted and
# embedded again under its id (W2) shows in no id, and would cost comparing every stored vector.
SAVE_DELAY_S = 60.0
# Finding the ids a change touched (``IndexCache._differences``): the id range is cut in this
# many parts, counted, and a part is read id by id once it holds this many ids or fewer.
_SPLIT = 32
_DIRECT_IDS = 2_048

# Which search answered a source's vector list (recorded with the send's search, S18): the graph,
# the exact in-memory index, or every stored vector compared while the index is built.
ANN, EXACT, EXACT_FALLBACK = "ann", "exact", "exact_fallback"


@dataclass
class IndexCounts:
    """What an ``IndexCache`` did (numbers for tests, benchmarks and logs)."""

    builds: int = 0  # indexes built from their table (a missing or stale saved file, compaction)
    loads: int = 0  # saved graphs loaded
    reconciled: int = 0  # changes other than additions applied in place (deletions, re-embeddings)
    removed: int = 0  # vectors removed in place
    fallbacks: int = 0  # searches answered by comparing every stored vector
    compared: int = 0  # changes found by comparing every stored vector with the index's copy
    compactions: int = 0  # background rebuilds started because of free slots
    saves: int = 0  # graphs saved again after changes in place
    views: int = 0  # saved graphs mapped read-only by a short-lived process


def _fingerprint(model: str, signature: tuple[int, int, int]) -> str:
    """The saved file's summary of its table: model, count, highest id and revision."""
    count, highest, rev = signature
    return f"{model}:{count}:{highest}:r{rev}"


class IndexCache:
    """Vector indexes per (database, user, source, model), kept in step with their table.

    A cheap signature (row count, highest id, revision) is read on every search. When rows were
    only added, the new ones are added to the cached index; any other change (a deletion, a vector
    embedded again) is found by comparing the index's ids with the table's, or failing that every
    stored vector with the index's copy, and applied in place (S18), so the index never drifts
    from the database. Large (ANN) indexes are also saved beside the database with the signature
    they hold (again a minute after a change in place), so a restart loads the graph and applies
    only what changed since. An index that must be built from its table (no usable file) is built
    in a background thread above ``background_above`` vectors; ``get(wait=False)`` then answers
    None and ``vector_search`` compares every stored vector instead.

    A short-lived process (``hearth search``: one search, then it exits; S20) sets
    ``hearth.retrieval.short_lived``:
    a saved graph that holds exactly the table's vectors is mapped from its file rather than read,
    and an index that would have to be built is not (the search compares every stored vector, and
    no thread is left building when the process ends); ``hearth serve`` and ``hearth reindex``
    save the graph that later short-lived searches map.
    """

    def __init__(self, ann_threshold: int | None = None) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[tuple, tuple[tuple, "VectorIndex"]] = {}
        self.ann_threshold = ann_threshold  # None: the index's own default
        self.background_above = BACKGROUND_ABOVE
        self._building: dict[tuple, threading.Event] = {}  # background builds, set when done
        self._loading: dict[tuple, threading.RLock] = {}  # one load or update per index at a time
        self._saving: set[tuple] = set()  # saves waiting for their delay
        self.save_delay = SAVE_DELAY_S
        self.counts = IndexCounts()

    def _signature(self, conn: Connection, source: str, user_id: int, model: str) -> tuple[int, int, int]:
        """(count, highest id, revision) from the trigger-kept counter: one primary-key lookup."""
        return stored.signature(conn, source, user_id, model)

    def _rows(self, conn: Connection, source: str, user_id: int, model: str,
              after: int = 0, through: int | None = None) -> Iterator[list[tuple[int, bytes]]]:
        """(id, embedding BLOB) rows after ``after`` (and at most ``through``), in batches read as
        they are asked: a full rebuild never holds them all."""
        return stored.rows(conn, source, user_id, model, after=after, through=through)

    def _newer(self, conn: Connection, source: str, user_id: int, model: str, after: int,
               through: int) -> list[tuple[int, bytes]]:
        """(id, embedding BLOB) rows after ``after`` and at most ``through``."""
        return [row for part in self._rows(conn, source, user_id, model, after=after, through=through)
                for row in part]

    def _differences(self, conn: Connection, source: str, user_id: int, model: str, held: np.ndarray,
                     through: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids the index holds and the table no longer has, ids the table has and the index
        lacks), up to ``through``. ``held`` is the index's ids, sorted. The id range is cut into
        ``_SPLIT`` parts whose rows are counted and their ids summed (the messages' read walks
        only the index of embeddings by user and model) and compared with the index's; only the
        parts that differ are cut again, down to ``_DIRECT_IDS`` ids, whose ids are read. Reading
        every id cost about 5 us a row in Python (3 s at a million); counting and summing them,
        0.5 s. Changes that leave a part's count and sum as they were (deleting 5 and 8, adding 6
        and 7) are missed here: the revision check in ``_catch_up`` finds that."""
        removed: list[np.ndarray] = []
        added: list[np.ndarray] = []
        ranges = [(0, through)]
        while ranges:
            low, high = ranges.pop()
            first, last = np.searchsorted(held, [low, high + 1])
            if last - first <= _DIRECT_IDS or high - low <= _DIRECT_IDS:
                ids = stored.ids_between(conn, source, user_id, model, low, high)
                removed.append(np.setdiff1d(held[first:last], ids))
                added.append(np.setdiff1d(ids, held[first:last]))
                continue
            step = (high - low) // _SPLIT + 1
            for start in range(low, high + 1, step):
                stop = min(high, start + step - 1)
                count, total = stored.count_and_sum(conn, source, user_id, model, start, stop)
                a, b = np.searchsorted(held, [start, stop + 1])
                if count != b - a or total != int(held[a:b].sum()):
                    ranges.append((start, stop))
        empty = np.zeros(0, dtype=np.int64)
        return (np.concatenate(removed) if removed else empty), (np.concatenate(added) if added else empty)

    @staticmethod
    def _add_rows(index: "VectorIndex", rows: list[tuple[int, bytes]], dim: int) -> None:
        from .vectors import from_blob

        if rows:
            index.add([row_id for row_id, _ in rows], np.stack([from_blob(blob, dim) for _, blob in rows]))

    @staticmethod
    def _file(db_key: str, source: str, user_id: int, model: str) -> Path:
        digest = hashlib.sha256(model.encode()).hexdigest()[:12]
        return Path(db_key + ".vectors") / f"{source}-{user_id}-{digest}.usearch"

    def _new_index(self, dim: int) -> "VectorIndex":
        from .vectors import VectorIndex

        return VectorIndex(dim) if self.ann_threshold is None else VectorIndex(dim, ann_threshold=self.ann_threshold)

    def _catch_up(self, conn: Connection, source: str, user_id: int, model: str, since: tuple[int, int, int],
                  index: "VectorIndex", signature: tuple[int, int, int], dim: int) -> int | None:
        """Bring ``index``, which holds the table as it was at signature ``since``, to
        ``signature``; the number of rows it changed, or None when its count still disagrees
        with the table's (the index may then be part-way and must not be used)."""
        if since == signature:
            return 0
        if signature[2] == since[2] and signature[1] >= since[1]:
            # Bounded by the signature's highest id: a row the embedding job commits between the
            # two reads is not taken for a deletion (which rebuilt the whole index beside this one).
            newer = self._newer(conn, source, user_id, model, since[1], signature[1])
            if since[0] + len(newer) == signature[0]:  # only additions since
                self._add_rows(index, newer, dim)
                return len(newer)
        # Another change: the ids the table and the index disagree on. Each deletion and each
        # addition below the highest id moves the revision by one; a vector replaced under its
        # id moves it by two and changes no id, so a revision the ids do not explain is one of
        # those, which only reading the vectors finds.
        removed, added = self._differences(conn, source, user_id, model, np.sort(index.ids()), signature[1])
        if signature[2] - since[2] != removed.size + int(np.count_nonzero(added <= since[1])):
            # Not explained by ids alone: compare every stored vector with the index's copy.
            return self._compare_all(conn, source, user_id, model, index, signature, dim)
        if removed.size:
            index.remove(removed)
        self._add_rows(index, stored.rows_of(conn, source, user_id, model, added.tolist()), dim)
        if len(index) != signature[0]:
            return None
        self.counts.reconciled += 1
        self.counts.removed += int(removed.size)
        return int(removed.size + added.size)

    def _compare_all(self, conn: Connection, source: str, user_id: int, model: str, index: "VectorIndex",
                     signature: tuple[int, int, int], dim: int) -> int | None:
        """Bring ``index`` to the table by reading every stored vector (a vector replaced under its
        id changes no id): rows it lacks or holds another vector for are added, ids the table no
        longer has removed. As costly as one exact search over the table (``exact_table_search``),
        and far cheaper than building the graph; the number of rows changed, None if the count
        still disagrees."""
        from .vectors import from_blob

        seen: list[np.ndarray] = []
        changed = 0
        for rows in self._rows(conn, source, user_id, model, through=signature[1]):
            rows = [row for row in rows if len(row[1]) == dim * 4]
            ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            seen.append(ids)
            table = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), dim)
            present, held = index.stored(ids)
            # The index keeps unit vectors (float16 in a graph): a replaced vector is far from them.
            norms = np.linalg.norm(table, axis=1)
            close = np.einsum("ij,ij->i", table, held) >= 0.999 * np.where(norms > 0, norms, 1)
            stale = ~(present & close)
            if stale.any():
                changed += int(stale.sum())
                index.add(ids[stale], np.stack([from_blob(rows[i][1], dim) for i in np.flatnonzero(stale)]))
        table_ids = np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64)
        removed = np.setdiff1d(index.ids(), table_ids)
        if removed.size:
            index.remove(removed)
        if len(index) != signature[0]:
            return None
        self.counts.reconciled += 1
        self.counts.compared += 1
        self.counts.removed += int(removed.size)
        return changed + int(removed.size)

    def _load_saved(self, conn: Connection, db_key: str, source: str, user_id: int, model: str, dim: int,
                    signature: tuple[int, int, int]) -> "VectorIndex | None":
        """The saved graph brought up to ``signature``, or None when there is none or it cannot
        be brought up to date."""
        path = self._file(db_key, source, user_id, model)
        saved = _saved_signature(path)
        if saved is None or saved[1] > signature[1]:
            return None
        count, highest, rev, fingerprint = saved
        if rev is None and stored.count_up_to(conn, source, user_id, model, highest) != (count, highest):
            return None  # a file saved without its revision is trusted only if nothing below it changed
        index = self._new_index(dim)
        # Mapped only when nothing is to be caught up: a mapped graph cannot be changed.
        view = retrieval.short_lived and rev is not None and (count, highest, rev) == signature
        if not index.load(path, fingerprint=fingerprint, view=view):
            return None
        self.counts.loads += 1
        if view:
            self.counts.views += 1
            return index
        if rev is None:
            newer = self._newer(conn, source, user_id, model, highest, signature[1])
            self._add_rows(index, newer, dim)
            changed: int | None = len(newer)
            compared = False
        else:
            before = self.counts.compared
            changed = self._catch_up(conn, source, user_id, model, (count, highest, rev), index, signature, dim)
            compared = self.counts.compared > before
        if changed is None:
            return None
        # Before the index is shared, nothing searches it yet: saved again when far behind, when
        # its vectors had to be compared one by one (as costly to repeat at every start), or in
        # the new form. A file holding forgotten vectors is saved again by the forget's own
        # compaction job (``drop_saved``), which a restart runs if it had not run yet.
        if changed >= RESAVE_AFTER or compared or rev is None:
            index.save(path, fingerprint=_fingerprint(model, signature))
        return index

    def _cold_load(self, conn, db_key, source, user_id, model, dim, signature) -> "VectorIndex":
        """The index built from its table (every row up to ``signature``), and saved when a graph."""
        index = self._new_index(dim)
        self.counts.builds += 1
        index.rebuild((row for part in self._rows(conn, source, user_id, model, through=signature[1]) for row in part),
                      total=signature[0])
        if index.mode == "ann":
            path = self._file(db_key, source, user_id, model)
            path.parent.mkdir(parents=True, exist_ok=True)
            index.save(path, fingerprint=_fingerprint(model, signature))
        return index

    def _lock_for(self, key: tuple) -> threading.RLock:
        with self._lock:
            return self._loading.setdefault(key, threading.RLock())

    def get(self, conn: Connection, db_key: str, source: str, user_id: int, model: str,
            dim: int, *, wait: bool = True) -> "VectorIndex | None":
        """The current index. One that must be built from its table (no saved graph, or one that
        cannot be brought up to date) above ``background_above`` vectors is built in a background
        thread: with ``wait=False`` the caller gets None meanwhile and searches the table exactly
        (``exact_table_search``); with ``wait=True`` it waits for the build."""
        if database_index(conn):
            # pgvector's HNSW index is the index of record there; no file may be made from the URL.
            raise StoreError("the in-process vector index is not used on PostgreSQL")
        key = (db_key, source, user_id, model)
        index, _ = self._fresh(conn, key, dim)
        if index is not None:
            return index
        # The start-up warm and a first search once loaded the same million vectors side by side
        # (a second gigabyte): the later one waits for the first's load and finds its index.
        with self._lock_for(key):
            index, _ = self._fresh(conn, key, dim)
            if index is not None:
                return index
            with self._lock:
                building = self._building.get(key)
            if building is None:
                signature = self._signature(conn, source, user_id, model)
                index = self._load_saved(conn, db_key, source, user_id, model, dim, signature)
                if index is None and retrieval.short_lived:
                    return None  # compared exactly, with no build left running at exit
                if index is None and signature[0] <= self.background_above:
                    index = self._cold_load(conn, db_key, source, user_id, model, dim, signature)
                if index is not None:
                    with self._lock:
                        self._indexes[key] = (signature, index)
                    return index
                building = self._build_in_background(key, dim)
        if not wait:
            return None
        building.wait()
        return self._fresh(conn, key, dim)[0]

    def loaded_for_ahead(self, conn: Connection, db_key: str, source: str, user_id: int, model: str,
                         dim: int) -> "VectorIndex | None":
        """The index if it is loaded and worth searching on another thread (a graph, or an exact
        index of at least ``AHEAD_EXACT_ROWS`` vectors), brought up to date; None rather than
        loading or building it."""
        key = (db_key, source, user_id, model)
        with self._lock:
            cached = self._indexes.get(key)
        if cached is None or (cached[1].mode != "ann" and len(cached[1]) < AHEAD_EXACT_ROWS):
            return None
        return self._fresh(conn, key, dim)[0]

    def catch_up(self, conn: Connection, db_key: str, user_id: int, model: str) -> None:
        """Add the rows written since to this user's indexes that are already loaded. The
        background embedding job calls it after writing vectors, so the next search finds its
        index current: adding a reply's two vectors to a million-vector graph costs about 3 ms,
        which was spent on the next send's critical path (docs/benchmarks-history.md, seventh pass)."""
        if database_index(conn):
            return
        for source in VECTOR_SOURCES:
            key = (db_key, source, user_id, model)
            with self._lock:
                cached = self._indexes.get(key)
            if cached is not None:
                self._fresh(conn, key, cached[1].dim)

    def _fresh(self, conn: Connection, key: tuple, dim: int) -> tuple["VectorIndex | None", "VectorIndex | None"]:
        """(the cached index brought up to date, or None if only a build can; the cached one)."""
        _db_key, source, user_id, model = key
        signature = self._signature(conn, source, user_id, model)
        with self._lock:
            cached = self._indexes.get(key)
        if cached is None:
            return None, None
        if cached[0] == signature:
            return cached[1], cached[1]
        with self._lock_for(key):  # one update at a time; a second finds the first's work done
            with self._lock:
                cached = self._indexes.get(key)
            if cached is None:
                return None, None
            index = cached[1]
            signature = self._signature(conn, source, user_id, model)
            if cached[0] == signature:
                return index, index
            if index.viewed:  # cannot be changed: loaded again by the caller
                with self._lock:
                    if self._indexes.get(key) is cached:
                        del self._indexes[key]
                return None, None
            reconciled = self.counts.reconciled
            if self._catch_up(conn, source, user_id, model, cached[0], index, signature, dim) is None:
                with self._lock:
                    if self._indexes.get(key) is cached:
                        del self._indexes[key]  # part-way: never searched again; built afresh
                return None, index
            with self._lock:
                self._indexes[key] = (signature, index)
        if self.counts.reconciled != reconciled and index.mode == "ann":
            self._save_later(key)
        self._compact_if_worth_it(key, index)
        return index, index

    def _save_later(self, key: tuple) -> None:
        """Save ``key``'s graph again ``save_delay`` seconds from now, in a thread of its own,
        if it is still the cached one and up to date; a save already waiting covers this change."""
        with self._lock:
            if key in self._saving:
                return
            self._saving.add(key)

        def save() -> None:
            try:
                conn = open_read_only(key[0])
                try:
                    with self._lock:
                        cached = self._indexes.get(key)
                    if cached is None:
                        return
                    # Under the index's update lock: the signature saved is the one it holds.
                    with self._lock_for(key):
                        if self._fresh(conn, key, cached[1].dim)[0] is not cached[1]:
                            return
                        with self._lock:
                            signature = self._indexes[key][0]
                        self._file(*key).parent.mkdir(parents=True, exist_ok=True)
                        if cached[1].save(self._file(*key), fingerprint=_fingerprint(key[3], signature)):
                            self.counts.saves += 1
                finally:
                    conn.close()
            except (DriverError, HearthError, OSError, KeyError) as exc:
                log.warning("saving the %s vector index failed: %s", key[1], type(exc).__name__)
            finally:
                with self._lock:
                    self._saving.discard(key)

        timer = threading.Timer(self.save_delay, save)
        timer.daemon = True
        timer.name = f"hearth-vectors-save-{key[1]}"
        timer.start()

    def _compact_if_worth_it(self, key: tuple, index: "VectorIndex") -> None:
        """Rebuild a graph holding many free slots in the background; it answers meanwhile."""
        free = index.free_slots
        if free < COMPACT_MIN or free < COMPACT_SHARE * (len(index) + free):
            return
        with self._lock:
            if key in self._building:
                return
        self.counts.compactions += 1
        self._build_in_background(key, index.dim)

    def _build_in_background(self, key: tuple, dim: int) -> threading.Event:
        """Build ``key``'s index from its table in a thread of its own; the event is set when done."""
        db_key, source, user_id, model = key
        with self._lock:
            if key in self._building:
                return self._building[key]
            done = self._building[key] = threading.Event()

        def build() -> None:
            # Its own read-only connection: a connection belongs to the thread that uses it. One
            # read transaction: the signature and the rows are of the same moment.
            conn = open_read_only(db_key)
            try:
                stored.begin_read(conn)
                signature = self._signature(conn, source, user_id, model)
                index = self._cold_load(conn, db_key, source, user_id, model, dim, signature)
                with self._lock:
                    self._indexes[key] = (signature, index)
            except (DriverError, HearthError) as exc:
                log.warning("building the %s vector index failed: %s", source, type(exc).__name__)
            finally:
                conn.close()
                with self._lock:
                    self._building.pop(key, None)
                done.set()

        threading.Thread(target=build, name=f"hearth-vectors-{source}", daemon=True).start()
        return done

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    def discard(self, db_key: str, user_id: int, message_ids: Iterable[int], chunk_ids: Iterable[int],
                fact_ids: Iterable[int] = ()) -> int:
        """Take forgotten vectors out of this user's cached indexes (B4) instead of rebuilding them.

        The cached signature moves to the table's current one only when the removal explains the
        difference exactly; otherwise the next search compares ids (``_catch_up``)."""
        by_source = {"messages": list(message_ids), "chunks": list(chunk_ids), "facts": list(fact_ids)}
        removed_total = 0
        conn = open_read_only(db_key)
        try:
            with self._lock:
                items = [(k, v) for k, v in self._indexes.items() if k[0] == db_key and k[2] == user_id]
            for key, (signature, index) in items:
                ids = by_source.get(key[1], [])
                if not ids:
                    continue
                with self._lock_for(key):
                    removed = index.remove(ids)
                    removed_total += removed
                    self.counts.removed += removed
                    current = self._signature(conn, key[1], user_id, key[3])
                    if (current[0] == signature[0] - removed and current[1] == signature[1]
                            and current[2] == signature[2] + removed):
                        with self._lock:
                            if self._indexes.get(key, (None,))[0] == signature:
                                self._indexes[key] = (current, index)
                self._compact_if_worth_it(key, index)
        finally:
            conn.close()
        return removed_total

    def drop_saved(self, db_key: str, user_id: int | None = None) -> int:
        """Replace or delete saved index files (of one user, or all): a saved graph may still hold
        forgotten vectors. A loaded index that is up to date (its forgotten vectors taken out) is
        saved again over its file, its free slots overwritten first (``VectorIndex.scrub``), so a
        restart loads it instead of building the graph again; any other file is deleted and the
        next cold start builds it from the table. Returns how many files were replaced or deleted."""
        folder = Path(db_key + ".vectors")
        if not folder.is_dir():
            return 0
        dropped = 0
        with self._lock:
            items = [(k, v[1]) for k, v in self._indexes.items()
                     if k[0] == db_key and (user_id is None or k[2] == user_id) and v[1].mode == "ann"]
        kept: set[str] = set()
        conn = open_read_only(db_key)
        try:
            for key, index in items:
                with self._lock_for(key):
                    if self._fresh(conn, key, index.dim)[0] is not index:
                        continue
                    with self._lock:
                        signature = self._indexes[key][0]
                    path = self._file(*key)
                    if index.save(path, fingerprint=_fingerprint(key[3], signature)):
                        kept.add(path.name)
                        dropped += 1
        finally:
            conn.close()
        for path in folder.iterdir():
            parts = path.name.split("-")
            if user_id is not None and (len(parts) < 3 or parts[1] != str(user_id)):
                continue
            if path.name.split(".usearch")[0] + ".usearch" in kept:
                continue  # the file just saved, its sidecar
            path.unlink(missing_ok=True)
            dropped += 1
        return dropped


def _saved_signature(path: Path) -> tuple[int, int, int | None, str] | None:
    """(count, highest id, revision or None for a file saved before revisions were, fingerprint)
    a saved index was made from, read from its sidecar."""
    try:
        fingerprint = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))["fingerprint"]
        head, last = fingerprint.rsplit(":", 1)
        if last.startswith("r") and last[1:].isdigit():
            _model, count, highest = head.rsplit(":", 2)
            return int(count), int(highest), int(last[1:]), fingerprint
        _model, count, highest = fingerprint.rsplit(":", 2)
        return int(count), int(highest), None, fingerprint
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def exact_table_search(conn: Connection, source: str, user_id: int, model: str, query_vectors: np.ndarray,
                       k: int) -> list[list[tuple[int, float]]]:
    """Top ``k`` (id, cosine) per query vector, every stored vector of one user's source compared
    in chunks read from the table: the answer while that index is built (S18)."""
    from .vectors import _top_k, one_blas_thread

    dim = int(query_vectors.shape[1])
    queries = np.asarray(query_vectors, dtype=np.float32)
    best_ids = [np.zeros(0, dtype=np.int64) for _ in range(len(queries))]
    best_scores = [np.zeros(0, dtype=np.float32) for _ in range(len(queries))]
    for ids, matrix in stored.matrices(conn, source, user_id, model, dim):
        with one_blas_thread():
            scores = matrix @ queries.T
        for i in range(len(queries)):
            top = _top_k(np.concatenate([best_ids[i], ids]), np.concatenate([best_scores[i], scores[:, i]]), k)
            best_ids[i] = np.fromiter((j for j, _ in top), dtype=np.int64, count=len(top))
            best_scores[i] = np.fromiter((v for _, v in top), dtype=np.float32, count=len(top))
    return [list(zip(i.tolist(), v.tolist())) for i, v in zip(best_ids, best_scores)]
