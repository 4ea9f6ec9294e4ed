"""Facts written at ingestion, searched beside the turns (E2, A2).

A fact is one short dated statement ("Nate won his first video game tournament.") that cites the
chat turns it came from (``fact_sources``). The idle checkpoint writes them from the helper's
``extract_facts``: rules over the person's own sentences offline, the configured model otherwise.
A search asks the facts' keyword index and their vectors with the same words and query vector as
the turns; each ranked list of facts joins the fusion as the list of the turns those facts cite,
best fact first. So a fact hit returns its source turns, inside the caller's visibility filters
(the turns are loaded and filtered like any other candidate); the fact's own words are never
shown. A fact goes with any turn it cites (B4): a trigger removes it when a source row goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from hearth.store.queries import facts as stored
from hearth.store.queries.facts import cited_turns

from ..errors import InvalidInput
from ..store import Connection, utcnow
from .pgsearch import bm25_weights
from .query import fts_match

__all__ = ["FACT_MAX_CHARS", "FACT_SOURCES", "MAX_CITED", "Fact", "add", "as_turns", "cited_turns", "keyword_hits",
           "listed", "of_origins"]

FACT_MAX_CHARS = 300
FACT_SOURCES = ("offline", "model", "import")
MAX_CITED = 20  # turns one fact may cite


@dataclass(frozen=True)
class Fact:
    id: int
    text: str
    fact_date: str | None
    source: str
    message_ids: tuple[int, ...]


def add(conn: Connection, user_id: int, text: str, message_ids: Iterable[int], *, source: str,
        span_id: int | None = None, created_at: str | None = None) -> int | None:
    """Write one fact citing ``message_ids`` (this user's chat turns) in the caller's transaction;
    its date is the newest cited turn's day. Returns its id, or None when none of the cited turns
    exists any more (forgotten since the fact was written); bad input raises and writes nothing."""
    if source not in FACT_SOURCES:
        raise InvalidInput(f"a fact's source must be one of {', '.join(FACT_SOURCES)}")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a fact needs some text")
    text = " ".join(text.split())
    if len(text) > FACT_MAX_CHARS:
        raise InvalidInput(f"a fact is at most {FACT_MAX_CHARS} characters")
    ids = sorted({int(i) for i in message_ids if isinstance(i, int) and not isinstance(i, bool)})
    if not ids:
        raise InvalidInput("a fact must cite at least one turn")
    if len(ids) > MAX_CITED:
        raise InvalidInput(f"a fact cites at most {MAX_CITED} turns")
    rows = stored.citable_turns(conn, user_id, ids)
    if not rows:
        return None
    newest = max(rows, key=lambda r: (r[2] or "", r[0]))
    return stored.insert(conn, user_id, newest[1], text, (newest[2] or "")[:10] or None, source, span_id,
                         created_at or utcnow(), [r[0] for r in rows])


def listed(conn: Connection, user_id: int, *, message_ids: Iterable[int] = ()) -> list[Fact]:
    """This user's facts, or only those citing any of ``message_ids``, oldest first."""
    rows = stored.listed(conn, user_id, list(message_ids))
    cited = cited_turns(conn, [r[0] for r in rows])
    return [Fact(r[0], r[1], r[2], r[3], tuple(cited.get(r[0], ()))) for r in rows]


def keyword_hits(conn: Connection, user_id: int, words: list[str], limit: int,
                 origins: tuple[str, ...] = ()) -> list[tuple[int, float]]:
    """(fact id, BM25 score, higher is better) for this user's facts matching any of ``words``."""
    if not words:
        return []
    return stored.keyword_hits(conn, user_id, words, fts_match(words), limit, origins, bm25=bm25_weights)


def of_origins(conn: Connection, hits: list[tuple[int, float]],
               origins: tuple[str, ...]) -> list[tuple[int, float]]:
    """The hits whose fact was written by one of ``origins`` (all of them when empty)."""
    if not origins or not hits:
        return hits
    ids = [h[0] for h in hits]
    kept = stored.of_origins(conn, ids, origins)
    return [h for h in hits if h[0] in kept]


def as_turns(conn: Connection, hits: list[tuple[int, float]], limit: int) -> list[tuple[tuple[str, int], Any]]:
    """A ranked list of facts as the ranked list of the turns they cite: each turn at the rank of
    the best fact citing it, with that fact's score; at most ``limit`` turns."""
    cited = cited_turns(conn, [h[0] for h in hits])
    out: list[tuple[tuple[str, int], Any]] = []
    seen: set[int] = set()
    for fact_id, score in hits:
        for message_id in cited.get(fact_id, ()):
            if message_id not in seen:
                seen.add(message_id)
                out.append((("message", message_id), score))
        if len(out) >= limit:
            break
    return out[:limit]
