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
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from hearth.store import Connection
from hearth.store.queries import users
from hearth.store.queries import vectors as stored

from ..text import unit_rows
from .embedder import model_id
from .vector_cache import ANN, EXACT, EXACT_FALLBACK, VECTOR_SOURCES, IndexCache, database_index, exact_table_search

if TYPE_CHECKING:
    from .vectors import VectorIndex


log = logging.getLogger(__name__)


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
    out = []
    for r in stored.pending_messages(conn, model, user_id, limit, after, ids):
        label = r.user_label if r.role == "user" else r.assistant_label
        out.append((r.id, r.user_id, message_text(label, r.content, r.previous or "")))
    return out


def _pending_chunks(conn: Connection, model: str, user_id: int | None, limit: int,
                    after: int = 0) -> list[tuple[int, int, str]]:
    return [(row_id, owner, f"{title}\n{text}")
            for row_id, owner, title, text in stored.pending_chunks(conn, model, user_id, limit, after)]


def _pending_facts(conn: Connection, model: str, user_id: int | None, limit: int,
                   after: int = 0) -> list[tuple[int, int, str]]:
    """Facts (E2) without a vector for ``model``: embedded as their text alone."""
    return stored.pending_facts(conn, model, user_id, limit, after)


def pending_count(conn: Connection, model: str, user_id: int | None = None,
                  after: dict[str, int] | None = None) -> dict[str, int]:
    """Rows without a vector for ``model``; with ``after``, only rows past those cursors (a range
    read on the primary key instead of a scan of every row)."""
    return stored.pending_counts(conn, model, user_id, after or {})


def embedded_through(conn: Connection, model: str, user_id: int) -> dict[str, int]:
    """Per source, the highest id embedded for this user and model (the trigger-kept counter).

    Rows are embedded in id order and ids only grow, so every row at or below it has its vector:
    the background job starts there instead of scanning the table for rows without one.
    """
    return stored.embedded_through(conn, model, user_id)


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
                stored.prepare(wconn, kind, vectors.shape[1])
                for (row_id, owner, _), vector in zip(rows, vectors):
                    stored.write(wconn, kind, row_id, owner, model, to_blob(vector), vector)
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
    # Their old vectors were deleted when the text changed: the loaded indexes take that deletion
    # now, so the new vectors read as additions (otherwise the same ids with other vectors, found
    # only by comparing every stored vector, S18).
    INDEXES.catch_up(store.connection(), str(store.key), user_id, model)
    vectors = embed_texts(embedder, [text for _, _, text in rows])
    from .vectors import to_blob

    with store.write() as wconn:
        stored.prepare(wconn, "messages", vectors.shape[1])
        for (row_id, owner, _), vector in zip(rows, vectors):
            stored.write(wconn, "messages", row_id, owner, model, to_blob(vector), vector)
    return len(rows)


def _write_pg(conn: Connection, kind: str, row_id: int, owner: int, model: str, vector: np.ndarray) -> None:
    """One row's vector written on PostgreSQL, with its pgvector form (S9)."""
    from .vectors import to_blob

    stored.write(conn, kind, row_id, owner, model, to_blob(vector), vector)


# -- the in-process index (``vector_cache``) ---------------------------------------------------------
INDEXES = IndexCache()


def warm(hearth: Any, user_ids: list[int] | None = None) -> None:
    """Load or build (and save) the vector indexes of ``user_ids`` (every user's by default), and
    derive the local model's query graph, so the first searches after a start find them ready
    (``hearth serve`` calls this once its port is open, ``hearth reindex`` after embedding)."""
    embedder = hearth.embedder
    if hasattr(embedder, "load_queries"):
        embedder.load_queries()
    model = model_id(embedder)
    conn = hearth.store.connection()
    if database_index(conn):
        return  # the database's HNSW index is the index; nothing to load
    if user_ids is None:
        user_ids = users.ids(conn)
    for user_id in user_ids:
        for source in VECTOR_SOURCES:
            INDEXES.get(conn, hearth.store.key, source, user_id, model, embedder.dim)


def vector_search(conn: Connection, db_key: str, source: str, user_id: int, embedder: Any,
                  query_vectors: np.ndarray, k: int, modes: dict[str, str] | None = None,
                  ) -> list[list[tuple[int, float]]]:
    """Top ``k`` (id, cosine) per query vector over one user's vectors of one source. ``modes``
    receives which search answered, under the source's name: ``ANN`` (a graph: this process's
    or pgvector's HNSW index), ``EXACT`` or ``EXACT_FALLBACK`` (every stored vector compared
    while the index is built)."""
    model = model_id(embedder)
    key = (db_key, source, user_id, model, k)
    if database_index(conn):
        from . import pgvectors

        out = []
        for vector in query_vectors:
            hits = taken_ahead(key, vector)
            out.append(hits if hits is not None else pgvectors.search(conn, source, user_id, model, vector[None, :], k)[0])
        if modes is not None:
            modes[source] = ANN
        return out
    index = INDEXES.get(conn, db_key, source, user_id, model, int(query_vectors.shape[1]), wait=False)
    if index is None:
        # Built in the background (a missing or stale saved graph): recall is not dropped meanwhile.
        INDEXES.counts.fallbacks += 1
        if modes is not None:
            modes[source] = EXACT_FALLBACK
        return exact_table_search(conn, source, user_id, model, query_vectors, k)
    if modes is not None:
        modes[source] = ANN if index.mode == "ann" else EXACT
    if len(index) == 0:
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
        ids = stored.selected_ids(conn, ids_sql, args)
        return index.search(vector, k, allowed_ids=ids) if ids.size else []
    from .vectors import exact_top_k

    found, matrix = stored.selected_messages(conn, ids_sql, args, model, int(vector.shape[0]))
    if not found:
        return []
    return exact_top_k(matrix, found, vector, k)  # only the best ``k`` are sorted


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
