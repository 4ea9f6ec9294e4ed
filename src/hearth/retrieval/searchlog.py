"""The search log (A3, G5): every search, automatic or deliberate, leaves one inspectable row.

A row holds the query, its variants, the filters, the results with their per-signal scores, the
counts and a reliability judgement. The query text is the owner's own data: it is stored in the
owner's database and shown to the owner, and never written to process logs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from hearth.store import Connection
from hearth.store.queries import search_log as queries
from hearth.store.queries.search_log import LogEntry

from ..errors import NotFound
from ..store import utcnow

ORIGINS = frozenset({
    "keyword_recall", "thread_recall", "archive_recall",
    "tool:search_past_conversations", "tool:search_archive", "owner", "benchmark",
    "mcp:search_conversations", "mcp:search_archive",
})
PREVIEW_CHARS = 160


def reliability(scores: list[float], agreement: float | None = None) -> str:
    """A plain judgement of how much to trust a result list.

    ``scores`` are fused scores, best first; ``agreement`` is the share of the top results that
    more than one signal (keyword and vector) found. A clear gap between the best result and the
    rest, or signals that agree, reads as reliable; a flat tail of weak matches does not.
    """
    if not scores:
        return "none"
    top = scores[0]
    rest = scores[1:6]
    gap = (top - sum(rest) / len(rest)) / top if rest and top > 0 else 1.0
    agree = agreement if agreement is not None else 0.0
    if agree >= 0.5 or (gap >= 0.35 and agree > 0):
        return "high"
    if agree > 0 or gap >= 0.2:
        return "medium"
    return "low"


def result_record(result: Any) -> dict[str, Any]:
    """What the log keeps of one result: its reference, a short preview and every signal's score."""
    data = result if isinstance(result, dict) else result.log_record()
    out = dict(data)
    if "text" in out:
        out["preview"] = out.pop("text")[:PREVIEW_CHARS]
    return out


def record(
    conn: Connection,
    *,
    user_id: int,
    origin: str,
    query: str,
    results: Iterable[Any] = (),
    variants: Iterable[str] = (),
    filters: dict[str, Any] | None = None,
    candidate_count: int | None = None,
    judgement: str | None = None,
    conversation_id: int | None = None,
    duration_ms: int = 0,
) -> int:
    """Write one search-log row; the caller's transaction (if any) holds it."""
    if origin not in ORIGINS:
        raise ValueError(f"unknown search origin {origin!r}")
    records = [result_record(r) for r in results]
    if judgement is None:
        judgement = reliability([float(r.get("scores", {}).get("fused", r.get("score", 0.0))) for r in records])
    prune(conn, user_id)
    return queries.insert(
        conn, user_id, conversation_id, origin, query, json.dumps(list(variants), ensure_ascii=False),
        json.dumps(filters or {}, ensure_ascii=False, default=str), json.dumps(records, ensure_ascii=False, default=str),
        len(records) if candidate_count is None else candidate_count, len(records), judgement, int(duration_ms),
        utcnow())


def prune(conn: Connection, user_id: int) -> int:
    """Apply the owner's retention setting (B5): drop entries older than it; 0 or unset keeps all."""
    value = queries.retention_days(conn, user_id)
    days = json.loads(value) if value is not None else 0
    if not days:
        return 0
    cutoff = (datetime.now(timezone.utc) - timedelta(days=int(days))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return queries.delete_older(conn, user_id, cutoff)


def clear(conn: Connection, user_id: int) -> int:
    """Remove every entry of one user's search log (B5)."""
    return queries.delete_all(conn, user_id)


def write(store: Any, **values: Any) -> int:
    """Record in a short write transaction of its own (for callers that only hold a read)."""
    conn = store.connection()
    if store.in_write:
        return record(conn, **values)
    if conn.in_transaction:
        # A read snapshot is open on this connection: end it so the write can take the lock.
        queries.end_snapshot(conn)
        try:
            with store.write() as wconn:
                return record(wconn, **values)
        finally:
            queries.begin_snapshot(conn)
    with store.write() as wconn:
        return record(wconn, **values)


def entries(conn: Connection, user_id: int, *, limit: int = 50, before_id: int | None = None,
            origin: str | None = None) -> list[LogEntry]:
    return queries.entries(conn, user_id, max(1, min(int(limit), 500)), before_id=before_id, origin=origin)


def entry(conn: Connection, user_id: int, entry_id: int) -> LogEntry:
    found = queries.get(conn, user_id, entry_id)
    if found is None:
        raise NotFound(f"no search log entry {entry_id}")
    return found
