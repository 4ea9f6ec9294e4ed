"""pgvector's searches (S7, S9, S10, S17): the HNSW index per embedding size and the nearest rows
of one user and model, asked of the database (``retrieval/pgvectors.py`` describes the design)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hearth.store.engine import Connection

if TYPE_CHECKING:
    import numpy as np

# source -> (table, id column, model column)
TABLES = {"messages": ("message_embeddings", "message_id", "model"),
          "chunks": ("archive_chunks", "id", "embedding_model"),
          "facts": ("facts", "id", "embedding_model")}
EF_SEARCH = 100


def literal(vector: np.ndarray) -> str:
    """pgvector's text form of a vector."""
    return "[" + ",".join(f"{float(x):.8g}" for x in vector) + "]"


def ensure_index(conn: Connection, source: str, dim: int) -> None:
    """The HNSW index for vectors of ``dim`` numbers in ``source`` (idempotent)."""
    table, _, _ = TABLES[source]
    dim = int(dim)
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_hnsw_{dim} ON {table}"
                 f" USING hnsw ((vec::vector({dim})) vector_cosine_ops) WHERE vector_dims(vec) = {dim}")


def search(conn: Connection, source: str, user_id: int, model: str, query_vectors: np.ndarray,
           k: int) -> list[list[tuple[int, float]]]:
    """Top ``k`` (id, cosine) per query vector over one user's vectors of one model."""
    table, key, model_column = TABLES[source]
    dim = int(query_vectors.shape[1])
    out: list[list[tuple[int, float]]] = []
    for vector in query_vectors:
        text = literal(vector)
        rows: list[Any] = conn.execute(
            f"SELECT {key}, 1 - (vec::vector({dim}) <=> ?::vector({dim})) AS score FROM {table}"
            f" WHERE user_id = ? AND {model_column} = ? AND vector_dims(vec) = {dim}"
            f" ORDER BY vec::vector({dim}) <=> ?::vector({dim}) LIMIT ?",
            (text, user_id, model, text, int(k))).fetchall()
        hits = [(int(r[0]), float(r[1])) for r in rows]
        hits.sort(key=lambda h: (-h[1], h[0]))  # the relaxed iterative scan may return near-ties out of order
        out.append(hits)
    return out


def exact_messages(conn: Connection, ids_sql: str, args: tuple, model: str, vector: np.ndarray,
                   k: int) -> list[tuple[int, float]]:
    """Top ``k`` (id, cosine) among the messages ``ids_sql`` selects, every one compared in the
    database: only the best ``k`` cross the wire, not every vector."""
    dim = int(vector.shape[0])
    rows: list[Any] = conn.execute(
        f"SELECT e.message_id, 1 - (e.vec::vector({dim}) <=> ?::vector({dim})) AS score FROM ({ids_sql}) AS d"
        f" JOIN message_embeddings e ON e.message_id = d.id WHERE e.model = ? AND vector_dims(e.vec) = {dim}"
        " ORDER BY score DESC, e.message_id LIMIT ?",
        (literal(vector), *args, model, int(k))).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def dated_messages(conn: Connection, user_id: int, where: str, args: tuple, model: str, vector: np.ndarray,
                   k: int) -> list[tuple[int, float]]:
    """Top ``k`` (id, cosine) among ``user_id``'s turns that ``where`` keeps (a date range and the
    search's filters, over ``messages m`` and ``conversations c``), asked as the HNSW index's own
    filtered search: the index yields rows nearest first and pgvector's iterative scan goes on
    until ``k`` of them pass the filter (``hnsw.max_scan_tuples`` at most), so the work follows
    the answer and the range's share, not the number of turns it holds (S17)."""
    dim = int(vector.shape[0])
    text = literal(vector)
    rows: list[Any] = conn.execute(
        f"SELECT e.message_id, 1 - (e.vec::vector({dim}) <=> ?::vector({dim})) AS score FROM message_embeddings e"
        " JOIN messages m ON m.id = e.message_id JOIN conversations c ON c.id = m.conversation_id"
        f" WHERE e.user_id = ? AND e.model = ? AND vector_dims(e.vec) = {dim} AND {where}"
        f" ORDER BY e.vec::vector({dim}) <=> ?::vector({dim}) LIMIT ?",
        (text, user_id, model, *args, text, int(k))).fetchall()
    hits = [(int(r[0]), float(r[1])) for r in rows]
    hits.sort(key=lambda h: (-h[1], h[0]))  # the relaxed iterative scan may return near-ties out of order
    return hits
