"""The owner's deliberate search (U1, V2): every eligible conversation and the archive, logged
like every search (A3)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypedDict

from hearth.errors import InvalidInput
from hearth.retrieval.hybrid import Filters, search
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.records.context import Context


class _Dates(TypedDict):
    date_from: str | None
    date_to: str | None


def date_args(args: dict[str, Any]) -> _Dates:
    out: _Dates = {"date_from": None, "date_to": None}
    for key in ("date_from", "date_to"):
        value = args.get(key)
        if value in (None, ""):
            out[key] = None
        elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
            out[key] = value.strip()
        else:
            raise InvalidInput(f"{key} must be a date written YYYY-MM-DD")
    return out


def owner_search(ctx: Context, query: str, *, include_shielded: bool = False, archive: bool = True,
                 messages: bool = True, date_from: str | None = None, date_to: str | None = None,
                 collections: tuple[str, ...] = (), limit: int = 10, embed: bool = True, origin: str = "owner"):
    """The owner's deliberate search (U1, V2): every conversation of every persona that is not
    hidden or trashed, shielded ones only with ``include_shielded`` (off by default), and the archive.
    Logged like every search (A3)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("search needs a non-empty query")
    check_text(query, "the search query")
    for collection in collections:
        check_text(collection, "a collection")
    if not 1 <= int(limit) <= 100:
        raise InvalidInput("limit must be between 1 and 100")
    dates = date_args({"date_from": date_from, "date_to": date_to})
    sources = tuple(s for s, on in (("messages", messages), ("chunks", archive)) if on)
    if not sources:
        raise InvalidInput("choose conversations, the archive, or both")
    filters = Filters(sources=sources, eligible_only=True, include_shielded=include_shielded,
                      collections=tuple(collections), **dates)
    embedder = None
    if embed:
        from hearth.retrieval.semantic import shared_embedder

        embedder = shared_embedder(ctx)
    with ctx.store.read() as conn:
        return search(conn, ctx.user_id, query.strip()[:1_000], filters=filters, limit=int(limit),
                      embedder=embedder, db_key=ctx.store.key, origin=origin, store=ctx.store)
