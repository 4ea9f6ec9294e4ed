"""Stored vectors (S7, S8, S18): ``message_embeddings``, the ``embedding`` of ``archive_chunks`` and
``facts``, and the ``vector_counts`` the triggers keep (migration 6).

numpy is imported inside the functions that decode vectors: a search with no vectors imports none (S20).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from hearth.store.engine import Connection
from hearth.store.sqlite import engine_of

from . import vector_search

if TYPE_CHECKING:
    import numpy as np

# Rows read at a time by reads that stream a table's vectors.
CHUNK = 8_192


def table_of(source: str) -> tuple[str, str, str]:
    """(table, id column, model column) of a source's vectors."""
    if source == "messages":
        return "message_embeddings", "message_id", "model"
    if source == "facts":
        return "facts", "id", "embedding_model"
    return "archive_chunks", "id", "embedding_model"


# -- what has no vector yet (ingestion) ------------------------------------------------------------
@dataclass(frozen=True)
class PendingMessage:
    """A chat turn without a vector, with what its text is made of."""

    id: int
    user_id: int
    role: str
    content: str
    user_label: str
    assistant_label: str
    previous: str | None  # the turn before it in its conversation


def pending_messages(conn: Connection, model: str, user_id: int | None, limit: int,
                     after: int = 0, ids: list[int] | None = None) -> list[PendingMessage]:
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
    return [PendingMessage(r["id"], r["user_id"], r["role"], r["content"], r["user_label"], r["assistant_label"],
                           r["previous"]) for r in rows]


def pending_chunks(conn: Connection, model: str, user_id: int | None, limit: int,
                   after: int = 0) -> list[tuple[int, int, str, str]]:
    """(id, user id, document title, text) of archive chunks without a vector for ``model``."""
    where = "" if user_id is None else " AND k.user_id = ?"
    args: list[Any] = [after, model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT k.id, k.user_id, k.text, d.title FROM archive_chunks k JOIN archive_documents d ON d.id = k.document_id"
        " WHERE k.id > ? AND (k.embedding IS NULL OR k.embedding_model IS DISTINCT FROM ?)"
        f"{where} ORDER BY k.id LIMIT ?", args,
    ).fetchall()
    return [(r["id"], r["user_id"], r["title"], r["text"]) for r in rows]


def pending_facts(conn: Connection, model: str, user_id: int | None, limit: int,
                  after: int = 0) -> list[tuple[int, int, str]]:
    """(id, user id, text) of facts (E2) without a vector for ``model``."""
    where = "" if user_id is None else " AND user_id = ?"
    args: list[Any] = [after, model] + ([] if user_id is None else [user_id]) + [limit]
    rows = conn.execute(
        "SELECT id, user_id, text FROM facts WHERE id > ? AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ?)"
        f"{where} ORDER BY id LIMIT ?", args).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def pending_counts(conn: Connection, model: str, user_id: int | None, after: dict[str, int]) -> dict[str, int]:
    """Rows without a vector for ``model`` past the ``after`` cursors, per source."""
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


# -- writing vectors ------------------------------------------------------------------------------
def write(conn: Connection, kind: str, row_id: int, owner: int, model: str, blob: bytes,
          vector: np.ndarray) -> None:
    """Store one row's vector (``blob``: its float32 bytes). On PostgreSQL the row also gets its
    pgvector form, which the HNSW index reads (S9)."""
    if engine_of(conn).vector_index == "pgvector":
        if kind == "messages":
            conn.execute(
                "INSERT INTO message_embeddings (message_id, user_id, model, embedding, vec) VALUES (?, ?, ?, ?, ?::vector)"
                " ON CONFLICT (message_id) DO UPDATE SET user_id = excluded.user_id, model = excluded.model,"
                " embedding = excluded.embedding, vec = excluded.vec",
                (row_id, owner, model, blob, vector_search.literal(vector)))
        else:
            table = "archive_chunks" if kind == "chunks" else "facts"
            conn.execute(f"UPDATE {table} SET embedding = ?, embedding_model = ?, vec = ?::vector WHERE id = ?",
                         (blob, model, vector_search.literal(vector), row_id))
    elif kind == "messages":
        # An upsert, not REPLACE: REPLACE deletes without firing the delete trigger that keeps
        # vector_counts honest.
        conn.execute(
            "INSERT INTO message_embeddings (message_id, user_id, model, embedding)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (message_id) DO UPDATE SET"
            " user_id = excluded.user_id, model = excluded.model, embedding = excluded.embedding",
            (row_id, owner, model, blob))
    else:
        table = "archive_chunks" if kind == "chunks" else "facts"
        conn.execute(f"UPDATE {table} SET embedding = ?, embedding_model = ? WHERE id = ?", (blob, model, row_id))


