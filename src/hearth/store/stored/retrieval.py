"""Retrieval: message vectors, facts (E2), the deep archive (A1), the search log (B5), and the
keyword indexes (FTS5 tables on SQLite, postings and a vocabulary on PostgreSQL)."""

from __future__ import annotations

import json

from ..engine import Connection
from ..sqlite import engine_of
from .base import (
    DERIVED,
    DOCUMENTS,
    FIND,
    Cascade,
    Compaction,
    Doomed,
    Entry,
    Exempt,
    Kept,
    Plain,
    Step,
    Stored,
    Trigger,
    ids,
    marks,
)

AREA = "retrieval"
_ARCHIVE = Kept("an archive document is imported apart from any thread: forget the document itself")
_MODEL = Plain("an embedding model's name", "embedding_model")
# pgvector's copy of the ``embedding`` bytes beside it, for its HNSW index: in the same row.
_VEC = "postgresql:vec"


def _facts(conn: Connection, d: Doomed) -> int:
    """Facts citing a forgotten turn go with it (the trigger on ``fact_sources``): found first, for
    the receipt and to take their vectors out of a loaded index."""
    found: set[int] = set()
    turns = sorted(d.gone)
    for start in range(0, len(turns), 500):
        part = turns[start:start + 500]
        found.update(r[0] for r in conn.execute(
            f"SELECT s.fact_id FROM fact_sources s JOIN facts f ON f.id = s.fact_id"
            f" WHERE f.user_id = ? AND s.message_id IN ({marks(part)})", (d.user_id, *part)))
    d.facts = sorted(found)
    return len(d.facts)


def _chunks(conn: Connection, d: Doomed) -> int:
    d.chunks = ids(conn.execute(f"SELECT id FROM archive_chunks WHERE document_id IN ({marks(d.documents)})",
                                d.documents))
    return len(d.chunks)


def _documents(conn: Connection, d: Doomed) -> int:
    """The documents: chunks, turns, their index rows and vectors go by cascade and trigger."""
    if d.documents:
        conn.execute(f"DELETE FROM archive_documents WHERE user_id = ? AND id IN ({marks(d.documents)})",
                     (d.user_id, *d.documents))
    return 0


def _searches(conn: Connection, d: Doomed) -> int:
    """Search-log entries made from a forgotten thread, citing a forgotten message, chunk or
    document, or whose query quotes a forgotten single message. Candidates are found in SQL (the
    log's results are JSON written by ``searchlog.record``) and confirmed by reading them."""
    u, whole, documents = d.user_id, d.conversations, d.documents
    doomed = set(d.search_log)
    if whole:
        doomed.update(ids(conn.execute(
            f"SELECT id FROM search_log WHERE user_id = ? AND conversation_id IN ({marks(whole)})", (u, *whole))))
    single = sorted(d.gone - set(ids(conn.execute(
        f"SELECT id FROM messages WHERE conversation_id IN ({marks(whole)})", whole)))) if whole else sorted(d.gone)
    patterns = ([f'%"source_id": {c},%' for c in whole] + [f'%"source_id": {x},%' for x in documents]
                + [f'%"id": {m},%' for m in single])
    for i in range(0, len(patterns), 200):
        some = patterns[i:i + 200]
        where = " OR ".join("results LIKE ?" for _ in some)
        for row in conn.execute(f"SELECT id, results FROM search_log WHERE user_id = ? AND ({where})", (u, *some)):
            for result in json.loads(row[1]):
                kind, rid, source = result.get("kind"), result.get("id"), result.get("source_id")
                if (kind == "message" and (rid in d.gone or source in whole)) or (
                        kind == "chunk" and source in documents):
                    doomed.add(row[0])
                    break
    engine = engine_of(conn)
    for text in d.texts[:200]:
        folded = text.casefold()
        # A short text matches a query only when equal (below); a long one also by containment.
        contains = f"{engine.contains('lower(query)', '?')} OR " if len(folded) >= 12 else ""
        doomed.update(ids(conn.execute(
            f"SELECT id FROM search_log WHERE user_id = ? AND query != '' AND ({contains}"
            f"(length(query) >= 12 AND {engine.contains('?', 'lower(query)')}))",
            (u, *([folded] if contains else []), folded))))
        doomed.update(ids(conn.execute("SELECT id FROM search_log WHERE user_id = ? AND lower(query) = ?",
                                       (u, folded))))
    found = sorted(doomed)
    for i in range(0, len(found), 500):
        part = found[i:i + 500]
        conn.execute(f"DELETE FROM search_log WHERE user_id = ? AND id IN ({marks(part)})", (u, *part))
    return len(found)


