"""Vector search on PostgreSQL (S7, S9, S10): pgvector with an HNSW index as the index of record.

Each embedding is stored twice in its row, as on SQLite: the float32 bytes (``embedding``, what
export and migrate-store copy) and a pgvector ``vec`` written in the same statement. Searches ask
the database: an HNSW index per embedding size (``vec::vector(n)``, cosine), created when vectors
of that size first arrive, answers the nearest rows of one user and model. No process holds an
index of its own, so every server sees every other's embeddings at once. pgvector's iterative
index scan keeps filling the answer when the per-user filter drops rows the graph returned.
"""

from __future__ import annotations

# The statements live in the store; searches call them through this module's names.
from hearth.store.queries.vector_search import (
    EF_SEARCH,
    TABLES,
    dated_messages,
    ensure_index,
    exact_messages,
    literal,
    search,
)

__all__ = ["EF_SEARCH", "TABLES", "dated_messages", "ensure_index", "exact_messages", "literal", "search"]