def prepare(conn: Connection, kind: str, dim: int) -> None:
    """Before vectors of ``dim`` numbers are written to ``kind``: on PostgreSQL, their HNSW index."""
    if engine_of(conn).vector_index == "pgvector":
        vector_search.ensure_index(conn, kind, dim)


# -- the counts the triggers keep -----------------------------------------------------------------
def embedded_through(conn: Connection, model: str, user_id: int) -> dict[str, int]:
    """Per source, the highest id embedded for this user and model."""
    out = {"messages": 0, "chunks": 0, "facts": 0}
    for source, max_id in conn.execute("SELECT source, max_id FROM vector_counts WHERE user_id = ? AND model = ?",
                                       (user_id, model)).fetchall():
        out[source] = int(max_id)
    return out


def signature(conn: Connection, source: str, user_id: int, model: str) -> tuple[int, int, int]:
    """(count, highest id, revision) from the trigger-kept counter: one primary-key lookup."""
    row = conn.execute("SELECT count, max_id, rev FROM vector_counts WHERE user_id = ? AND source = ?"
                       " AND model = ?", (user_id, source, model)).fetchone()
    return (row[0], row[1], row[2]) if row else (0, 0, 0)


def any_of(conn: Connection, user_id: int, model: str, sources: list[str]) -> bool:
    """Whether the user has a vector of ``model`` in any of ``sources``."""
    return conn.execute(
        f"SELECT 1 FROM vector_counts WHERE user_id = ? AND model = ? AND source IN ({', '.join('?' * len(sources))})"
        " AND count > 0 LIMIT 1", (user_id, model, *sources)).fetchone() is not None


# -- reading a source's vectors (the in-process index) ----------------------------------------------
def count_up_to(conn: Connection, source: str, user_id: int, model: str, up_to: int) -> tuple[int, int]:
    """(count, highest id) of the rows at or below ``up_to``."""
    table, key, model_column = table_of(source)
    row = conn.execute(
        f"SELECT count(*), coalesce(max({key}), 0) FROM {table} WHERE user_id = ? AND {model_column} = ?"
        f" AND {key} <= ?", (user_id, model, up_to)).fetchone()
    return (row[0], row[1])


def rows(conn: Connection, source: str, user_id: int, model: str, after: int = 0,
         through: int | None = None) -> Iterator[list[tuple[int, bytes]]]:
    """(id, embedding BLOB) rows after ``after`` (and at most ``through``) in id order, streamed
    ``CHUNK`` at a time: a full rebuild never holds them all. The statement runs at the call."""
    table, key, model_column = table_of(source)
    bound, args = ("", (user_id, model, after)) if through is None else (f" AND {key} <= ?", (user_id, model, after, through))
    cur = conn.execute(f"SELECT {key}, embedding FROM {table} WHERE user_id = ? AND {model_column} = ?"
                       f" AND {key} > ?{bound} AND embedding IS NOT NULL ORDER BY {key}", args)

    def batches() -> Iterator[list[tuple[int, bytes]]]:
        while part := cur.fetchmany(CHUNK):
            yield [(row[0], row[1]) for row in part]

    return batches()


def ids_between(conn: Connection, source: str, user_id: int, model: str, low: int, high: int) -> np.ndarray:
    """Every id with a vector from ``low`` to ``high``, sorted."""
    import numpy as np

    table, key, model_column = table_of(source)
    cur = conn.execute(f"SELECT {key} FROM {table} WHERE user_id = ? AND {model_column} = ?"
                       f" AND {key} BETWEEN ? AND ? ORDER BY {key}", (user_id, model, low, high))
    return np.fromiter((row[0] for row in cur), dtype=np.int64)