_SEARCHES = Step(DERIVED, "delete", _searches, count="search_log_entries")
_FACTS = Step(FIND, "find", _facts, count="facts")
_CHUNKS = Step(FIND, "find", _chunks, count="chunks")
_DOCUMENTS = Step(DOCUMENTS, "delete", _documents)


def _index(table: str, column: str, source: str, engine: str) -> Stored:
    """A keyword index's rows, kept by triggers on the rows they index."""
    return Stored(table, AREA, (column,), user=None, index_of=source, engine=engine, on_user=Trigger(source),
                  on_conversation=Trigger(source), on_message=Trigger(source))


STORED: list[Entry] = [
    # Searches that quote or cite what is forgotten go with it; the rest stay (B5 clears them all).
    Stored("search_log", AREA, ("query", "variants", "filters", "results"), conversation="conversation_id",
           plain=(Plain("where the search came from and how reliable its answer was", "origin", "reliability"),),
           on_conversation=_SEARCHES, on_message=_SEARCHES, also=(_SEARCHES,)),
    Stored("message_embeddings", AREA, ("embedding", _VEC), message="message_id",
           plain=(Plain("an embedding model's name", "model"),),
           on_conversation=Cascade("messages"), on_message=Cascade("messages")),
    Stored("facts", AREA, ("text", "embedding", _VEC), conversation="conversation_id",
           plain=(Plain("a date and who wrote it", "fact_date", "source"), _MODEL),
           on_conversation=Cascade("conversations"), on_message=(_FACTS, Trigger("fact_sources"))),
    _index("facts_fts", "text", "facts", "sqlite"),
    _index("facts_postings", "lexeme", "facts", "postgresql"),
    Stored("archive_documents", AREA, ("collection", "title", "source", "metadata"),
           plain=(Plain("a date and a content hash", "document_date", "content_hash"),),
           on_conversation=_ARCHIVE, on_message=_ARCHIVE, also=(_DOCUMENTS,)),
    Stored("archive_chunks", AREA, ("text", "speakers", "embedding", _VEC),
           plain=(Plain("a date and a content hash", "chunk_date", "content_hash"), _MODEL),
           on_conversation=_ARCHIVE, on_message=_ARCHIVE, also=(_CHUNKS, _DOCUMENTS)),
    Stored("archive_turns", AREA, ("label", "text"), plain=(Plain("a speaker's role", "role"),),
           on_conversation=_ARCHIVE, on_message=_ARCHIVE, also=(_DOCUMENTS,)),
    _index("archive_chunks_fts", "text", "archive_chunks", "sqlite"),
    _index("archive_chunks_postings", "lexeme", "archive_chunks", "postgresql"),
    # The words of every index (PostgreSQL's stand-in for FTS5's vocabulary): a forgotten row's
    # words stay until the compaction job prunes those no indexed row still holds.
    Stored("keyword_lexemes", AREA, ("lexeme",), user=None, index_of="messages", engine="postgresql",
           plain=(Plain("an index's name", "name"),), on_user=Compaction("messages"),
           on_conversation=Compaction("messages"), on_message=Compaction("messages")),
    Exempt("keyword_totals", AREA, (Plain("an index's name", "name"),), engine="postgresql"),
    Exempt("vector_counts", AREA, (Plain("a vector source's and a model's name", "source", "model"),)),
]
