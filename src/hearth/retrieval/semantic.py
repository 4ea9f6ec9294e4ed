"""Semantic retrieval: embeddings stored in the database, searched through a rebuilt index (S7).

The database is the source of truth: chat turns have a row in ``message_embeddings`` and archive
chunks carry their vector in ``archive_chunks.embedding``. An in-process ``VectorIndex`` is built
from those rows on demand, cached per user, source and model, and kept in step as rows change.

Ingestion (``embed_pending``) embeds whatever has no vector yet, one batch per transaction, so an
interrupted run resumes where it stopped and never writes a vector twice (S8). It is what
``hearth reindex`` runs, and what a background job runs after new messages or imports. A search
embeds its query once (a few variants at most) and asks the index.

What gets embedded is the turn as a person would quote it: the speaker's persona label and the
text (``Elion said: ...``), so that "what did she say about ..." finds the right speaker.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from hearth.store import Connection, Cursor

from ..errors import HearthError, StoreError
from ..store import DriverError, engine_of, open_read_only
from ..text import unit_rows

if TYPE_CHECKING:
    from .vectors import VectorIndex


log = logging.getLogger(__name__)


def database_index(conn: Connection) -> bool:
    """Whether the database keeps the vector index (pgvector's HNSW) rather than this process
    (an index built from the table's vectors and saved beside the database file)."""
    return engine_of(conn).vector_index == "pgvector"

Progress = Callable[[int, int], None]  # (done, total)

# Turns read, embedded in one model call and written in one transaction (S19). The model sorts a
# call's texts by length before cutting them into its own batches, so a wider window pads less: on
# two LoCoMo conversations (a short answer beside a long turn quoting its question) windows of 64
# ran at 0.85 of the model's CPU rate given all the texts at once, windows of 256 at 1.01
# (docs/embeddings.md). An interruption loses at most this window.
EMBED_BATCH = 256
CONTEXT_CHARS = 200  # of the previous turn, so short answers ("yes, last May") keep their question


def shared_embedder(hearth: Any = None) -> Any:
    """The deployment's embedder (``Hearth.embedder``), or the process-wide local model."""
    if hearth is not None:
        return hearth.embedder
    from .embedder import local_embedder

    return local_embedder()


def model_id(embedder: Any) -> str:
    return str(getattr(embedder, "model_id", None) or getattr(embedder, "name", None) or type(embedder).__name__)


def embed_texts(embedder: Any, texts: list[str]) -> np.ndarray:
    return unit_rows(embedder.embed(texts))


def query_vectors(embedder: Any, texts: list[str]) -> np.ndarray:
    """Search queries straight from the model, uncached: the local model's query graph, read to
    ``QUERY_MAX_TOKENS`` (``LocalEmbedder.embed_queries``); any other embedder as for stored texts."""
    from .embedder import LocalEmbedder

    if isinstance(embedder, LocalEmbedder):
        return unit_rows(embedder.embed_queries(texts, max_tokens=QUERY_MAX_TOKENS))
    return embed_texts(embedder, texts)


# -- what a vector stands for ---------------------------------------------------------------------
def message_text(label: str, content: str, previous: str = "") -> str:
    text = f"{label} {content}".strip()
    if previous:
        text += f"\n(in reply to: {previous[:CONTEXT_CHARS]})"
    return text


def _pending_messages(conn: Connection, model: str, user_id: int | None, limit: int,
                     after: int = 0, ids: list[int] | None = None) -> list[tuple[int, int, str]]:
    where = "" if user_id is None else " AND +m.user_id = ?"  # "+": the cursor walks ids, not the index of turns by time
    if ids is not None:  # exactly these rows (turns whose chosen text changed), wherever they are
        where += f" AND m.id IN ({', '.join('?' * len(ids))})"
    args: list[Any] = [model, after] + ([] if user_id is None else [user_id]) + list(ids or []) + [limit]
    rows = conn.execute(
        "SELECT m.id, m.user_id, m.role, m.content, m.conversation_id, p.user_label, p.assistant_label,"
        " (SELECT b.content FROM messages b WHERE b.conversation_id = m.conversation_id AND b.id < m.id"
        "  AND b.kind = 'chat' AND b.role IN ('user', 'assistant') ORDER BY b.id DESC LIMIT 1) AS previous"
        " FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " JOIN personas p ON p.id = c.persona_id"
        " LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.model = ?"
        " WHERE m.id > ? AND e.message_id IS NULL AND m.kind = 'chat' AND m.role IN ('user', 'assistant')"
        f"{where} ORDER BY m.id LIMIT ?", args,
    ).fetchall()
    out = []
    for r in rows:
        label = r["user_label"] if r["role"] == "user" else r["assistant_label"]
        out.append((r["id"], r["user_id"], message_text(label, r["content"], r["previous"] or "")))
    return out


def _pending_chunks(conn: Connection, model: str, user_id: int | None, limit: int,
                    after: int = 0) -> list[tuple[int, int, str]]:
    where = "" if user_id is None else " AND k.user_id = ?"
    args: list[Any] = [after, model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT k.id, k.user_id, k.text, d.title FROM archive_chunks k JOIN archive_documents d ON d.id = k.document_id"
        " WHERE k.id > ? AND (k.embedding IS NULL OR k.embedding_model IS DISTINCT FROM ?)"
        f"{where} ORDER BY k.id LIMIT ?", args,
    ).fetchall()
    return [(r["id"], r["user_id"], f"{r['title']}\n{r['text']}") for r in rows]


def _pending_facts(conn: Connection, model: str, user_id: int | None, limit: int,
                   after: int = 0) -> list[tuple[int, int, str]]:
    """Facts (E2) without a vector for ``model``: embedded as their text alone."""
    where = "" if user_id is None else " AND user_id = ?"
    args: list[Any] = [after, model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT id, user_id, text FROM facts WHERE id > ? AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?)"
        f"{where} ORDER BY id LIMIT ?", args).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def pending_count(conn: Connection, model: str, user_id: int | None = None,
                  after: dict[str, int] | None = None) -> dict[str, int]:
    """Rows without a vector for ``model``; with ``after``, only rows past those cursors (a range
    read on the primary key instead of a scan of every row)."""
    after = after or {}
    user = [] if user_id is None else [user_id]
    messages = conn.execute(
        "SELECT count(*) FROM messages m LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.model = ?"
        " WHERE m.id > ? AND e.message_id IS NULL AND m.kind = 'chat' AND m.role IN ('user', 'assistant')"
        + ("" if user_id is None else " AND +m.user_id = ?"), [model, after.get("messages", 0), *user],
    ).fetchone()[0]
    chunks = conn.execute(
        "SELECT count(*) FROM archive_chunks WHERE id > ?"
        " AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?)"
        + ("" if user_id is None else " AND user_id = ?"), [after.get("chunks", 0), model, *user],
    ).fetchone()[0]
    facts = conn.execute(
        "SELECT count(*) FROM facts WHERE id > ? AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?)"
        + ("" if user_id is None else " AND user_id = ?"), [after.get("facts", 0), model, *user],
    ).fetchone()[0]
    return {"messages": messages, "chunks": chunks, "facts": facts}


def embedded_through(conn: Connection, model: str, user_id: int) -> dict[str, int]:
    """Per source, the highest id embedded for this user and model (the trigger-kept counter).

    Rows are embedded in id order and ids only grow, so every row at or below it has its vector:
    the background job starts there instead of scanning the table for rows without one.
    """
    out = {"messages": 0, "chunks": 0, "facts": 0}
    for source, max_id in conn.execute("SELECT source, max_id FROM vector_counts WHERE user_id = ? AND model = ?",
                                       (user_id, model)).fetchall():
        out[source] = int(max_id)
    return out


@dataclass(frozen=True)
class EmbedReport:
    messages: int
    chunks: int
    remaining: int
    facts: int = 0


def embed_pending(store: Any, embedder: Any, *, user_id: int | None = None, limit: int | None = None,
                  batch: int = EMBED_BATCH, progress: Progress | None = None,
                  follow: bool = False, pause: Callable[[], object] | None = None) -> EmbedReport:
    """Embed every chat turn and archive chunk that has no vector for this model yet.

    Each batch is read, embedded and written in its own transaction; an interruption loses at most
    the batch in flight, and the next run starts after the last written row (S8). ``limit`` bounds
    the work of one call (a background job's slice, or the catch-up a search allows itself).

    The read follows a cursor: each batch starts after the last row of the one before, so a pass
    reads the table once instead of rescanning every embedded row per batch. ``follow`` (the
    background job, one user) starts the cursor at the highest id already embedded, so the work of
    a reply is proportional to what arrived since, not to the size of the deployment; without it
    (``hearth reindex``) the pass starts at the beginning and also finds any row left behind.
    ``pause`` is called before each call to the model, 16 texts a call (the background job waits
    there while a send assembles, so the two do not share the cores); those calls take the window's
    texts shortest first, so they pad no more than one call over the window would.
    """
    model = model_id(embedder)
    conn = store.connection()
    cursors = (embedded_through(conn, model, user_id) if follow and user_id is not None
               else {"messages": 0, "chunks": 0, "facts": 0})
    total = sum(pending_count(conn, model, user_id, cursors).values())
    if limit is not None:
        total = min(total, limit)
    done = {"messages": 0, "chunks": 0, "facts": 0}
    if progress:
        progress(0, total)
    fetchers: tuple[tuple[str, Callable[..., list[tuple[int, int, str]]]], ...] = (
        ("messages", _pending_messages), ("chunks", _pending_chunks), ("facts", _pending_facts))
    for kind, fetch in fetchers:
        while sum(done.values()) < total:
            size = min(batch, total - sum(done.values()))
            rows = fetch(conn, model, user_id, size, cursors[kind])
            if not rows:
                break
            texts = [text for _, _, text in rows]
            vectors = embed_texts(embedder, texts) if pause is None else _embed_yielding(embedder, texts, pause)
            from .vectors import to_blob

            with store.write() as wconn:
                if database_index(wconn):
                    from . import pgvectors

                    pgvectors.ensure_index(wconn, kind, vectors.shape[1])
                for (row_id, owner, _), vector in zip(rows, vectors):
                    if database_index(wconn):
                        _write_pg(wconn, kind, row_id, owner, model, vector)
                    elif kind == "messages":
                        # An upsert, not REPLACE: REPLACE deletes without firing the delete
                        # trigger that keeps vector_counts honest.
                        wconn.execute(
                            "INSERT INTO message_embeddings (message_id, user_id, model, embedding)"
                            " VALUES (?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET"
                            " user_id = excluded.user_id, model = excluded.model, embedding = excluded.embedding",
                            (row_id, owner, model, to_blob(vector)))
                    else:
                        table = "archive_chunks" if kind == "chunks" else "facts"
                        wconn.execute(f"UPDATE {table} SET embedding = ?, embedding_model = ? WHERE id = ?",
                                      (to_blob(vector), model, row_id))
            cursors[kind] = rows[-1][0]
            done[kind] += len(rows)
            if progress:
                progress(sum(done.values()), total)
    remaining = sum(pending_count(conn, model, user_id, cursors).values())
    return EmbedReport(done["messages"], done["chunks"], remaining, done["facts"])


YIELD_STEP = 16  # texts per model call between two ``pause()`` calls


def _embed_yielding(embedder: Any, texts: list[str], pause: Callable[[], object]) -> np.ndarray:
    """``texts`` embedded shortest first, ``YIELD_STEP`` a call, with ``pause()`` before each call:
    the calls pad as little as one call over all of them would (calls of 16 in id order, short and
    long turns mixed, were 1.7 times slower), and a send waits for one small call at most."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    parts = []
    for start in range(0, len(order), YIELD_STEP):
        pause()
        parts.append(embed_texts(embedder, [texts[i] for i in order[start:start + YIELD_STEP]]))
    out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    out[order] = np.vstack(parts)
    return out


def embed_messages(store: Any, embedder: Any, user_id: int, ids: list[int]) -> int:
    """Embed these turns again (their chosen text changed, W2), whatever the cursor says.

    Rows that left the thread meanwhile are skipped; a row embedded since is left as it is.
    Returns how many were written."""
    model = model_id(embedder)
    rows = _pending_messages(store.connection(), model, user_id, len(ids), 0, ids) if ids else []
    if not rows:
        return 0
    vectors = embed_texts(embedder, [text for _, _, text in rows])
    from .vectors import to_blob

    with store.write() as wconn:
        if database_index(wconn):
            from . import pgvectors

            pgvectors.ensure_index(wconn, "messages", vectors.shape[1])
        for (row_id, owner, _), vector in zip(rows, vectors):
            if database_index(wconn):
                _write_pg(wconn, "messages", row_id, owner, model, vector)
                continue
            wconn.execute(
                "INSERT INTO message_embeddings (message_id, user_id, model, embedding) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (message_id) DO UPDATE SET user_id = excluded.user_id, model = excluded.model,"
                " embedding = excluded.embedding", (row_id, owner, model, to_blob(vector)))
    return len(rows)


def _write_pg(conn: Connection, kind: str, row_id: int, owner: int, model: str, vector: np.ndarray) -> None:
    """On PostgreSQL the row also gets its pgvector form, which the HNSW index reads (S9)."""
    from .pgvectors import literal
    from .vectors import to_blob

    if kind == "messages":
        conn.execute(
            "INSERT INTO message_embeddings (message_id, user_id, model, embedding, vec) VALUES (?, ?, ?, ?, ?::vector)"
            " ON CONFLICT (message_id) DO UPDATE SET user_id = excluded.user_id, model = excluded.model,"
            " embedding = excluded.embedding, vec = excluded.vec",
            (row_id, owner, model, to_blob(vector), literal(vector)))
    else:
        table = "archive_chunks" if kind == "chunks" else "facts"
        conn.execute(f"UPDATE {table} SET embedding = ?, embedding_model = ?, vec = ?::vector WHERE id = ?",
                     (to_blob(vector), model, literal(vector), row_id))


# -- the in-process index ---------------------------------------------------------------------------
VECTOR_SOURCES = ("messages", "chunks", "facts")
# Above this many vectors a cold index build is not done on the send path (see IndexCache.get).
BACKGROUND_ABOVE = 100_000
# A saved index this many rows behind its table is saved again once loaded, so the next start does
# not add them all again (10,584 rows took 5.8 s to add at a million vectors).
RESAVE_AFTER = 5_000
# An exact index this large is searched ahead on the prefetch thread, as a graph is: its product
# releases the interpreter lock for most of the search (a loop of primary-key reads beside a loop
# of 40,000-vector searches kept 0.82 of its rate; beside a graph's, 0.79). A smaller one is short
# and mostly holds the lock (3,225 vectors: 0.39), so it stays in the search.
AHEAD_EXACT_ROWS = 16_384


class IndexCache:
    """Vector indexes per (database, user, source, model), kept in step with their table.

    A cheap signature (row count, highest id) is read on every search. When rows were only added,
    the new ones are added to the cached index; any other change (a deletion) rebuilds it from the
    table, so the index never drifts from the database. Large (ANN) indexes are also saved beside
    the database, so a restart loads the graph and adds only what arrived since, instead of
    rebuilding it (minutes at a million vectors).
    """

    def __init__(self, ann_threshold: int | None = None) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[tuple, tuple[tuple, "VectorIndex"]] = {}
        self.ann_threshold = ann_threshold  # None: the index's own default
        self.background_above = BACKGROUND_ABOVE
        self._building: set[tuple] = set()
        self._loading: dict[tuple, threading.Lock] = {}  # one cold load per index at a time

    @staticmethod
    def _table(source: str) -> tuple[str, str, str]:
        if source == "messages":
            return "message_embeddings", "message_id", "model"
        if source == "facts":
            return "facts", "id", "embedding_model"
        return "archive_chunks", "id", "embedding_model"

    def _signature(self, conn: Connection, source: str, user_id: int, model: str) -> tuple[int, int, int]:
        """(count, highest id, revision) from the trigger-kept counter: one primary-key lookup."""
        row = conn.execute("SELECT count, max_id, rev FROM vector_counts WHERE user_id = ? AND source = ?"
                           " AND model = ?", (user_id, source, model)).fetchone()
        return tuple(row) if row else (0, 0, 0)

    def _count_up_to(self, conn: Connection, source: str, user_id: int, model: str,
                     up_to: int) -> tuple[int, int]:
        """(count, highest id) of the rows at or below ``up_to``: checks a saved index at start-up."""
        table, key, model_column = self._table(source)
        return tuple(conn.execute(
            f"SELECT count(*), coalesce(max({key}), 0) FROM {table} WHERE user_id = ? AND {model_column} = ?"
            f" AND {key} <= ?", (user_id, model, up_to)).fetchone())

    def _rows(self, conn: Connection, source: str, user_id: int, model: str,
              after: int = 0, through: int | None = None) -> Cursor:
        """(id, embedding BLOB) rows after ``after`` (and at most ``through``), streamed: a full
        rebuild never holds them all."""
        table, key, model_column = self._table(source)
        bound, args = ("", (user_id, model, after)) if through is None else (f" AND {key} <= ?", (user_id, model, after, through))
        return conn.execute(f"SELECT {key}, embedding FROM {table} WHERE user_id = ? AND {model_column} = ?"
                            f" AND {key} > ?{bound} AND embedding IS NOT NULL ORDER BY {key}", args)

    @staticmethod
    def _add_rows(index: "VectorIndex", rows: list[tuple[int, bytes]], dim: int) -> None:
        from .vectors import from_blob

        if rows:
            index.add([row_id for row_id, _ in rows], np.stack([from_blob(blob, dim) for _, blob in rows]))

    @staticmethod
    def _file(db_key: str, source: str, user_id: int, model: str) -> Path:
        digest = hashlib.sha256(model.encode()).hexdigest()[:12]
        return Path(db_key + ".vectors") / f"{source}-{user_id}-{digest}.usearch"

    def _cold_load(self, conn, db_key, source, user_id, model, dim, signature) -> "VectorIndex":
        from .vectors import VectorIndex

        index = VectorIndex(dim) if self.ann_threshold is None else VectorIndex(dim, ann_threshold=self.ann_threshold)
        path = self._file(db_key, source, user_id, model)
        saved = _saved_signature(path)
        if saved and saved[1] <= signature[1] and self._count_up_to(conn, source, user_id, model, saved[1]) == saved:
            if index.load(path, fingerprint=f"{model}:{saved[0]}:{saved[1]}"):
                newer = self._rows(conn, source, user_id, model, after=saved[1], through=signature[1]).fetchall()
                self._add_rows(index, newer, dim)
                if len(newer) >= RESAVE_AFTER:  # before the index is shared: nothing searches it yet
                    index.save(path, fingerprint=f"{model}:{signature[0]}:{signature[1]}")
                return index
        index.rebuild(self._rows(conn, source, user_id, model, through=signature[1]), total=signature[0])
        if index.mode == "ann":
            path.parent.mkdir(parents=True, exist_ok=True)
            index.save(path, fingerprint=f"{model}:{signature[0]}:{signature[1]}")
        return index

    def get(self, conn: Connection, db_key: str, source: str, user_id: int, model: str,
            dim: int, *, wait: bool = True) -> "VectorIndex | None":
        """The current index. With ``wait=False`` a large rebuild (over ``background_above``
        vectors, minutes at a million) runs in a background thread instead: the caller gets the
        previous index, or None while there is none yet, and searches on without vectors."""
        if database_index(conn):
            # pgvector's HNSW index is the index of record there; no file may be made from the URL.
            raise StoreError("the in-process vector index is not used on PostgreSQL")
        key = (db_key, source, user_id, model)
        index, stale = self._fresh(conn, key, dim)
        if index is not None:
            return index
        if not wait and self._signature(conn, source, user_id, model)[0] > self.background_above:
            self._build_in_background(key, db_key, source, user_id, model, dim)
            return stale
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        # The start-up warm and a first search's background build once loaded the same million
        # vectors side by side (a second gigabyte): the later one waits and finds the first's.
        with loading:
            index, _ = self._fresh(conn, key, dim)
            if index is None:
                signature = self._signature(conn, source, user_id, model)
                index = self._cold_load(conn, db_key, source, user_id, model, dim, signature)
                with self._lock:
                    self._indexes[key] = (signature, index)
        return index

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
        """(the cached index brought up to date, or None if only a cold load can; the cached one)."""
        _db_key, source, user_id, model = key
        signature = self._signature(conn, source, user_id, model)
        with self._lock:
            cached = self._indexes.get(key)
        if cached is None:
            return None, None
        if cached[0] == signature:
            return cached[1], cached[1]
        if signature[2] == cached[0][2] and signature[1] > cached[0][1]:
            # Bounded by the signature's highest id: a row the embedding job commits between the
            # two reads is not taken for a deletion (which rebuilt the whole index beside this one).
            newer = self._rows(conn, source, user_id, model, after=cached[0][1], through=signature[1]).fetchall()
            if cached[0][0] + len(newer) == signature[0]:  # only additions since the last look
                index = cached[1]
                self._add_rows(index, newer, dim)
                with self._lock:
                    self._indexes[key] = (signature, index)
                return index, index
        return None, cached[1]

    def _build_in_background(self, key: tuple, db_key: str, source: str, user_id: int, model: str,
                             dim: int) -> None:
        with self._lock:
            if key in self._building:
                return
            self._building.add(key)

        def build() -> None:
            # Its own read-only connection: a connection belongs to the thread that uses it.
            conn = open_read_only(db_key)
            try:
                self.get(conn, db_key, source, user_id, model, dim, wait=True)
            except (DriverError, HearthError) as exc:
                log.warning("building the %s vector index failed: %s", source, type(exc).__name__)
            finally:
                conn.close()
                with self._lock:
                    self._building.discard(key)

        threading.Thread(target=build, name=f"hearth-vectors-{source}", daemon=True).start()

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    def discard(self, db_key: str, user_id: int, message_ids: Iterable[int], chunk_ids: Iterable[int],
                fact_ids: Iterable[int] = ()) -> int:
        """Take forgotten vectors out of this user's cached indexes (B4) instead of rebuilding them.

        The cached signature moves to the table's current one only when the removal explains the
        difference exactly; otherwise the next search rebuilds from the table as usual."""
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
                removed = index.remove(ids)
                removed_total += removed
                current = self._signature(conn, key[1], user_id, key[3])
                if current[0] == signature[0] - removed and current[1] == signature[1]:
                    with self._lock:
                        if self._indexes.get(key, (None,))[0] == signature:
                            self._indexes[key] = (current, index)
        finally:
            conn.close()
        return removed_total

    def drop_saved(self, db_key: str, user_id: int | None = None) -> int:
        """Delete saved index files (of one user, or all): a saved graph may still hold forgotten
        vectors. The next cold start rebuilds it from the table."""
        folder = Path(db_key + ".vectors")
        if not folder.is_dir():
            return 0
        dropped = 0
        for path in folder.iterdir():
            parts = path.name.split("-")
            if user_id is not None and (len(parts) < 3 or parts[1] != str(user_id)):
                continue
            path.unlink(missing_ok=True)
            dropped += 1
        return dropped


def _saved_signature(path: Path) -> tuple[int, int] | None:
    """(count, highest id) a saved index was made from, read from its sidecar."""
    try:
        fingerprint = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))["fingerprint"]
        _model, count, highest = fingerprint.rsplit(":", 2)
        return int(count), int(highest)
    except (OSError, ValueError, KeyError, TypeError):
        return None


INDEXES = IndexCache()


def warm(hearth: Any) -> None:
    """Load or build every user's vector indexes, and derive the local model's query graph, so the
    first searches after a start find them ready (``hearth serve`` calls this once its port is open)."""
    embedder = hearth.embedder
    if hasattr(embedder, "load_queries"):
        embedder.load_queries()
    model = model_id(embedder)
    conn = hearth.store.connection()
    if database_index(conn):
        return  # the database's HNSW index is the index; nothing to load
    for (user_id,) in conn.execute("SELECT id FROM users").fetchall():
        for source in VECTOR_SOURCES:
            INDEXES.get(conn, hearth.store.key, source, user_id, model, embedder.dim)


def vector_search(conn: Connection, db_key: str, source: str, user_id: int, embedder: Any,
                  query_vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Top ``k`` (id, cosine) per query vector over one user's vectors of one source."""
    model = model_id(embedder)
    key = (db_key, source, user_id, model, k)
    if database_index(conn):
        from . import pgvectors

        out = []
        for vector in query_vectors:
            hits = taken_ahead(key, vector)
            out.append(hits if hits is not None else pgvectors.search(conn, source, user_id, model, vector[None, :], k)[0])
        return out
    index = INDEXES.get(conn, db_key, source, user_id, model, int(query_vectors.shape[1]), wait=False)
    if index is None or len(index) == 0:
        return [[] for _ in range(len(query_vectors))]
    out = []
    for vector in query_vectors:
        hits = taken_ahead(key, vector, index)
        out.append(hits if hits is not None else index.search(vector, k))  # already (int, float) pairs
    return out


def exact_message_search(conn: Connection, db_key: str, user_id: int, ids_sql: str, args: tuple, embedder: Any,
                         vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Top ``k`` (id, cosine) among ``user_id``'s messages that ``ids_sql`` selects (a query of
    ``m.id``), every one compared: for a set of turns narrowed by other means, such as their dates."""
    model = model_id(embedder)
    if database_index(conn):
        from . import pgvectors

        return pgvectors.exact_messages(conn, ids_sql, args, model, vector, k)
    index = INDEXES.get(conn, db_key, "messages", user_id, model, int(vector.shape[0]), wait=False)
    if index is not None and index.mode == "exact":
        # The exact index holds the same float32 vectors: scoring its rows of those ids spares
        # reading each turn's stored bytes (about half the list's time for a month of turns).
        ids = np.fromiter((row[0] for row in conn.execute(ids_sql, args)), dtype=np.int64)
        return index.search(vector, k, allowed_ids=ids) if ids.size else []
    from .vectors import exact_top_k

    # float32 bytes: a vector of another size is not comparable.
    rows = conn.execute(f"SELECT e.message_id, e.embedding FROM ({ids_sql}) AS d"
                        " JOIN message_embeddings e ON e.message_id = d.id"
                        " WHERE e.model = ? AND length(e.embedding) = ?",
                        (*args, model, vector.shape[0] * 4)).fetchall()
    if not rows:
        return []
    # One buffer for the whole range: decoding each BLOB on its own cost more than the scoring;
    # only the best ``k`` are sorted.
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), -1)
    return exact_top_k(matrix, [row[0] for row in rows], vector, k)


def mix_context(vector: np.ndarray, context: np.ndarray | None, weight: float) -> np.ndarray:
    """The query vector moved toward ``context`` (the unit mean of recent turns' stored vectors)."""
    if context is None:
        return vector
    return unit_rows((vector + weight * context)[None, :])[0]


# Index searches started ahead of the ``vector_search`` that will ask them (``search_ahead``):
# (db_key, source, user_id, model, k) -> the future of (query vector, index, its generation, hits).
_AHEAD: dict[tuple, Future] = {}
_AHEAD_LIMIT = 64  # searches left untaken (a send that stopped early) are dropped oldest first


def search_ahead(conn: Connection, db_key: str, sources: Iterable[str], user_id: int, embedder: Any,
                 text: str, k: int, context: np.ndarray | None = None, weight: float = 0.0,
                 store: Any = None) -> None:
    """Queue, on the prefetch thread behind the query's own embedding (``prefetch_query``), the
    index searches a coming ``vector_search`` will ask: ``text``'s vector, mixed with ``context``
    as ``mix_context`` does, against each source's index as it is now, if that index is a graph or
    a large exact index (this process's, see ``AHEAD_EXACT_ROWS``), or the database's HNSW index
    (asked on the prefetch thread's own connection to ``store``). Those searches release the
    interpreter lock, and a database search waits for the server without it, so the layers that
    run before the search overlap it.
    ``vector_search`` takes a result only for the same query vector, the same ``k`` and an index
    unchanged since (for the database's index: as it was some milliseconds before the ask);
    otherwise it searches as usual."""
    if not getattr(embedder, "dim", None):
        return
    model = model_id(embedder)
    indexes: list[tuple[str, VectorIndex | None]]
    if database_index(conn):
        if store is None:
            return
        indexes = [(source, None) for source in sources]
    else:
        # Only an index already loaded. Loading one (seconds, a gigabyte at a million vectors) is
        # the search's to start, after the layers' own reads.
        indexes = [(source, index) for source in sources
                   if (index := INDEXES.loaded_for_ahead(conn, db_key, source, user_id, model, int(embedder.dim)))]
    for source, index in indexes:
        search = (functools.partial(index.search, k=k) if index is not None
                  else functools.partial(_database_search, store, source, user_id, model, k=k))
        run_ahead((db_key, source, user_id, model, k), embedder, text, context, weight, search, index)


def run_ahead(key: tuple, embedder: Any, text: str, context: np.ndarray | None, weight: float,
              search: Callable[[np.ndarray], list[tuple[int, float]]], index: VectorIndex | None = None,
              *, beside: bool = False) -> None:
    """Queue ``search`` of ``text``'s vector (mixed with ``context``) on the prefetch thread, behind
    the query's embedding, for ``taken_ahead(key, ...)`` to collect. ``index``: the in-process
    index it searches, whose changes since make the hits stale. ``beside``: on a second thread,
    which waits for the embedding and then runs beside the prefetch thread's searches (a search
    the database does, on that thread's own connection)."""
    with _QUERY_LOCK:
        _AHEAD.pop(key, None)
        _AHEAD[key] = _executor(beside).submit(_search_ahead, embedder, text, context, weight, index, search, beside)
        while len(_AHEAD) > _AHEAD_LIMIT:
            _AHEAD.pop(next(iter(_AHEAD)))


def _database_search(store: Any, source: str, user_id: int, model: str, vector: np.ndarray,
                     k: int) -> list[tuple[int, float]]:
    from . import pgvectors

    return pgvectors.search(store.connection(), source, user_id, model, vector[None, :], k)[0]


def _search_ahead(embedder: Any, text: str, context: np.ndarray | None, weight: float, index: VectorIndex | None,
                  search: Callable[[np.ndarray], list[tuple[int, float]]], beside: bool = False,
                  ) -> tuple[np.ndarray, VectorIndex | None, int, list[tuple[int, float]]]:
    # On the prefetch thread the embedding ran before this job; beside it, it is waited for.
    vector = mix_context(embed_queries(embedder, [text], wait=beside)[0], context, weight)
    # Read before searching: a change during the search is a change.
    generation = index.generation if index is not None else 0
    return vector, index, generation, search(vector)


def taken_ahead(key: tuple, vector: np.ndarray, index: VectorIndex | None = None) -> list[tuple[int, float]] | None:
    """The hits searched ahead for ``key``, if they are this search's own; None otherwise."""
    with _QUERY_LOCK:
        future = _AHEAD.pop(key, None)
    if future is None or (not future.running() and future.cancel()):
        return None  # nothing ahead, or still queued behind other work: searching here is sooner
    if future.exception() is not None:
        return None  # searched again here, where the error reaches the caller
    searched, used, generation, hits = future.result()
    if used is not index or (used is not None and used.generation != generation) \
            or not np.array_equal(searched, vector):
        return None
    return hits


QUERY_CACHE_SIZE = 256
# Tokens of a query the local model reads: a message of 256 tokens cost 100 ms of CPU, 128 tokens
# 46 ms (docs/benchmarks.md); every LoCoMo question (32 tokens at most) is read whole.
QUERY_MAX_TOKENS = 128
_QUERY_CACHE: "OrderedDict[tuple[str, str], np.ndarray]" = OrderedDict()
_QUERY_LOCK = threading.Lock()
# Query embeddings started ahead of the search that needs them (``prefetch_query``).
_IN_FLIGHT: dict[tuple[str, str], Future] = {}
_PREFETCH: dict[bool, ThreadPoolExecutor] = {}  # created on first use, never at import


def prefetch_query(embedder: Any, text: str) -> None:
    """Start embedding ``text`` in a background thread, so the search that asks for it later
    finds it cached or waits only for the rest (the model releases the interpreter lock, so the
    send path's other layers run meanwhile)."""
    key = (model_id(embedder), " ".join(text.split()))
    with _QUERY_LOCK:
        if key in _QUERY_CACHE or key in _IN_FLIGHT:
            return
        _IN_FLIGHT[key] = _executor().submit(_embed_in_flight, embedder, text, key)


def _executor(beside: bool = False) -> ThreadPoolExecutor:
    """The one prefetch thread (called under ``_QUERY_LOCK``): one thread keeps the other core
    for the send, and runs a search ahead after the embedding it needs. ``beside``: the one
    thread for a search the database does beside the prefetch thread's (the dated list)."""
    if beside not in _PREFETCH:
        name = "hearth-query-beside" if beside else "hearth-query-embed"
        _PREFETCH[beside] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    return _PREFETCH[beside]


def _embed_in_flight(embedder: Any, text: str, key: tuple[str, str]) -> None:
    try:
        embed_queries(embedder, [text], wait=False)
    finally:
        with _QUERY_LOCK:
            _IN_FLIGHT.pop(key, None)


def forget_queries() -> None:
    """Drop the cached query vectors and their texts (after delete-forever)."""
    with _QUERY_LOCK:
        _QUERY_CACHE.clear()
        _AHEAD.clear()


def embed_queries(embedder: Any, texts: Iterable[str], *, wait: bool = True) -> np.ndarray:
    """Unit query vectors, cached by model and normalised text (a repeated or retried message, the
    same search asked again, is not embedded twice); only the texts not cached reach the model.
    A text already being embedded ahead (``prefetch_query``) is waited for, not embedded again."""
    texts = list(texts)
    model = model_id(embedder)
    keys = [(model, " ".join(t.split())) for t in texts]
    with _QUERY_LOCK:
        pending = [_IN_FLIGHT[k] for k in keys if k in _IN_FLIGHT] if wait else []
    for future in pending:
        future.exception()  # waits; a failed prefetch is embedded again below
    with _QUERY_LOCK:
        found = {k: _QUERY_CACHE[k] for k in keys if k in _QUERY_CACHE}
        for k in found:
            _QUERY_CACHE.move_to_end(k)
    missing = [i for i, k in enumerate(keys) if k not in found]
    if missing:
        fresh = query_vectors(embedder, [texts[i] for i in missing])
        with _QUERY_LOCK:
            for i, vector in zip(missing, fresh):
                found[keys[i]] = vector
                _QUERY_CACHE[keys[i]] = vector
            while len(_QUERY_CACHE) > QUERY_CACHE_SIZE:
                _QUERY_CACHE.popitem(last=False)
    if not texts:
        return query_vectors(embedder, [])
    return np.stack([found[k] for k in keys])