def count_and_sum(conn: Connection, source: str, user_id: int, model: str, low: int, high: int) -> tuple[int, int]:
    """(count, sum of ids) of the rows with a vector from ``low`` to ``high``."""
    table, key, model_column = table_of(source)
    row = conn.execute(f"SELECT count(*), coalesce(sum({key}), 0) FROM {table} WHERE user_id = ? AND {model_column} = ?"
                       f" AND {key} BETWEEN ? AND ?", (user_id, model, low, high)).fetchone()
    return (row[0], row[1])


def rows_of(conn: Connection, source: str, user_id: int, model: str, ids: list[int]) -> list[tuple[int, bytes]]:
    """(id, embedding BLOB) of those of ``ids`` that have a vector, 500 ids a statement."""
    table, key, model_column = table_of(source)
    out: list[tuple[int, bytes]] = []
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        out += [(row[0], row[1]) for row in conn.execute(
            f"SELECT {key}, embedding FROM {table} WHERE user_id = ? AND {model_column} = ?"
            f" AND embedding IS NOT NULL AND {key} IN ({', '.join('?' * len(part))})",
            (user_id, model, *part))]
    return out


def matrices(conn: Connection, source: str, user_id: int, model: str,
             dim: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, vectors as one float32 matrix) of every stored vector of ``dim`` numbers of one user's
    source, ``CHUNK`` rows at a time (float32 bytes: a vector of another size is not comparable)."""
    import numpy as np

    table, key, model_column = table_of(source)
    cur = conn.execute(f"SELECT {key}, embedding FROM {table} WHERE user_id = ? AND {model_column} = ?"
                       f" AND length(embedding) = ?", (user_id, model, dim * 4))
    while part := cur.fetchmany(CHUNK):
        # One buffer for the chunk: decoding each BLOB on its own cost more than the scoring.
        matrix = np.frombuffer(b"".join(row[1] for row in part), dtype="<f4").reshape(len(part), dim)
        yield np.fromiter((row[0] for row in part), dtype=np.int64, count=len(part)), matrix


def begin_read(conn: Connection) -> None:
    """Open a read transaction on a connection of its own: later reads see one moment."""
    conn.execute("BEGIN")


# -- a chosen set of turns --------------------------------------------------------------------------
def selected_ids(conn: Connection, ids_sql: str, args: tuple) -> np.ndarray:
    """The ids a statement of ``m.id`` (``ids_sql``) selects."""
    import numpy as np

    return np.fromiter((row[0] for row in conn.execute(ids_sql, args)), dtype=np.int64)


def selected_messages(conn: Connection, ids_sql: str, args: tuple, model: str,
                      dim: int) -> tuple[list[int], np.ndarray]:
    """(ids, float32 matrix) of the stored vectors of ``dim`` numbers of the turns ``ids_sql`` selects."""
    import numpy as np

    # float32 bytes: a vector of another size is not comparable.
    found = conn.execute(f"SELECT e.message_id, e.embedding FROM ({ids_sql}) AS d"
                         " JOIN message_embeddings e ON e.message_id = d.id"
                         " WHERE e.model = ? AND length(e.embedding) = ?",
                         (*args, model, dim * 4)).fetchall()
    # One buffer for the whole range: decoding each BLOB on its own cost more than the scoring.
    matrix = np.frombuffer(b"".join(row[1] for row in found), dtype="<f4").reshape(len(found), dim)
    return [row[0] for row in found], matrix


def message_blobs(conn: Connection, user_id: int, model: str, message_ids: tuple[int, ...]) -> list[bytes]:
    """The stored vectors (float32 bytes) of ``message_ids`` for ``model``."""
    return [r[0] for r in conn.execute(
        f"SELECT embedding FROM message_embeddings WHERE message_id IN ({','.join('?' * len(message_ids))})"
        " AND model = ? AND user_id = ?", (*message_ids, model, user_id)).fetchall()]
