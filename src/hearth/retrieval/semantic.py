"""Semantic retrieval: embeddings stored in the database, searched through a rebuilt index (S7).

The database is the source of truth: chat turns have a row in ``message_embeddings`` and archive
chunks carry their vector in ``archive_chunks.embedding``. An in-process ``VectorIndex`` is built
from those rows on demand, cached per user, source and model, and rebuilt when the rows change.

Ingestion (``embed_pending``) embeds whatever has no vector yet, one batch per transaction, so an
interrupted run resumes where it stopped and never writes a vector twice (S8). It is what
``hearth reindex`` runs, and what a background job runs after new messages or imports. A search
embeds its query once (a few variants at most) and asks the index.

What gets embedded is the turn as a person would quote it: the speaker's persona label and the
text (``Elion said: ...``), so that "what did she say about ..." finds the right speaker.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

if TYPE_CHECKING:
    from .vectors import VectorIndex


Progress = Callable[[int, int], None]  # (done, total)

EMBED_BATCH = 64
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
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


# -- what a vector stands for ---------------------------------------------------------------------
def message_text(label: str, content: str, previous: str = "") -> str:
    text = f"{label} {content}".strip()
    if previous:
        text += f"\n(in reply to: {previous[:CONTEXT_CHARS]})"
    return text


def _pending_messages(conn: sqlite3.Connection, model: str, user_id: int | None, limit: int) -> list[tuple[int, int, str]]:
    where = "" if user_id is None else " AND m.user_id = ?"
    args: list[Any] = [model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT m.id, m.user_id, m.role, m.content, m.conversation_id, p.user_label, p.assistant_label"
        " FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " JOIN personas p ON p.id = c.persona_id"
        " LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.model = ?"
        " WHERE e.message_id IS NULL AND m.kind = 'chat' AND m.role IN ('user', 'assistant')"
        f"{where} ORDER BY m.id LIMIT ?", args,
    ).fetchall()
    out = []
    for r in rows:
        prev = conn.execute(
            "SELECT content FROM messages WHERE conversation_id = ? AND id < ? AND kind = 'chat'"
            " AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1", (r["conversation_id"], r["id"]),
        ).fetchone()
        label = r["user_label"] if r["role"] == "user" else r["assistant_label"]
        out.append((r["id"], r["user_id"], message_text(label, r["content"], prev[0] if prev else "")))
    return out


def _pending_chunks(conn: sqlite3.Connection, model: str, user_id: int | None, limit: int) -> list[tuple[int, int, str]]:
    where = "" if user_id is None else " AND k.user_id = ?"
    args: list[Any] = [model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT k.id, k.user_id, k.text, d.title FROM archive_chunks k JOIN archive_documents d ON d.id = k.document_id"
        " WHERE (k.embedding IS NULL OR k.embedding_model IS NOT ?)"
        f"{where} ORDER BY k.id LIMIT ?", args,
    ).fetchall()
    return [(r["id"], r["user_id"], f"{r['title']}\n{r['text']}") for r in rows]


def pending_count(conn: sqlite3.Connection, model: str, user_id: int | None = None) -> dict[str, int]:
    args: list[Any] = [model] + ([] if user_id is None else [user_id])
    messages = conn.execute(
        "SELECT count(*) FROM messages m LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.model = ?"
        " WHERE e.message_id IS NULL AND m.kind = 'chat' AND m.role IN ('user', 'assistant')"
        + ("" if user_id is None else " AND m.user_id = ?"), args,
    ).fetchone()[0]
    chunks = conn.execute(
        "SELECT count(*) FROM archive_chunks WHERE (embedding IS NULL OR embedding_model IS NOT ?)"
        + ("" if user_id is None else " AND user_id = ?"), args,
    ).fetchone()[0]
    return {"messages": messages, "chunks": chunks}


@dataclass(frozen=True)
class EmbedReport:
    messages: int
    chunks: int
    remaining: int


def embed_pending(store: Any, embedder: Any, *, user_id: int | None = None, limit: int | None = None,
                  batch: int = EMBED_BATCH, progress: Progress | None = None) -> EmbedReport:
    """Embed every chat turn and archive chunk that has no vector for this model yet.

    Each batch is read, embedded and written in its own transaction; an interruption loses at most
    the batch in flight, and the next run starts after the last written row (S8). ``limit`` bounds
    the work of one call (a background job's slice, or the catch-up a search allows itself).
    """
    model = model_id(embedder)
    conn = store.connection()
    total = sum(pending_count(conn, model, user_id).values())
    if limit is not None:
        total = min(total, limit)
    done = {"messages": 0, "chunks": 0}
    if progress:
        progress(0, total)
    for kind, fetch in (("messages", _pending_messages), ("chunks", _pending_chunks)):
        while sum(done.values()) < total:
            size = min(batch, total - sum(done.values()))
            rows = fetch(conn, model, user_id, size)
            if not rows:
                break
            vectors = embed_texts(embedder, [text for _, _, text in rows])
            from .vectors import to_blob

            with store.write() as wconn:
                for (row_id, owner, _), vector in zip(rows, vectors):
                    if kind == "messages":
                        wconn.execute(
                            "INSERT OR REPLACE INTO message_embeddings (message_id, user_id, model, embedding)"
                            " VALUES (?, ?, ?, ?)", (row_id, owner, model, to_blob(vector)))
                    else:
                        wconn.execute("UPDATE archive_chunks SET embedding = ?, embedding_model = ? WHERE id = ?",
                                      (to_blob(vector), model, row_id))
            done[kind] += len(rows)
            if progress:
                progress(sum(done.values()), total)
    remaining = sum(pending_count(conn, model, user_id).values())
    return EmbedReport(done["messages"], done["chunks"], remaining)


# -- the in-process index ---------------------------------------------------------------------------
class IndexCache:
    """Vector indexes per (database, user, source, model), rebuilt when their rows change.

    The signature (row count, highest id) is read on every search; it is cheap, and a new or deleted
    row makes the next search rebuild from the table, so the index never drifts from the database.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[tuple, tuple[tuple, "VectorIndex"]] = {}

    def _signature(self, conn: sqlite3.Connection, source: str, user_id: int, model: str) -> tuple:
        if source == "messages":
            row = conn.execute("SELECT count(*), coalesce(max(message_id), 0) FROM message_embeddings"
                               " WHERE user_id = ? AND model = ?", (user_id, model)).fetchone()
        else:
            row = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM archive_chunks"
                               " WHERE user_id = ? AND embedding_model = ?", (user_id, model)).fetchone()
        return tuple(row)

    def _load(self, conn: sqlite3.Connection, source: str, user_id: int, model: str, dim: int) -> "VectorIndex":
        from .vectors import VectorIndex, from_blob

        if source == "messages":
            rows = conn.execute("SELECT message_id, embedding FROM message_embeddings WHERE user_id = ? AND model = ?"
                                " ORDER BY message_id", (user_id, model))
        else:
            rows = conn.execute("SELECT id, embedding FROM archive_chunks WHERE user_id = ? AND embedding_model = ?"
                                " ORDER BY id", (user_id, model))
        return VectorIndex.from_rows(dim, [(row_id, from_blob(blob, dim)) for row_id, blob in rows])

    def get(self, conn: sqlite3.Connection, db_key: str, source: str, user_id: int, model: str,
            dim: int) -> "VectorIndex":
        key = (db_key, source, user_id, model)
        signature = self._signature(conn, source, user_id, model)
        with self._lock:
            cached = self._indexes.get(key)
            if cached and cached[0] == signature:
                return cached[1]
        index = self._load(conn, source, user_id, model, dim)
        with self._lock:
            self._indexes[key] = (signature, index)
        return index

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()


INDEXES = IndexCache()


def vector_search(conn: sqlite3.Connection, db_key: str, source: str, user_id: int, embedder: Any,
                  query_vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Top ``k`` (id, cosine) per query vector over one user's vectors of one source."""
    model = model_id(embedder)
    index = INDEXES.get(conn, db_key, source, user_id, model, int(query_vectors.shape[1]))
    if len(index) == 0:
        return [[] for _ in range(len(query_vectors))]
    return [[(int(i), float(s)) for i, s in index.search(vector, k)] for vector in query_vectors]


def embed_queries(embedder: Any, texts: Iterable[str]) -> np.ndarray:
    return embed_texts(embedder, list(texts))
